// `tessera bench comm`: collectives across ranks on this machine. Every (backend, ranks) pair
// is one job started through tessera launch (the ranks are processes, as in training): each
// rank runs `tessera bench-comm-worker`, rank 0 writes the timings as JSON lines, the bench
// reads them back. Anchors in the same run: Gloo's algorithms (through Tessera's gloo backend,
// TCP on 127.0.0.1) and PyTorch 1.13's torch.distributed with gloo (bench/torch_comm.py).
//
// Tessera's workers and OpenMPI's anchor run in rounds, one after the other (3 with --quick, 5
// without): a pair of rank processes sometimes runs every small op 10x slower for its whole
// life (about 1 in 20 on the 2-vCPU VM, with or without Tessera's changes), and a machine's
// neighbours come and go within seconds, so each row is the median of the rounds' medians.
// Gloo and PyTorch, hundreds of times slower at small sizes, run once.
//
// Sizes follow nccl-tests: a case's size is the largest buffer of the op (all_reduce: the
// tensor; all_gather: the gathered output; reduce_scatter: the input; all_to_all: each side),
// algbw = size / time and busbw = algbw * 2(n-1)/n for all_reduce, (n-1)/n for the others.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_comm_cases.h"
#include "cli/bench_jobs.h"
#include "cli/bench_util.h"
#include "tessera/distributed/distributed.h"
#include "tessera/distributed/launch.h"
#include "tessera/tessera.h"

namespace tessera::cli {
namespace {

namespace dist = tessera::distributed;
using Clock = std::chrono::steady_clock;
using bench_comm::big_numel;
using bench_comm::case_name;
using bench_comm::iterations;
using bench_comm::split_csv;

const std::vector<std::string> kOps = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};

// Rows of several rounds merged per (impl, case, ranks): the median of the rounds' medians,
// the extremes of their extremes; a row skipped in every round stays skipped.
std::vector<BenchRow> merge_rounds(std::vector<BenchRow> rows) {
  std::vector<BenchRow> merged;
  std::vector<std::vector<double>> medians;
  for (BenchRow& r : rows) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const BenchRow& m) {
      return m.impl == r.impl && m.case_name == r.case_name && m.threads == r.threads;
    });
    if (it == merged.end()) {
      medians.emplace_back();
      if (r.stats) medians.back().push_back(r.stats->median_s);
      merged.push_back(std::move(r));
      continue;
    }
    const auto k = static_cast<size_t>(it - merged.begin());
    if (!r.stats) continue;
    medians[k].push_back(r.stats->median_s);
    if (!it->stats) {
      it->stats = r.stats;
      it->skipped.clear();
      continue;
    }
    it->stats->min_s = std::min(it->stats->min_s, r.stats->min_s);
    it->stats->max_s = std::max(it->stats->max_s, r.stats->max_s);
    it->stats->reps += r.stats->reps;
  }
  for (size_t k = 0; k < merged.size(); ++k)
    if (!medians[k].empty()) merged[k].stats->median_s = stats_of(medians[k]).median_s;
  return merged;
}

double busbw_factor(const std::string& op, int n) {
  return op == "all_reduce" ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
}

}  // namespace

int run_bench_comm_worker(const CommWorkerOptions& o) {
  dist::init_process_group(o.backend);
  const int rank = dist::get_rank(), n = dist::get_world_size();
  std::vector<BenchRow> rows;
  for (const std::string& op : split_csv(o.ops)) {
    TS_CHECK(std::find(kOps.begin(), kOps.end(), op) != kOps.end(), ValueError,
             "bench-comm-worker: unknown op '{}' (expected one of {})", op, join_csv(kOps));
    for (const std::string& size : split_csv(o.sizes)) {
      const int64_t bytes = std::stoll(size);
      const int64_t big = big_numel(bytes, n);
      const Tensor full_buf = zeros({big}), part = zeros({big / n});
      Tensor a2a_out = zeros({big});
      std::function<void()> run;
      if (op == "all_reduce") {
        run = [&] { dist::all_reduce(full_buf)->wait(); };
      } else if (op == "all_gather") {
        run = [&] { dist::all_gather_into_tensor(full_buf, part)->wait(); };
      } else if (op == "reduce_scatter") {
        run = [&] { dist::reduce_scatter_tensor(part, full_buf)->wait(); };
      } else {
        run = [&] { dist::all_to_all_single(a2a_out, full_buf)->wait(); };
      }
      const int iters = iterations(bytes);
      run();  // warm-up: connections, pages, buffers
      std::vector<double> trials;
      for (int t = 0; t < o.trials; ++t) {
        dist::barrier()->wait();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) run();
        double dt = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
        Tensor slowest = full({1}, dt, kFloat64);  // the op took as long as its slowest rank
        dist::all_reduce(slowest, dist::ReduceOp::MAX)->wait();
        trials.push_back(slowest.item<double>());
      }
      std::sort(trials.begin(), trials.end());
      BenchRow row{"comm", case_name(op, bytes), o.impl, n};
      row.stats = Stats{trials[trials.size() / 2], trials.front(), trials.back(),
                        static_cast<int>(trials.size())};
      rows.push_back(row);
    }
  }
  dist::destroy_process_group();
  if (rank == 0 && !write_json_lines(o.out_path, rows)) return 1;
  return 0;
}

int run_bench_comm(const BenchOptions& options) {
  const std::vector<int> ranks = options.threads.empty() ? std::vector<int>{2, 4} : options.threads;
  std::vector<int64_t> sizes = {8, 4096, 65536, 1 << 20, 16 << 20, 64 << 20};
  if (options.quick) sizes = {8, 65536, 1 << 20, 16 << 20};
  const int trials = options.quick ? 3 : 7;
  std::vector<std::string> ops;
  for (const auto& op : kOps)
    for (int64_t b : sizes)
      if (case_name(op, b).find(options.filter) != std::string::npos) {
        ops.push_back(op);
        break;
      }
  std::vector<std::string> size_args;
  for (int64_t b : sizes) size_args.push_back(std::to_string(b));
  const bool keep_case = !options.filter.empty();
  auto wanted = [&](const BenchRow& r) {
    return !keep_case || r.case_name.find(options.filter) != std::string::npos;
  };

  std::vector<BenchRow> rows;
  std::vector<std::string> notes;
  const int cores = default_threads().back();
  for (int n : ranks) {
    const int t = std::min(n, cores);
    if (!find_row(rows, "membw", "", t))
      rows.push_back(measure_membw("comm", t, Budget{3, 0.2, 10}));
  }
  if (ops.empty()) return finish_bench("comm", notes, options.json_path, rows);
  const std::vector<std::string> worker_args = {
      "--ops", join_csv(ops), "--sizes", join_csv(size_args), "--trials", std::to_string(trials)};
  for (int n : ranks)
    for (auto& r : run_worker_job("bench-comm-worker", n, "gloo", "gloo", worker_args, notes))
      if (wanted(r)) rows.push_back(std::move(r));
  {
    std::vector<std::string> rank_args;
    for (int n : ranks) rank_args.push_back(std::to_string(n));
    std::string note;
    for (auto& r :
         run_python_anchor(std::string(TS_BENCH_SCRIPT_DIR) + "/torch_comm.py",
                           {"--ranks", join_csv(rank_args), "--ops", join_csv(ops), "--sizes",
                            join_csv(size_args), "--trials", std::to_string(trials)},
                           {{"OMP_NUM_THREADS", "1"}}, &note))
      if (wanted(r)) rows.push_back(std::move(r));
    if (!note.empty()) notes.push_back("torch-gloo: " + note);
  }
  const int rounds = options.quick ? 3 : 5;
  std::vector<BenchRow> rounds_rows;
  for (int round = 1; round <= rounds; ++round) {
    std::fprintf(stderr, "bench comm: round %d of %d (Tessera, then OpenMPI)\n", round, rounds);
    for (int n : ranks)
      for (auto& r : run_worker_job("bench-comm-worker", n, "shm", "tessera", worker_args, notes))
        if (wanted(r)) rounds_rows.push_back(std::move(r));
#if defined(TS_MPI_COMM_ANCHOR)
    for (int n : ranks) {
      // Shared memory (vader) between the ranks, as OpenMPI runs on one host; root is allowed
      // (CI containers), more ranks than cores too.
      const std::string cmd = fmt::format(
          "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 '{}' --oversubscribe -np {} "
          "--mca btl self,vader '{}' --ops {} --sizes {} --trials {}",
          TS_MPIRUN, n, TS_MPI_COMM_ANCHOR, join_csv(ops), join_csv(size_args), trials);
      std::string note;
      for (auto& r : run_anchor_command(cmd, "mpirun", &note))
        if (wanted(r)) rounds_rows.push_back(std::move(r));
      if (!note.empty()) {
        note = fmt::format("openmpi ({} ranks): {}", n, note);
        if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
      }
    }
#endif
  }
  for (auto& r : merge_rounds(std::move(rounds_rows))) rows.push_back(std::move(r));
  // One note per skipped (impl, op, ranks, reason), not per size.
  for (const BenchRow& r : rows) {
    if (r.skipped.empty()) continue;
    const std::string op = r.case_name.substr(0, r.case_name.find('/'));
    const std::string note =
        fmt::format("{} {} ({} ranks) skipped: {}", r.impl, op, r.threads, r.skipped);
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
#if !defined(TS_MPI_COMM_ANCHOR)
  notes.push_back(
      "openmpi: skipped (this build found no MPI; scripts/install-deps.sh installs it)");
#endif
  notes.push_back("gloo rows run Gloo's algorithms through Tessera's gloo backend");
  // busbw of every measured row, from its case.
  for (BenchRow& r : rows) {
    if (!r.stats || r.impl == "membw") continue;
    for (const auto& op : kOps)
      for (int64_t b : sizes)
        if (r.case_name == case_name(op, b))
          r.gbps =
              big_numel(b, r.threads) * 4.0 / r.stats->median_s * busbw_factor(op, r.threads) / 1e9;
  }

  for (int n : ranks) {
    const BenchRow* bw = find_row(rows, "membw", "", std::min(n, cores));
    const double membw = bw && bw->gbps ? *bw->gbps : NAN;
    std::printf("\ncomm, %d ranks: membw %.1f GB/s (%d thread%s); latency in us, busbw in GB/s\n",
                n, membw, std::min(n, cores), std::min(n, cores) == 1 ? "" : "s");
    std::printf("%-28s %10s %8s %6s %10s %8s %8s %10s %8s %8s %10s %8s %8s\n", "case", "us",
                "busbw", "% bw", "gloo us", "busbw", "x gloo", "torch us", "busbw", "x torch",
                "mpi us", "busbw", "x mpi");
    for (const auto& op : kOps) {
      for (int64_t b : sizes) {
        const std::string name = case_name(op, b);
        const BenchRow* ts = find_row(rows, "tessera", name, n, true);
        if (!ts) continue;
        auto anchor = [&](const char* impl) {
          const BenchRow* a = find_row(rows, impl, name, n, true);
          if (!a) return fmt::format("{:>10} {:>8} {:>8}", "-", "-", "-");
          return fmt::format("{:10.1f} {:8.2f} {:7.2f}x", a->stats->median_s * 1e6, *a->gbps,
                             a->stats->median_s / ts->stats->median_s);
        };
        std::printf("%-28s %10.1f %8.2f %5.0f%% %s %s %s\n", name.c_str(),
                    ts->stats->median_s * 1e6, *ts->gbps, 100 * *ts->gbps / membw,
                    anchor("gloo").c_str(), anchor("torch-gloo").c_str(),
                    anchor("openmpi").c_str());
      }
    }
  }
  return finish_bench("comm", notes, options.json_path, rows);
}

}  // namespace tessera::cli
