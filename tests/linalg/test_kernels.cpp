// The linalg kernels on raw row-major buffers: the blocked/recursive fast paths against the plain
// references (src/linalg/reference.cpp) and against LAPACK (OpenBLAS), for every dtype and for
// sizes on both sides of the blocking thresholds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "linalg/leaf/leaf_kernels.h"
#include "linalg/small_batch.h"
#include "linalg_test_util.h"
#include "test_support.h"

namespace tessera::linalg_test {
namespace {

using namespace linalg::detail;

template <class T>
class LinalgKernels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { openblas_set_num_threads(1); }
};
using KernelTypes = ::testing::Types<float, double, complex64, complex128>;
TYPED_TEST_SUITE(LinalgKernels, KernelTypes);

template <class T>
std::vector<T> values_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}

template <class T>
Tensor tensor_of(const std::vector<T>& v, int64_t rows, int64_t cols) {
  Tensor t = empty({rows, cols}, scalar_type_of<T>);
  std::copy(v.begin(), v.end(), t.data_ptr<T>());
  return t;
}

// Lower triangle of a row-major n x n buffer as a tensor (upper zeroed).
template <class T>
Tensor lower_of(const std::vector<T>& v, int64_t n) {
  return tensor_of(v, n, n).tril();
}

// L = U^H for the upper triangle U of row-major v (what potrf_upper leaves), as a tensor.
template <class T>
Tensor lower_from_upper(const std::vector<T>& v, int64_t n) {
  std::vector<T> t = transposed(v, n, n);
  for (T& x : t) x = conj_of(x);
  return lower_of(t, n);
}

// ||A - L L^H||_F / (n eps ||A||_F).
template <class T>
double cholesky_residual(const Tensor& A, const Tensor& L) {
  const int64_t n = A.size(0);
  if (n == 0) return 0;
  const LMat a = to_lmat(A), l = to_lmat(L);
  return double(frob_diff(a, matmul(l, adjoint(l))) /
                (n * eps_of(scalar_type_of<T>) * std::max<long double>(frob(a), 1e-300L)));
}

constexpr int64_t kSizes[] = {0, 1, 2, 3, 17, 64, 97, 200, 300};

TYPED_TEST(LinalgKernels, CholeskyMatchesReferenceAndLapack) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(11);
  for (int64_t n : kSizes) {
    for (Kind kind : {Kind::kRandom, Kind::kIllConditioned, Kind::kDiagonal, Kind::kIdentity}) {
      SCOPED_TRACE(fmt::format("n={} {}", n, kind_name(kind)));
      const Tensor A = make_matrix({}, n, dt, kind, /*hpd=*/true);
      const std::vector<T> a = values_of<T>(A);
      std::vector<T> fast = a, ref = a, lap = transposed(a, n, n);
      ASSERT_EQ(potrf_upper(n, fast.data(), std::max<int64_t>(n, 1)), 0);
      ASSERT_EQ(potrf_lower_reference(n, ref.data(), std::max<int64_t>(n, 1)), 0);
      ASSERT_EQ(lapack_potrf_lower_colmajor(int(n), lap.data()), 0);
      lap = transposed(lap, n, n);
      const Tensor Lf = lower_from_upper(fast, n), Lr = lower_of(ref, n), Ll = lower_of(lap, n);
      EXPECT_LE(cholesky_residual<T>(A, Lf), 2.0);
      EXPECT_LE(cholesky_residual<T>(A, Lr), 2.0);
      EXPECT_LE(cholesky_residual<T>(A, Ll), 2.0);
      if (kind != Kind::kIllConditioned && n > 0) {
        // Well-conditioned: the factors themselves agree (Cholesky is forward stable there).
        const double scale = n * eps_of(dt) * std::max(1.0, double(frob(to_lmat(Ll))));
        EXPECT_LE(double(frob_diff(to_lmat(Lf), to_lmat(Ll))), 10 * scale);
        EXPECT_LE(double(frob_diff(to_lmat(Lf), to_lmat(Lr))), 10 * scale);
      }
    }
  }
}

TYPED_TEST(LinalgKernels, CholeskyReportsTheFailingMinorAsLapack) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(12);
  for (int64_t n : {1, 3, 17, 200, 300}) {
    for (int64_t bad : {int64_t{0}, n / 2, n - 1}) {
      SCOPED_TRACE(fmt::format("n={} bad={}", n, bad));
      Tensor A = make_matrix({}, n, dt, Kind::kRandom, true);
      A.select(0, bad).select(0, bad).fill_(-1.0 * n);  // leading minor bad + 1 fails
      const std::vector<T> a = values_of<T>(A);
      std::vector<T> fast = a, ref = a, lap = transposed(a, n, n);
      const int64_t want = lapack_potrf_lower_colmajor(int(n), lap.data());
      EXPECT_EQ(want, bad + 1);
      EXPECT_EQ(potrf_upper(n, fast.data(), n), want);
      EXPECT_EQ(potrf_lower_reference(n, ref.data(), n), want);
    }
  }
  // NaN on the diagonal is not positive-definite (LAPACK's potrf2 rule).
  std::vector<T> nan_diag = {T(1), T(0), T(0), T(std::numeric_limits<real_t<T>>::quiet_NaN())};
  EXPECT_EQ(potrf_upper(2, nan_diag.data(), 2), 2);
}

// ||P A - L U||_F / (min(m, n) eps ||A||_F), P from LAPACK-style pivots.
template <class T>
double lu_residual(const Tensor& A, const std::vector<T>& lu, const std::vector<int32_t>& piv) {
  const int64_t m = A.size(0), n = A.size(1), k = std::min(m, n);
  if (k == 0) return 0;
  const Tensor LU = tensor_of(lu, m, n);
  Tensor L = LU.narrow(1, 0, k).tril(-1);
  L.diagonal(0, 0, 1).fill_(1);
  const Tensor U = LU.narrow(0, 0, k).triu();
  LMat pa = to_lmat(A);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) std::swap(pa(i, j), pa(piv[i] - 1, j));
  return double(frob_diff(pa, matmul(to_lmat(L), to_lmat(U))) /
                (k * eps_of(scalar_type_of<T>) * std::max<long double>(frob(pa), 1e-300L)));
}

TYPED_TEST(LinalgKernels, LuMatchesReferenceAndLapack) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  const bool dbl = to_real_type(dt) == kFloat64;
  manual_seed(13);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {0, 0},     {1, 1}, {2, 2}, {3, 3},    {17, 17},  {64, 64},   {97, 97},  {200, 200},
      {300, 300}, {5, 3}, {3, 5}, {150, 40}, {40, 150}, {260, 140}, {140, 260}};
  for (auto [m, n] : shapes) {
    for (Kind kind : {Kind::kRandom, Kind::kIllConditioned, Kind::kDiagonal, Kind::kIdentity}) {
      if (m != n && kind != Kind::kRandom) continue;
      SCOPED_TRACE(fmt::format("{}x{} {}", m, n, kind_name(kind)));
      const Tensor A = m == n ? make_matrix({}, n, dt, kind) : gaussian({m, n}, dt);
      const std::vector<T> a = values_of<T>(A);
      const int64_t k = std::min(m, n);
      std::vector<T> fast = a, ref = a, lap = transposed(a, m, n);
      std::vector<int32_t> pf(k), pr(k);
      std::vector<int> pl(k);
      const int64_t lda = std::max<int64_t>(n, 1);
      EXPECT_EQ(getrf(m, n, fast.data(), lda, pf.data()), 0);
      EXPECT_EQ(getrf_reference(m, n, ref.data(), lda, pr.data()), 0);
      EXPECT_EQ(lapack_getrf_colmajor(int(m), int(n), lap.data(), pl.data()), 0);
      lap = transposed(lap, n, m);
      const std::vector<int32_t> plap(pl.begin(), pl.end());
      EXPECT_LE(lu_residual<T>(A, fast, pf), 4.0);
      EXPECT_LE(lu_residual<T>(A, ref, pr), 4.0);
      EXPECT_LE(lu_residual<T>(A, lap, plap), 4.0);
      if (dbl && kind != Kind::kIllConditioned) {
        // Same pivots as LAPACK (|re| + |im| for complex), and the same factors.
        EXPECT_EQ(pf, plap);
        EXPECT_EQ(pr, plap);
        if (pf == plap && k > 0) {
          const double diff =
              double(frob_diff(to_lmat(tensor_of(fast, m, n)), to_lmat(tensor_of(lap, m, n))));
          EXPECT_LE(diff, 1e3 * k * eps_of(dt) * double(frob(to_lmat(A))));
        }
      }
    }
  }
}

// getri (U^{-1} L^{-1} P) against the plain solve on the identity (laswp, then the reference
// substitutions) from the same factor: both residuals ||A X - I|| within 4 n eps ||A|| ||X||,
// and the two inverses close where A is well conditioned. n = 128, 129, 200 cross getri's
// column blocks of 128.
TYPED_TEST(LinalgKernels, InverseFromTheFactorMatchesTheSolveOnTheIdentity) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(17);
  for (int64_t n : {1, 2, 17, 128, 129, 200}) {
    for (Kind kind : {Kind::kRandom, Kind::kIllConditioned, Kind::kDiagonal}) {
      SCOPED_TRACE(fmt::format("n={} {}", n, kind_name(kind)));
      const Tensor A = make_matrix({}, n, dt, kind);
      std::vector<T> lu = values_of<T>(A);
      std::vector<int32_t> piv(n);
      ASSERT_EQ(getrf(n, n, lu.data(), n, piv.data()), 0);
      std::vector<T> fast(n * n, T(-3)), ref(n * n, T(0));
      getri(n, lu.data(), piv.data(), fast.data());
      // L^{-1}'s 128-column blocks run as pool tasks (n = 200: two, each clearing its own
      // columns of the -3s): one and three threads give the bits of the default two.
      const int saved = get_num_threads();
      for (int threads : {1, 3}) {
        set_num_threads(threads);
        std::vector<T> other(n * n, T(-3));
        getri(n, lu.data(), piv.data(), other.data());
        EXPECT_TRUE(other == fast) << threads << " threads";
      }
      set_num_threads(saved);
      for (int64_t i = 0; i < n; ++i) ref[i * n + i] = T(1);
      laswp(n, ref.data(), n, int64_t{1}, 0, n, piv.data());
      trsm_left_reference(n, n, lu.data(), n, 1, true, false, true, ref.data(), n, 1);
      trsm_left_reference(n, n, lu.data(), n, 1, false, false, false, ref.data(), n, 1);
      const LMat a = to_lmat(A), xf = to_lmat(tensor_of(fast, n, n)),
                 xr = to_lmat(tensor_of(ref, n, n)), id = to_lmat(eye(n, n, dt));
      const long double eps = eps_of(dt);
      EXPECT_LE(double(frob_diff(matmul(a, xf), id) / (n * eps * frob(a) * frob(xf))), 4.0);
      EXPECT_LE(double(frob_diff(matmul(a, xr), id) / (n * eps * frob(a) * frob(xr))), 4.0);
      if (kind != Kind::kIllConditioned) {
        EXPECT_LE(double(frob_diff(xf, xr)), 1e3 * n * eps * frob(a) * frob(xr) * frob(xr));
      }
    }
  }
}

TYPED_TEST(LinalgKernels, LuReportsTheFirstZeroPivotAsLapack) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(14);
  for (int64_t n : {1, 3, 17, 200, 300}) {
    for (int64_t zero_col : {int64_t{0}, n / 3, n - 1}) {
      SCOPED_TRACE(fmt::format("n={} zero column {}", n, zero_col));
      Tensor A = gaussian({n, n}, dt);
      A.select(1, zero_col).zero_();  // U(zero_col, zero_col) is exactly zero
      const std::vector<T> a = values_of<T>(A);
      std::vector<T> fast = a, ref = a, lap = transposed(a, n, n);
      std::vector<int32_t> pf(n), pr(n);
      std::vector<int> pl(n);
      const int64_t want = lapack_getrf_colmajor(int(n), int(n), lap.data(), pl.data());
      EXPECT_EQ(want, zero_col + 1);
      EXPECT_EQ(getrf(n, n, fast.data(), n, pf.data()), want);
      EXPECT_EQ(getrf_reference(n, n, ref.data(), n, pr.data()), want);
      EXPECT_LE(lu_residual<T>(A, fast, pf), 4.0);
    }
  }
}

// The look-ahead form splits each step's update over the pool's threads and factors the next
// panel inside the split: the factor, the pivots and the first zero pivot (in a panel factored
// ahead) are the same bits on any thread count, including more tasks than cores.
TYPED_TEST(LinalgKernels, LuIsTheSameOnAnyThreadCount) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(15);
  const int saved = get_num_threads();
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> cases = {
      {300, 300, -1}, {520, 300, -1}, {300, 520, -1}, {645, 645, 400}, {700, 700, 129}};
  for (auto [m, n, zero_col] : cases) {
    SCOPED_TRACE(fmt::format("{}x{} zero column {}", m, n, zero_col));
    Tensor A = gaussian({m, n}, dt);
    if (zero_col >= 0) A.select(1, zero_col).zero_();
    const std::vector<T> a = values_of<T>(A);
    const int64_t k = std::min(m, n);
    std::vector<T> one = a;
    std::vector<int32_t> p1(k);
    set_num_threads(1);
    const int64_t info = getrf(m, n, one.data(), n, p1.data());
    EXPECT_EQ(info, zero_col + 1);
    EXPECT_LE(lu_residual<T>(A, one, p1), 4.0);
    for (int threads : {2, 3, 4}) {
      SCOPED_TRACE(fmt::format("{} threads", threads));
      set_num_threads(threads);
      std::vector<T> many = a;
      std::vector<int32_t> pm(k);
      EXPECT_EQ(getrf(m, n, many.data(), n, pm.data()), info);
      EXPECT_EQ(pm, p1);
      EXPECT_TRUE(many == one);
    }
  }
  set_num_threads(saved);
}

// A triangular matrix that stays reasonably conditioned: diagonal of magnitude 1..2, the other
// triangle Gaussian / sqrt(n).
template <class T>
Tensor triangular_matrix(int64_t n, bool lower) {
  const ScalarType dt = scalar_type_of<T>;
  Tensor a = gaussian({n, n}, dt).mul(1.0 / std::sqrt(double(std::max<int64_t>(n, 1))));
  a = lower ? a.tril(-1) : a.triu(1);
  Tensor d = rand({n}, to_real_type(dt)).add(1.0).mul(randn({n}, to_real_type(dt)).sign());
  a.diagonal(0, 0, 1).copy_(d);
  return a;
}

TYPED_TEST(LinalgKernels, TriangularSolveMatchesReference) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(15);
  for (int64_t n : {1, 3, 17, 64, 200}) {
    for (int64_t nrhs : {1, 5, 70}) {
      for (int variant = 0; variant < 16; ++variant) {
        const bool lower = variant & 1, conj = variant & 2, unit = variant & 4;
        const bool b_transposed = variant & 8;
        SCOPED_TRACE(fmt::format("n={} nrhs={} lower={} conj={} unit={} B^T={}", n, nrhs, lower,
                                 conj, unit, b_transposed));
        const Tensor A = triangular_matrix<T>(n, lower);
        const Tensor B = gaussian({n, nrhs}, dt);
        const std::vector<T> a = values_of<T>(A);
        // B stored row-major (strides nrhs, 1) or column-major (1, n).
        std::vector<T> fast = b_transposed ? values_of<T>(B.t()) : values_of<T>(B);
        std::vector<T> ref = fast;
        const int64_t b_rs = b_transposed ? 1 : nrhs, b_cs = b_transposed ? n : 1;
        trsm_left(n, nrhs, a.data(), n, 1, lower, conj, unit, fast.data(), b_rs, b_cs);
        trsm_left_reference(n, nrhs, a.data(), n, 1, lower, conj, unit, ref.data(), b_rs, b_cs);
        auto as_x = [&](const std::vector<T>& v) {
          return b_transposed ? tensor_of(v, nrhs, n).t() : tensor_of(v, n, nrhs);
        };
        // Residual ||op(A) X - B|| relative to ||op(A)|| ||X||.
        Tensor opA = conj ? A.conj() : A;
        if (unit) opA.diagonal(0, 0, 1).fill_(1);
        for (const auto* v : {&fast, &ref}) {
          const LMat x = to_lmat(as_x(*v)), am = to_lmat(opA);
          const double r =
              double(frob_diff(matmul(am, x), to_lmat(B)) / (n * eps_of(dt) * frob(am) * frob(x)));
          EXPECT_LE(r, 2.0);
        }
        const double diff = double(frob_diff(to_lmat(as_x(fast)), to_lmat(as_x(ref))));
        EXPECT_LE(diff, 1e3 * n * eps_of(dt) * double(frob(to_lmat(as_x(ref)))));
      }
    }
  }
}

// A wide B is split by columns over the pool (at least 128 per task, the last task taking the
// rest: 290 columns make 144 + 146 on two threads, 1000 make 320 + 320 + 360 on three). Every
// variant gives the same bits on any thread count, and the solution stays the reference's.
// n = 145 halves down to a 17-row solve, whose update is 1 x 16 by the columns: a choice of
// path that counted all the columns (16 * 144 below gemm_minus's threshold, 16 * 290 above)
// would give different bits.
TYPED_TEST(LinalgKernels, TriangularSolveOfAWideBGivesTheSameBitsOnAnyThreadCount) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(17);
  const int saved = get_num_threads();
  const int64_t n = 145;
  for (int64_t nrhs : {290, 1000}) {
    for (int variant = 0; variant < 16; ++variant) {
      const bool lower = variant & 1, conj = variant & 2, unit = variant & 4;
      const bool b_transposed = variant & 8;
      SCOPED_TRACE(fmt::format("nrhs={} lower={} conj={} unit={} B^T={}", nrhs, lower, conj, unit,
                               b_transposed));
      const std::vector<T> a = values_of<T>(triangular_matrix<T>(n, lower));
      const Tensor B = gaussian({n, nrhs}, dt);
      const std::vector<T> b = b_transposed ? values_of<T>(B.t()) : values_of<T>(B);
      const int64_t b_rs = b_transposed ? 1 : nrhs, b_cs = b_transposed ? n : 1;
      std::vector<std::vector<T>> x;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        x.push_back(b);
        trsm_left(n, nrhs, a.data(), n, 1, lower, conj, unit, x.back().data(), b_rs, b_cs);
      }
      set_num_threads(saved);
      EXPECT_TRUE(x[1] == x[0]);
      EXPECT_TRUE(x[2] == x[0]);
      std::vector<T> ref = b;
      trsm_left_reference(n, nrhs, a.data(), n, 1, lower, conj, unit, ref.data(), b_rs, b_cs);
      const Tensor xs = tensor_of(x[0], 1, n * nrhs), rs = tensor_of(ref, 1, n * nrhs);
      const double diff = double(frob_diff(to_lmat(xs), to_lmat(rs)));
      EXPECT_LE(diff, 1e3 * n * eps_of(dt) * double(frob(to_lmat(rs))));
    }
  }
}

// The unblocked leaves (linalg/leaf/) of every ISA this CPU can run, called directly: the
// factorization tests above reach only the ISA chosen at start-up.
TYPED_TEST(LinalgKernels, LeafKernelsOfEveryIsaMatchTheReference) {
  using T = TypeParam;
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(16);
  for (const auto& [isa, table] : TS_RUNNABLE_TABLES(linalg_leaf_kernels)) {
    const auto trsm =
        cpu::leaf_for<T>(table->trsm_f32, table->trsm_f64, table->trsm_c64, table->trsm_c128);
    const auto getf2 =
        cpu::leaf_for<T>(table->getf2_f32, table->getf2_f64, table->getf2_c64, table->getf2_c128);
    for (int64_t nrhs : {1, 7, 70}) {
      for (int variant = 0; variant < 16; ++variant) {
        const int64_t n = 17;
        const bool lower = variant & 1, conj = variant & 2, unit = variant & 4;
        const bool b_transposed = variant & 8;
        SCOPED_TRACE(fmt::format("{}: trsm nrhs={} lower={} conj={} unit={} B^T={}", isa, nrhs,
                                 lower, conj, unit, b_transposed));
        const std::vector<T> a = values_of<T>(triangular_matrix<T>(n, lower));
        std::vector<T> fast = values_of<T>(gaussian({n, nrhs}, dt)), ref = fast;
        const int64_t b_rs = b_transposed ? 1 : nrhs, b_cs = b_transposed ? n : 1;
        trsm(n, nrhs, a.data(), n, 1, lower, conj, unit, fast.data(), b_rs, b_cs);
        trsm_left_reference(n, nrhs, a.data(), n, 1, lower, conj, unit, ref.data(), b_rs, b_cs);
        const Tensor x = tensor_of(fast, n, nrhs), want = tensor_of(ref, n, nrhs);
        EXPECT_LE(double(frob_diff(to_lmat(x), to_lmat(want))),
                  1e2 * n * eps_of(dt) * double(frob(to_lmat(want))));
      }
    }
    for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {9, 9}, {40, 8}, {8, 40}}) {
      for (bool column_major : {false, true}) {
        for (bool zero_column : {false, true}) {
          SCOPED_TRACE(fmt::format("{}: getf2 {}x{} column-major={} zero column={}", isa, m, n,
                                   column_major, zero_column));
          Tensor A = gaussian({m, n}, dt);
          if (zero_column) A.select(1, n / 2).zero_();
          const int64_t k = std::min(m, n);
          std::vector<T> ref = values_of<T>(A);
          std::vector<T> fast = column_major ? transposed(ref, m, n) : ref;
          std::vector<int32_t> pf(k), pr(k);
          const int64_t info =
              getf2(m, n, fast.data(), column_major ? 1 : n, column_major ? m : 1, pf.data());
          if (column_major) fast = transposed(fast, n, m);
          EXPECT_EQ(info, getrf_reference(m, n, ref.data(), n, pr.data()));
          EXPECT_EQ(info, zero_column && n / 2 < k ? n / 2 + 1 : 0);
          if (to_real_type(dt) == kFloat64) {  // float32 near-ties may round apart
            EXPECT_EQ(pf, pr);
          }
          EXPECT_LE(lu_residual<T>(A, fast, pf), 4.0);
        }
      }
    }
    // Transposes: whole register blocks, edges on either side, leading dimensions past the
    // width; exact, and nothing outside the r x c target is written.
    const auto transpose = cpu::leaf_for<T>(table->transpose_f32, table->transpose_f64,
                                            table->transpose_c64, table->transpose_c128);
    for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {16, 16}, {8, 8}, {33, 16}, {16, 47}, {70, 21}, {5, 40}}) {
      SCOPED_TRACE(fmt::format("{}: transpose {}x{}", isa, r, c));
      const int64_t lds = c + 3, ldd = r + 5;
      const std::vector<T> src = values_of<T>(gaussian({r, lds}, dt));
      const T sentinel = T(-7);
      std::vector<T> dst(static_cast<size_t>(c * ldd), sentinel);
      transpose(r, c, src.data(), lds, dst.data(), ldd);
      int64_t wrong = 0;
      for (int64_t j = 0; j < c; ++j) {
        for (int64_t i = 0; i < ldd; ++i) {
          const T want = i < r ? src[static_cast<size_t>(i * lds + j)] : sentinel;
          wrong += !(dst[static_cast<size_t>(j * ldd + i)] == want);
        }
      }
      EXPECT_EQ(wrong, 0);
    }
    // adjoint_gemv against the long-double sums, on lengths with and without a partial vector
    // and column counts around its groups of four (two complex); a column's value is the same
    // bits whether it is computed alone or among others (pivoted QR splits them over threads).
    const auto adjoint_gemv = cpu::leaf_for<T>(table->adjoint_gemv_f32, table->adjoint_gemv_f64,
                                               table->adjoint_gemv_c64, table->adjoint_gemv_c128);
    for (auto [len, ncols] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 3}, {1, 1}, {16, 4}, {17, 5}, {63, 9}, {300, 7}}) {
      SCOPED_TRACE(fmt::format("{}: adjoint_gemv {}x{}", isa, len, ncols));
      const int64_t lda = len + 3;
      const std::vector<T> a = values_of<T>(gaussian({ncols, lda}, dt));  // column j at j * lda
      const std::vector<T> x = values_of<T>(gaussian({std::max<int64_t>(len, 1)}, dt));
      std::vector<T> y(static_cast<size_t>(ncols)), alone(y.size());
      adjoint_gemv(len, ncols, a.data(), lda, x.data(), y.data());
      for (int64_t j = 0; j < ncols; ++j)
        adjoint_gemv(len, 1, a.data() + j * lda, lda, x.data(), alone.data() + j);
      EXPECT_TRUE(y == alone);
      for (int64_t j = 0; j < ncols; ++j) {
        std::complex<long double> want = 0;
        long double scale = 0;
        for (int64_t r = 0; r < len; ++r) {
          const std::complex<long double> ar(std::real(a[j * lda + r]), std::imag(a[j * lda + r]));
          const std::complex<long double> xr(std::real(x[r]), std::imag(x[r]));
          want += std::conj(ar) * xr;
          scale += std::abs(ar) * std::abs(xr);
        }
        const std::complex<long double> got(std::real(y[j]), std::imag(y[j]));
        EXPECT_LE(double(std::abs(got - want)), 4.0 * (len + 1) * eps_of(dt) * double(scale))
            << "column " << j;
      }
    }
    // gemv_minus (y -= sum_q op(A(:, q)) s_q) against the long-double sums, op conjugating or
    // not, on lengths around the vector width and column counts around its groups of four.
    const auto gemv_minus = cpu::leaf_for<T>(table->gemv_minus_f32, table->gemv_minus_f64,
                                             table->gemv_minus_c64, table->gemv_minus_c128);
    for (auto [len, ncols] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 3}, {1, 1}, {16, 4}, {17, 5}, {63, 9}, {300, 0}, {300, 7}}) {
      for (bool conj_a : {false, true}) {
        SCOPED_TRACE(fmt::format("{}: gemv_minus {}x{} conj={}", isa, len, ncols, conj_a));
        const int64_t lda = len + 3;
        const std::vector<T> a = values_of<T>(gaussian({std::max<int64_t>(ncols, 1), lda}, dt));
        const std::vector<T> sc = values_of<T>(gaussian({std::max<int64_t>(ncols, 1)}, dt));
        const std::vector<T> y0 = values_of<T>(gaussian({len + 1}, dt));  // y0[len]: a sentinel
        std::vector<T> y = y0;
        gemv_minus(len, ncols, a.data(), lda, sc.data(), conj_a, y.data());
        EXPECT_TRUE(y[len] == y0[len]) << "wrote past the end";
        for (int64_t r = 0; r < len; ++r) {
          std::complex<long double> want(std::real(y0[r]), std::imag(y0[r]));
          long double scale = std::abs(want);
          for (int64_t q = 0; q < ncols; ++q) {
            std::complex<long double> aq(std::real(a[q * lda + r]), std::imag(a[q * lda + r]));
            if (conj_a) aq = std::conj(aq);
            const std::complex<long double> sq(std::real(sc[q]), std::imag(sc[q]));
            want -= aq * sq;
            scale += std::abs(aq) * std::abs(sq);
          }
          const std::complex<long double> got(std::real(y[r]), std::imag(y[r]));
          EXPECT_LE(double(std::abs(got - want)), 4.0 * (ncols + 1) * eps_of(dt) * double(scale))
              << "row " << r;
        }
      }
    }
  }
}

// The ISA tables of the lane-interleaved small kernels this CPU can run.
std::vector<std::pair<std::string, const cpu::SmallLinalgKernels*>> small_tables() {
  return TS_RUNNABLE_TABLES(small_linalg_kernels);
}

// ||A X - B||_F <= bound * n eps ||A||_F ||X||_F for system b of the batch of solutions x
// (n x k row-major each).
template <class T>
void expect_small_backward_error(const Tensor& A, const std::vector<T>& x, int64_t b, int64_t k,
                                 const Tensor& B, double bound) {
  const int64_t n = A.size(0);
  const Tensor X =
      tensor_of(std::vector<T>(x.begin() + b * n * k, x.begin() + (b + 1) * n * k), n, k);
  const LMat a = to_lmat(A), xm = to_lmat(X);
  const long double r = frob_diff(matmul(a, xm), to_lmat(B));
  EXPECT_LE(double(r), bound * n * eps_of(A.dtype()) * double(frob(a) * frob(xm)))
      << "system " << b;
}

// Batches of 37 matrices (not a multiple of any lane count), some failing or singular, through
// every ISA's interleaved kernels against the per-matrix kernels and LAPACK.
template <class T>
void check_small_kernels() {
  const ScalarType dt = scalar_type_of<T>;
  const bool dbl = std::is_same_v<T, double>;
  manual_seed(16);
  constexpr int64_t kCount = 37;
  const bool saved_moves = cpu::small_moves_by_gathers().load();
  for (const auto& [isa, table] : small_tables()) {
    for (bool gathers : {true, false})  // both ways of moving right-hand sides and pivots
      for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 31, 32}) {
        cpu::small_moves_by_gathers() = gathers;
        SCOPED_TRACE(fmt::format("{} {} n={} gathers={}", isa, dt, n, gathers));
        // Cholesky: matrix 5 fails at order n/2 + 1, matrix 11 has NaN on its diagonal.
        Tensor H = make_matrix({kCount}, n, dt, Kind::kRandom, true);
        H[5].select(0, n / 2).select(0, n / 2).fill_(-1.0);
        H[11].select(0, n - 1).select(0, n - 1).fill_(std::numeric_limits<double>::quiet_NaN());
        // Matrix 17: a subnormal power of two times I, pivots whose reciprocal overflows (the
        // factor is exact: sqrt of an even power of two).
        H[17].copy_(eye(n, std::nullopt, dt).mul(std::ldexp(1.0, dbl ? -1030 : -130)));
        const std::vector<T> in = values_of<T>(H);
        std::vector<T> fast(in.size(), T(-7));
        std::vector<int32_t> info(kCount, -1);
        small_potrf(n, kCount, in.data(), fast.data(), info.data(), *table);
        for (int64_t b = 0; b < kCount; ++b) {
          std::vector<T> one = values_of<T>(H[b]), lap = transposed(one, n, n);
          // A NaN on the diagonal fails at its order (LAPACK's potrf2 rule; OpenBLAS's own potrf
          // does not check for NaN).
          const int64_t lapack_info = lapack_potrf_lower_colmajor(int(n), lap.data());
          const int64_t want = b == 11 ? n : lapack_info;
          EXPECT_EQ(potrf_upper_unblocked(n, one.data(), n), want) << "matrix " << b;
          EXPECT_EQ(info[b], want) << "matrix " << b;
          if (want != 0) {  // left untouched
            const Tensor left = tensor_of(
                std::vector<T>(fast.begin() + b * n * n, fast.begin() + (b + 1) * n * n), n, n);
            EXPECT_TRUE(allclose(left, H[b], 0, 0, /*equal_nan=*/true)) << "matrix " << b;
            continue;
          }
          const Tensor Lf = tensor_of(
              std::vector<T>(fast.begin() + b * n * n, fast.begin() + (b + 1) * n * n), n, n);
          EXPECT_TRUE(Lf.triu(1).eq(0).all().item<bool>()) << "matrix " << b;  // zeroed
          EXPECT_LE(cholesky_residual<T>(H[b], Lf), 2.0) << "matrix " << b;
          const double d = double(frob_diff(to_lmat(Lf), to_lmat(lower_from_upper(one, n))));
          EXPECT_LE(d, 10 * n * eps_of(dt) * double(frob(to_lmat(Lf)))) << "matrix " << b;
        }
        // potrs on those factors: ||H X - B|| within a small multiple of n eps ||H|| ||X||.
        // One right-hand side (held in registers for n <= 8) and three.
        for (int64_t rhs : {1, 3}) {
          const Tensor Bc = gaussian({kCount, n, rhs}, dt);
          std::vector<T> x = values_of<T>(Bc);
          small_potrs(n, rhs, kCount, fast.data(), x.data(), *table);
          for (int64_t b = 0; b < kCount; ++b) {
            if (info[b] || b == 17) continue;  // 17's solution overflows
            expect_small_backward_error<T>(H[b], x, b, rhs, Bc[b], 10.0);
          }
        }
        // LU: matrix 3 has a zero column (info = its index + 1), matrix 8 is the zero matrix.
        // Column 0 of matrices 13, 14, 15 (n >= 4) starts (1, 5, NaN, 4), (1, -3, 3, 0.5),
        // (1, 0.5, 3, -3), the rest 0.25: a NaN is never the pivot, and of equal magnitudes the
        // first row is (rows 1, 1, 2; LAPACK's rule).
        Tensor A = make_matrix({kCount}, n, dt, Kind::kRandom);
        A[3].select(1, n / 3).zero_();
        A[8].zero_();
        const bool crafted = n >= 4;
        if (crafted) {
          const double nan = std::numeric_limits<double>::quiet_NaN();
          const double heads[3][4] = {{1, 5, nan, 4}, {1, -3, 3, 0.5}, {1, 0.5, 3, -3}};
          for (int m = 0; m < 3; ++m) {
            Tensor col = A[13 + m].select(1, 0);
            col.fill_(0.25);
            for (int r = 0; r < 4; ++r) col[r].fill_(heads[m][r]);
          }
        }
        const auto has_nan = [&](int64_t b) { return crafted && b == 13; };
        const std::vector<T> a = values_of<T>(A);
        std::vector<T> lu(a.size(), T(-7));
        std::vector<int32_t> piv(kCount * n, -1);
        small_getrf(n, kCount, a.data(), lu.data(), piv.data(), info.data(), *table);
        if (crafted) {
          EXPECT_EQ(piv[13 * n], 2);
          EXPECT_EQ(piv[14 * n], 2);
          EXPECT_EQ(piv[15 * n], 3);
        }
        for (int64_t b = 0; b < kCount; ++b) {
          if (has_nan(b)) continue;
          std::vector<T> one = values_of<T>(A[b]), lap = transposed(one, n, n);
          std::vector<int> pl(n);
          const int64_t want = lapack_getrf_colmajor(int(n), int(n), lap.data(), pl.data());
          EXPECT_EQ(info[b], want) << "matrix " << b;
          const std::vector<T> got(lu.begin() + b * n * n, lu.begin() + (b + 1) * n * n);
          const std::vector<int32_t> gp(piv.begin() + b * n, piv.begin() + (b + 1) * n);
          EXPECT_LE(lu_residual<T>(A[b], got, gp), 4.0) << "matrix " << b;
          if (dbl) {
            EXPECT_EQ(gp, std::vector<int32_t>(pl.begin(), pl.end())) << "matrix " << b;
          }
        }
        // getrs on those factors, singular matrices skipped.
        for (int64_t rhs : {1, 3}) {
          const Tensor Bl = gaussian({kCount, n, rhs}, dt);
          std::vector<T> xl = values_of<T>(Bl);
          small_getrs(n, rhs, kCount, lu.data(), piv.data(), xl.data(), *table);
          for (int64_t b = 0; b < kCount; ++b) {
            if (info[b] || has_nan(b)) continue;
            expect_small_backward_error<T>(A[b], xl, b, rhs, Bl[b], 20.0);
          }
          // gesv (factor and solve in one pass): getrf's info, and getrs's solutions bit for bit.
          std::vector<T> xg = values_of<T>(Bl);
          std::vector<int32_t> ginfo(kCount, -1);
          small_gesv(n, rhs, kCount, a.data(), xg.data(), ginfo.data(), *table);
          EXPECT_EQ(ginfo, info);
          for (int64_t b = 0; b < kCount; ++b) {
            if (info[b] || has_nan(b)) continue;
            for (int64_t e = b * n * rhs; e < (b + 1) * n * rhs; ++e)
              ASSERT_EQ(xg[e], xl[e]) << "system " << b << " element " << e - b * n * rhs;
          }
        }
        // gesv on the identity (inv): B is never read (NaN there) and the inverses are getrs's on
        // an explicit identity, bit for bit.
        std::vector<T> xe(static_cast<size_t>(kCount * n * n), T(0));
        for (int64_t b = 0; b < kCount; ++b)
          for (int64_t i = 0; i < n; ++i) xe[(b * n + i) * n + i] = T(1);
        small_getrs(n, n, kCount, lu.data(), piv.data(), xe.data(), *table);
        std::vector<T> xi(xe.size(), std::numeric_limits<T>::quiet_NaN());
        std::vector<int32_t> iinfo(kCount, -1);
        small_gesv(n, n, kCount, a.data(), xi.data(), iinfo.data(), *table, /*identity=*/true);
        EXPECT_EQ(iinfo, info);
        for (int64_t b = 0; b < kCount; ++b) {
          if (info[b] || has_nan(b)) continue;
          for (int64_t e = b * n * n; e < (b + 1) * n * n; ++e)
            ASSERT_EQ(xi[e], xe[e]) << "inverse " << b << " element " << e - b * n * n;
        }
      }
  }
  cpu::small_moves_by_gathers() = saved_moves;
}

TEST(LinalgSmallKernels, MatchPerMatrixKernelsAndLapackOnEveryIsa) {
  openblas_set_num_threads(1);
  check_small_kernels<float>();
  check_small_kernels<double>();
}

// potrf and getrf with `stream` (non-temporal stores of whole aligned blocks, for large
// batches) write the same bits, pivots and info as without. Outputs are tensors, whose storage
// is 64-byte aligned as the streamed stores need; n = 17 and 31 leave rows unaligned (plain
// stores), n = 8 runs the unrolled kernels, 37 matrices leave a part group.
template <class T>
void check_streamed_factors() {
  const ScalarType dt = scalar_type_of<T>;
  manual_seed(17);
  constexpr int64_t kCount = 37;
  for (const auto& [isa, table] : small_tables())
    for (int64_t n : {4, 8, 16, 17, 31, 32}) {
      SCOPED_TRACE(fmt::format("{} {} n={}", isa, dt, n));
      const int64_t bytes = kCount * n * n * static_cast<int64_t>(sizeof(T));
      Tensor A = make_matrix({kCount}, n, dt, Kind::kRandom);
      A[3].select(1, n / 2).zero_();  // a zero pivot: info 1 + n / 2
      Tensor H = make_matrix({kCount}, n, dt, Kind::kRandom, true);
      H[5].select(0, n / 2).select(0, n / 2).fill_(-1.0);  // fails at order n / 2 + 1
      Tensor plain = empty({kCount, n, n}, dt), streamed = empty({kCount, n, n}, dt);
      std::vector<int32_t> piv_plain(kCount * n), piv_streamed(kCount * n), info_plain(kCount),
          info_streamed(kCount);
      small_getrf(n, kCount, A.data_ptr<T>(), plain.data_ptr<T>(), piv_plain.data(),
                  info_plain.data(), *table, false);
      small_getrf(n, kCount, A.data_ptr<T>(), streamed.data_ptr<T>(), piv_streamed.data(),
                  info_streamed.data(), *table, true);
      EXPECT_EQ(std::memcmp(plain.data_ptr<T>(), streamed.data_ptr<T>(), bytes), 0) << "getrf";
      EXPECT_EQ(piv_plain, piv_streamed);
      EXPECT_EQ(info_plain, info_streamed);
      EXPECT_EQ(info_streamed[3], 1 + n / 2);
      small_potrf(n, kCount, H.data_ptr<T>(), plain.data_ptr<T>(), info_plain.data(), *table,
                  false);
      small_potrf(n, kCount, H.data_ptr<T>(), streamed.data_ptr<T>(), info_streamed.data(), *table,
                  true);
      EXPECT_EQ(std::memcmp(plain.data_ptr<T>(), streamed.data_ptr<T>(), bytes), 0) << "potrf";
      EXPECT_EQ(info_plain, info_streamed);
      EXPECT_EQ(info_streamed[5], 1 + n / 2);
    }
}

TEST(LinalgSmallKernels, StreamedFactorsAreThePlainOnes) {
  check_streamed_factors<float>();
  check_streamed_factors<double>();
}

}  // namespace
}  // namespace tessera::linalg_test
