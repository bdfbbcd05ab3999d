// Applying a Householder reflector H = I - tau v v^H to a vector (the tridiagonal and
// bidiagonal reductions; the reflectors themselves come from larfg in qr_kernels.cpp), and the
// orthogonal factor of reflectors shifted by one index, formed by the blocked orgqr.
#include <algorithm>
#include <vector>

#include "core/cached_vector.h"
#include "linalg/spectral.h"

namespace tessera::linalg::detail {

template <class T>
void apply_householder(int64_t n, const T* v_tail, T tau, T* x, bool conj_tau) {
  if (tau == T(0) || n == 0) return;
  if constexpr (!kIsComplex<T>) {
    const T f = tau * (x[0] + dot_real(n - 1, v_tail, x + 1));
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

namespace {

// The (n-1) x (n-1) reflector matrix of form_shifted_q (column k = reflector k's tail below
// its diagonal) at sub[i + k * ld].
template <class T>
void shifted_reflectors(int64_t n, int64_t count, const T* tails, int64_t ld_tails, T* sub,
                        int64_t ld) {
  for (int64_t k = 0; k < count; ++k)
    for (int64_t i = k + 1; i < n - 1; ++i) sub[i + k * ld] = tails[k * ld_tails + (i - k - 1)];
}

}  // namespace

template <class T>
void form_shifted_q(int64_t n, int64_t count, const T* tails, int64_t ld_tails, const T* tau,
                    T* z) {
  std::fill(z, z + n * n, T(0));
  if (n == 0) return;
  z[0] = T(1);
  if (n == 1) return;
  // Q = diag(1, Q'), Q' = orgqr of the (n-1) x (n-1) reflector matrix; Q'(i, j) at
  // z[(1 + j) * n + 1 + i].
  T* sub = z + n + 1;
  shifted_reflectors(n, count, tails, ld_tails, sub, n);
  orgqr(n - 1, n - 1, count, sub, int64_t{1}, n, tau);
}

template <class T>
void apply_shifted_q(int64_t n, int64_t count, const T* tails, int64_t ld_tails, const T* tau,
                     int64_t ncols, T* c) {
  if (n <= 1 || count == 0) return;
  // Q = diag(1, Q'): row 0 of C stays; rows 1 .. n-1 get Q' by the blocked ormqr.
  cached_vector<T> sub(static_cast<size_t>((n - 1) * count), T(0));
  shifted_reflectors(n, count, tails, ld_tails, sub.data(), n - 1);
  ormqr(/*adjoint=*/false, n - 1, ncols, count, sub.data(), int64_t{1}, n - 1, tau, c + ncols,
        ncols, int64_t{1});
}

#define TS_LINALG_INSTANTIATE(T)                                                      \
  template void apply_householder<T>(int64_t, const T*, T, T*, bool);                 \
  template void form_shifted_q<T>(int64_t, int64_t, const T*, int64_t, const T*, T*); \
  template void apply_shifted_q<T>(int64_t, int64_t, const T*, int64_t, const T*, int64_t, T*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
