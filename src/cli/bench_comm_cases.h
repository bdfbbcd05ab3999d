// What `tessera bench comm` measures, shared by the bench (src/cli/bench_comm.cpp) and its
// OpenMPI anchor (bench/mpi_comm.cpp, a program of its own that does not link Tessera), so
// both name, size and repeat every case the same way. Standard library only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::bench_comm {

inline std::string size_label(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

inline std::string case_name(const std::string& op, int64_t bytes) {
  return op + "/float32/" + size_label(bytes);
}

// float32 elements of the op's largest buffer (nccl-tests' size): the size rounded down to a
// multiple of n elements (the ops that split it need equal parts), at least n.
inline int64_t big_numel(int64_t bytes, int n) {
  return std::max<int64_t>(n, bytes / 4 / n * n);
}

// Repetitions per trial: enough that the shortest ops are timed over milliseconds.
inline int iterations(int64_t bytes) {
  return static_cast<int>(
      std::clamp<int64_t>((int64_t{32} << 20) / std::max<int64_t>(bytes, 4096), 2, 500));
}

inline std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace tessera::bench_comm
