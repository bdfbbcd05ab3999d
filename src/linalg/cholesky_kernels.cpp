// Cholesky A = L L^H on row-major storage, lower triangle.
//
// Unblocked (n <= kUnblockedMax, and every diagonal block of the blocked form): right-looking,
// one column at a time. Column j is scaled by 1 / L(j, j) and copied, conjugated, into a
// contiguous buffer; the trailing lower triangle is then updated row by row,
//   A(i, j+1 .. i) -= L(i, j) * conj(L(j+1 .. i, j)),
// an axpy along a contiguous row (it vectorizes; a dot-product form would be a reduction, which
// the compiler may not reorder).
//
// Larger n: right-looking and recursive (LAPACK's potrf2 shape, as OpenBLAS runs it), so the
// panel and the trailing update are big GEMMs rather than many thin ones. With A split after
// n1 ~ n/2 columns:
//   A11 = L11 L11^H                 recursively (unblocked at the leaves)
//   L21 = A21 L11^{-H}              trsm (recursive; GEMMs inside)
//   A22 -= L21 L21^H                herk_lower_minus: GEMM engine on the lower triangle only
//                                   (diagonal blocks up to kHerkLeaf computed whole; their
//                                   upper halves are scratch)
//   A22 = L22 L22^H                 recursively.
#include <algorithm>
#include <cmath>
#include <vector>

#include "linalg/kernels.h"

namespace tessera::linalg::detail {

namespace {

constexpr int64_t kUnblockedMax = 32;  // n above this runs the recursive form
constexpr int64_t kHerkLeaf = 128;     // diagonal blocks of the trailing update up to this

// C -= A A^H on the lower triangle of C (n x n), A n x k; both row-major. Recursive: the two
// diagonal halves recurse and the block below them is one GEMM; a diagonal block of at most
// kHerkLeaf rows is one GEMM over the whole square (its strict upper triangle is scratch).
template <class T>
void herk_lower_minus(int64_t n, int64_t k, const T* a, int64_t lda, T* c, int64_t ldc) {
  if (n <= kHerkLeaf) {
    gemm_minus(n, n, k, a, lda, 1, a, 1, lda, /*conj_b=*/true, c, ldc, 1);
    return;
  }
  const int64_t n1 = n / 2, n2 = n - n1;
  const T* a2 = a + n1 * lda;
  herk_lower_minus(n1, k, a, lda, c, ldc);
  // C21 (n2 x n1) -= A2 A1^H
  gemm_minus(n2, n1, k, a2, lda, 1, a, 1, lda, /*conj_b=*/true, c + n1 * ldc, ldc, 1);
  herk_lower_minus(n2, k, a2, lda, c + n1 * ldc + n1, ldc);
}

}  // namespace

template <class T>
int64_t potrf_lower_unblocked(int64_t n, T* a, int64_t lda) {
  using R = real_t<T>;
  thread_local std::vector<T> col;
  col.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    T* rowj = a + j * lda;
    const R ajj = real_part(rowj[j]);
    if (!(ajj > R(0))) {  // NaN fails too
      rowj[j] = T(ajj);
      return j + 1;
    }
    const R d = std::sqrt(ajj);
    rowj[j] = T(d);
    const R r = R(1) / d;
    for (int64_t i = j + 1; i < n; ++i) {
      T& lij = a[i * lda + j];
      lij *= r;
      col[i] = conj_of(lij);
    }
    for (int64_t i = j + 1; i < n; ++i) {
      T* rowi = a + i * lda;
      const T lij = rowi[j];
      for (int64_t k = j + 1; k <= i; ++k) rowi[k] = fms(rowi[k], lij, col[k]);
    }
  }
  return 0;
}

template <class T>
int64_t potrf_lower(int64_t n, T* a, int64_t lda) {
  if (n <= kUnblockedMax) return potrf_lower_unblocked(n, a, lda);
  // Split at a multiple of 16 so the blocks below stay aligned with the trsm leaves.
  const int64_t n1 = (n / 2 + 15) / 16 * 16, n2 = n - n1;
  T* a21 = a + n1 * lda;
  T* a22 = a21 + n1;
  if (const int64_t info = potrf_lower(n1, a, lda)) return info;
  // X L11^H = A21  <=>  conj(L11) X^T = A21^T: A21^T is A21 with its strides swapped.
  trsm_left(n1, n2, a, lda, 1, /*lower=*/true, /*conj=*/true, /*unit=*/false, a21, 1, lda);
  herk_lower_minus(n2, n1, a21, lda, a22, lda);
  if (const int64_t info = potrf_lower(n2, a22, lda)) return n1 + info;
  return 0;
}

#define TS_LINALG_INSTANTIATE(T)                                   \
  template int64_t potrf_lower_unblocked<T>(int64_t, T*, int64_t); \
  template int64_t potrf_lower<T>(int64_t, T*, int64_t);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
