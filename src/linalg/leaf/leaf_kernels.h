// The unblocked leaves of linalg's recursive algorithms, compiled once per ISA (core/dispatch.h).
// The recursions and their GEMM calls (src/linalg/*.cpp) are compiled for baseline x86-64 only,
// where a leaf's inner loop ran as SSE2 multiplies and subtracts; here it runs at the chosen
// ISA's width with FMA.
//
//   trsm   B := op(A)^-1 B for a triangular n x n A (strides a_rs, a_cs; `lower` picks the
//          triangle, `conj` reads conj(A(i, j)), `unit` takes the diagonal as ones) and n x nrhs
//          B (strides b_rs, b_cs): substitution by rows of B, one axpy along a row per step.
//          Zero diagonal entries give inf/NaN, as LAPACK's trsm.
//   getf2  LU with partial pivoting of the m x n matrix a, row-major (cs == 1) or column-major
//          (rs == 1), right-looking with the rank-1 update along the contiguous dimension
//          (LAPACK's getf2: pivot by |re| + |im|, the first of equals; 1-based ipiv). Returns
//          0, or the 1-based column of the first zero pivot (which is skipped, not divided by).
//   potrf  upper Cholesky A = U^H U of the row-major n x n a (leading dimension lda), in place
//          on its upper triangle, right-looking by rows: row j scaled by 1 / U(j, j), then each
//          trailing row i less conj(U(j, i)) times row j (an axpy along contiguous rows).
//          Returns 0, or the 1-based order of the first leading minor that is not positive
//          (NaN included), its diagonal entry left as read. The leaves were 16% of a float32
//          256 x 256 factorization (perf), compiled for baseline x86-64 and per ISA alike; 12%
//          with their rows as whole vectors and a masked tail (axpy_minus).
//   transpose  dst(j, i) = src(i, j) for an r x c matrix (leading dimensions lds, ldd): the
//          copies around the leaves (getrf's column-major panel, trsm on a B whose columns are
//          contiguous), core/transpose.h's: AVX-512 moves 16 x 16 float / 8 x 8 double (and
//          complex64) blocks through registers; the edges, complex128 and other ISAs go through
//          a small tile of whole cache-line runs.
//          Compiled for baseline x86-64 beside the recursions, these copies were 13% of a
//          float32 1024 x 1024 Cholesky (perf).
//   adjoint_gemv  y(j) = A(:, j)^H x for the ncols columns of the column-major len x ncols A
//          (leading dimension lda): pivoted QR's one matrix-vector product per column it
//          reduces. Four real columns (two complex) share each load of x; each column keeps
//          its own partial sums, added in a fixed order, so a column's value does not depend on
//          the columns beside it (a caller may split the columns any way).
//   gemv_minus  y -= sum_q op(A(:, q)) s_q for the column-major len x ncols A (leading
//          dimension lda) and contiguous scalars s, op conjugating when conj_a: pivoted QR's
//          updates of one column, one row and its F column by the block's earlier reflectors.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dispatch.h"
#include "tessera/core/dtype.h"

namespace tessera::cpu {

template <class T>
using TrsmLeaf = void (*)(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs,
                          bool lower, bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs);

template <class T>
using GetrfLeaf = int64_t (*)(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, int32_t* ipiv);

template <class T>
using PotrfLeaf = int64_t (*)(int64_t n, T* a, int64_t lda);

template <class T>
using TransposeLeaf = void (*)(int64_t r, int64_t c, const T* src, int64_t lds, T* dst,
                               int64_t ldd);

template <class T>
using AdjointGemvLeaf = void (*)(int64_t len, int64_t ncols, const T* a, int64_t lda, const T* x,
                                 T* y);

template <class T>
using GemvMinusLeaf = void (*)(int64_t len, int64_t ncols, const T* a, int64_t lda, const T* s,
                               bool conj_a, T* y);

struct LinalgLeafKernels {
  TrsmLeaf<float> trsm_f32;
  TrsmLeaf<double> trsm_f64;
  TrsmLeaf<complex64> trsm_c64;
  TrsmLeaf<complex128> trsm_c128;
  GetrfLeaf<float> getf2_f32;
  GetrfLeaf<double> getf2_f64;
  GetrfLeaf<complex64> getf2_c64;
  GetrfLeaf<complex128> getf2_c128;
  PotrfLeaf<float> potrf_f32;
  PotrfLeaf<double> potrf_f64;
  PotrfLeaf<complex64> potrf_c64;
  PotrfLeaf<complex128> potrf_c128;
  TransposeLeaf<float> transpose_f32;
  TransposeLeaf<double> transpose_f64;
  TransposeLeaf<complex64> transpose_c64;
  TransposeLeaf<complex128> transpose_c128;
  AdjointGemvLeaf<float> adjoint_gemv_f32;
  AdjointGemvLeaf<double> adjoint_gemv_f64;
  AdjointGemvLeaf<complex64> adjoint_gemv_c64;
  AdjointGemvLeaf<complex128> adjoint_gemv_c128;
  GemvMinusLeaf<float> gemv_minus_f32;
  GemvMinusLeaf<double> gemv_minus_f64;
  GemvMinusLeaf<complex64> gemv_minus_c64;
  GemvMinusLeaf<complex128> gemv_minus_c128;
};

// The one of four per-dtype entries that serves T.
template <class T, class F32, class F64, class C64, class C128>
auto leaf_for(F32 f32, F64 f64, C64 c64, C128 c128) {
  if constexpr (std::is_same_v<T, float>) {
    return f32;
  } else if constexpr (std::is_same_v<T, double>) {
    return f64;
  } else if constexpr (std::is_same_v<T, complex64>) {
    return c64;
  } else {
    static_assert(std::is_same_v<T, complex128>);
    return c128;
  }
}

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(LinalgLeafKernels, linalg_leaf_kernels)

namespace tessera::linalg::detail {

// dst(j, i) = src(i, j) on the ISA chosen at start-up (the table's transpose).
template <class T>
void transpose_into(int64_t r, int64_t c, const T* src, int64_t lds, T* dst, int64_t ldd) {
  const cpu::LinalgLeafKernels& k = TS_DISPATCH(linalg_leaf_kernels);
  cpu::leaf_for<T>(k.transpose_f32, k.transpose_f64, k.transpose_c64, k.transpose_c128)(
      r, c, src, lds, dst, ldd);
}

// y(j) = A(:, j)^H x on the ISA chosen at start-up (the table's adjoint_gemv).
template <class T>
void adjoint_gemv(int64_t len, int64_t ncols, const T* a, int64_t lda, const T* x, T* y) {
  const cpu::LinalgLeafKernels& k = TS_DISPATCH(linalg_leaf_kernels);
  cpu::leaf_for<T>(k.adjoint_gemv_f32, k.adjoint_gemv_f64, k.adjoint_gemv_c64, k.adjoint_gemv_c128)(
      len, ncols, a, lda, x, y);
}

// y -= sum_q op(A(:, q)) s_q on the ISA chosen at start-up (the table's gemv_minus).
template <class T>
void gemv_minus(int64_t len, int64_t ncols, const T* a, int64_t lda, const T* s, bool conj_a,
                T* y) {
  const cpu::LinalgLeafKernels& k = TS_DISPATCH(linalg_leaf_kernels);
  cpu::leaf_for<T>(k.gemv_minus_f32, k.gemv_minus_f64, k.gemv_minus_c64, k.gemv_minus_c128)(
      len, ncols, a, lda, s, conj_a, y);
}

}  // namespace tessera::linalg::detail
