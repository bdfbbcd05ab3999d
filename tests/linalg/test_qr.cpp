// Householder QR and least squares: the kernels against their references and LAPACK
// (OpenBLAS's ?geqrf, ?orgqr/?ungqr, ?gels, ?gelsy on column-major copies), the ops' residuals
// ||A - Q R||, ||Q^H Q - I|| per dtype on random, ill-conditioned, rank-deficient, diagonal,
// identity and zero matrices of every shape, batched and strided, and every error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "linalg/qr_internal.h"
#include "linalg/small_batch.h"
#include "linalg_test_util.h"
#include "test_support.h"

extern "C" {
void sgeqrf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
void dgeqrf_(const int*, const int*, double*, const int*, double*, double*, const int*, int*);
void cgeqrf_(const int*, const int*, std::complex<float>*, const int*, std::complex<float>*,
             std::complex<float>*, const int*, int*);
void zgeqrf_(const int*, const int*, std::complex<double>*, const int*, std::complex<double>*,
             std::complex<double>*, const int*, int*);
void sorgqr_(const int*, const int*, const int*, float*, const int*, const float*, float*,
             const int*, int*);
void dorgqr_(const int*, const int*, const int*, double*, const int*, const double*, double*,
             const int*, int*);
void cungqr_(const int*, const int*, const int*, std::complex<float>*, const int*,
             const std::complex<float>*, std::complex<float>*, const int*, int*);
void zungqr_(const int*, const int*, const int*, std::complex<double>*, const int*,
             const std::complex<double>*, std::complex<double>*, const int*, int*);
void sgeqp3_(const int*, const int*, float*, const int*, int*, float*, float*, const int*, int*);
void dgeqp3_(const int*, const int*, double*, const int*, int*, double*, double*, const int*, int*);
void cgeqp3_(const int*, const int*, std::complex<float>*, const int*, int*, std::complex<float>*,
             std::complex<float>*, const int*, float*, int*);
void zgeqp3_(const int*, const int*, std::complex<double>*, const int*, int*, std::complex<double>*,
             std::complex<double>*, const int*, double*, int*);
void sgels_(const char*, const int*, const int*, const int*, float*, const int*, float*, const int*,
            float*, const int*, int*);
void dgels_(const char*, const int*, const int*, const int*, double*, const int*, double*,
            const int*, double*, const int*, int*);
void cgels_(const char*, const int*, const int*, const int*, std::complex<float>*, const int*,
            std::complex<float>*, const int*, std::complex<float>*, const int*, int*);
void zgels_(const char*, const int*, const int*, const int*, std::complex<double>*, const int*,
            std::complex<double>*, const int*, std::complex<double>*, const int*, int*);
void sgelsy_(const int*, const int*, const int*, float*, const int*, float*, const int*, int*,
             const float*, int*, float*, const int*, int*);
void dgelsy_(const int*, const int*, const int*, double*, const int*, double*, const int*, int*,
             const double*, int*, double*, const int*, int*);
void cgelsy_(const int*, const int*, const int*, std::complex<float>*, const int*,
             std::complex<float>*, const int*, int*, const float*, int*, std::complex<float>*,
             const int*, float*, int*);
void zgelsy_(const int*, const int*, const int*, std::complex<double>*, const int*,
             std::complex<double>*, const int*, int*, const double*, int*, std::complex<double>*,
             const int*, double*, int*);
}

namespace tessera::linalg_test {
namespace {

namespace la = tessera::linalg;
namespace ld = tessera::linalg::detail;
using tessera::testing::expect_error_mentions;

const ScalarType kDtypes[] = {kFloat32, kFloat64, kComplex64, kComplex128};

// ---- LAPACK on column-major buffers
// ---------------------------------------------------------------

template <class T>
void lapack_geqrf(int m, int n, T* a_in, T* tau) {
  int info = 0, lwork = std::max(1, n) * 64;
  const int lda = std::max(1, m);
  LapackCopy<T> copy(a_in, m, n);
  T* a = copy.data();
  std::vector<T> work(static_cast<size_t>(lwork));
  if constexpr (std::is_same_v<T, float>) sgeqrf_(&m, &n, a, &lda, tau, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, double>)
    dgeqrf_(&m, &n, a, &lda, tau, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, complex64>)
    cgeqrf_(&m, &n, a, &lda, tau, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, complex128>)
    zgeqrf_(&m, &n, a, &lda, tau, work.data(), &lwork, &info);
  ASSERT_EQ(info, 0);
}

template <class T>
void lapack_orgqr(int m, int n, int k, T* a_in, const T* tau) {
  int info = 0, lwork = std::max(1, n) * 64;
  const int lda = std::max(1, m);
  LapackCopy<T> copy(a_in, m, n);
  T* a = copy.data();
  std::vector<T> work(static_cast<size_t>(lwork));
  if constexpr (std::is_same_v<T, float>)
    sorgqr_(&m, &n, &k, a, &lda, tau, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, double>)
    dorgqr_(&m, &n, &k, a, &lda, tau, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, complex64>)
    cungqr_(&m, &n, &k, a, &lda, tau, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, complex128>)
    zungqr_(&m, &n, &k, a, &lda, tau, work.data(), &lwork, &info);
  ASSERT_EQ(info, 0);
}

// gels / gelsy on A (m x n) and B (max(m, n) x nrhs), column-major; returns info (gels) or the
// rank (gelsy).
template <class T>
int lapack_lstsq(bool gelsy, int m, int n, int nrhs, T* a_in, T* b_in, double rcond) {
  using R = real_t<T>;
  int info = 0, rank = 0, lwork = (std::max(m, n) + nrhs) * 64 + 64;
  const int lda = std::max(1, m), ldb = std::max({1, m, n});
  LapackCopy<T> a_copy(a_in, m, n), b_copy(b_in, std::max(m, n), nrhs);
  T *a = a_copy.data(), *b = b_copy.data();
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<R> rwork(static_cast<size_t>(2 * n + 1));
  std::vector<int> jpvt(static_cast<size_t>(n), 0);
  const R rc = static_cast<R>(rcond);
  if (!gelsy) {
    if constexpr (std::is_same_v<T, float>)
      sgels_("N", &m, &n, &nrhs, a, &lda, b, &ldb, work.data(), &lwork, &info);
    if constexpr (std::is_same_v<T, double>)
      dgels_("N", &m, &n, &nrhs, a, &lda, b, &ldb, work.data(), &lwork, &info);
    if constexpr (std::is_same_v<T, complex64>)
      cgels_("N", &m, &n, &nrhs, a, &lda, b, &ldb, work.data(), &lwork, &info);
    if constexpr (std::is_same_v<T, complex128>)
      zgels_("N", &m, &n, &nrhs, a, &lda, b, &ldb, work.data(), &lwork, &info);
    return info;
  }
  if constexpr (std::is_same_v<T, float>)
    sgelsy_(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt.data(), &rc, &rank, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, double>)
    dgelsy_(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt.data(), &rc, &rank, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, complex64>)
    cgelsy_(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt.data(), &rc, &rank, work.data(), &lwork,
            rwork.data(), &info);
  if constexpr (std::is_same_v<T, complex128>)
    zgelsy_(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt.data(), &rc, &rank, work.data(), &lwork,
            rwork.data(), &info);
  EXPECT_EQ(info, 0);
  return rank;
}

// Row-major buffer of a 2-D tensor and back.
template <class T>
std::vector<T> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}
template <class T>
Tensor from_values(const std::vector<T>& v, int64_t rows, int64_t cols) {
  Tensor t = empty({rows, cols}, scalar_type_of<T>);
  std::copy(v.begin(), v.end(), t.data_ptr<T>());
  return t;
}
// ||a - b||_F / max(||b||_F, 1) of two tensors of one shape.
double rel_diff(const Tensor& a, const Tensor& b) {
  const LMat x = to_lmat(a.reshape({-1, 1})), y = to_lmat(b.reshape({-1, 1}));
  return double(frob_diff(x, y) / std::max<long double>(frob(y), 1));
}

// ---- test matrices of any shape
// --------------------------------------------------------------------

enum class Shape { kRandom, kIllConditioned, kRankDeficient, kDiagonal, kIdentity, kZero };
const Shape kShapes[] = {Shape::kRandom,   Shape::kIllConditioned, Shape::kRankDeficient,
                         Shape::kDiagonal, Shape::kIdentity,       Shape::kZero};
const char* shape_name(Shape s) {
  switch (s) {
    case Shape::kRandom:
      return "random";
    case Shape::kIllConditioned:
      return "ill-conditioned";
    case Shape::kRankDeficient:
      return "rank-deficient";
    case Shape::kDiagonal:
      return "diagonal";
    case Shape::kIdentity:
      return "identity";
    case Shape::kZero:
      return "zero";
  }
  return "?";
}

// One m x n matrix: ill-conditioned U(:, 0:k) diag(s) V(:, 0:k)^H with s from 1 to 1/cond (1e6
// single, 1e12 double); rank-deficient of rank k / 2 (a product of Gaussian factors).
Tensor make_rect(int64_t m, int64_t n, ScalarType dt, Shape s) {
  const ScalarType wide = is_complex(dt) ? kComplex128 : kFloat64;
  const int64_t k = std::min(m, n);
  Tensor a;
  switch (s) {
    case Shape::kRandom:
      a = gaussian({m, n}, wide);
      break;
    case Shape::kIllConditioned: {
      const double cond = to_real_type(dt) == kFloat32 ? 1e6 : 1e12;
      std::vector<double> sv(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i)
        sv[i] = k > 1 ? std::pow(cond, -double(i) / double(k - 1)) : 1;
      const Tensor u = random_unitary(m, dt).narrow(1, 0, k);
      const Tensor v = random_unitary(n, dt).narrow(1, 0, k);
      a = u.mul(tensor<double>(sv).to(wide).unsqueeze(0)).mm(v.transpose(0, 1).conj());
      break;
    }
    case Shape::kRankDeficient: {
      const int64_t r = k / 2;
      a = gaussian({m, r}, wide).mm(gaussian({r, n}, wide));
      break;
    }
    case Shape::kDiagonal:
      a = eye(m, n, wide).mul(randn({1, n}, kFloat64).to(wide));
      break;
    case Shape::kIdentity:
      a = eye(m, n, wide);
      break;
    case Shape::kZero:
      a = zeros({m, n}, wide);
      break;
  }
  return a.to(dt);
}

Tensor make_batch(DimVector batch, int64_t m, int64_t n, ScalarType dt, Shape s) {
  return batch_from(batch, m, n, dt, [&](int64_t) { return make_rect(m, n, dt, s); });
}

Tensor flat3(const Tensor& t) {
  int64_t batch = 1;
  for (int64_t d = 0; d < t.dim() - 2; ++d) batch *= t.size(d);
  return t.reshape({batch, t.size(-2), t.size(-1)});
}

// Worst ||A - Q R|| / (max(m, n) eps ||A||) and ||Q^H Q - I|| / (m eps) over a batch.
std::pair<double, double> qr_residuals(const Tensor& A, const Tensor& Q, const Tensor& R) {
  const Tensor Af = flat3(A), Qf = flat3(Q), Rf = flat3(R);
  const double eps = eps_of(A.dtype());
  const int64_t m = A.size(-2), n = A.size(-1);
  double fact = 0, orth = 0;
  for (int64_t b = 0; b < Af.size(0); ++b) {
    const LMat a = to_lmat(Af[b]), q = to_lmat(Qf[b]), r = to_lmat(Rf[b]);
    const long double na = std::max<long double>(frob(a), std::numeric_limits<double>::min());
    fact = std::max(fact, double(frob_diff(a, matmul(q, r)) / na) / (std::max(m, n) * eps));
    LMat qq = matmul(adjoint(q), q);
    for (int64_t i = 0; i < qq.rows; ++i) qq(i, i) -= 1;
    orth = std::max(orth, double(frob(qq)) / (std::max<int64_t>(m, 1) * eps));
  }
  return {fact, orth};
}

const std::pair<int64_t, int64_t> kSizes[] = {{0, 0},    {0, 3},    {3, 0},   {1, 1},   {5, 3},
                                              {3, 5},    {17, 17},  {40, 33}, {33, 40}, {64, 64},
                                              {130, 70}, {70, 130}, {97, 97}};

// ---- kernels
// ----------------------------------------------------------------------------------------

template <class T>
void check_kernels_vs_lapack(int64_t m, int64_t n) {
  const ScalarType dt = scalar_type_of<T>;
  const int64_t k = std::min(m, n);
  const double tol = 50.0 * double(std::max<int64_t>(std::max(m, n), 1)) * eps_of(dt);
  const Tensor A = make_rect(m, n, dt, Shape::kRandom);
  // Tessera's blocked kernel (row-major), its reference, and LAPACK (column-major).
  std::vector<T> a = values<T>(A), a_ref = a, a_lap = transposed(a, m, n);
  std::vector<T> tau(static_cast<size_t>(k)), tau_ref = tau, tau_lap = tau;
  ld::geqrf(m, n, a.data(), n, int64_t{1}, tau.data());
  ld::geqrf_reference(m, n, a_ref.data(), n, int64_t{1}, tau_ref.data());
  lapack_geqrf(int(m), int(n), a_lap.data(), tau_lap.data());
  const Tensor got = from_values(a, m, n);
  EXPECT_LE(rel_diff(got, from_values(a_ref, m, n)), tol);
  EXPECT_LE(rel_diff(got, from_values(transposed(a_lap, n, m), m, n)), tol);
  if (k > 0) {
    EXPECT_LE(rel_diff(from_values(tau, 1, k), from_values(tau_lap, 1, k)), tol);
    EXPECT_LE(rel_diff(from_values(tau, 1, k), from_values(tau_ref, 1, k)), tol);
  }
  // The same factorization through column-major strides is bitwise the same.
  std::vector<T> a_cm = transposed(values<T>(A), m, n), tau_cm(static_cast<size_t>(k));
  ld::geqrf(m, n, a_cm.data(), int64_t{1}, m, tau_cm.data());
  EXPECT_TRUE(equal(from_values(transposed(a_cm, n, m), m, n), got)) << dtype_name(dt);
  // Q from k, and from fewer, reflectors (m >= n only), against LAPACK's orgqr and the
  // reference.
  if (m < n) return;
  for (int64_t kk : {k, k / 2}) {
    std::vector<T> q = a, q_ref = a, q_lap = transposed(a, m, n);
    ld::orgqr(m, n, kk, q.data(), n, int64_t{1}, tau.data());
    ld::orgqr_reference(m, n, kk, q_ref.data(), n, int64_t{1}, tau.data());
    lapack_orgqr(int(m), int(n), int(kk), q_lap.data(), tau.data());
    const Tensor qt = from_values(q, m, n);
    EXPECT_LE(rel_diff(qt, from_values(q_ref, m, n)), tol) << "k=" << kk;
    EXPECT_LE(rel_diff(qt, from_values(transposed(q_lap, n, m), m, n)), tol) << "k=" << kk;
    // ormqr: Q^H Q(:, 0:n) = I(:, 0:n) for the k-reflector Q, and Q I = Q.
    if (kk == k && k > 0) {
      std::vector<T> c = q;
      ld::ormqr(true, m, n, k, a.data(), n, int64_t{1}, tau.data(), c.data(), n, int64_t{1});
      EXPECT_LE(rel_diff(from_values(c, m, n), eye(m, n, dt)), tol);
      ld::ormqr(false, m, n, k, a.data(), n, int64_t{1}, tau.data(), c.data(), n, int64_t{1});
      EXPECT_LE(rel_diff(from_values(c, m, n), qt), tol);
    }
  }
}

TEST(LinalgQrKernels, GeqrfOrgqrOrmqrMatchReferenceAndLapack) {
  manual_seed(51);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{0, 0},
                      {1, 1},
                      {1, 4},
                      {4, 1},
                      {5, 3},
                      {3, 5},
                      {31, 31},
                      {32, 32},
                      {33, 33},
                      {64, 40},
                      {40, 64},
                      {100, 100},
                      {130, 70},
                      {70, 130},
                      {200, 97},
                      {257, 257},
                      {600, 530}}) {
    SCOPED_TRACE(fmt::format("{}x{}", m, n));
    check_kernels_vs_lapack<float>(m, n);
    check_kernels_vs_lapack<double>(m, n);
    check_kernels_vs_lapack<complex64>(m, n);
    check_kernels_vs_lapack<complex128>(m, n);
  }
}

// LAPACK's geqp3 on the column-major m x n a (every column free); jpvt 0-based on return.
template <class T>
void lapack_geqp3(int m, int n, T* a_in, int64_t* jpvt_out, T* tau) {
  int info = 0, lwork = 3 * n + 1 + 64 * (n + 1);
  const int lda = std::max(1, m);
  LapackCopy<T> copy(a_in, m, n);
  T* a = copy.data();
  std::vector<int> jpvt(static_cast<size_t>(n), 0);
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<real_t<T>> rwork(static_cast<size_t>(2 * n));
  if constexpr (std::is_same_v<T, float>)
    sgeqp3_(&m, &n, a, &lda, jpvt.data(), tau, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, double>)
    dgeqp3_(&m, &n, a, &lda, jpvt.data(), tau, work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, complex64>)
    cgeqp3_(&m, &n, a, &lda, jpvt.data(), tau, work.data(), &lwork, rwork.data(), &info);
  if constexpr (std::is_same_v<T, complex128>)
    zgeqp3_(&m, &n, a, &lda, jpvt.data(), tau, work.data(), &lwork, rwork.data(), &info);
  ASSERT_EQ(info, 0);
  for (int j = 0; j < n; ++j) jpvt_out[j] = jpvt[j] - 1;
}

// R (k x n, upper trapezoid) of a column-major pivoted QR, as a row-major tensor.
template <class T>
Tensor r_factor(const std::vector<T>& a, int64_t m, int64_t n) {
  const int64_t k = std::min(m, n);
  std::vector<T> r(static_cast<size_t>(k * n), T(0));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i; j < n; ++j) r[i * n + j] = a[j * m + i];
  return from_values(r, k, n);
}

// Blocked geqp3 (32 columns a block, the last 128 unblocked) against its unblocked reference and
// LAPACK's geqp3: A P = Q R to rounding on every kind of matrix, the same |R(i, i)| (what gelsy's
// rank decision reads), and on random matrices (well-separated column norms) the same pivots
// and R. The rank-deficient matrices make norms cancel, so blocks end early to recompute them.
template <class T>
void check_pivoted_qr(int64_t m, int64_t n, Shape s) {
  const ScalarType dt = scalar_type_of<T>;
  SCOPED_TRACE(fmt::format("{} {}x{} {}", dt, m, n, shape_name(s)));
  const int64_t k = std::min(m, n);
  const double tol = 50.0 * double(std::max(m, n)) * eps_of(dt);
  const Tensor A = make_rect(m, n, dt, s);
  std::vector<T> a = transposed(values<T>(A), m, n), a_ref = a, a_lap = a;
  std::vector<T> tau(static_cast<size_t>(k)), tau_ref = tau, tau_lap = tau;
  std::vector<int64_t> p(static_cast<size_t>(n)), p_ref = p, p_lap = p;
  ld::geqp3(m, n, a.data(), m, p.data(), tau.data());
  ld::geqp3_unblocked(m, n, a_ref.data(), m, p_ref.data(), tau_ref.data());
  lapack_geqp3(int(m), int(n), a_lap.data(), p_lap.data(), tau_lap.data());
  // A P = Q R.
  const Tensor R = r_factor(a, m, n);
  std::vector<T> q(a.begin(), a.begin() + m * k);
  ld::orgqr(m, k, k, q.data(), int64_t{1}, m, tau.data());
  Tensor AP = empty({m, n}, dt);
  for (int64_t j = 0; j < n; ++j) AP.select(1, j).copy_(A.select(1, p[j]));
  const ScalarType wide = is_complex(dt) ? kComplex128 : kFloat64;
  const Tensor QR = from_values(transposed(q, k, m), m, k).to(wide).mm(R.to(wide));
  const double norm_a = std::max(double(frob(to_lmat(A))), 1e-300);
  EXPECT_LE(rel_diff(AP.to(wide), QR) * std::max(double(frob(to_lmat(QR))), 1.0) / norm_a, tol);
  // |R(i, i)| of all three.
  auto diag = [&](const std::vector<T>& f) {
    std::vector<double> d(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) d[i] = std::abs(f[i * m + i]);
    return d;
  };
  const std::vector<double> d = diag(a), d_ref = diag(a_ref), d_lap = diag(a_lap);
  for (int64_t i = 0; i < k; ++i) {
    EXPECT_LE(std::abs(d[i] - d_ref[i]), tol * norm_a) << "R(" << i << ", " << i << ")";
    EXPECT_LE(std::abs(d[i] - d_lap[i]), tol * norm_a) << "R(" << i << ", " << i << ")";
  }
  if (s != Shape::kRandom) return;
  EXPECT_EQ(p, p_ref);
  EXPECT_EQ(p, p_lap);
  EXPECT_LE(rel_diff(R, r_factor(a_ref, m, n)), tol);
  EXPECT_LE(rel_diff(R, r_factor(a_lap, m, n)), tol);
}

// check.operator()<T>(m, n, shape) for every dtype, size and kind of matrix.
template <class Check>
void for_each_case(std::initializer_list<std::pair<int64_t, int64_t>> sizes, Check check) {
  for (auto [m, n] : sizes)
    for (Shape s : kShapes) {
      check.template operator()<float>(m, n, s);
      check.template operator()<double>(m, n, s);
      check.template operator()<complex64>(m, n, s);
      check.template operator()<complex128>(m, n, s);
    }
}

TEST(LinalgQrKernels, PivotedQrBlockedMatchesUnblockedAndLapack) {
  manual_seed(58);
  for_each_case({{300, 200}, {200, 300}, {260, 260}},
                []<class T>(int64_t m, int64_t n, Shape s) { check_pivoted_qr<T>(m, n, s); });
}

// Each step's pass over the rest of the matrix splits its columns over the pool from ~512 rows
// on; the factorization must not change by a bit with the thread count.
TEST(LinalgQrKernels, PivotedQrGivesTheSameBitsOnAnyThreadCount) {
  manual_seed(59);
  const int saved = get_num_threads();
  auto run = [&]<class T>(int64_t m, int64_t n) {
    SCOPED_TRACE(fmt::format("{} {}x{}", scalar_type_of<T>, m, n));
    const std::vector<T> a0 = transposed(values<T>(gaussian({m, n}, scalar_type_of<T>)), m, n);
    std::vector<std::vector<T>> a;
    std::vector<std::vector<int64_t>> p;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      a.push_back(a0);
      p.emplace_back(static_cast<size_t>(n));
      std::vector<T> tau(static_cast<size_t>(std::min(m, n)));
      ld::geqp3(m, n, a.back().data(), m, p.back().data(), tau.data());
    }
    set_num_threads(saved);
    EXPECT_TRUE(a[1] == a[0] && a[2] == a[0]);
    EXPECT_TRUE(p[1] == p[0] && p[2] == p[0]);
  };
  run.operator()<float>(700, 600);
  run.operator()<complex64>(600, 560);
}

TEST(LinalgQrKernels, LarfgConventionAndTinyColumns) {
  // beta real and of sign opposite to Re(alpha); H^H (alpha; x) = (beta; 0).
  for (double scale : {1.0, 1e-300, 1e300}) {
    complex128 alpha(3 * scale, 4 * scale);
    std::vector<complex128> x = {complex128(0, 12 * scale)};
    const complex128 tau = ld::larfg(int64_t{1}, alpha, x.data(), int64_t{1});
    EXPECT_EQ(alpha.imag(), 0.0);
    EXPECT_NEAR(alpha.real() / scale, -13.0, 1e-13);
    // Apply H^H = I - conj(tau) v v^H to (3, 4i, 12i) scaled: expect (beta, 0).
    const complex128 a0(3 * scale, 4 * scale), a1(0, 12 * scale);
    const complex128 w = (a0 + std::conj(x[0]) * a1) * std::conj(tau);
    EXPECT_NEAR(std::abs((a0 - w) - alpha) / scale, 0.0, 1e-13);
    EXPECT_NEAR(std::abs(a1 - x[0] * w) / scale, 0.0, 1e-13);
  }
  // A column that is already reduced: tau = 0 (H = I), as LAPACK.
  double alpha = -2;
  std::vector<double> x = {0, 0};
  EXPECT_EQ(ld::larfg(int64_t{2}, alpha, x.data(), int64_t{1}), 0.0);
  EXPECT_EQ(alpha, -2.0);
  // A real column of ~1e-300, whose squares all underflow: still reduced (its norm was taken
  // as zero once, so the column counted as reduced and tau came back 0).
  for (double scale : {1e-300, 1e-310}) {
    double tiny_alpha = 3 * scale;
    std::vector<double> tiny = {4 * scale, 12 * scale};
    EXPECT_NE(ld::larfg(int64_t{2}, tiny_alpha, tiny.data(), int64_t{1}), 0.0) << scale;
    EXPECT_NEAR(tiny_alpha / scale, -13.0, scale < 1e-305 ? 1e-8 : 1e-13) << scale;
  }
}

// Householder QR and the least squares solvers on it scale with their input: a float64 or
// complex128 matrix of entries ~1e-300 (or ~1e300) gives scale * R and the same solution.
TEST(LinalgQr, TinyAndHugeMatricesFactorAsTheirScaledSelves) {
  manual_seed(60);
  for (ScalarType dt : {kFloat64, kComplex128}) {
    const Tensor A = make_rect(70, 50, dt, Shape::kRandom), B = gaussian({70, 2}, dt);
    const Tensor R = std::get<1>(la::qr(A));
    const Tensor X = std::get<0>(la::lstsq(A, B, std::nullopt, "gels"));
    const Tensor Xy = std::get<0>(la::lstsq(A, B));
    for (double scale : {1e-300, 1e300}) {
      SCOPED_TRACE(fmt::format("{} scale {}", dt, scale));
      const Tensor As = A.mul(scale), Bs = B.mul(scale);
      EXPECT_LE(rel_diff(std::get<1>(la::qr(As)).div(scale), R), 1e-13);
      EXPECT_LE(rel_diff(std::get<0>(la::lstsq(As, Bs, std::nullopt, "gels")), X), 1e-13);
      auto [Xs, res, rank, sv] = la::lstsq(As, Bs);
      EXPECT_LE(rel_diff(Xs, Xy), 1e-13);
      EXPECT_EQ(rank.item<int64_t>(), 50);
    }
  }
}

// ---- batched small kernels (small/lane_qr.h)
// ---------------------------------------------------------------------------------------------

// Whether ||a - b||_F <= tol ||b||_F + slack for two same-size buffers.
template <class T>
::testing::AssertionResult buffers_close(const std::vector<T>& a, const std::vector<T>& b,
                                         double tol, double slack = 0) {
  long double d = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += std::norm(std::complex<long double>(a[i]) - std::complex<long double>(b[i]));
    nb += std::norm(std::complex<long double>(b[i]));
  }
  d = std::sqrt(d), nb = std::sqrt(nb);
  if (d <= tol * nb + slack) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "||a - b|| = " << double(d) << ", ||b|| = " << double(nb)
                                       << ", relative " << double(d / nb) << " > " << tol;
}

// 37 m x n matrices (not a multiple of any lane count) of every kind, three scaled far from 1
// (subnormal, tiny, and large enough that unscaled squares overflow), through one ISA's lane
// geqrf and orgqr, each matrix against LAPACK: the factor (R and the reflectors) and tau within
// tol of geqrf's where they are well determined (random, diagonal, identity and zero matrices:
// an ill-conditioned or rank-deficient matrix's trailing R is rounding noise); Q from the lane
// reflectors within tol of orgqr's on the same reflectors, for all k of them into k and into m
// columns and for k / 2; ||A - Q R|| and ||Q^T Q - I|| small for every matrix. The subnormal
// matrix's R is subnormal too, so it is compared with an absolute slack of a few of the
// smallest subnormals per entry and its ||A - Q R|| is not checked.
template <class T>
void check_small_qr(const cpu::SmallLinalgKernels& table, int64_t m, int64_t n) {
  const ScalarType dt = scalar_type_of<T>;
  const bool dbl = std::is_same_v<T, double>;
  constexpr int64_t kCount = 37, kSubnormal = 6;
  const int subnormal_exp = dbl ? 1040 : 140;
  const int64_t k = std::min(m, n), mn = m * n;
  const double tol = 50.0 * double(std::max(m, n)) * eps_of(dt);
  std::vector<Tensor> mats;
  for (int64_t b = 0; b < kCount; ++b) {
    Tensor a = make_rect(m, n, dt, kShapes[b % 6]);
    if (b == kSubnormal) a = a.mul(std::ldexp(1.0, -subnormal_exp));
    if (b == 12) a = a.mul(std::ldexp(1.0, dbl ? -600 : -70));
    if (b == 18) a = a.mul(std::ldexp(1.0, dbl ? 1000 : 120));
    mats.push_back(a);
  }
  const Tensor A = stack(mats);
  const std::vector<T> in = values<T>(A.reshape({kCount * m, n}));
  std::vector<T> fact(in.size(), T(-7)), tau(static_cast<size_t>(kCount * k), T(-7));
  ld::small_geqrf(m, n, kCount, in.data(), fact.data(), tau.data(), table);
  for (int64_t b = 0; b < kCount; ++b) {
    SCOPED_TRACE(fmt::format("matrix {} ({})", b, shape_name(kShapes[b % 6])));
    const std::vector<T> a(in.begin() + b * mn, in.begin() + (b + 1) * mn);
    const std::vector<T> got(fact.begin() + b * mn, fact.begin() + (b + 1) * mn);
    const std::vector<T> tg(tau.begin() + b * k, tau.begin() + (b + 1) * k);
    // The subnormal matrix goes to LAPACK scaled into the normal range (exact) and its R is
    // scaled back: LAPACK's own updates would round every intermediate column to the subnormal
    // grid, where the lane kernel scales first.
    const int up = b == kSubnormal ? subnormal_exp : 0;
    std::vector<T> lap = transposed(a, m, n), tl(static_cast<size_t>(k));
    for (T& x : lap) x = std::ldexp(x, up);
    lapack_geqrf(int(m), int(n), lap.data(), tl.data());
    lap = transposed(lap, n, m);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = i; j < n; ++j) lap[i * n + j] = std::ldexp(lap[i * n + j], -up);
    const Shape shape = kShapes[b % 6];
    const double slack = b == kSubnormal ? 16.0 * double(std::max(m, n) * std::max(m, n)) *
                                               double(std::numeric_limits<T>::denorm_min())
                                         : 0.0;
    if (shape != Shape::kIllConditioned && shape != Shape::kRankDeficient) {
      EXPECT_TRUE(buffers_close(got, lap, tol, slack));
      EXPECT_TRUE(buffers_close(tg, tl, tol));
    }
  }
  // Q from the lane factors: k reflectors into n columns (m >= n) or into m, and k / 2.
  for (auto [nq, kk] : {std::pair<int64_t, int64_t>{k, k}, {m, k}, {m, k / 2}}) {
    std::vector<T> q(static_cast<size_t>(kCount * m * nq), T(-7));
    std::vector<T> tk(static_cast<size_t>(kCount * kk));
    for (int64_t b = 0; b < kCount; ++b)
      std::copy(tau.begin() + b * k, tau.begin() + b * k + kk, tk.begin() + b * kk);
    ld::small_orgqr(m, n, nq, kk, kCount, fact.data(), tk.data(), q.data(), table);
    if (kk == k) {
      // The one-pass qr gives the same Q bits, and R = the factor's upper rows (0 .. nq).
      std::vector<T> q1(q.size(), T(-7)), r1(static_cast<size_t>(kCount * nq * n), T(-7));
      std::vector<T> r2 = r1;
      ld::small_qr(m, n, nq, nq, kCount, in.data(), q1.data(), r1.data(), table);
      ld::small_qr(m, n, nq, nq, kCount, in.data(), static_cast<T*>(nullptr), r2.data(), table);
      std::vector<T> r_want(r1.size());
      for (int64_t b = 0; b < kCount; ++b)
        for (int64_t i = 0; i < nq; ++i)
          for (int64_t j = 0; j < n; ++j)
            r_want[(b * nq + i) * n + j] = j >= i ? fact[b * mn + i * n + j] : T(0);
      EXPECT_TRUE(equal(from_values(q1, kCount, m * nq), from_values(q, kCount, m * nq)));
      EXPECT_TRUE(equal(from_values(r1, kCount, nq * n), from_values(r_want, kCount, nq * n)));
      EXPECT_TRUE(equal(from_values(r2, kCount, nq * n), from_values(r_want, kCount, nq * n)));
    }
    {
      for (int64_t b = 0; b < kCount; ++b) {
        SCOPED_TRACE(fmt::format("matrix {}, Q {}x{} from {} reflectors", b, m, nq, kk));
        std::vector<T> ql(static_cast<size_t>(m * nq), T(0));  // column-major, reflectors first
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < std::min(n, nq); ++j) ql[j * m + i] = fact[b * mn + i * n + j];
        lapack_orgqr(int(m), int(nq), int(kk), ql.data(), tk.data() + b * kk);
        const std::vector<T> qg(q.begin() + b * m * nq, q.begin() + (b + 1) * m * nq);
        EXPECT_TRUE(buffers_close(qg, transposed(ql, nq, m), tol));
        if (kk != k || nq != m) continue;
        // ||A - Q R|| and ||Q^T Q - I|| with the complete Q.
        std::vector<T> r(fact.begin() + b * mn, fact.begin() + (b + 1) * mn);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < std::min(i, n); ++j) r[i * n + j] = T(0);
        auto [fr, orth] = qr_residuals(mats[b], from_values(qg, m, m), from_values(r, m, n));
        if (b != kSubnormal) {
          EXPECT_LE(fr, 10.0);
        }
        EXPECT_LE(orth, 10.0);
      }
    }
  }
}

TEST(LinalgQrSmallKernels, MatchLapackOnEveryIsa) {
  manual_seed(55);
  for (const auto& [isa, table] : TS_RUNNABLE_TABLES(small_linalg_kernels)) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1},
                        {2, 2},
                        {3, 3},
                        {4, 4},
                        {5, 5},
                        {7, 7},
                        {8, 8},
                        {9, 9},
                        {16, 16},
                        {17, 17},
                        {31, 31},
                        {32, 32},
                        {5, 3},
                        {3, 5},
                        {32, 7},
                        {7, 32},
                        {20, 32},
                        {32, 1}}) {
      SCOPED_TRACE(fmt::format("{} {}x{}", isa, m, n));
      check_small_qr<float>(*table, m, n);
      check_small_qr<double>(*table, m, n);
    }
  }
}

// ---- qr
// ---------------------------------------------------------------------------------------------

TEST(LinalgQr, ResidualsEveryShapeKindAndDtype) {
  manual_seed(52);
  for (ScalarType dt : kDtypes) {
    for (auto [m, n] : kSizes) {
      for (Shape s : kShapes) {
        SCOPED_TRACE(fmt::format("{} {}x{} {}", dt, m, n, shape_name(s)));
        const Tensor A = make_batch({2}, m, n, dt, s);
        const int64_t k = std::min(m, n);
        for (const char* mode : {"reduced", "complete"}) {
          auto [Q, R] = la::qr(A, mode);
          const bool complete = std::string(mode) == "complete";
          ASSERT_EQ(Q.sizes(), (DimVector{2, m, complete ? m : k}));
          ASSERT_EQ(R.sizes(), (DimVector{2, complete ? m : k, n}));
          EXPECT_TRUE(Q.is_contiguous() && R.is_contiguous());
          EXPECT_TRUE(R.tril(-1).eq(0).all().item<bool>());
          auto [fact, orth] = qr_residuals(A, Q, R);
          EXPECT_LE(fact, 10.0);
          EXPECT_LE(orth, 10.0);
          // R's diagonal is real.
          if (is_complex(dt) && R.numel() > 0) {
            EXPECT_TRUE(R.diagonal(0, -2, -1).imag().eq(0).all().item<bool>());
          }
        }
      }
    }
  }
}

TEST(LinalgQr, ModesBatchesAndStrides) {
  manual_seed(53);
  for (ScalarType dt : kDtypes) {
    const Tensor A = make_batch({2, 3}, 45, 38, dt, Shape::kRandom);
    auto [Q, R] = la::qr(A);
    auto [Q0, R0] = la::qr(A, "r");
    EXPECT_EQ(Q0.sizes(), (DimVector{0}));
    EXPECT_TRUE(equal(R0, R));
    // Every matrix of the batch is factored alone.
    EXPECT_TRUE(equal(std::get<1>(la::qr(A[1][2])), R[1][2]));
    // Wide: complete and reduced agree.
    const Tensor W = A.transpose(-2, -1);  // 38 x 45, a transposed view
    auto [Qw, Rw] = la::qr(W);
    auto [Qc, Rc] = la::qr(W, "complete");
    EXPECT_TRUE(equal(Qw, Qc) && equal(Rw, Rc));
    // Strided views give the result of their contiguous copies.
    EXPECT_TRUE(equal(Qw, std::get<0>(la::qr(W.contiguous()))));
    const Tensor sl = A.slice(-1, 0, 38, 2).slice(0, 1, 2);  // every other column
    EXPECT_TRUE(equal(std::get<1>(la::qr(sl)), std::get<1>(la::qr(sl.contiguous()))));
    const Tensor ex = A[0][1].expand({4, 45, 38});
    EXPECT_TRUE(equal(std::get<0>(la::qr(ex))[3], Q[0][1]));
    // Every thread count gives the same bits (the GEMM engine never splits k).
    const int saved = get_num_threads();
    set_num_threads(1);
    auto [Q1, R1] = la::qr(A);
    const Tensor big = make_batch({}, 300, 260, dt, Shape::kRandom);
    auto [Qb1, Rb1] = la::qr(big);
    set_num_threads(2);
    auto [Qb2, Rb2] = la::qr(big);
    set_num_threads(saved);
    EXPECT_TRUE(equal(Q1, Q) && equal(R1, R));
    EXPECT_TRUE(equal(Qb1, Qb2) && equal(Rb1, Rb2));
    // Empty batch.
    auto [Qe, Re] = la::qr(empty({0, 5, 3}, dt), "complete");
    EXPECT_EQ(Qe.sizes(), (DimVector{0, 5, 5}));
    EXPECT_EQ(Re.sizes(), (DimVector{0, 5, 3}));
    // A with no columns: complete Q is the identity.
    EXPECT_TRUE(equal(std::get<0>(la::qr(empty({4, 0}, dt), "complete")), eye(4, 4, dt)));
  }
}

// A block reflector applied to 256 or more columns splits them over the pool (for_column_shares):
// geqrf's first panels update 298 columns of a 400 x 330 matrix, householder_product's last
// ones as many, and gels applies Q^H to 300 right-hand sides (ormqr). Two and three threads give
// the bits of one.
TEST(LinalgQr, BlockReflectorsOnManyColumnsGiveTheSameBitsOnAnyThreadCount) {
  manual_seed(55);
  const int saved = get_num_threads();
  for (ScalarType dt : kDtypes) {
    SCOPED_TRACE(fmt::format("{}", dt));
    const Tensor A = make_batch({}, 400, 330, dt, Shape::kRandom);
    const Tensor B = make_batch({}, 400, 300, dt, Shape::kRandom);
    std::vector<Tensor> h, q, x;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      auto [a, tau] = la::geqrf(A);
      h.push_back(a);
      q.push_back(la::householder_product(a, tau));
      x.push_back(std::get<0>(la::lstsq(A, B, std::nullopt, "gels")));
    }
    set_num_threads(saved);
    for (int i : {1, 2}) {
      EXPECT_TRUE(equal(h[i], h[0]));
      EXPECT_TRUE(equal(q[i], q[0]));
      EXPECT_TRUE(equal(x[i], x[0]));
    }
    // And the factorization is still one: Q R = A.
    const Tensor r = h[0].narrow(0, 0, 330).triu();
    const ScalarType wide = is_complex(dt) ? kComplex128 : kFloat64;
    const double diff = q[0].to(wide).matmul(r.to(wide)).sub(A.to(wide)).abs().max().item<double>();
    EXPECT_LE(diff, 400 * eps_of(dt) * A.abs().max().item<double>() * 10);
  }
}

TEST(LinalgQr, GeqrfAndHouseholderProduct) {
  manual_seed(54);
  for (ScalarType dt : kDtypes) {
    const Tensor A = make_batch({3}, 50, 36, dt, Shape::kRandom);
    auto [a, tau] = la::geqrf(A);
    ASSERT_EQ(a.sizes(), A.sizes());
    ASSERT_EQ(tau.sizes(), (DimVector{3, 36}));
    auto [Q, R] = la::qr(A);
    EXPECT_TRUE(equal(a.triu().narrow(-2, 0, 36), R));
    EXPECT_TRUE(equal(la::householder_product(a, tau), Q));
    // Fewer reflectors than columns: Q's trailing columns are H_0 ... H_{k-1} e_j.
    const Tensor tk = tau.narrow(-1, 0, 10);
    const Tensor Pk = la::householder_product(a, tk);
    auto [fact, orth] = qr_residuals(Pk, Pk, eye(36, 36, dt).expand({3, 36, 36}).contiguous());
    EXPECT_LE(orth, 10.0);
    (void)fact;
    const Tensor Q10 = la::householder_product(a.narrow(-1, 0, 10), tk);
    EXPECT_LE(rel_diff(Pk.narrow(-1, 0, 10), Q10), 100 * 50 * eps_of(dt));
    // A transposed (column-major) input gives the same.
    const Tensor at = a.transpose(-2, -1).contiguous().transpose(-2, -1);
    EXPECT_TRUE(equal(la::householder_product(at, tau), Q));
  }
}

TEST(LinalgQr, Errors) {
  expect_error_mentions([] { la::qr(ones({3})); },
                        {"linalg.qr", "argument 'A'", "at least 2 dimensions", "1 dims"});
  expect_error_mentions(
      [] {
        la::qr(ones({3, 3}, kInt32));
      },
      {"linalg.qr", "argument 'A'", "floating point or complex", "int32"});
  expect_error_mentions(
      [] {
        la::qr(ones({3, 3}), "full");
      },
      {"linalg.qr", "argument 'mode'", "'reduced', 'complete' or 'r'", "'full'"});
  expect_error_mentions([] { la::geqrf(ones({3})); }, {"geqrf", "at least 2 dimensions"});
  expect_error_mentions([] { la::geqrf(ones({3, 3}, kInt64)); }, {"geqrf", "int64"});
  const Tensor A = ones({5, 3}, kFloat64);
  expect_error_mentions([&] { la::householder_product(A, ones({4}, kFloat64)); },
                        {"linalg.householder_product", "argument 'tau'", "at most 3", "got 4"});
  expect_error_mentions(
      [&] { la::householder_product(A.t(), ones({2}, kFloat64)); },
      {"linalg.householder_product", "argument 'A'", "at least as many rows as columns", "3 by 5"});
  expect_error_mentions([&] { la::householder_product(A, ones({2}, kFloat32)); },
                        {"linalg.householder_product", "same dtype", "float64", "float32"});
  expect_error_mentions(
      [&] {
        la::householder_product(A, ones({2, 2}, kFloat64));
      },
      {"linalg.householder_product", "argument 'tau'", "1 dimensions", "got 2"});
  expect_error_mentions(
      [&] {
        la::householder_product(A.expand({2, 5, 3}), ones({3, 2}, kFloat64));
      },
      {"linalg.householder_product", "batch dimensions [2]", "got [3]"});
  expect_error_mentions([&] { la::householder_product(ones({5}), ones({1})); },
                        {"linalg.householder_product", "at least 2 dimensions"});
}

// ---- lstsq
// ------------------------------------------------------------------------------------------

// LAPACK's solution (n x nrhs) and rank (gelsy) or info (gels) for one matrix.
template <class T>
std::pair<Tensor, int> lapack_solution(bool gelsy, const Tensor& A, const Tensor& B, double rcond) {
  const int64_t m = A.size(0), n = A.size(1), nrhs = B.size(1), mx = std::max(m, n);
  std::vector<T> a = transposed(values<T>(A), m, n);
  Tensor Bp = zeros({mx, nrhs}, A.dtype());
  Bp.narrow(0, 0, m).copy_(B);
  std::vector<T> b = transposed(values<T>(Bp), mx, nrhs);
  const int r = lapack_lstsq(gelsy, int(m), int(n), int(nrhs), a.data(), b.data(), rcond);
  return {from_values(transposed(b, nrhs, mx), mx, nrhs).narrow(0, 0, n).contiguous(), r};
}

template <class T>
void check_lstsq_vs_lapack(int64_t m, int64_t n, Shape s) {
  const ScalarType dt = scalar_type_of<T>;
  SCOPED_TRACE(fmt::format("{} {}x{} {}", dt, m, n, shape_name(s)));
  const Tensor A = make_batch({2}, m, n, dt, s);
  // Consistent right-hand sides for ill-conditioned A (the error then grows like cond, not
  // cond^2), Gaussian ones otherwise.
  const Tensor B =
      s == Shape::kIllConditioned ? A.matmul(gaussian({2, n, 3}, dt)) : gaussian({2, m, 3}, dt);
  const double eps = eps_of(dt), rcond = eps * double(std::max(m, n));
  // Two backward-stable solvers differ by up to cond(A) eps in X.
  const double cond = s != Shape::kIllConditioned ? 1.0 : to_real_type(dt) == kFloat32 ? 1e6 : 1e12;
  const double tol = 100.0 * double(std::max(m, n)) * eps;
  for (bool gelsy : {false, true}) {
    if (!gelsy && (s == Shape::kRankDeficient || s == Shape::kIllConditioned)) continue;
    auto [X, res, rank, sv] = la::lstsq(A, B, std::nullopt, gelsy ? "gelsy" : "gels");
    ASSERT_EQ(X.sizes(), (DimVector{2, n, 3}));
    EXPECT_EQ(sv.sizes(), (DimVector{0}));
    for (int64_t b = 0; b < 2; ++b) {
      auto [want, r] = lapack_solution<T>(gelsy, A[b], B[b], rcond);
      EXPECT_LE(rel_diff(X[b], want), tol * cond) << (gelsy ? "gelsy" : "gels");
      if (s == Shape::kIllConditioned) {
        // Consistent systems: the residual is at the rounding level (backward stability).
        const double scale = double(frob(to_lmat(A[b])) * frob(to_lmat(X[b])));
        EXPECT_LE(rel_diff(A[b].matmul(X[b]), B[b]) * double(frob(to_lmat(B[b]))) /
                      std::max(scale, 1e-300),
                  tol);
      }
      if (gelsy) {
        const int64_t got = rank[b].item<int64_t>();
        if (s != Shape::kIllConditioned) {
          EXPECT_EQ(got, r);
        } else {
          // A graded spectrum puts singular values near rcond * sigma_max, where two
          // rank-revealing QRs may decide either way: LAPACK's rank here has changed between
          // runs (its rounding follows OpenBLAS's threading; 79 once, where ours said 78). Any
          // rank within one of LAPACK's whose cut lies within 10x of the threshold is right.
          EXPECT_LE(std::abs(got - r), 1) << "LAPACK's gelsy rank " << r;
          const Tensor sv = la::svdvals(A[b].to(is_complex(dt) ? kComplex128 : kFloat64));
          const double* v = sv.data_ptr<double>();
          const double cut = rcond * v[0];
          ASSERT_GE(got, 1);
          EXPECT_GE(v[got - 1], cut / 10) << "rank " << got << " keeps a too small value";
          if (got < sv.numel()) {
            EXPECT_LE(v[got], cut * 10) << "rank " << got << " drops a too large value";
          }
        }
      }
    }
    if (gelsy) {
      EXPECT_EQ(res.sizes(), (DimVector{0}));
      EXPECT_EQ(rank.dtype(), kInt64);
    } else {
      EXPECT_EQ(rank.sizes(), (DimVector{0}));
      if (m > n) {
        // residuals = ||A x_j - b_j||^2.
        const Tensor r = A.matmul(X).sub(B);
        // A == 0: LAPACK's gels zeroes B, so PyTorch reports zero residuals.
        const Tensor want = s == Shape::kZero ? zeros({2, 3}, dt) : r.mul(r.conj()).real().sum(-2);
        ASSERT_EQ(res.sizes(), (DimVector{2, 3}));
        EXPECT_LE(rel_diff(res, want.to(res.dtype())), tol * 10);
      } else {
        EXPECT_EQ(res.sizes(), (DimVector{0}));
      }
    }
  }
}

TEST(LinalgLstsq, GelsAndGelsyMatchLapack) {
  manual_seed(55);
  for_each_case({{1, 1}, {6, 4}, {4, 6}, {20, 20}, {70, 33}, {33, 70}, {130, 100}, {100, 130}},
                []<class T>(int64_t m, int64_t n, Shape s) { check_lstsq_vs_lapack<T>(m, n, s); });
}

TEST(LinalgLstsq, RankAndRcond) {
  manual_seed(56);
  for (ScalarType dt : kDtypes) {
    // Rank 4 of 10 columns; the minimum-norm solution is orthogonal to A's null space.
    const Tensor A =
        make_rect(30, 4, dt, Shape::kRandom).matmul(make_rect(4, 10, dt, Shape::kRandom));
    const Tensor B = gaussian({30, 2}, dt);
    auto [X, res, rank, sv] = la::lstsq(A, B);
    EXPECT_EQ(rank.item<int64_t>(), 4);
    EXPECT_EQ(rank.dim(), 0);
    // Normal equations A^H (A X - B) = 0, and X in the row space of A (min norm): X = A^H Y.
    const Tensor Ah = A.transpose(0, 1).conj();
    const double eps = eps_of(dt);
    EXPECT_LE(rel_diff(Ah.matmul(A.matmul(X).sub(B)), zeros({10, 2}, dt)), 1e3 * eps * 30 * 30);
    auto [Y, r2, k2, s2] = la::lstsq(Ah, X, std::nullopt, "gelsy");
    EXPECT_LE(rel_diff(Ah.matmul(Y), X), 1e3 * eps * 30);
    // A large rcond cuts the rank; rcond = 0 keeps every nonzero direction.
    EXPECT_EQ(std::get<2>(la::lstsq(A, B, 0.9)).item<int64_t>(), 1);
    const Tensor D = make_rect(6, 6, dt, Shape::kIdentity)
                         .mul(tensor<double>({1, 1, 1, 1e-3, 1e-3, 1e-3}).to(dt).unsqueeze(0));
    EXPECT_EQ(std::get<2>(la::lstsq(D, B.narrow(0, 0, 6), 1e-2)).item<int64_t>(), 3);
    EXPECT_EQ(std::get<2>(la::lstsq(D, B.narrow(0, 0, 6), 0.0)).item<int64_t>(), 6);
    // Zero A: rank 0 and X = 0; gels: zero residuals (LAPACK zeroes B), as PyTorch.
    auto [Xz, rz, kz, sz] = la::lstsq(zeros({5, 3}, dt), B.narrow(0, 0, 5));
    EXPECT_TRUE(Xz.eq(0).all().item<bool>());
    EXPECT_EQ(kz.item<int64_t>(), 0);
    auto [Xg, rg, kg, sg] = la::lstsq(zeros({5, 3}, dt), B.narrow(0, 0, 5), std::nullopt, "gels");
    EXPECT_TRUE(Xg.eq(0).all().item<bool>() && rg.eq(0).all().item<bool>());
    EXPECT_EQ(rg.sizes(), (DimVector{2}));
  }
}

TEST(LinalgLstsq, VectorsBroadcastStridesAndEmpty) {
  manual_seed(57);
  for (ScalarType dt : kDtypes) {
    const Tensor A = make_batch({4}, 9, 5, dt, Shape::kRandom);
    const Tensor b = gaussian({4, 9}, dt);
    auto [x, res, rank, sv] = la::lstsq(A, b, std::nullopt, "gels");
    ASSERT_EQ(x.sizes(), (DimVector{4, 5}));
    ASSERT_EQ(res.sizes(), (DimVector{4, 1}));  // not squeezed, as PyTorch
    auto [xm, resm, rm, svm] = la::lstsq(A, b.unsqueeze(-1), std::nullopt, "gels");
    EXPECT_TRUE(equal(x, xm.squeeze(-1)) && equal(res, resm));
    // Batch dims broadcast: [4] with [1].
    const Tensor B1 = gaussian({1, 9, 2}, dt);
    auto [xb, rb, kb, sb] = la::lstsq(A, B1);
    ASSERT_EQ(xb.sizes(), (DimVector{4, 5, 2}));
    ASSERT_EQ(kb.sizes(), (DimVector{4}));
    EXPECT_TRUE(equal(xb[2], std::get<0>(la::lstsq(A[2], B1[0]))));
    // Transposed and expanded inputs give the result of contiguous copies.
    const Tensor At = A.transpose(-2, -1).contiguous().transpose(-2, -1);
    EXPECT_TRUE(equal(std::get<0>(la::lstsq(At, B1)), xb));
    // Empty shapes (PyTorch 1.13's results).
    auto [x0, r0, k0, s0] = la::lstsq(empty({0, 3}, dt), empty({0, 2}, dt));
    EXPECT_EQ(x0.sizes(), (DimVector{3, 2}));
    EXPECT_TRUE(x0.eq(0).all().item<bool>());
    EXPECT_EQ(k0.item<int64_t>(), 0);
    auto [x1, r1, k1, s1] = la::lstsq(empty({4, 0}, dt), ones({4, 2}, dt), std::nullopt, "gels");
    EXPECT_EQ(x1.sizes(), (DimVector{0, 2}));
    EXPECT_EQ(r1.sizes(), (DimVector{2}));
    auto [x2, r2, k2, s2] =
        la::lstsq(empty({0, 4, 3}, dt), empty({0, 4, 2}, dt), std::nullopt, "gels");
    EXPECT_EQ(x2.sizes(), (DimVector{0, 3, 2}));
    EXPECT_EQ(r2.sizes(), (DimVector{0, 2}));
    auto [x3, r3, k3, s3] = la::lstsq(ones({2, 4, 3}, dt), empty({2, 4, 0}, dt));
    EXPECT_EQ(x3.sizes(), (DimVector{2, 3, 0}));
  }
}

TEST(LinalgLstsq, SvdDriversGiveTheMinimumNormSolutionAndTheRank) {
  for (ScalarType dt : {kFloat32, kFloat64, kComplex64, kComplex128}) {
    const double tol = to_real_type(dt) == kFloat32 ? 1e-4 : 1e-10;
    // Rank 2 of 3: the third column repeats the second.
    Tensor A = gaussian({2, 6, 3}, dt);
    A.select(-1, 2).copy_(A.select(-1, 1));  // sibling columns: no overlap
    const Tensor B = gaussian({2, 6, 2}, dt);
    for (const char* drv : {"gelsd", "gelss"}) {
      auto [X, res, rank, S] = la::lstsq(A, B, std::nullopt, drv);
      EXPECT_EQ(rank.sizes(), (DimVector{2}));
      EXPECT_TRUE(rank.eq(2).all().item<bool>()) << drv;
      EXPECT_EQ(res.numel(), 0) << "no residuals for rank-deficient A";
      EXPECT_EQ(S.sizes(), (DimVector{2, 3}));
      // The minimum-norm solution is pinv(A) B, and it puts equal weight on the twin columns.
      const Tensor want = la::pinv(A).matmul(B);
      EXPECT_LT((X - want).abs().amax().item<double>(),
                tol * (1 + want.abs().amax().item<double>()))
          << drv << " " << dtype_name(dt);
      EXPECT_LT((X.select(-2, 1) - X.select(-2, 2)).abs().amax().item<double>(), tol);
    }
    // Full rank and tall: residuals ||AX - B||^2 per column, as gels reports them.
    const Tensor F = gaussian({7, 3}, dt), C = gaussian({7, 2}, dt);
    auto [xg, rg, kg, sg] = la::lstsq(F, C, std::nullopt, "gels");
    auto [xd, rd, kd, sd] = la::lstsq(F, C, std::nullopt, "gelsd");
    EXPECT_EQ(kd.item<int64_t>(), 3);
    EXPECT_LT((xd - xg).abs().amax().item<double>(), tol * 10);
    EXPECT_LT((rd - rg).abs().amax().item<double>(),
              tol * 10 * (1 + rg.abs().amax().item<double>()));
    // rcond decides the rank: with rcond above s_min / s_max the smallest value is dropped.
    const Tensor svals = std::get<3>(la::lstsq(F, C, std::nullopt, "gelss"));
    const double ratio = svals[2].item<double>() / svals[0].item<double>();
    EXPECT_EQ(std::get<2>(la::lstsq(F, C, ratio * 1.01, "gelss")).item<int64_t>(), 2);
    // A vector B.
    auto [xv, rv, kv, sv] = la::lstsq(F, C.select(-1, 0), std::nullopt, "gelsd");
    EXPECT_EQ(xv.sizes(), (DimVector{3}));
    EXPECT_EQ(rv.sizes(), (DimVector{1}));  // not squeezed, as PyTorch 1.13
  }
}

TEST(LinalgLstsq, Errors) {
  const Tensor A = ones({5, 3}, kFloat64), B = ones({5, 2}, kFloat64);
  expect_error_mentions(
      [&] { la::lstsq(A, B, std::nullopt, "gelsx"); },
      {"linalg.lstsq", "argument 'driver'", "'gels', 'gelsy', 'gelsd' or 'gelss'", "'gelsx'"});
  expect_error_mentions([&] { la::lstsq(A, B.to(kFloat32)); },
                        {"linalg.lstsq", "same dtype", "float64", "float32"});
  expect_error_mentions([&] { la::lstsq(A.select(1, 0), B.select(1, 0)); },
                        {"linalg.lstsq", "argument 'A'", "at least 2 dimensions"});
  expect_error_mentions(
      [&] {
        la::lstsq(ones({3, 3}, kInt32), ones({3, 3}, kInt32));
      },
      {"linalg.lstsq", "floating point or complex", "int32"});
  expect_error_mentions([&] { la::lstsq(A, B.narrow(0, 0, 4)); },
                        {"linalg.lstsq", "A has 5 rows but B has 4"});
  expect_error_mentions(
      [&] {
        la::lstsq(A, B.expand({4, 5, 2}));
      },
      {"linalg.lstsq", "argument 'B'", "2 dimensions", "got 3"});
  expect_error_mentions(
      [&] {
        la::lstsq(A.expand({2, 5, 3}), B.expand({3, 5, 2}));
      },
      {"linalg.lstsq", "[2]", "[3]"});
  // gels on a matrix with an exactly zero column after the first: R(2, 2) == 0.
  Tensor S = zeros({2, 5, 3}, kFloat64);
  S.select(-1, 0).fill_(1);
  S[0].fill_(1);
  S[0].diagonal(0, -2, -1).fill_(2);
  expect_error_mentions(
      [&] { la::lstsq(S, B.unsqueeze(0), std::nullopt, "gels"); },
      {"linalg.lstsq", "(Batch element 1)", "does not have full rank", "error code: 2"});
  try {
    la::lstsq(S[1], B, std::nullopt, "gels");
    ADD_FAILURE() << "no error";
  } catch (const la::LinAlgError& e) {
    EXPECT_EQ(std::string(e.what()).find("Batch"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera::linalg_test
