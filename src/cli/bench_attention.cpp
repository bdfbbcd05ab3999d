// `tessera bench attention`: causal prefill attention (scaled_dot_product_attention, which
// picks the fused kernel) against PyTorch 1.13's math attention (bench/torch_attention.py),
// B=1, H=12, D=64, S = 512..4096, float32 and bfloat16. GFLOP/s count only the causal half
// (2 * 2 * S^2 * D * H / 2); "% peak" is against the same run's FMA peak and "% gemm" against
// the same run's Tessera sgemm at 2048^3. Decode rows (one
// query token against S cached keys, float32) report the bandwidth of reading K and V,
// against the same run's streaming-read bandwidth.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_util.h"
#include "tessera/tessera.h"

namespace tessera::cli {

int run_bench_attention(const BenchOptions& options) {
  const std::vector<int> threads = options.threads.empty() ? default_threads() : options.threads;
  const Budget budget = options.quick ? Budget{3, 0.5, 20} : Budget{5, 2.0, 50};
  std::vector<int64_t> lengths = {512, 1024, 2048};
  if (!options.quick) lengths.push_back(4096);
  struct Case {
    std::string dtype;
    int64_t s;
    bool decode = false;
    std::string shape() const { return fmt::format("1x12x{}x64", s); }
    std::string name() const {
      return fmt::format("{}/{}/{}", decode ? "decode" : "attention", dtype, shape());
    }
    double flops() const { return 2.0 * 2.0 * double(s) * double(s) * 64 * 12 / 2; }
    double kv_bytes() const { return 2.0 * double(s) * 64 * 12 * 4; }
  };
  std::vector<Case> cases;
  for (const char* dt : {"float32", "bfloat16"})
    for (int64_t s : lengths) cases.push_back({dt, s});
  for (int64_t s : {int64_t{4096}, int64_t{32768}}) cases.push_back({"float32", s, true});
  std::erase_if(cases,
                [&](const Case& c) { return c.name().find(options.filter) == std::string::npos; });
  std::vector<BenchRow> rows;
  for (int t : threads) {
    for (auto& r : measure_peak("attention", t)) rows.push_back(r);
    rows.push_back(measure_membw("attention", t, Budget{3, 0.2, 10}));
  }
  const int saved = get_num_threads();
  for (int t : threads) {
    set_num_threads(t);
    // The goal's yardstick: Tessera's own float32 GEMM (2048^3) in the same run.
    {
      const Tensor a = randn({2048, 2048}), b = randn({2048, 2048});
      BenchRow row{"attention", "gemm/float32/2048x2048x2048", "tessera", t};
      row.stats = measure([&] { (void)a.mm(b); }, budget);
      row.gflops = 2.0 * 2048 * 2048 * 2048 / row.stats->median_s / 1e9;
      rows.push_back(row);
    }
    for (const Case& c : cases) {
      manual_seed(0);
      const ScalarType dt = c.dtype == "float32" ? kFloat32 : kBFloat16;
      const Tensor q = randn({1, 12, c.decode ? 1 : c.s, 64}).to(dt),
                   k = randn({1, 12, c.s, 64}).to(dt), v = randn({1, 12, c.s, 64}).to(dt);
      BenchRow row{"attention", c.name(), "tessera", t};
      row.stats = measure(
          [&] { (void)nn::functional::scaled_dot_product_attention(q, k, v, {}, 0.0, !c.decode); },
          budget);
      if (c.decode)
        row.gbps = c.kv_bytes() / row.stats->median_s / 1e9;
      else
        row.gflops = c.flops() / row.stats->median_s / 1e9;
      rows.push_back(row);
    }
  }
  set_num_threads(saved);
  std::vector<std::string> notes;
  for (const char* dt : {"float32", "bfloat16"}) {
    for (bool decode : {false, true}) {
      std::string list;
      for (const Case& c : cases)
        if (c.dtype == dt && c.decode == decode)
          list += fmt::format("{}{}", list.empty() ? "" : ",", c.shape());
      if (list.empty()) continue;
      std::vector<std::string> args = {"--cases", list, "--dtype", dt};
      if (decode) args.push_back("--decode");
      for (auto& r : run_torch_anchor("torch_attention.py", args, threads, budget,
                                      fmt::format("torch {}", dt), notes))
        rows.push_back(r);
    }
  }
  for (int t : threads) {
    const BenchRow* peak = find_row(rows, "peak", "fma/float32/avx512", t);
    if (!peak) peak = find_row(rows, "peak", "fma/float32/avx2", t);
    const double pk = peak && peak->gflops ? *peak->gflops : 0;
    const BenchRow* mm = find_row(rows, "tessera", "gemm/float32/2048x2048x2048", t, true);
    const double gemm = mm ? *mm->gflops : 0;
    std::printf(
        "\nattention, causal prefill, %d thread%s (FMA peak %.1f GFLOP/s, Tessera sgemm 2048 %.1f "
        "GFLOP/s; causal flops)\n",
        t, t == 1 ? "" : "s", pk, gemm);
    std::printf("%-34s %10s %9s %7s %7s %10s %9s\n", "case", "ms", "GFLOP/s", "% peak", "% gemm",
                "torch ms", "x torch");
    for (const Case& c : cases) {
      if (c.decode) continue;
      const BenchRow* ts = find_row(rows, "tessera", c.name(), t, true);
      const BenchRow* th = find_row(rows, "torch", c.name(), t, true);
      if (!ts) continue;
      std::printf(
          "%-34s %10.2f %9.1f %6.1f%% %6.1f%% %10s %9s\n", c.name().c_str(),
          ts->stats->median_s * 1e3, *ts->gflops, pk > 0 ? 100 * *ts->gflops / pk : 0.0,
          gemm > 0 ? 100 * *ts->gflops / gemm : 0.0,
          th ? fmt::format("{:.2f}", th->stats->median_s * 1e3).c_str() : "skipped",
          th ? fmt::format("{:.2f}x", th->stats->median_s / ts->stats->median_s).c_str() : "-");
    }
  }
  for (int t : threads) {
    const BenchRow* bw = find_row(rows, "membw", "", t, /*measured_only=*/true);
    const double membw = bw && bw->gbps ? *bw->gbps : 0;
    bool header = false;
    for (const Case& c : cases) {
      const BenchRow* ts = find_row(rows, "tessera", c.name(), t, true);
      const BenchRow* th = find_row(rows, "torch", c.name(), t, true);
      if (!c.decode || !ts) continue;
      if (!header)
        std::printf(
            "\nattention, decode (one query, K and V read), %d thread%s (membw %.1f GB/s)\n"
            "%-34s %10s %9s %7s %10s %9s\n",
            t, t == 1 ? "" : "s", membw, "case", "ms", "GB/s", "% bw", "torch ms", "x torch");
      header = true;
      std::printf(
          "%-34s %10.3f %9.1f %6.1f%% %10s %9s\n", c.name().c_str(), ts->stats->median_s * 1e3,
          *ts->gbps, membw > 0 ? 100 * *ts->gbps / membw : 0.0,
          th ? fmt::format("{:.3f}", th->stats->median_s * 1e3).c_str() : "skipped",
          th ? fmt::format("{:.2f}x", th->stats->median_s / ts->stats->median_s).c_str() : "-");
    }
  }
  return finish_bench("attention", notes, options.json_path, rows);
}

}  // namespace tessera::cli
