// Eigenvalues and eigenvectors of a real symmetric tridiagonal matrix by Cuppen's divide and
// conquer (LAPACK's stedc / laed0-laed4), the second stage of eigh with vectors (spectral.h).
//
// Divide: T = diag(T1', T2') + rho v v^T, split at m with beta = e[m-1], T1' and T2' being T's
// diagonal blocks with |beta| taken off their touching corners, rho = |beta|,
// v = (e_m; sign(beta) e_1). Leaves (<= kLeafOrder) run the implicit QL of tridiagonal.cpp.
//
// Conquer: with T1' = Q1 D1 Q1^T and T2' = Q2 D2 Q2^T, T = Q (D + rho z z^T) Q^T for
// Q = diag(Q1, Q2) and z = Q^T v = (last row of Q1; sign(beta) first row of Q2), scaled to
// unit length (rho doubles).
// 1. Deflation (laed2): with D sorted, a component with rho |z_j| <= tol keeps (d_j, column
//    j of Q); two values close enough that the rotation zeroing one z component changes the
//    matrix by <= tol are rotated into one, and the other keeps its column. tol = 8 eps
//    max(|D|, |z|) on T scaled to norm 1.
// 2. The k remaining values: the roots lambda_i of the secular equation
//      f(x) = 1 + rho sum_j z_j^2 / (d_j - x) = 0,
//    one in each (d_i, d_i+1) and the last in (d_k-1, d_k-1 + rho |z|^2) (laed4). Each is
//    found relative to its nearer pole (origin o, lambda = d_o + tau), so that every
//    difference d_j - lambda_i = (d_j - d_o) - tau keeps its relative accuracy; the step is
//    the root of a model with the two poles around the root fitted to f and f' of the sums on
//    either side (Li's "middle way"), safeguarded by a bracket. In double for float data.
// 3. Eigenvectors by Gu and Eisenstat: z is replaced by the vector for which the computed
//    lambdas are exact (Loewner's formula, zhat_j^2 = prod_i (lambda_i - d_j) /
//    (rho prod_{i != j} (d_i - d_j))), and u_i = (zhat_j / (d_j - lambda_i))_j / norm is then
//    orthogonal to working precision however close the lambdas are.
// 4. The new vectors Q U by two engine GEMMs: Q's columns are grouped as from Q1 only, mixed
//    (a deflation rotation joined a Q1 and a Q2 column) and from Q2 only, so that the top rows
//    multiply only the first two groups and the bottom rows the last two.
// The two halves of the top split run on the pool's threads (everything below them then runs
// serially); the top merge splits its roots and vectors and its GEMMs over the pool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/cached_vector.h"
#include "linalg/spectral.h"
#include "tessera/core/parallel.h"

namespace tessera::linalg::detail {

namespace {

constexpr int64_t kLeafOrder = 32;
constexpr int kMaxSecularIterations = 100;

// The working precision of the secular equation and of the vector formula.
template <class R>
using secular_t = std::conditional_t<std::is_same_v<R, float>, double, R>;

template <class R>
void rotate_rows(const std::vector<PlaneRotation<R>>& rots, R* zc, int64_t ncols) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  const auto count = static_cast<int64_t>(rots.size());
  if constexpr (std::is_same_v<R, float>) {
    k.rotate_f32(rots.data(), count, zc, ncols, ncols);
  } else {
    k.rotate_f64(rots.data(), count, zc, ncols, ncols);
  }
}

// Root i of 1 + sum_j w_j / (d_j - x) (d increasing, w_j = rho z_j^2 > 0). Returns tau with
// lambda = d[origin] + tau, and delta[j] = d_j - lambda computed as (d_j - d_origin) - tau.
template <class W>
W secular_root(int64_t k, const W* d, const W* w, int64_t i, int64_t& origin, W* delta) {
  if (k == 1) {
    origin = 0;
    delta[0] = -w[0];
    return w[0];
  }
  W lo, hi;
  if (i < k - 1) {
    const W gap = d[i + 1] - d[i], mid = gap / 2;
    W f = 1;
    for (int64_t j = 0; j < k; ++j) f += w[j] / ((d[j] - d[i]) - mid);
    if (f >= 0) {
      origin = i, lo = 0, hi = mid;
    } else {
      origin = i + 1, lo = mid - gap, hi = 0;
    }
  } else {
    origin = k - 1, lo = 0, hi = 0;
    for (int64_t j = 0; j < k; ++j) hi += w[j];
  }
  for (int64_t j = 0; j < k; ++j) delta[j] = d[j] - d[origin];  // d_j - d_origin for now
  // The two poles around the root: left = j <= split, right = j > split.
  const int64_t split = std::min(i, k - 2);
  const W eps = std::numeric_limits<W>::epsilon();
  W tau = lo / 2 + hi / 2;
  for (int iter = 0; iter < kMaxSecularIterations; ++iter) {
    W psi = 0, dpsi = 0, phi = 0, dphi = 0;
    for (int64_t j = 0; j <= split; ++j) {
      const W inv = 1 / (delta[j] - tau);
      const W t = w[j] * inv;
      psi += t;
      dpsi += t * inv;
    }
    for (int64_t j = split + 1; j < k; ++j) {
      const W inv = 1 / (delta[j] - tau);
      const W t = w[j] * inv;
      phi += t;
      dphi += t * inv;
    }
    const W f = 1 + psi + phi;
    // psi <= 0 <= phi: |psi| + |phi| bounds the terms' magnitudes summed.
    if (std::abs(f) <= 8 * eps * (1 + phi - psi)) break;
    if (f < 0) {
      lo = tau;
    } else {
      hi = tau;
    }
    if (hi - lo <= 2 * eps * std::max(std::abs(lo), std::abs(hi))) break;
    // Model: c + s / (dl - eta) + S / (dr - eta) with the poles' distances dl, dr from tau,
    // s and S fitted to psi' and phi', c to f; its root eta is the step.
    const W dl = delta[split] - tau, dr = delta[split + 1] - tau;
    const W s = dpsi * dl * dl, S = dphi * dr * dr;
    const W c = f - s / dl - S / dr;
    const W b = c * (dl + dr) + s + S, cc = f * dl * dr;
    W next = tau;
    bool found = false;
    auto accept = [&](W eta) {
      const bool inside = i < k - 1 ? (eta > dl && eta < dr) : eta > dr;
      if (!found && std::isfinite(eta) && inside) {
        next = tau + eta;
        found = true;
      }
    };
    if (c == 0) {
      accept(cc / b);
    } else {
      const W sq = std::sqrt(std::max<W>(b * b - 4 * c * cc, 0));
      const W r1 = b >= 0 ? (b + sq) / (2 * c) : (b - sq) / (2 * c);
      accept(r1);
      if (r1 != 0) accept(cc / (c * r1));
    }
    if (!found || !(next > lo && next < hi)) next = lo / 2 + hi / 2;
    if (next == tau) break;
    tau = next;
  }
  for (int64_t j = 0; j < k; ++j) delta[j] -= tau;
  return tau;
}

template <class R>
class DivideConquer {
 public:
  DivideConquer(int64_t n, R* d, R* e, R* z) : n_(n), d_(d), e_(e), z_(z) {}

  int64_t solve(int64_t lo, int64_t size, bool top) {
    if (size <= kLeafOrder) return leaf(lo, size);
    const int64_t m1 = size / 2, m2 = size - m1;
    const R beta = e_[lo + m1 - 1];
    d_[lo + m1 - 1] -= std::abs(beta);
    d_[lo + m1] -= std::abs(beta);
    int64_t info[2] = {0, 0};
    auto half = [&](int64_t h) {
      info[h] = h == 0 ? solve(lo, m1, false) : solve(lo + m1, m2, false);
    };
    if (top && get_num_threads() > 1 && !in_parallel_region()) {
      parallel_tasks(2, half);
    } else {
      half(0);
      half(1);
    }
    if (info[0] != 0) return info[0];
    if (info[1] != 0) return info[1];
    merge(lo, m1, m2, beta);
    return 0;
  }

 private:
  R& q(int64_t lo, int64_t i, int64_t j) { return z_[(lo + i) * n_ + lo + j]; }

  int64_t leaf(int64_t lo, int64_t size) {
    cached_vector<R> zc(static_cast<size_t>(size * size), R(0));
    for (int64_t i = 0; i < size; ++i) zc[i * size + i] = 1;
    const int64_t info = tridiagonal_ql<R>(
        size, d_ + lo, e_ + lo,
        [&](const std::vector<PlaneRotation<R>>& rots) { rotate_rows(rots, zc.data(), size); });
    if (info != 0) return lo + info;
    sort_with_rows<R, R>(size, d_ + lo, /*ascending=*/true, zc.data(), size, nullptr, 0);
    for (int64_t i = 0; i < size; ++i)
      for (int64_t j = 0; j < size; ++j) q(lo, i, j) = zc[j * size + i];
    return 0;
  }

  void merge(int64_t lo, int64_t m1, int64_t m2, R beta);

  int64_t n_;
  R* d_;
  R* e_;
  R* z_;
};

template <class R>
void DivideConquer<R>::merge(int64_t lo, int64_t m1, int64_t m2, R beta) {
  using W = secular_t<R>;
  const int64_t s = m1 + m2;
  R* D = d_ + lo;
  // z = Q^T v / sqrt(2), rho = 2 |beta|.
  const R root_half = std::sqrt(R(0.5));
  const R rho = 2 * std::abs(beta);
  std::vector<R> z(static_cast<size_t>(s));
  for (int64_t j = 0; j < m1; ++j) z[j] = q(lo, m1 - 1, j) * root_half;
  const R sign = beta < 0 ? R(-1) : R(1);
  for (int64_t j = m1; j < s; ++j) z[j] = sign * q(lo, m1, j) * root_half;

  // 1. Deflation, in ascending order of D. kind: 1 = column from Q1 only, 2 = mixed, 3 = Q2.
  std::vector<int64_t> order(static_cast<size_t>(s));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return D[a] < D[b]; });
  std::vector<int> kind(static_cast<size_t>(s));
  for (int64_t j = 0; j < s; ++j) kind[j] = j < m1 ? 1 : 3;
  R dmax = 0, zmax = 0;
  for (int64_t j = 0; j < s; ++j) {
    dmax = std::max(dmax, std::abs(D[j]));
    zmax = std::max(zmax, std::abs(z[j]));
  }
  const R tol = 8 * std::numeric_limits<R>::epsilon() * std::max(dmax, zmax);
  std::vector<int64_t> kept, deflated;
  int64_t prev = -1;
  for (const int64_t j : order) {
    if (rho * std::abs(z[j]) <= tol) {
      deflated.push_back(j);
      continue;
    }
    if (prev < 0) {
      prev = j;
      continue;
    }
    const R tau = std::hypot(z[j], z[prev]);
    const R c = z[j] / tau, sn = -z[prev] / tau;
    if (std::abs((D[j] - D[prev]) * c * sn) <= tol) {
      // Rotate (prev, j) so that z[prev] = 0: prev keeps its (rotated) column.
      z[j] = tau;
      z[prev] = 0;
      for (int64_t r = 0; r < s; ++r) {
        R& x = q(lo, r, prev);
        R& y = q(lo, r, j);
        const R xr = c * x + sn * y, yr = c * y - sn * x;
        x = xr, y = yr;
      }
      const R dp = D[prev] * c * c + D[j] * sn * sn;
      D[j] = D[prev] * sn * sn + D[j] * c * c;
      D[prev] = dp;
      if (kind[prev] != kind[j]) kind[j] = 2;
      deflated.push_back(prev);
      prev = j;
    } else {
      kept.push_back(prev);
      prev = j;
    }
  }
  if (prev >= 0) kept.push_back(prev);
  const auto k = static_cast<int64_t>(kept.size());

  // Eigenpairs of the block: values in w, vectors as columns of out (s x s).
  std::vector<R> w(static_cast<size_t>(s));
  cached_vector<R> out(static_cast<size_t>(s * s));
  for (int64_t c = 0; c < static_cast<int64_t>(deflated.size()); ++c) {
    const int64_t j = deflated[c];
    w[k + c] = D[j];
    for (int64_t r = 0; r < s; ++r) out[r * s + k + c] = q(lo, r, j);
  }
  if (k > 0) {
    // 2. The secular equation, rows of delta (k x k): delta[i k + j] = d_j - lambda_i.
    std::vector<W> dk(static_cast<size_t>(k)), wk(static_cast<size_t>(k));
    cached_vector<W> delta(static_cast<size_t>(k * k));
    for (int64_t i = 0; i < k; ++i) {
      dk[i] = D[kept[i]];
      wk[i] = W(rho) * W(z[kept[i]]) * W(z[kept[i]]);
    }
    std::vector<int64_t> origin(static_cast<size_t>(k));
    // Each row of delta costs O(k) per iteration: rows, then columns, split over the pool.
    const int64_t grain = std::max<int64_t>(1, 4096 / k);
    parallel_for(0, k, grain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const W tau = secular_root<W>(k, dk.data(), wk.data(), i, origin[i], delta.data() + i * k);
        w[i] = static_cast<R>(dk[origin[i]] + tau);
      }
    });
    // 3. zhat (Loewner), accumulated along delta's rows for a range of j at a time.
    std::vector<W> zhat(static_cast<size_t>(k));
    parallel_for(0, k, grain, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) zhat[j] = -delta[j * k + j] / W(rho);
      for (int64_t i = 0; i < k; ++i) {
        const W* row = delta.data() + i * k;
        for (int64_t j = j0; j < j1; ++j)
          if (i != j) zhat[j] *= -row[j] / (dk[i] - dk[j]);
      }
      for (int64_t j = j0; j < j1; ++j)
        zhat[j] = std::copysign(std::sqrt(std::max<W>(zhat[j], 0)), W(z[kept[j]]));
    });
    // u_i = (zhat_j / delta_ij)_j / norm, as row i of ut with its entries in kind order
    // (1, 2, 3), so that ut^T is U with its rows grouped for the GEMMs.
    std::vector<int64_t> rows;  // kept indices in kind order
    for (int kd = 1; kd <= 3; ++kd)
      for (int64_t j = 0; j < k; ++j)
        if (kind[kept[j]] == kd) rows.push_back(j);
    int64_t count[4] = {0, 0, 0, 0};
    for (int64_t j = 0; j < k; ++j) ++count[kind[kept[j]]];
    cached_vector<R> ut(static_cast<size_t>(k * k));
    parallel_for(0, k, grain, [&](int64_t i0, int64_t i1) {
      std::vector<W> col(static_cast<size_t>(k));
      for (int64_t i = i0; i < i1; ++i) {
        W norm2 = 0;
        for (int64_t j = 0; j < k; ++j) {
          col[j] = zhat[j] / delta[i * k + j];
          norm2 += col[j] * col[j];
        }
        const W inv = 1 / std::sqrt(norm2);
        for (int64_t r = 0; r < k; ++r) ut[i * k + r] = static_cast<R>(col[rows[r]] * inv);
      }
    });
    // 4. top (m1 x k) = Q[0:m1, kinds 1-2] U[kinds 1-2], bottom (m2 x k) = Q[m1:s, kinds 2-3]
    // U[kinds 2-3], written into out's first k columns.
    const int64_t top_cols = count[1] + count[2], bottom_first = count[1];
    const int64_t bottom_cols = count[2] + count[3];
    cached_vector<R> qg(static_cast<size_t>(s * std::max(top_cols, bottom_cols)));
    if (top_cols > 0) {
      for (int64_t r = 0; r < m1; ++r)
        for (int64_t c = 0; c < top_cols; ++c) qg[r * top_cols + c] = q(lo, r, kept[rows[c]]);
      gemm_product<R>(m1, k, top_cols, qg.data(), top_cols, 1, ut.data(), 1, k, out.data(), s, 1);
    } else {
      for (int64_t r = 0; r < m1; ++r) std::fill_n(out.data() + r * s, k, R(0));
    }
    if (bottom_cols > 0) {
      for (int64_t r = 0; r < m2; ++r)
        for (int64_t c = 0; c < bottom_cols; ++c)
          qg[r * bottom_cols + c] = q(lo, m1 + r, kept[rows[bottom_first + c]]);
      gemm_product<R>(m2, k, bottom_cols, qg.data(), bottom_cols, 1, ut.data() + bottom_first, 1, k,
                      out.data() + m1 * s, s, 1);
    } else {
      for (int64_t r = m1; r < s; ++r) std::fill_n(out.data() + r * s, k, R(0));
    }
  }
  // Ascending values with their columns back into the block.
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return w[a] < w[b]; });
  for (int64_t c = 0; c < s; ++c) D[c] = w[order[c]];
  for (int64_t r = 0; r < s; ++r)
    for (int64_t c = 0; c < s; ++c) q(lo, r, c) = out[r * s + order[c]];
}

}  // namespace

template <class R>
int64_t stedc(int64_t n, R* d, R* e, R* z) {
  if (n == 0) return 0;
  std::fill_n(z, n * n, R(0));
  // Scaled to norm 1 (deflation's tolerance and the secular equation assume it).
  R norm = 0;
  for (int64_t i = 0; i < n; ++i) norm = std::max(norm, std::abs(d[i]));
  for (int64_t i = 0; i + 1 < n; ++i) norm = std::max(norm, std::abs(e[i]));
  if (norm == 0) {
    for (int64_t i = 0; i < n; ++i) z[i * n + i] = 1;
    return 0;
  }
  for (int64_t i = 0; i < n; ++i) d[i] /= norm;
  for (int64_t i = 0; i + 1 < n; ++i) e[i] /= norm;
  const int64_t info = DivideConquer<R>(n, d, e, z).solve(0, n, /*top=*/true);
  for (int64_t i = 0; i < n; ++i) d[i] *= norm;
  return info;
}

template int64_t stedc<float>(int64_t, float*, float*, float*);
template int64_t stedc<double>(int64_t, double*, double*, double*);

}  // namespace tessera::linalg::detail
