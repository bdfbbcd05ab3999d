// Householder reflectors H = I - tau v v^H (LAPACK's larfg conventions, beta real so that the
// tridiagonal and bidiagonal forms of complex matrices are real), and the unblocked QR that
// preconditions the Jacobi SVD of tall matrices (spectral.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "linalg/spectral.h"

namespace tessera::linalg::detail {

namespace {

template <class T>
real_t<T> imag_part(T x) {
  if constexpr (kIsComplex<T>) {
    return x.imag();
  } else {
    (void)x;
    return real_t<T>(0);
  }
}

// sqrt(sum |x_i|^2) without overflow or underflow in the squares.
template <class T>
real_t<T> vector_norm(int64_t n, const T* x) {
  using R = real_t<T>;
  R amax = 0;
  for (int64_t i = 0; i < n; ++i)
    amax = std::max({amax, std::abs(real_part(x[i])), std::abs(imag_part(x[i]))});
  if (amax == R(0) || !std::isfinite(amax)) return amax;
  // Within this range no square over- or underflows for the lengths used here.
  const R lo = std::sqrt(std::numeric_limits<R>::min()) * R(1e3);
  const R hi = std::sqrt(std::numeric_limits<R>::max()) * R(1e-3);
  R sum = 0;
  if (amax > lo && amax < hi) {
    for (int64_t i = 0; i < n; ++i) sum += abs2(x[i]);
    return std::sqrt(sum);
  }
  const R r = R(1) / amax;
  for (int64_t i = 0; i < n; ++i) sum += abs2(x[i] * r);
  return amax * std::sqrt(sum);
}

}  // namespace

template <class T>
T householder_vector(int64_t n, T& alpha, T* x) {
  using R = real_t<T>;
  const R xnorm = vector_norm(n, x);
  const R ar = real_part(alpha), ai = imag_part(alpha);
  if (xnorm == R(0) && ai == R(0)) return T(0);
  const R beta = -std::copysign(std::hypot(std::hypot(ar, ai), xnorm), ar);
  T tau;
  if constexpr (kIsComplex<T>) {
    tau = T((beta - ar) / beta, -ai / beta);
  } else {
    tau = (beta - ar) / beta;
  }
  const T scale = T(1) / (alpha - T(beta));
  for (int64_t i = 0; i < n; ++i) x[i] = mul(x[i], scale);
  alpha = T(beta);
  return tau;
}

template <class T>
void apply_householder(int64_t n, const T* v_tail, T tau, T* x, bool conj_tau) {
  if (tau == T(0) || n == 0) return;
  if constexpr (!kIsComplex<T>) {
    T dots[3];
    dot3_real(n - 1, v_tail, x + 1, dots);
    const T f = tau * (x[0] + dots[2]);
    x[0] -= f;
    axpy_real(n - 1, -f, v_tail, x + 1);
    return;
  }
  T d = x[0];
  for (int64_t i = 1; i < n; ++i) d += mul(conj_of(v_tail[i - 1]), x[i]);
  const T f = mul(conj_tau ? conj_of(tau) : tau, d);
  x[0] -= f;
  for (int64_t i = 1; i < n; ++i) x[i] = fms(x[i], f, v_tail[i - 1]);
}

template <class T>
void qr_columns(int64_t m, int64_t n, T* ac, int64_t lda, T* tau) {
  for (int64_t k = 0; k < n && k < m; ++k) {
    T* col = ac + k * lda;
    tau[k] = householder_vector(m - k - 1, col[k], col + k + 1);
    for (int64_t j = k + 1; j < n; ++j)
      apply_householder(m - k, col + k + 1, tau[k], ac + j * lda + k, /*conj_tau=*/true);
  }
}

template <class T>
void apply_q(int64_t m, int64_t n, const T* ac, int64_t lda, const T* tau, T* x) {
  for (int64_t k = std::min(n, m) - 1; k >= 0; --k)
    apply_householder(m - k, ac + k * lda + k + 1, tau[k], x + k, /*conj_tau=*/false);
}

#define TS_LINALG_INSTANTIATE(T)                                      \
  template T householder_vector<T>(int64_t, T&, T*);                  \
  template void apply_householder<T>(int64_t, const T*, T, T*, bool); \
  template void qr_columns<T>(int64_t, int64_t, T*, int64_t, T*);     \
  template void apply_q<T>(int64_t, int64_t, const T*, int64_t, const T*, T*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
