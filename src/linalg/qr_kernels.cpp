// Householder QR: geqrf, orgqr, ormqr, geqp3 (qr_internal.h) and their plain references.
//
// Blocked form (Schreiber and Van Loan's compact WY): the reflectors of an nb-wide panel
// (block_width: 32), H_j ... H_{j+nb-1} = I - V T V^H with V (rows x nb,
// unit lower trapezoidal) and T (nb x nb upper triangular). Applying it to C costs two GEMMs
// through the engine:
//   W = V^H C        (nb x ncols, k = rows)
//   W = op(T) W      (small triangular product, in place)
//   C -= V W         (rows x ncols, k = nb)
// T comes from the Gram matrix G = V^H V (one more GEMM): T(i, i) = tau_i and
// T(0:i, i) = -tau_i T(0:i, 0:i) G(0:i, i) (LAPACK's larft, column by column).
//
// The unblocked pieces (geqr2 for a panel, org2r for a block of Q, laqp2 for pivoted QR) run on
// column-major copies, so every reflector is a contiguous column and each application is a
// dot product and an axpy down contiguous memory.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "linalg/kernels.h"
#include "linalg/leaf/leaf_kernels.h"
#include "linalg/qr_internal.h"
#include "tessera/core/parallel.h"

namespace tessera::linalg::detail {

namespace {

constexpr int64_t kUnblockedMax = 32;
// Panel / block width for k reflectors (LAPACK's nb for geqrf). 64 for large k looked faster
// at n = 2048 in a rough timing but is not yet confirmed by `tessera bench linalg`.
int64_t block_width(int64_t k) {
  (void)k;
  return 32;
}  // n up to this: unblocked on a column-major copy

template <class T>
real_t<T> imag_part(T x) {
  if constexpr (kIsComplex<T>) {
    return x.imag();
  } else {
    (void)x;
    return real_t<T>(0);
  }
}

template <class T>
T make_scalar(real_t<T> re, real_t<T> im) {
  if constexpr (kIsComplex<T>) {
    return T(re, im);
  } else {
    (void)im;
    return re;
  }
}

// sum_r conj(v[r]) c[r] over contiguous v and c; several partial sums so that the loop
// vectorizes (the order of the additions is fixed, so results do not depend on the ISA).
template <class T>
T dotc(int64_t n, const T* v, const T* c) {
  using R = real_t<T>;
  constexpr int L = 8;
  int64_t i = 0;
  if constexpr (kIsComplex<T>) {
    const R* x = reinterpret_cast<const R*>(v);
    const R* y = reinterpret_cast<const R*>(c);
    R re[L] = {}, im[L] = {};
    for (; i + L <= n; i += L)
      for (int l = 0; l < L; ++l) {
        const R xr = x[2 * (i + l)], xi = x[2 * (i + l) + 1];
        const R yr = y[2 * (i + l)], yi = y[2 * (i + l) + 1];
        re[l] += xr * yr + xi * yi;
        im[l] += xr * yi - xi * yr;
      }
    for (; i < n; ++i) {
      re[0] += x[2 * i] * y[2 * i] + x[2 * i + 1] * y[2 * i + 1];
      im[0] += x[2 * i] * y[2 * i + 1] - x[2 * i + 1] * y[2 * i];
    }
    R sr = 0, si = 0;
    for (int l = 0; l < L; ++l) sr += re[l], si += im[l];
    return T(sr, si);
  } else {
    T acc[L] = {};
    for (; i + L <= n; i += L)
      for (int l = 0; l < L; ++l) acc[l] += v[i + l] * c[i + l];
    for (; i < n; ++i) acc[0] += v[i] * c[i];
    T s = 0;
    for (int l = 0; l < L; ++l) s += acc[l];
    return s;
  }
}

// sum |x_i|^2 in Acc. Contiguous x: over its real components with eight partial sums (a
// single running sum waits on each addition; this loop vectorizes).
template <class Acc, class T>
Acc sum_squares(int64_t n, const T* x, int64_t inc) {
  Acc s = 0;
  if (inc != 1) {
    for (int64_t i = 0; i < n; ++i) {
      const Acc re = real_part(x[i * inc]), im = imag_part(x[i * inc]);
      s += re * re + im * im;
    }
    return s;
  }
  const real_t<T>* r = reinterpret_cast<const real_t<T>*>(x);
  const int64_t count = kIsComplex<T> ? 2 * n : n;
  constexpr int L = 8;
  Acc acc[L] = {};
  int64_t i = 0;
  for (; i + L <= count; i += L)
    for (int l = 0; l < L; ++l) acc[l] += Acc(r[i + l]) * Acc(r[i + l]);
  for (; i < count; ++i) s += Acc(r[i]) * Acc(r[i]);
  for (int l = 0; l < L; ++l) s += acc[l];
  return s;
}

// sqrt(sum |x_i|^2) without overflow or harmful underflow (LAPACK's nrm2 contract): float
// accumulates in double; double sums directly and rescales by the largest entry when the sum
// overflowed or fell into the range where its square root loses digits.
template <class T>
real_t<T> norm2(int64_t n, const T* x, int64_t inc) {
  using R = real_t<T>;
  if constexpr (std::is_same_v<R, float>) {
    return static_cast<float>(std::sqrt(sum_squares<double>(n, x, inc)));
  } else {
    const R s = sum_squares<R>(n, x, inc);
    if (std::isnan(s)) return s;
    constexpr R kTiny = std::numeric_limits<R>::min() / std::numeric_limits<R>::epsilon();
    // A zero sum may be every square underflowing (x ~ 1e-300): the rescaled sum decides.
    if (std::isfinite(s) && s >= kTiny) return std::sqrt(s);
    R scale = 0;
    for (int64_t i = 0; i < n; ++i)
      scale = std::max({scale, std::abs(real_part(x[i * inc])), std::abs(imag_part(x[i * inc]))});
    if (scale == R(0) || !std::isfinite(scale)) return scale;
    R t = 0;
    for (int64_t i = 0; i < n; ++i) {
      const R re = real_part(x[i * inc]) / scale, im = imag_part(x[i * inc]) / scale;
      t += re * re + im * im;
    }
    return scale * std::sqrt(t);
  }
}

// c_j -= t v (v^H c_j) for the ncols contiguous columns c_j = c + j * ldc of length len (v
// contiguous, v[0] == 1 as stored by the caller): H c with t = tau, H^H c with t = conj(tau).
template <class T>
void apply_reflector(int64_t len, int64_t ncols, const T* v, T t, T* c, int64_t ldc) {
  if (t == T(0)) return;
  for (int64_t j = 0; j < ncols; ++j) {
    T* cj = c + j * ldc;
    const T s = mul(t, dotc(len, v, cj));
    for (int64_t r = 0; r < len; ++r) cj[r] = fms(cj[r], s, v[r]);
  }
}

// The rows x cols block (a, rs, cs) to and from column-major p (leading dimension rows); a
// row-major block moves through the leaves' transpose (register blocks).
template <class T>
void to_colmajor(int64_t rows, int64_t cols, const T* a, int64_t rs, int64_t cs, T* p) {
  if (cs == 1 && rs != 1) {
    transpose_into(rows, cols, a, rs, p, rows);
  } else {
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t i = 0; i < rows; ++i) p[c * rows + i] = a[i * rs + c * cs];
  }
}
template <class T>
void from_colmajor(int64_t rows, int64_t cols, const T* p, T* a, int64_t rs, int64_t cs) {
  if (cs == 1 && rs != 1) {
    transpose_into(cols, rows, p, rows, a, rs);
  } else {
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t i = 0; i < rows; ++i) a[i * rs + c * cs] = p[c * rows + i];
  }
}

// Unblocked QR (LAPACK's geqr2) of the column-major rows x cols matrix p: min(rows, cols)
// reflectors, each applied to all the columns right of it. Step i of both: the reflector of column
// i (rows x cols column-major p), applied as H^H to the columns right of it; returns tau_i.
template <class T>
T reduce_column(int64_t rows, int64_t cols, T* p, int64_t ld, int64_t i) {
  T* col = p + i * ld + i;
  const T tau = larfg(rows - i - 1, col[0], col + 1, int64_t{1});
  if (i + 1 < cols) {
    const T beta = col[0];
    col[0] = T(1);
    apply_reflector(rows - i, cols - i - 1, col, conj_of(tau), col + ld, ld);
    col[0] = beta;
  }
  return tau;
}

template <class T>
void geqr2_colmajor(int64_t rows, int64_t cols, T* p, int64_t ld, T* tau) {
  const int64_t k = std::min(rows, cols);
  for (int64_t i = 0; i < k; ++i) tau[i] = reduce_column(rows, cols, p, ld, i);
}

// Unblocked Q (LAPACK's org2r): the column-major rows x cols matrix p (cols <= rows) whose first
// k columns hold reflectors becomes the first cols columns of H_0 ... H_{k-1}.
template <class T>
void org2r_colmajor(int64_t rows, int64_t cols, int64_t k, T* p, int64_t ld, const T* tau) {
  for (int64_t j = k; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) p[j * ld + i] = i == j ? T(1) : T(0);
  for (int64_t i = k - 1; i >= 0; --i) {
    T* col = p + i * ld + i;
    if (i + 1 < cols) {
      col[0] = T(1);
      apply_reflector(rows - i, cols - i - 1, col, tau[i], col + ld, ld);
    }
    const T neg = -tau[i];
    for (int64_t r = 1; r < rows - i; ++r) col[r] = mul(neg, col[r]);
    col[0] = T(1) - tau[i];
    for (int64_t r = 0; r < i; ++r) p[i * ld + r] = T(0);
  }
}

// One block reflector I - V T V^H: V explicit (column-major rows x nb, unit diagonal, zeros
// above), its conjugate (complex only) and T (row-major nb x nb upper triangular).
template <class T>
struct BlockReflector {
  int64_t rows = 0, nb = 0;
  std::vector<T> v, vc, t, g;
  const T* vconj() const { return kIsComplex<T> ? vc.data() : v.data(); }

  // From the rows x nb reflectors stored below the diagonal of (a, rs, cs) and tau.
  void build(int64_t rows_, int64_t nb_, const T* a, int64_t rs, int64_t cs, const T* tau) {
    rows = rows_, nb = nb_;
    v.assign(static_cast<size_t>(rows * nb), T(0));
    for (int64_t c = 0; c < nb; ++c) {
      T* vcol = v.data() + c * rows;
      vcol[c] = T(1);
      for (int64_t r = c + 1; r < rows; ++r) vcol[r] = a[r * rs + c * cs];
    }
    if constexpr (kIsComplex<T>) {
      vc.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) vc[i] = std::conj(v[i]);
    }
    // g = -V^H V (nb x nb, row-major).
    g.assign(static_cast<size_t>(nb * nb), T(0));
    gemm_minus(nb, nb, rows, vconj(), rows, int64_t{1}, v.data(), int64_t{1}, rows, false, g.data(),
               nb, int64_t{1});
    // T(0:i, i) = tau_i T(0:i, 0:i) g(0:i, i), T(i, i) = tau_i.
    t.assign(static_cast<size_t>(nb * nb), T(0));
    for (int64_t i = 0; i < nb; ++i) {
      for (int64_t r = 0; r < i; ++r) {
        T s(0);
        for (int64_t q = r; q < i; ++q) s += mul(t[r * nb + q], g[q * nb + i]);
        t[r * nb + i] = mul(tau[i], s);
      }
      t[i * nb + i] = tau[i];
    }
  }

  // C := (I - V T V^H) C, or its adjoint (I - V T^H V^H) C, for the rows x ncols (c, c_rs, c_cs).
  // Columns of C are independent: a wide C is split over the pool (for_column_shares), each
  // share running both GEMMs and the triangular product on its own columns, with no barrier
  // between them (three parallel regions a panel, with the serial product between, left the
  // second thread idle: float32 1024 x 1024 geqrf ran slower on two threads than on one).
  void apply(bool adjoint, int64_t ncols, T* c, int64_t c_rs, int64_t c_cs) {
    if (ncols == 0 || rows == 0) return;
    for_column_shares(ncols, 2 * rows * nb * ncols, [&](int64_t c0, int64_t cols) {
      thread_local std::vector<T> w;  // V^H C for these columns
      apply_columns(adjoint, cols, c + c0 * c_cs, c_rs, c_cs, w);
    });
  }

 private:
  void apply_columns(bool adjoint, int64_t ncols, T* c, int64_t c_rs, int64_t c_cs,
                     std::vector<T>& w) const {
    // w = -V^H C.
    w.assign(static_cast<size_t>(nb * ncols), T(0));
    gemm_minus(nb, ncols, rows, vconj(), rows, int64_t{1}, c, c_rs, c_cs, false, w.data(), ncols,
               int64_t{1});
    // w := -op(T) w in place: top-down for T (upper), bottom-up for T^H (lower).
    for (int64_t s = 0; s < nb; ++s) {
      const int64_t i = adjoint ? nb - 1 - s : s;
      T* wi = w.data() + i * ncols;
      const T d = -maybe_conj(t[i * nb + i], adjoint);
      for (int64_t j = 0; j < ncols; ++j) wi[j] = mul(d, wi[j]);
      const int64_t q0 = adjoint ? 0 : i + 1, q1 = adjoint ? i : nb;
      for (int64_t q = q0; q < q1; ++q) {
        const T coef = adjoint ? conj_of(t[q * nb + i]) : t[i * nb + q];
        const T* wq = w.data() + q * ncols;
        for (int64_t j = 0; j < ncols; ++j) wi[j] = fms(wi[j], coef, wq[j]);
      }
    }
    // C -= V w.
    gemm_minus(rows, ncols, nb, v.data(), int64_t{1}, rows, w.data(), ncols, int64_t{1}, false, c,
               c_rs, c_cs);
  }
};

template <class T>
BlockReflector<T>& block_workspace() {
  thread_local BlockReflector<T> ws;
  return ws;
}
template <class T>
std::vector<T>& panel_workspace() {
  thread_local std::vector<T> panel;
  return panel;
}

}  // namespace

template <class T>
T larfg(int64_t count, T& alpha, T* x, int64_t inc) {
  using R = real_t<T>;
  R xnorm = count > 0 ? norm2(count, x, inc) : R(0);
  R alphr = real_part(alpha), alphi = imag_part(alpha);
  if (xnorm == R(0) && alphi == R(0)) return T(0);
  auto lapy3 = [](R a, R b, R c) { return std::hypot(std::hypot(a, b), c); };
  R beta = -std::copysign(lapy3(alphr, alphi, xnorm), alphr);
  constexpr R kSafmin = std::numeric_limits<R>::min() / std::numeric_limits<R>::epsilon();
  int knt = 0;
  if (std::abs(beta) < kSafmin) {
    // xnorm and beta may be inaccurate: scale x and recompute them.
    const R rsafmn = R(1) / kSafmin;
    do {
      ++knt;
      for (int64_t i = 0; i < count; ++i) x[i * inc] *= rsafmn;
      beta *= rsafmn, alphr *= rsafmn, alphi *= rsafmn;
    } while (std::abs(beta) < kSafmin && knt < 20);
    xnorm = norm2(count, x, inc);
    beta = -std::copysign(lapy3(alphr, alphi, xnorm), alphr);
  }
  const T tau = make_scalar<T>((beta - alphr) / beta, -alphi / beta);
  const T scale = T(1) / (make_scalar<T>(alphr, alphi) - T(beta));
  for (int64_t i = 0; i < count; ++i) x[i * inc] = mul(x[i * inc], scale);
  for (int j = 0; j < knt; ++j) beta *= kSafmin;
  alpha = T(beta);
  return tau;
}

template <class T>
void geqrf(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, T* tau) {
  const int64_t k = std::min(m, n);
  if (k == 0) return;
  std::vector<T>& panel = panel_workspace<T>();
  if (n <= kUnblockedMax) {
    panel.resize(static_cast<size_t>(m * n));
    to_colmajor(m, n, a, rs, cs, panel.data());
    geqr2_colmajor(m, n, panel.data(), m, tau);
    from_colmajor(m, n, panel.data(), a, rs, cs);
    return;
  }
  BlockReflector<T>& ws = block_workspace<T>();
  const int64_t nb = block_width(k);
  for (int64_t j = 0; j < k; j += nb) {
    const int64_t jb = std::min(nb, k - j), rows = m - j;
    T* ajj = a + j * rs + j * cs;
    panel.resize(static_cast<size_t>(rows * jb));
    to_colmajor(rows, jb, ajj, rs, cs, panel.data());
    geqr2_colmajor(rows, jb, panel.data(), rows, tau + j);
    from_colmajor(rows, jb, panel.data(), ajj, rs, cs);
    if (j + jb < n) {
      ws.build(rows, jb, panel.data(), int64_t{1}, rows, tau + j);
      ws.apply(/*adjoint=*/true, n - j - jb, ajj + jb * cs, rs, cs);
    }
  }
}

template <class T>
void orgqr(int64_t m, int64_t n, int64_t k, T* a, int64_t rs, int64_t cs, const T* tau) {
  if (m == 0 || n == 0) return;
  std::vector<T>& panel = panel_workspace<T>();
  if (n <= kUnblockedMax) {
    panel.resize(static_cast<size_t>(m * n));
    to_colmajor(m, n, a, rs, cs, panel.data());
    org2r_colmajor(m, n, k, panel.data(), m, tau);
    from_colmajor(m, n, panel.data(), a, rs, cs);
    return;
  }
  for (int64_t j = k; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) a[i * rs + j * cs] = i == j ? T(1) : T(0);
  if (k == 0) return;
  BlockReflector<T>& ws = block_workspace<T>();
  const int64_t nb = block_width(k);
  for (int64_t i = (k - 1) / nb * nb; i >= 0; i -= nb) {
    const int64_t ib = std::min(nb, k - i), rows = m - i;
    T* aii = a + i * rs + i * cs;
    if (i + ib < n) {
      ws.build(rows, ib, aii, rs, cs, tau + i);
      ws.apply(/*adjoint=*/false, n - i - ib, aii + ib * cs, rs, cs);
    }
    panel.resize(static_cast<size_t>(rows * ib));
    to_colmajor(rows, ib, aii, rs, cs, panel.data());
    org2r_colmajor(rows, ib, ib, panel.data(), rows, tau + i);
    from_colmajor(rows, ib, panel.data(), aii, rs, cs);
    for (int64_t r = 0; r < i; ++r)
      for (int64_t c = 0; c < ib; ++c) a[r * rs + (i + c) * cs] = T(0);
  }
}

template <class T>
void ormqr(bool adjoint, int64_t m, int64_t nrhs, int64_t k, const T* a, int64_t rs, int64_t cs,
           const T* tau, T* c, int64_t c_rs, int64_t c_cs) {
  if (m == 0 || nrhs == 0 || k == 0) return;
  BlockReflector<T>& ws = block_workspace<T>();
  // Q^H C = H_{k-1}^H ... H_0^H C: blocks forward; Q C: blocks backward.
  const int64_t nb = block_width(k);
  const int64_t last = (k - 1) / nb * nb;
  for (int64_t s = 0; s <= last; s += nb) {
    const int64_t i = adjoint ? s : last - s;
    const int64_t ib = std::min(nb, k - i), rows = m - i;
    ws.build(rows, ib, a + i * rs + i * cs, rs, cs, tau + i);
    ws.apply(adjoint, nrhs, c + i * c_rs, c_rs, c_cs);
  }
}

namespace {

// The pivot of step k: the first of the columns k .. n of largest partial norm (LAPACK's idamax;
// a NaN norm is never chosen over an earlier column).
template <class R>
int64_t pivot_column(int64_t k, int64_t n, const R* vn1) {
  int64_t p = k;
  for (int64_t j = k + 1; j < n; ++j)
    if (vn1[j] > vn1[p]) p = j;
  return p;
}

// Swaps columns p and k (all m rows) of the column-major a, their pivots, and moves k's norms
// to p (k's own are not needed again).
template <class T, class R>
void swap_pivot(int64_t m, int64_t p, int64_t k, T* a, int64_t lda, int64_t* jpvt, R* vn1, R* vn2) {
  std::swap_ranges(a + p * lda, a + p * lda + m, a + k * lda);
  std::swap(jpvt[p], jpvt[k]);
  vn1[p] = vn1[k], vn2[p] = vn2[k];
}

// The downdate of column j's partial norm after row `row` left it (Drmac and Bujanovic):
// false when cancellation is feared and the norm must be recomputed from the column.
template <class T, class R>
bool downdate_norm(T a_row_j, R& vn1, R vn2, R tol3z) {
  const R r = std::abs(a_row_j) / vn1;
  const R temp = std::max(R(0), (R(1) + r) * (R(1) - r));
  const R ratio = vn1 / vn2;
  if (temp * ratio * ratio <= tol3z) return false;
  vn1 *= std::sqrt(temp);
  return true;
}

// The fewest multiply-adds a thread takes of a step's pass over the matrix (y = A^H v): below
// it, waking the pool costs more than the share saves.
constexpr int64_t kMinPassShare = int64_t{1} << 17;

// laqps's scratch: y (n), the scalars of a gemv_minus, one row and the block's rows of R, the
// columns whose norms must be recomputed.
template <class T>
struct PivotWorkspace {
  std::vector<T> y, s, row, rows;
  std::vector<int64_t> recompute;
};

template <class R>
R tol3z() {
  return std::sqrt(std::numeric_limits<R>::epsilon());
}

// Unblocked pivoted QR (LAPACK's laqp2) of the column-major m x n matrix a below row `offset`:
// rows offset .. m of columns 0 .. min(m - offset, n) are reduced, every reflector applied to
// the columns right of it at once; the pivots swap whole columns (all m rows).
template <class T>
void laqp2(int64_t m, int64_t n, int64_t offset, T* a, int64_t lda, int64_t* jpvt, T* tau,
           real_t<T>* vn1, real_t<T>* vn2) {
  using R = real_t<T>;
  const int64_t k = std::min(m - offset, n);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t row = offset + i;
    if (const int64_t p = pivot_column(i, n, vn1); p != i)
      swap_pivot(m, p, i, a, lda, jpvt, vn1, vn2);
    tau[i] = reduce_column(m - offset, n, a + offset, lda, i);
    for (int64_t j = i + 1; j < n; ++j) {
      if (vn1[j] == R(0) || downdate_norm(a[j * lda + row], vn1[j], vn2[j], tol3z<R>())) continue;
      vn1[j] = row + 1 < m ? norm2(m - row - 1, a + j * lda + row + 1, int64_t{1}) : R(0);
      vn2[j] = vn1[j];
    }
  }
}

// Blocked pivoted QR step (LAPACK's laqps): factors up to nb columns of the column-major m x n
// matrix a below row `offset`, as laqp2 would, but applies their reflectors to the rest of the
// matrix only once, as a GEMM at the end. Meanwhile F (n x nb, column-major, leading dimension
// ldf) accumulates the update, A(rows, k:n) -= A(rows, 0:k) F(k:n, 0:k)^H, and each step brings
// only the column it reduces and the row it leaves up to date (the pivot choice and the norm
// downdate need no more). A norm that must be recomputed needs its whole updated column, so the
// block ends early at the first such column. The block's update is one GEMM on the engine; a
// step's one pass over the rest of the matrix (its main cost) is linalg's adjoint_gemv leaf,
// its columns split over the pool, and its updates by the block's earlier reflectors the
// gemv_minus leaf. Returns the number of columns factored.
template <class T>
int64_t laqps(int64_t m, int64_t n, int64_t offset, int64_t nb, T* a, int64_t lda, int64_t* jpvt,
              T* tau, real_t<T>* vn1, real_t<T>* vn2, T* f, int64_t ldf, PivotWorkspace<T>& ws) {
  using R = real_t<T>;
  const int64_t last_row = std::min(m, n + offset);
  constexpr bool kConj = kIsComplex<T>;
  auto A = [&](int64_t i, int64_t j) -> T& { return a[j * lda + i]; };
  auto F = [&](int64_t i, int64_t j) -> T& { return f[j * ldf + i]; };
  // The block's rows of R right of the diagonal, kept (column-major, nb x n) until the block
  // ends and written to A then: a row of A is n scattered cache lines, a column of these rows
  // one or two.
  ws.rows.resize(static_cast<size_t>(nb * n));
  auto Rows = [&](int64_t i, int64_t j) -> T& { return ws.rows[j * nb + i]; };
  ws.recompute.clear();
  int64_t k = 0;
  for (; k < nb && ws.recompute.empty(); ++k) {
    const int64_t rk = offset + k, len = m - rk, rest = n - k - 1;
    if (const int64_t p = pivot_column(k, n, vn1); p != k) {
      swap_pivot(m, p, k, a, lda, jpvt, vn1, vn2);
      for (int64_t q = 0; q < k; ++q) std::swap(F(p, q), F(k, q));
      for (int64_t q = 0; q < k; ++q) std::swap(Rows(q, p), Rows(q, k));
    }
    // Column k up to date: A(rk:m, k) -= A(rk:m, 0:k) F(k, 0:k)^H.
    T* col = &A(rk, k);
    ws.s.resize(static_cast<size_t>(k + 1));
    for (int64_t q = 0; q < k; ++q) ws.s[q] = conj_of(F(k, q));
    gemv_minus(len, k, &A(rk, 0), lda, ws.s.data(), false, col);
    tau[k] = larfg(len - 1, col[0], col + 1, int64_t{1});
    const T akk = col[0];
    col[0] = T(1);
    // y = tau A(rk:m, 0:n)^H v: the step's one pass over the rest of the matrix, its columns
    // split over the pool (each column's dot product is the same on any split).
    ws.y.resize(static_cast<size_t>(n));
    parallel_for(0, n, std::max<int64_t>(16, kMinPassShare / std::max<int64_t>(len, 1)),
                 [&](int64_t j0, int64_t j1) {
                   adjoint_gemv(len, j1 - j0, &A(rk, j0), lda, col, ws.y.data() + j0);
                 });
    // F(:, k) = (0, ..., 0, y(k+1:n)) - F(:, 0:k) y(0:k): the reflector's share of the update,
    // in F's form.
    for (int64_t j = 0; j < n; ++j) ws.y[j] = mul(tau[k], ws.y[j]);
    for (int64_t j = 0; j <= k; ++j) F(j, k) = T(0);
    for (int64_t j = k + 1; j < n; ++j) F(j, k) = ws.y[j];
    gemv_minus(n, k, f, ldf, ws.y.data(), false, &F(0, k));
    // Row rk up to date: R(rk, k+1:n) = A(rk, k+1:n) - A(rk, 0:k+1) F(k+1:n, 0:k+1)^H, on a
    // contiguous copy of the row.
    ws.row.resize(static_cast<size_t>(rest));
    for (int64_t j = 0; j < rest; ++j) ws.row[j] = A(rk, k + 1 + j);
    for (int64_t q = 0; q <= k; ++q) ws.s[q] = A(rk, q);
    gemv_minus(rest, k + 1, &F(k + 1, 0), ldf, ws.s.data(), kConj, ws.row.data());
    for (int64_t j = 0; j < rest; ++j) Rows(k, k + 1 + j) = ws.row[j];
    if (rk + 1 < last_row) {
      for (int64_t j = k + 1; j < n; ++j)
        if (vn1[j] != R(0) && !downdate_norm(ws.row[j - k - 1], vn1[j], vn2[j], tol3z<R>()))
          ws.recompute.push_back(j);
    }
    col[0] = akk;
  }
  for (int64_t j = 1; j < n; ++j) std::copy_n(&Rows(0, j), std::min(j, k), &A(offset, j));
  // The rest of the matrix: A(rk:m, k:n) -= A(rk:m, 0:k) F(k:n, 0:k)^H.
  const int64_t rk = offset + k;
  if (k < std::min(n, m - offset))
    gemm_minus(m - rk, n - k, k, &A(rk, 0), int64_t{1}, lda, &F(k, 0), ldf, int64_t{1}, kConj,
               &A(rk, k), int64_t{1}, lda);
  for (int64_t j : ws.recompute) vn1[j] = vn2[j] = norm2(m - rk, &A(rk, j), int64_t{1});
  return k;
}

// Block width and the order below which the rest runs unblocked (LAPACK's nb and nx for geqp3).
constexpr int64_t kPivotBlock = 32;
constexpr int64_t kPivotUnblockedMin = 128;

template <class T>
void geqp3_impl(bool blocked, int64_t m, int64_t n, T* a, int64_t lda, int64_t* jpvt, T* tau) {
  using R = real_t<T>;
  const int64_t k = std::min(m, n);
  std::vector<R> vn1(static_cast<size_t>(n)), vn2(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    jpvt[j] = j;
    vn1[j] = vn2[j] = norm2(m, a + j * lda, int64_t{1});
  }
  int64_t j = 0;
  if (blocked && k > kPivotUnblockedMin) {
    std::vector<T> f(static_cast<size_t>(n * kPivotBlock));
    PivotWorkspace<T> ws;
    const int64_t blocked_end = k - kPivotUnblockedMin;
    while (j < blocked_end) {
      const int64_t nb = std::min(kPivotBlock, blocked_end - j);
      j += laqps(m, n - j, j, nb, a + j * lda, lda, jpvt + j, tau + j, vn1.data() + j,
                 vn2.data() + j, f.data(), n - j, ws);
    }
  }
  if (j < k)
    laqp2(m, n - j, j, a + j * lda, lda, jpvt + j, tau + j, vn1.data() + j, vn2.data() + j);
}

}  // namespace

template <class T>
void geqp3(int64_t m, int64_t n, T* a, int64_t lda, int64_t* jpvt, T* tau) {
  geqp3_impl(/*blocked=*/true, m, n, a, lda, jpvt, tau);
}

template <class T>
void geqp3_unblocked(int64_t m, int64_t n, T* a, int64_t lda, int64_t* jpvt, T* tau) {
  geqp3_impl(/*blocked=*/false, m, n, a, lda, jpvt, tau);
}

// ---- references: the textbook Householder QR on the strided matrix, std::complex arithmetic --

template <class T>
void geqrf_reference(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, T* tau) {
  using R = real_t<T>;
  auto A = [&](int64_t i, int64_t j) -> T& { return a[i * rs + j * cs]; };
  for (int64_t i = 0; i < std::min(m, n); ++i) {
    R sum = 0;
    for (int64_t r = i + 1; r < m; ++r) sum += std::norm(A(r, i));
    const T alpha = A(i, i);
    if (sum == R(0) && imag_part(alpha) == R(0)) {
      tau[i] = T(0);
      continue;
    }
    const R norm = std::sqrt(sum + std::norm(alpha));
    const R beta = real_part(alpha) >= R(0) ? -norm : norm;
    tau[i] = (T(beta) - alpha) / T(beta);
    for (int64_t r = i + 1; r < m; ++r) A(r, i) /= alpha - T(beta);
    A(i, i) = T(beta);
    // A(i:m, i+1:n) -= conj(tau) v (v^H A(i:m, i+1:n)), v = (1, A(i+1:m, i)).
    for (int64_t j = i + 1; j < n; ++j) {
      T w = A(i, j);
      for (int64_t r = i + 1; r < m; ++r) w += conj_of(A(r, i)) * A(r, j);
      w *= conj_of(tau[i]);
      A(i, j) -= w;
      for (int64_t r = i + 1; r < m; ++r) A(r, j) -= A(r, i) * w;
    }
  }
}

template <class T>
void orgqr_reference(int64_t m, int64_t n, int64_t k, T* a, int64_t rs, int64_t cs, const T* tau) {
  // Q = H_0 ... H_{k-1} I(:, 0:n), applied from the last reflector to the first; the
  // reflectors are read from a copy since Q overwrites them.
  std::vector<T> v(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) v[i * k + j] = a[i * rs + j * cs];
  auto Q = [&](int64_t i, int64_t j) -> T& { return a[i * rs + j * cs]; };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) Q(i, j) = i == j ? T(1) : T(0);
  for (int64_t h = k - 1; h >= 0; --h) {
    auto vh = [&](int64_t r) { return r == h ? T(1) : v[r * k + h]; };
    for (int64_t j = 0; j < n; ++j) {
      T w = 0;
      for (int64_t r = h; r < m; ++r) w += conj_of(vh(r)) * Q(r, j);
      w *= tau[h];
      for (int64_t r = h; r < m; ++r) Q(r, j) -= vh(r) * w;
    }
  }
}

#define TS_LINALG_INSTANTIATE(T)                                                                \
  template T larfg<T>(int64_t, T&, T*, int64_t);                                                \
  template void geqrf<T>(int64_t, int64_t, T*, int64_t, int64_t, T*);                           \
  template void orgqr<T>(int64_t, int64_t, int64_t, T*, int64_t, int64_t, const T*);            \
  template void ormqr<T>(bool, int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*, \
                         T*, int64_t, int64_t);                                                 \
  template void geqp3<T>(int64_t, int64_t, T*, int64_t, int64_t*, T*);                          \
  template void geqp3_unblocked<T>(int64_t, int64_t, T*, int64_t, int64_t*, T*);                \
  template void geqrf_reference<T>(int64_t, int64_t, T*, int64_t, int64_t, T*);                 \
  template void orgqr_reference<T>(int64_t, int64_t, int64_t, T*, int64_t, int64_t, const T*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
