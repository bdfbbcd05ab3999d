// Hermitian eigendecomposition by cyclic two-sided Jacobi, and the heev driver (spectral.h).
//
// A sweep visits every pair p < q in row-cyclic order. For a_pq = r w (r = |a_pq|, |w| = 1) the
// rotation G = D R, with D the phase conj(w) on index q (making a_pq real) and R the real
// rotation [[c, s], [-s, c]] with t = s / c = sign(zeta) / (|zeta| + sqrt(1 + zeta^2)),
// zeta = (a_qq - a_pp) / (2 r), turns A into G^H A G with a_pq = 0:
//   rows     row_p := c row_p - s w row_q,          row_q := s row_p + c w row_q
//   columns  col_p := c col_p - s conj(w) col_q,    col_q := s col_p + c conj(w) col_q
//   a_pp -= t r,  a_qq += t r
// A stays Hermitian, so the columns are written as the conjugates of the updated rows. V
// (columns as rows) takes the column operation.
//
// Threshold strategy: in the first three sweeps a pair is skipped when |a_pq| is below a fifth
// of the mean off-diagonal magnitude (the large ones go first); afterwards only when
// |a_pq| <= eps sqrt(|a_pp a_qq|), the criterion that keeps the eigenvalues of graded
// (D H D) matrices relatively accurate. A sweep without a rotation ends the iteration.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "linalg/spectral.h"

namespace tessera::linalg::detail {

namespace {

constexpr int kMaxSweeps = 60;
constexpr int kThresholdSweeps = 3;

}  // namespace

template <class T>
int64_t heev_jacobi(int64_t n, T* a, real_t<T>* w, T* v) {
  using R = real_t<T>;
  const R eps = std::numeric_limits<R>::epsilon();
  const R tiny = std::numeric_limits<R>::min();
  std::vector<T> vc;
  if (v) {
    vc.assign(static_cast<size_t>(n * n), T(0));
    for (int64_t i = 0; i < n; ++i) vc[i * n + i] = T(1);
  }
  auto A = [&](int64_t i, int64_t j) -> T& { return a[i * n + j]; };
  bool converged = n <= 1;
  for (int sweep = 0; sweep < kMaxSweeps && !converged; ++sweep) {
    R off = 0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) off += std::abs(A(p, q));
    const R skip_below = sweep < kThresholdSweeps ? R(0.2) * off / R(n * n) : R(0);
    bool rotated = false;
    for (int64_t p = 0; p < n - 1; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        const T apq = A(p, q);
        const R r = std::abs(apq);
        const R app = real_part(A(p, p)), aqq = real_part(A(q, q));
        if (r <= std::max(eps * std::sqrt(std::abs(app * aqq)), tiny)) continue;
        if (r < skip_below) {
          rotated = true;  // not converged yet
          continue;
        }
        rotated = true;
        const T ph = apq / r;  // w
        const R t = jacobi_tangent(app, aqq, r);
        const R c = 1 / std::sqrt(1 + t * t), s = t * c;
        const T sw = ph * s, cw = ph * c;
        T* rp = a + p * n;
        T* rq = a + q * n;
        for (int64_t k = 0; k < n; ++k) {
          const T xp = rp[k], xq = rq[k];
          rp[k] = c * xp - mul(sw, xq);
          rq[k] = s * xp + mul(cw, xq);
        }
        for (int64_t k = 0; k < n; ++k) {
          A(k, p) = conj_of(rp[k]);
          A(k, q) = conj_of(rq[k]);
        }
        A(p, p) = T(app - t * r);
        A(q, q) = T(aqq + t * r);
        A(p, q) = A(q, p) = T(0);
        if (v) {
          T* vp = vc.data() + p * n;
          T* vq = vc.data() + q * n;
          const T swc = conj_of(sw), cwc = conj_of(cw);
          for (int64_t k = 0; k < n; ++k) {
            const T xp = vp[k], xq = vq[k];
            vp[k] = c * xp - mul(swc, xq);
            vq[k] = s * xp + mul(cwc, xq);
          }
        }
      }
    }
    converged = !rotated;
  }
  if (!converged) return 1;
  for (int64_t j = 0; j < n; ++j) w[j] = real_part(A(j, j));
  sort_with_rows<R, T>(n, w, /*ascending=*/true, v ? vc.data() : nullptr, n, nullptr, 0);
  if (v)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) v[i * n + j] = vc[j * n + i];
  return 0;
}

template <class T>
int64_t heev(int64_t n, T* a, real_t<T>* w, T* v) {
  using R = real_t<T>;
  // Scale by a power of two so that max |a_ij| is in [1, 2): nothing over- or underflows in the
  // rotations, and undoing it is exact.
  R amax = 0;
  for (int64_t i = 0; i < n * n; ++i) amax = std::max(amax, abs1(a[i]));
  const R scale = unit_scale(amax);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) a[i * n + j] *= scale;
    a[i * n + i] = T(real_part(a[i * n + i]));
  }
  const int64_t info =
      n <= kJacobiMaxOrder ? heev_jacobi(n, a, w, v) : heev_tridiagonal(n, a, w, v);
  for (int64_t j = 0; j < n; ++j) w[j] /= scale;
  return info;
}

#define TS_LINALG_INSTANTIATE(T)                                \
  template int64_t heev_jacobi<T>(int64_t, T*, real_t<T>*, T*); \
  template int64_t heev<T>(int64_t, T*, real_t<T>*, T*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
