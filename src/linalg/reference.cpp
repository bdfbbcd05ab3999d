// Plain references for the linalg kernels: textbook loops in the order a numerical-analysis
// text writes them, std::complex arithmetic, no blocking and no GEMM. The tests compare every
// fast kernel with these (and both with LAPACK).
#include <cmath>
#include <limits>
#include <utility>

#include "linalg/kernels.h"

namespace tessera::linalg::detail {

// Cholesky-Banachiewicz: row by row, L(i, j) = (A(i, j) - sum_k L(i, k) conj(L(j, k))) / L(j, j)
// and L(j, j) = sqrt(A(j, j) - sum_k |L(j, k)|^2).
template <class T>
int64_t potrf_lower_reference(int64_t n, T* a, int64_t lda) {
  using R = real_t<T>;
  auto A = [&](int64_t i, int64_t j) -> T& { return a[i * lda + j]; };
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      T s = A(i, j);
      for (int64_t k = 0; k < j; ++k) s -= A(i, k) * conj_of(A(j, k));
      if (i == j) {
        const R d = real_part(s);
        if (!(d > R(0))) {
          A(i, i) = T(d);
          return i + 1;
        }
        A(i, i) = T(std::sqrt(d));
      } else {
        A(i, j) = s / A(j, j);
      }
    }
  }
  return 0;
}

// Right-looking Gaussian elimination with partial pivoting (LAPACK's getf2).
template <class T>
int64_t getrf_reference(int64_t m, int64_t n, T* a, int64_t lda, int32_t* ipiv) {
  auto A = [&](int64_t i, int64_t j) -> T& { return a[i * lda + j]; };
  int64_t info = 0;
  for (int64_t j = 0; j < std::min(m, n); ++j) {
    int64_t p = j;
    for (int64_t i = j + 1; i < m; ++i)
      if (abs1(A(i, j)) > abs1(A(p, j))) p = i;
    ipiv[j] = static_cast<int32_t>(p + 1);
    if (A(p, j) == T(0)) {
      if (info == 0) info = j + 1;
      continue;
    }
    for (int64_t k = 0; k < n; ++k) std::swap(A(j, k), A(p, k));
    for (int64_t i = j + 1; i < m; ++i) {
      A(i, j) /= A(j, j);
      for (int64_t k = j + 1; k < n; ++k) A(i, k) -= A(i, j) * A(j, k);
    }
  }
  return info;
}

// Forward (lower) or backward (upper) substitution, one right-hand side at a time.
template <class T>
void trsm_left_reference(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs,
                         bool lower, bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs) {
  auto A = [&](int64_t i, int64_t j) { return maybe_conj(a[i * a_rs + j * a_cs], conj); };
  auto B = [&](int64_t i, int64_t j) -> T& { return b[i * b_rs + j * b_cs]; };
  for (int64_t c = 0; c < nrhs; ++c) {
    if (lower) {
      for (int64_t i = 0; i < n; ++i) {
        T x = B(i, c);
        for (int64_t k = 0; k < i; ++k) x -= A(i, k) * B(k, c);
        B(i, c) = unit ? x : x / A(i, i);
      }
    } else {
      for (int64_t i = n - 1; i >= 0; --i) {
        T x = B(i, c);
        for (int64_t k = i + 1; k < n; ++k) x -= A(i, k) * B(k, c);
        B(i, c) = unit ? x : x / A(i, i);
      }
    }
  }
}

#define TS_LINALG_INSTANTIATE(T)                                                                 \
  template int64_t potrf_lower_reference<T>(int64_t, T*, int64_t);                               \
  template int64_t getrf_reference<T>(int64_t, int64_t, T*, int64_t, int32_t*);                  \
  template void trsm_left_reference<T>(int64_t, int64_t, const T*, int64_t, int64_t, bool, bool, \
                                       bool, T*, int64_t, int64_t);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
