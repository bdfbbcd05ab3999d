// Applying a Householder reflector H = I - tau v v^H to a vector (the tridiagonal and
// bidiagonal reductions; the reflectors themselves come from larfg in qr_kernels.cpp).
#include "linalg/spectral.h"

namespace tessera::linalg::detail {

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

#define TS_LINALG_INSTANTIATE(T) template void apply_householder<T>(int64_t, const T*, T, T*, bool);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
