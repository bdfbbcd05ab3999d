// SVD by one-sided (Hestenes) Jacobi, and the gesvd driver (spectral.h).
//
// The columns a_j of a tall matrix (columns-as-rows, so each is contiguous) are rotated in
// pairs until they are mutually orthogonal: for alpha = |a_p|^2, beta = |a_q|^2 and gamma =
// a_p^H a_q = g w (|w| = 1), the rotation of jacobi_eigh.cpp applied to the Gram matrix A^H A
// (t from zeta = (beta - alpha) / (2 g)) is a column operation on A and V:
//   a_p := c a_p - s conj(w) a_q,   a_q := s a_p + c conj(w) a_q.
// A pair is skipped when |gamma| <= tol sqrt(alpha beta), tol = eps sqrt(m): a relative
// criterion, so a column-graded matrix keeps its small singular values to high relative
// accuracy. A sweep without a rotation ends the iteration. Then sigma_j = |a_j|, u_j =
// a_j / sigma_j.
//
// Tall matrices (m > n) are first reduced by the blocked Householder QR of qr() (geqrf), and
// Jacobi runs on the n x n R: fewer rows per rotation and faster convergence; U = Q [U_R; 0]
// (or Q [[U_R, 0], [0, I]] for full_matrices), applied to all columns at once by ormqr.
//
// Null columns: where sigma_j is at the noise floor a_j / sigma_j is not a reliable direction
// (or is 0 / 0), so those columns of U are completed to an orthonormal basis
// (complete_orthonormal): U is orthonormal for rank-deficient input too.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#include "core/cached_vector.h"
#include "linalg/spectral.h"

namespace tessera::linalg::detail {

namespace {

constexpr int kMaxSweeps = 60;

// Jacobi on n columns of length m (rows of ac); V's columns as the rows of vc when non-null.
// Returns false when not converged within kMaxSweeps. Each pair's Gram entries and angle are
// computed in gram_t<R> (double for single precision): in float, a column near the noise
// floor of a rank-deficient matrix (norm ~1e-22) has subnormal squares, and the angles from
// them never made it orthogonal to its partner.
template <class T>
bool jacobi_columns(int64_t m, int64_t n, T* ac, T* vc) {
  using R = real_t<T>;
  using G = gram_t<R>;
  const G tol = std::numeric_limits<R>::epsilon() * std::sqrt(G(std::max<int64_t>(m, 1)));
  // A column whose norm is below safmin / eps^2 (float: 8e-25) is at the floor where products
  // with it go subnormal in R and lose their relative precision, so that no rotation makes it
  // orthogonal to eps: it counts as converged (its U column is completed later). Zero for
  // double, where the bound underflows.
  const G floor = G(std::numeric_limits<R>::min()) / G(std::numeric_limits<R>::epsilon()) /
                  G(std::numeric_limits<R>::epsilon());
  const G floor2 = floor * floor;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool rotated = false;
    for (int64_t p = 0; p + 1 < n; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        T* ap = ac + p * m;
        T* aq = ac + q * m;
        G alpha = 0, beta = 0;
        std::complex<G> gamma = 0;
        if constexpr (!kIsComplex<T>) {
          G dots[3];
          dot3_gram(m, ap, aq, dots);
          alpha = dots[0], beta = dots[1], gamma = dots[2];
        } else {
          for (int64_t i = 0; i < m; ++i) {
            const std::complex<G> x = ap[i], y = aq[i];
            alpha += abs2(x);
            beta += abs2(y);
            gamma += mul(conj_of(x), y);
          }
        }
        // A column whose squared norm underflowed to 0 is numerically zero: it cannot be made
        // orthogonal to anything (rank-deficient input shrinks a column geometrically until it
        // gets there, and rotating it on would cycle).
        const G g = std::abs(gamma);
        if (!(alpha > floor2 && beta > floor2 && g > tol * std::sqrt(alpha) * std::sqrt(beta)))
          continue;
        rotated = true;
        if constexpr (!kIsComplex<T>) {
          // Real: the signed gamma absorbs the phase, and the rows rotate by (c, s).
          const G t = jacobi_tangent(alpha, beta, gamma.real());
          const auto c = static_cast<R>(1 / std::sqrt(1 + t * t)), s = static_cast<R>(t * c);
          rotate_rows_real(m, ap, aq, c, s);
          if (vc) rotate_rows_real(n, vc + p * n, vc + q * n, c, s);
        } else {
          const T ph = T(gamma / g);
          const G t = jacobi_tangent(alpha, beta, g);
          const auto c = static_cast<R>(1 / std::sqrt(1 + t * t)), s = static_cast<R>(t * c);
          const T sw = conj_of(ph) * s, cw = conj_of(ph) * c;
          auto rotate = [&](T* x, T* y, int64_t len) {
            for (int64_t i = 0; i < len; ++i) {
              const T xp = x[i], yq = y[i];
              x[i] = c * xp - mul(sw, yq);
              y[i] = s * xp + mul(cw, yq);
            }
          };
          rotate(ap, aq, m);
          if (vc) rotate(vc + p * n, vc + q * n, n);
        }
      }
    }
    if (!rotated) return true;
  }
  return false;
}

}  // namespace

template <class T>
int64_t svd_jacobi_tall(int64_t m, int64_t n, T* ac, real_t<T>* sv, T* uc, int64_t ucount, T* vc) {
  using R = real_t<T>;
  const bool vectors = uc != nullptr;
  const bool precondition = m > n;
  cached_vector<T> tau, rc;
  T* work = ac;
  int64_t rows = m;
  if (precondition) {
    tau.resize(static_cast<size_t>(n));
    geqrf(m, n, ac, /*rs=*/1, /*cs=*/m, tau.data());  // columns-as-rows: A(i, j) = ac[j * m + i]
    rc.assign(static_cast<size_t>(n * n), T(0));
    for (int64_t j = 0; j < n; ++j) std::copy(ac + j * m, ac + j * m + j + 1, rc.begin() + j * n);
    work = rc.data();
    rows = n;
  }
  if (vectors) {
    std::fill(vc, vc + n * n, T(0));
    for (int64_t j = 0; j < n; ++j) vc[j * n + j] = T(1);
  }
  if (!jacobi_columns(rows, n, work, vectors ? vc : nullptr)) return 1;
  for (int64_t j = 0; j < n; ++j) {
    R s = 0;
    for (int64_t i = 0; i < rows; ++i) s += abs2(work[j * rows + i]);
    sv[j] = std::sqrt(s);
  }
  sort_with_rows<R, T>(n, sv, /*ascending=*/false, work, rows, vectors ? vc : nullptr, n);
  if (!vectors) return 0;
  // U_R's columns (rows of ur, length `rows`): a_j / sigma_j above the noise floor.
  cached_vector<T> ur(static_cast<size_t>(n * rows), T(0));
  const R floor = R(rows) * std::numeric_limits<R>::epsilon() * (n > 0 ? sv[0] : R(0));
  int64_t k0 = n;
  for (int64_t j = 0; j < n; ++j) {
    if (!(sv[j] > floor)) {
      k0 = std::min(k0, j);
      std::copy(work + j * rows, work + (j + 1) * rows, ur.begin() + j * rows);
      continue;
    }
    const R r = R(1) / sv[j];
    for (int64_t i = 0; i < rows; ++i) ur[j * rows + i] = work[j * rows + i] * r;
  }
  complete_orthonormal(rows, k0, n, ur.data());
  if (!precondition) {
    std::copy(ur.begin(), ur.end(), uc);
    return 0;
  }
  for (int64_t j = 0; j < ucount; ++j) {
    T* u = uc + j * m;
    std::fill(u, u + m, T(0));
    if (j < n) {
      std::copy(ur.begin() + j * n, ur.begin() + (j + 1) * n, u);
    } else {
      u[j] = T(1);
    }
  }
  ormqr(/*adjoint=*/false, m, ucount, n, ac, 1, m, tau.data(), uc, 1, m);
  return 0;
}

template <class T>
int64_t gesvd(int64_t m, int64_t n, const T* a, int64_t lda, real_t<T>* s, T* u, T* vh, bool full) {
  using R = real_t<T>;
  const bool tall = m >= n;
  const int64_t M = tall ? m : n, N = tall ? n : m;  // the tall problem: A, or B = A^H
  // (One of u, vh may be null for an empty factor: m = 0 still has Vh = I.)
  const bool vectors = u != nullptr || vh != nullptr;
  R amax = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) amax = std::max(amax, abs1(a[i * lda + j]));
  // A power of two, so that max |a_ij| is in [1, 2): no over- or underflow in the squares.
  const R scale = unit_scale(amax);
  cached_vector<T> ac(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const T x = a[i * lda + j] * scale;
      if (tall) {
        ac[j * M + i] = x;  // column j of A
      } else {
        ac[i * M + j] = conj_of(x);  // column i of A^H
      }
    }
  const int64_t ucount = vectors ? (full ? M : N) : 0;
  cached_vector<T> uc(static_cast<size_t>(ucount * M)),
      vc(vectors ? static_cast<size_t>(N * N) : 0);
  const int64_t info =
      N <= kJacobiMaxOrder
          ? svd_jacobi_tall(M, N, ac.data(), s, vectors ? uc.data() : nullptr, ucount, vc.data())
          : svd_bidiagonal_tall(M, N, ac.data(), s, vectors ? uc.data() : nullptr, ucount,
                                vc.data());
  for (int64_t j = 0; j < N; ++j) s[j] /= scale;
  if (!vectors || info) return info;
  // The tall problem's U' (columns as rows uc, ucount of them) and V' (vc):
  //   m >= n: U = U', Vh = V'^H;   m < n: A = V' S U'^H, so U = V', Vh = U'^H.
  const T* ucols = tall ? uc.data() : vc.data();
  const int64_t ulen = tall ? M : N, nucols = tall ? ucount : N;
  const T* vcols = tall ? vc.data() : uc.data();
  const int64_t vlen = tall ? N : M, nvrows = tall ? N : ucount;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < nucols; ++j) u[i * nucols + j] = ucols[j * ulen + i];
  for (int64_t j = 0; j < nvrows; ++j)
    for (int64_t i = 0; i < n; ++i) vh[j * n + i] = conj_of(vcols[j * vlen + i]);
  return 0;
}

#define TS_LINALG_INSTANTIATE(T)                                                          \
  template int64_t svd_jacobi_tall<T>(int64_t, int64_t, T*, real_t<T>*, T*, int64_t, T*); \
  template int64_t gesvd<T>(int64_t, int64_t, const T*, int64_t, real_t<T>*, T*, T*, bool);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
