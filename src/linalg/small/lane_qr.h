// Householder QR on a lane-interleaved group of W small real matrices (interleave.h layout,
// element (i, j) of matrix l at buf[(i * ld + j) * W + l]), the batched geqrf and orgqr
// (small_kernels.cpp): LAPACK's geqr2 and org2r with scalars replaced by vectors, each lane
// getting the arithmetic of one matrix at a time, and the reflectors applied to the columns
// beyond their panel kLanePanel at a time.
//
//   geqr2_lanes  A = Q R in place: R on and above the diagonal, reflector k's tail below the
//                diagonal of column k (its 1 at row k implied), tau[k].
//   org2r_lanes  the first nq columns of Q = H_0 ... H_{k-1} from those reflectors, built
//                backwards: before H_i is applied, row i of the columns right of i is zero.
//
// A panel of P reflectors, applied in the order u_1, ..., u_P, is the compact WY form
// H_P ... H_1 = I - U T^T U^T (T upper triangular, LAPACK's larft, per lane). A block of
// columns' W = U^T C stays in registers over all the rows, then the block's rows are updated
// once with U (T^T W): each trailing element is loaded twice and stored once per panel rather
// than per reflector (stores bound the one-reflector loop: a 512-bit store takes two cycles on
// Zen 4).
// Included inside namespace tessera::cpu::TS_ISA.
#pragma once

#include <algorithm>
#include <cstdint>

#include "linalg/small/lane_tridiagonal.h"

namespace tessera::cpu::TS_ISA {

inline constexpr int kLanePanel = 4;

// A panel of P <= kLanePanel reflectors on rows [r0, m): u[p] holds reflector p's rows r0 ..
// m-1 contiguously (explicit zeros above its 1), applied in the order p = 0, 1, ..; t is the
// per-lane T of its compact WY form (t[i][j] for i <= j).
template <class T, class V>
struct LanePanel {
  int p = 0;
  int64_t r0 = 0, m = 0;
  const T* u[kLanePanel] = {};
  V t[kLanePanel][kLanePanel];
};

namespace lane_qr_detail {

// Columns [j0, j0 + NB) of rows [r0, m) of x (element (i, j) at vector i * ld + j) times the
// panel's H_P ... H_1: W = U^T C, then C -= U (T^T W).
template <int NB, int P, class T, class V>
[[gnu::always_inline]] inline void apply_panel_block(T* x, int64_t ld, const LanePanel<T, V>& pn,
                                                     int64_t j0) {
  constexpr int W = V::kSize;
  auto at = [&](int64_t i, int64_t j) { return x + (i * ld + j) * W; };
  V w[P][NB];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < NB; ++t) w[p][t] = V(T(0));
  for (int64_t r = pn.r0; r < pn.m; ++r) {
    V c[NB];
    for (int t = 0; t < NB; ++t) c[t] = V::load(at(r, j0 + t));
    for (int p = 0; p < P; ++p) {
      const V up = V::load(pn.u[p] + (r - pn.r0) * W);
      for (int t = 0; t < NB; ++t) w[p][t] = V::fmadd(up, c[t], w[p][t]);
    }
  }
  // w := -(T^T W), last row first so that each row reads the rows above it unchanged.
  for (int j = P - 1; j >= 0; --j)
    for (int t = 0; t < NB; ++t) {
      V z = pn.t[j][j] * w[j][t];
      for (int i = 0; i < j; ++i) z = V::fmadd(pn.t[i][j], w[i][t], z);
      w[j][t] = -z;
    }
  for (int64_t r = pn.r0; r < pn.m; ++r) {
    V up[P];
    for (int p = 0; p < P; ++p) up[p] = V::load(pn.u[p] + (r - pn.r0) * W);
    for (int t = 0; t < NB; ++t) {
      V y = V::load(at(r, j0 + t));
      for (int p = 0; p < P; ++p) y = V::fmadd(up[p], w[p][t], y);
      y.store(at(r, j0 + t));
    }
  }
}

// Columns [c0, c1) in blocks of 16 / P (at most 8), 4, 2, 1: P times the block width sums in
// registers.
template <int P, class T, class V>
void apply_panel(T* x, int64_t ld, const LanePanel<T, V>& pn, int64_t c0, int64_t c1) {
  constexpr int kWide = std::min(8, 16 / P);
  int64_t j = c0;
  for (; j + kWide <= c1; j += kWide) apply_panel_block<kWide, P>(x, ld, pn, j);
  if constexpr (kWide > 4) {
    if (j + 4 <= c1) apply_panel_block<4, P>(x, ld, pn, j), j += 4;
  }
  if (j + 2 <= c1) apply_panel_block<2, P>(x, ld, pn, j), j += 2;
  if (j < c1) apply_panel_block<1, P>(x, ld, pn, j);
}

}  // namespace lane_qr_detail

// Rows [pn.r0, pn.m) x columns [c0, c1) of x (element (i, j) at vector i * ld + j) := the
// panel's H_P ... H_1 times that block.
template <class T, class V>
void apply_lane_panel(T* x, int64_t ld, const LanePanel<T, V>& pn, int64_t c0, int64_t c1) {
  using lane_qr_detail::apply_panel;
  if (c0 >= c1) return;
  switch (pn.p) {
    case 1:
      return apply_panel<1>(x, ld, pn, c0, c1);
    case 2:
      return apply_panel<2>(x, ld, pn, c0, c1);
    case 3:
      return apply_panel<3>(x, ld, pn, c0, c1);
    default:
      return apply_panel<4>(x, ld, pn, c0, c1);
  }
}

// The panel's T from its reflectors' tau (larft, forward): T(j, j) = tau_j and
// T(0:j, j) = -tau_j T(0:j, 0:j) (U(:, 0:j)^T u_j).
template <class T, class V>
void lane_panel_t(LanePanel<T, V>& pn, const V* tau) {
  constexpr int W = V::kSize;
  for (int j = 0; j < pn.p; ++j) {
    V g[kLanePanel];
    for (int i = 0; i < j; ++i) {
      V s(T(0));
      for (int64_t r = 0; r < pn.m - pn.r0; ++r)
        s = V::fmadd(V::load(pn.u[i] + r * W), V::load(pn.u[j] + r * W), s);
      g[i] = s;
    }
    for (int i = 0; i < j; ++i) {
      V s(T(0));
      for (int q = i; q < j; ++q) s = V::fmadd(pn.t[i][q], g[q], s);
      pn.t[i][j] = -(tau[j] * s);
    }
    pn.t[j][j] = tau[j];
  }
}

// A = Q R (geqr2) for the m x n matrices in a (rows lda >= n vectors apart); tau: min(m, n)
// vectors; work:
// kLanePanel m vectors. The lanes must be scaled to a largest |entry| near 1 (the caller's
// check or scale_lanes_to_one): lane_reflector treats a column tail whose squares sum below
// 64 safmin / eps as zero. Panels of kLanePanel columns: each reflector is applied to the rest
// of its panel at once, the panel to the columns right of it as one.
template <class T, class V, class M, class N>
void geqr2_lanes(M m, N n, T* a, int64_t lda, T* tau, T* work) {
  constexpr int W = V::kSize;
  auto at = [&](int64_t i, int64_t j) { return a + (i * lda + j) * W; };
  const int64_t kk = std::min<int64_t>(m, n);
  const V zero(T(0)), one(T(1));
  for (int64_t k = 0; k < kk; k += kLanePanel) {
    LanePanel<T, V> pn;
    pn.p = static_cast<int>(std::min<int64_t>(kLanePanel, kk - k));
    pn.r0 = k;
    pn.m = m;
    V taus[kLanePanel];
    for (int j = 0; j < pn.p; ++j) {
      // Reflector k + j from its column, into a and (rows k.., zeros above its 1) into u.
      const int64_t c = k + j;
      T* u = work + j * m * W;
      pn.u[j] = u;
      V sigma = zero;
      for (int64_t i = c + 1; i < m; ++i) {
        const V x = V::load(at(i, c));
        sigma = V::fmadd(x, x, sigma);
      }
      const LaneReflector<V> h = lane_reflector<T, V>(V::load(at(c, c)), sigma);
      h.beta.store(at(c, c));
      h.tau.store(tau + c * W);
      taus[j] = h.tau;
      for (int64_t i = k; i < c; ++i) zero.store(u + (i - k) * W);
      one.store(u + (c - k) * W);
      for (int64_t i = c + 1; i < m; ++i) {
        const V ui = V::load(at(i, c)) * h.scal;
        ui.store(at(i, c));
        ui.store(u + (i - k) * W);
      }
      // The rest of the panel.
      LanePanel<T, V> one_reflector;
      one_reflector.p = 1;
      one_reflector.r0 = c;
      one_reflector.m = m;
      one_reflector.u[0] = u + (c - k) * W;
      one_reflector.t[0][0] = h.tau;
      apply_lane_panel<T>(a, lda, one_reflector, c + 1, k + pn.p);
    }
    if (k + pn.p < n) {
      lane_panel_t(pn, taus);
      apply_lane_panel<T>(a, lda, pn, k + pn.p, n);
    }
  }
}

// Q (m x nq, element (i, j) at vector i * ldq + j) := the first nq columns of H_0 ... H_{k-1}
// (k <= nq <= m), reflector i's tail below the diagonal of column i of refl (element (i, j) at
// vector i * ld + j), tau: k vectors; work: kLanePanel m vectors (org2r). Backwards in panels
// of kLanePanel reflectors: the panel (its last reflector first) updates the columns right of
// it as one, then its own columns are made as org2r makes them.
template <class T, class V, class M, class NQ>
void org2r_lanes(M m, NQ nq, int64_t k, const T* refl, int64_t ld, const T* tau, T* q, int64_t ldq,
                 T* work) {
  constexpr int W = V::kSize;
  auto at = [&](int64_t i, int64_t j) { return q + (i * ldq + j) * W; };
  const V zero(T(0)), one(T(1));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = k; j < nq; ++j) (i == j ? one : zero).store(at(i, j));
  for (int64_t hi = k; hi > 0;) {
    const int64_t lo = std::max<int64_t>(0, hi - kLanePanel);
    LanePanel<T, V> pn;
    pn.p = static_cast<int>(hi - lo);
    pn.r0 = lo;
    pn.m = m;
    V taus[kLanePanel];
    for (int j = 0; j < pn.p; ++j) {  // reflector hi - 1 - j, applied j-th
      const int64_t i = hi - 1 - j;
      T* u = work + j * m * W;
      pn.u[j] = u;
      taus[j] = V::load(tau + i * W);
      for (int64_t r = lo; r < i; ++r) zero.store(u + (r - lo) * W);
      one.store(u + (i - lo) * W);
      for (int64_t r = i + 1; r < m; ++r) V::load(refl + (r * ld + i) * W).store(u + (r - lo) * W);
    }
    if (hi < nq) {
      lane_panel_t(pn, taus);
      apply_lane_panel<T>(q, ldq, pn, hi, nq);
    }
    for (int j = 0; j < pn.p; ++j) {  // columns hi - 1 down to lo
      const int64_t i = hi - 1 - j;
      const T* u = pn.u[j] + (i - lo) * W;  // rows i..
      LanePanel<T, V> one_reflector;
      one_reflector.p = 1;
      one_reflector.r0 = i;
      one_reflector.m = m;
      one_reflector.u[0] = u;
      one_reflector.t[0][0] = taus[j];
      apply_lane_panel<T>(q, ldq, one_reflector, i + 1, hi);
      for (int64_t r = 0; r < i; ++r) zero.store(at(r, i));
      (one - taus[j]).store(at(i, i));
      const V mt = -taus[j];
      for (int64_t r = i + 1; r < m; ++r) (mt * V::load(u + (r - i) * W)).store(at(r, i));
    }
    hi = lo;
  }
}

}  // namespace tessera::cpu::TS_ISA
