// Internal kernels of tessera::linalg on one matrix at a time.
//
// A matrix is a pointer plus element strides: M(i, j) = p[i * rs + j * cs]. Factorizations
// work in place on row-major storage (cs == 1, rs == ld); triangular solves take any strides
// (a transpose is a swap of strides; `conj` reads conj(A(i, j))). T is float, double,
// complex64 or complex128 (explicit instantiations in the .cpp files).
//
// Each fast kernel has a plain reference beside it (reference.cpp) that the tests compare
// against:
//   potrf_upper         right-looking recursive Cholesky A = U^H U (LAPACK's potrf2 shape):
//                       halves, trsm for the panel right of the diagonal, GEMM engine for the
//                       upper trailing update; unblocked right-looking up to n = 32
//   getrf               blocked right-looking LU with partial pivoting: 128-wide panels
//                       factored by the recursive getrf2 on a column-major copy, trsm for
//                       U12, GEMM engine for the trailing update; unblocked up to 32
//   trsm_left           recursive triangular solve: unblocked 16-row leaves + GEMM updates
//
// Threads: called inside a parallel region, these kernels run serially (the GEMM engine too), so
// the callers decide (batch-parallel for many matrices, pool-parallel for a few large ones).
// Outside one, the GEMM engine threads a large update, work on many independent columns (a wide
// B of trsm_left, the columns a block reflector updates) is split over the pool by
// for_column_shares below, getrf looks one panel ahead on the pool, getri solves its column
// blocks of L^-1 as pool tasks, and pivoted QR (geqp3, qr_internal.h) splits each step's pass
// over the remaining columns. Results are the same bits on any thread count.
#pragma once

#include <cstdint>

#include "core/function_ref.h"
#include "linalg/scalar_ops.h"
#include "tessera/core/dtype.h"

namespace tessera::linalg::detail {

// Instantiates X(T) for the four dtypes the kernels compute in (used by the .cpp files).
#define TS_LINALG_FOR_EACH_TYPE(X) \
  X(float)                         \
  X(double)                        \
  X(complex64)                     \
  X(complex128)

// ---- triangular solves -------------------------------------------------------------------------

// op(A) X = B in place of B (n x nrhs), A n x n triangular as seen through (a_rs, a_cs): `lower`
// says which triangle of that view is read, `conj` reads conj(A(i, j)), `unit` takes the
// diagonal as ones. Zero diagonal entries give inf/nan, as LAPACK's trsm.
template <class T>
void trsm_left(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs, bool lower,
               bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs);
template <class T>
void trsm_left_unblocked(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs,
                         bool lower, bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs);

// Work on independent columns (a triangular solve's right-hand sides, the columns a block
// reflector updates) is split over the pool by for_column_shares: outside a parallel region,
// with at least kMinShareWork multiply-adds, into one share per thread of at least
// kMinShareColumns columns (a multiple of 16 wide; the last share takes the rest), each run as
// fn(first column, columns) on one thread. From kMinShareColumns columns on, no choice in the
// kernels below depends on how many columns a call sees (gemm_minus's plain loop counts at most
// that many of m and of n; the engine's paths and arithmetic per element do not change), so a
// split gives the same bits as one call. Otherwise fn(0, ncols) runs on the calling thread.
inline constexpr int64_t kMinShareColumns = 128;
inline constexpr int64_t kMinShareWork = int64_t{1} << 21;
void for_column_shares(int64_t ncols, int64_t work, FunctionRef<void(int64_t, int64_t)> fn);

// C (m x n) -= A (m x k) * B (k x n), strided; B read conjugated when conj_b. Small products run
// a plain loop, larger ones the GEMM engine (with a conjugated copy of B when needed).
template <class T>
void gemm_minus(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
                int64_t b_rs, int64_t b_cs, bool conj_b, T* c, int64_t c_rs, int64_t c_cs);
// C (n x n) -= A (n x k) * B (k x n) on C's upper triangle only (j >= i; the strict lower
// triangle is neither read nor written): the GEMM engine's triangle mode (gemm_triangle).
template <class T>
void gemm_minus_upper(int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
                      int64_t b_rs, int64_t b_cs, T* c, int64_t c_rs, int64_t c_cs);
// C (m x n) = A (m x k) * B (k x n), strided, through the GEMM engine.
template <class T>
void gemm_product(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs,
                  const T* b, int64_t b_rs, int64_t b_cs, T* c, int64_t c_rs, int64_t c_cs);

// ---- Cholesky ----------------------------------------------------------------------------------

// A = U^H U for the upper triangle of row-major A (n x n, leading dimension lda), in place; the
// strict lower triangle is neither read nor written. Returns 0, or the order k (1-based) of
// the first leading minor that is not positive-definite (rows before k hold U's rows). The
// upper form on row-major storage is LAPACK's lower form on column-major storage: L = U^H.
template <class T>
int64_t potrf_upper(int64_t n, T* a, int64_t lda);
// The row-by-row form used for diagonal blocks and small matrices; reads and writes only the
// upper triangle.
template <class T>
int64_t potrf_upper_unblocked(int64_t n, T* a, int64_t lda);

// ---- LU ----------------------------------------------------------------------------------------

// P A = L U with partial pivoting for row-major A (m x n), in place; ipiv[0 .. min(m, n)) gets
// LAPACK's 1-based pivots. Returns 0 or the first i (1-based) with U(i, i) == 0 (the
// factorization continues past it, as LAPACK's).
template <class T>
int64_t getrf(int64_t m, int64_t n, T* a, int64_t lda, int32_t* ipiv);
// X = A^{-1} (row-major n x n, not aliasing lu) from getrf's factor of A (row-major lu, 1-based
// ipiv): U^{-1} L^{-1} P, as LAPACK's getri. A zero on U's diagonal gives inf/nan, as getri's
// caller is told by getrf's info.
template <class T>
void getri(int64_t n, const T* lu, const int32_t* ipiv, T* x);
// The recursive form (LAPACK's getrf2) on an m x n matrix with rs == 1 or cs == 1 (panels).
template <class T>
int64_t getrf_recursive(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, int32_t* ipiv);

// Applies row interchanges ipiv[k0 .. k1) (1-based rows, relative to `a`) to the ncols columns
// of the strided matrix a, forwards (or backwards when `reverse`), as LAPACK's laswp.
template <class T>
void laswp(int64_t ncols, T* a, int64_t rs, int64_t cs, int64_t k0, int64_t k1, const int32_t* ipiv,
           bool reverse = false);

// ---- references (reference.cpp): plain loops, for the tests
// --------------------------------------

template <class T>
int64_t potrf_lower_reference(int64_t n, T* a, int64_t lda);
template <class T>
int64_t getrf_reference(int64_t m, int64_t n, T* a, int64_t lda, int32_t* ipiv);
template <class T>
void trsm_left_reference(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs,
                         bool lower, bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs);

}  // namespace tessera::linalg::detail
