// OpenMPI anchor for `tessera bench window` (built as tessera-mpi-window, run by the bench with
// mpirun on 2 ranks): rank 0 does MPI_Put or MPI_Get of each size on rank 1's window, each
// followed by MPI_Win_flush, timed exactly as src/cli/bench_window.cpp times Tessera's window:
// one warm-up op, then `--trials` trials of iterations(size) back-to-back ops after a barrier;
// rank 0 prints median/min/max per op as JSON rows (impl "openmpi", "threads" = ranks). The
// window is MPI_Win_allocate'd (OpenMPI's best case: its shared-memory component), passive
// target with MPI_Win_lock_all.
#include <mpi.h>

#include "cli/bench_comm_cases.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using tessera::bench_comm::iterations;
using tessera::bench_comm::split_csv;
using tessera::bench_comm::window_case_name;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const auto [ops, sizes, trials] = tessera::bench_comm::parse_anchor_args(argc, argv);
  long long largest = 8;
  for (const std::string& size : split_csv(sizes)) largest = std::max(largest, std::stoll(size));
  void* base = nullptr;
  MPI_Win win;
  MPI_Win_allocate(static_cast<MPI_Aint>(largest), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  std::memset(base, 0, static_cast<size_t>(largest));
  std::vector<char> local(static_cast<size_t>(largest), 1);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  const int peer = n > 1 ? 1 : 0;
  for (const std::string& op : split_csv(ops)) {
    for (const std::string& size : split_csv(sizes)) {
      const int bytes = static_cast<int>(std::stoll(size));
      auto run = [&] {
        if (op == "put") {
          MPI_Put(local.data(), bytes, MPI_BYTE, peer, 0, bytes, MPI_BYTE, win);
        } else {
          MPI_Get(local.data(), bytes, MPI_BYTE, peer, 0, bytes, MPI_BYTE, win);
        }
        MPI_Win_flush(peer, win);
      };
      const int iters = iterations(bytes);
      if (rank == 0) run();
      std::vector<double> times;
      for (int t = 0; t < trials; ++t) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (rank == 0)
          for (int i = 0; i < iters; ++i) run();
        times.push_back((MPI_Wtime() - t0) / iters);
      }
      std::sort(times.begin(), times.end());
      if (rank == 0) {
        std::printf(
            "{\"suite\": \"window\", \"case\": \"%s\", \"impl\": \"openmpi\", "
            "\"threads\": %d, \"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, \"reps\": "
            "%zu}\n",
            window_case_name(op, bytes).c_str(), n, times[times.size() / 2], times.front(),
            times.back(), times.size());
        std::fflush(stdout);
      }
    }
  }
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
