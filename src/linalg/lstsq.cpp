// torch.linalg.lstsq with LAPACK's drivers, per matrix on contiguous copies (qr_kernels.cpp):
//
//   gels   m >= n: A = Q R (geqrf), C = Q^H B (ormqr), X = R^{-1} C(0:n) (trsm); the squared
//          norms of C(n:m) are the residuals. m < n: A^H = Q R, so A = R^H Q^H and the
//          minimum-norm X = Q (R^{-H} B; 0) (LAPACK uses an LQ factorization, the same
//          factors). An exact zero on R's diagonal is the error LAPACK's trtrs reports.
//   gelsy  A P = Q R with column pivoting (geqp3); rank r = the largest order whose condition
//          number, estimated incrementally (LAPACK's laic1 contract: the extreme singular
//          values of [L 0; w^H gamma] from those of L and their vectors), stays below 1 / rcond;
//          C = Q^H B; the minimum-norm solution of R(0:r, :) y = C(0:r): with [R11 R12]^H =
//          Qw Rw (a second QR, in place of LAPACK's tzrzf: the same complete orthogonal
//          decomposition), y = Qw (Rw^{-H} C(0:r); 0); X = P y.
//   gelsd, gelss (SVD): the minimum-norm solution through Tessera's SVD (lstsq_svd below).
// A == 0 gives X = 0 (and, for gels, zero residuals: LAPACK zeroes B), as PyTorch 1.13.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "linalg/common.h"
#include "linalg/kernels.h"
#include "linalg/qr_internal.h"
#include "linalg/svd_internal.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"

namespace tessera::linalg {

using namespace detail;

namespace {

enum class Driver { kGels, kGelsy, kGelsd, kGelss };

Driver parse_driver(std::string_view op, std::optional<std::string_view> driver) {
  if (!driver) return Driver::kGelsy;  // PyTorch's default on the CPU
  if (*driver == "gels") return Driver::kGels;
  if (*driver == "gelsy") return Driver::kGelsy;
  if (*driver == "gelsd") return Driver::kGelsd;
  if (*driver == "gelss") return Driver::kGelss;
  throw RuntimeError(fmt::format(
      "{}(): argument 'driver' expected one of 'gels', 'gelsy', 'gelsd' or 'gelss', but got '{}'",
      op, *driver));
}

template <class T>
real_t<T> max_abs(int64_t count, const T* a) {
  real_t<T> mx = 0;
  for (int64_t i = 0; i < count; ++i) {
    const real_t<T> v = std::abs(a[i]);
    if (!(v <= mx)) mx = v;  // a NaN wins
  }
  return mx;
}

// One step of incremental condition estimation. x (unit) has ||L x|| = sest for the lower
// triangle L; the next triangle is [L 0; w^H gamma] and alpha = w^H x. With xhat = (s x, c),
// ||Lhat xhat||^2 = u^H M u for u = (s, c) and M = diag(sest^2, 0) + conj(b) b^T, b = (alpha,
// gamma): the new estimate is the square root of M's largest (or smallest) eigenvalue and u its
// eigenvector. Computed on M / scale^2 (no overflow), the smaller eigenvalue as det / larger
// (no cancellation; det(M) = sest^2 |gamma|^2).
template <class T>
void ice_step(bool largest, real_t<T> sest, T alpha, T gamma, real_t<T>& sestpr, T& s, T& c) {
  using R = real_t<T>;
  const R scale = std::max({sest, std::abs(alpha), std::abs(gamma)});
  if (scale == R(0)) {
    sestpr = 0, s = T(1), c = T(0);
    return;
  }
  const R e = sest / scale;
  const T a = alpha / scale, g = gamma / scale;
  const R m00 = e * e + abs2(a), m11 = abs2(g);
  const T m01 = conj_of(a) * g;
  const R half_diff = (m00 - m11) / 2;
  const R root = std::hypot(half_diff, std::abs(m01));
  const R lmax = (m00 + m11) / 2 + root;
  const R lambda = largest ? lmax : (lmax > R(0) ? (e * e * m11) / lmax : R(0));
  // A vector orthogonal to the larger row of M - lambda I.
  const T r00 = T(m00 - lambda), r11 = T(m11 - lambda);
  T u0, u1;
  if (abs2(r00) + abs2(m01) >= abs2(conj_of(m01)) + abs2(r11)) {
    u0 = m01, u1 = -r00;
  } else {
    u0 = r11, u1 = -conj_of(m01);
  }
  const R nu = std::sqrt(abs2(u0) + abs2(u1));
  if (nu == R(0)) {  // M = lambda I: every vector is an eigenvector
    u0 = T(1), u1 = T(0);
  } else {
    u0 /= nu, u1 /= nu;
  }
  sestpr = scale * std::sqrt(std::max(lambda, R(0)));
  s = u0, c = u1;
}

// gels on one matrix: a row-major m x n (overwritten), b row-major max(m, n) x nrhs with B in its
// first m rows; on return X in its first n rows (and, for m > n, Q^H B's tail below). Returns 0
// or the first i (1-based) with R(i, i) == 0.
template <class T>
int64_t gels_one(int64_t m, int64_t n, int64_t nrhs, T* a, T* b) {
  const int64_t mx = std::max(m, n);
  if (max_abs(m * n, a) == real_t<T>(0)) {
    std::fill(b, b + mx * nrhs, T(0));
    return 0;
  }
  auto first_zero = [](int64_t k, const T* r, int64_t ld) -> int64_t {
    for (int64_t i = 0; i < k; ++i)
      if (r[i * ld + i] == T(0)) return i + 1;
    return 0;
  };
  if (m >= n) {
    std::vector<T> tau(static_cast<size_t>(n));
    geqrf(m, n, a, n, int64_t{1}, tau.data());
    if (const int64_t info = first_zero(n, a, n)) return info;
    ormqr(true, m, nrhs, n, a, n, int64_t{1}, tau.data(), b, nrhs, int64_t{1});
    trsm_left(n, nrhs, a, n, int64_t{1}, false, false, false, b, nrhs, int64_t{1});
    return 0;
  }
  // A^H = Q R (n x m).
  std::vector<T> w(static_cast<size_t>(n * m)), tau(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) w[j * m + i] = conj_of(a[i * n + j]);
  geqrf(n, m, w.data(), m, int64_t{1}, tau.data());
  if (const int64_t info = first_zero(m, w.data(), m)) return info;
  // R^H z = B (R^H is R seen through swapped strides, conjugated), then X = Q (z; 0).
  trsm_left(m, nrhs, w.data(), int64_t{1}, m, true, true, false, b, nrhs, int64_t{1});
  std::fill(b + m * nrhs, b + n * nrhs, T(0));
  ormqr(false, n, nrhs, m, w.data(), m, int64_t{1}, tau.data(), b, nrhs, int64_t{1});
  return 0;
}

// gelsy on one matrix: a column-major m x n (overwritten), b as for gels_one. Returns the rank.
template <class T>
int64_t gelsy_one(int64_t m, int64_t n, int64_t nrhs, T* a, T* b, real_t<T> rcond) {
  using R = real_t<T>;
  const int64_t mx = std::max(m, n), mn = std::min(m, n);
  if (mn == 0 || max_abs(m * n, a) == R(0)) {
    std::fill(b, b + mx * nrhs, T(0));
    return 0;
  }
  std::vector<int64_t> jpvt(static_cast<size_t>(n));
  std::vector<T> tau(static_cast<size_t>(mn));
  geqp3(m, n, a, m, jpvt.data(), tau.data());
  auto Rm = [&](int64_t i, int64_t j) { return a[j * m + i]; };
  // Rank: grow the leading triangle while smax / smin stays below 1 / rcond.
  std::vector<T> xmin(static_cast<size_t>(mn)), xmax(static_cast<size_t>(mn));
  R smax = std::abs(Rm(0, 0)), smin = smax;
  int64_t rank = smax == R(0) ? 0 : 1;
  xmin[0] = xmax[0] = T(1);
  while (rank > 0 && rank < mn) {
    const int64_t i = rank;
    T amin(0), amax(0);
    for (int64_t r = 0; r < rank; ++r) {
      amin += conj_of(Rm(r, i)) * xmin[r];
      amax += conj_of(Rm(r, i)) * xmax[r];
    }
    const T gamma = conj_of(Rm(i, i));
    R sminpr, smaxpr;
    T s1, c1, s2, c2;
    ice_step(false, smin, amin, gamma, sminpr, s1, c1);
    ice_step(true, smax, amax, gamma, smaxpr, s2, c2);
    if (!(smaxpr * rcond <= sminpr)) break;
    for (int64_t r = 0; r < rank; ++r) xmin[r] *= s1, xmax[r] *= s2;
    xmin[rank] = c1, xmax[rank] = c2;
    smin = sminpr, smax = smaxpr;
    ++rank;
  }
  if (rank == 0) {
    std::fill(b, b + mx * nrhs, T(0));
    return 0;
  }
  ormqr(true, m, nrhs, mn, a, int64_t{1}, m, tau.data(), b, nrhs, int64_t{1});
  if (rank == n) {
    trsm_left(n, nrhs, a, int64_t{1}, m, false, false, false, b, nrhs, int64_t{1});
  } else {
    // [R11 R12]^H (n x rank, row-major) = Qw Rw; y = Qw (Rw^{-H} C(0:rank); 0).
    std::vector<T> w(static_cast<size_t>(n * rank), T(0)), tw(static_cast<size_t>(rank));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t r = 0; r <= std::min(j, rank - 1); ++r) w[j * rank + r] = conj_of(Rm(r, j));
    geqrf(n, rank, w.data(), rank, int64_t{1}, tw.data());
    trsm_left(rank, nrhs, w.data(), int64_t{1}, rank, true, true, false, b, nrhs, int64_t{1});
    std::fill(b + rank * nrhs, b + n * nrhs, T(0));
    ormqr(false, n, nrhs, rank, w.data(), rank, int64_t{1}, tw.data(), b, nrhs, int64_t{1});
  }
  // X = P y: row j of y is row jpvt[j] of X.
  std::vector<T> y(b, b + n * nrhs);
  for (int64_t j = 0; j < n; ++j)
    std::copy(y.begin() + j * nrhs, y.begin() + (j + 1) * nrhs, b + jpvt[j] * nrhs);
  return rank;
}

// gelsd / gelss: X = V diag(1 / s_i) U^H B over the singular values s_i > rcond * s_max (the
// others count as zero, as LAPACK's drivers do); rank is their number. Residuals
// ||A X - B||^2 per column when m > n and every matrix has full rank, as PyTorch reports them.
// (LAPACK's gelsd reaches the same minimum-norm solution by divide and conquer; Tessera uses
// its one SVD for both names.)
std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq_svd(const Tensor& A, const Tensor& B, double rcond,
                                                     std::string_view op) {
  const int64_t m = A.size(-2), n = A.size(-1);
  const ScalarType real_type = to_real_type(A.dtype());
  if (std::min(m, n) == 0) {
    DimVector xs = batch_shape(A);
    xs.push_back(n);
    xs.push_back(B.size(-1));
    return {zeros(xs, A.dtype()), empty({0}, real_type), zeros(batch_shape(A), kInt64),
            empty(concat(batch_shape(A), {0}), real_type)};
  }
  auto [U, S, Vh] = detail::svd_work(A, /*full_matrices=*/false, /*compute_uv=*/true, op);
  const Tensor keep = S.gt(S.amax({-1}, true).mul(rcond));
  const Tensor sinv = where(keep, ones_like(S).div(S), 0.0).to(A.dtype());
  const Tensor X = adjoint_of(Vh).matmul(sinv.unsqueeze(-1).mul(adjoint_of(U).matmul(B)));
  const Tensor rank = keep.sum({-1}, false, kInt64);
  Tensor residuals = empty({0}, real_type);
  if (m > n && rank.eq(n).all().item<bool>())
    residuals = square(A.matmul(X).sub(B).abs()).sum({-2}, false).to(real_type);
  return {X, residuals, rank, S};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B,
                                                 std::optional<double> rcond,
                                                 std::optional<std::string_view> driver) {
  constexpr std::string_view op = "linalg.lstsq";
  check_no_grad(op, {A, B});
  check_matrix_input(op, A, "A");
  TS_CHECK(B.defined(), ValueError, "{}(): argument 'B' expected a tensor, but got undefined", op);
  check_same_dtype(op, A, "A", B, "B");
  const Driver drv = parse_driver(op, driver);
  TS_CHECK(B.dim() == A.dim() || B.dim() == A.dim() - 1, RuntimeError,
           "{}(): argument 'B' expected {} dimensions (a batch of matrices) or {} (a batch of "
           "vectors), as A has {}, but got {}",
           op, A.dim(), A.dim() - 1, A.dim(), B.dim());
  const bool vector_case = B.dim() == A.dim() - 1;
  const Tensor Bm = vector_case ? B.unsqueeze(-1) : B;
  const int64_t m = A.size(-2), n = A.size(-1), nrhs = Bm.size(-1);
  TS_CHECK(Bm.size(-2) == m, RuntimeError,
           "{}(): incompatible shapes of A and B: A has {} rows but B has {} (B's dim {})", op, m,
           Bm.size(-2), vector_case ? -1 : -2);
  const DimVector batch = broadcast_batch(op, batch_shape(A), batch_shape(Bm));
  const ScalarType real_type = to_real_type(A.dtype());
  const double eps = real_type == kFloat32 ? std::numeric_limits<float>::epsilon()
                                           : std::numeric_limits<double>::epsilon();
  const double rc = rcond.value_or(eps * double(std::max(m, n)));
  if (drv == Driver::kGelsd || drv == Driver::kGelss) {
    auto [X, residuals, rank, S] =
        lstsq_svd(A.expand(concat(batch, {m, n})), Bm.expand(concat(batch, {m, nrhs})), rc, op);
    // As PyTorch 1.13, residuals keep their [*, 1] for a vector B.
    return {vector_case ? X.squeeze(-1) : X, residuals, rank, S};
  }
  const int64_t mx = std::max(m, n), count = numel_of(batch);

  // gels works on row-major copies of A, gelsy on column-major ones (A^T row-major).
  const Tensor Aw = drv == Driver::kGels ? contiguous_matrices(A, batch)
                                         : contiguous_matrices(A.transpose(-2, -1), batch);
  Tensor X = zeros(concat(batch, {mx, nrhs}), A.dtype());
  if (X.numel() > 0 && m > 0) X.narrow(-2, 0, m).copy_(Bm.expand(concat(batch, {m, nrhs})));
  Tensor rank = drv == Driver::kGels ? empty({0}, kInt64) : zeros(batch, kInt64);
  Tensor info = zeros(batch, kInt32);
  const bool with_residuals = m > n && drv == Driver::kGels;
  Tensor residuals =
      with_residuals ? zeros(concat(batch, {nrhs}), real_type) : empty({0}, real_type);
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    using R = real_t<T>;
    T* ab = static_cast<T*>(Aw.data_ptr());
    T* xb = static_cast<T*>(X.data_ptr());
    int32_t* ib = info.data_ptr<int32_t>();
    const int64_t order = static_cast<int64_t>(std::cbrt(double(m) * double(n) * double(mx)));
    for_each_matrix(count, order, [&](int64_t b) {
      T* a = ab + b * m * n;
      T* x = xb + b * mx * nrhs;
      if (drv == Driver::kGels) {
        ib[b] = static_cast<int32_t>(gels_one(m, n, nrhs, a, x));
      } else {
        rank.data_ptr<int64_t>()[b] = gelsy_one(m, n, nrhs, a, x, static_cast<R>(rc));
      }
    });
    if (with_residuals) {
      R* rb = residuals.data_ptr<R>();
      for (int64_t b = 0; b < count; ++b)
        for (int64_t i = n; i < m; ++i)
          for (int64_t j = 0; j < nrhs; ++j) rb[b * nrhs + j] += abs2(xb[(b * mx + i) * nrhs + j]);
    }
  });
  const int64_t bad = first_failure(info);
  if (bad >= 0)
    throw LinAlgError(fmt::format(
        "{}(): {}The least squares solution could not be computed because the input matrix does "
        "not have full rank (error code: {}).",
        op, batch_prefix(static_cast<int64_t>(batch.size()), bad), info.data_ptr<int32_t>()[bad]));
  Tensor solution = X.narrow(-2, 0, n).contiguous();
  if (vector_case) solution = solution.squeeze(-1);
  return {solution, residuals, rank, empty({0}, real_type)};
}

}  // namespace tessera::linalg
