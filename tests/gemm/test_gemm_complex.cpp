// complex64/complex128 on the engine (four real products per complex one, gemm/driver.cpp):
// against the long-double/double oracle over shapes, layouts, alpha/beta and threads, beta 0
// with NaN in C, and the eager ops on complex tensors against OpenBLAS's cgemm/zgemm.
#include <gtest/gtest.h>

#include <cblas.h>

#include <complex>
#include <random>
#include <vector>

#include "gemm/gemm.h"
#include "gemm_test_util.h"
#include "tessera/tessera.h"

namespace tessera::gemm::testing {
namespace {

// A complex rows x cols matrix in a buffer with a guard band, at element strides (rs, cs).
template <class R>
struct ComplexMatrix {
  using C = std::complex<R>;
  static constexpr int64_t kGuard = 16;
  int64_t rows, cols, rs, cs;
  std::vector<C> buf;
  ComplexMatrix(int64_t r, int64_t c, Layout layout) : rows(r), cols(c) {
    if (layout == Layout::RowMajor) {
      rs = c + 1, cs = 1;
    } else if (layout == Layout::ColMajor) {
      rs = 1, cs = r + 2;
    } else {
      rs = 2 * c + 1, cs = 2;
    }
    const int64_t span = (r > 0 && c > 0) ? (r - 1) * rs + (c - 1) * cs + 1 : 0;
    buf.assign(span + 2 * kGuard, C(R(-77), R(55)));
  }
  C* data() { return buf.data() + kGuard; }
  C& at(int64_t i, int64_t j) { return data()[i * rs + j * cs]; }
  void fill_random(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) at(i, j) = C(R(d(rng)), R(d(rng)));
  }
};

template <class R>
void check_case(int64_t m, int64_t n, int64_t k, Layout la, Layout lb, Layout lc, double alpha,
                double beta, std::mt19937_64& rng, bool nan_c) {
  using C = std::complex<R>;
  ComplexMatrix<R> a(m, k, la), b(k, n, lb), c(m, n, lc);
  a.fill_random(rng);
  b.fill_random(rng);
  c.fill_random(rng);
  if (nan_c)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c.at(i, j) = C(R(NAN), R(NAN));
  ComplexMatrix<R> ref = c;
  GemmProblem p;
  p.dtype = std::is_same_v<R, float> ? ScalarType::Complex64 : ScalarType::Complex128;
  p.m = m, p.n = n, p.k = k;
  p.a = a.data(), p.a_rs = a.rs, p.a_cs = a.cs;
  p.b = b.data(), p.b_rs = b.rs, p.b_cs = b.cs;
  p.c = c.data(), p.c_rs = c.rs, p.c_cs = c.cs;
  p.alpha = alpha, p.beta = beta;
  gemm(p);
  GemmProblem q = p;
  q.c = ref.data();
  gemm_reference(q);
  const double eps = std::numeric_limits<R>::epsilon();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double mag = 0;
      for (int64_t x = 0; x < k; ++x)
        mag +=
            std::abs(std::complex<double>(a.at(i, x))) * std::abs(std::complex<double>(b.at(x, j)));
      const double prev = beta == 0 ? 0.0 : std::abs(beta * std::complex<double>(ref.at(i, j)));
      const double bound = 8.0 * (k + 2) * eps * (std::fabs(alpha) * mag + prev + 1e-30);
      ASSERT_LE(std::abs(std::complex<double>(c.at(i, j)) - std::complex<double>(ref.at(i, j))),
                bound)
          << "C(" << i << ", " << j << ") m=" << m << " n=" << n << " k=" << k;
    }
  }
  // Nothing outside C was written.
  for (int64_t x = 0; x < ComplexMatrix<R>::kGuard; ++x) {
    ASSERT_EQ(c.buf[x], C(R(-77), R(55)));
    ASSERT_EQ(c.buf[c.buf.size() - 1 - x], C(R(-77), R(55)));
  }
}

TEST(GemmComplex, MatchesOracleOverShapesAndLayouts) {
  std::mt19937_64 rng(21);
  for (auto [m, n, k] :
       {std::tuple{1, 1, 1}, {3, 7, 5}, {17, 31, 65}, {65, 33, 257}, {4, 100, 9}, {100, 2, 13}}) {
    for (Layout la : kLayouts)
      for (Layout lb : kLayouts) {
        check_case<float>(m, n, k, la, lb, Layout::RowMajor, 1, 0, rng, true);
        check_case<double>(m, n, k, la, lb, Layout::ColMajor, -0.5, 2, rng, false);
      }
    check_case<float>(m, n, k, Layout::General, Layout::RowMajor, Layout::General, 2, -1, rng,
                      false);
  }
}

TEST(GemmComplex, ZeroKAndZeroAlphaScaleC) {
  std::mt19937_64 rng(22);
  check_case<float>(5, 6, 0, Layout::RowMajor, Layout::RowMajor, Layout::RowMajor, 1, 0.5, rng,
                    false);
  check_case<double>(5, 6, 4, Layout::RowMajor, Layout::RowMajor, Layout::RowMajor, 0, -2, rng,
                     false);
}

// The eager ops against OpenBLAS (the outside oracle), transposed operands included.
TEST(GemmComplex, EagerMmMatchesOpenBlas) {
  manual_seed(24);
  for (ScalarType t : {kComplex64, kComplex128}) {
    const Tensor a = view_as_complex(randn({70, 45, 2}).to(t == kComplex64 ? kFloat32 : kFloat64));
    const Tensor b =
        view_as_complex(randn({90, 45, 2}).to(t == kComplex64 ? kFloat32 : kFloat64)).t();
    const Tensor got = mm(a, b);
    const Tensor bc = b.contiguous();
    Tensor want = empty({70, 90}, t);
    if (t == kComplex64) {
      const std::complex<float> one(1), zero(0);
      cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 70, 90, 45, &one, a.data_ptr(), 45,
                  bc.data_ptr(), 90, &zero, want.data_ptr(), 90);
    } else {
      const std::complex<double> one(1), zero(0);
      cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 70, 90, 45, &one, a.data_ptr(), 45,
                  bc.data_ptr(), 90, &zero, want.data_ptr(), 90);
    }
    const double tol = t == kComplex64 ? 1e-5 : 1e-12;
    EXPECT_TRUE(allclose(got, want, tol, tol));
    // addmm with real beta/alpha runs inside the engine; complex ones through the eager path.
    const Tensor self =
        view_as_complex(randn({70, 90, 2}).to(t == kComplex64 ? kFloat32 : kFloat64));
    EXPECT_TRUE(allclose(addmm(self, a, b, 0.5, 2.0), self.mul(0.5).add(want.mul(2.0)), tol, tol));
    const Scalar ci(std::complex<double>(0, 1));
    EXPECT_TRUE(allclose(addmm(self, a, b, ci, ci), self.mul(ci).add(want.mul(ci)), tol, tol));
  }
}

}  // namespace
}  // namespace tessera::gemm::testing
