// Cholesky A = U^H U on row-major storage, upper triangle (LAPACK's lower form on column-major
// storage: linalg.cholesky computes L = U^H through a transposing copy in and out, cholesky.cpp).
// The upper form keeps every operand of the blocked steps row-contiguous: the triangular solve's
// right-hand sides are rows of A12, and both operands of the trailing update U12^H U12 pack
// without transposes. The lower form on row-major storage solved on transposed views of A21 and
// packed both update operands by transposing; perf put about 20% of a float32 1024 factorization
// in those transposes (one thread).
//
// Unblocked (n <= kUnblockedMax, and every diagonal block of the blocked form): right-looking,
// one row at a time. Row j is scaled by 1 / U(j, j); the trailing upper triangle is then
// updated row by row,
//   A(i, i .. n) -= conj(U(j, i)) * U(j, i .. n),
// an axpy along contiguous rows (linalg/leaf's potrf, compiled per ISA).
//
// Larger n: right-looking and recursive (LAPACK's potrf2 shape), so the panel and the trailing
// update are big GEMMs rather than many thin ones. With A split after n1 ~ n/2 rows:
//   A11 = U11^H U11                 recursively (unblocked at the leaves)
//   U12 = U11^{-H} A12              trsm (recursive; GEMMs inside)
//   A22 -= U12^H U12                one GEMM on the upper triangle only (the engine's
//                                   triangle mode: each operand packed once, register tiles
//                                   below the diagonal skipped)
//   A22 = U22^H U22                 recursively.
#include <vector>

#include "linalg/kernels.h"
#include "linalg/leaf/leaf_kernels.h"

namespace tessera::linalg::detail {

namespace {

constexpr int64_t kUnblockedMax = 32;  // n above this runs the recursive form

}  // namespace

template <class T>
int64_t potrf_upper_unblocked(int64_t n, T* a, int64_t lda) {
  const cpu::LinalgLeafKernels& k = TS_DISPATCH(linalg_leaf_kernels);
  return cpu::leaf_for<T>(k.potrf_f32, k.potrf_f64, k.potrf_c64, k.potrf_c128)(n, a, lda);
}

template <class T>
int64_t potrf_upper(int64_t n, T* a, int64_t lda) {
  if (n <= kUnblockedMax) return potrf_upper_unblocked(n, a, lda);
  // Split at a multiple of 16 so the blocks right of it stay aligned with the trsm leaves.
  const int64_t n1 = (n / 2 + 15) / 16 * 16, n2 = n - n1;
  T* a12 = a + n1;
  T* a22 = a + n1 * lda + n1;
  if (const int64_t info = potrf_upper(n1, a, lda)) return info;
  // U11^H U12 = A12: U11^H is U11 with its strides swapped, read conjugated.
  trsm_left(n1, n2, a, 1, lda, /*lower=*/true, /*conj=*/true, /*unit=*/false, a12, lda, 1);
  if constexpr (kIsComplex<T>) {
    std::vector<T> ws(static_cast<size_t>(n1 * n2));  // conj(U12), the update's left operand
    for (int64_t i = 0; i < n1; ++i)
      for (int64_t j = 0; j < n2; ++j) ws[i * n2 + j] = conj_of(a12[i * lda + j]);
    gemm_minus_upper(n2, n1, ws.data(), 1, n2, a12, lda, 1, a22, lda, 1);
  } else {
    gemm_minus_upper(n2, n1, a12, 1, lda, a12, lda, 1, a22, lda, 1);
  }
  if (const int64_t info = potrf_upper(n2, a22, lda)) return n1 + info;
  return 0;
}

#define TS_LINALG_INSTANTIATE(T)                                   \
  template int64_t potrf_upper_unblocked<T>(int64_t, T*, int64_t); \
  template int64_t potrf_upper<T>(int64_t, T*, int64_t);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
