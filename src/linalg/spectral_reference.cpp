// Plain references for the eigh and svd kernels (spectral.h): textbook cyclic Jacobi in
// std::complex arithmetic, no threshold strategy, no blocking, no scaling. The tests compare
// every fast path (Jacobi, tridiagonal QL, bidiagonal QR, the lane-interleaved batches) with
// these and all of them with LAPACK.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "linalg/spectral.h"

namespace tessera::linalg::detail {

namespace {

constexpr int kMaxSweeps = 100;

// Rotation angle of the 2 x 2 Hermitian problem [[a, g], [conj(g), b]], |g| = r > 0.
template <class R>
void jacobi_angle(R a, R b, R r, R& c, R& s) {
  const R zeta = (b - a) / (2 * r);
  const R t = std::copysign(R(1), zeta) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
  c = 1 / std::sqrt(1 + t * t);
  s = t * c;
}

}  // namespace

template <class T>
int64_t heev_reference(int64_t n, const T* a_in, real_t<T>* w, T* v) {
  using R = real_t<T>;
  std::vector<T> a(a_in, a_in + n * n), vv(static_cast<size_t>(n * n), T(0));
  for (int64_t i = 0; i < n; ++i) vv[i * n + i] = T(1), a[i * n + i] = T(real_part(a[i * n + i]));
  auto A = [&](int64_t i, int64_t j) -> T& { return a[i * n + j]; };
  auto V = [&](int64_t i, int64_t j) -> T& { return vv[i * n + j]; };
  const R eps = std::numeric_limits<R>::epsilon();
  bool done = false;
  for (int sweep = 0; sweep < kMaxSweeps && !done; ++sweep) {
    done = true;
    for (int64_t p = 0; p < n; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        const R r = std::abs(A(p, q));
        if (r <= eps * std::sqrt(std::abs(real_part(A(p, p)) * real_part(A(q, q)))) ||
            r < std::numeric_limits<R>::min())
          continue;
        done = false;
        const T ph = A(p, q) / r;
        R c, s;
        jacobi_angle(real_part(A(p, p)), real_part(A(q, q)), r, c, s);
        // G = [[c, s], [-s conj(ph), c conj(ph)]] on (p, q); A := G^H A G, V := V G.
        const T g_pp = c, g_pq = s, g_qp = -s * conj_of(ph), g_qq = c * conj_of(ph);
        for (int64_t k = 0; k < n; ++k) {  // A G and V G
          const T ap = A(k, p), aq = A(k, q);
          A(k, p) = ap * g_pp + aq * g_qp;
          A(k, q) = ap * g_pq + aq * g_qq;
          const T vp = V(k, p), vq = V(k, q);
          V(k, p) = vp * g_pp + vq * g_qp;
          V(k, q) = vp * g_pq + vq * g_qq;
        }
        for (int64_t k = 0; k < n; ++k) {  // G^H (A G)
          const T ap = A(p, k), aq = A(q, k);
          A(p, k) = conj_of(g_pp) * ap + conj_of(g_qp) * aq;
          A(q, k) = conj_of(g_pq) * ap + conj_of(g_qq) * aq;
        }
        A(p, q) = A(q, p) = T(0);  // zero by construction; rounding would leave eps ||A||
      }
    }
  }
  if (!done) return 1;
  std::vector<R> d(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) d[j] = real_part(A(j, j));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return d[x] < d[y]; });
  for (int64_t j = 0; j < n; ++j) {
    w[j] = d[order[j]];
    if (v)
      for (int64_t i = 0; i < n; ++i) v[i * n + j] = V(i, order[j]);
  }
  return 0;
}

template <class T>
int64_t svdvals_reference(int64_t m, int64_t n, const T* a_in, real_t<T>* s) {
  using R = real_t<T>;
  // Columns of A (m >= n) or of A^H, one per row of `cols`.
  const bool tall = m >= n;
  const int64_t rows = tall ? m : n, k = tall ? n : m;
  std::vector<T> cols(static_cast<size_t>(rows * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (tall) {
        cols[j * rows + i] = a_in[i * n + j];
      } else {
        cols[i * rows + j] = conj_of(a_in[i * n + j]);
      }
    }
  const R eps = std::numeric_limits<R>::epsilon();
  bool done = false;
  for (int sweep = 0; sweep < kMaxSweeps && !done; ++sweep) {
    done = true;
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t q = p + 1; q < k; ++q) {
        T* x = cols.data() + p * rows;
        T* y = cols.data() + q * rows;
        R alpha = 0, beta = 0;
        T gamma = T(0);
        for (int64_t i = 0; i < rows; ++i) {
          alpha += std::norm(x[i]);
          beta += std::norm(y[i]);
          gamma += conj_of(x[i]) * y[i];
        }
        const R r = std::abs(gamma);
        if (!(r > eps * std::sqrt(alpha * beta))) continue;
        done = false;
        const T ph = gamma / r;
        R c, sn;
        jacobi_angle(alpha, beta, r, c, sn);
        for (int64_t i = 0; i < rows; ++i) {
          const T xp = x[i], yq = y[i];
          x[i] = c * xp - sn * conj_of(ph) * yq;
          y[i] = sn * xp + c * conj_of(ph) * yq;
        }
      }
    }
  }
  if (!done) return 1;
  for (int64_t j = 0; j < k; ++j) {
    R t = 0;
    for (int64_t i = 0; i < rows; ++i) t += std::norm(cols[j * rows + i]);
    s[j] = std::sqrt(t);
  }
  std::sort(s, s + k, [](R x, R y) { return x > y; });
  return 0;
}

#define TS_LINALG_INSTANTIATE(T)                                         \
  template int64_t heev_reference<T>(int64_t, const T*, real_t<T>*, T*); \
  template int64_t svdvals_reference<T>(int64_t, int64_t, const T*, real_t<T>*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
