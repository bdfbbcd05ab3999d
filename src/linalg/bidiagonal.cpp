// SVD for large matrices (spectral.h): Householder bidiagonalization, then the implicit-shift
// QR iteration of Golub and Kahan on the real bidiagonal matrix.
//
// 1. Reduction (m >= n, on columns-as-rows storage; float32 blocked as LAPACK's gebrd / labrd,
//    bidiagonalize_blocked; the others unblocked as gebd2): for k = 0 .. n-1 a left
//    reflector zeroes column k below the diagonal (d_k = beta), and for k < n-1 a right reflector
//    G_k = H(conj(row k right of the superdiagonal)) zeroes row k right of the superdiagonal
//    (e_k = beta), applied as A := A G_k = A - tau (A v) v^H. A = Q B P^H, Q = H_0 .. H_{n-1},
//    P = G_0 .. G_{n-2}, B upper bidiagonal and real.
// 2. U := Q (its first n columns, or all m for full_matrices), V := P, as columns-as-rows,
//    formed by the blocked orgqr.
// 3. With vectors and n > kBidiagonalLeafOrder: B = Ub S Vb^T by divide and conquer (bdsdc,
//    bidiagonal_dc.cpp, whose leaves come back here), then U := Q Ub, V := P Vb by the engine.
//    Otherwise QR sweeps on the unreduced blocks of B: negligible superdiagonals (|e_i| <= eps
//    ||B||, the normwise test: this path is normwise accurate) are set to zero; a zero diagonal
//    entry is chased out of its row (or column, for the last one) by rotations; otherwise one
//    Golub-Kahan step with the Wilkinson shift of the trailing 2 x 2 block of B^T B chases the
//    bulge down. Rotations on the right act on V's columns, those on the left on U's; both are
//    recorded and applied in batches.
// 4. Signs made positive (V's column negated), values sorted descending with the vectors.
// U's columns are products of reflectors and rotations: orthonormal also for rank-deficient A.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "core/cached_vector.h"
#include "linalg/spectral.h"

namespace tessera::linalg::detail {

namespace {

// A rotation (c, s) with c y - s z = r, s y + c z = 0 (the forms used below).
template <class R>
void givens(R y, R z, R& c, R& s, R& r) {
  r = std::hypot(y, z);
  if (r == R(0)) {
    c = 1, s = 0;
    return;
  }
  c = y / r;
  s = -z / r;
}

// The float32 reduction blocked as LAPACK's gebrd / labrd (m >= n): panels of kPanel columns are
// reduced with the trailing matrix left as it was; column c and row c are first brought up to
// date by the panel's earlier reflectors through
//   Y = tauq (A^T v - corrections)  (n x nb, one column per left reflector v),
//   X = taup (A u - corrections)    (m x nb, one column per right reflector u),
// and the trailing matrix takes A -= V Y^T + X U^T as two engine GEMMs. The panel's right
// reflectors are kept as contiguous rows (U), so that their products are axpys and dots
// along memory (A's rows are strided in this storage). Per column the
// trailing matrix is read twice (A^T v, A u; engine GEMVs, which thread), never written; the
// unblocked form reads and writes it twice. Same outputs as the unblocked loop in
// svd_bidiagonal_tall: d, e, tauq, taup, left reflector tails below the diagonal of ac's
// columns, right reflector tails in ps' rows. float32 only: its products with one vector run
// on the engine's GEMV kernels, which float64 lacks (there the engine packs them as GEMMs, and
// the blocked form measured slower than the unblocked one: 256 x 256 14-16 ms against 12).
template <class R>
void bidiagonalize_blocked(int64_t m, int64_t n, R* ac, R* d, R* e, R* tauq, R* taup, R* ps) {
  constexpr int64_t kPanel = 32;
  auto col = [&](int64_t j) { return ac + j * m; };
  cached_vector<R> xs(static_cast<size_t>(kPanel * m)), ys(static_cast<size_t>(kPanel * n)),
      us(static_cast<size_t>(kPanel * n));
  std::vector<R> rowv(static_cast<size_t>(n)), t(static_cast<size_t>(kPanel + 1));
  R* X = xs.data();  // X(r, i) = X[i m + r]
  R* Y = ys.data();  // Y(q, i) = Y[i n + q]
  R* U = us.data();  // the panel's right reflectors as rows: A(p + i, q) = U[i n + q], q > p + i
  for (int64_t p = 0; p < n; p += kPanel) {
    const int64_t nb = std::min(kPanel, n - p);
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t c = p + i, len = m - c;
      R* v = col(c) + c;
      // A(c:m, c) -= A(c:m, p:c) Y(c, 0:i)^T + X(c:m, 0:i) A(p:c, c).
      for (int64_t j = 0; j < i; ++j) {
        axpy_real(len, -Y[j * n + c], col(p + j) + c, v);
        axpy_real(len, -U[j * n + c], X + j * m + c, v);
      }
      R alpha = v[0];
      tauq[c] = larfg(len - 1, alpha, v + 1, 1);
      d[c] = alpha;
      v[0] = 1;
      if (c + 1 >= n) {
        taup[c] = 0;
        e[c] = 0;
        continue;
      }
      const int64_t nr = n - c - 1;
      // y = tauq (A(c:m, c+1:n)^T v - Y(c+1:n, 0:i) (V^T v) - A(p:c, c+1:n)^T (X^T v)); row q of
      // A(c:m, c+1:n)^T is column c+1+q of A, contiguous: the engine's GEMV.
      R* y = Y + i * n + c + 1;
      gemm_product<R>(nr, 1, len, col(c + 1) + c, m, 1, v, 1, 1, y, 1, 1);
      for (int64_t j = 0; j < i; ++j) t[j] = dot_real(len, col(p + j) + c, v);
      for (int64_t j = 0; j < i; ++j) axpy_real(nr, -t[j], Y + j * n + c + 1, y);
      for (int64_t j = 0; j < i; ++j) t[j] = dot_real(len, X + j * m + c, v);
      for (int64_t j = 0; j < i; ++j) axpy_real(nr, -t[j], U + j * n + c + 1, y);
      for (int64_t q = 0; q < nr; ++q) y[q] *= tauq[c];
      // Row c: A(c, c+1:n) -= Y(c+1:n, 0:i+1) A(c, p:c+1)^T + A(p:c, c+1:n)^T X(c, 0:i)^T.
      for (int64_t q = 0; q < nr; ++q) rowv[q] = col(c + 1 + q)[c];
      for (int64_t j = 0; j <= i; ++j)
        axpy_real(nr, -col(p + j)[c], Y + j * n + c + 1, rowv.data());
      for (int64_t j = 0; j < i; ++j) axpy_real(nr, -X[j * m + c], U + j * n + c + 1, rowv.data());
      alpha = rowv[0];
      taup[c] = larfg(nr - 1, alpha, rowv.data() + 1, 1);
      e[c] = alpha;
      rowv[0] = 1;
      std::copy(rowv.begin(), rowv.begin() + nr, U + i * n + c + 1);
      std::copy(rowv.begin() + 1, rowv.begin() + nr, ps + c * n);
      // x = taup (A(c+1:m, c+1:n) u - A(c+1:m, p:c+1) (Y^T u) - X(c+1:m, 0:i) (A(p:c, :) u));
      // x^T = u^T B with row q of B column c+1+q of A: one row times a row-major matrix.
      const int64_t rows = m - c - 1;
      R* x = X + i * m + c + 1;
      const R* u = rowv.data();
      gemm_product<R>(1, rows, nr, u, nr, 1, col(c + 1) + c + 1, m, 1, x, rows, 1);
      for (int64_t j = 0; j <= i; ++j) t[j] = dot_real(nr, Y + j * n + c + 1, u);
      for (int64_t j = 0; j <= i; ++j) axpy_real(rows, -t[j], col(p + j) + c + 1, x);
      for (int64_t j = 0; j < i; ++j) t[j] = dot_real(nr, U + j * n + c + 1, u);
      for (int64_t j = 0; j < i; ++j) axpy_real(rows, -t[j], X + j * m + c + 1, x);
      for (int64_t r = 0; r < rows; ++r) x[r] *= taup[c];
    }
    // A(p+nb:m, p+nb:n) -= V Y^T + X U^T (columns as rows: C(r, q) = col(q)[r]).
    const int64_t off = p + nb;
    if (off < n) {
      R* cblk = col(off) + off;
      gemm_minus(m - off, n - off, nb, col(p) + off, int64_t{1}, m, Y + off, n, int64_t{1}, false,
                 cblk, int64_t{1}, m);
      gemm_minus(m - off, n - off, nb, X + off, int64_t{1}, m, U + off, n, int64_t{1}, false, cblk,
                 int64_t{1}, m);
    }
  }
}

// With the vectors U = Q (uc, its first n rows rotate) and V = P (vc) formed: B = Ub S Vb^T by
// divide and conquer, then U's first n columns := Q Ub, V := P Vb (columns as rows: rows :=
// Ub^T rows, by the engine), values descending.
template <class T>
int64_t bidiagonal_vectors_dc(int64_t m, int64_t n, real_t<T>* d, real_t<T>* e, real_t<T>* sv,
                              T* uc, T* vc) {
  using R = real_t<T>;
  cached_vector<R> ub(static_cast<size_t>(n * n)), vb(static_cast<size_t>(n * n));
  if (const int64_t info = bdsdc<R>(n, d, e, ub.data(), vb.data()); info != 0) return info;
  cached_vector<T> at(static_cast<size_t>(n * n)), tmp(static_cast<size_t>(n * m));
  // Row i of the result: column n-1-i of Ub (descending values).
  auto rows_times = [&](const cached_vector<R>& f, T* rows, int64_t len) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t l = 0; l < n; ++l) at[i * n + l] = T(f[l * n + (n - 1 - i)]);
    gemm_product<T>(n, len, n, at.data(), n, 1, rows, len, 1, tmp.data(), len, 1);
    std::copy(tmp.begin(), tmp.begin() + n * len, rows);
  };
  rows_times(ub, uc, m);
  rows_times(vb, vc, n);
  for (int64_t i = 0; i < n; ++i) sv[i] = d[n - 1 - i];
  return 0;
}

}  // namespace

template <class T>
int64_t svd_bidiagonal_tall(int64_t m, int64_t n, T* ac, real_t<T>* sv, T* uc, int64_t ucount,
                            T* vc) {
  using R = real_t<T>;
  if (n == 0) {
    if (uc) {
      std::fill(uc, uc + ucount * m, T(0));
      for (int64_t j = 0; j < ucount; ++j) uc[j * m + j] = T(1);
    }
    return 0;
  }
  std::vector<R> d(static_cast<size_t>(n)), e(static_cast<size_t>(n), R(0));
  cached_vector<T> tauq(static_cast<size_t>(n)), taup(static_cast<size_t>(n), T(0));
  cached_vector<T> ps(static_cast<size_t>(n * n), T(0)), x(static_cast<size_t>(n)),
      y(static_cast<size_t>(m));
  if constexpr (std::is_same_v<T, float>) {
    bidiagonalize_blocked(m, n, ac, d.data(), e.data(), tauq.data(), taup.data(), ps.data());
  } else {
    for (int64_t k = 0; k < n; ++k) {
      T* col = ac + k * m;
      tauq[k] = larfg(m - k - 1, col[k], col + k + 1, 1);
      d[k] = real_part(col[k]);
      for (int64_t j = k + 1; j < n; ++j)
        apply_householder(m - k, col + k + 1, tauq[k], ac + j * m + k, /*conj_tau=*/true);
      if (k + 1 >= n) continue;
      const int64_t len = n - k - 1;
      for (int64_t t = 0; t < len; ++t) x[t] = conj_of(ac[(k + 1 + t) * m + k]);
      T alpha = x[0];
      const T tau = larfg(len - 1, alpha, x.data() + 1, 1);
      e[k] = real_part(alpha);
      taup[k] = tau;
      std::copy(x.begin() + 1, x.begin() + len, ps.begin() + k * n);
      x[0] = T(1);
      if (tau == T(0)) continue;
      // Rows k+1 .. m-1: y = A v, then A -= tau y v^H (column j -= tau conj(v_j) y).
      const int64_t rows = m - k - 1;
      std::fill(y.begin(), y.begin() + rows, T(0));
      for (int64_t t = 0; t < len; ++t) {
        const T* cj = ac + (k + 1 + t) * m + k + 1;
        const T vt = x[t];
        if constexpr (!kIsComplex<T>) {
          axpy_real(rows, vt, cj, y.data());
        } else {
          for (int64_t i = 0; i < rows; ++i) y[i] += mul(cj[i], vt);
        }
      }
      for (int64_t t = 0; t < len; ++t) {
        T* cj = ac + (k + 1 + t) * m + k + 1;
        const T f = mul(tau, conj_of(x[t]));
        if constexpr (!kIsComplex<T>) {
          axpy_real(rows, -f, y.data(), cj);
        } else {
          for (int64_t i = 0; i < rows; ++i) cj[i] = fms(cj[i], f, y[i]);
        }
      }
    }
  }  // float64 and complex: unblocked
  const bool vectors = uc != nullptr;
  if (vectors) {
    // U = Q [I; 0] (or Q), V = P, columns as rows; H_k and G_k leave e_j alone for j <= k.
    // Both by the blocked orgqr: U from the left reflectors where the reduction left them (ac
    // is the column-major m x n matrix), V from the right ones, shifted by one index.
    std::copy(ac, ac + n * m, uc);
    orgqr(m, ucount, n, uc, int64_t{1}, m, tauq.data());
    form_shifted_q(n, n - 1, ps.data(), n, taup.data(), vc);
    if (n > kBidiagonalLeafOrder)
      return bidiagonal_vectors_dc(m, n, d.data(), e.data(), sv, uc, vc);
  }

  const R eps = std::numeric_limits<R>::epsilon();
  const R tiny = std::numeric_limits<R>::min();
  R bnorm = 0;
  for (int64_t i = 0; i < n; ++i) bnorm = std::max({bnorm, std::abs(d[i]), std::abs(e[i])});
  std::vector<PlaneRotation<R>> left, right;
  const size_t flush_at = static_cast<size_t>(std::max<int64_t>(4 * n, 256));
  // Only U's first n rows (columns of U) rotate.
  std::optional<RotatedRows<T>> ur, vr;
  if (vectors) {
    ur.emplace(uc, n, m, m);
    vr.emplace(vc, n, n, n);
  }
  auto flush = [&] {
    if (vectors) {
      ur->apply(left);
      vr->apply(right);
    }
    left.clear();
    right.clear();
  };
  auto rot = [&](std::vector<PlaneRotation<R>>& list, int64_t p, int64_t q, R c, R s) {
    if (vectors) list.push_back({static_cast<int32_t>(p), static_cast<int32_t>(q), c, s});
  };
  const int64_t max_steps = std::max<int64_t>(6 * n * n, 100);
  int64_t steps = 0;
  int64_t hi = n - 1;
  while (hi > 0) {
    // Negligible superdiagonals and diagonals.
    for (int64_t i = 0; i < hi; ++i)
      if (std::abs(e[i]) <= eps * bnorm || std::abs(e[i]) < tiny) e[i] = 0;
    for (int64_t i = 0; i <= hi; ++i)
      if (std::abs(d[i]) <= eps * bnorm) d[i] = 0;
    while (hi > 0 && e[hi - 1] == R(0)) --hi;
    if (hi == 0) break;
    int64_t lo = hi - 1;
    while (lo > 0 && e[lo - 1] != R(0)) --lo;
    if (++steps > max_steps) {
      flush();
      return 1;
    }
    // A zero on the diagonal of the block: chase its superdiagonal out.
    int64_t zero_at = -1;
    for (int64_t i = lo; i <= hi; ++i)
      if (d[i] == R(0)) {
        zero_at = i;
        break;
      }
    if (zero_at >= 0 && zero_at < hi) {
      // Row i = zero_at holds f at column j; rotate rows (i, j) from the left to move it right.
      const int64_t i = zero_at;
      R f = e[i];
      e[i] = 0;
      for (int64_t j = i + 1; j <= hi && f != R(0); ++j) {
        R r = std::hypot(d[j], f);
        const R c = d[j] / r, s = f / r;
        d[j] = r;
        // rows: row_j' = c row_j + s row_i, row_i' = -s row_j + c row_i; U columns (i, j) alike.
        rot(left, i, j, c, s);
        if (j < hi) {
          f = -s * e[j];
          e[j] = c * e[j];
        }
      }
      continue;
    }
    if (zero_at == hi) {
      // Last diagonal zero: rotate columns (j, hi) from the right to move e_{hi-1} up and out.
      R f = e[hi - 1];
      e[hi - 1] = 0;
      for (int64_t j = hi - 1; j >= lo && f != R(0); --j) {
        const R r = std::hypot(d[j], f);
        const R c = d[j] / r, s = f / r;
        d[j] = r;
        // columns: col_j' = c col_j + s col_hi, col_hi' = -s col_j + c col_hi.
        rot(right, hi, j, c, s);
        if (j > lo) {
          f = -s * e[j - 1];
          e[j - 1] = c * e[j - 1];
        }
      }
      continue;
    }
    // Golub-Kahan step on [lo, hi] with the Wilkinson shift of the trailing 2 x 2 of B^T B.
    const R dm = d[hi - 1], em = e[hi - 1], dn = d[hi];
    const R emm = hi - 1 > lo ? e[hi - 2] : R(0);
    const R t11 = dm * dm + emm * emm, t12 = dm * em, t22 = dn * dn + em * em;
    const R half = (t11 - t22) / 2;
    const R mu = t22 - t12 * t12 / (half + std::copysign(std::hypot(half, t12), half));
    R yv = d[lo] * d[lo] - (std::isfinite(mu) ? mu : t22);
    R zv = d[lo] * e[lo];
    for (int64_t k = lo; k < hi; ++k) {
      R c, s, r;
      givens(yv, zv, c, s, r);
      if (k > lo) e[k - 1] = r;
      // Columns k, k+1 of B (and V): col_k' = c col_k - s col_k+1, col_k+1' = s col_k + c col_k+1.
      const R dk = d[k], ek = e[k];
      d[k] = c * dk - s * ek;
      e[k] = s * dk + c * ek;
      R bulge = -s * d[k + 1];
      d[k + 1] = c * d[k + 1];
      rot(right, k, k + 1, c, s);
      // Rows k, k+1 (and U's columns), zeroing the bulge at (k+1, k).
      givens(d[k], bulge, c, s, r);
      d[k] = r;
      const R ek2 = e[k], dk1 = d[k + 1];
      e[k] = c * ek2 - s * dk1;
      d[k + 1] = s * ek2 + c * dk1;
      if (k + 1 < hi) {
        zv = -s * e[k + 1];
        e[k + 1] = c * e[k + 1];
      }
      yv = e[k];
      rot(left, k, k + 1, c, s);
    }
    if (left.size() >= flush_at) flush();
  }
  flush();
  if (vectors) {
    ur->finish();
    vr->finish();
  }
  for (int64_t i = 0; i < n; ++i) {
    if (d[i] < R(0)) {
      d[i] = -d[i];
      if (vectors)
        for (int64_t t = 0; t < n; ++t) vc[i * n + t] = -vc[i * n + t];
    }
    sv[i] = d[i];
  }
  sort_with_rows<R, T>(n, sv, /*ascending=*/false, vectors ? uc : nullptr, m,
                       vectors ? vc : nullptr, n);
  return 0;
}

#define TS_LINALG_INSTANTIATE(T) \
  template int64_t svd_bidiagonal_tall<T>(int64_t, int64_t, T*, real_t<T>*, T*, int64_t, T*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
