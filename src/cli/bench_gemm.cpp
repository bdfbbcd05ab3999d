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
// Threads: Tessera's pool at each thread count; OpenBLAS with openblas_set_num_threads(t)
// (restored to 1 afterwards: Tessera's other OpenBLAS calls assume one thread), BLIS and oneDNN
// (both OpenMP) with their own thread setters, all run after every Tessera row so their
// spinning workers cannot disturb ours; PyTorch with set_num_threads(t)
// and OPENBLAS_NUM_THREADS=t (see below).
// A note says which OpenBLAS kernel ran (OPENBLAS_CORETYPE in the environment overrides its
// cpuid choice). "% peak" is GFLOP/s over the `peak` row (AVX-512 or AVX2 FMA loop) of the same
// thread count; "x openblas" / "x torch" are anchor median / Tessera median (higher is better).
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_anchors.h"
#include "cli/bench_gemm_lowp.h"
#include "cli/bench_util.h"
#include "gemm/epilogue.h"
#include "gemm/gemm.h"
#include "tessera/tessera.h"

namespace tessera::cli {
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

struct FusedOperands {
  Tensor a, b, bias, d, rowsum;
};

FusedOperands make_fused_operands(const FusedCase& f) {
  FusedOperands o{
      empty({f.s.m, f.s.k}, kFloat32), empty({f.s.k, f.s.n}, kFloat32), empty({f.s.n}, kFloat32),
      empty({f.s.m, f.s.n}, f.bf16_out ? kBFloat16 : kFloat32), empty({f.s.m}, kFloat32)};
  fill(o.a, 1);
  fill(o.b, 2);
  fill(o.bias, 4);
  return o;
}

void run_tessera_fused(const FusedCase& f, const FusedOperands& o) {
  const gemm::GemmProblem p = row_major_problem(f.s, o.a, o.b, nullptr);
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

std::vector<BenchRow> bench_fused(const std::vector<GemmShape>& shapes, bool quick,
                                  const std::vector<int>& threads, const Budget& budget,
                                  const std::string& filter) {
  std::vector<FusedCase> cases;
  for (const auto& s : shapes) cases.push_back({s, false});
  std::vector<GemmShape> heavy = {{4096, 64, 4096}};
  if (!quick) heavy.push_back({8192, 128, 8192});
  for (const auto& s : heavy)
    for (bool bf16 : {false, true}) cases.push_back({s, bf16});
  std::erase_if(cases,
                [&](const FusedCase& f) { return f.name().find(filter) == std::string::npos; });
  std::vector<BenchRow> rows;
  const int saved = get_num_threads();
  for (const auto& f : cases) {
    const bool anchor = f.s.k <= 128;  // the output-heavy shapes
    const FusedOperands fo = make_fused_operands(f);
    for (int t : threads) {
      set_num_threads(t);
      BenchRow row{"gemm", f.name(), "tessera", t};
      row.stats = measure([&] { run_tessera_fused(f, fo); }, budget);
      row.gflops = f.s.flops() / row.stats->median_s / 1e9;
      rows.push_back(row);
      std::fprintf(stderr, "bench gemm: %s tessera %d thread(s): %.1f GFLOP/s\n", f.name().c_str(),
                   t, *row.gflops);
      // The bare GEMM of the same shape, measured right after (this machine is shared: an
      // adjacent pair compares better than the main table's row from minutes earlier).
      const Operands o = make_operands(f.s);
      BenchRow bare{"gemm", f.name(), "tessera-bare", t};
      bare.stats = measure([&] { run_tessera(f.s, o); }, budget);
      bare.gflops = f.s.flops() / bare.stats->median_s / 1e9;
      rows.push_back(bare);
    }
    set_num_threads(saved);
    if (!anchor) continue;
    const Operands o = make_operands(f.s);
    for (int t : threads) {
      set_num_threads(t);
      openblas_set_num_threads(t);
      BenchRow row{"gemm", f.name(), "openblas", t};
      row.stats = measure([&] { run_openblas_unfused(f, o, fo.bias); }, budget);
      row.gflops = f.s.flops() / row.stats->median_s / 1e9;
      rows.push_back(row);
    }
    openblas_set_num_threads(1);
    set_num_threads(saved);
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

std::vector<BenchRow> bench_batched(const std::vector<int>& threads, const Budget& budget,
                                    const std::string& filter, std::vector<std::string>& notes) {
  std::vector<BatchedShape> shapes = {{1000, 32, 32, 32}};
  std::erase_if(shapes,
                [&](const BatchedShape& s) { return s.name().find(filter) == std::string::npos; });
  std::vector<BenchRow> rows;
  if (shapes.empty()) return rows;
  std::string why;
  const BlisAnchor* blis = BlisAnchor::get(&why);
  const bool dnnl = DnnlMatmul::available(&why);
  const int saved = get_num_threads();
  for (const auto& s : shapes) {
    const GemmShape one{s.m, s.k, s.n};
    Operands o{empty({s.batch, s.m, s.k}, kFloat32), empty({s.batch, s.k, s.n}, kFloat32),
               empty({s.batch, s.m, s.n}, kFloat32)};
    fill(o.a, 1);
    fill(o.b, 2);
    const float *a = o.a.data_ptr<float>(), *b = o.b.data_ptr<float>();
    float* c = o.c.data_ptr<float>();
    const int64_t as = s.m * s.k, bs = s.k * s.n, cs = s.m * s.n;
    auto add = [&](const char* impl, int t, const std::function<void()>& fn) {
      BenchRow row{"gemm", s.name(), impl, t};
      row.stats = measure(fn, budget);
      row.gflops = s.flops() / row.stats->median_s / 1e9;
      rows.push_back(row);
    };
    for (int t : threads) {
      set_num_threads(t);
      add("tessera", t, [&] {
        gemm::gemm_strided_batched(row_major_problem(one, o.a, o.b, &o.c), s.batch, as, bs, cs);
      });
    }
    set_num_threads(saved);
    for (int t : threads) {  // anchors after every Tessera row (their workers spin afterwards)
      openblas_set_num_threads(t);
      add("openblas", t, [&] {
        for (int64_t i = 0; i < s.batch; ++i)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a + i * as,
                      s.k, b + i * bs, s.n, 0.0f, c + i * cs, s.n);
      });
      openblas_set_num_threads(1);
      if (blis) {
        blis->set_threads(t);
        add("blis", t, [&] {
          for (int64_t i = 0; i < s.batch; ++i)
            blis->sgemm(s.m, s.n, s.k, a + i * as, b + i * bs, c + i * cs);
        });
        blis->set_threads(1);
      }
      if (dnnl) {
        DnnlMatmul::set_threads(t);
        DnnlMatmul mm(s.m, s.k, s.n, kFloat32, kFloat32, false, b, s.batch);
        add("onednn", t, [&] { mm.run(a, c); });
      }
    }
    for (auto& r : run_torch_anchor("torch_gemm.py",
                                    {"--cases", fmt::format("{}x{}x{}x{}", s.batch, s.m, s.k, s.n)},
                                    threads, budget, "torch", notes)) {
      if (r.case_name == s.name() && r.stats) r.gflops = s.flops() / r.stats->median_s / 1e9;
      rows.push_back(r);
    }
  }
  return rows;
}

void print_batched_table(const std::vector<BenchRow>& rows, const std::vector<int>& threads) {
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

// BLIS and oneDNN (plain and prepacked weights) on the float32 shapes, after every Tessera row.
std::vector<BenchRow> bench_other_anchors(const std::vector<GemmShape>& shapes,
                                          const std::vector<int>& threads, const Budget& budget,
                                          std::vector<std::string>& notes) {
  std::vector<BenchRow> rows;
  auto add = [&](const GemmShape& s, const char* impl, int t, const std::function<void()>& fn) {
    BenchRow row{"gemm", s.name(), impl, t};
    row.stats = measure(fn, budget);
    row.gflops = s.flops() / row.stats->median_s / 1e9;
    rows.push_back(row);
  };
  std::string why;
  if (const BlisAnchor* blis = BlisAnchor::get(&why)) {
    if (!shapes.empty()) notes.push_back(blis->note());
    for (int t : threads) {
      blis->set_threads(t);
      for (const auto& s : shapes) {
        const Operands o = make_operands(s);
        add(s, "blis", t, [&] {
          blis->sgemm(s.m, s.n, s.k, o.a.data_ptr<float>(), o.b.data_ptr<float>(),
                      o.c.data_ptr<float>());
        });
      }
    }
    blis->set_threads(1);
  } else if (!shapes.empty()) {
    notes.push_back("blis skipped: " + why);
  }
  if (DnnlMatmul::available(&why)) {
    for (int t : threads) {
      DnnlMatmul::set_threads(t);
      for (const auto& s : shapes) {
        const Operands o = make_operands(s);
        for (bool prepacked : {false, true}) {
          DnnlMatmul mm(s.m, s.k, s.n, kFloat32, kFloat32, prepacked, o.b.data_ptr());
          add(s, prepacked ? "onednn-prepacked" : "onednn", t,
              [&] { mm.run(o.a.data_ptr(), o.c.data_ptr()); });
        }
      }
    }
  } else if (!shapes.empty()) {
    notes.push_back("onednn skipped: " + why);
  }
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
    std::printf("\ngemm, %d thread%s: peak %.1f GFLOP/s (%s); membw %.1f GB/s\n", t,
                t == 1 ? "" : "s", peak, peak_name.c_str(), bw && bw->gbps ? *bw->gbps : NAN);
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
      std::string line = fmt::format("{:<28} {:9.3f} {:8.1f} {:6.1f}% {:6.2f}x", s.name(),
                                     ts->stats->median_s * 1e3, *ts->gflops,
                                     100 * *ts->gflops / peak, best / ts->stats->median_s);
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
  const std::vector<int> threads = options.threads.empty() ? default_threads() : options.threads;
  const Budget budget = options.quick ? Budget{3, 0.2, 20} : Budget{5, 1.0, 50};
  const int saved_threads = get_num_threads();
  std::vector<GemmShape> shapes = make_shapes(options.quick);
  const std::vector<GemmShape> all_shapes = shapes;  // the fused cases filter by their own names
  std::erase_if(shapes, [&](const GemmShape& s) {
    return s.name().find(options.filter) == std::string::npos;
  });
  std::vector<BenchRow> rows;

  for (int t : threads) {
    rows.push_back(measure_membw("gemm", t, Budget{3, 0.2, 10}));
    for (auto& r : measure_peak("gemm", t)) rows.push_back(r);
  }

  for (const auto& s : shapes) {
    const Operands o = make_operands(s);
    for (int t : threads) {
      set_num_threads(t);
      BenchRow row{"gemm", s.name(), "tessera", t};
      row.stats = measure([&] { run_tessera(s, o); }, budget);
      row.gflops = s.flops() / row.stats->median_s / 1e9;
      std::fprintf(stderr, "bench gemm: %s tessera %d thread(s): %.1f GFLOP/s\n", s.name().c_str(),
                   t, *row.gflops);
      rows.push_back(row);
      // The same product with B packed once beforehand (a Linear weight's case).
      const gemm::PackedB packed(ScalarType::Float32, s.k, s.n, o.b.data_ptr(), s.n, 1);
      gemm::GemmProblem p = row_major_problem(s, o.a, o.b, &o.c);
      BenchRow pk{"gemm", s.name(), "tessera-prepacked", t};
      pk.stats = measure([&] { gemm::gemm_prepacked(p, packed); }, budget);
      pk.gflops = s.flops() / pk.stats->median_s / 1e9;
      rows.push_back(pk);
    }
    set_num_threads(saved_threads);
  }
  for (auto& r : bench_fused(all_shapes, options.quick, threads, budget, options.filter))
    rows.push_back(r);
  // OpenBLAS after every Tessera row: its threads spin for a while after each call.
  for (int t : threads) {
    openblas_set_num_threads(t);
    for (const auto& s : shapes) {
      const Operands o = make_operands(s);
      BenchRow row{"gemm", s.name(), "openblas", t};
      row.stats = measure([&] { run_openblas(s, o); }, budget);
      row.gflops = s.flops() / row.stats->median_s / 1e9;
      rows.push_back(row);
    }
  }
  openblas_set_num_threads(1);

  std::vector<std::string> notes;
  notes.push_back(openblas_kernel_note());
  for (auto& r : bench_other_anchors(shapes, threads, budget, notes)) rows.push_back(r);
  std::string cases;
  for (const auto& s : shapes) {
    if (!cases.empty()) cases += ',';
    cases += fmt::format("{}x{}x{}", s.m, s.k, s.n);
  }
  if (!shapes.empty()) {
    for (auto& r :
         run_torch_anchor("torch_gemm.py", {"--cases", cases}, threads, budget, "torch", notes)) {
      for (const auto& s : shapes)
        if (r.case_name == s.name() && r.stats) r.gflops = s.flops() / r.stats->median_s / 1e9;
      rows.push_back(r);
    }
  }

  const std::vector<BenchRow> batched = bench_batched(threads, budget, options.filter, notes);
  rows.insert(rows.end(), batched.begin(), batched.end());

  print_table(shapes, rows, threads);
  print_fused_table(rows, threads);
  print_batched_table(rows, threads);
  bench_gemm_lowp(options, threads, budget, rows, notes);
  return finish_bench("gemm", notes, options.json_path, rows);
}

}  // namespace tessera::cli
