// Singular values and vectors of a real upper bidiagonal matrix by divide and conquer (Gu and
// Eisenstat; LAPACK's bdsdc / lasd0-lasd4), the second stage of svd with vectors (spectral.h).
//
// A subproblem is an n x m upper bidiagonal block, m = n (square) or n + 1 (one more column,
// "sqre"): diagonal d[0 .. n), superdiagonal e[0 .. m-1). B = U [S 0] V^T with U n x n, V m x m
// (V's last column spans the null space when m = n + 1).
//
// Divide: row k = n / 2 (alpha = d_k at column k, beta = e_k at column k+1) is taken out;
// above it rows 0 .. k-1 with columns 0 .. k form a k x (k+1) block, below it rows k+1 ..
// n-1 with columns k+1 .. m-1 a block with B's own sqre. Leaves (n <= kBidiagonalLeafOrder)
// run the Golub-Kahan QR sweeps of bidiagonal.cpp.
//
// Conquer: with the halves' B1 = U1 [S1 0] V1^T and B2 = U2 [S2 0] V2^T,
//   B = diag(U1, 1, U2) M diag(V1, V2)^T,
// M being S1 and S2 on the diagonal (in their own rows and columns) plus row k,
// z = (alpha V1(k, :), beta V2(0, :)). The columns of M with only a z entry (V1's null
// column, and V2's when sqre) are rotated into one, column k (d_k := 0; the other becomes
// M's null column). Then M restricted to its first n columns, with row k moved first, is
// the "broken arrow" [z^T; 0 diag(d)], and M^T M = diag(d^2) + z z^T: its singular values
// sigma_i are the square roots of the rank-one problem's eigenvalues on poles d_j^2
// (secular.h, with pole differences (d_a - d_b)(d_a + d_b)). With zhat (Loewner):
//   right vectors  y_i = (zhat_j / (d_j^2 - sigma_i^2))_j / norm,
//   left vectors   x_i = (-1 at row k, d_j zhat_j / (d_j^2 - sigma_i^2))_j / norm,
// and the new U, V by grouped GEMMs (secular.h) on diag(U1, 1, U2) and diag(V1, V2).
// Deflation (lasd2), tol = 8 eps max(|d|, |z|) on the merge scaled to norm 1: a component
// |z_j| <= tol keeps (d_j, U's and V's column j); two values with |(d_j - d_p) c s| <= tol for
// the rotation zeroing z_p are rotated into one on both sides (p keeps its rotated columns);
// a value |d_j| <= tol is rotated into column k on the right (V) only; |z_k| is raised to tol.
// The two halves of the top split run on the pool's threads.
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

template <class R>
class BidiagonalDivideConquer {
 public:
  BidiagonalDivideConquer(int64_t n, R* d, R* e, R* u, R* v) : n_(n), d_(d), e_(e), u_(u), v_(v) {}

  // Rows [lo, lo + n), columns [lo, lo + n + sqre): U's block (lo, lo) n x n, V's block
  // (lo, lo) m x m; d[lo ..] gets the singular values ascending.
  int64_t solve(int64_t lo, int64_t n, int64_t sqre, bool top) {
    if (n <= kBidiagonalLeafOrder) return leaf(lo, n, sqre);
    const int64_t k = n / 2;
    const R alpha = d_[lo + k], beta = e_[lo + k];
    if (const int64_t info = solve_halves(top,
                                          [&](int64_t h) {
                                            return h == 0
                                                       ? solve(lo, k, 1, false)
                                                       : solve(lo + k + 1, n - k - 1, sqre, false);
                                          });
        info != 0)
      return info;
    // A root of the merge that did not converge: the block fails as a whole.
    return merge(lo, n, sqre, k, alpha, beta) == 0 ? 0 : lo + 1;
  }

 private:
  R& u(int64_t lo, int64_t i, int64_t j) { return u_[(lo + i) * n_ + lo + j]; }
  R& v(int64_t lo, int64_t i, int64_t j) { return v_[(lo + i) * n_ + lo + j]; }

  int64_t leaf(int64_t lo, int64_t n, int64_t sqre) {
    // The QR sweeps of svd_bidiagonal_tall on B^T (m x n, tall), whose columns-as-rows form is
    // B row-major: B^T = Ul S Vl^T gives B's V = Ul (rows of ul: V's columns, the null one
    // last) and U = Vl (rows of vl).
    const int64_t m = n + sqre;
    cached_vector<R> b(static_cast<size_t>(n * m), R(0)), ul(static_cast<size_t>(m * m)),
        vl(static_cast<size_t>(n * n));
    std::vector<R> s(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      b[i * m + i] = d_[lo + i];
      if (i + 1 < m) b[i * m + i + 1] = e_[lo + i];
    }
    if (const int64_t info =
            svd_bidiagonal_tall<R>(m, n, b.data(), s.data(), ul.data(), m, vl.data());
        info != 0)
      return lo + info;
    // Descending to ascending: column i is the leaf's column n-1-i; V's null column stays last.
    for (int64_t i = 0; i < n; ++i) {
      d_[lo + i] = s[n - 1 - i];
      for (int64_t r = 0; r < n; ++r) u(lo, r, i) = vl[(n - 1 - i) * n + r];
      for (int64_t r = 0; r < m; ++r) v(lo, r, i) = ul[(n - 1 - i) * m + r];
    }
    if (sqre)
      for (int64_t r = 0; r < m; ++r) v(lo, r, n) = ul[n * m + r];
    return 0;
  }

  int64_t merge(int64_t lo, int64_t n, int64_t sqre, int64_t k, R alpha, R beta);

  int64_t n_;
  R* d_;
  R* e_;
  R* u_;
  R* v_;
};

template <class R>
int64_t BidiagonalDivideConquer<R>::merge(int64_t lo, int64_t n, int64_t sqre, int64_t k, R alpha,
                                          R beta) {
  using W = secular_t<R>;
  const int64_t m = n + sqre;
  R* D = d_ + lo;
  R* ub = &u(lo, 0, 0);
  R* vb = &v(lo, 0, 0);
  // Scale to norm 1.
  R scale = std::max(std::abs(alpha), std::abs(beta));
  for (int64_t j = 0; j < n; ++j)
    if (j != k) scale = std::max(scale, std::abs(D[j]));
  if (scale == R(0)) scale = 1;
  alpha /= scale, beta /= scale;
  for (int64_t j = 0; j < n; ++j) D[j] = j == k ? R(0) : D[j] / scale;
  // z over M's columns; U's column k is the unit vector of row k.
  std::vector<R> z(static_cast<size_t>(m));
  for (int64_t j = 0; j <= k; ++j) z[j] = alpha * v(lo, k, j);
  for (int64_t j = k + 1; j < m; ++j) z[j] = beta * v(lo, k + 1, j);
  u(lo, k, k) = 1;
  // kinds: 1 = nonzero only above the split (U: rows 0 .. k; V: rows 0 .. k), 3 below, 2 both.
  std::vector<int> ukind(static_cast<size_t>(n)), vkind(static_cast<size_t>(m));
  for (int64_t j = 0; j < n; ++j) ukind[j] = j <= k ? 1 : 3;
  for (int64_t j = 0; j < m; ++j) vkind[j] = j <= k ? 1 : 3;
  if (sqre) {
    // V1's and V2's null columns (k, m-1) into one: column k gets all of z, m-1 none.
    const R r = std::hypot(z[k], z[m - 1]);
    if (r != R(0)) {
      rotate_columns(vb, n_, m, k, m - 1, z[k] / r, z[m - 1] / r);
      z[k] = r, z[m - 1] = 0;
      vkind[k] = vkind[m - 1] = 2;
    }
  }
  R dmax = 0, zmax = 0;
  for (int64_t j = 0; j < n; ++j) {
    dmax = std::max(dmax, std::abs(D[j]));
    zmax = std::max(zmax, std::abs(z[j]));
  }
  const R tol = 8 * std::numeric_limits<R>::epsilon() * std::max(dmax, zmax);
  if (std::abs(z[k]) <= tol) z[k] = std::copysign(tol, z[k]);

  // Deflation over the diagonal columns in ascending order of d; column k always stays.
  std::vector<int64_t> order;
  for (int64_t j = 0; j < n; ++j)
    if (j != k) order.push_back(j);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return D[a] < D[b]; });
  std::vector<int64_t> kept{k}, deflated;
  int64_t prev = k;
  for (const int64_t j : order) {
    if (std::abs(z[j]) <= tol) {
      deflated.push_back(j);
      continue;
    }
    const R tau = std::hypot(z[j], z[prev]);
    if (prev == k) {
      if (std::abs(D[j]) <= tol) {
        // d_j ~ 0 = d_k: rotate V's columns (k, j) so that z_j = 0; row j keeps c d_j.
        const R c = z[k] / tau, s = z[j] / tau;
        rotate_columns(vb, n_, m, k, j, c, s);
        z[k] = tau, z[j] = 0;
        D[j] *= c;
        if (vkind[k] != vkind[j]) vkind[k] = vkind[j] = 2;
        deflated.push_back(j);
        continue;
      }
      prev = j;
      continue;
    }
    const R c = z[j] / tau, s = -z[prev] / tau;
    if (std::abs((D[j] - D[prev]) * c * s) <= tol) {
      // Rotate (prev, j) on both sides so that z_prev = 0: prev keeps its columns.
      rotate_columns(ub, n_, n, prev, j, c, s);
      rotate_columns(vb, n_, m, prev, j, c, s);
      z[j] = tau, z[prev] = 0;
      const R dp = D[prev] * c * c + D[j] * s * s;
      D[j] = D[prev] * s * s + D[j] * c * c;
      D[prev] = dp;
      if (ukind[prev] != ukind[j]) ukind[prev] = ukind[j] = 2;
      if (vkind[prev] != vkind[j]) vkind[prev] = vkind[j] = 2;
      deflated.push_back(prev);
    } else {
      kept.push_back(prev);
    }
    prev = j;
  }
  if (prev != k) kept.push_back(prev);
  const auto nk = static_cast<int64_t>(kept.size());

  // Singular triplets of the block: values in sv, vectors in the first n columns of uo, vo.
  std::vector<R> sv(static_cast<size_t>(n));
  cached_vector<R> uo(static_cast<size_t>(n * n)), vo(static_cast<size_t>(m * n));
  for (int64_t c = 0; c < static_cast<int64_t>(deflated.size()); ++c) {
    const int64_t j = deflated[c];
    const R flip = D[j] < R(0) ? R(-1) : R(1);
    sv[nk + c] = std::abs(D[j]);
    for (int64_t r = 0; r < n; ++r) uo[r * n + nk + c] = flip * ub[r * n_ + j];
    for (int64_t r = 0; r < m; ++r) vo[r * n + nk + c] = vb[r * n_ + j];
  }
  // The broken arrow's poles d_j (d_k = 0 first) and z.
  std::vector<W> dk(static_cast<size_t>(nk)), zk(static_cast<size_t>(nk));
  std::vector<int> uk(static_cast<size_t>(nk)), vk(static_cast<size_t>(nk));
  for (int64_t i = 0; i < nk; ++i) {
    dk[i] = D[kept[i]];
    zk[i] = z[kept[i]];
    uk[i] = ukind[kept[i]];
    vk[i] = vkind[kept[i]];
  }
  SecularSolution<W> sol;
  if (solve_secular<W>(
          nk, zk.data(), [&](int64_t a, int64_t b) { return (dk[a] - dk[b]) * (dk[a] + dk[b]); },
          sol) != 0)
    return 1;
  cached_vector<R> xt(static_cast<size_t>(nk * nk)), yt(static_cast<size_t>(nk * nk));
  const int64_t grain = std::max<int64_t>(1, 4096 / nk);
  parallel_for(0, nk, grain, [&](int64_t i0, int64_t i1) {
    std::vector<W> x(static_cast<size_t>(nk)), y(static_cast<size_t>(nk));
    for (int64_t i = i0; i < i1; ++i) {
      const W dorg = dk[sol.origin[i]];
      sv[i] = static_cast<R>(std::sqrt(dorg * dorg + sol.tau[i]));
      W xn = 0, yn = 0;
      for (int64_t j = 0; j < nk; ++j) {
        y[j] = sol.zhat[j] / sol.delta[i * nk + j];
        x[j] = j == 0 ? W(-1) : dk[j] * y[j];
        xn += x[j] * x[j];
        yn += y[j] * y[j];
      }
      const W xi = 1 / std::sqrt(xn), yi = 1 / std::sqrt(yn);
      for (int64_t j = 0; j < nk; ++j) {
        xt[i * nk + j] = static_cast<R>(x[j] * xi);
        yt[i * nk + j] = static_cast<R>(y[j] * yi);
      }
    }
  });
  grouped_product<R>(n, k + 1, ub, n_, kept.data(), uk.data(), nk, xt.data(), uo.data(), n);
  grouped_product<R>(m, k + 1, vb, n_, kept.data(), vk.data(), nk, yt.data(), vo.data(), n);

  // Ascending values with their columns back into the blocks (V's null column m-1 stays).
  const std::vector<int64_t> up = ascending_order(sv);
  for (int64_t c = 0; c < n; ++c) D[c] = sv[up[c]] * scale;
  place_columns(uo.data(), n, up, ub, n_);
  place_columns(vo.data(), m, up, vb, n_);
  return 0;
}

}  // namespace

template <class R>
int64_t bdsdc(int64_t n, R* d, R* e, R* u, R* v) {
  if (n == 0) return 0;
  std::fill_n(u, n * n, R(0));
  std::fill_n(v, n * n, R(0));
  for (int64_t i = 0; i < n; ++i) u[i * n + i] = v[i * n + i] = 1;  // the answer for B = 0
  const int64_t info = solve_scaled(n, d, e, [&] {
    return BidiagonalDivideConquer<R>(n, d, e, u, v).solve(0, n, /*sqre=*/0, /*top=*/true);
  });
  for (int64_t i = 0; i < n; ++i) d[i] = std::abs(d[i]);  // a zero matrix's -0 entries: +0
  return info;
}

template int64_t bdsdc<float>(int64_t, float*, float*, float*, float*);
template int64_t bdsdc<double>(int64_t, double*, double*, double*, double*);

}  // namespace tessera::linalg::detail
