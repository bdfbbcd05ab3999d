// What `tessera bench comm` measures, shared by the bench (src/cli/bench_comm.cpp) and its
// OpenMPI anchor (bench/mpi_comm.cpp, a program of its own that does not link Tessera), so
// both name, size and repeat every case the same way. Standard library only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
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

// `tessera bench window` and its anchor (bench/mpi_window.cpp): rank 0 puts into or gets
// from rank 1's window, each op followed by a flush; 8 B is the latency case.
inline std::vector<int64_t> window_sizes(bool quick) {
  if (quick) return {8, int64_t{1} << 20, int64_t{16} << 20};
  return {8, int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20, int64_t{64} << 20};
}
inline std::string window_case_name(const std::string& op, int64_t bytes) {
  return op + "/" + size_label(bytes);
}
inline const std::vector<std::string>& window_ops() {
  static const std::vector<std::string> ops = {"put", "get"};
  return ops;
}

inline std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The command line of an OpenMPI anchor: --ops a,b --sizes n,m --trials t.
struct AnchorArgs {
  std::string ops, sizes;
  int trials = 5;
};
inline AnchorArgs parse_anchor_args(int argc, char** argv) {
  AnchorArgs a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--ops") a.ops = argv[i + 1];
    if (flag == "--sizes") a.sizes = argv[i + 1];
    if (flag == "--trials") a.trials = std::max(1, std::atoi(argv[i + 1]));
  }
  return a;
}

}  // namespace tessera::bench_comm
