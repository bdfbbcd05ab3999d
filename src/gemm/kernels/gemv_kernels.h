// The GEMV kernel contract and the per-ISA table (the driver is src/gemm/gemv.cpp).
//
// A kernel computes, for `nx` activation vectors at once (1..8; eight share one pass over W on
// AVX-512, otherwise they go four at a time),
//
//   Y(m, i) := alpha * scale(i) * sum_p W(i, p) * X(m, p) + beta * Y(m, i)   i < rows, m < nx
//
//   X(m, p) = x[m * x_ld + p]            contiguous float32 vectors of k values
//   Y(m, i) = y[m * y_ld + i * y_inc]
//   scale(i) = row_scales ? row_scales[i] : 1
//
// and W is read in one of two layouts:
//   - rows (`row` functions): row i is K-contiguous at w + i * w_rs bytes. Each output is one
//     dot product: kLanes partial sums (FMA, p ascending within each lane), then a horizontal
//     sum. NVFP4 rows also read their block scales at scales + i * scale_rs (k % 16 == 0).
//   - columns (`col` functions): column p is rows-contiguous at w + p * w_cs bytes (the
//     x^T B form, B row-major). Each output is a sequential FMA chain over p = 0..k-1.
// Either way an output's arithmetic depends only on its own row of W and on k, never on how
// many rows the call covers: splitting rows across threads gives bitwise identical results.
// beta == 0 never reads Y. k >= 1 and alpha != 0 (the driver handles the rest).
//
// float64 has kernels of its own (`row_f64`, `col_f64`, GemvArgsF64): W, X and Y all float64,
// the same two layouts and the same order of arithmetic per output, on plain vectors (no
// decoder). The float64 GEMMs with few rows or columns run on them, and complex ones on them or
// on the float32 row and column kernels through their real views (gemm/gemv.cpp).
#pragma once

#include <cstdint>

#include "core/dispatch.h"

namespace tessera::cpu {

struct GemvArgs {
  int64_t rows = 0, k = 0;
  const uint8_t* w = nullptr;
  int64_t w_rs = 0;                 // bytes between rows (row kernels)
  int64_t w_cs = 0;                 // bytes between columns (column kernels)
  const uint8_t* scales = nullptr;  // NVFP4 block scales (float8_e4m3fn codes)
  int64_t scale_rs = 0;             // bytes between rows of block scales
  const float* row_scales = nullptr;
  int nx = 1;
  const float* x = nullptr;
  int64_t x_ld = 0;
  float* y = nullptr;
  int64_t y_inc = 1, y_ld = 0;
  float alpha = 1, beta = 0;
};

using GemvFn = void (*)(const GemvArgs& args);

// GemvArgs for float64: W(i, p) at w[i * w_rs + p * w_cs] (elements; row kernels read w_rs,
// column kernels w_cs), X(m, p) = x[m * x_ld + p], Y(m, i) = y[m * y_ld + i * y_inc].
struct GemvArgsF64 {
  int64_t rows = 0, k = 0;
  const double* w = nullptr;
  int64_t w_rs = 0, w_cs = 0;
  int nx = 1;
  const double* x = nullptr;
  int64_t x_ld = 0;
  double* y = nullptr;
  int64_t y_inc = 1, y_ld = 0;
  double alpha = 1, beta = 0;
};

using GemvF64Fn = void (*)(const GemvArgsF64& args);

// Indexed by gemm::WeightFormat. col[NVFP4] is null: block scales run along K, so NVFP4
// weights must be row-major.
struct GemvKernels {
  const char* isa = "";
  GemvFn row[6] = {};
  GemvFn col[6] = {};
  GemvF64Fn row_f64 = nullptr;
  GemvF64Fn col_f64 = nullptr;
  // Complex rows: W rows of k interleaved complex values (the real view: w_rs bytes or elements
  // between rows, k counting real values, 2 per complex one), X(c) complex activations of
  // k / 2 interleaved values at x + c * x_ld, nx = 2 * activations: the real and imaginary
  // parts of row i times activation c (no conjugate) go to y[c * y_ld + i * y_inc] and the
  // value after it (y_ld and y_inc count real values).
  GemvFn row_complex64 = nullptr;
  GemvF64Fn row_complex128 = nullptr;
};

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(GemvKernels, gemv_kernels)

// The same kernels built for AVX-512 with AVX512_VBMI (float8_e4m3fn rows decode by table).
namespace tessera::cpu::avx512vbmi {
const GemvKernels& gemv_kernels();
}
