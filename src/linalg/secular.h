// What the two divide and conquer solvers share, eigh's tridiagonal one (divide_conquer.cpp)
// and svd's bidiagonal one (bidiagonal_dc.cpp): the scaling, the split into halves, the
// column rotations and placement of a merge, the grouped GEMM, and the rank-one eigenproblem
// at the heart of each merge:
//
//   eigenvalues lambda_i and vectors of diag(p) + z z^T,  p_0 < p_1 < ... < p_k-1,  z_j != 0,
//
// are the roots of the secular equation 1 + sum_j z_j^2 / (p_j - x) = 0, one in each
// (p_i, p_i+1) and the last in (p_k-1, p_k-1 + |z|^2). Each root is found relative to its
// nearer pole (lambda_i = p_origin + tau_i) so that every difference p_j - lambda_i =
// (p_j - p_origin) - tau_i keeps its relative accuracy; the caller supplies those pole
// differences (`diff(a, b)` = p_a - p_b) computed as accurately as it can: eigh's poles are
// values, svd's are squares d_j^2 with (d_a - d_b)(d_a + d_b). The step is the root of a
// model with the two poles around the root fitted to f and f' of the sums on either side
// (Li's "middle way"), safeguarded by a bracket.
//
// Then zhat, the vector for which the computed lambdas are exact (Loewner's formula,
// zhat_j^2 = prod_i (lambda_i - p_j) / prod_{i != j} (p_i - p_j), Gu and Eisenstat), with z's
// signs: vectors built from zhat, (zhat_j / (p_j - lambda_i))_j, are orthogonal to working
// precision however close the lambdas are.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "core/cached_vector.h"
#include "tessera/core/parallel.h"

namespace tessera::linalg::detail {

inline constexpr int kMaxSecularIterations = 100;

// The working precision of the secular equation and of the vector formulas: double for float
// data.
template <class R>
using secular_t = std::conditional_t<std::is_same_v<R, float>, double, R>;

// Root i of 1 + sum_j w_j / (p_j - x) (w_j = z_j^2 > 0). Returns tau with lambda = p_origin +
// tau, and delta[j] = p_j - lambda computed as diff(j, origin) - tau; `converged` is false when
// max_iterations steps met neither test (then tau is the last point of the bracket).
template <class W, class Diff>
W secular_root(int64_t k, const W* w, const Diff& diff, int64_t i, int64_t& origin, W* delta,
               bool& converged, int max_iterations = kMaxSecularIterations) {
  converged = true;
  if (k == 1) {
    origin = 0;
    delta[0] = -w[0];
    return w[0];
  }
  W lo, hi;
  if (i < k - 1) {
    const W gap = diff(i + 1, i), mid = gap / 2;
    W f = 1;
    for (int64_t j = 0; j < k; ++j) f += w[j] / (diff(j, i) - mid);
    if (f >= 0) {
      origin = i, lo = 0, hi = mid;
    } else {
      origin = i + 1, lo = mid - gap, hi = 0;
    }
  } else {
    origin = k - 1, lo = 0, hi = 0;
    for (int64_t j = 0; j < k; ++j) hi += w[j];
  }
  for (int64_t j = 0; j < k; ++j) delta[j] = diff(j, origin);  // p_j - p_origin for now
  // The two poles around the root: left = j <= split, right = j > split.
  const int64_t split = std::min(i, k - 2);
  const W eps = std::numeric_limits<W>::epsilon();
  W tau = lo / 2 + hi / 2;
  converged = false;
  for (int iter = 0; iter < max_iterations && !converged; ++iter) {
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
    if (std::abs(f) <= 8 * eps * (1 + phi - psi)) {
      converged = true;
      break;
    }
    if (f < 0) {
      lo = tau;
    } else {
      hi = tau;
    }
    if (hi - lo <= 2 * eps * std::max(std::abs(lo), std::abs(hi))) {
      converged = true;
      break;
    }
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
    converged = next == tau;  // no representable progress: the root to working precision
    tau = next;
  }
  for (int64_t j = 0; j < k; ++j) delta[j] -= tau;
  return tau;
}

// Runs solve() on the tridiagonal or bidiagonal matrix (d[0 .. n), e[0 .. n-1)) scaled so that
// its largest entry has magnitude 1 (deflation's tolerances and the secular equation assume
// it), then scales d back. A zero matrix is left as it is (d = 0) and solve() is not run.
template <class R, class Fn>
int64_t solve_scaled(int64_t n, R* d, R* e, const Fn& solve) {
  R norm = 0;
  for (int64_t i = 0; i < n; ++i) norm = std::max(norm, std::abs(d[i]));
  for (int64_t i = 0; i + 1 < n; ++i) norm = std::max(norm, std::abs(e[i]));
  if (norm == 0) return 0;
  for (int64_t i = 0; i < n; ++i) d[i] /= norm;
  for (int64_t i = 0; i + 1 < n; ++i) e[i] /= norm;
  const int64_t info = solve();
  for (int64_t i = 0; i < n; ++i) d[i] *= norm;
  return info;
}

// Rotates columns (p, q) of the rows x ? block at a (ld): p := c p + s q, q := c q - s p.
template <class R>
void rotate_columns(R* a, int64_t ld, int64_t rows, int64_t p, int64_t q, R c, R s) {
  for (int64_t r = 0; r < rows; ++r) {
    R& x = a[r * ld + p];
    R& y = a[r * ld + q];
    const R xr = c * x + s * y, yr = c * y - s * x;
    x = xr, y = yr;
  }
}

// The indices of w in ascending order of its values (equal values keep their order).
template <class R>
std::vector<int64_t> ascending_order(const std::vector<R>& w) {
  std::vector<int64_t> order(w.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return w[a] < w[b]; });
  return order;
}

// block (rows x order.size(), ld) := the columns order[0], order[1], ... of out (rows x
// order.size(), row-major).
template <class R>
void place_columns(const R* out, int64_t rows, const std::vector<int64_t>& order, R* block,
                   int64_t ld) {
  const auto ncols = static_cast<int64_t>(order.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ncols; ++c) block[r * ld + c] = out[r * ncols + order[c]];
}

// Solves the two halves of a split, solve_half(0) and solve_half(1), on the pool's threads when
// `parallel` (the top split), and returns the first nonzero info.
template <class Fn>
int64_t solve_halves(bool parallel, const Fn& solve_half) {
  int64_t info[2] = {0, 0};
  auto run = [&](int64_t h) { info[h] = solve_half(h); };
  if (parallel && get_num_threads() > 1 && !in_parallel_region()) {
    parallel_tasks(2, run);
  } else {
    run(0);
    run(1);
  }
  return info[0] != 0 ? info[0] : info[1];
}

// Every root of the problem above with its row of differences, and zhat.
template <class W>
struct SecularSolution {
  std::vector<int64_t> origin;  // lambda_i = p_origin[i] + tau[i]
  std::vector<W> tau;
  cached_vector<W> delta;  // delta[i k + j] = p_j - lambda_i
  std::vector<W> zhat;     // with z's signs
};

// z: the k components (signs and magnitudes; w_j = z_j^2). Roots, then zhat, each split over
// the pool (rows of delta for the roots, ranges of j for zhat); the same bits on any number
// of threads. Returns the number of roots that did not converge (the callers report it as
// LAPACK's laed4 / lasd4 failures are: the factorization did not converge).
template <class W, class Diff>
int64_t solve_secular(int64_t k, const W* z, const Diff& diff, SecularSolution<W>& out) {
  std::vector<W> w(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) w[j] = z[j] * z[j];
  out.origin.assign(static_cast<size_t>(k), 0);
  out.tau.assign(static_cast<size_t>(k), W(0));
  out.delta.resize(static_cast<size_t>(k * k));
  out.zhat.assign(static_cast<size_t>(k), W(0));
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(k, 1));
  std::vector<char> ok(static_cast<size_t>(k), 1);
  parallel_for(0, k, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      bool converged = true;
      out.tau[i] =
          secular_root<W>(k, w.data(), diff, i, out.origin[i], out.delta.data() + i * k, converged);
      ok[i] = converged ? 1 : 0;
    }
  });
  parallel_for(0, k, grain, [&](int64_t j0, int64_t j1) {
    W* zh = out.zhat.data();
    for (int64_t j = j0; j < j1; ++j) zh[j] = -out.delta[j * k + j];
    for (int64_t i = 0; i < k; ++i) {
      const W* row = out.delta.data() + i * k;
      for (int64_t j = j0; j < j1; ++j)
        if (i != j) zh[j] *= -row[j] / diff(i, j);
    }
    for (int64_t j = j0; j < j1; ++j) zh[j] = std::copysign(std::sqrt(std::max<W>(zh[j], 0)), z[j]);
  });
  return static_cast<int64_t>(std::count(ok.begin(), ok.end(), 0));
}

// out (rows x k, ld_out) = Q[:, cols] X for a block Q (ld ldq) whose column cols[j] is nonzero
// only in rows [0, split) when kind[j] == 1, only in [split, rows) when kind[j] == 3, and
// anywhere when 2; X (k x k) is given transposed, xt[i k + j] = X(j, i). Two engine GEMMs on
// the columns grouped by kind: the top rows multiply kinds 1 and 2, the bottom rows 2 and 3.
template <class R>
void grouped_product(int64_t rows, int64_t split, const R* q, int64_t ldq, const int64_t* cols,
                     const int* kind, int64_t k, const R* xt, R* out, int64_t ld_out);

}  // namespace tessera::linalg::detail
