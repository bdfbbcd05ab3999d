// `tessera bench gemm`, low precision: bfloat16 mm (bf16 in, bf16 out, float32 accumulation)
// at square n = 512..2048 (and 4096 without --quick), and scaled_mm with float8_e4m3fn
// (per-row/column scales, bf16 out) and NVFP4 (block scales + global scale, bf16 out).
// Columns: GFLOP/s, % of the same run's vdpbf16ps peak (impl "peak", dpbf16 case; the AMX
// tdpbf16ps loop's where bfloat16 ran the AMX kernel), ratio to
// Tessera's float32 mm of the same shape (goal >= 1.8x at n >= 1024) and to PyTorch 1.13's
// bf16 mm (bench/torch_gemm.py --dtype bfloat16 in lockstep, one script per thread count with
// OPENBLAS_NUM_THREADS) and oneDNN's bf16 matmul (bf16 in and out, plain row-major weights;
// goal >= 1.0x). bfloat16 mm also runs with B prepacked (gemm::PackedLowpB) against oneDNN's
// prepacked bf16 matmul. All of them, the float32 product included ("tessera-float32"), take
// turns on each case (Turns, bench_gemm.h).
#include "cli/bench_gemm.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "cli/bench_anchors.h"
#include "gemm/lowp.h"
#include "tessera/tessera.h"

namespace tessera::cli {
namespace {

struct LowpCase {
  std::string op, dtype;  // "mm"/"scaled_mm", "bfloat16"/"float8_e4m3fn"/"nvfp4"
  int64_t n;
  std::string name() const { return fmt::format("{}/{}/{}x{}x{}", op, dtype, n, n, n); }
  double flops() const { return 2.0 * double(n) * double(n) * double(n); }
};

const BenchRow* find(const std::vector<BenchRow>& rows, const std::string& impl,
                     const std::string& prefix, int threads) {
  for (const auto& r : rows)
    if (r.impl == impl && r.threads == threads && r.case_name.starts_with(prefix)) return &r;
  return nullptr;
}

// The case's operands, bound into the callable to time.
std::function<void()> make_case(const LowpCase& c) {
  const int64_t n = c.n;
  manual_seed(1);
  if (c.dtype == "bfloat16") {
    Tensor a = randn({n, n}).to(kBFloat16), b = randn({n, n}).to(kBFloat16);
    return [a, b] { (void)a.mm(b); };
  }
  if (c.dtype == "float8_e4m3fn") {
    Tensor a = randn({n, n}).to(kFloat8_e4m3fn), b = randn({n, n}).to(kFloat8_e4m3fn).t();
    Tensor sa = rand({n, 1}).add(0.5), sb = rand({1, n}).add(0.5);
    return [a, b, sa, sb] { (void)scaled_mm(a, b, sa, sb); };
  }
  Tensor a = randint(0, 256, {n, n / 2}, kUInt8).view(kFloat4_e2m1fn_x2);
  Tensor w = randint(0, 256, {n, n / 2}, kUInt8).view(kFloat4_e2m1fn_x2);
  Tensor sa = rand({n, n / 16}).add(0.5).to(kFloat8_e4m3fn);
  Tensor sw = rand({n, n / 16}).add(0.5).to(kFloat8_e4m3fn);
  Tensor g = full({}, 0.5f);
  return [a, w, sa, sw, g] { (void)scaled_mm(a, w.t(), sa, sw, std::nullopt, kBFloat16, g); };
}

// Operands of the bfloat16 product with B packed once (a prepacked bfloat16 Linear weight)
// and of oneDNN's bf16 matmul.
struct Bf16Operands {
  Tensor a, b, out;
};

}  // namespace

void bench_gemm_lowp(const BenchOptions& options, const Turns& turns, std::vector<BenchRow>& rows,
                     std::vector<std::string>& notes) {
  const std::vector<int>& threads = turns.threads;
  std::vector<LowpCase> cases;
  std::vector<int64_t> sizes = {512, 1024, 2048};
  if (!options.quick) sizes.push_back(4096);
  for (int64_t n : sizes) cases.push_back({"mm", "bfloat16", n});
  for (int64_t n : {1024, 2048}) {
    cases.push_back({"scaled_mm", "float8_e4m3fn", n});
    cases.push_back({"scaled_mm", "nvfp4", n});
  }
  std::erase_if(
      cases, [&](const LowpCase& c) { return c.name().find(options.filter) == std::string::npos; });
  if (cases.empty()) return;
  const gemm::Bf16Path& path = gemm::bf16_path();
  notes.push_back(fmt::format("bfloat16/float8/NVFP4 products ran the {} ({})",
                              path.amx     ? "AMX tile kernel"
                              : path.pairs ? "vdpbf16ps pair kernel"
                                           : "float32 kernel on decoded operands",
                              path.reason));
  std::string why;
  const bool dnnl = DnnlMatmul::available(&why);
  if (!dnnl) notes.push_back("onednn bf16 skipped: " + why);
  std::string torch_cases;
  for (const auto& c : cases)
    if (c.op == "mm")
      torch_cases += fmt::format("{}{}x{}x{}", torch_cases.empty() ? "" : ",", c.n, c.n, c.n);
  // bf16 PyTorch per thread count
  std::map<int, std::unique_ptr<AnchorServer>> torch;
  if (!torch_cases.empty())
    torch =
        lockstep_per_thread_count("torch_gemm.py", {"--cases", torch_cases, "--dtype", "bfloat16"},
                                  turns.threads, turns.turn, "torch bf16");

  const int saved = get_num_threads();
  for (const auto& c : cases) {
    const auto fn = make_case(c);
    manual_seed(1);
    const Tensor a32 = randn({c.n, c.n}), b32 = randn({c.n, c.n});
    const Bf16Operands o{a32.to(kBFloat16), b32.to(kBFloat16), empty({c.n, c.n}, kBFloat16)};
    std::unique_ptr<gemm::PackedLowpB> packed;
    gemm::LowpProblem p;
    if (c.op == "mm") {
      packed = std::make_unique<gemm::PackedLowpB>(ScalarType::BFloat16, c.n, c.n, o.b.data_ptr(),
                                                   c.n, 1);
      p.m = p.n = p.k = c.n;
      p.a = {ScalarType::BFloat16, o.a.data_ptr(), c.n, 1};
      p.c_dtype = ScalarType::BFloat16, p.c = o.out.data_ptr(), p.c_rs = c.n, p.c_cs = 1;
    }
    for (int t : threads) {
      std::vector<Contender> cs = {
          tessera_contender("tessera", t, fn),
          tessera_contender("tessera-float32", t, [&] { (void)a32.mm(b32); })};
      std::vector<std::unique_ptr<DnnlMatmul>> mms;  // built at t threads
      if (c.op == "mm") {
        cs.push_back(tessera_contender("tessera-prepacked", t,
                                       [&] { gemm::gemm_lowp_prepacked(p, *packed); }));
        if (dnnl) {
          DnnlMatmul::set_threads(t);
          for (bool prepacked : {false, true}) {
            mms.push_back(std::make_unique<DnnlMatmul>(c.n, c.n, c.n, kBFloat16, kBFloat16,
                                                       prepacked, o.b.data_ptr()));
            DnnlMatmul* mm = mms.back().get();
            cs.push_back(dnnl_contender(prepacked ? "onednn-prepacked" : "onednn", t,
                                        [&o, mm] { mm->run(o.a.data_ptr(), o.out.data_ptr()); }));
          }
        }
        if (torch.count(t)) cs.push_back(script_contender(torch[t].get(), t));
      }
      for (auto& r : turns.take(c.name(), c.flops(), t, cs)) rows.push_back(std::move(r));
    }
  }
  set_num_threads(saved);
  for (const auto& [t, server] : torch)
    if (!server->note().empty()) notes.push_back(server->note());

  for (int t : threads) {
    // % peak against the instruction the bfloat16 products ran.
    const char* peak_case = path.amx ? "tdpbf16/" : "dpbf16/";
    const BenchRow* peak = find(rows, "peak", peak_case, t);
    const double pk = peak && peak->gflops ? *peak->gflops : NAN;
    std::printf("\ngemm low precision, %d thread%s: %s peak %.1f GFLOP/s\n", t, t == 1 ? "" : "s",
                path.amx ? "AMX tdpbf16ps" : "dpbf16", pk);
    std::printf("%-36s %9s %8s %7s %10s %8s %8s %8s %8s %9s %9s\n", "case", "ms", "GFLOP/s",
                "% peak", "x float32", "onednn", "x onednn", "torch", "x torch", "prepacked",
                "x dnnl-pk");
    for (const auto& c : cases) {
      const BenchRow* ts = find(rows, "tessera", c.name(), t);
      if (!ts || !ts->stats) continue;
      const BenchRow* f32 = find(rows, "tessera-float32", c.name(), t);
      std::string line =
          fmt::format("{:<36} {:9.3f} {:8.1f} {:6.1f}%", c.name(), ts->stats->median_s * 1e3,
                      *ts->gflops, 100 * *ts->gflops / pk);
      line += f32 && f32->stats
                  ? fmt::format(" {:9.2f}x", f32->stats->median_s / ts->stats->median_s)
                  : fmt::format(" {:>10}", "-");
      for (const char* anchor : {"onednn", "torch"}) {
        const BenchRow* a = c.op == "mm" ? find(rows, anchor, c.name(), t) : nullptr;
        line += a && a->stats
                    ? fmt::format(" {:8.1f} {:7.2f}x", c.flops() / a->stats->median_s / 1e9,
                                  a->stats->median_s / ts->stats->median_s)
                    : fmt::format(" {:>8} {:>8}", "skipped", "-");
      }
      // Prepacked B against oneDNN with its weights reordered once.
      const BenchRow* tp = find(rows, "tessera-prepacked", c.name(), t);
      const BenchRow* dp = find(rows, "onednn-prepacked", c.name(), t);
      line += tp && tp->stats ? fmt::format(" {:9.1f}", *tp->gflops) : fmt::format(" {:>9}", "-");
      line += tp && tp->stats && dp && dp->stats
                  ? fmt::format(" {:8.2f}x", dp->stats->median_s / tp->stats->median_s)
                  : fmt::format(" {:>9}", "-");
      std::printf("%s\n", line.c_str());
    }
  }
}

}  // namespace tessera::cli
