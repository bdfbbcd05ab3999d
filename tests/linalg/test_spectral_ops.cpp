// tessera::linalg eigh / eigvalsh / svd / svdvals / pinv / matrix_rank / matrix_norm / cond:
// residuals per dtype on batched, strided and expanded inputs, the batched small path against
// the per-matrix one, the UPLO and full_matrices conventions, empty shapes, the definitions of
// the derived functions, and the errors for bad input.
#include <gtest/gtest.h>

#include <limits>

#include "spectral_test_util.h"
#include "test_support.h"

namespace tessera::linalg_test {
namespace {

namespace la = tessera::linalg;
using tessera::testing::expect_error_mentions;

const ScalarType kDtypes[] = {kFloat32, kFloat64, kComplex64, kComplex128};

Tensor flat3(const Tensor& t) {
  int64_t b = 1;
  for (int64_t d = 0; d < t.dim() - 2; ++d) b *= t.size(d);
  return t.reshape({b, t.size(-2), t.size(-1)});
}

// [batch.., m, n] of mixed kinds.
Tensor batch_of(DimVector batch, int64_t m, int64_t n, ScalarType dt, bool hermitian) {
  return batch_from(batch, m, n, dt, [&](int64_t b) {
    return spectral_matrix(m, n, dt, kAllKinds[b % 7], hermitian);
  });
}

// max over the batch of ||A V - V diag(w)|| / (n eps ||A||) and ||V^H V - I|| / (n eps).
std::pair<double, double> eigh_ratios(const Tensor& A, const Tensor& w, const Tensor& V) {
  const Tensor Af = flat3(A), Vf = flat3(V), wf = w.reshape({Af.size(0), A.size(-1)});
  const int64_t n = A.size(-1);
  const double unit = double(std::max<int64_t>(n, 1)) * eps_of(A.dtype());
  double res = 0, orth = 0;
  for (int64_t b = 0; b < Af.size(0); ++b) {
    const Tensor vw = Vf[b].mul(wf[b].to(A.dtype()).unsqueeze(0));
    const double scale = std::max(double(frob(to_lmat(Af[b]))), 1e-300);
    res = std::max(res, double(frob_diff(to_lmat(Af[b].mm(Vf[b])), to_lmat(vw))) / (unit * scale));
    orth = std::max(orth, double(orthogonality_error(Vf[b])) / unit);
  }
  return {res, orth};
}

TEST(SpectralOps, EighBatchedStridedBothTriangles) {
  manual_seed(51);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {0, 1, 3, 17, 70}) {
      SCOPED_TRACE(fmt::format("{} n={}", dt, n));
      const Tensor A = batch_of({2, 4}, n, n, dt, true);
      auto [w, V] = la::eigh(A);
      ASSERT_EQ(w.sizes(), (DimVector{2, 4, n}));
      ASSERT_EQ(V.sizes(), A.sizes());
      EXPECT_EQ(w.dtype(), to_real_type(dt));
      const auto [res, orth] = eigh_ratios(A, w, V);
      EXPECT_LE(res, 30.0);
      EXPECT_LE(orth, 30.0);
      // eigvalsh: the same values to rounding (above 64, eigh runs divide and conquer and
      // eigvalsh QL, as LAPACK's syevd with and without vectors), bitwise below.
      const Tensor wv = la::eigvalsh(A);
      const double tol =
          30 * n * eps_of(dt) * std::max(1.0, double(frob(to_lmat(A.reshape({-1, 1})))));
      auto close = [&](const Tensor& x, const Tensor& y) {
        return n == 0 ||
               double(frob_diff(to_lmat(x.reshape({-1, 1})), to_lmat(y.reshape({-1, 1})))) <= tol;
      };
      EXPECT_TRUE(close(wv, w));
      if (n <= 64) {
        EXPECT_TRUE(equal(wv, w));
      }
      // Garbage in the unread triangle changes nothing; "U" reads the other one.
      const Tensor junk = ones_like(A).mul(5);
      EXPECT_TRUE(equal(la::eigvalsh(A.tril().add(junk.triu(1))), wv));
      EXPECT_TRUE(equal(la::eigvalsh(A.triu().add(junk.tril(-1)), "U"), wv));
      // A transposed view (conj(A)) has the same eigenvalues; a sliced batch the same results.
      EXPECT_TRUE(close(la::eigvalsh(A.transpose(-2, -1)), wv));
      EXPECT_TRUE(equal(la::eigvalsh(A.slice(1, 0, 4, 2)), wv.slice(1, 0, 4, 2)));
      EXPECT_TRUE(equal(std::get<0>(la::eigh(A.slice(1, 0, 4, 2))), w.slice(1, 0, 4, 2)));
    }
  }
}

// float32 bidiagonal matrices with 1e-30 on some of the diagonal: the Jacobi path (n <= 64)
// used to rotate columns whose products with the others went subnormal and report "failed to
// converge" for about a quarter of them.
TEST(SpectralOps, SvdOfFloat32WithTinyEntriesConverges) {
  manual_seed(58);
  for (int trial = 0; trial < 10; ++trial) {
    for (int64_t n : {8, 24, 32, 64}) {
      SCOPED_TRACE(fmt::format("trial {} n={}", trial, n));
      const std::vector<float> g = to_vector<float>(randn({2 * n}, kFloat32));
      Tensor A = zeros({n, n}, kFloat32);
      auto* a = static_cast<float*>(A.data_ptr());
      for (int64_t i = 0; i < n; ++i) {
        a[i * n + i] = i % 5 == 1 ? 1e-30f : g[i];
        if (i + 1 < n) a[i * n + i + 1] = g[n + i];
      }
      auto [U, S, Vh] = la::svd(A);
      const double unit = double(n) * eps_of(kFloat32);
      const Tensor usv = U.mul(S.unsqueeze(0)).mm(Vh);
      EXPECT_LE(double(frob_diff(to_lmat(usv), to_lmat(A))), 30 * unit * double(frob(to_lmat(A))));
      EXPECT_LE(double(orthogonality_error(U)), 30 * unit);
      EXPECT_LE(double(orthogonality_error(Vh.transpose(0, 1))), 30 * unit);
    }
  }
}

// Matrices whose entries are all subnormal (largest below the normal range): the paths scale
// by a power of two, which must stay representable (2^-ilogb of a subnormal is not), so the
// values are finite and, scaled back up, those of the normal-range matrix. Batches (the lane
// kernels), single small matrices (Jacobi) and n = 70 (the bidiagonal / tridiagonal paths).
TEST(SpectralOps, SvdAndEighOfSubnormalMatrices) {
  manual_seed(60);
  for (ScalarType dt : {kFloat32, kFloat64}) {
    const int e = dt == kFloat32 ? 140 : 1040;        // randn * 2^-e is subnormal
    const double tol = dt == kFloat32 ? 1e-2 : 1e-9;  // the subnormal grid's resolution
    for (auto [batch, n] : {std::pair<int64_t, int64_t>{3, 6}, {1, 6}, {1, 70}}) {
      SCOPED_TRACE(fmt::format("{} batch {} n={}", dt, batch, n));
      // Times 2^k in two steps: 2^140 is not a float.
      auto times = [](const Tensor& t, int k) {
        return t.mul(std::ldexp(1.0, k / 2)).mul(std::ldexp(1.0, k - k / 2));
      };
      const Tensor G = randn({batch, n, n}, dt);
      const Tensor tiny = times(G, -e), stiny = times(G.add(G.transpose(1, 2)), -e);
      const Tensor sv = times(la::svdvals(tiny), e);
      const Tensor w = times(la::eigvalsh(stiny), e);
      ASSERT_TRUE(isfinite(sv).all().item<bool>());
      ASSERT_TRUE(isfinite(w).all().item<bool>());
      // Compared with the values of the matrices as they were rounded to subnormals.
      const Tensor sv_ref = la::svdvals(times(tiny, e));
      const Tensor w_ref = la::eigvalsh(times(stiny, e));
      EXPECT_LE(double(frob_diff(to_lmat(sv.reshape({-1, 1})), to_lmat(sv_ref.reshape({-1, 1})))),
                tol * double(frob(to_lmat(sv_ref.reshape({-1, 1})))));
      EXPECT_LE(double(frob_diff(to_lmat(w.reshape({-1, 1})), to_lmat(w_ref.reshape({-1, 1})))),
                tol * double(frob(to_lmat(w_ref.reshape({-1, 1})))));
    }
  }
}

TEST(SpectralOps, SvdShapesResidualsAndOrthonormality) {
  manual_seed(52);
  for (ScalarType dt : kDtypes) {
    for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 0},
                                                                {0, 3},
                                                                {2, 0},
                                                                {1, 1},
                                                                {4, 4},
                                                                {9, 4},
                                                                {4, 9},
                                                                {33, 33},
                                                                {80, 70},
                                                                {66, 90}}) {
      for (bool full : {true, false}) {
        SCOPED_TRACE(fmt::format("{} {}x{} full={}", dt, m, n, full));
        const int64_t k = std::min(m, n);
        const Tensor A = batch_of({3}, m, n, dt, false);
        auto [U, S, Vh] = la::svd(A, full);
        ASSERT_EQ(U.sizes(), (DimVector{3, m, full ? m : k}));
        ASSERT_EQ(S.sizes(), (DimVector{3, k}));
        ASSERT_EQ(Vh.sizes(), (DimVector{3, full ? n : k, n}));
        EXPECT_EQ(S.dtype(), to_real_type(dt));
        const double unit = double(std::max<int64_t>({m, n, 1})) * eps_of(dt);
        for (int64_t b = 0; b < 3; ++b) {
          SCOPED_TRACE(skind_name(kAllKinds[b]));
          const Tensor usv =
              U[b].narrow(1, 0, k).mul(S[b].to(dt).unsqueeze(0)).mm(Vh[b].narrow(0, 0, k));
          const double scale = std::max(double(frob(to_lmat(A[b]))), 1e-300);
          if (m * n > 0) {
            EXPECT_LE(double(frob_diff(to_lmat(usv), to_lmat(A[b]))), 30 * unit * scale);
          }
          EXPECT_LE(double(orthogonality_error(U[b])), 30 * unit);
          EXPECT_LE(double(orthogonality_error(Vh[b].transpose(0, 1))), 30 * unit);
        }
        EXPECT_TRUE(equal(la::svdvals(A), S) || k == 0 ||
                    double(frob_diff(to_lmat(la::svdvals(A).reshape({-1, 1}).to(kFloat64)),
                                     to_lmat(S.reshape({-1, 1}).to(kFloat64)))) <=
                        30 * unit * double(frob(to_lmat(A.reshape({-1, 1})))));
      }
    }
  }
}

TEST(SpectralOps, SvdOfViewsAndRankDeficientBatches) {
  manual_seed(53);
  for (ScalarType dt : kDtypes) {
    const Tensor A = batch_of({4}, 12, 7, dt, false);
    // A transposed view is the SVD of A^T: the same singular values.
    const Tensor s = la::svdvals(A), st = la::svdvals(A.transpose(-2, -1));
    EXPECT_LE(double(frob_diff(to_lmat(s.reshape({-1, 1})), to_lmat(st.reshape({-1, 1})))),
              300 * 12 * eps_of(dt) * double(frob(to_lmat(s.reshape({-1, 1})))));
    // An expanded batch (stride 0) gives identical results per copy.
    const Tensor ex = A[1].expand({3, 12, 7});
    const Tensor se = la::svdvals(ex);
    EXPECT_TRUE(equal(se[0], se[2]));
    // Rank-deficient and zero matrices: U orthonormal, full and reduced.
    for (SKind kind : {SKind::kRankDeficient, SKind::kZero}) {
      const Tensor R = spectral_matrix(9, 6, dt, kind).expand({2, 9, 6});
      for (bool full : {true, false}) {
        auto [U, S, Vh] = la::svd(R, full);
        EXPECT_LE(double(orthogonality_error(U[1])), 30 * 9 * eps_of(dt));
        EXPECT_LE(double(orthogonality_error(Vh[1].transpose(0, 1))), 30 * 9 * eps_of(dt));
      }
    }
  }
}

// Batches of small real matrices run the lane kernels; single matrices the per-matrix ones:
// both agree with each other (values) and satisfy the residuals (vectors).
TEST(SpectralOps, BatchedSmallPathAgreesWithPerMatrix) {
  manual_seed(54);
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (int64_t n : {2, 4, 8, 16, 32}) {
      SCOPED_TRACE(fmt::format("{} n={}", dt, n));
      const Tensor H = batch_of({45}, n, n, dt, true);
      const Tensor A = batch_of({45}, n, n, dt, false);
      auto [w, V] = la::eigh(H);
      auto [U, S, Vh] = la::svd(A);
      const auto [res, orth] = eigh_ratios(H, w, V);
      EXPECT_LE(res, 30.0);
      EXPECT_LE(orth, 30.0);
      const double unit = double(n) * eps_of(dt);
      for (int64_t b = 0; b < 45; b += 4) {
        SCOPED_TRACE(b);
        const double hs = std::max(double(frob(to_lmat(H[b]))), 1e-300);
        const double as = std::max(double(frob(to_lmat(A[b]))), 1e-300);
        const Tensor w1 = la::eigvalsh(H[b]), s1 = la::svdvals(A[b]);
        EXPECT_LE(double(frob_diff(to_lmat(w1.unsqueeze(1)), to_lmat(w[b].unsqueeze(1)))),
                  30 * unit * hs);
        EXPECT_LE(double(frob_diff(to_lmat(s1.unsqueeze(1)), to_lmat(S[b].unsqueeze(1)))),
                  30 * unit * as);
        const Tensor usv = U[b].mul(S[b].to(dt).unsqueeze(0)).mm(Vh[b]);
        EXPECT_LE(double(frob_diff(to_lmat(usv), to_lmat(A[b]))), 30 * unit * as);
        EXPECT_LE(double(orthogonality_error(U[b])), 30 * unit);
      }
    }
  }
}

TEST(SpectralOps, PinvRankNormCondDefinitions) {
  manual_seed(55);
  for (ScalarType dt : kDtypes) {
    SCOPED_TRACE(fmt::format("{}", dt));
    const double eps = eps_of(dt);
    // pinv: the four Penrose conditions on a rank-deficient wide matrix, and A^-1 for square.
    const Tensor R = spectral_matrix(5, 8, dt, SKind::kRankDeficient);
    const Tensor P = la::pinv(R);
    ASSERT_EQ(P.sizes(), (DimVector{8, 5}));
    const double rs = double(frob(to_lmat(R)));
    EXPECT_LE(double(frob_diff(to_lmat(R.mm(P).mm(R)), to_lmat(R))), 1e3 * eps * rs);
    EXPECT_LE(double(frob_diff(to_lmat(P.mm(R).mm(P)), to_lmat(P))),
              1e3 * eps * double(frob(to_lmat(P))));
    const Tensor RP = R.mm(P);
    EXPECT_LE(double(frob_diff(to_lmat(RP), to_lmat(RP.transpose(0, 1).conj()))), 1e3 * eps);
    const Tensor Sq = spectral_matrix(6, 6, dt, SKind::kRandom);
    EXPECT_LE(double(frob_diff(to_lmat(la::pinv(Sq)), to_lmat(la::inv(Sq)))),
              1e4 * eps * double(frob(to_lmat(la::inv(Sq)))));
    // hermitian=true goes through eigh and agrees.
    const Tensor H = spectral_matrix(6, 6, dt, SKind::kRankDeficient, true);
    EXPECT_LE(double(frob_diff(to_lmat(la::pinv(H, {}, {}, true)), to_lmat(la::pinv(H)))),
              1e4 * eps * double(frob(to_lmat(la::pinv(H)))));
    // An empty matrix gives an empty transposed shape.
    EXPECT_EQ(la::pinv(zeros({2, 0, 3}, dt)).sizes(), (DimVector{2, 3, 0}));
    // matrix_rank: B C with inner dim 3; tolerances; hermitian.
    const Tensor B = gaussian({7, 3}, dt).mm(gaussian({3, 9}, dt));
    EXPECT_EQ(la::matrix_rank(B).item<int64_t>(), 3);
    EXPECT_EQ(la::matrix_rank(B, 1e30).item<int64_t>(), 0);
    EXPECT_EQ(la::matrix_rank(B, std::nullopt, 0.0).item<int64_t>(), 7);  // noise counts
    EXPECT_EQ(la::matrix_rank(H, {}, {}, true).item<int64_t>(), 3);
    EXPECT_EQ(la::matrix_rank(eye(4, 4, dt).expand({2, 4, 4})).sizes(), (DimVector{2}));
    EXPECT_EQ(la::matrix_rank(zeros({3, 0}, dt)).item<int64_t>(), 0);
    // matrix_norm against the definitions on a 2 x 2 with known values.
    Tensor M = zeros({2, 2}, dt);
    M.select(0, 0).select(0, 0).fill_(3);
    M.select(0, 1).select(0, 1).fill_(-4);
    M.select(0, 0).select(0, 1).fill_(1);
    auto val = [](const Tensor& t) { return t.to(kFloat64).item<double>(); };
    const double tol = 1e3 * eps;
    EXPECT_NEAR(val(la::matrix_norm(M)), std::sqrt(26.0), tol * 10);
    EXPECT_NEAR(val(la::matrix_norm(M, 1)), 5.0, tol * 10);
    EXPECT_NEAR(val(la::matrix_norm(M, -1)), 3.0, tol * 10);
    EXPECT_NEAR(val(la::matrix_norm(M, std::numeric_limits<double>::infinity())), 4.0, tol * 10);
    EXPECT_NEAR(val(la::matrix_norm(M, -std::numeric_limits<double>::infinity())), 4.0, tol * 10);
    const Tensor sv = la::svdvals(M);
    EXPECT_NEAR(val(la::matrix_norm(M, 2)), val(sv[0]), tol * 10);
    EXPECT_NEAR(val(la::matrix_norm(M, -2)), val(sv[1]), tol * 10);
    EXPECT_NEAR(val(la::matrix_norm(M, "nuc")), val(sv.sum()), tol * 10);
    EXPECT_NEAR(val(sv[0]) * val(sv[1]), 12.0, tol * 100);  // |det|
    // dim and keepdim: the norm over dims (0, 2) of a [2, 3, 2] tensor.
    const Tensor T3 = gaussian({2, 3, 2}, dt);
    EXPECT_EQ(la::matrix_norm(T3, "fro", {0, 2}).sizes(), (DimVector{3}));
    EXPECT_EQ(la::matrix_norm(T3, 2, {0, 2}, true).sizes(), (DimVector{1, 3, 1}));
    EXPECT_EQ(la::matrix_norm(T3, 1, {2, 0}, true).sizes(), (DimVector{1, 3, 1}));
    EXPECT_NEAR(val(la::matrix_norm(T3, 2, {0, 2})[1]), val(la::matrix_norm(T3.select(1, 1), 2)),
                tol * 10);
    // cond: 2-norm ratio; other p through the inverse; inf for singular input.
    EXPECT_NEAR(val(la::cond(M)), val(sv[0]) / val(sv[1]), tol * 100);
    EXPECT_NEAR(val(la::cond(M, -2)), val(sv[1]) / val(sv[0]), tol * 10);
    EXPECT_NEAR(val(la::cond(M, "fro")), val(la::matrix_norm(M).mul(la::matrix_norm(la::inv(M)))),
                tol * 100);
    Tensor sing = eye(3, 3, dt);
    sing.select(0, 2).select(0, 2).fill_(0);
    EXPECT_TRUE(std::isinf(val(la::cond(sing, 1))));
    EXPECT_TRUE(std::isinf(val(la::cond(sing))));
  }
}

TEST(SpectralOps, BadInputErrors) {
  for (ScalarType dt : {kFloat32, kComplex128}) {
    const Tensor sq = eye(3, 3, dt), rect = ones({2, 3}, dt);
    expect_error_mentions([&] { la::eigh(rect); }, {"linalg.eigh", "'A'", "square", "2 by 3"});
    expect_error_mentions([&] { la::eigvalsh(ones({3}, dt)); },
                          {"linalg.eigvalsh", "'A'", "at least 2 dimensions", "1 dims"});
    expect_error_mentions([&] { la::eigh(sq, "X"); },
                          {"linalg.eigh", "'UPLO'", "'L' or 'U'", "'X'"});
    expect_error_mentions([&] { la::svd(ones({4}, dt)); },
                          {"linalg.svd", "'A'", "at least 2 dimensions", "1 dims"});
    expect_error_mentions([&] { la::pinv(rect, {}, {}, true); },
                          {"linalg.pinv", "square", "2 by 3"});
    expect_error_mentions([&] { la::matrix_norm(sq, 3); },
                          {"linalg.matrix_norm", "'ord'", "'fro', 'nuc'", "but got 3"});
    expect_error_mentions([&] { la::matrix_norm(sq, "abc"); },
                          {"linalg.matrix_norm", "'ord'", "but got 'abc'"});
    expect_error_mentions(
        [&] {
          la::matrix_norm(sq, "fro", {0, 0});
        },
        {"linalg.matrix_norm", "'dim'", "different", "(0, 0)"});
    expect_error_mentions(
        [&] {
          la::matrix_norm(sq, "fro", {0, 5});
        },
        {"linalg.matrix_norm", "'dim'", "[-2, 1]", "5"});
    expect_error_mentions([&] { la::cond(rect, "fro"); },
                          {"linalg.cond", "square", "p = 'fro'", "2 by 3"});
    expect_error_mentions([&] { la::cond(sq, 3); }, {"linalg.cond", "'p'", "but got 3"});
    // NaN / Inf inside: LinAlgError naming the batch element, as PyTorch.
    Tensor bad = eye(3, 3, dt).expand({2, 3, 3}).contiguous();
    bad[1].select(0, 1).select(0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
    for (auto fn : std::vector<std::function<void()>>{
             [&] { la::svd(bad); }, [&] { la::svdvals(bad); }, [&] { la::pinv(bad); },
             [&] { la::matrix_rank(bad); }, [&] { la::cond(bad); }, [&] { la::eigh(bad); },
             [&] { la::eigvalsh(bad); }}) {
      expect_error_mentions(fn, {"(Batch element 1)", "failed to converge", "non-finite"});
      EXPECT_THROW(fn(), la::LinAlgError);
    }
    // Inf in the unread triangle is not read.
    Tensor inf_upper = eye(3, 3, dt);
    inf_upper.select(0, 0).select(0, 2).fill_(std::numeric_limits<double>::infinity());
    EXPECT_NO_THROW(la::eigvalsh(inf_upper));
  }
  for (ScalarType dt : {kInt32, kInt64, kBool}) {
    expect_error_mentions(
        [&] {
          la::svd(ones({3, 3}, dt));
        },
        {"linalg.svd", "'A'", "floating point or complex"});
    expect_error_mentions(
        [&] {
          la::eigh(ones({3, 3}, dt));
        },
        {"linalg.eigh", "'A'", "floating point or complex"});
    expect_error_mentions(
        [&] {
          la::matrix_norm(ones({3, 3}, dt));
        },
        {"linalg.matrix_norm", "floating point or complex"});
  }
  // Autograd is not implemented: a tensor that requires grad is refused.
  const Tensor g = eye(3, 3, kFloat32).requires_grad_();
  EXPECT_THROW(la::svd(g), Error);
  EXPECT_THROW(la::eigh(g), Error);
}

}  // namespace
}  // namespace tessera::linalg_test
