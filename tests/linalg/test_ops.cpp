// tessera::linalg ops: residuals per dtype on batched, transposed and sliced inputs, the
// packing conventions (pivots, P L U, upper factors), n = 0, and the errors for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "linalg_test_util.h"
#include "test_support.h"

namespace tessera::linalg_test {
namespace {

namespace la = tessera::linalg;
using tessera::testing::expect_error_mentions;

const ScalarType kDtypes[] = {kFloat32, kFloat64, kComplex64, kComplex128};

// Largest ||lhs_b - rhs_b||_F / (n eps scale_b) over the batch (scale_b from scale_fn).
template <class Fn>
double max_ratio(int64_t batch, int64_t n, ScalarType dt, Fn&& fn) {
  double worst = 0;
  for (int64_t b = 0; b < batch; ++b) {
    auto [diff, scale] = fn(b);
    if (n > 0) worst = std::max(worst, double(diff / (n * eps_of(dt) * std::max(scale, 1e-300L))));
  }
  return worst;
}

Tensor flat(const Tensor& t) {
  int64_t batch = 1;
  for (int64_t d = 0; d < t.dim() - 2; ++d) batch *= t.size(d);
  return t.reshape({batch, t.size(-2), t.size(-1)});
}

TEST(LinalgOps, CholeskyResidualBatchedAndUpper) {
  manual_seed(21);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {0, 1, 3, 17, 130}) {
      for (Kind kind : {Kind::kRandom, Kind::kIllConditioned}) {
        SCOPED_TRACE(fmt::format("{} n={} {}", dt, n, kind_name(kind)));
        const Tensor A = make_matrix({2, 3}, n, dt, kind, true);
        const Tensor L = la::cholesky(A);
        const Tensor U = la::cholesky(A, /*upper=*/true);
        ASSERT_EQ(L.sizes(), A.sizes());
        EXPECT_TRUE(L.is_contiguous());
        const Tensor Af = flat(A), Lf = flat(L), Uf = flat(U);
        const double r = max_ratio(6, n, dt, [&](int64_t b) {
          const LMat a = to_lmat(Af[b]), l = to_lmat(Lf[b]);
          return std::pair{frob_diff(a, matmul(l, adjoint(l))), frob(a)};
        });
        EXPECT_LE(r, 2.0);
        // Triangles: L lower, U = L^H upper (bitwise: the same factorization).
        EXPECT_TRUE(L.triu(1).eq(0).all().item<bool>());
        EXPECT_TRUE(equal(U, L.transpose(-2, -1).conj()));
      }
    }
  }
}

TEST(LinalgOps, CholeskyReadsOneTriangleAndAnyStrides) {
  manual_seed(22);
  for (ScalarType dt : kDtypes) {
    const Tensor A = make_matrix({4}, 70, dt, Kind::kRandom, true);
    const Tensor L = la::cholesky(A);
    // Garbage in the unread triangle changes nothing.
    EXPECT_TRUE(equal(la::cholesky(A.tril().add(ones_like(A).mul(7).triu(1))), L));
    EXPECT_TRUE(equal(la::cholesky(A.triu().add(ones_like(A).tril(-1).mul(-3)), true),
                      la::cholesky(A, true)));
    // A transposed view (conj(A), still Hermitian positive-definite) and a sliced batch.
    const Tensor At = A.transpose(-2, -1);
    EXPECT_TRUE(equal(la::cholesky(At), la::cholesky(At.contiguous())));
    const Tensor sl = A.slice(0, 0, 4, 2);
    EXPECT_TRUE(equal(la::cholesky(sl), L.slice(0, 0, 4, 2)));
    // An expanded batch (stride 0).
    const Tensor ex = A[1].expand({3, 70, 70});
    EXPECT_TRUE(equal(la::cholesky(ex)[2], L[1]));
  }
}

// From order 512 the copies into and out of the upper form run on the pool, by rows of 64x64
// tiles (600: a partial last row of tiles). Any thread count gives the same bits, the unread
// triangle is still unread, and the other triangle of the result is zero.
TEST(LinalgOps, LargeCholeskyGivesTheSameBitsOnOneThreadAndTwo) {
  manual_seed(23);
  const int saved = get_num_threads();
  for (ScalarType dt : kDtypes) {
    SCOPED_TRACE(fmt::format("{}", dt));
    const int64_t n = 600;
    // Exactly Hermitian (the product that makes it rounds A(i, j) and A(j, i) apart at this
    // size in complex128), so that the upper and the lower factor agree bitwise.
    const Tensor A0 = make_matrix({}, n, dt, Kind::kRandom, true);
    const Tensor A = A0.tril().add(A0.tril(-1).transpose(0, 1).conj());
    set_num_threads(1);
    const Tensor L1 = la::cholesky(A), U1 = la::cholesky(A, /*upper=*/true);
    set_num_threads(2);
    const Tensor L2 = la::cholesky(A.tril().add(ones_like(A).mul(7).triu(1)));
    const Tensor U2 = la::cholesky(A.triu().add(ones_like(A).mul(-3).tril(-1)), /*upper=*/true);
    set_num_threads(saved);
    EXPECT_TRUE(equal(L2, L1));
    EXPECT_TRUE(equal(U2, U1));
    EXPECT_TRUE(equal(U1, L1.transpose(-2, -1).conj()));
    EXPECT_TRUE(L2.triu(1).eq(0).all().item<bool>());
    EXPECT_TRUE(U2.tril(-1).eq(0).all().item<bool>());
    // The residual in double precision (an n^3 long-double product would be slow here).
    const ScalarType wide = is_complex(dt) ? kComplex128 : kFloat64;
    const Tensor a = A.to(wide), l = L2.to(wide);
    const double diff =
        l.matmul(l.transpose(0, 1).conj()).sub(a).abs().pow(2).sum().sqrt().item<double>();
    const double scale = a.abs().pow(2).sum().sqrt().item<double>();
    EXPECT_LE(diff / (n * eps_of(dt) * scale), 2.0);
  }
}

TEST(LinalgOps, BatchedSmallCholeskyOfTinyAndHugeScales) {
  // s * B for B = [[4, 2], [2, 5]] beside s * I: L = sqrt(s) * [[2, 0], [1, 2]] beside sqrt(s) * I.
  // Pivots near the ends of the range, where 1 / d is subnormal or infinite, take the plain
  // reciprocal of the square root.
  for (ScalarType dt : {kFloat32, kFloat64}) {
    const bool f32 = dt == kFloat32;
    for (double s : {f32 ? 1e-39 : 1e-310, f32 ? 3e-38 : 1e-306, f32 ? 2e37 : 1e307}) {
      SCOPED_TRACE(fmt::format("{} s={}", dt, s));
      const Tensor B =
          tensor<double>({4, 2, 0, 0, 2, 5, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}).reshape({4, 4});
      const Tensor LB =
          tensor<double>({2, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}).reshape({4, 4});
      const Tensor A = B.mul(s).to(dt).expand({19, 4, 4}).contiguous();
      const Tensor want = LB.mul(std::sqrt(s)).to(dt).expand({19, 4, 4});
      const Tensor L = la::cholesky(A);
      EXPECT_TRUE(isfinite(L).all().item<bool>());
      EXPECT_TRUE(allclose(L, want, f32 ? 1e-5 : 1e-12, 0.0));
    }
  }
}

TEST(LinalgOps, BatchedSmallCholeskyAndSolveReadOneTriangle) {
  // The batched small kernels skip the blocks above the diagonal: NaN there must change nothing.
  manual_seed(23);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {4, 8, 13, 16, 32}) {
      SCOPED_TRACE(fmt::format("{} n={}", dt, n));
      const Tensor A = make_matrix({37}, n, dt, Kind::kRandom, true);
      const Tensor nan_above = full_like(A, std::numeric_limits<double>::quiet_NaN()).triu(1);
      const Tensor L = la::cholesky(A);
      EXPECT_TRUE(equal(la::cholesky(A.tril().add(nan_above)), L));
      const Tensor B = randn({37, n, 2}, dt);
      EXPECT_TRUE(equal(la::cholesky_solve(B, L.add(nan_above)), la::cholesky_solve(B, L)));
    }
  }
}

TEST(LinalgOps, CholeskyExReportsPerBatchAndCholeskyThrows) {
  for (ScalarType dt : kDtypes) {
    Tensor A = eye(3, 3, dt).expand({4, 3, 3}).contiguous();
    A[2].select(0, 1).select(0, 1).fill_(-2);  // batch element 2, leading minor of order 2
    auto [L, info] = la::cholesky_ex(A);
    EXPECT_EQ(info.dtype(), kInt32);
    EXPECT_TRUE(equal(info, tensor<int32_t>({0, 0, 2, 0})));
    expect_error_mentions([&] { la::cholesky(A); },
                          {"linalg.cholesky", "(Batch element 2)", "not positive-definite",
                           "leading minor of order 2"});
    try {
      la::cholesky(A);
    } catch (const la::LinAlgError&) {
    } catch (...) {
      ADD_FAILURE() << "expected LinAlgError";
    }
    expect_error_mentions([&] { la::cholesky(A[2]); }, {"linalg.cholesky", "order 2"});
  }
}

// A batch element whose leading minor of order m + 1 fails comes back from cholesky_ex with
// LAPACK's partial factor: its leading m x m block is the factor of A's leading m x m block.
// Batches of 37 small real matrices run the lane kernels, which hand failing matrices to the
// per-matrix factorization for that partial factor. The failing elements 5, 13 and 21 sit in
// the first and the second of two groups factored side by side (8 lanes for float64, 16 for
// float32).
TEST(LinalgOps, CholeskyExKeepsThePartialFactorOfAFailingBatchElement) {
  manual_seed(24);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {4, 8, 32, 70}) {
      SCOPED_TRACE(fmt::format("{} n={}", dt, n));
      const int64_t m = n / 2;
      Tensor A = make_matrix({37}, n, dt, Kind::kRandom, true);
      const std::vector<int64_t> failing = {5, 13, 21};
      for (int64_t e : failing) A[e].select(0, m).select(0, m).fill_(-1.0 * n);
      auto [L, info] = la::cholesky_ex(A);
      EXPECT_EQ(info.ne(0).sum().item<int64_t>(), 3);
      for (int64_t e : failing) {
        EXPECT_EQ(info[e].item<int64_t>(), m + 1) << "element " << e;
        const Tensor lead = A[e].slice(0, 0, m).slice(1, 0, m);
        const Tensor got = L[e].slice(0, 0, m).slice(1, 0, m);
        const double tol = to_real_type(dt) == kFloat32 ? 1e-4 : 1e-10;
        EXPECT_TRUE(allclose(got, la::cholesky(lead), tol, tol)) << "element " << e;
      }
    }
  }
}

TEST(LinalgOps, CholeskySolveAndInverse) {
  manual_seed(23);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {1, 5, 150}) {
      for (bool upper : {false, true}) {
        SCOPED_TRACE(fmt::format("{} n={} upper={}", dt, n, upper));
        const Tensor A = make_matrix({2}, n, dt, Kind::kRandom, true);
        const Tensor F = la::cholesky(A, upper);
        const Tensor B = gaussian({3, 1, n, 4}, dt);  // batch dims broadcast: [3, 1] x [2]
        const Tensor X = la::cholesky_solve(B, F, upper);
        ASSERT_EQ(X.sizes(), (DimVector{3, 2, n, 4}));
        const Tensor Xf = flat(X), Bf = flat(B.expand({3, 2, n, 4}));
        const double r = max_ratio(6, n, dt, [&](int64_t b) {
          const LMat a = to_lmat(A[b % 2]), x = to_lmat(Xf[b]);
          return std::pair{frob_diff(matmul(a, x), to_lmat(Bf[b])), frob(a) * frob(x)};
        });
        EXPECT_LE(r, 4.0);
        // One factor per system (the lane-interleaved potrs for small real lower factors).
        const Tensor B2 = gaussian({2, n, 4}, dt);
        const Tensor X2 = la::cholesky_solve(B2, F, upper);
        const double r2 = max_ratio(2, n, dt, [&](int64_t b) {
          const LMat a = to_lmat(A[b]), x = to_lmat(X2[b]);
          return std::pair{frob_diff(matmul(a, x), to_lmat(B2[b])), frob(a) * frob(x)};
        });
        EXPECT_LE(r2, 4.0);
        const Tensor Ainv = la::cholesky_inverse(F, upper);
        const double ri = max_ratio(2, n, dt, [&](int64_t b) {
          const LMat a = to_lmat(A[b]), x = to_lmat(Ainv[b]);
          return std::pair{frob_diff(matmul(a, x), to_lmat(eye(n, n, dt))), frob(a) * frob(x)};
        });
        EXPECT_LE(ri, 4.0);
      }
    }
  }
  expect_error_mentions(
      [] {
        la::cholesky_inverse(zeros({2, 2}));
      },
      {"cholesky_inverse", "diagonal element 1 is zero", "singular"});
  expect_error_mentions(
      [] {
        la::cholesky_solve(ones({2, 1}), eye(3));
      },
      {"cholesky_solve", "3 by 3", "2 by 1"});
}

TEST(LinalgOps, SolveTriangularAllForms) {
  manual_seed(24);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {1, 4, 90}) {
      for (int v = 0; v < 8; ++v) {
        const bool upper = v & 1, left = v & 2, unit = v & 4;
        SCOPED_TRACE(fmt::format("{} n={} upper={} left={} unit={}", dt, n, upper, left, unit));
        Tensor A = gaussian({2, n, n}, dt).mul(1.0 / std::sqrt(double(n)));
        A.diagonal(0, -2, -1).add_(3);
        A = upper ? A.triu() : A.tril();
        const Tensor B = left ? gaussian({n, 3}, dt) : gaussian({3, n}, dt);
        // A as a transposed view of its transpose: strides must not matter.
        const Tensor At = A.transpose(-2, -1).contiguous().transpose(-2, -1);
        const Tensor X = la::solve_triangular(At, B, upper, left, unit);
        Tensor Au = A.clone();
        if (unit) Au.diagonal(0, -2, -1).fill_(1);
        const double r = max_ratio(2, n, dt, [&](int64_t b) {
          const LMat a = to_lmat(Au[b]), x = to_lmat(X[b]);
          return std::pair{frob_diff(left ? matmul(a, x) : matmul(x, a), to_lmat(B)),
                           frob(a) * frob(x)};
        });
        EXPECT_LE(r, 2.0);
      }
    }
  }
  expect_error_mentions(
      [] {
        la::solve_triangular(eye(2), ones({3, 1}), true);
      },
      {"linalg.solve_triangular", "AX = B", "2x2", "3x1"});
  expect_error_mentions([] { la::solve_triangular(eye(2), ones({2}), true); },
                        {"linalg.solve_triangular", "'B'", "at least 2 dimensions", "1 dims"});
}

// A = P L U for lu(); lu_factor's pivots reproduce the same P.
TEST(LinalgOps, LuFactorAndUnpack) {
  manual_seed(25);
  for (ScalarType dt : kDtypes) {
    for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 0}, {1, 1}, {3, 3}, {40, 40}, {170, 170}, {7, 4}, {4, 7}}) {
      SCOPED_TRACE(fmt::format("{} {}x{}", dt, m, n));
      const Tensor A = gaussian({2, m, n}, dt);
      auto [P, L, U] = la::lu(A);
      const int64_t k = std::min(m, n);
      ASSERT_EQ(P.sizes(), (DimVector{2, m, m}));
      ASSERT_EQ(L.sizes(), (DimVector{2, m, k}));
      ASSERT_EQ(U.sizes(), (DimVector{2, k, n}));
      const double r = max_ratio(2, std::max<int64_t>(k, 1), dt, [&](int64_t b) {
        const LMat a = to_lmat(A[b]);
        return std::pair{frob_diff(a, matmul(to_lmat(P[b]), matmul(to_lmat(L[b]), to_lmat(U[b])))),
                         frob(a)};
      });
      EXPECT_LE(r, 4.0);
      auto [LU, piv] = la::lu_factor(A);
      EXPECT_EQ(piv.dtype(), kInt32);
      auto [P2, L2, U2] = la::lu_unpack(LU, piv);
      EXPECT_TRUE(equal(P2, P) && equal(L2, L) && equal(U2, U));
    }
  }
}

// lu_solve with a caller's pivots, some naming a row above their own (LAPACK's getrs applies
// any interchange in [1, n]; getrf never makes those): with L = U = I the solution is B with
// the interchanges applied in order, exactly, on the batched path as on the per-matrix one.
TEST(LinalgOps, LuSolveAppliesAnyPivotsInOrder) {
  manual_seed(27);
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (int64_t n : {4, 16, 32}) {
      for (int64_t k : {1, 3}) {
        SCOPED_TRACE(fmt::format("{} n={} k={}", dt, n, k));
        constexpr int64_t kBatch = 37;
        const Tensor LU = eye(n, std::nullopt, dt).expand({kBatch, n, n}).contiguous();
        const Tensor piv = randint(1, n + 1, {kBatch, n}, kInt32);
        const Tensor B = gaussian({kBatch, n, k}, dt);
        const Tensor X = la::lu_solve(LU, piv, B);
        Tensor want = B.to(kFloat64).contiguous();
        double* w = want.data_ptr<double>();
        const Tensor pc = piv.contiguous();
        const int32_t* p = pc.data_ptr<int32_t>();
        for (int64_t b = 0; b < kBatch; ++b)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t c = 0; c < k; ++c)
              std::swap(w[(b * n + j) * k + c], w[(b * n + p[b * n + j] - 1) * k + c]);
        EXPECT_TRUE(equal(X.to(kFloat64), want));
      }
    }
  }
}

TEST(LinalgOps, BatchedSmallSolveAndInvInOnePassMatchTwoPasses) {
  // linalg.solve and inv on batches of small real matrices factor and solve each group of
  // matrices in one pass: their results are lu_factor + lu_solve's, bit for bit, at every order
  // the lane kernels take (37 systems: a tail group on every ISA).
  manual_seed(28);
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 16, 17, 32}) {
      SCOPED_TRACE(fmt::format("{} n={}", dt, n));
      const Tensor A = gaussian({37, n, n}, dt);
      auto [LU, piv] = la::lu_factor(A);
      for (int64_t k : {1, 4}) {
        const Tensor B = gaussian({37, n, k}, dt);
        const Tensor B_before = B.clone();
        EXPECT_TRUE(equal(la::solve(A, B), la::lu_solve(LU, piv, B))) << "k=" << k;
        EXPECT_TRUE(equal(B, B_before));  // the input is not overwritten
      }
      const Tensor v = gaussian({37, n}, dt);  // a batch of vectors
      EXPECT_TRUE(equal(la::solve(A, v), la::lu_solve(LU, piv, v.unsqueeze(-1)).squeeze(-1)));
      const Tensor I = eye(n, std::nullopt, dt).expand({37, n, n});
      EXPECT_TRUE(equal(la::inv(A), la::lu_solve(LU, piv, I)));
      // Two batch dims, and one A broadcast over many right-hand sides (two passes there).
      const Tensor A2 = A.narrow(0, 0, 36).reshape({4, 9, n, n});
      const Tensor B2 = gaussian({4, 9, n, 2}, dt);
      EXPECT_TRUE(
          equal(la::solve(A2, B2).reshape({36, n, 2}),
                la::lu_solve(LU.narrow(0, 0, 36), piv.narrow(0, 0, 36), B2.reshape({36, n, 2}))));
      const Tensor B3 = gaussian({37, n, 1}, dt);
      EXPECT_TRUE(equal(la::solve(A[5], B3), la::lu_solve(LU[5], piv[5], B3)));
      // A singular system in the batch: the error names it; inv_ex reports getrf's info.
      if (n >= 2) {
        Tensor S = A.clone();
        S[20].select(1, n / 2).zero_();
        expect_error_mentions([&] { la::solve(S, B3); },
                              {"linalg.solve", "(Batch element 20)", "singular"});
        auto [Si, info] = la::inv_ex(S);
        auto [SLU, Spiv, Sinfo] = la::lu_factor_ex(S);
        EXPECT_TRUE(equal(info, Sinfo));
        EXPECT_GT(info[20].item<int32_t>(), 0);
      }
    }
  }
}

TEST(LinalgOps, LuSolveFourForms) {
  manual_seed(26);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {1, 6, 140}) {
      const Tensor A = gaussian({2, n, n}, dt);
      auto [LU, piv] = la::lu_factor(A);
      for (int v = 0; v < 4; ++v) {
        const bool left = v & 1, adj = v & 2;
        SCOPED_TRACE(fmt::format("{} n={} left={} adjoint={}", dt, n, left, adj));
        const Tensor B = left ? gaussian({2, n, 3}, dt) : gaussian({2, 3, n}, dt);
        const Tensor X = la::lu_solve(LU, piv, B, left, adj);
        const double r = max_ratio(2, n, dt, [&](int64_t b) {
          LMat a = to_lmat(A[b]);
          if (adj) a = adjoint(a);
          const LMat x = to_lmat(X[b]);
          return std::pair{frob_diff(left ? matmul(a, x) : matmul(x, a), to_lmat(B[b])),
                           frob(a) * frob(x)};
        });
        EXPECT_LE(r, 8.0);
      }
    }
  }
  auto [LU, piv] = la::lu_factor(eye(2));
  expect_error_mentions(
      [&] {
        la::lu_solve(LU, tensor<int32_t>({1, 3}), ones({2, 1}));
      },
      {"linalg.lu_solve", "pivots", "[1, 2]", "3"});
  expect_error_mentions(
      [&] {
        la::lu_solve(LU, tensor<int32_t>({0, 2}), ones({2, 1}));
      },
      {"linalg.lu_solve", "pivots", "[1, 2]", "got 0 at index 0"});
  expect_error_mentions(
      [&] {
        la::lu_solve(LU, piv.to(kInt64), ones({2, 1}));
      },
      {"linalg.lu_solve", "pivots", "int32", "int64"});
  expect_error_mentions(
      [&] {
        la::lu_solve(LU, piv, ones({3, 1}));
      },
      {"linalg.lu_solve", "AX = B", "2x2", "3x1"});
  expect_error_mentions(
      [&] {
        la::lu_solve(LU, piv, ones({2, 3}), false);
      },
      {"linalg.lu_solve", "XA = B", "2x2", "2x3"});
}

TEST(LinalgOps, SolveInvDetSlogdet) {
  manual_seed(27);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {0, 1, 2, 3, 17, 160}) {
      for (Kind kind : {Kind::kRandom, Kind::kIllConditioned, Kind::kDiagonal}) {
        SCOPED_TRACE(fmt::format("{} n={} {}", dt, n, kind_name(kind)));
        const Tensor A = make_matrix({3}, n, dt, kind);
        const Tensor B = gaussian({3, n}, dt);  // a batch of vectors
        const Tensor x = la::solve(A, B);
        ASSERT_EQ(x.sizes(), B.sizes());
        const Tensor Ainv = la::inv(A);
        const double r = max_ratio(3, n, dt, [&](int64_t b) {
          const LMat a = to_lmat(A[b]), xv = to_lmat(x[b].unsqueeze(1));
          return std::pair{frob_diff(matmul(a, xv), to_lmat(B[b].unsqueeze(1))),
                           frob(a) * frob(xv)};
        });
        EXPECT_LE(r, 4.0);
        const double ri = max_ratio(3, n, dt, [&](int64_t b) {
          const LMat a = to_lmat(A[b]), xi = to_lmat(Ainv[b]);
          return std::pair{frob_diff(matmul(a, xi), to_lmat(eye(n, n, dt))), frob(a) * frob(xi)};
        });
        EXPECT_LE(ri, 4.0);
        // det = sign * exp(logabsdet), and for a diagonal matrix the product of the diagonal.
        const Tensor d = la::det(A);
        auto [sign, logabs] = la::slogdet(A);
        EXPECT_EQ(logabs.dtype(), to_real_type(dt));
        const Tensor rebuilt = sign.mul(logabs.exp().to(dt));
        // Where |det| overflows the dtype (a random 160 x 160 matrix's is ~1e142), det is not
        // finite and only slogdet carries the value.
        const double max_log = to_real_type(dt) == kFloat32 ? std::log(3.4e38) : std::log(1.79e308);
        for (int64_t b = 0; b < 3; ++b) {
          if (logabs[b].item<double>() < max_log - 1) {
            EXPECT_TRUE(allclose(d[b].to(kComplex128), rebuilt[b].to(kComplex128), 1e-4, 0));
          } else {
            EXPECT_FALSE(isfinite(d[b].to(kComplex128)).item<bool>()) << "batch element " << b;
          }
        }
        if (kind == Kind::kDiagonal) {
          const Tensor want = A.diagonal(0, -2, -1).to(kComplex128).prod(-1);
          EXPECT_TRUE(allclose(d.to(kComplex128), want, 1e-5, 0));
        }
      }
    }
  }
}

TEST(LinalgOps, SingularInputRaisesOrReportsInfo) {
  for (ScalarType dt : kDtypes) {
    Tensor A = eye(3, 3, dt).expand({2, 3, 3}).contiguous();
    A[1].select(1, 1).zero_();  // batch element 1: U[2,2] == 0
    expect_error_mentions(
        [&] {
          la::solve(A, ones({2, 3}, dt));
        },
        {"linalg.solve", "(Batch element 1)", "singular"});
    expect_error_mentions([&] { la::inv(A); },
                          {"linalg.inv", "(Batch element 1)", "diagonal element 2 is zero"});
    expect_error_mentions([&] { la::lu_factor(A); },
                          {"linalg.lu_factor", "(Batch element 1)", "U[2,2] is zero"});
    auto [LU, piv, info] = la::lu_factor_ex(A);
    EXPECT_TRUE(equal(info, tensor<int32_t>({0, 2})));
    auto [Ai, info2] = la::inv_ex(A);
    EXPECT_TRUE(equal(info2, tensor<int32_t>({0, 2})));
    EXPECT_EQ(la::det(A)[1].to(kComplex128).item<complex128>(), complex128(0));
    auto [sign, logabs] = la::slogdet(A);
    EXPECT_EQ(sign[1].to(kComplex128).item<complex128>(), complex128(0));
    EXPECT_EQ(logabs[1].item<double>(), -std::numeric_limits<double>::infinity());
    // lu() does not raise.
    auto [P, L, U] = la::lu(A);
    EXPECT_EQ(U.sizes(), A.sizes());
  }
}

TEST(LinalgOps, ZeroSizedBatchesAndMatrices) {
  EXPECT_EQ(la::cholesky(empty({0, 3, 3})).sizes(), (DimVector{0, 3, 3}));
  EXPECT_EQ(la::inv(empty({2, 0, 0})).sizes(), (DimVector{2, 0, 0}));
  EXPECT_TRUE(equal(la::det(empty({2, 0, 0})), ones({2})));
  auto [sign, logabs] = la::slogdet(empty({0, 0}));
  EXPECT_EQ(sign.item<float>(), 1.0f);
  EXPECT_EQ(logabs.item<float>(), 0.0f);
  EXPECT_EQ(la::solve(empty({0, 4, 4}), empty({0, 4, 2})).sizes(), (DimVector{0, 4, 2}));
  auto [LU, piv] = la::lu_factor(empty({3, 0, 5}));
  EXPECT_EQ(piv.sizes(), (DimVector{3, 0}));
}

TEST(LinalgOps, BadInputErrors) {
  const Tensor sq = eye(3);
  for (auto fn : std::vector<std::function<void()>>{[] {
                                                      la::cholesky(ones({2, 3}));
                                                    },
                                                    [] {
                                                      la::inv(ones({2, 3}));
                                                    },
                                                    [] {
                                                      la::det(ones({2, 3}));
                                                    },
                                                    [] {
                                                      la::slogdet(ones({4, 2, 3}));
                                                    },
                                                    [] {
                                                      la::solve(ones({2, 3}), ones({2}));
                                                    }}) {
    expect_error_mentions(fn, {"expected a batch of square matrices", "2 by 3"});
  }
  expect_error_mentions(
      [] {
        la::cholesky(ones({2, 2}, kInt32));
      },
      {"linalg.cholesky", "'A'", "float32, float64, complex64", "int32"});
  expect_error_mentions(
      [] {
        la::lu_factor(ones({2, 2}, kFloat16));
      },
      {"linalg.lu_factor", "float16"});
  expect_error_mentions([] { la::cholesky(ones({2})); },
                        {"linalg.cholesky", "at least 2 dimensions", "1 dims"});
  expect_error_mentions([&] { la::solve(sq, ones({3}, kFloat64)); },
                        {"linalg.solve", "same dtype", "float32", "float64"});
  expect_error_mentions(
      [&] {
        la::solve(sq.expand({3, 3, 3}), ones({4, 3, 1}));
      },
      {"linalg.solve", "3", "4"});
  expect_error_mentions([&] { la::solve(sq, ones({2})); },
                        {"linalg.solve", "AX = B", "3x3", "2x1"});
  expect_error_mentions([&] { la::lu_factor(sq, false); },
                        {"linalg.lu_factor", "pivot", "not implemented"});
}

TEST(LinalgOps, InputsThatRequireGradThrowNotImplemented) {
  const Tensor A = eye(3).requires_grad_();
  for (auto fn : std::vector<std::function<void()>>{[&] { la::cholesky(A); }, [&] { la::inv(A); },
                                                    [&] { la::det(A); }, [&] { la::lu_factor(A); },
                                                    [&] { la::solve(A, ones({3})); },
                                                    [&] {
                                                      la::solve_triangular(A, ones({3, 1}), true);
                                                    }}) {
    expect_error_mentions(fn, {"linalg.", "derivative is not implemented"});
  }
  autograd::NoGradGuard no_grad;
  EXPECT_TRUE(equal(la::inv(A), eye(3)));
}

}  // namespace
}  // namespace tessera::linalg_test
