// `tessera bench ops`: eager reductions and memory-bound pointwise ops against PyTorch 1.13
// and NumPy, with the machine's read bandwidth measured in the same run (issue 2's goals).
//
// Cases (the same strings in bench/torch_ops.py and bench/numpy_ops.py):
//   {sum,mean,amax,argmax,var,norm}/float32/67108864         full reductions over 64M
//   {sum,amax,argmax,var}/float32/8192x8192/{dim1,dim0}      row-wise (dim1), column-wise (dim0)
//   add/float32/4096x4096/broadcast4096                      [4096,4096] + [4096]
//   gelu/float32/67108864                                    erf gelu
//   softmax/float32/4096x4096/dim1                           softmax over rows of 4096
//   {randn,rand}/float32/67108864                            normal and uniform draws
// GB/s counts the bytes a case must move at least once: its inputs read plus its outputs
// written (for reductions, the input). "% bw" is that rate over the read bandwidth measured
// between the case's own repetitions (`membw_gbps` in its JSON row; the `membw` row is the
// same loop measured on its own, before and after the cases); "x torch" / "x numpy" are
// anchor median / Tessera median (higher is better).
// "torch-out" rows (add, gelu, softmax, randn, rand) run PyTorch with a preallocated output: its
// functional call gets fresh mmap'ed memory per result, whose page faults can cost more than the
// kernel.
// gelu and softmax also run from cache in the same turns ("tessera-cached": the op over a 2 MiB
// slice of the input, as many times as covers the same elements): where that alone takes
// longer than the 80%-of-bandwidth goal allows, the case is bound by its computation on this
// machine, not by memory, and a note says so.
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_util.h"
#include "tessera/tessera.h"

#ifndef TS_BENCH_SCRIPT_DIR
#define TS_BENCH_SCRIPT_DIR "bench"
#endif

namespace tessera::cli {
namespace {

constexpr int64_t kFull = int64_t{1} << 26;  // 64M float32
constexpr int64_t kSide = 8192;
constexpr int64_t kRows = 4096;

struct OpsCase {
  std::string name;
  double bytes;  // moved at least once: inputs read + outputs written
  std::function<void()> run;
  std::function<void()> cached_run = {};  // the same elements from cache, where it matters
};

// Bytes of input per call of a case's cached form: in L2 and L3 with its output.
constexpr int64_t kCachedSliceBytes = int64_t{2} << 20;

// Fills t (contiguous float32) with deterministic values in [-2, 2): a cheap hash per index,
// spread over the pool, so that setting up 600 MB of inputs takes well under a second.
void fill(const Tensor& t, uint32_t seed) {
  float* p = t.data_ptr<float>();
  parallel_for(0, t.numel(), kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
      h ^= h >> 15;
      h *= 2246822519u;
      h ^= h >> 13;
      p[i] = static_cast<float>(h >> 8) * (4.0f / 16777216.0f) - 2.0f;
    }
  });
}

struct Inputs {
  Tensor full, square, rows, bias;
};

Inputs make_inputs() {
  Inputs in{empty({kFull}, kFloat32), empty({kSide, kSide}, kFloat32),
            empty({kRows, kRows}, kFloat32), empty({kRows}, kFloat32)};
  fill(in.full, 1);
  fill(in.square, 2);
  fill(in.rows, 3);
  fill(in.bias, 4);
  return in;
}

std::vector<OpsCase> make_cases(const Inputs& in) {
  const double full_b = 4.0 * kFull, square_b = 4.0 * kSide * kSide, rows_b = 4.0 * kRows * kRows;
  std::vector<OpsCase> cases;
  const Tensor x = in.full, m = in.square, r = in.rows, bias = in.bias;
  const std::string full = fmt::format("float32/{}", kFull);
  cases.push_back({"sum/" + full, full_b, [x] { (void)sum(x); }});
  cases.push_back({"mean/" + full, full_b, [x] { (void)mean(x); }});
  cases.push_back({"amax/" + full, full_b, [x] { (void)amax(x); }});
  cases.push_back({"argmax/" + full, full_b, [x] { (void)argmax(x); }});
  cases.push_back({"var/" + full, full_b, [x] { (void)var(x); }});
  cases.push_back({"norm/" + full, full_b, [x] { (void)norm(x); }});
  const std::string sq = fmt::format("float32/{}x{}", kSide, kSide);
  for (int64_t d : {1, 0}) {
    const std::string suffix = fmt::format("{}/dim{}", sq, d);
    cases.push_back({"sum/" + suffix, square_b, [m, d] { (void)sum(m, {d}); }});
    cases.push_back({"amax/" + suffix, square_b, [m, d] { (void)amax(m, {d}); }});
    cases.push_back({"argmax/" + suffix, square_b, [m, d] { (void)argmax(m, d); }});
    cases.push_back({"var/" + suffix, square_b, [m, d] { (void)var(m, {d}); }});
  }
  cases.push_back({fmt::format("add/float32/{}x{}/broadcast{}", kRows, kRows, kRows),
                   2 * rows_b + 4.0 * kRows, [r, bias] { (void)add(r, bias); }});
  const int64_t slice = kCachedSliceBytes / 4, slice_rows = kCachedSliceBytes / (4 * kRows);
  cases.push_back({"gelu/" + full, 2 * full_b, [x] { (void)gelu(x); },
                   [part = x.narrow(0, 0, slice)] {
                     for (int64_t k = 0; k < kFull / slice; ++k) (void)gelu(part);
                   }});
  cases.push_back({fmt::format("softmax/float32/{}x{}/dim1", kRows, kRows), 2 * rows_b,
                   [r] { (void)softmax(r, 1); },
                   [part = r.narrow(0, 0, slice_rows)] {
                     for (int64_t k = 0; k < kRows / slice_rows; ++k) (void)softmax(part, 1);
                   }});
  cases.push_back({"randn/" + full, full_b, [] { (void)randn({kFull}); }});
  cases.push_back({"rand/" + full, full_b, [] { (void)rand({kFull}); }});
  return cases;
}

void print_table(const std::vector<OpsCase>& cases, const std::vector<BenchRow>& rows,
                 const std::vector<int>& threads) {
  for (int t : threads) {
    const BenchRow* bw = find_row(rows, "membw", "", t);
    const double membw = bw && bw->gbps ? *bw->gbps : NAN;
    std::string peaks;
    for (const auto& r : rows)
      if (r.impl == "peak" && r.threads == t)
        peaks += r.gflops ? fmt::format("  {} {:.0f} GFLOP/s", r.case_name, *r.gflops)
                          : fmt::format("  {} skipped ({})", r.case_name, r.skipped);
    std::printf("\nops, %d thread%s: membw %.1f GB/s alone;%s\n", t, t == 1 ? "" : "s", membw,
                peaks.c_str());
    std::printf(
        "(bw: the read bandwidth measured between the case's repetitions; %% bw is "
        "against it)\n");
    std::printf("%-38s %9s %7s %7s %6s %8s %8s %9s %9s %8s %8s\n", "case", "ms", "GB/s", "bw",
                "% bw", "torch", "x torch", "torch-out", "x t-out", "numpy", "x numpy");
    for (const auto& c : cases) {
      const BenchRow* ts = find_row(rows, "tessera", c.name, t);
      if (!ts) continue;
      std::string line;
      if (ts->stats) {
        line = fmt::format("{:<38} {:9.3f} {:7.1f} {:7.1f} {:5.0f}%", c.name,
                           ts->stats->median_s * 1e3, *ts->gbps, *ts->membw_gbps,
                           100 * *ts->gbps / *ts->membw_gbps);
      } else {
        line = fmt::format("{:<38} {:>9} ({})", c.name, "failed", ts->skipped);
      }
      for (const char* anchor : {"torch", "torch-out", "numpy"}) {
        const bool out_variant = std::string_view(anchor) == "torch-out";
        const int w = out_variant ? 9 : 8;
        const BenchRow* a = find_row(rows, anchor, c.name, t);
        if (!a || !a->stats) {
          line += fmt::format(" {:>{}} {:>{}}", out_variant && !a ? "-" : "skipped", w, "-", w);
        } else if (!ts->stats) {
          line += fmt::format(" {:{}.1f} {:>{}}", *a->gbps, w, "-", w);
        } else {
          line += fmt::format(" {:{}.1f} {:{}.2f}x", *a->gbps, w,
                              a->stats->median_s / ts->stats->median_s, w - 1);
        }
      }
      std::printf("%s\n", line.c_str());
    }
  }
}

// One turn: a warm-up call and one timed repetition.
constexpr Budget kTurn{1, 0, 1};

// One case at `t` threads in `rounds` turns: Tessera (one repetition, the read probe right
// before it; a warm-up call first unless every call so far took 50 ms or more), then each anchor.
// Returns a row per implementation, its median over the turns.
std::vector<BenchRow> measure_in_turns(const OpsCase& c, int t, int rounds, const ReadProbe& probe,
                                       const std::vector<AnchorServer*>& anchors) {
  std::vector<double> probe_times;
  std::vector<Contender> contenders = {
      tessera_contender("tessera", t, c.run, [&] { probe_times.push_back(probe.timed_run()); })};
  if (c.cached_run) contenders.push_back(tessera_contender("tessera-cached", t, c.cached_run));
  for (AnchorServer* a : anchors) contenders.push_back({.script = a});
  std::vector<BenchRow> rows = take_turns("ops", c.name, t, rounds, kTurn, contenders);
  for (auto& r : rows) {
    if (!r.stats) continue;
    r.gbps = c.bytes / r.stats->median_s / 1e9;
    if (r.impl == "tessera")
      r.membw_gbps = probe.bytes_read() / stats_of(probe_times).median_s / 1e9;
  }
  return rows;
}

}  // namespace

int run_bench_ops(const BenchOptions& options) {
  const std::vector<int> threads = options.threads.empty() ? default_threads() : options.threads;
  // Each case takes `rounds` turns of Tessera, PyTorch and NumPy, each turn a warm-up call
  // (skipped while every call so far took 50 ms or more) and one timed repetition: a
  // neighbour's burst lasting a second hits all alike.
  const int rounds = options.quick ? 5 : 15;
  const int saved_threads = get_num_threads();
  std::vector<BenchRow> rows;

  // The machine's limits first, while nothing else holds memory. The `membw` row is measured
  // again at the end and keeps the better median. The % column does not use it: each case is
  // set against the bandwidth measured between its own repetitions, since on a shared machine
  // what a neighbour leaves drifts by 20% within a minute.
  const Budget bw_budget = options.quick ? Budget{5, 0.3, 20} : Budget{10, 1, 50};
  std::map<int, size_t> membw_row;
  for (int t : threads) {
    const BenchRow bw = measure_membw("ops", t, bw_budget);
    std::fprintf(stderr, "bench ops: %d thread(s): membw %.1f GB/s\n", t, *bw.gbps);
    membw_row[t] = rows.size();
    rows.push_back(bw);
    for (auto& r : measure_peak("ops", t)) rows.push_back(r);
  }

  const Inputs in = make_inputs();
  std::vector<OpsCase> cases = make_cases(in);
  std::erase_if(cases,
                [&](const OpsCase& c) { return c.name.find(options.filter) == std::string::npos; });

  // The anchors run beside us, in lockstep: PyTorch sets its thread count per case; NumPy's
  // threads come from the environment, so there is one NumPy per thread count.
  AnchorServer torch(std::string(TS_BENCH_SCRIPT_DIR) + "/torch_ops.py", turn_args(kTurn), {},
                     "torch");
  const auto numpy = lockstep_per_thread_count("numpy_ops.py", {}, threads, kTurn, "numpy");
  torch.wait_ready();

  for (int t : threads) {
    const ReadProbe probe(t);
    size_t done = 0;
    for (const auto& c : cases) {
      std::fprintf(stderr, "bench ops: %d thread(s): [%zu/%zu] %s\n", t, ++done, cases.size(),
                   c.name.c_str());
      for (auto& r : measure_in_turns(c, t, rounds, probe, {&torch, numpy.at(t).get()}))
        rows.push_back(std::move(r));
    }
  }
  set_num_threads(saved_threads);

  std::vector<std::string> notes;
  if (!torch.note().empty()) notes.push_back(torch.note());
  for (const auto& [t, server] : numpy)
    if (!server->note().empty()) notes.push_back(server->note());
  for (int t : threads) {
    const BenchRow bw = measure_membw("ops", t, bw_budget);
    BenchRow& first = rows[membw_row[t]];
    std::fprintf(stderr, "bench ops: %d thread(s): membw again %.1f GB/s (first %.1f)\n", t,
                 *bw.gbps, *first.gbps);
    if (*bw.gbps > *first.gbps) first = bw;
  }
  for (const auto& r : rows)
    if (!r.skipped.empty() && r.impl != "tessera" && r.impl != "peak")
      notes.push_back(
          fmt::format("{} {} ({} threads) skipped: {}", r.impl, r.case_name, r.threads, r.skipped));

  for (const auto& c : cases)
    for (int t : threads) {
      const BenchRow* ts = find_row(rows, "tessera", c.name, t, true);
      const BenchRow* cached = find_row(rows, "tessera-cached", c.name, t, true);
      if (!ts || !cached) continue;
      const double goal_s = c.bytes / (0.8 * *ts->membw_gbps * 1e9);
      notes.push_back(fmt::format(
          "{} ({} thread{}): {:.2f} ms from memory, {:.2f} ms from cache over the same elements "
          "({:.0f}%); 80% of the bandwidth needs {:.2f} ms: {}",
          c.name, t, t == 1 ? "" : "s", ts->stats->median_s * 1e3, cached->stats->median_s * 1e3,
          100 * cached->stats->median_s / ts->stats->median_s, goal_s * 1e3,
          cached->stats->median_s > goal_s
              ? "its computation alone takes longer, it is bound by computation here"
              : "its computation alone fits in that"));
    }
  print_table(cases, rows, threads);
  return finish_bench("ops", notes, options.json_path, rows);
}

}  // namespace tessera::cli
