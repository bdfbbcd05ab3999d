// The symmetric tridiagonal eigensolver on a lane-interleaved group of W small real matrices
// (interleave.h layout: element (i, j) of the whole group is one vector, or one LanePair), the
// batched eigh (spectral_small_kernels.cpp). It does the work of LAPACK's sytrd + orgtr +
// steqr, about 9 n^3 flops with vectors against two-sided Jacobi's ~35 n^3 at n = 32:
//
//   tridiagonalize_lanes  Householder reduction A = Q T Q^T on the lower triangle (sytd2);
//                         the reflectors stay below the subdiagonal, their scalars in tau.
//   form_qt_lanes         Q^T from the reflectors (org2l), rows of Q^T = columns of Q, so the
//                         QR sweeps' rotations of two columns of Q read two contiguous rows
//                         (also the bidiagonal path's U^T and V^T, lane_bidiagonal.h).
//   tridiagonal_qr_lanes  implicit QR with Wilkinson shifts (steqr's QR branch).
//
// The lanes share one loop structure. Each QR sweep makes one step in every lane on that lane's
// own last unreduced block [lo, m]; before lo and past m, and in finished lanes, the rotation
// is exactly the identity (c = 1, s = 0), so every lane gets the same arithmetic as one matrix
// at a time with its own shifts. A sweep's chase spans the union of the blocks. Off-diagonals
// are negligible as in steqr, e^2 <= eps^2 |d_i d_i+1| + safmin, or below eps (the lanes are
// scaled to a largest entry in [1, 2), so that is at most eps ||A||: normwise accurate, as
// syevd is, and no stall inside a cluster of zero eigenvalues, where the relative test alone
// can keep a lane sweeping to the limit).
// Included inside namespace tessera::cpu::TS_ISA.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/vec.h"
#include "linalg/scalar_ops.h"

namespace tessera::cpu::TS_ISA {

// Two vectors used as one of 2 W lanes (the same operations as Vec<T>, on both halves). The
// batched tridiagonal path runs on pairs: a bulge chase is a chain of dependent divisions and
// square roots, and two independent chains side by side keep the core busy.
template <class T>
struct LanePair {
  using V = vec::TS_ISA::Vec<T>;
  static constexpr int kSize = 2 * V::kSize;
  V a, b;
  LanePair() = default;
  LanePair(V x, V y) : a(x), b(y) {}
  explicit LanePair(T x) : a(x), b(x) {}
  static LanePair load(const T* p) { return {V::load(p), V::load(p + V::kSize)}; }
  void store(T* p) const {
    a.store(p);
    b.store(p + V::kSize);
  }
  friend LanePair operator+(LanePair x, LanePair y) { return {x.a + y.a, x.b + y.b}; }
  friend LanePair operator-(LanePair x, LanePair y) { return {x.a - y.a, x.b - y.b}; }
  friend LanePair operator*(LanePair x, LanePair y) { return {x.a * y.a, x.b * y.b}; }
  friend LanePair operator/(LanePair x, LanePair y) { return {x.a / y.a, x.b / y.b}; }
  LanePair operator-() const { return {-a, -b}; }
  static LanePair fmadd(LanePair x, LanePair y, LanePair z) {
    return {V::fmadd(x.a, y.a, z.a), V::fmadd(x.b, y.b, z.b)};
  }
  static LanePair max(LanePair x, LanePair y) { return {V::max(x.a, y.a), V::max(x.b, y.b)}; }
  static LanePair select_lt(LanePair x, LanePair y, LanePair u, LanePair v) {
    return {V::select_lt(x.a, y.a, u.a, v.a), V::select_lt(x.b, y.b, u.b, v.b)};
  }
  static LanePair select_eq(LanePair x, LanePair y, LanePair u, LanePair v) {
    return {V::select_eq(x.a, y.a, u.a, v.a), V::select_eq(x.b, y.b, u.b, v.b)};
  }
  static bool all_lt(LanePair x, LanePair y) { return V::all_lt(x.a, y.a) && V::all_lt(x.b, y.b); }
  static LanePair copysign(LanePair m, LanePair s) {
    return {V::copysign(m.a, s.a), V::copysign(m.b, s.b)};
  }
  LanePair abs() const { return {a.abs(), b.abs()}; }
  LanePair sqrt() const { return {a.sqrt(), b.sqrt()}; }
};

// Scales every lane of the m x n matrices in `a` (element (i, j) at vector i * ld + j; only
// the lower triangle when `lower`) by a power of two so that its largest |entry| is in [1, 2)
// (unit_scale): no overflow in the squares and sums below, and exact to undo. scale[l] is the
// factor (1 for an all-zero lane).
template <class T, class V>
void scale_lanes_to_one(int64_t m, int64_t n, T* a, int64_t ld, bool lower, T* scale) {
  constexpr int W = V::kSize;
  auto each = [&](auto&& fn) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < (lower ? std::min(i + 1, n) : n); ++j) fn(a + (i * ld + j) * W);
  };
  V amax(T(0));
  each([&](T* x) { amax = V::max(amax, V::load(x).abs()); });
  amax.store(scale);
  for (int l = 0; l < W; ++l) scale[l] = linalg::detail::unit_scale(scale[l]);
  const V s = V::load(scale);
  each([&](T* x) { (V::load(x) * s).store(x); });
}

// A Householder reflector H = I - tau u u^T with u = (1, x * scal) that maps (alpha, x) to
// (beta, 0) (larfg). Lanes where |x|^2 = sigma is below 64 safmin / eps get H = I (tau 0,
// beta alpha): dropping such an x changes the matrix by far less than eps ||A|| (the lanes are
// scaled to a largest entry near 1), and a sum of subnormal squares would not give an
// orthogonal H.
template <class V>
struct LaneReflector {
  V tau, scal, beta;
};

template <class T, class V>
LaneReflector<V> lane_reflector(V alpha, V sigma) {
  const V zero(T(0)), one(T(1));
  const V floor(T(64) * std::numeric_limits<T>::min() / std::numeric_limits<T>::epsilon());
  const V beta = -V::copysign(V::fmadd(alpha, alpha, sigma).sqrt(), alpha);
  return {V::select_lt(floor, sigma, (beta - alpha) / beta, zero),
          V::select_lt(floor, sigma, one / (alpha - beta), zero),
          V::select_lt(floor, sigma, beta, alpha)};
}

// Reduces the symmetric matrices in `a` (n x n, element (i, j) at vector i * ld + j, lower
// triangle read and overwritten) to tridiagonal form: diagonal d (n vectors), off-diagonal e
// (n - 1 vectors). Reflector k is I - tau_k u u^T with u = (0, .., 0, 1, a(k+2.., k)), the 1 at
// row k + 1. `work` is scratch of 2 n vectors.
template <class T, class V>
void tridiagonalize_lanes(int64_t n, T* a, int64_t ld, T* d, T* e, T* tau, T* work) {
  constexpr int W = V::kSize;
  auto at = [&](int64_t i, int64_t j) { return a + (i * ld + j) * W; };
  T* const p = work;           // tau A22 u, then w
  T* const uv = work + n * W;  // u, contiguous
  auto vp = [&](int64_t i) { return p + i * W; };
  auto u = [&](int64_t i) { return V::load(uv + i * W); };
  const V zero(T(0)), one(T(1)), half(T(0.5));
  for (int64_t k = 0; k + 2 < n; ++k) {
    // The reflector that zeroes a(k+2.., k).
    const V alpha = V::load(at(k + 1, k));
    V sigma = zero;
    for (int64_t i = k + 2; i < n; ++i) {
      const V x = V::load(at(i, k));
      sigma = V::fmadd(x, x, sigma);
    }
    const LaneReflector<V> h = lane_reflector<T>(alpha, sigma);
    const V t = h.tau, scal = h.scal;
    V::load(at(k, k)).store(d + k * W);
    h.beta.store(e + k * W);
    t.store(tau + k * W);
    one.store(uv + (k + 1) * W);
    for (int64_t i = k + 2; i < n; ++i) {
      const V ui = V::load(at(i, k)) * scal;
      ui.store(at(i, k));
      ui.store(uv + i * W);
    }
    // p = A22 u over the lower triangle of A22 = a(k+1.., k+1..), two rows at a time (they
    // share the loads and stores of p(j)).
    for (int64_t i = k + 1; i < n; ++i) zero.store(vp(i));
    int64_t i = k + 1;
    for (; i + 1 < n; i += 2) {
      const V u0 = u(i), u1 = u(i + 1);
      V acc0 = V::load(vp(i)), acc1 = V::load(vp(i + 1));
      for (int64_t j = k + 1; j < i; ++j) {
        const V a0 = V::load(at(i, j)), a1 = V::load(at(i + 1, j)), uj = u(j);
        acc0 = V::fmadd(a0, uj, acc0);
        acc1 = V::fmadd(a1, uj, acc1);
        V::fmadd(a0, u0, V::fmadd(a1, u1, V::load(vp(j)))).store(vp(j));
      }
      const V a10 = V::load(at(i + 1, i));  // (i + 1, i) and its mirror (i, i + 1)
      V::fmadd(a10, u1, V::fmadd(V::load(at(i, i)), u0, acc0)).store(vp(i));
      V::fmadd(a10, u0, V::fmadd(V::load(at(i + 1, i + 1)), u1, acc1)).store(vp(i + 1));
    }
    if (i < n) {
      const V ui = u(i);
      V acc = V::load(vp(i));
      for (int64_t j = k + 1; j < i; ++j) {
        const V aij = V::load(at(i, j));
        acc = V::fmadd(aij, u(j), acc);
        V::fmadd(aij, ui, V::load(vp(j))).store(vp(j));
      }
      V::fmadd(V::load(at(i, i)), ui, acc).store(vp(i));
    }
    // w = tau p - (tau / 2)(tau p . u) u; then A22 -= u w^T + w u^T.
    V dot = zero;
    for (int64_t r = k + 1; r < n; ++r) {
      const V pr = V::load(vp(r)) * t;
      pr.store(vp(r));
      dot = V::fmadd(pr, u(r), dot);
    }
    const V K = -(half * t * dot);
    for (int64_t r = k + 1; r < n; ++r) V::fmadd(K, u(r), V::load(vp(r))).store(vp(r));
    for (int64_t r = k + 1; r < n; ++r) {
      const V ur = u(r), wr = V::load(vp(r));
      for (int64_t j = k + 1; j <= r; ++j) {
        const V upd = V::fmadd(ur, V::load(vp(j)), wr * u(j));
        (V::load(at(r, j)) - upd).store(at(r, j));
      }
    }
  }
  if (n >= 2) {
    V::load(at(n - 2, n - 2)).store(d + (n - 2) * W);
    V::load(at(n - 1, n - 2)).store(e + (n - 2) * W);
  }
  V::load(at(n - 1, n - 1)).store(d + (n - 1) * W);
}

// Q^T for Q = H_0 H_1 .. H_{count-1}, reflector k being I - tau_k u u^T with u zero above row
// p = k + shift, 1 at p and its tail (rows p + 1 .. n - 1) at refl + (i rs + k cs) W (rs = ld,
// cs = 1: stored down column k, as the tridiagonal and left bidiagonal reductions leave them;
// rs = 1, cs = ld: along row k, as the right bidiagonal ones), into qt (n rows of ld vectors).
// Built from the last reflector back (org2l / orgbr): before H_k is applied, rows 0 .. p of
// Q^T are still unit rows, so row p becomes e_p - tau u and rows p + 1.. take r -= tau (r . u) u.
template <class T, class V>
void form_qt_lanes(int64_t n, const T* refl, int64_t rs, int64_t cs, int64_t shift, int64_t count,
                   const T* tau, T* qt, int64_t ld) {
  constexpr int W = V::kSize;
  auto q = [&](int64_t i, int64_t j) { return qt + (i * ld + j) * W; };
  const V zero(T(0)), one(T(1));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) (i == j ? one : zero).store(q(i, j));
  for (int64_t k = count - 1; k >= 0; --k) {
    const int64_t p = k + shift;
    auto u = [&](int64_t i) { return V::load(refl + (i * rs + k * cs) * W); };
    const V t = V::load(tau + k * W);
    // Two rows at a time: they share the loads of u, and their sums are independent.
    int64_t r = p + 1;
    for (; r + 1 < n; r += 2) {
      V dot0 = zero, dot1 = zero;  // rows are zero at column p, where u is 1
      for (int64_t i = p + 1; i < n; ++i) {
        const V ui = u(i);
        dot0 = V::fmadd(V::load(q(r, i)), ui, dot0);
        dot1 = V::fmadd(V::load(q(r + 1, i)), ui, dot1);
      }
      const V f0 = -(t * dot0), f1 = -(t * dot1);
      f0.store(q(r, p));
      f1.store(q(r + 1, p));
      for (int64_t i = p + 1; i < n; ++i) {
        const V ui = u(i);
        V::fmadd(f0, ui, V::load(q(r, i))).store(q(r, i));
        V::fmadd(f1, ui, V::load(q(r + 1, i))).store(q(r + 1, i));
      }
    }
    if (r < n) {
      V dot = zero;
      for (int64_t i = p + 1; i < n; ++i) dot = V::fmadd(V::load(q(r, i)), u(i), dot);
      const V f = -(t * dot);
      f.store(q(r, p));
      for (int64_t i = p + 1; i < n; ++i) V::fmadd(f, u(i), V::load(q(r, i))).store(q(r, i));
    }
    (one - t).store(q(p, p));
    const V mt = -t;
    for (int64_t i = p + 1; i < n; ++i) (mt * u(i)).store(q(p, i));
  }
}

// Applies a chain of rotations to rows k0 .. k0 + count of qt (n vectors a row, ld apart):
// rotation i, with per-lane c and s at cs[2 i W] and cs[(2 i + 1) W], takes rows r = k0 + i
// and r + 1 to (c x_r + s x_r+1, -s x_r + c x_r+1). Columns go in blocks of NB vectors held in
// registers: row r + 1 is carried into the next rotation, so each rotation loads and stores
// one row of the block.
template <class T, class V, int NB>
void rotate_chain_block(T* qt, int64_t ld, int64_t j0, int64_t k0, int64_t count, const T* cs) {
  constexpr int W = V::kSize;
  auto row = [&](int64_t r) { return qt + (r * ld + j0) * W; };
  V held[NB];
#pragma GCC unroll 8
  for (int t = 0; t < NB; ++t) held[t] = V::load(row(k0) + t * W);
  for (int64_t i = 0; i < count; ++i) {
    const V c = V::load(cs + 2 * i * W), s = V::load(cs + (2 * i + 1) * W), ns = -s;
    T* lo = row(k0 + i);
    const T* next = row(k0 + i + 1);
#pragma GCC unroll 8
    for (int t = 0; t < NB; ++t) {
      const V y = V::load(next + t * W);
      V::fmadd(c, held[t], s * y).store(lo + t * W);
      held[t] = V::fmadd(c, y, ns * held[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NB; ++t) held[t].store(row(k0 + count) + t * W);
}

template <class T, class V>
void rotate_chain_lanes(T* qt, int64_t ld, int64_t n, int64_t k0, int64_t count, const T* cs) {
  constexpr int NB = 4;
  int64_t j0 = 0;
  for (; j0 + NB <= n; j0 += NB) rotate_chain_block<T, V, NB>(qt, ld, j0, k0, count, cs);
  for (; j0 < n; ++j0) rotate_chain_block<T, V, 1>(qt, ld, j0, k0, count, cs);
}

// (c, s, r) with c f + s g = r, -s f + c g = 0 (lartg); c = 1, s = 0 where `keep` is 0 or
// f = g = 0. Pairs below sqrt(safmin) are scaled up first, so that their squares are normal
// numbers and c^2 + s^2 = 1 to rounding. (Inlined: it sits on the chase's chain of latencies.)
template <class T, class V>
[[gnu::always_inline]] inline void lane_givens(V f, V g, V keep, V& c, V& s, V& r) {
  const V zero(T(0)), one(T(1)), half(T(0.5));
  const T tiny = std::sqrt(std::numeric_limits<T>::min());
  const V up = V::select_lt(V::max(f.abs(), g.abs()), V(tiny), V(T(1) / tiny), one);
  const V fs = f * up, gs = g * up;
  const V rs = V::fmadd(fs, fs, gs * gs).sqrt();
  const V on = V::select_lt(zero, rs, keep, zero);
  const V inv = one / V::select_lt(zero, rs, rs, one);
  c = V::select_lt(half, on, fs * inv, one);
  s = V::select_lt(half, on, gs * inv, zero);
  r = rs / up;
}

// The smallest / largest lane of x (lane indices held as T), as an index.
template <class T, class V>
int64_t lane_min_index(V x) {
  alignas(64) T lanes[V::kSize];
  x.store(lanes);
  return static_cast<int64_t>(*std::min_element(lanes, lanes + V::kSize));
}
template <class T, class V>
int64_t lane_max_index(V x) {
  alignas(64) T lanes[V::kSize];
  x.store(lanes);
  return static_cast<int64_t>(*std::max_element(lanes, lanes + V::kSize));
}

// Per lane, the block a QR sweep works on: m, the last row of the last unreduced block (0 in a
// finished lane), lo its first row, and the entries the sweep starts from: d[m-1], e[m-1],
// d[m] (the trailing 2 x 2) and d[lo], e[lo]. active is 1 in the lanes that have one.
template <class V>
struct LaneBlocks {
  V m, lo, dm1, em, dm, dlo, elo, active;
};

// Scans d (n vectors) and e (n - 1) from row `top` up, setting to zero the off-diagonals
// negligible(e[i-1], d[i-1], d[i]) (1 or 0 per lane) finds on the way to each lane's block.
template <class T, class V, class Negligible>
LaneBlocks<V> find_lane_blocks(int64_t n, int64_t top, const T* d, T* e, Negligible negligible) {
  constexpr int W = V::kSize;
  const V zero(T(0)), one(T(1)), half(T(0.5));
  // state: 0 while still below m, 1 inside the block, 2 past it.
  V m = zero, lo = zero, state = zero, dm = zero, dm1 = zero, em = zero, above = zero;
  V dlo = V::load(d), elo = n > 1 ? V(V::load(e)) : zero;
  for (int64_t i = top; i >= 1; --i) {
    const V x = V::load(e + (i - 1) * W), di = V::load(d + i * W);
    const V dprev = V::load(d + (i - 1) * W);
    const V small = negligible(x, dprev, di);
    V::select_lt(half, small, zero, x).store(e + (i - 1) * W);
    const V below = V::select_lt(state, half, one, zero);
    const V inside = V::select_eq(state, one, one, zero);
    const V enter = V::select_lt(small, half, below, zero);   // state 0 -> 1 at i
    const V leave = V::select_lt(half, small, inside, zero);  // state 1 -> 2 at i
    m = V::select_lt(half, enter, V(T(i)), m);
    dm = V::select_lt(half, enter, di, dm);
    dm1 = V::select_lt(half, enter, dprev, dm1);
    em = V::select_lt(half, enter, x, em);
    lo = V::select_lt(half, leave, V(T(i)), lo);
    dlo = V::select_lt(half, leave, di, dlo);
    elo = V::select_lt(half, leave, above, elo);
    state = state + enter + leave;
    above = x;
    if (V::all_lt(V(T(1.5)), state)) break;
  }
  // Lanes still in state 0 are finished (m = lo = 0); in state 1 their block starts at 0.
  return {m, lo, dm1, em, dm, dlo, elo, V::select_lt(half, state, one, zero)};
}

// Implicit QR sweeps on the W tridiagonal matrices (d, e as tridiagonalize_lanes leaves them)
// until every off-diagonal is negligible: d becomes the eigenvalues (unsorted). With qt, the
// sweeps' rotations are applied to its n rows (the eigenvectors are then qt's rows), a sweep's
// chain at a time; `cs` is scratch of 2 n vectors for a sweep's c and s. At most
// max_sweeps sweeps in all; returns a vector that is 1 in the lanes not finished then, 0 elsewhere.
//
// Each sweep does one QR step in every lane that is not finished, on that lane's own last
// unreduced block [lo, m] with the Wilkinson shift of its own trailing 2 x 2: the lanes deflate
// independently, and a sweep's chase runs over the union of their blocks.
template <class T, class V>
V tridiagonal_qr_lanes(int64_t n, T* d, T* e, T* qt, int64_t ld, T* cs, int64_t max_sweeps) {
  constexpr int W = V::kSize;
  constexpr T kEps = std::numeric_limits<T>::epsilon();
  const V zero(T(0)), one(T(1)), half(T(0.5)), two(T(2));
  const V eps2(kEps * kEps), safmin(std::numeric_limits<T>::min());
  auto dv = [&](int64_t i) { return d + i * W; };
  auto ev = [&](int64_t i) { return e + i * W; };
  int64_t top = n - 1;  // no lane has an unreduced block below it
  for (int64_t sweep = 0;; ++sweep) {
    const LaneBlocks<V> b = find_lane_blocks<T, V>(n, top, d, e, [&](V x, V dprev, V di) {
      const V bound = V::max(V::fmadd(eps2 * dprev.abs(), di.abs(), safmin), eps2);
      return V::select_lt(bound, x * x, zero, one);
    });
    const V m = b.m, lo = b.lo, active = b.active, dm = b.dm, dm1 = b.dm1, em = b.em;
    if (V::all_lt(active, half)) return zero;
    if (sweep >= max_sweeps) return active;
    top = lane_max_index<T>(m);
    const int64_t k0 = lane_min_index<T>(V::select_lt(half, active, lo, V(T(n))));
    // Wilkinson shift: the eigenvalue of the trailing 2 x 2 nearer d[m]. (Garbage in finished
    // lanes, which only ever see the identity below.)
    const V g = (dm1 - dm) / (two * em);
    const V r = V::fmadd(g, g, one).sqrt();
    const V mu = dm - em / (g + V::copysign(r, g));
    V bulge = zero;
    for (int64_t k = k0; k < top; ++k) {
      const V kv = V(T(k));
      const V first = V::select_eq(lo, kv, one, zero);
      // Rotating in this lane: lo <= k < m.
      const V started = V::select_lt(kv, lo, zero, V::select_lt(kv, m, one, zero));
      const V dk = V::load(dv(k)), ek = V::load(ev(k)), dk1 = V::load(dv(k + 1));
      const V eprev = k > 0 ? V(V::load(ev(k - 1))) : zero;
      // The rotation that zeroes the bulge under e[k-1], or starts the chase.
      const V x = V::select_lt(half, first, dk - mu, eprev);
      const V z = V::select_lt(half, first, ek, bulge);
      V c, s, rr;
      lane_givens<T>(x, z, started, c, s, rr);
      if (k > 0) V::select_lt(half, started - first, rr, eprev).store(ev(k - 1));
      // The 2 x 2 block (k, k+1), exact when c = 1, s = 0.
      const V cc = c * c, ss = s * s, cs2 = two * c * s;
      V::fmadd(cc, dk, V::fmadd(cs2, ek, ss * dk1)).store(dv(k));
      V::fmadd(ss, dk, V::fmadd(cc, dk1, -(cs2 * ek))).store(dv(k + 1));
      V::fmadd(c * s, dk1 - dk, (cc - ss) * ek).store(ev(k));
      // Past a lane's m, e[k+1] is zero (negligible, zeroed by the scan) or s is 0.
      if (k + 1 < top) {
        const V ek1 = V::load(ev(k + 1));
        bulge = s * ek1;
        (c * ek1).store(ev(k + 1));
      }
      c.store(cs + 2 * (k - k0) * W);
      s.store(cs + (2 * (k - k0) + 1) * W);
    }
    if (qt) rotate_chain_lanes<T, V>(qt, ld, n, k0, top - k0, cs);
  }
}

}  // namespace tessera::cpu::TS_ISA
