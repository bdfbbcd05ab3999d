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
//      f(x) = 1 + rho sum_j z_j^2 / (d_j - x) = 0
//    (laed4; secular.h: each relative to its nearer pole), in double for float data.
// 3. Eigenvectors by Gu and Eisenstat: u_i = (zhat_j / (d_j - lambda_i))_j / norm with zhat
//    the vector for which the computed lambdas are exact (secular.h).
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
#include "linalg/secular.h"
#include "linalg/spectral.h"
#include "tessera/core/parallel.h"

namespace tessera::linalg::detail {

namespace {

constexpr int64_t kLeafOrder = 32;

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
    if (const int64_t info = solve_halves(
            top,
            [&](int64_t h) { return h == 0 ? solve(lo, m1, false) : solve(lo + m1, m2, false); });
        info != 0)
      return info;
    // A root of the merge that did not converge: the block fails as a whole.
    return merge(lo, m1, m2, beta) == 0 ? 0 : lo + 1;
  }

 private:
  R& q(int64_t lo, int64_t i, int64_t j) { return z_[(lo + i) * n_ + lo + j]; }

  int64_t leaf(int64_t lo, int64_t size) {
    cached_vector<R> zc(static_cast<size_t>(size * size), R(0));
    for (int64_t i = 0; i < size; ++i) zc[i * size + i] = 1;
    const int64_t info =
        tridiagonal_ql<R>(size, d_ + lo, e_ + lo, [&](const std::vector<PlaneRotation<R>>& rots) {
          rotate_rows_real(rots.data(), static_cast<int64_t>(rots.size()), zc.data(), size, size);
        });
    if (info != 0) return lo + info;
    sort_with_rows<R, R>(size, d_ + lo, /*ascending=*/true, zc.data(), size, nullptr, 0);
    for (int64_t i = 0; i < size; ++i)
      for (int64_t j = 0; j < size; ++j) q(lo, i, j) = zc[j * size + i];
    return 0;
  }

  int64_t merge(int64_t lo, int64_t m1, int64_t m2, R beta);

  int64_t n_;
  R* d_;
  R* e_;
  R* z_;
};

template <class R>
int64_t DivideConquer<R>::merge(int64_t lo, int64_t m1, int64_t m2, R beta) {
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
      rotate_columns(&q(lo, 0, 0), n_, s, prev, j, c, sn);
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
    // 2-3. The roots of the secular equation of D + rho z z^T (given sqrt(rho) z) and zhat.
    std::vector<W> dk(static_cast<size_t>(k)), zk(static_cast<size_t>(k));
    std::vector<int> kinds(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
      dk[i] = D[kept[i]];
      zk[i] = std::sqrt(W(rho)) * W(z[kept[i]]);
      kinds[i] = kind[kept[i]];
    }
    SecularSolution<W> sol;
    if (solve_secular<W>(
            k, zk.data(), [&](int64_t a, int64_t b) { return dk[a] - dk[b]; }, sol) != 0)
      return 1;
    for (int64_t i = 0; i < k; ++i) w[i] = static_cast<R>(dk[sol.origin[i]] + sol.tau[i]);
    // u_i = (zhat_j / delta_ij)_j / norm as row i of ut.
    cached_vector<R> ut(static_cast<size_t>(k * k));
    const int64_t grain = std::max<int64_t>(1, 4096 / k);
    parallel_for(0, k, grain, [&](int64_t i0, int64_t i1) {
      std::vector<W> col(static_cast<size_t>(k));
      for (int64_t i = i0; i < i1; ++i) {
        W norm2 = 0;
        for (int64_t j = 0; j < k; ++j) {
          col[j] = sol.zhat[j] / sol.delta[i * k + j];
          norm2 += col[j] * col[j];
        }
        const W inv = 1 / std::sqrt(norm2);
        for (int64_t j = 0; j < k; ++j) ut[i * k + j] = static_cast<R>(col[j] * inv);
      }
    });
    // 4. The new vectors Q[:, kept] U into out's first k columns.
    grouped_product<R>(s, m1, &q(lo, 0, 0), n_, kept.data(), kinds.data(), k, ut.data(), out.data(),
                       s);
  }
  // Ascending values with their columns back into the block.
  const std::vector<int64_t> up = ascending_order(w);
  for (int64_t c = 0; c < s; ++c) D[c] = w[up[c]];
  place_columns(out.data(), s, up, &q(lo, 0, 0), n_);
  return 0;
}

}  // namespace

template <class R>
void grouped_product(int64_t rows, int64_t split, const R* q, int64_t ldq, const int64_t* cols,
                     const int* kind, int64_t k, const R* xt, R* out, int64_t ld_out) {
  std::vector<int64_t> order;  // X's rows (kept indices) in kind order 1, 2, 3
  int64_t count[4] = {0, 0, 0, 0};
  for (int kd = 1; kd <= 3; ++kd)
    for (int64_t j = 0; j < k; ++j)
      if (kind[j] == kd) order.push_back(j), ++count[kd];
  cached_vector<R> xg(static_cast<size_t>(k * k));  // X with its rows in kind order
  for (int64_t r = 0; r < k; ++r)
    for (int64_t i = 0; i < k; ++i) xg[r * k + i] = xt[i * k + order[r]];
  const int64_t top_cols = count[1] + count[2], bottom_first = count[1];
  const int64_t bottom_cols = count[2] + count[3];
  cached_vector<R> qg(static_cast<size_t>(rows * std::max<int64_t>(top_cols, bottom_cols)));
  auto part = [&](int64_t r0, int64_t r1, int64_t first, int64_t ncols) {
    if (r1 <= r0) return;
    if (ncols == 0) {
      for (int64_t r = r0; r < r1; ++r) std::fill_n(out + r * ld_out, k, R(0));
      return;
    }
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < ncols; ++c)
        qg[(r - r0) * ncols + c] = q[r * ldq + cols[order[first + c]]];
    gemm_product<R>(r1 - r0, k, ncols, qg.data(), ncols, 1, xg.data() + first * k, k, 1,
                    out + r0 * ld_out, ld_out, 1);
  };
  part(0, split, 0, top_cols);
  part(split, rows, bottom_first, bottom_cols);
}

template <class R>
int64_t stedc(int64_t n, R* d, R* e, R* z) {
  if (n == 0) return 0;
  std::fill_n(z, n * n, R(0));
  for (int64_t i = 0; i < n; ++i) z[i * n + i] = 1;  // the answer for T = 0
  return solve_scaled(n, d, e, [&] { return DivideConquer<R>(n, d, e, z).solve(0, n, true); });
}

template void grouped_product<float>(int64_t, int64_t, const float*, int64_t, const int64_t*,
                                     const int*, int64_t, const float*, float*, int64_t);
template void grouped_product<double>(int64_t, int64_t, const double*, int64_t, const int64_t*,
                                      const int*, int64_t, const double*, double*, int64_t);
template int64_t stedc<float>(int64_t, float*, float*, float*);
template int64_t stedc<double>(int64_t, double*, double*, double*);

}  // namespace tessera::linalg::detail
