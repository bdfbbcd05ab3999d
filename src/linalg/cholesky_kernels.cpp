// Cholesky A = L L^H on row-major storage, lower triangle.
//
// Unblocked (n <= kUnblockedMax, and every diagonal block of the blocked form): right-looking,
// one column at a time. Column j is scaled by 1 / L(j, j) and copied, conjugated, into a
// contiguous buffer; the trailing lower triangle is then updated row by row,
//   A(i, j+1 .. i) -= L(i, j) * conj(L(j+1 .. i, j)),
// an axpy along a contiguous row (it vectorizes; a dot-product form would be a reduction, which
// the compiler may not reorder).
//
// Blocked (right-looking, block kNb), for each diagonal block k:
//   A11 = L11 L11^H                 unblocked
//   L21 = A21 L11^{-H}              trsm (recursive; GEMMs inside)
//   A22 -= L21 L21^H                GEMM engine, column strips of width kStrip from the diagonal
//                                   down, so only the lower triangle (plus the upper halves of
//                                   the strips' diagonal blocks, which are scratch) is computed.
#include <algorithm>
#include <cmath>
#include <vector>

#include "linalg/kernels.h"

namespace tessera::linalg::detail {

namespace {
constexpr int64_t kUnblockedMax = 96;  // n above this runs the blocked form
constexpr int64_t kNb = 96;            // diagonal block
constexpr int64_t kStrip = 384;        // trailing-update GEMM strip width
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
  for (int64_t k = 0; k < n; k += kNb) {
    const int64_t kb = std::min(kNb, n - k);
    T* a11 = a + k * lda + k;
    if (const int64_t info = potrf_lower_unblocked(kb, a11, lda)) return k + info;
    const int64_t r = n - k - kb;
    if (r == 0) break;
    T* a21 = a11 + kb * lda;
    // X L11^H = A21  <=>  conj(L11) X^T = A21^T: A21^T is A21 with its strides swapped.
    trsm_left(kb, r, a11, lda, 1, /*lower=*/true, /*conj=*/true, /*unit=*/false, a21, 1, lda);
    for (int64_t j = 0; j < r; j += kStrip) {
      const int64_t jw = std::min(kStrip, r - j);
      // A22(j:, j:j+jw) -= L21(j:, :) L21(j:j+jw, :)^H
      const T* lj = a21 + j * lda;
      gemm_minus(r - j, jw, kb, lj, lda, 1, lj, 1, lda, /*conj_b=*/true, a21 + j * lda + kb + j,
                 lda, 1);
    }
  }
  return 0;
}

#define TS_LINALG_INSTANTIATE(T)                                   \
  template int64_t potrf_lower_unblocked<T>(int64_t, T*, int64_t); \
  template int64_t potrf_lower<T>(int64_t, T*, int64_t);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
