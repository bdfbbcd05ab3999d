// The bidiagonal SVD on a lane-interleaved group of small real square matrices (interleave.h
// layout, on LanePairs as lane_tridiagonal.h), the batched svd (spectral_small_kernels.cpp):
// LAPACK's gebd2 + orgbr + bdsqr, about 13 n^3 vector flops against one-sided Jacobi's
// ~60 n^3 at n = 32.
//
//   bidiagonalize_lanes  A = Ub B Vb^T, B upper bidiagonal (gebd2): left reflectors down the
//                        columns, right reflectors along the rows, kept in A.
//   bidiagonal_qr_lanes  implicit QR (bdsqr's chase from the top): each sweep makes one step on
//                        every lane's own last unreduced block [lo, m], shifted by the smaller
//                        singular value of the block's trailing 2 x 2, or unshifted where the
//                        shift is negligible next to d[lo] (or d[lo] is zero, which the
//                        unshifted step moves to the bottom). Before lo, past m and in finished
//                        lanes every rotation is exactly the identity. The right rotations go
//                        to the rows of V^T, the left ones to the rows of U^T.
//
// Off-diagonals are negligible when |e_i| <= eps (|d_i| + |d_i+1|) (the classic test), or below
// eps (at most eps ||B|| in the scaled lanes).
// Included inside namespace tessera::cpu::TS_ISA.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "linalg/small/lane_tridiagonal.h"

namespace tessera::cpu::TS_ISA {

// Reduces the square matrices in `a` (n x n, element (i, j) at vector i * ld + j) to upper
// bidiagonal form: diagonal d (n vectors), superdiagonal e (n - 1). Left reflector k (tauq)
// has its 1 at row k and its tail down column k below the diagonal; right reflector k (taup,
// k < n - 1) its 1 at column k + 1 and its tail along row k right of the superdiagonal.
// `work` is scratch of 3 n vectors.
//
// Step k: the left reflector's w = u^T A (two rows at a time); row k updated, which gives the
// right reflector; then each row below in one visit while it is in L1: the left update, its
// dot product with the right reflector, and the right update.
template <class T, class V>
void bidiagonalize_lanes(int64_t n, T* a, int64_t ld, T* d, T* e, T* tauq, T* taup, T* work) {
  constexpr int W = V::kSize;
  auto at = [&](int64_t i, int64_t j) { return a + (i * ld + j) * W; };
  T* const ulv = work;             // the left reflector, contiguous
  T* const urv = work + n * W;     // the right one
  T* const wv = work + 2 * n * W;  // u^T A
  auto ul = [&](int64_t i) { return V::load(ulv + i * W); };
  auto ur = [&](int64_t j) { return V::load(urv + j * W); };
  auto w = [&](int64_t j) { return V::load(wv + j * W); };
  const V zero(T(0)), one(T(1));
  for (int64_t k = 0; k < n; ++k) {
    // Left: zero a(k+1.., k).
    V sigma = zero;
    for (int64_t i = k + 1; i < n; ++i) {
      const V x = V::load(at(i, k));
      sigma = V::fmadd(x, x, sigma);
    }
    const LaneReflector<V> hl = lane_reflector<T>(V::load(at(k, k)), sigma);
    hl.beta.store(d + k * W);
    hl.tau.store(tauq + k * W);
    one.store(ulv + k * W);
    for (int64_t i = k + 1; i < n; ++i) {
      const V ui = V::load(at(i, k)) * hl.scal;
      ui.store(at(i, k));
      ui.store(ulv + i * W);
    }
    if (k + 1 >= n) break;
    for (int64_t j = k + 1; j < n; ++j) zero.store(wv + j * W);
    int64_t i = k;
    for (; i + 1 < n; i += 2) {
      const V u0 = ul(i), u1 = ul(i + 1);
      for (int64_t j = k + 1; j < n; ++j)
        V::fmadd(u0, V::load(at(i, j)), V::fmadd(u1, V::load(at(i + 1, j)), w(j)))
            .store(wv + j * W);
    }
    if (i < n)
      for (int64_t j = k + 1; j < n; ++j)
        V::fmadd(ul(i), V::load(at(i, j)), w(j)).store(wv + j * W);
    const V mtl = -hl.tau;
    for (int64_t j = k + 1; j < n; ++j) V::fmadd(mtl, w(j), V::load(at(k, j))).store(at(k, j));
    // Right: zero a(k, k+2..).
    sigma = zero;
    for (int64_t j = k + 2; j < n; ++j) {
      const V x = V::load(at(k, j));
      sigma = V::fmadd(x, x, sigma);
    }
    const LaneReflector<V> hr = lane_reflector<T>(V::load(at(k, k + 1)), sigma);
    hr.beta.store(e + k * W);
    hr.tau.store(taup + k * W);
    one.store(urv + (k + 1) * W);
    for (int64_t j = k + 2; j < n; ++j) {
      const V uj = V::load(at(k, j)) * hr.scal;
      uj.store(at(k, j));
      uj.store(urv + j * W);
    }
    const V mtr = -hr.tau;
    for (int64_t r = k + 1; r < n; ++r) {
      const V fl = mtl * ul(r);
      V x = zero;
      for (int64_t j = k + 1; j < n; ++j) {
        const V arj = V::fmadd(fl, w(j), V::load(at(r, j)));
        arj.store(at(r, j));
        x = V::fmadd(arj, ur(j), x);
      }
      const V fr = mtr * x;
      for (int64_t j = k + 1; j < n; ++j) V::fmadd(fr, ur(j), V::load(at(r, j))).store(at(r, j));
    }
  }
}

// The smaller singular value of [[f, g], [0, h]] (las2), per lane.
template <class T, class V>
V lane_smin2(V f, V g, V h) {
  const V zero(T(0)), one(T(1)), two(T(2));
  const V fa = f.abs(), ga = g.abs(), ha = h.abs();
  const V fhmn = V::select_lt(fa, ha, fa, ha), fhmx = V::select_lt(fa, ha, ha, fa);
  const V safe_mx = V::select_lt(zero, fhmx, fhmx, one);
  const V as = one + fhmn / safe_mx, at = (fhmx - fhmn) / safe_mx;
  // ga < fhmx
  const V au = (ga / safe_mx) * (ga / safe_mx);
  const V small_g = fhmn * (two / (V::fmadd(as, as, au).sqrt() + V::fmadd(at, at, au).sqrt()));
  // ga >= fhmx (ga > 0 there)
  const V safe_ga = V::select_lt(zero, ga, ga, one);
  const V bu = fhmx / safe_ga;
  const V asu = as * bu, atu = at * bu;
  const V cc = one / (V::fmadd(asu, asu, one).sqrt() + V::fmadd(atu, atu, one).sqrt());
  const V big_g = V::select_eq(bu, zero, fhmn * fhmx / safe_ga, two * (fhmn * cc) * bu);
  const V smin = V::select_lt(ga, fhmx, small_g, big_g);
  return V::select_eq(fhmn, zero, zero, smin);
}

// Implicit QR sweeps on the W upper bidiagonal matrices (d, e) until every superdiagonal is
// negligible: d then holds the singular values up to sign (unsorted). With ut / vt (n rows of
// ld vectors), the left / right rotations are applied to their rows, a sweep's chain at a time
// (`cs`: scratch of 4 n vectors). At most max_sweeps sweeps; returns 1 in the lanes not
// finished then, 0 elsewhere.
template <class T, class V>
V bidiagonal_qr_lanes(int64_t n, T* d, T* e, T* ut, T* vt, int64_t ld, T* cs, int64_t max_sweeps) {
  constexpr int W = V::kSize;
  constexpr T kEps = std::numeric_limits<T>::epsilon();
  const V zero(T(0)), one(T(1)), half(T(0.5)), eps(kEps);
  auto dv = [&](int64_t i) { return d + i * W; };
  auto ev = [&](int64_t i) { return e + i * W; };
  T* const csr = cs;              // a sweep's right rotations
  T* const csl = cs + 2 * n * W;  // and its left ones
  int64_t top = n - 1;
  for (int64_t sweep = 0;; ++sweep) {
    const LaneBlocks<V> b = find_lane_blocks<T, V>(n, top, d, e, [&](V x, V dprev, V di) {
      // Also below eps: the lanes are scaled to a largest entry in [1, 2), so that is at most
      // eps ||B|| (normwise accurate, as gesdd is), and a cluster of zero singular values does
      // not keep a lane sweeping.
      const V bound = eps * V::max(dprev.abs() + di.abs(), one);
      return V::select_lt(bound, x.abs(), zero, one);
    });
    const V m = b.m, lo = b.lo, active = b.active, dlo = b.dlo;
    if (V::all_lt(active, half)) return zero;
    if (sweep >= max_sweeps) return active;
    top = lane_max_index<T>(m);
    const int64_t k0 = lane_min_index<T>(V::select_lt(half, active, lo, V(T(n))));
    // The shift, zero where it is negligible next to d[lo] (or d[lo] is 0); the first
    // rotation's (f, g) as bdsqr forms them.
    V shift = lane_smin2<T>(b.dm1, b.em, b.dm);
    shift = V::select_lt(shift * shift, eps * dlo * dlo, zero, shift);
    shift = V::select_eq(dlo, zero, zero, shift);
    const V safe_dlo = V::select_eq(dlo, zero, one, dlo);
    const V f0 = V::select_eq(shift, zero, dlo,
                              (dlo.abs() - shift) * (V::copysign(one, dlo) + shift / safe_dlo));
    V f = zero, g = zero;
    for (int64_t k = k0; k < top; ++k) {
      const V kv = V(T(k));
      const V first = V::select_eq(lo, kv, one, zero);
      const V started = V::select_lt(kv, lo, zero, V::select_lt(kv, m, one, zero));
      const V last = V::select_eq(m, V(T(k + 1)), started, zero);
      f = V::select_lt(half, first, f0, f);
      g = V::select_lt(half, first, b.elo, g);
      const V dk = V::load(dv(k)), ek = V::load(ev(k)), dk1 = V::load(dv(k + 1));
      // Right rotation on columns k, k+1.
      V cr, sr, r;
      lane_givens<T>(f, g, started, cr, sr, r);
      if (k > 0) {
        const V eprev = V::load(ev(k - 1));
        V::select_lt(half, started - first, r, eprev).store(ev(k - 1));
      }
      f = V::fmadd(cr, dk, sr * ek);
      const V ek_r = V::fmadd(cr, ek, -(sr * dk));
      g = sr * dk1;
      const V dk1_r = cr * dk1;
      // Left rotation on rows k, k+1.
      V cl, sl, r2;
      lane_givens<T>(f, g, started, cl, sl, r2);
      V::select_lt(half, started, r2, dk).store(dv(k));
      f = V::fmadd(cl, ek_r, sl * dk1_r);
      (V::fmadd(cl, dk1_r, -(sl * ek_r))).store(dv(k + 1));
      V::select_lt(half, last, f, ek_r).store(ev(k));
      if (k + 1 < top) {
        const V ek1 = V::load(ev(k + 1));
        g = sl * ek1;
        (cl * ek1).store(ev(k + 1));
      }
      cr.store(csr + 2 * (k - k0) * W);
      sr.store(csr + (2 * (k - k0) + 1) * W);
      cl.store(csl + 2 * (k - k0) * W);
      sl.store(csl + (2 * (k - k0) + 1) * W);
    }
    if (vt) rotate_chain_lanes<T, V>(vt, ld, n, k0, top - k0, csr);
    if (ut) rotate_chain_lanes<T, V>(ut, ld, n, k0, top - k0, csl);
  }
}

}  // namespace tessera::cpu::TS_ISA
