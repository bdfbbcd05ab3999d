// Hermitian eigendecomposition for large n (spectral.h): Householder tridiagonalization, then
// implicit QL with Wilkinson shifts on the real tridiagonal matrix.
//
// 1. Reduction (LAPACK's hetd2 on the lower triangle, on the full matrix here): for k = 0 ..
//    n-3 the reflector H_k = I - tau v v^H with H_k^H x = beta e_1 for the column x below the
//    diagonal (beta real, so the tridiagonal matrix T is real), and the trailing matrix
//    A22 := H_k^H A22 H_k as a rank-2 update:
//      y = tau A22 v,   y += -(tau / 2) (y^H v) v,   A22 -= v y^H + y v^H.
//    A = Q T Q^H with Q = H_0 H_1 ... H_{n-3}.
// 2. Values only: QL (the tql2 / steqr iteration, tridiagonal_ql): deflate where
//    |e_m| <= eps ||T||; otherwise an implicit QL sweep with the Wilkinson shift from the
//    leading 2 x 2 block.
// 3. With vectors: T = Z diag(w) Z^T by divide and conquer (stedc, divide_conquer.cpp, whose
//    leaves run the same QL with their rotations applied), and the eigenvectors Q Z with Q
//    applied by its reflectors (the blocked ormqr, apply_shifted_q), never formed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cached_vector.h"
#include "linalg/spectral.h"
#include "tessera/core/parallel.h"

namespace tessera::linalg::detail {

namespace {

constexpr int kMaxIterationsPerValue = 30;

// Reduces the full Hermitian matrix a (n x n) to real tridiagonal (d, e); reflector k's tail
// is row k of vs (length n - k - 2) and its tau taus[k].
template <class T>
void tridiagonalize(int64_t n, T* a, real_t<T>* d, real_t<T>* e, cached_vector<T>& vs,
                    cached_vector<T>& taus) {
  vs.assign(static_cast<size_t>(n * n), T(0));
  taus.assign(static_cast<size_t>(n), T(0));
  cached_vector<T> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
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

// w = A v for the symmetric m x m matrix whose lower triangle is at a (row-major, ld), reading
// each entry once: row r gives w[r] += a(r, 0..r) . v and w[0..r) += a(r, 0..r) v[r]. Rows go to
// tasks of equal area (row r costs r), each with its own partial w in `part`.
template <class T>
void symv_lower(int64_t m, const T* a, int64_t ld, const T* v, T* w, cached_vector<T>& part) {
  const int64_t tasks =
      m * m < (int64_t{1} << 16) ? 1 : std::min<int64_t>(8, 4 * get_num_threads());
  part.assign(static_cast<size_t>(tasks * m), T(0));
  parallel_tasks(tasks, [&](int64_t t) {
    auto bound = [&](int64_t u) {
      return static_cast<int64_t>(double(m) * std::sqrt(double(u) / double(tasks)));
    };
    const int64_t r0 = t == 0 ? 0 : bound(t), r1 = t + 1 == tasks ? m : bound(t + 1);
    T* y = part.data() + t * m;
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = a + r * ld;
      y[r] += dot_axpy_real(r, row, v, v[r], y) + row[r] * v[r];
    }
  });
  std::copy(part.begin(), part.begin() + m, w);
  for (int64_t t = 1; t < tasks; ++t) axpy_real(m, T(1), part.data() + t * m, w);
}

// The real reduction blocked as LAPACK's sytrd / latrd (lower): panels of kPanel columns are
// reduced with the trailing matrix left as it was, each new column first brought up to date by
// the panel's earlier reflectors (A(g:, g) -= V W(g, :)^T + W(g:, :) V(g, :)^T) and each
// reflector's w = tau (A22 v - V (W^T v) - W (V^T v)) corrected likewise; then the trailing
// matrix takes A22 -= V W^T + W V^T as two engine GEMMs. Every pass over A22 reads half of it
// once (symv_lower, over the pool), instead of the unblocked form's full read, then read and
// write of a rank-2 update per column.
//
// Storage: row-major full matrix; "column j" below is row j of the storage (the same numbers by
// symmetry), so every vector is contiguous. Only the part of the matrix not yet reduced is
// kept symmetric; reduced rows hold the reflectors (their mirror columns go stale, unread).
template <class T>
void tridiagonalize_blocked(int64_t n, T* a, T* d, T* e, cached_vector<T>& vs,
                            cached_vector<T>& taus) {
  constexpr int64_t kPanel = 32;
  vs.assign(static_cast<size_t>(n * n), T(0));
  taus.assign(static_cast<size_t>(n), T(0));
  auto col = [&](int64_t j) { return a + j * n; };
  cached_vector<T> wt(static_cast<size_t>(kPanel * n)), tmp(static_cast<size_t>(2 * kPanel)), part;
  for (int64_t k = 0; k + 1 < n; k += kPanel) {
    const int64_t nb = std::min(kPanel, n - 1 - k), mm = n - k;  // W(r, i) at wt[i * mm + r]
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t g = k + i, len = n - g;
      T* cg = col(g) + g;
      for (int64_t j = 0; j < i; ++j) {  // A(g:, g) -= A(g:, k+j) W(i, j) + W(i:, j) A(g, k+j)
        axpy_real(len, -wt[j * mm + i], col(k + j) + g, cg);
        axpy_real(len, -col(k + j)[g], wt.data() + j * mm + i, cg);
      }
      d[g] = cg[0];
      T* v = cg + 1;  // the reflector, v[0] = 1 during the panel
      const int64_t m = len - 1;
      T alpha = v[0];
      const T tau = larfg(m - 1, alpha, v + 1, 1);
      e[g] = alpha;
      taus[g] = tau;
      std::copy(v + 1, v + m, vs.begin() + g * n);
      v[0] = T(1);
      // w = tau (A22 v - V (W^T v) - W (V^T v)), A22 = the trailing rows g+1.. as they were.
      T* w = wt.data() + i * mm + i + 1;
      symv_lower(m, col(g + 1) + g + 1, n, v, w, part);
      for (int64_t j = 0; j < i; ++j) {
        tmp[j] = dot_real(m, wt.data() + j * mm + i + 1, v);
        tmp[kPanel + j] = dot_real(m, col(k + j) + g + 1, v);
      }
      for (int64_t j = 0; j < i; ++j) {
        axpy_real(m, -tmp[j], col(k + j) + g + 1, w);
        axpy_real(m, -tmp[kPanel + j], wt.data() + j * mm + i + 1, w);
      }
      for (int64_t r = 0; r < m; ++r) w[r] *= tau;
      axpy_real(m, T(-0.5) * tau * dot_real(m, w, v), v, w);
    }
    // A22 -= V W^T + W V^T on the rows and columns past the panel.
    const int64_t off = k + nb, m2 = n - off;
    if (m2 > 0) {
      T* c = a + off * n + off;
      const T* vt = col(k) + off;     // V(r, i) = vt[i * n + r]
      const T* wtt = wt.data() + nb;  // W(r, i) = wtt[i * mm + r]
      gemm_minus(m2, m2, nb, vt, int64_t{1}, n, wtt, mm, int64_t{1}, false, c, n, int64_t{1});
      gemm_minus(m2, m2, nb, wtt, int64_t{1}, mm, vt, n, int64_t{1}, false, c, n, int64_t{1});
    }
  }
  d[n - 1] = a[(n - 1) * n + n - 1];
  e[n - 1] = 0;
}

}  // namespace

template <class R>
int64_t tridiagonal_ql(int64_t n, R* d, R* e, const RotationSink<R>& sink) {
  if (n == 0) return 0;
  const R eps = std::numeric_limits<R>::epsilon();
  std::vector<PlaneRotation<R>> rots;
  const size_t flush_at = static_cast<size_t>(std::max<int64_t>(4 * n, 256));
  auto flush = [&] {
    if (sink && !rots.empty()) sink(rots);
    rots.clear();
  };
  // Deflation is absolute, as EISPACK's tql2: |e_m| <= eps ||T||. (A relative test alone,
  // eps (|d_m| + |d_m+1|), stalls inside a cluster of zero eigenvalues, where rounding from the
  // large entries keeps e_m at eps ||T||.)
  R tnorm = 0;
  for (int64_t i = 0; i + 1 < n; ++i) tnorm = std::max(tnorm, std::abs(d[i]) + std::abs(e[i]));
  tnorm = std::max(tnorm, std::abs(d[n - 1]));
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
          if (m < n - 1) e[m] = 0;
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
        if (sink) rots.push_back({static_cast<int32_t>(i), static_cast<int32_t>(i + 1), c, s});
      }
      if (underflow) continue;
      d[l] -= p;
      e[l] = g;
      if (m < n - 1) e[m] = 0;
      if (rots.size() >= flush_at) flush();
    } while (m != l);
  }
  flush();
  return 0;
}

template <class T>
int64_t heev_tridiagonal(int64_t n, T* a, real_t<T>* w, T* v) {
  using R = real_t<T>;
  if (n == 0) return 0;
  std::vector<R> e(static_cast<size_t>(n));
  cached_vector<T> vs, taus;
  if constexpr (kIsComplex<T>) {
    tridiagonalize(n, a, w, e.data(), vs, taus);
  } else {
    tridiagonalize_blocked(n, a, w, e.data(), vs, taus);
  }
  if (!v) {
    const int64_t info = tridiagonal_ql<R>(n, w, e.data(), {});
    std::sort(w, w + n);
    return info;
  }
  // T = Z diag(w) Z^T by divide and conquer, then the eigenvectors of A are Q Z.
  cached_vector<R> z(static_cast<size_t>(n * n));
  if (const int64_t info = stedc<R>(n, w, e.data(), z.data()); info != 0) return info;
  // The eigenvectors of A: Q Z, Q applied by its reflectors (LAPACK's ormtr).
  std::copy(z.begin(), z.end(), v);
  apply_shifted_q(n, n - 1, vs.data(), n, taus.data(), n, v);
  return 0;
}

#define TS_LINALG_INSTANTIATE(T) template int64_t heev_tridiagonal<T>(int64_t, T*, real_t<T>*, T*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE
template int64_t tridiagonal_ql<float>(int64_t, float*, float*, const RotationSink<float>&);
template int64_t tridiagonal_ql<double>(int64_t, double*, double*, const RotationSink<double>&);

}  // namespace tessera::linalg::detail
