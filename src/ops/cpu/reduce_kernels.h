// Kernel table for reductions, softmax and scans (src/ops/cpu/reduce_kernels.cpp and
// softmax_kernels.cpp, compiled once per ISA). Kernels are serial and work on raw pointers;
// the front ends (src/ops/reduce.cpp, softmax.cpp, scan.cpp) plan the problem, split it into
// chunks whose boundaries depend only on the shape, run chunks on the thread pool and combine
// the per-chunk results in a fixed order, so results never depend on the thread count.
//
// Two canonical shapes (element strides, not bytes):
//   rows: `rows` rows of K contiguous elements, row r starts at in + r * row_stride;
//         each row reduces to one Partial.                              (sum(-1), full sums)
//   cols: K rows of N contiguous columns, row k starts at in + k * row_stride; each column
//         reduces to one Partial.                                        (sum(0) of a matrix)
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tessera/core/dtype.h"

namespace tessera::cpu {

// What is accumulated. Floating inputs accumulate in float (float16/bfloat16/float32) or
// double (float64); integer and bool inputs in int64 (wrapping, as PyTorch).
enum class ReduceKind : uint8_t {
  Sum,           // x
  Prod,          // x (multiplied)
  Max,           // NaN-propagating maximum
  Min,           // NaN-propagating minimum
  AbsSum,        // |x|          (norm 1)
  SqSum,         // x * x        (norm 2 before the square root)
  PowSum,        // |x|^p        (norm p before the 1/p power)
  AbsMax,        // max |x|      (norm inf)
  AbsMin,        // min |x|      (norm -inf)
  CountNonzero,  // x != 0       (norm 0, count_nonzero, all, any); always int64
};

// One chunk's (or one row's) result. Which fields are used depends on the op:
//   floating sums, products, extremes: a;   integer ones and CountNonzero: i;
//   arg-extremes: value in a (floating) or i (integer), index in n;
//   moments: n (count), a (mean), b (sum of squared deviations, M2).
struct Partial {
  double a = 0;
  double b = 0;
  int64_t i = 0;
  int64_t n = 0;
};

struct ReduceArgs {
  ReduceKind kind = ReduceKind::Sum;
  ScalarType dtype = ScalarType::Float32;  // input dtype
  const void* in = nullptr;
  int64_t rows = 0;        // rows: number of rows; cols: unused
  int64_t K = 0;           // reduced length
  int64_t N = 0;           // cols: number of columns; rows: unused
  int64_t row_stride = 0;  // elements between rows
  double p = 2;            // PowSum exponent
  Partial* out = nullptr;  // rows: `rows` partials; cols: N partials
  // cols: every row of the problem is one run of at most kColTile columns and two threads never
  // narrow its tiles, so each call's strip spans whole rows there (set from the shape alone,
  // never from the tiling: cols kernels may pick their order of rows by it; reduce_driver.h).
  bool whole_rows = false;
};

// Softmax-like row operations: rows of K contiguous elements, same dtype in and out.
struct SoftmaxArgs {
  ScalarType dtype = ScalarType::Float32;
  const void* in = nullptr;
  void* out = nullptr;
  int64_t rows = 0, K = 0, N = 0;  // cols kernels: K rows of N contiguous columns
  int64_t in_row_stride = 0, out_row_stride = 0;
  bool log = false;  // log_softmax
  // rows kernel: the output is large (kStreamOutputBytes); float32/float64 rows then write it
  // with non-temporal stores, the exp values staged in a row-sized scratch buffer.
  bool stream = false;
};

// Scans along K (rows: contiguous; cols: across rows, vectorised over N columns). in and out
// have the same dtype (the front end converts first); sums accumulate in double for float32
// and float64 (as PyTorch's CPU acc_type), float for float16/bfloat16, int64 for integers.
struct ScanArgs {
  ScalarType dtype = ScalarType::Float32;
  bool prod = false;
  const void* in = nullptr;
  void* out = nullptr;
  int64_t rows = 0, K = 0, N = 0;
  int64_t in_row_stride = 0, out_row_stride = 0;
};

struct ReduceKernels {
  void (*reduce_rows)(const ReduceArgs&);
  void (*reduce_cols)(const ReduceArgs&);
  // Index of the first maximum (is_max) or minimum; NaN counts as the extreme. Result in
  // Partial (value a or i, index n). Only Max/Min kinds.
  void (*arg_rows)(const ReduceArgs&);
  void (*arg_cols)(const ReduceArgs&);
  // Count, mean and M2 (Welford/Chan). Floating dtypes only.
  void (*moments_rows)(const ReduceArgs&);
  void (*moments_cols)(const ReduceArgs&);
};

struct SoftmaxKernels {
  void (*softmax_rows)(const SoftmaxArgs&);
  void (*softmax_cols)(const SoftmaxArgs&);
  // log(sum(exp(x))) of each row with the max shift; writes rows partials (a).
  void (*logsumexp_rows)(const ReduceArgs&);
  void (*scan_rows)(const ScanArgs&);
  void (*scan_cols)(const ScanArgs&);
};

// Fixed chunk sizes (elements, or rows for cols): part of the numerical contract, since
// chunk results are combined pairwise; never derived from the thread count.
inline constexpr int64_t kRowChunk = 32768;    // elements of one row per rows-kernel call
inline constexpr int64_t kColRowChunk = 4096;  // rows per cols-kernel call

// Columns per strip of the floating cols kernels, and the widest tile the front ends hand
// them: a kernel walks each row's strip as one run, so a matrix up to kColTile wide is read
// as one sequential stream, where narrower strips restart the hardware prefetchers on every
// row. Zen 5 VM, 8192x8192 float32 over dim 0, medians of 21 alternations in one process,
// two runs, against the earlier tiles of 2048 and strips of 1024 columns (one thread / two):
// sum 3-7% / 5-8% faster, amax 7-13% / 4-12%, argmax 3-5% / 0-2%, var 13-16% / 9-12%.
// Tiles never change results (columns are independent).
inline constexpr int64_t kColTile = 8192;

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(ReduceKernels, reduce_kernels)
TS_DECLARE_ISA_TABLE(SoftmaxKernels, softmax_kernels)
