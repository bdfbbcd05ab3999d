// OpenMPI anchor for `tessera bench comm` (built as tessera-mpi-comm, run by the bench with
// mpirun): MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block and MPI_Alltoall on float32
// zeros, timed exactly as src/cli/bench_comm.cpp times Tessera: one warm-up call, then
// `--trials` trials of iterations(size) back-to-back calls after a barrier; a trial's time
// per call is the slowest rank's; rank 0 prints median/min/max over the trials as JSON rows
// (impl "openmpi", "threads" = ranks). Sizes follow nccl-tests (the op's largest buffer).
#include <mpi.h>

#include "cli/bench_comm_cases.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using tessera::bench_comm::big_numel;
using tessera::bench_comm::case_name;
using tessera::bench_comm::iterations;
using tessera::bench_comm::split_csv;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const auto [ops, sizes, trials] = tessera::bench_comm::parse_anchor_args(argc, argv);
  for (const std::string& op : split_csv(ops)) {
    for (const std::string& size : split_csv(sizes)) {
      const long long bytes = std::stoll(size);
      const long long big = big_numel(bytes, n);
      const int part_n = static_cast<int>(big / n);
      std::vector<float> full(big, 0.0f), part(part_n, 0.0f), out(big, 0.0f);
      std::function<void()> run;
      if (op == "all_reduce") {
        run = [&] {
          MPI_Allreduce(MPI_IN_PLACE, full.data(), static_cast<int>(big), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
        };
      } else if (op == "all_gather") {
        run = [&] {
          MPI_Allgather(part.data(), part_n, MPI_FLOAT, full.data(), part_n, MPI_FLOAT,
                        MPI_COMM_WORLD);
        };
      } else if (op == "reduce_scatter") {
        run = [&] {
          MPI_Reduce_scatter_block(full.data(), part.data(), part_n, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
        };
      } else if (op == "all_to_all") {
        run = [&] {
          MPI_Alltoall(full.data(), part_n, MPI_FLOAT, out.data(), part_n, MPI_FLOAT,
                       MPI_COMM_WORLD);
        };
      } else {
        if (rank == 0) std::fprintf(stderr, "mpi_comm: unknown op '%s'\n", op.c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      const int iters = iterations(bytes);
      run();
      std::vector<double> times;
      for (int t = 0; t < trials; ++t) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int i = 0; i < iters; ++i) run();
        double dt = (MPI_Wtime() - t0) / iters, slowest = 0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times.push_back(slowest);
      }
      std::sort(times.begin(), times.end());
      if (rank == 0) {
        std::printf(
            "{\"suite\": \"comm\", \"case\": \"%s\", \"impl\": \"openmpi\", "
            "\"threads\": %d, \"median_s\": %.9g, \"min_s\": %.9g, \"max_s\": %.9g, \"reps\": "
            "%zu}\n",
            case_name(op, bytes).c_str(), n, times[times.size() / 2], times.front(), times.back(),
            times.size());
        std::fflush(stdout);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
