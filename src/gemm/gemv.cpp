// The GEMV driver: validation, activation preparation, layout choice and the thread split.
//
//   1. X (bfloat16, or float32 with a stride) is converted once into a contiguous float32
//      buffer cached per thread; contiguous float32 X is read in place.
//   2. Layout: W with contiguous rows (w_cs == 1) runs the row kernels (one dot product per
//      output); W with contiguous columns (w_rs == 1, the x^T B form) the column kernels;
//      anything else a plain strided loop (correct, not fast: copy such a W first).
//   3. Threads split the outputs into contiguous ranges of whole 16-row groups, each running
//      the kernel on its range; an output's arithmetic never depends on its range, so the
//      result is bitwise the same for every thread count. Below kMinParallelBytes of weights
//      one thread is faster than waking the pool.
//   4. alpha * global_scale is folded into the kernel's final multiply.
#include "gemm/gemv.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

#include "gemm/gemm.h"
#include "tessera/core/error.h"
#include "tessera/core/parallel.h"

namespace tessera::gemm {

namespace {

constexpr int64_t kMinParallelBytes = int64_t{1} << 19;
constexpr int64_t kRowAlign = 16;
constexpr int64_t kMaxVectors = 8;  // activation vectors per kernel call

// Bytes of one element of a typed format (NVFP4 rows are addressed in bytes).
int64_t element_bytes(WeightFormat f) {
  return f == WeightFormat::NVFP4 ? 1 : format_bytes(f, 1);
}

bool valid_format(WeightFormat f) {
  return static_cast<int>(f) >= 0 && static_cast<int>(f) < kNumWeightFormats;
}

float x_value(const GemvProblem& p, int64_t m, int64_t q) {
  const int64_t off = m * p.x_ld + q * p.x_inc;
  if (p.x_dtype == ScalarType::BFloat16) return static_cast<const BFloat16*>(p.x)[off];
  return static_cast<const float*>(p.x)[off];
}

float& y_at(const GemvProblem& p, int64_t m, int64_t i) {
  return p.y[m * p.y_ld + i * p.y_inc];
}

// Y := beta * Y for nx x n outputs of `parts` real values each (2 for complex), output (m, i)
// at y + parts * (m * y_ld + i * y_inc): alpha == 0 or k == 0. beta == 0 writes zeros, never
// reading Y.
template <class R>
void scale_outputs(R* y, int64_t nx, int64_t n, int64_t y_ld, int64_t y_inc, double beta,
                   int parts) {
  for (int64_t m = 0; m < nx; ++m)
    for (int64_t i = 0; i < n; ++i)
      for (int part = 0; part < parts; ++part) {
        R& out = y[parts * (m * y_ld + i * y_inc) + part];
        out = beta == 0 ? R(0) : static_cast<R>(beta) * out;
      }
}

std::vector<float>& x_buffer() {
  thread_local std::vector<float> buf;
  return buf;
}

// The plain loop for W with no unit stride: one float32 dot product per output.
void run_strided(const GemvProblem& p, const cpu::GemvArgs& a) {
  for (int m = 0; m < a.nx; ++m)
    for (int64_t i = 0; i < p.n; ++i) {
      float acc = 0;
      for (int64_t q = 0; q < p.k; ++q)
        acc +=
            formats::decode_element(p.format, a.w, (i * p.w_rs + q * p.w_cs)) * a.x[m * a.x_ld + q];
      float s = a.alpha * acc;
      if (a.row_scales) s *= a.row_scales[i];
      float& out = a.y[m * a.y_ld + i * a.y_inc];
      out = a.beta == 0.0f ? s : s + a.beta * out;
    }
}

// fn(i0, i1) over the n outputs: on this thread, or split over the pool into contiguous ranges
// of whole kRowAlign-row groups, one per thread (below kMinParallelBytes of weights one thread
// is faster than waking the pool).
template <class F>
void for_output_ranges(int64_t n, double weight_bytes, bool allow_threads, F&& fn) {
  const int64_t groups = (n + kRowAlign - 1) / kRowAlign;
  int64_t threads = allow_threads && !in_parallel_region() ? get_num_threads() : 1;
  if (weight_bytes < static_cast<double>(kMinParallelBytes)) threads = 1;
  threads = std::min(threads, groups);
  if (threads <= 1) return fn(int64_t{0}, n);
  parallel_tasks(threads, [&](int64_t t) {
    const int64_t i0 = std::min(n, groups * t / threads * kRowAlign);
    const int64_t i1 = std::min(n, groups * (t + 1) / threads * kRowAlign);
    if (i0 < i1) fn(i0, i1);
  });
}

// Up to kMaxVectors activations starting at m0.
void run_group(const GemvProblem& p, int64_t m0, int nx, const cpu::GemvKernels& kernels,
               bool allow_threads) {
  cpu::GemvArgs a;
  a.k = p.k;
  a.nx = nx;
  if (p.x_dtype == ScalarType::Float32 && p.x_inc == 1) {
    a.x = static_cast<const float*>(p.x) + m0 * p.x_ld;
    a.x_ld = p.x_ld;
  } else {
    std::vector<float>& buf = x_buffer();
    buf.resize(static_cast<size_t>(nx * p.k));
    for (int m = 0; m < nx; ++m)
      for (int64_t q = 0; q < p.k; ++q) buf[m * p.k + q] = x_value(p, m0 + m, q);
    a.x = buf.data();
    a.x_ld = p.k;
  }
  a.y = p.y + m0 * p.y_ld;
  a.y_inc = p.y_inc;
  a.y_ld = p.y_ld;
  a.alpha = static_cast<float>(p.alpha * p.global_scale);
  a.beta = static_cast<float>(p.beta);
  a.row_scales = p.row_scales;
  a.w = static_cast<const uint8_t*>(p.w);
  a.scales = p.block_scales;
  a.scale_rs = p.scale_rs;
  const int64_t eb = element_bytes(p.format);
  const int f = static_cast<int>(p.format);
  cpu::GemvFn fn = nullptr;
  int64_t row_step = 0;  // bytes of W between consecutive outputs
  if (p.w_cs == 1 || p.k == 1) {
    fn = kernels.row[f];
    a.w_rs = p.w_rs * eb;
    row_step = a.w_rs;
  } else if ((p.w_rs == 1 || p.n == 1) && kernels.col[f]) {
    fn = kernels.col[f];
    a.w_cs = p.w_cs * eb;
    row_step = eb;
  }
  if (!fn) {
    a.rows = p.n;
    run_strided(p, a);
    return;
  }
  const double weight_bytes = static_cast<double>(p.n) * static_cast<double>(p.k) *
                              static_cast<double>(format_bytes(p.format, 2)) / 2.0;
  for_output_ranges(p.n, weight_bytes, allow_threads, [&](int64_t i0, int64_t i1) {
    cpu::GemvArgs s = a;
    s.rows = i1 - i0;
    s.w = a.w + i0 * row_step;
    if (s.scales) s.scales = a.scales + i0 * a.scale_rs;
    if (s.row_scales) s.row_scales = a.row_scales + i0;
    s.y = a.y + i0 * a.y_inc;
    fn(s);
  });
}

void validate(const GemvProblem& p, std::string_view op) {
  TS_CHECK(valid_format(p.format), TypeError,
           "{}(): argument 'format' expected a weight format, but got code {}", op,
           static_cast<int>(p.format));
  TS_CHECK(p.x_dtype == ScalarType::Float32 || p.x_dtype == ScalarType::BFloat16, TypeError,
           "{}(): argument 'x' expected dtype float32 or bfloat16, but got {}", op, p.x_dtype);
  TS_CHECK(p.n >= 0 && p.k >= 0 && p.nx >= 0, ValueError,
           "{}(): expected non-negative sizes, but got n={}, k={}, nx={}", op, p.n, p.k, p.nx);
  TS_CHECK(offsets_fit_int64(p.n, p.k, p.w_rs, p.w_cs) &&
               offsets_fit_int64(p.nx, p.k, p.x_ld, p.x_inc) &&
               offsets_fit_int64(p.nx, p.n, p.y_ld, p.y_inc),
           ValueError,
           "{}(): expected operands whose element offsets fit in int64, but got n={}, k={}, "
           "nx={} with strides w=({}, {}), x=({}, {}), y=({}, {})",
           op, p.n, p.k, p.nx, p.w_rs, p.w_cs, p.x_ld, p.x_inc, p.y_ld, p.y_inc);
  if (p.n == 0 || p.nx == 0) return;
  TS_CHECK(p.y != nullptr, ValueError, "{}(): argument 'y' expected a pointer, but got null", op);
  TS_CHECK((p.n == 1 || p.y_inc != 0) && (p.nx == 1 || p.y_ld != 0), ValueError,
           "{}(): argument 'y' expected non-zero strides for {} x {} outputs, but got "
           "y_ld={}, y_inc={}",
           op, p.nx, p.n, p.y_ld, p.y_inc);
  if (p.k == 0 || p.alpha == 0) return;
  TS_CHECK(p.w != nullptr && p.x != nullptr, ValueError,
           "{}(): arguments 'w' and 'x' expected pointers, but got {} and {}", op,
           p.w ? "a pointer" : "null", p.x ? "a pointer" : "null");
  if (p.format == WeightFormat::NVFP4) {
    TS_CHECK(p.k % kNvfp4Block == 0, ValueError,
             "{}(): argument 'k' expected a multiple of the NVFP4 block size {}, but got {}", op,
             kNvfp4Block, p.k);
    TS_CHECK(p.w_cs == 1, ValueError,
             "{}(): argument 'w' expected NVFP4 rows with contiguous values (w_cs == 1), but "
             "got w_cs={}",
             op, p.w_cs);
    TS_CHECK(p.block_scales != nullptr, ValueError,
             "{}(): argument 'block_scales' expected a pointer for NVFP4 weights, but got null",
             op);
  }
}

// ---- float64 and complex GEMMs as GEMV (gemm_as_gemv) ----

// The real kernels' call, one overload per real type: float32 (complex64) through the format
// kernels' arguments (W in bytes), float64 (float64, complex128) through their own.
struct RealCall {
  int64_t rows = 0, k = 0;
  int64_t w_rs = 0, w_cs = 0;  // real elements
  int nx = 1;
  int64_t x_ld = 0, y_inc = 1, y_ld = 0;
  double alpha = 1, beta = 0;
};

enum class RealForm { kRows, kColumns, kComplexRows };

void real_kernel(const cpu::GemvKernels& ks, RealForm form, const RealCall& c, const float* w,
                 const float* x, float* y) {
  cpu::GemvArgs a;
  a.rows = c.rows, a.k = c.k;
  a.w = reinterpret_cast<const uint8_t*>(w);
  a.w_rs = c.w_rs * static_cast<int64_t>(sizeof(float));
  a.w_cs = c.w_cs * static_cast<int64_t>(sizeof(float));
  a.nx = c.nx, a.x = x, a.x_ld = c.x_ld;
  a.y = y, a.y_inc = c.y_inc, a.y_ld = c.y_ld;
  a.alpha = static_cast<float>(c.alpha), a.beta = static_cast<float>(c.beta);
  const int f = static_cast<int>(WeightFormat::Float32);
  (form == RealForm::kRows      ? ks.row[f]
   : form == RealForm::kColumns ? ks.col[f]
                                : ks.row_complex64)(a);
}

void real_kernel(const cpu::GemvKernels& ks, RealForm form, const RealCall& c, const double* w,
                 const double* x, double* y) {
  cpu::GemvArgsF64 a;
  a.rows = c.rows, a.k = c.k;
  a.w = w, a.w_rs = c.w_rs, a.w_cs = c.w_cs;
  a.nx = c.nx, a.x = x, a.x_ld = c.x_ld;
  a.y = y, a.y_inc = c.y_inc, a.y_ld = c.y_ld;
  a.alpha = c.alpha, a.beta = c.beta;
  (form == RealForm::kRows      ? ks.row_f64
   : form == RealForm::kColumns ? ks.col_f64
                                : ks.row_complex128)(a);
}

template <class T>
const T& x_at(const GemvView& v, int64_t m, int64_t q) {
  return static_cast<const T*>(v.x)[m * v.x_ld + q * v.x_inc];
}

// The view's vectors of T as they are when contiguous, else copied once into a per-thread
// buffer, k apart; x_ld gets their distance (in T).
template <class T>
const T* contiguous_vectors(const GemvView& v, int64_t& x_ld) {
  x_ld = v.x_ld;
  if (v.x_inc == 1) return static_cast<const T*>(v.x);
  thread_local std::vector<T> buf;
  buf.resize(static_cast<size_t>(v.nx * v.k));
  for (int64_t m = 0; m < v.nx; ++m)
    for (int64_t q = 0; q < v.k; ++q) buf[m * v.k + q] = x_at<T>(v, m, q);
  x_ld = v.k;
  return buf.data();
}

// Whether W is read by rows (one dot product per output) rather than by columns.
bool reads_rows(const GemvView& v) {
  return v.w_cs == 1 || v.k == 1;
}

// Complex outputs per block in the column form: T0 and T1 of 2 * kComplexBlock real values per
// activation stay in L2 while they are combined.
constexpr int64_t kComplexBlock = 2048;

template <class R>
void complex_gemv(const GemmProblem& p, const GemvView& v, const cpu::GemvKernels& ks,
                  bool allow_threads) {
  using C = std::complex<R>;
  const R* w = static_cast<const R*>(v.w);
  const double weight_bytes =
      static_cast<double>(v.n) * static_cast<double>(v.k) * static_cast<double>(sizeof(C));
  if (reads_rows(v)) {
    int64_t ld = 0;
    const R* x = reinterpret_cast<const R*>(contiguous_vectors<C>(v, ld));
    const int64_t x_ld = 2 * ld;  // real values
    // Up to four activations share a pass (eight real outputs per row).
    const int64_t group = kMaxVectors / 2;
    for_output_ranges(v.n, weight_bytes, allow_threads, [&](int64_t i0, int64_t i1) {
      for (int64_t m0 = 0; m0 < v.nx; m0 += group) {
        RealCall c;
        c.rows = i1 - i0, c.k = 2 * v.k;
        c.w_rs = 2 * v.w_rs;
        c.nx = static_cast<int>(2 * std::min(group, v.nx - m0));
        c.x_ld = x_ld;
        c.y_inc = 2 * v.y_inc, c.y_ld = 2 * v.y_ld;
        c.alpha = p.alpha, c.beta = p.beta;
        C* y = static_cast<C*>(v.y) + m0 * v.y_ld + i0 * v.y_inc;
        real_kernel(ks, RealForm::kComplexRows, c, w + 2 * i0 * v.w_rs, x + m0 * x_ld,
                    reinterpret_cast<R*>(y));
      }
    });
    return;
  }
  // Columns: per activation xr and xi, k values each.
  thread_local std::vector<R> xbuf;
  xbuf.resize(static_cast<size_t>(2 * v.nx * v.k));
  for (int64_t m = 0; m < v.nx; ++m)
    for (int64_t q = 0; q < v.k; ++q) {
      const C x = x_at<C>(v, m, q);
      xbuf[(2 * m) * v.k + q] = x.real(), xbuf[(2 * m + 1) * v.k + q] = x.imag();
    }
  const R* x = xbuf.data();
  const int64_t group = kMaxVectors / 2;
  for_output_ranges(v.n, weight_bytes, allow_threads, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<R> parts;
    parts.resize(static_cast<size_t>(2 * group * 2 * kComplexBlock));
    for (int64_t b0 = i0; b0 < i1; b0 += kComplexBlock) {
      const int64_t nb = std::min(kComplexBlock, i1 - b0);
      for (int64_t m0 = 0; m0 < v.nx; m0 += group) {
        const int64_t g = std::min(group, v.nx - m0);
        RealCall c;
        c.rows = 2 * nb, c.k = v.k;
        c.w_cs = 2 * v.w_cs;
        c.nx = static_cast<int>(2 * g);
        c.x_ld = v.k;
        c.y_inc = 1, c.y_ld = 2 * nb;
        real_kernel(ks, RealForm::kColumns, c, w + 2 * b0, x + 2 * m0 * v.k, parts.data());
        for (int64_t m = 0; m < g; ++m) {
          const R* t0 = parts.data() + 2 * m * 2 * nb;
          const R* t1 = t0 + 2 * nb;
          C* y = static_cast<C*>(v.y) + (m0 + m) * v.y_ld + b0 * v.y_inc;
          for (int64_t i = 0; i < nb; ++i) {
            const C s =
                static_cast<R>(p.alpha) * C(t0[2 * i] - t1[2 * i + 1], t0[2 * i + 1] + t1[2 * i]);
            C& out = y[i * v.y_inc];
            out = p.beta == 0 ? s : s + static_cast<R>(p.beta) * out;
          }
        }
      }
    }
  });
}

void float64_gemv(const GemmProblem& p, const GemvView& v, const cpu::GemvKernels& ks,
                  bool allow_threads) {
  int64_t x_ld = 0;
  const double* x = contiguous_vectors<double>(v, x_ld);
  const bool rows = reads_rows(v);
  const int64_t step = rows ? v.w_rs : 1;  // elements of W between consecutive outputs
  const double* w = static_cast<const double*>(v.w);
  const double weight_bytes = static_cast<double>(v.n) * static_cast<double>(v.k) * 8.0;
  for_output_ranges(v.n, weight_bytes, allow_threads, [&](int64_t i0, int64_t i1) {
    for (int64_t m0 = 0; m0 < v.nx; m0 += kMaxVectors) {
      RealCall c;
      c.rows = i1 - i0, c.k = v.k;
      c.w_rs = v.w_rs, c.w_cs = v.w_cs;
      c.nx = static_cast<int>(std::min(kMaxVectors, v.nx - m0));
      c.x_ld = x_ld;
      c.y_inc = v.y_inc, c.y_ld = v.y_ld;
      c.alpha = p.alpha, c.beta = p.beta;
      double* y = static_cast<double*>(v.y) + m0 * v.y_ld + i0 * v.y_inc;
      real_kernel(ks, rows ? RealForm::kRows : RealForm::kColumns, c, w + i0 * step, x + m0 * x_ld,
                  y);
    }
  });
}

}  // namespace

const cpu::GemvKernels& gemv_kernels_for(std::string_view isa) {
  if (isa == "avx512vbmi") return cpu::avx512vbmi::gemv_kernels();
  if (isa == "avx512") return cpu::avx512::gemv_kernels();
  if (isa == "avx2") return cpu::avx2::gemv_kernels();
  if (isa == "generic") return cpu::generic::gemv_kernels();
  return default_gemv_kernels();
}

const cpu::GemvKernels& default_gemv_kernels() {
  static const cpu::GemvKernels& table = cpu_isa() == CpuIsa::Avx512 && cpu_features().avx512_vbmi
                                             ? cpu::avx512vbmi::gemv_kernels()
                                             : TS_DISPATCH(gemv_kernels);
  return table;
}

void gemv_run(const GemvProblem& p, const cpu::GemvKernels& kernels, bool allow_threads) {
  if (p.n == 0 || p.nx == 0) return;
  if (p.k == 0 || p.alpha == 0) {
    scale_outputs(p.y, p.nx, p.n, p.y_ld, p.y_inc, p.beta, 1);
    return;
  }
  for (int64_t m0 = 0; m0 < p.nx; m0 += kMaxVectors)
    run_group(p, m0, static_cast<int>(std::min(kMaxVectors, p.nx - m0)), kernels, allow_threads);
}

bool gemv_pays(int64_t few, int64_t many) {
  return few <= 4 || (few <= kMaxVectors && many > 64);
}

void gemv(const GemvProblem& p, const cpu::GemvKernels* kernels, std::string_view op) {
  validate(p, op);
  gemv_run(p, kernels ? *kernels : default_gemv_kernels(), true);
}

GemvView gemv_view(const GemmProblem& p) {
  GemvView v;
  v.k = p.k;
  v.y = p.c;
  if (p.m <= p.n) {
    v.n = p.n, v.nx = p.m;
    v.w = p.b, v.w_rs = p.b_cs, v.w_cs = p.b_rs;
    v.x = p.a, v.x_ld = p.a_rs, v.x_inc = p.a_cs;
    v.y_ld = p.c_rs, v.y_inc = p.c_cs;
  } else {
    v.n = p.m, v.nx = p.n;
    v.w = p.a, v.w_rs = p.a_rs, v.w_cs = p.a_cs;
    v.x = p.b, v.x_ld = p.b_cs, v.x_inc = p.b_rs;
    v.y_ld = p.c_cs, v.y_inc = p.c_rs;
  }
  return v;
}

bool gemv_reads_in_place(const GemmProblem& p) {
  const GemvView v = gemv_view(p);
  return v.w_cs == 1 || v.k == 1 || v.w_rs == 1 || v.n == 1;
}

void gemm_as_gemv(const GemmProblem& p, const cpu::GemvKernels& kernels, bool allow_threads) {
  TS_INTERNAL_ASSERT(gemv_reads_in_place(p));
  const GemvView v = gemv_view(p);
  if (v.n == 0 || v.nx == 0) return;
  const bool trivial = p.k == 0 || p.alpha == 0;
  switch (p.dtype) {
    case ScalarType::Float64:
      return trivial
                 ? scale_outputs(static_cast<double*>(v.y), v.nx, v.n, v.y_ld, v.y_inc, p.beta, 1)
                 : float64_gemv(p, v, kernels, allow_threads);
    case ScalarType::Complex64:
      return trivial
                 ? scale_outputs(static_cast<float*>(v.y), v.nx, v.n, v.y_ld, v.y_inc, p.beta, 2)
                 : complex_gemv<float>(p, v, kernels, allow_threads);
    case ScalarType::Complex128:
      return trivial
                 ? scale_outputs(static_cast<double*>(v.y), v.nx, v.n, v.y_ld, v.y_inc, p.beta, 2)
                 : complex_gemv<double>(p, v, kernels, allow_threads);
    default:
      TS_THROW(TypeError,
               "gemm_as_gemv(): expected dtype float64, complex64 or complex128, but got {}",
               p.dtype);
  }
}

void gemv_reference(const GemvProblem& p) {
  validate(p, "gemv_reference");
  if (p.n == 0 || p.nx == 0) return;
  const bool skip = p.k == 0 || p.alpha == 0;
  const auto* w = static_cast<const uint8_t*>(p.w);
  for (int64_t m = 0; m < p.nx; ++m)
    for (int64_t i = 0; i < p.n; ++i) {
      double acc = 0;
      if (!skip) {
        for (int64_t q = 0; q < p.k; ++q) {
          const double wv = p.format == WeightFormat::NVFP4
                                ? formats::decode_value(p.format, w + i * p.w_rs, q,
                                                        p.block_scales + i * p.scale_rs)
                                : formats::decode_element(p.format, w, i * p.w_rs + q * p.w_cs);
          acc += wv * static_cast<double>(x_value(p, m, q));
        }
        acc *= p.alpha * p.global_scale * (p.row_scales ? p.row_scales[i] : 1.0);
      }
      float& out = y_at(p, m, i);
      out = static_cast<float>(p.beta == 0 ? acc : acc + p.beta * static_cast<double>(out));
    }
}

}  // namespace tessera::gemm
