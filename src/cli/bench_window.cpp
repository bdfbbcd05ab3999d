// `tessera bench window`: one-sided RMA between 2 ranks on this machine. Rank 0 puts into (or
// gets from) rank 1's window, every op followed by a flush, as an application that needs its
// data there (or here) before going on. 8 B is the latency case; 1-64 MiB the bandwidth ones.
// Tessera runs as a 2-process job through tessera launch (its shm window: direct copies into
// the peer's mapped memory); the anchor in the same run is OpenMPI's MPI_Put/MPI_Get with
// MPI_Win_flush on an MPI_Win_allocate'd window (bench/mpi_window.cpp, under mpirun).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_comm_cases.h"
#include "cli/bench_jobs.h"
#include "cli/bench_util.h"
#include "tessera/distributed/distributed.h"
#include "tessera/tessera.h"

namespace tessera::cli {
namespace {

namespace dist = tessera::distributed;
using Clock = std::chrono::steady_clock;
using bench_comm::iterations;
using bench_comm::split_csv;
using bench_comm::window_case_name;

constexpr int kRanks = 2;

}  // namespace

int run_bench_window_worker(const CommWorkerOptions& o) {
  dist::init_process_group(o.backend);
  const int rank = dist::get_rank();
  TS_CHECK(dist::get_world_size() == kRanks, ValueError,
           "bench-window-worker: expected {} ranks, but got {}", kRanks, dist::get_world_size());
  std::vector<int64_t> sizes;
  for (const std::string& s : split_csv(o.sizes)) sizes.push_back(std::stoll(s));
  const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  auto window = dist::new_window();
  window->tensor_register(dist::window_empty({largest}, kUInt8));
  const Tensor local = ones({largest}, TensorOptions(kUInt8));
  std::vector<BenchRow> rows;
  for (const std::string& op : split_csv(o.ops)) {
    TS_CHECK(op == "put" || op == "get", ValueError,
             "bench-window-worker: unknown op '{}' (expected put or get)", op);
    for (int64_t bytes : sizes) {
      const Tensor buf = local.narrow(0, 0, bytes);
      auto run = [&] {
        if (op == "put") {
          window->put(buf, 1, 0);
        } else {
          window->get(buf, 1, 0);
        }
        window->flush();
      };
      const int iters = iterations(bytes);
      if (rank == 0) run();  // warm-up: the pages of both buffers
      std::vector<double> trials;
      for (int t = 0; t < o.trials; ++t) {
        dist::barrier()->wait();
        const auto t0 = Clock::now();
        if (rank == 0)
          for (int i = 0; i < iters; ++i) run();
        trials.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters);
      }
      std::sort(trials.begin(), trials.end());
      BenchRow row{"window", window_case_name(op, bytes), o.impl, kRanks};
      row.stats = Stats{trials[trials.size() / 2], trials.front(), trials.back(),
                        static_cast<int>(trials.size())};
      rows.push_back(row);
    }
  }
  window->tensor_deregister();
  dist::destroy_process_group();
  if (rank == 0 && !write_json_lines(o.out_path, rows)) return 1;
  return 0;
}

int run_bench_window(const BenchOptions& options) {
  const std::vector<int64_t> sizes = bench_comm::window_sizes(options.quick);
  const int trials = options.quick ? 3 : 7;
  std::vector<std::string> size_args;
  for (int64_t b : sizes) size_args.push_back(std::to_string(b));
  const std::string ops = join_csv(bench_comm::window_ops());
  auto wanted = [&](const BenchRow& r) {
    return options.filter.empty() || r.case_name.find(options.filter) != std::string::npos;
  };
  std::vector<BenchRow> rows;
  std::vector<std::string> notes;
  for (auto& r : run_worker_job(
           "bench-window-worker", kRanks, "shm", "tessera-shm",
           {"--ops", ops, "--sizes", join_csv(size_args), "--trials", std::to_string(trials)},
           notes))
    if (wanted(r)) rows.push_back(std::move(r));
#if defined(TS_MPI_WINDOW_ANCHOR)
  {
    const std::string cmd = fmt::format(
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 '{}' --oversubscribe -np {} "
        "--mca btl self,vader '{}' --ops {} --sizes {} --trials {}",
        TS_MPIRUN, kRanks, TS_MPI_WINDOW_ANCHOR, ops, join_csv(size_args), trials);
    std::string note;
    for (auto& r : run_anchor_command(cmd, "mpirun", &note))
      if (wanted(r)) rows.push_back(std::move(r));
    if (!note.empty()) notes.push_back("openmpi: " + note);
  }
#else
  notes.push_back(
      "openmpi: skipped (this build found no MPI; scripts/install-deps.sh installs it)");
#endif
  for (BenchRow& r : rows) {
    if (!r.stats) continue;
    for (int64_t b : sizes)
      for (const auto& op : bench_comm::window_ops())
        if (r.case_name == window_case_name(op, b)) r.gbps = double(b) / r.stats->median_s / 1e9;
  }

  std::printf("\nwindow, %d ranks: rank 0 puts into / gets from rank 1, each op + flush\n", kRanks);
  std::printf("%-22s %12s %10s %12s %10s %10s\n", "case", "tessera us", "GB/s", "openmpi us",
              "GB/s", "x openmpi");
  for (const auto& op : bench_comm::window_ops()) {
    for (int64_t b : sizes) {
      const std::string name = window_case_name(op, b);
      const BenchRow* ts = find_row(rows, "tessera-shm", name, kRanks, true);
      const BenchRow* mpi = find_row(rows, "openmpi", name, kRanks, true);
      if (!ts) continue;
      std::string anchor = fmt::format("{:>12} {:>10} {:>10}", "-", "-", "-");
      if (mpi)
        anchor = fmt::format("{:12.2f} {:10.2f} {:9.2f}x", mpi->stats->median_s * 1e6, *mpi->gbps,
                             mpi->stats->median_s / ts->stats->median_s);
      std::printf("%-22s %12.2f %10.2f %s\n", name.c_str(), ts->stats->median_s * 1e6, *ts->gbps,
                  anchor.c_str());
    }
  }
  notes.push_back("x openmpi = openmpi time / tessera time (above 1: Tessera is faster)");
  return finish_bench("window", notes, options.json_path, rows);
}

}  // namespace tessera::cli
