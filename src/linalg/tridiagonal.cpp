// Hermitian eigendecomposition for large n (spectral.h): Householder tridiagonalization, then
// implicit QL with Wilkinson shifts on the real tridiagonal matrix.
//
// 1. Reduction (LAPACK's hetd2 on the lower triangle, on the full matrix here): for k = 0 ..
//    n-3 the reflector H_k = I - tau v v^H with H_k^H x = beta e_1 for the column x below the
//    diagonal (beta real, so the tridiagonal matrix T is real), and the trailing matrix
//    A22 := H_k^H A22 H_k as a rank-2 update:
//      y = tau A22 v,   y += -(tau / 2) (y^H v) v,   A22 -= v y^H + y v^H.
//    A = Q T Q^H with Q = H_0 H_1 ... H_{n-3}.
// 2. Z := Q, kept as columns-as-rows (row j of zc is column j of Z).
// 3. QL (the tql2 / steqr iteration): deflate where |e_m| <= eps ||T||; otherwise an
//    implicit QL sweep with the Wilkinson shift from the leading 2 x 2 block. Each sweep's
//    plane rotations act on columns (i, i+1) of Z; they are recorded and applied in batches by
//    apply_rotations, which sweeps cache-sized column blocks of zc through a whole batch.
// 4. Eigenvalues sorted ascending with their vectors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "linalg/spectral.h"

namespace tessera::linalg::detail {

namespace {

constexpr int kMaxIterationsPerValue = 30;

// Reduces the full Hermitian matrix a (n x n) to real tridiagonal (d, e); reflector k's tail
// is row k of vs (length n - k - 2) and its tau taus[k].
template <class T>
void tridiagonalize(int64_t n, T* a, real_t<T>* d, real_t<T>* e, std::vector<T>& vs,
                    std::vector<T>& taus) {
  vs.assign(static_cast<size_t>(n * n), T(0));
  taus.assign(static_cast<size_t>(n), T(0));
  std::vector<T> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (int64_t k = 0; k + 1 < n; ++k) {
    d[k] = real_part(a[k * n + k]);
    const int64_t len = n - k - 1;
    for (int64_t i = 0; i < len; ++i) x[i] = a[(k + 1 + i) * n + k];
    T alpha = x[0];
    const T tau = larfg(len - 1, alpha, x.data() + 1, 1);
    e[k] = real_part(alpha);
    taus[k] = tau;
    x[0] = T(1);
    std::copy(x.begin() + 1, x.begin() + len, vs.begin() + k * n);
    if (tau == T(0)) continue;
    T* a22 = a + (k + 1) * n + (k + 1);
    // y = tau A22 v, as tau sum_i v_i A22(i, :) (A22 symmetric; axpys along rows); complex:
    // A22 v = conj(sum_i conj(v_i) A22(i, :)).
    std::fill(y.begin(), y.begin() + len, T(0));
    if constexpr (!kIsComplex<T>) {
      for (int64_t i = 0; i < len; ++i) axpy_real(len, x[i], a22 + i * n, y.data());
      for (int64_t i = 0; i < len; ++i) y[i] *= tau;
    } else {
      for (int64_t i = 0; i < len; ++i) {
        const T* row = a22 + i * n;
        const T ci = conj_of(x[i]);
        for (int64_t j = 0; j < len; ++j) y[j] += mul(ci, row[j]);
      }
      for (int64_t i = 0; i < len; ++i) y[i] = mul(tau, conj_of(y[i]));
    }
    T yv = T(0);
    for (int64_t i = 0; i < len; ++i) yv += mul(conj_of(y[i]), x[i]);
    const T alpha2 = mul(T(-0.5) * tau, yv);
    for (int64_t i = 0; i < len; ++i) y[i] += mul(alpha2, x[i]);
    for (int64_t i = 0; i < len; ++i) {
      T* row = a22 + i * n;
      const T vi = x[i], yi = y[i];
      if constexpr (!kIsComplex<T>) {
        axpy_real(len, -vi, y.data(), row);
        axpy_real(len, -yi, x.data(), row);
      } else {
        for (int64_t j = 0; j < len; ++j) row[j] -= mul(vi, conj_of(y[j])) + mul(yi, conj_of(x[j]));
      }
    }
  }
  d[n - 1] = real_part(a[(n - 1) * n + n - 1]);
  e[n - 1] = 0;
}

}  // namespace

template <class T>
int64_t heev_tridiagonal(int64_t n, T* a, real_t<T>* w, T* v) {
  using R = real_t<T>;
  if (n == 0) return 0;
  std::vector<R> e(static_cast<size_t>(n));
  std::vector<T> vs, taus;
  tridiagonalize(n, a, w, e.data(), vs, taus);
  // Z = Q as columns-as-rows: row j = Q e_j = H_0 (H_1 (... e_j)); H_k leaves e_j alone for
  // j <= k.
  std::vector<T> zc;
  if (v) {
    zc.assign(static_cast<size_t>(n * n), T(0));
    for (int64_t j = 0; j < n; ++j) {
      T* z = zc.data() + j * n;
      z[j] = T(1);
      for (int64_t k = std::min(j - 1, n - 2); k >= 0; --k)
        apply_householder(n - k - 1, vs.data() + k * n, taus[k], z + k + 1, /*conj_tau=*/false);
    }
  }
  const R eps = std::numeric_limits<R>::epsilon();
  std::vector<PlaneRotation<R>> rots;
  const size_t flush_at = static_cast<size_t>(std::max<int64_t>(4 * n, 256));
  auto flush = [&] {
    if (v) apply_rotations<T>(rots, zc.data(), n, n);
    rots.clear();
  };
  R* d = w;
  // Deflation is absolute, as EISPACK's tql2: |e_m| <= eps ||T||. (A relative test alone,
  // eps (|d_m| + |d_m+1|), stalls inside a cluster of zero eigenvalues, where rounding from the
  // large entries keeps e_m at eps ||T||.)
  R tnorm = 0;
  for (int64_t i = 0; i < n; ++i) tnorm = std::max(tnorm, std::abs(d[i]) + std::abs(e[i]));
  for (int64_t l = 0; l < n; ++l) {
    int iter = 0;
    int64_t m;
    do {
      for (m = l; m < n - 1; ++m) {
        if (std::abs(e[m]) <= eps * tnorm || std::abs(e[m]) < std::numeric_limits<R>::min()) break;
      }
      if (m == l) break;
      if (++iter > kMaxIterationsPerValue) {
        flush();
        return l + 1;
      }
      R g = (d[l + 1] - d[l]) / (2 * e[l]);
      R r = std::hypot(g, R(1));
      g = d[m] - d[l] + e[l] / (g + std::copysign(r, g));
      R s = 1, c = 1, p = 0;
      int64_t i;
      bool underflow = false;
      for (i = m - 1; i >= l; --i) {
        R f = s * e[i];
        const R b = c * e[i];
        r = std::hypot(f, g);
        e[i + 1] = r;
        if (r == R(0)) {  // recover from underflow
          d[i + 1] -= p;
          e[m] = 0;
          underflow = true;
          break;
        }
        s = f / r;
        c = g / r;
        g = d[i + 1] - p;
        r = (d[i] - g) * s + 2 * c * b;
        p = s * r;
        d[i + 1] = g + p;
        g = c * r - b;
        if (v) rots.push_back({static_cast<int32_t>(i), static_cast<int32_t>(i + 1), c, s});
      }
      if (underflow) continue;
      d[l] -= p;
      e[l] = g;
      e[m] = 0;
      if (rots.size() >= flush_at) flush();
    } while (m != l);
  }
  flush();
  sort_with_rows<R, T>(n, w, /*ascending=*/true, v ? zc.data() : nullptr, n, nullptr, 0);
  if (v)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) v[i * n + j] = zc[j * n + i];
  return 0;
}

#define TS_LINALG_INSTANTIATE(T) template int64_t heev_tridiagonal<T>(int64_t, T*, real_t<T>*, T*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
