// `tessera bench gemm`: float32 GEMM through Tessera's engine against OpenBLAS, BLIS and oneDNN
// (same process; cli/bench_anchors.h) and PyTorch 1.13 (bench/torch_gemm.py, same invocation),
// with the machine's FMA peak and read bandwidth measured in the same run (issue 3's goals).
// oneDNN runs twice: with plain row-major weights ("onednn") and with weights reordered once into
// its preferred layout ("onednn-prepacked"); "x best" is against the fastest plain-weights
// library of OpenBLAS, BLIS and oneDNN. "prepacked" is Tessera with B packed once beforehand
// (gemm::PackedB, as PackedLinearWeight does), "x dnnl-pk" its ratio to prepacked oneDNN.
//
// Cases (M x K x N, the same strings in bench/torch_gemm.py): mm/float32/MxKxN for square
// n = 256, 512, 1024, 2048 (and 4096 without --quick) and the transformer shapes
// (512,768,3072), (512,3072,768), (2048,4096,4096), small squares n = 8..64 and the tall-skinny
// (8,4096,4096), (64,4096,4096); and bmm/float32/1000x32x32x32, a batch of small products. Every
// implementation writes a preallocated row-major C = A B (alpha 1, beta 0), so no allocation is
// timed.
//
// Every implementation of a case takes turns with the others (see Turns below), the FMA loop
// among them. A note says which OpenBLAS kernel ran (OPENBLAS_CORETYPE in the environment
// overrides its cpuid choice). "% peak" is GFLOP/s over the FMA loop (AVX-512 or AVX2) timed in
// the same turns; "x openblas" / "x torch" are anchor median / Tessera median (higher is
// better).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_anchors.h"
#include "cli/bench_gemm.h"
#include "cli/bench_util.h"
#include "gemm/epilogue.h"
#include "gemm/gemm.h"
#include "tessera/core/parallel.h"
#include "tessera/tessera.h"

namespace tessera::cli {

AnchorServer* Turns::torch(int t) const {
  const auto it = torch_servers.find(t);
  return it == torch_servers.end() ? nullptr : it->second.get();
}

std::vector<BenchRow> Turns::take(const std::string& name, double flops, int t,
                                  const std::vector<Contender>& cs) const {
  std::vector<BenchRow> rows = take_turns("gemm", name, t, rounds, turn, cs);
  for (auto& r : rows)
    if (r.stats) r.gflops = flops / r.stats->median_s / 1e9;
  if (const BenchRow* ts = find_row(rows, "tessera", name, t, /*measured_only=*/true))
    std::fprintf(stderr, "bench gemm: %s %d thread(s): tessera %.1f GFLOP/s\n", name.c_str(), t,
                 *ts->gflops);
  return rows;
}

namespace {

struct GemmShape {
  int64_t m, k, n;
  std::string name() const { return fmt::format("mm/float32/{}x{}x{}", m, k, n); }
  double flops() const { return 2.0 * m * n * k; }
};

std::vector<GemmShape> make_shapes(bool quick) {
  std::vector<GemmShape> s;
  for (int64_t n : {256, 512, 1024, 2048}) s.push_back({n, n, n});
  if (!quick) s.push_back({4096, 4096, 4096});
  s.push_back({512, 768, 3072});
  s.push_back({512, 3072, 768});
  s.push_back({2048, 4096, 4096});
  // Small products (a microkernel's worth of work) and tall-skinny ones (a decode batch of 8
  // or a short prefill of 64 tokens through a 4096x4096 weight: bound by reading B).
  for (int64_t n : {8, 16, 32, 64}) s.push_back({n, n, n});
  s.push_back({8, 4096, 4096});
  s.push_back({64, 4096, 4096});
  return s;
}

// Deterministic values in [-1, 1): a cheap hash per index.
void fill(const Tensor& t, uint32_t seed) {
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
}

struct Operands {
  Tensor a, b, c;
};

Operands make_operands(const GemmShape& s) {
  Operands o{empty({s.m, s.k}, kFloat32), empty({s.k, s.n}, kFloat32), empty({s.m, s.n}, kFloat32)};
  fill(o.a, 1);
  fill(o.b, 2);
  fill(o.c, 3);
  return o;
}

// C = A B for row-major A (m x k) and B (k x n); c may be null (an epilogue's problem).
gemm::GemmProblem row_major_problem(const GemmShape& s, const Tensor& a, const Tensor& b,
                                    const Tensor* c) {
  gemm::GemmProblem p;
  p.m = s.m, p.n = s.n, p.k = s.k;
  p.a = a.data_ptr(), p.a_rs = s.k, p.a_cs = 1;
  p.b = b.data_ptr(), p.b_rs = s.n, p.b_cs = 1;
  if (c) p.c = c->data_ptr(), p.c_rs = s.n, p.c_cs = 1;
  return p;
}

void run_tessera(const GemmShape& s, const Operands& o) {
  gemm::gemm(row_major_problem(s, o.a, o.b, &o.c));
}

void run_openblas(const GemmShape& s, const Operands& o) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, o.a.data_ptr<float>(),
              s.k, o.b.data_ptr<float>(), s.n, 0.0f, o.c.data_ptr<float>(), s.n);
}

// ---------------------------------------------------------------- fused epilogues
// D = gelu(A B + bias) with the row sums of D, one GEMM returning both (gemm_epilogue), as
// float32 or bfloat16 D. Anchors: Tessera's bare GEMM (the overhead goal, <= 5%) and, at the
// output-heavy shapes, OpenBLAS sgemm followed by separate eager passes (bias add in place,
// gelu, row sum, and a conversion for bfloat16 output): the ATen way (goal: fused >= 1.25x).
struct FusedCase {
  GemmShape s;
  bool bf16_out = false;
  std::string name() const {
    return s.name() + (bf16_out ? "/bias_gelu_rowsum_bf16out" : "/bias_gelu_rowsum");
  }
};

// The operands of the GEMM (shared by all three contenders), the bias and the fused outputs.
// B is scaled by 3 / sqrt(k) so that A B has unit variance (A and B uniform on [-1, 1): each
// product has variance 1/9), the pre-activations of a layer initialised as PyTorch does. The
// cost of gelu depends on them: a vector whose lanes all lie in |x| < 3.5 takes normal_cdf's
// short form (core/vec_math.h). Unscaled, A B would have a standard deviation of sqrt(k) / 3
// (21 at k = 4096), and most vectors would take the long one.
struct FusedOperands {
  Operands gemm;
  Tensor bias, d, rowsum;
};

FusedOperands make_fused_operands(const FusedCase& f) {
  FusedOperands o{make_operands(f.s), empty({f.s.n}, kFloat32),
                  empty({f.s.m, f.s.n}, f.bf16_out ? kBFloat16 : kFloat32),
                  empty({f.s.m}, kFloat32)};
  o.gemm.b.mul_(3.0 / std::sqrt(static_cast<double>(f.s.k)));
  fill(o.bias, 4);
  return o;
}

void run_tessera_fused(const FusedCase& f, const FusedOperands& o) {
  const gemm::GemmProblem p = row_major_problem(f.s, o.gemm.a, o.gemm.b, nullptr);
  gemm::EpiloguePlan plan(f.s.m, f.s.n);
  const auto h = plan.add(plan.accumulator(), plan.row_vector(o.bias.data_ptr()));
  const auto g = plan.unary(gemm::EpilogueOp::GeluErf, h);
  plan.store(g, o.d.data_ptr(), f.s.n, 1, o.d.dtype());
  plan.reduce(g, gemm::EpilogueReduceKind::Sum, gemm::EpilogueAxis::Rows, o.rowsum.data_ptr());
  gemm::gemm_epilogue(p, plan);
}

void run_openblas_unfused(const FusedCase& f, const Operands& o, const Tensor& bias) {
  run_openblas(f.s, o);
  o.c.add_(bias);
  Tensor g = gelu(o.c);
  if (f.bf16_out) g = g.to(kBFloat16);
  Tensor s = g.sum({1});
}

std::vector<BenchRow> bench_fused(const std::vector<GemmShape>& shapes, const Turns& turns,
                                  const std::string& filter) {
  std::vector<FusedCase> cases;
  for (const auto& s : shapes) cases.push_back({s, false});
  std::vector<GemmShape> heavy = {{4096, 64, 4096}};
  if (!turns.quick) heavy.push_back({8192, 128, 8192});
  for (const auto& s : heavy)
    for (bool bf16 : {false, true}) cases.push_back({s, bf16});
  std::erase_if(cases,
                [&](const FusedCase& f) { return f.name().find(filter) == std::string::npos; });
  std::vector<BenchRow> rows;
  for (const auto& f : cases) {
    const FusedOperands fo = make_fused_operands(f);
    const Operands& o = fo.gemm;
    for (int t : turns.threads) {
      // The bare GEMM of the same shape takes turns with the fused one (the overhead goal), and
      // at the output-heavy shapes OpenBLAS followed by eager passes (the ATen way).
      std::vector<Contender> cs = {
          tessera_contender("tessera", t, [&] { run_tessera_fused(f, fo); }),
          tessera_contender("tessera-bare", t, [&] { run_tessera(f.s, o); })};
      if (f.s.k <= 128) {
        Contender ob = openblas_contender(t, [&] { run_openblas_unfused(f, o, fo.bias); });
        const auto enter = ob.enter;
        ob.enter = [=] { enter(), set_num_threads(t); };  // the eager passes run on our pool
        cs.push_back(ob);
      }
      for (auto& r : turns.take(f.name(), f.s.flops(), t, cs)) rows.push_back(std::move(r));
    }
  }
  return rows;
}

// ---------------------------------------------------------------- batched small products
// `batch` independent contiguous row-major products (gemm_strided_batched: small problems one
// per task), against OpenBLAS and BLIS called in a loop, oneDNN's batched matmul and
// torch.bmm, all into preallocated outputs.
struct BatchedShape {
  int64_t batch, m, k, n;
  std::string name() const { return fmt::format("bmm/float32/{}x{}x{}x{}", batch, m, k, n); }
  double flops() const { return 2.0 * batch * m * n * k; }
};

std::vector<BenchRow> bench_batched(const Turns& turns, const std::string& filter) {
  std::vector<BatchedShape> shapes = {{1000, 32, 32, 32}};
  std::erase_if(shapes,
                [&](const BatchedShape& s) { return s.name().find(filter) == std::string::npos; });
  std::vector<BenchRow> rows;
  std::string why;
  const BlisAnchor* blis = BlisAnchor::get(&why);
  const bool dnnl = DnnlMatmul::available(&why);
  for (const auto& s : shapes) {
    const GemmShape one{s.m, s.k, s.n};
    Operands o{empty({s.batch, s.m, s.k}, kFloat32), empty({s.batch, s.k, s.n}, kFloat32),
               empty({s.batch, s.m, s.n}, kFloat32)};
    fill(o.a, 1);
    fill(o.b, 2);
    const float *a = o.a.data_ptr<float>(), *b = o.b.data_ptr<float>();
    float* c = o.c.data_ptr<float>();
    const int64_t as = s.m * s.k, bs = s.k * s.n, cs = s.m * s.n;
    for (int t : turns.threads) {
      std::vector<Contender> contenders = {
          tessera_contender("tessera", t,
                            [&] {
                              gemm::gemm_strided_batched(row_major_problem(one, o.a, o.b, &o.c),
                                                         s.batch, as, bs, cs);
                            }),
          openblas_contender(t, [&] {
            for (int64_t i = 0; i < s.batch; ++i)
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f,
                          a + i * as, s.k, b + i * bs, s.n, 0.0f, c + i * cs, s.n);
          })};
      if (blis) {
        contenders.push_back(blis_contender(blis, t, [&] {
          for (int64_t i = 0; i < s.batch; ++i)
            blis->sgemm(s.m, s.n, s.k, a + i * as, b + i * bs, c + i * cs);
        }));
      }
      std::unique_ptr<DnnlMatmul> mm;
      if (dnnl) {
        DnnlMatmul::set_threads(t);
        mm = std::make_unique<DnnlMatmul>(s.m, s.k, s.n, kFloat32, kFloat32, false, b, s.batch);
        contenders.push_back(dnnl_contender("onednn", t, [&] { mm->run(a, c); }));
      }
      if (AnchorServer* torch = turns.torch(t)) contenders.push_back(script_contender(torch, t));
      for (auto& r : turns.take(s.name(), s.flops(), t, contenders)) rows.push_back(std::move(r));
    }
  }
  return rows;
}

void print_batched_table(const std::vector<BenchRow>& rows, const std::vector<int>& threads) {
  if (std::none_of(rows.begin(), rows.end(),
                   [](const BenchRow& r) { return r.case_name.starts_with("bmm/"); }))
    return;
  for (int t : threads) {
    std::printf(
        "\nbatched small products, %d thread%s (GFLOP/s; x = anchor time / Tessera time; "
        "OpenBLAS and BLIS called in a loop)\n",
        t, t == 1 ? "" : "s");
    std::printf("%-28s %9s %8s", "case", "ms", "GFLOP/s");
    for (const char* a : {"openblas", "blis", "onednn", "torch"}) std::printf(" %9s %6s", a, "x");
    std::printf("\n");
    for (const auto& r : rows) {
      if (r.impl != "tessera" || r.threads != t || !r.stats) continue;
      if (!r.case_name.starts_with("bmm/")) continue;
      std::string line =
          fmt::format("{:<28} {:9.3f} {:8.1f}", r.case_name, r.stats->median_s * 1e3, *r.gflops);
      for (const char* anchor : {"openblas", "blis", "onednn", "torch"}) {
        const BenchRow* a = find_row(rows, anchor, r.case_name, t);
        line += a && a->stats && a->gflops ? fmt::format(" {:9.1f} {:5.2f}x", *a->gflops,
                                                         a->stats->median_s / r.stats->median_s)
                                           : fmt::format(" {:>9} {:>6}", "skipped", "-");
      }
      std::printf("%s\n", line.c_str());
    }
  }
}

// One float32 shape at `t` threads: the FMA probe, Tessera (B packed per call, and prepacked
// once), OpenBLAS, BLIS, oneDNN (plain and prepacked weights) and PyTorch, in turns.
std::vector<BenchRow> bench_shape(const GemmShape& s, int t, const Turns& turns) {
  const Operands o = make_operands(s);
  const gemm::PackedB packed(ScalarType::Float32, s.k, s.n, o.b.data_ptr(), s.n, 1);
  const gemm::GemmProblem p = row_major_problem(s, o.a, o.b, &o.c);
  const PeakProbe peak = fma_peak_probe(t);
  std::vector<Contender> cs;
  if (peak.run) cs.push_back({.impl = "fma-peak", .run = peak.run});
  cs.push_back(tessera_contender("tessera", t, [&] { run_tessera(s, o); }));
  cs.push_back(tessera_contender("tessera-prepacked", t, [&] { gemm::gemm_prepacked(p, packed); }));
  cs.push_back(openblas_contender(t, [&] { run_openblas(s, o); }));
  std::string why;
  if (const BlisAnchor* blis = BlisAnchor::get(&why)) {
    cs.push_back(blis_contender(blis, t, [&, blis] {
      blis->sgemm(s.m, s.n, s.k, o.a.data_ptr<float>(), o.b.data_ptr<float>(),
                  o.c.data_ptr<float>());
    }));
  }
  std::vector<std::unique_ptr<DnnlMatmul>> dnnl;  // built at t threads (oneDNN plans for them)
  if (DnnlMatmul::available(&why)) {
    DnnlMatmul::set_threads(t);
    for (bool prepacked : {false, true}) {
      dnnl.push_back(std::make_unique<DnnlMatmul>(s.m, s.k, s.n, kFloat32, kFloat32, prepacked,
                                                  o.b.data_ptr()));
      DnnlMatmul* mm = dnnl.back().get();
      cs.push_back(dnnl_contender(prepacked ? "onednn-prepacked" : "onednn", t,
                                  [&o, mm] { mm->run(o.a.data_ptr(), o.c.data_ptr()); }));
    }
  }
  if (AnchorServer* torch = turns.torch(t)) cs.push_back(script_contender(torch, t));
  std::vector<BenchRow> rows = turns.take(s.name(), s.flops(), t, cs);
  for (auto& r : rows)
    if (r.impl == "fma-peak" && r.stats) r.gflops = peak.flops / r.stats->median_s / 1e9;
  return rows;
}

void print_table(const std::vector<GemmShape>& shapes, const std::vector<BenchRow>& rows,
                 const std::vector<int>& threads) {
  for (int t : threads) {
    double peak = NAN;
    std::string peak_name;
    for (const auto& r : rows)
      if (r.impl == "peak" && r.threads == t && r.gflops && r.case_name.starts_with("fma/")) {
        peak = *r.gflops;
        peak_name = r.case_name;
      }
    const BenchRow* bw = find_row(rows, "membw", "", t);
    std::printf(
        "\ngemm, %d thread%s: peak %.1f GFLOP/s (%s; %% peak is against the FMA loop "
        "timed in turns with each case); membw %.1f GB/s\n",
        t, t == 1 ? "" : "s", peak, peak_name.c_str(), bw && bw->gbps ? *bw->gbps : NAN);
    // Each anchor as "GFLOP/s ratio" (anchor median / Tessera median, higher is better).
    const char* anchors[] = {"openblas", "blis", "onednn", "onednn-prepacked", "torch"};
    std::printf("%-28s %9s %8s %7s %7s %9s %8s", "case", "ms", "GFLOP/s", "% peak", "x best",
                "prepacked", "x dnnl-pk");
    for (const char* a : {"openblas", "blis", "onednn", "dnnl-pk", "torch"})
      std::printf(" %9s %6s", a, "x");
    std::printf("\n");
    for (const auto& s : shapes) {
      const BenchRow* ts = find_row(rows, "tessera", s.name(), t);
      if (!ts || !ts->stats) continue;
      double best = NAN;  // the fastest plain-weights library
      for (const char* a : {"openblas", "blis", "onednn"})
        if (const BenchRow* r = find_row(rows, a, s.name(), t); r && r->stats)
          best = std::isnan(best) ? r->stats->median_s : std::min(best, r->stats->median_s);
      // % of the peak measured in the same turns (the run's `peak` row where it is missing).
      const BenchRow* turn_peak = find_row(rows, "fma-peak", s.name(), t, /*measured_only=*/true);
      const double limit = turn_peak ? *turn_peak->gflops : peak;
      std::string line = fmt::format("{:<28} {:9.3f} {:8.1f} {:6.1f}% {:6.2f}x", s.name(),
                                     ts->stats->median_s * 1e3, *ts->gflops,
                                     100 * *ts->gflops / limit, best / ts->stats->median_s);
      // Prepacked Tessera against prepacked oneDNN.
      const BenchRow* tp = find_row(rows, "tessera-prepacked", s.name(), t);
      const BenchRow* dp = find_row(rows, "onednn-prepacked", s.name(), t);
      line += tp && tp->stats ? fmt::format(" {:9.1f}", *tp->gflops) : fmt::format(" {:>9}", "-");
      line += tp && tp->stats && dp && dp->stats
                  ? fmt::format(" {:7.2f}x", dp->stats->median_s / tp->stats->median_s)
                  : fmt::format(" {:>8}", "-");
      for (const char* anchor : anchors) {
        const BenchRow* a = find_row(rows, anchor, s.name(), t);
        if (!a || !a->stats) {
          line += fmt::format(" {:>9} {:>6}", "skipped", "-");
        } else {
          line += fmt::format(" {:9.1f} {:5.2f}x", *a->gflops,
                              a->stats->median_s / ts->stats->median_s);
        }
      }
      std::printf("%s\n", line.c_str());
    }
  }
}

void print_fused_table(const std::vector<BenchRow>& rows, const std::vector<int>& threads) {
  for (int t : threads) {
    std::printf(
        "\nfused bias+gelu+rowsum, %d thread%s (overhead: fused / bare GEMM of the same "
        "shape; x openblas: sgemm + eager bias/gelu/sum passes / fused)\n",
        t, t == 1 ? "" : "s");
    std::printf("%-52s %9s %8s %9s %10s\n", "case", "ms", "GFLOP/s", "overhead", "x openblas");
    for (const auto& r : rows) {
      if (r.impl != "tessera" || r.threads != t || !r.stats) continue;
      if (r.case_name.find("/bias_gelu") == std::string::npos) continue;
      const BenchRow* bare = find_row(rows, "tessera-bare", r.case_name, t);
      if (!bare)
        bare = find_row(rows, "tessera", r.case_name.substr(0, r.case_name.find("/bias")), t);
      const BenchRow* ob = find_row(rows, "openblas", r.case_name, t);
      std::string line =
          fmt::format("{:<52} {:9.3f} {:8.1f}", r.case_name, r.stats->median_s * 1e3, *r.gflops);
      line += bare && bare->stats
                  ? fmt::format(" {:8.1f}%", 100 * (r.stats->median_s / bare->stats->median_s - 1))
                  : fmt::format(" {:>9}", "-");
      line += ob && ob->stats ? fmt::format(" {:9.2f}x", ob->stats->median_s / r.stats->median_s)
                              : fmt::format(" {:>10}", "-");
      std::printf("%s\n", line.c_str());
    }
  }
}

}  // namespace

int run_bench_gemm(const BenchOptions& options) {
  Turns turns;
  turns.threads = options.threads.empty() ? default_threads() : options.threads;
  turns.quick = options.quick;
  // Each turn: a warm-up call (skipped while every call so far took 50 ms or more) and at least one
  // timed repetition within 30 ms; a case's median is over all its turns.
  turns.rounds = options.quick ? 5 : 11;
  turns.turn = Budget{1, 0.03, 2000};
  const int saved_threads = get_num_threads();
  std::vector<GemmShape> shapes = make_shapes(options.quick);
  const std::vector<GemmShape> all_shapes = shapes;  // the fused cases filter by their own names
  std::erase_if(shapes, [&](const GemmShape& s) {
    return s.name().find(options.filter) == std::string::npos;
  });
  std::vector<BenchRow> rows;
  for (int t : turns.threads) {
    rows.push_back(measure_membw("gemm", t, Budget{3, 0.2, 10}));
    for (auto& r : measure_peak("gemm", t)) rows.push_back(r);
  }

  std::vector<std::string> notes;
  notes.push_back(openblas_kernel_note());
  std::string why;
  if (const BlisAnchor* blis = BlisAnchor::get(&why))
    notes.push_back(blis->note());
  else
    notes.push_back("blis skipped: " + why);
  if (!DnnlMatmul::available(&why)) notes.push_back("onednn skipped: " + why);
  std::string cases;
  for (const auto& s : shapes)
    cases += fmt::format("{}{}x{}x{}", cases.empty() ? "" : ",", s.m, s.k, s.n);
  turns.torch_servers =
      lockstep_per_thread_count("torch_gemm.py", {"--cases", cases.empty() ? "1x1x1" : cases},
                                turns.threads, turns.turn, "torch");

  size_t done = 0;
  for (const auto& s : shapes) {
    std::fprintf(stderr, "bench gemm: [%zu/%zu] %s\n", ++done, shapes.size(), s.name().c_str());
    for (int t : turns.threads)
      for (auto& r : bench_shape(s, t, turns)) rows.push_back(std::move(r));
  }
  for (auto& r : bench_fused(all_shapes, turns, options.filter)) rows.push_back(std::move(r));
  for (auto& r : bench_batched(turns, options.filter)) rows.push_back(std::move(r));
  set_num_threads(saved_threads);
  for (const auto& [t, server] : turns.torch_servers)
    if (!server->note().empty()) notes.push_back(server->note());
  turns.torch_servers.clear();  // the scripts end before the low-precision suite's anchors run
  for (const auto& r : rows)
    if (!r.skipped.empty() && r.impl != "peak")
      notes.push_back(
          fmt::format("{} {} ({} threads) skipped: {}", r.impl, r.case_name, r.threads, r.skipped));

  print_table(shapes, rows, turns.threads);
  print_fused_table(rows, turns.threads);
  print_batched_table(rows, turns.threads);
  bench_gemm_lowp(options, turns, rows, notes);
  return finish_bench("gemm", notes, options.json_path, rows);
}

}  // namespace tessera::cli
