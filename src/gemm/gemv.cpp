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

void scale_y(const GemvProblem& p) {
  for (int64_t m = 0; m < p.nx; ++m)
    for (int64_t i = 0; i < p.n; ++i) {
      float& out = y_at(p, m, i);
      out = p.beta == 0 ? 0.0f : static_cast<float>(p.beta) * out;
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
  const int64_t groups = (p.n + kRowAlign - 1) / kRowAlign;
  int64_t threads = allow_threads && !in_parallel_region() ? get_num_threads() : 1;
  if (weight_bytes < static_cast<double>(kMinParallelBytes)) threads = 1;
  threads = std::min(threads, groups);
  if (threads <= 1) {
    a.rows = p.n;
    fn(a);
    return;
  }
  parallel_tasks(threads, [&](int64_t t) {
    const int64_t i0 = std::min(p.n, groups * t / threads * kRowAlign);
    const int64_t i1 = std::min(p.n, groups * (t + 1) / threads * kRowAlign);
    if (i0 >= i1) return;
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
    scale_y(p);
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
