// `tessera bench gemv`: the bandwidth-bound GEMV path (issue 3's decode goals). Weights much
// larger than the L3 cache, W [N, K] = 8192x8192 and 4096x14336, in float32, bfloat16,
// float16, float8_e4m3fn and NVFP4 (float4 e2m1 with float8 block scales per 16 values),
// times one float32 activation vector, at each thread count:
//
//   tessera          gemm::gemv on the weight in its own format (the direct call)
//   tessera-linear   the eager op a decode step calls: linear on a [1, 1, K] input (float32,
//                    bfloat16, float16), linear_scaled for float8 / NVFP4 weights
//   openblas         cblas_sgemv (float32), in process
//   onednn           oneDNN's matmul with M = 1 on the weight as a transposed B (float32, and
//                    bfloat16 with a bfloat16 activation), in process; onednn-prepacked the same
//                    on weights reordered once into oneDNN's layout
//   torch            PyTorch 1.13 F.linear on [1, 1, K] (float32, bfloat16), bench/torch_gemv.py
//                    in lockstep, one script per thread count with OPENBLAS_NUM_THREADS set
//
// They take turns on each case (take_turns), each turn a warm-up call and one repetition, and
// the streaming read loop (ReadProbe) runs before each of Tessera's repetitions.
// GB/s counts the bytes of the weight (block scales included): the traffic that bounds a
// decode step; "% bw" divides by the read bandwidth measured between the case's own
// repetitions, since on a shared machine what a neighbour leaves drifts by 20% within a
// minute (the header's `membw` row is the run's, measured first); Gelem/s
// is weight elements per second, the rate at which a low-precision format serves a model.
// Also: float32 mm with M = 1, 2, 4 (GEMV path) and 8 (packed GEMM) at 4096x4096, to show
// where the engine's "m <= 4 goes to GEMV" rule stands; and the dense dtypes' matrix-vector
// products through the eager matmul, A [4096, 4096] row-major in float64, complex64 and
// complex128: `mv/<dtype>/4096x4096` (A x: the rows form) and `vm/...` (x^T A: the columns
// form), against OpenBLAS's ?gemv (NoTrans / Trans on the same A) and PyTorch 1.13's matmul,
// in turns; GB/s counts A's bytes.
#include <cblas.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_anchors.h"
#include "cli/bench_util.h"
#include "gemm/gemm.h"
#include "gemm/gemv.h"
#include "tessera/tessera.h"

namespace tessera::cli {
namespace {

struct Shape {
  int64_t n, k;
};

struct Format {
  const char* name;  // the dtype's name in case strings
  gemm::WeightFormat format;
  ScalarType dtype;
};

const Format kFormats[] = {
    {"float32", gemm::WeightFormat::Float32, kFloat32},
    {"bfloat16", gemm::WeightFormat::BFloat16, kBFloat16},
    {"float16", gemm::WeightFormat::Float16, kFloat16},
    {"float8_e4m3fn", gemm::WeightFormat::Float8_e4m3fn, kFloat8_e4m3fn},
    {"nvfp4", gemm::WeightFormat::NVFP4, kFloat4_e2m1fn_x2},
};

std::string case_name(const Format& f, const Shape& s) {
  return fmt::format("gemv/{}/{}x{}", f.name, s.n, s.k);
}

// Weight bytes a call reads (NVFP4: K/2 bytes of values and K/16 scale bytes per row).
double weight_bytes(const Format& f, const Shape& s) {
  const double elems = static_cast<double>(s.n) * static_cast<double>(s.k);
  if (f.format == gemm::WeightFormat::NVFP4) return elems / 2 + elems / 16;
  return elems * static_cast<double>(element_size(f.dtype));
}

// Deterministic bytes: a cheap hash per index.
uint32_t hash(uint64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return h;
}

struct Operands {
  Tensor w, scales, x, y, scale_one;
};

Operands make_operands(const Format& f, const Shape& s) {
  Operands o;
  if (f.format == gemm::WeightFormat::NVFP4) {
    o.w = empty({s.n, s.k / 2}, kFloat4_e2m1fn_x2);
    o.scales = empty({s.n, s.k / gemm::kNvfp4Block}, kFloat8_e4m3fn);
    auto* wp = static_cast<uint8_t*>(o.w.data_ptr());
    auto* sp = static_cast<uint8_t*>(o.scales.data_ptr());
    for (int64_t e = 0; e < o.w.numel(); ++e) wp[e] = static_cast<uint8_t>(hash(e, 1));
    for (int64_t e = 0; e < o.scales.numel(); ++e)
      sp[e] = static_cast<uint8_t>(0x30 + hash(e, 2) % 16);
  } else {
    // Floating weights are uniform in [-1, 1) as the anchors draw them (random bit patterns
    // would make bfloat16 weights denormal-heavy, and every FMA on a denormal product traps
    // to microcode); float8 codes with a clear top exponent bit are finite.
    if (f.dtype == kFloat32 || f.dtype == kBFloat16 || f.dtype == kFloat16) {
      Tensor w = empty({s.n, s.k}, kFloat32);
      float* p = w.data_ptr<float>();
      for (int64_t e = 0; e < w.numel(); ++e)
        p[e] = static_cast<float>(hash(e, 4) >> 8) * (2.0f / 16777216.0f) - 1.0f;
      o.w = f.dtype == kFloat32 ? w : w.to(f.dtype);
    } else {
      o.w = empty({s.n, s.k}, f.dtype);
      auto* wp = static_cast<uint8_t*>(o.w.data_ptr());
      const int64_t bytes = o.w.numel() * element_size(f.dtype);
      for (int64_t e = 0; e < bytes; ++e) wp[e] = static_cast<uint8_t>(hash(e, 3) & 0xb7);
    }
  }
  o.x = empty({1, 1, s.k}, kFloat32);
  float* xp = o.x.data_ptr<float>();
  for (int64_t e = 0; e < s.k; ++e)
    xp[e] = static_cast<float>(hash(e, 5) >> 8) * (2.0f / 16777216.0f) - 1.0f;
  o.y = empty({s.n}, kFloat32);
  o.scale_one = full({}, 1.0, kFloat32);
  return o;
}

void run_direct(const Format& f, const Shape& s, const Operands& o) {
  gemm::GemvProblem p;
  p.format = f.format;
  p.n = s.n, p.k = s.k;
  p.w = o.w.data_ptr(), p.w_rs = o.w.stride(0), p.w_cs = 1;
  if (f.format == gemm::WeightFormat::NVFP4) {
    p.block_scales = static_cast<const uint8_t*>(o.scales.data_ptr());
    p.scale_rs = o.scales.stride(0);
  }
  p.x = o.x.data_ptr(), p.y = o.y.data_ptr<float>();
  gemm::gemv(p);
}

// What a decode step calls: linear / linear_scaled on the [1, 1, K] activation.
Tensor run_linear(const Format& f, const Operands& o, const Tensor& x) {
  if (f.format == gemm::WeightFormat::NVFP4) return linear_scaled(x, o.w, o.scales, 1.0);
  if (f.format == gemm::WeightFormat::Float8_e4m3fn) return linear_scaled(x, o.w, o.scale_one);
  return linear(x, o.w);
}

void print_table(const std::vector<Shape>& shapes, const std::vector<BenchRow>& rows,
                 const std::vector<int>& threads) {
  for (int t : threads) {
    const BenchRow* bw = find_row(rows, "membw", "", t, /*measured_only=*/true);
    const double membw = bw && bw->gbps ? *bw->gbps : NAN;
    std::printf(
        "\ngemv, %d thread%s: membw %.1f GB/s (weight bytes per second; Gelem/s = "
        "weight elements per second)\n",
        t, t == 1 ? "" : "s", membw);
    std::printf("%-28s %8s %7s %7s %8s %8s %8s %8s %8s %8s %8s %9s %8s %9s\n", "case", "ms", "GB/s",
                "% bw", "Gelem/s", "openblas", "x oblas", "onednn", "x dnnl", "dnnl-pk", "x pk",
                "torch", "x torch", "linear/gv");
    for (const auto& s : shapes)
      for (const auto& f : kFormats) {
        const std::string c = case_name(f, s);
        const BenchRow* ts = find_row(rows, "tessera", c, t, /*measured_only=*/true);
        if (!ts) continue;
        const double elems = static_cast<double>(s.n) * static_cast<double>(s.k);
        // % of the bandwidth read between this case's own repetitions (the run's row if none).
        const double limit = ts->membw_gbps ? *ts->membw_gbps : membw;
        std::string line =
            fmt::format("{:<28} {:8.3f} {:7.1f} {:6.1f}% {:8.2f}", c, ts->stats->median_s * 1e3,
                        *ts->gbps, 100 * *ts->gbps / limit, elems / ts->stats->median_s / 1e9);
        for (const char* anchor : {"openblas", "onednn", "onednn-prepacked", "torch"}) {
          const BenchRow* a = find_row(rows, anchor, c, t, /*measured_only=*/true);
          if (!a) {
            line += fmt::format(" {:>8} {:>8}", "-", "-");
          } else {
            line += fmt::format(" {:8.1f} {:7.2f}x", *a->gbps,
                                a->stats->median_s / ts->stats->median_s);
          }
        }
        const BenchRow* lin = find_row(rows, "tessera-linear", c, t, /*measured_only=*/true);
        line += lin ? fmt::format(" {:8.2f}x", lin->stats->median_s / ts->stats->median_s)
                    : fmt::format(" {:>9}", "-");
        std::printf("%s\n", line.c_str());
      }
    for (const auto& r : rows) {
      if (r.threads != t || r.impl != "tessera" || !r.stats) continue;
      if (!r.case_name.starts_with("mv/") && !r.case_name.starts_with("vm/")) continue;
      std::string line =
          fmt::format("{:<28} {:8.3f} {:7.1f} GB/s", r.case_name, r.stats->median_s * 1e3, *r.gbps);
      for (const char* anchor : {"openblas", "torch"}) {
        const BenchRow* a = find_row(rows, anchor, r.case_name, t, /*measured_only=*/true);
        line += a ? fmt::format("  {} {:.1f} GB/s {:.2f}x", anchor, *a->gbps,
                                a->stats->median_s / r.stats->median_s)
                  : fmt::format("  {} -", anchor);
      }
      std::printf("%s\n", line.c_str());
    }
    for (const auto& r : rows)
      if (r.threads == t && r.impl == "tessera" &&
          (r.case_name.starts_with("mm/") || r.case_name.starts_with("linear/")) && r.stats)
        std::printf("%-28s %8.3f %7.1f GB/s of B, %.1f GFLOP/s\n", r.case_name.c_str(),
                    r.stats->median_s * 1e3, *r.gbps, *r.gflops);
  }
}

// The dense dtypes' matrix-vector products (file comment): A x or x^T A through matmul.
struct DenseCase {
  ScalarType dtype;
  bool rows;  // A x (mv) or x^T A (vm)
  std::string name(int64_t n) const {
    return fmt::format("{}/{}/{}x{}", rows ? "mv" : "vm", dtype_name(dtype), n, n);
  }
};

void openblas_dense_gemv(const DenseCase& c, int64_t n, const Tensor& a, const Tensor& x,
                         const Tensor& y) {
  const auto op = c.rows ? CblasNoTrans : CblasTrans;
  if (c.dtype == kFloat64) {
    cblas_dgemv(CblasRowMajor, op, n, n, 1.0, a.data_ptr<double>(), n, x.data_ptr<double>(), 1, 0.0,
                y.data_ptr<double>(), 1);
  } else if (c.dtype == kComplex64) {
    const std::complex<float> one(1), zero(0);
    cblas_cgemv(CblasRowMajor, op, n, n, &one, a.data_ptr(), n, x.data_ptr(), 1, &zero,
                y.data_ptr(), 1);
  } else {
    const std::complex<double> one(1), zero(0);
    cblas_zgemv(CblasRowMajor, op, n, n, &one, a.data_ptr(), n, x.data_ptr(), 1, &zero,
                y.data_ptr(), 1);
  }
}

}  // namespace

int run_bench_gemv(const BenchOptions& options) {
  const std::vector<int> threads = options.threads.empty() ? default_threads() : options.threads;
  const Budget budget = options.quick ? Budget{5, 0.3, 30} : Budget{10, 1.0, 100};
  // Each GEMV case takes `rounds` turns of Tessera (the read probe before each repetition),
  // Tessera's linear, OpenBLAS and PyTorch, each turn a warm-up call and one repetition.
  const int rounds = options.quick ? 5 : 11;
  const Budget turn{1, 0, 1};
  const int saved_threads = get_num_threads();
  const std::vector<Shape> shapes = {{8192, 8192}, {4096, 14336}};
  auto wanted = [&](const std::string& c) { return c.find(options.filter) != std::string::npos; };
  std::vector<BenchRow> rows;
  for (int t : threads) rows.push_back(measure_membw("gemv", t, Budget{3, 0.2, 10}));

  std::string cases;
  for (const auto& s : shapes) {
    if (!wanted(case_name(kFormats[0], s)) && !wanted(case_name(kFormats[1], s))) continue;
    cases += fmt::format("{}{}x{}", cases.empty() ? "" : ",", s.n, s.k);
  }
  constexpr int64_t kDenseN = 4096;
  std::vector<DenseCase> dense;
  for (ScalarType dt : {kFloat64, kComplex64, kComplex128})
    for (bool rows_form : {true, false})
      if (wanted(DenseCase{dt, rows_form}.name(kDenseN))) dense.push_back({dt, rows_form});
  // PyTorch in lockstep, one script per thread count (its OpenBLAS reads the count at load).
  std::map<int, std::unique_ptr<AnchorServer>> torch;
  if (!cases.empty() || !dense.empty())
    torch = lockstep_per_thread_count("torch_gemv.py", {"--cases", cases}, threads, turn, "torch");

  for (int t : threads) {
    const ReadProbe probe(t);
    for (const auto& s : shapes)
      for (const auto& f : kFormats) {
        const std::string c = case_name(f, s);
        if (!wanted(c)) continue;
        const Operands o = make_operands(f, s);
        const Tensor x = f.dtype == kBFloat16 || f.dtype == kFloat16 ? o.x.to(f.dtype) : o.x;
        std::vector<double> probe_times;
        std::vector<Contender> cs = {
            tessera_contender(
                "tessera", t, [&] { run_direct(f, s, o); },
                [&] { probe_times.push_back(probe.timed_run()); }),
            tessera_contender("tessera-linear", t, [&] { run_linear(f, o, x); })};
        if (f.format == gemm::WeightFormat::Float32) {
          cs.push_back(openblas_contender(t, [&] {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, s.n, s.k, 1.0f, o.w.data_ptr<float>(), s.k,
                        o.x.data_ptr<float>(), 1, 0.0f, o.y.data_ptr<float>(), 1);
          }));
        }
        // oneDNN's matmul on the [N, K] weight as a transposed B, with plain and with
        // prepacked weights (reordered once into its own layout), float32 and bfloat16 (with
        // a bfloat16 activation, as oneDNN's bf16 matmul takes).
        std::vector<std::unique_ptr<DnnlMatmul>> dnnl;
        std::string why;
        if ((f.dtype == kFloat32 || f.dtype == kBFloat16) && DnnlMatmul::available(&why)) {
          DnnlMatmul::set_threads(t);
          run_direct(f, s, o);
          const Tensor ours = o.y.clone();
          for (bool prepacked : {false, true}) {
            dnnl.push_back(std::make_unique<DnnlMatmul>(1, s.k, s.n, f.dtype, kFloat32, prepacked,
                                                        o.w.data_ptr(), 1, /*b_transposed=*/true));
            DnnlMatmul* mm = dnnl.back().get();
            // The anchor must compute the same product: its result against ours, normwise (a
            // bfloat16 activation on its side).
            mm->run(x.data_ptr(), o.y.data_ptr());
            const double err = (o.y - ours).norm().item<double>() / ours.norm().item<double>();
            TS_CHECK(err < (f.dtype == kFloat32 ? 1e-5 : 1e-2), RuntimeError,
                     "bench gemv: oneDNN's {} differs from Tessera's by {:.2e} (normwise)", c, err);
            cs.push_back(dnnl_contender(prepacked ? "onednn-prepacked" : "onednn", t,
                                        [&x, &o, mm] { mm->run(x.data_ptr(), o.y.data_ptr()); }));
          }
        }
        if (torch.count(t)) cs.push_back(script_contender(torch[t].get(), t));
        for (auto& r : take_turns("gemv", c, t, rounds, turn, cs)) {
          if (r.stats) {
            r.gbps = weight_bytes(f, s) / r.stats->median_s / 1e9;
            r.gflops = 2.0 * s.n * s.k / r.stats->median_s / 1e9;
          }
          if (r.impl == "tessera" && r.stats) {
            r.membw_gbps = probe.bytes_read() / stats_of(probe_times).median_s / 1e9;
            std::fprintf(stderr,
                         "bench gemv: %s %d thread(s): tessera %.1f GB/s (%.0f%% of %.1f)\n",
                         c.c_str(), t, *r.gbps, 100 * *r.gbps / *r.membw_gbps, *r.membw_gbps);
          }
          rows.push_back(std::move(r));
        }
      }
  }
  for (const DenseCase& c : dense) {
    const std::string name = c.name(kDenseN);
    const Tensor a = randn({kDenseN, kDenseN}, c.dtype), x = randn({kDenseN}, c.dtype);
    const Tensor y = empty({kDenseN}, c.dtype);
    // The anchor must compute the same product: OpenBLAS's against ours, relative to the
    // largest output.
    const Tensor ours = c.rows ? matmul(a, x) : matmul(x, a);
    openblas_dense_gemv(c, kDenseN, a, x, y);
    const double err = (y - ours).abs().max().item<double>() / ours.abs().max().item<double>();
    TS_CHECK(err < (c.dtype == kComplex64 ? 1e-4 : 1e-10), RuntimeError,
             "bench gemv: OpenBLAS's {} differs from Tessera's by {:.2e} (of the largest output)",
             name, err);
    for (int t : threads) {
      std::vector<Contender> cs = {
          tessera_contender("tessera", t, [&] { (void)(c.rows ? matmul(a, x) : matmul(x, a)); }),
          openblas_contender(t, [&] { openblas_dense_gemv(c, kDenseN, a, x, y); })};
      if (torch.count(t)) cs.push_back(script_contender(torch[t].get(), t));
      for (auto& r : take_turns("gemv", name, t, rounds, turn, cs)) {
        if (r.stats) {
          r.gbps = static_cast<double>(a.nbytes()) / r.stats->median_s / 1e9;
          r.gflops =
              (is_complex(c.dtype) ? 8.0 : 2.0) * kDenseN * kDenseN / r.stats->median_s / 1e9;
        }
        rows.push_back(std::move(r));
      }
    }
  }
  set_num_threads(saved_threads);
  std::vector<std::string> notes;
  notes.push_back(openblas_kernel_note());
  for (const auto& [t, server] : torch)
    if (!server->note().empty()) notes.push_back(server->note());
  torch.clear();

  // Tiny-M products through the engine, all on GEMV (gemv_pays): linear rows by a [out, in]
  // weight (contiguous rows, the row kernels: the batched decode step), mm rows by a row-major
  // B (W = B^T with contiguous columns, the column kernels). Each m x 4096 x 4096 float32
  // product is timed on every thread count; GB/s counts the weight's bytes.
  const auto tiny_m = [&](const std::string& c, int64_t m, const std::function<void()>& run) {
    for (int t : threads) {
      set_num_threads(t);
      BenchRow row{"gemv", c, "tessera", t};
      row.stats = measure(run, budget);
      row.gbps = 4096.0 * 4096 * 4 / row.stats->median_s / 1e9;
      row.gflops = 2.0 * m * 4096 * 4096 / row.stats->median_s / 1e9;
      rows.push_back(row);
    }
    set_num_threads(saved_threads);
  };
  for (int64_t m : {1, 2, 4, 8}) {
    const std::string c = fmt::format("linear/float32/{}x4096x4096", m);
    if (!wanted(c)) continue;
    const Tensor x = rand({m, 4096}), w = rand({4096, 4096});
    tiny_m(c, m, [&] { (void)linear(x, w); });
  }
  for (int64_t m : {1, 2, 4, 8}) {
    const std::string c = fmt::format("mm/float32/{}x4096x4096", m);
    if (!wanted(c)) continue;
    const Tensor a = rand({m, 4096}), b = rand({4096, 4096}), out = empty({m, 4096});
    gemm::GemmProblem p;
    p.m = m, p.n = 4096, p.k = 4096;
    p.a = a.data_ptr(), p.a_rs = 4096, p.a_cs = 1;
    p.b = b.data_ptr(), p.b_rs = 4096, p.b_cs = 1;
    p.c = out.data_ptr(), p.c_rs = 4096, p.c_cs = 1;
    tiny_m(c, m, [&] { gemm::gemm(p); });
  }

  print_table(shapes, rows, threads);
  return finish_bench("gemv", notes, options.json_path, rows);
}

}  // namespace tessera::cli
