// Tessera's GEMV path (internal API): the bandwidth-bound product of a weight matrix and one
// to four activation vectors,
//
//   Y(m, i) = alpha * global_scale * row_scale(i) * sum_p W(i, p) X(m, p) + beta * Y(m, i)
//
//   W: n x k in a weight format (gemm/formats/formats.h), W(i, p) at element offset
//      i * w_rs + p * w_cs (row-major, column-major or general strides). NVFP4 weights must
//      be row-major with contiguous rows (w_cs == 1, w_rs counted in bytes, i.e. pairs of
//      values) and k a multiple of 16, with block scales: float8_e4m3fn codes, k / 16 per row,
//      row i's at block_scales + i * scale_rs.
//   X: nx x k activations, float32 or bfloat16, X(m, p) = x[m * x_ld + p * x_inc].
//   Y: nx x n float32 outputs, Y(m, i) = y[m * y_ld + i * y_inc].
//   row_scale(i) = row_scales ? row_scales[i] : 1 (per-output-channel float8 scales);
//   global_scale (NVFP4's per-tensor scale) multiplies each output once, in the kernel's
//   final scaling, never as a pass over W.
//
// The transposed form x^T B (B: k x n) is the same call with W = B^T (swap B's strides).
// Semantics as gemm(): beta == 0 never reads Y, alpha == 0 or k == 0 reads neither W nor X,
// n == 0 or nx == 0 touches nothing. Accumulation is float32 (FMA where the ISA has it) with
// an order that depends only on k and the layout, so results are bitwise identical for every
// thread count: threads split the outputs i, never k. nx > 8 runs in groups of 8.
#pragma once

#include <cstdint>
#include <string_view>

#include "gemm/formats/formats.h"
#include "gemm/gemm.h"
#include "gemm/kernels/gemv_kernels.h"
#include "tessera/core/dtype.h"

namespace tessera::gemm {

struct GemvProblem {
  WeightFormat format = WeightFormat::Float32;
  int64_t n = 0, k = 0;
  const void* w = nullptr;
  int64_t w_rs = 0, w_cs = 0;
  const uint8_t* block_scales = nullptr;  // NVFP4 only
  int64_t scale_rs = 0;
  const float* row_scales = nullptr;  // optional, n values
  double global_scale = 1;
  ScalarType x_dtype = ScalarType::Float32;  // float32 or bfloat16
  int64_t nx = 1;
  const void* x = nullptr;
  int64_t x_inc = 1, x_ld = 0;
  float* y = nullptr;
  int64_t y_inc = 1, y_ld = 0;
  double alpha = 1, beta = 0;
};

// Whether a product with `few` rows (or columns) of output against `many` of the other should
// run on the GEMV path instead of a packed GEMM: up to 4 always, up to 8 beside more than 64
// (eight vectors share one pass over the weight; a tiny square product is the small kernel's).
// gemm(), the bfloat16/float16 products and linear() all choose with this (gemm() keeps the
// float32 products that its small kernel holds whole, m, n, k <= 64, off the GEMV path).
bool gemv_pays(int64_t few, int64_t many);

// Validates p (throws tessera::Error naming `op`, the argument, expected and given) and runs it
// on the ISA chosen at start-up, or on `kernels` (tests compare ISAs that way).
void gemv(const GemvProblem& p, const cpu::GemvKernels* kernels = nullptr,
          std::string_view op = "gemv");

// The table of the named build ("avx512vbmi", "avx512", "avx2", "generic"; the caller checks
// that the CPU runs it); the default one otherwise.
const cpu::GemvKernels& gemv_kernels_for(std::string_view isa);

// The table gemv() runs by default: the ISA chosen at start-up, in its AVX512_VBMI build where
// the CPU has that.
const cpu::GemvKernels& default_gemv_kernels();

// Runs an already validated problem; `allow_threads` false keeps it on the calling thread
// (batched GEMMs that are already split by problem).
void gemv_run(const GemvProblem& p, const cpu::GemvKernels& kernels, bool allow_threads);

// A GEMM with few rows or columns of C (gemm.h's problem) seen as GEMV, strides in elements:
// with few rows (m <= n), W = B^T (n x k) and the rows of A are the nx = m vectors, Y(r, i) =
// C(r, i); otherwise W = A and the columns of B are the nx = n vectors, Y(r, i) = C(i, r).
struct GemvView {
  int64_t n = 0, k = 0, nx = 0;
  const void* w = nullptr;
  int64_t w_rs = 0, w_cs = 0;
  const void* x = nullptr;
  int64_t x_ld = 0, x_inc = 0;
  void* y = nullptr;
  int64_t y_ld = 0, y_inc = 0;
};
GemvView gemv_view(const GemmProblem& p);

// Whether the GEMV kernels read p's W in place: its rows or its columns are contiguous (a
// W with neither is packed by the GEMM instead).
bool gemv_reads_in_place(const GemmProblem& p);

// Runs a validated float64, complex64 or complex128 GEMM that gemv_reads_in_place on the GEMV
// kernels, reading W once:
//   - float64 on the float64 kernels (row or column form, as float32 weights run).
//   - complex with contiguous rows of W: the real view of row i is 2k values, and the complex
//     row kernels sum w * x and w * (x with real and imaginary parts exchanged) lane by lane:
//       Re y_i = even lanes - odd lanes of the first,   Im y_i = all lanes of the second,
//     writing the real and imaginary parts of y in place (alpha and beta are real).
//   - complex with contiguous columns: the real view of column p is 2n values; the real
//     column kernel with activations xr and xi gives T0 = (Wr xr, Wi xr) and T1 = (Wr xi,
//     Wi xi) interleaved, for a block of outputs at a time, and
//       Re y_i = T0[2i] - T1[2i + 1],   Im y_i = T0[2i + 1] + T1[2i].
// complex64 runs on the float32 kernels, complex128 on the float64 ones. Threads split the
// outputs as gemv_run does: the same bits on any thread count.
void gemm_as_gemv(const GemmProblem& p, const cpu::GemvKernels& kernels, bool allow_threads);

// The oracle: dequantize each weight, accumulate in double, same semantics. Serial and slow.
void gemv_reference(const GemvProblem& p);

}  // namespace tessera::gemm
