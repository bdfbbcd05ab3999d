// Eager mm / bmm / addmm / matmul on the GEMM engine: strided and transposed views without
// copies, broadcasting, beta == 0 ignoring NaN in self, and the dtypes that still take the
// temporary OpenBLAS path.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>

#include "gemm/gemm.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

// float64 oracle for a 2-D product (gemm_reference on contiguous float64 copies).
Tensor reference_mm(const Tensor& a, const Tensor& b) {
  Tensor a64 = a.to(kFloat64).contiguous(), b64 = b.to(kFloat64).contiguous();
  Tensor c = zeros({a.size(0), b.size(1)}, kFloat64);
  gemm::GemmProblem p;
  p.dtype = kFloat64;
  p.m = a.size(0), p.n = b.size(1), p.k = a.size(1);
  p.a = a64.data_ptr(), p.a_rs = p.k, p.a_cs = 1;
  p.b = b64.data_ptr(), p.b_rs = p.n, p.b_cs = 1;
  p.c = c.data_ptr(), p.c_rs = p.n, p.c_cs = 1;
  gemm::gemm_reference(p);
  return c;
}

double tol(ScalarType t, int64_t k) {
  return (t == kFloat32 ? 2e-6 : 1e-14) * (k + 2) * 4;
}

TEST(GemmOps, MmOnStridedViews) {
  manual_seed(1);
  for (ScalarType t : {kFloat32, kFloat64}) {
    const Tensor a = randn({37, 53}, t);
    const Tensor bt = randn({29, 53}, t).t();                 // transposed view
    const Tensor as = randn({74, 53}, t).slice(0, 0, 74, 2);  // every other row
    const Tensor bs = randn({53, 58}, t).slice(1, 0, 58, 2);  // every other column
    for (const auto& [x, y] :
         {std::pair{a, bt}, std::pair{as, bt}, std::pair{a, bs}, std::pair{as.t().t(), bs}}) {
      const Tensor got = mm(x, y);
      EXPECT_EQ(got.dtype(), t);
      EXPECT_TRUE(allclose(got.to(kFloat64), reference_mm(x, y), 0, tol(t, 53)));
    }
  }
}

// mm runs the engine in one call for the dtypes it takes as they are (no batch views): empty
// sizes, zero-stride (expanded) operands and a column-major result of t() still follow the
// reference, and the dtypes it does not take still go through the batch path.
TEST(GemmOps, MmEdgesOnTheDirectPath) {
  manual_seed(3);
  for (ScalarType t : {kFloat32, kFloat64, kComplex128}) {
    EXPECT_EQ(mm(randn({0, 4}, t), randn({4, 5}, t)).sizes(), IntArrayRef({0, 5}));
    EXPECT_EQ(mm(randn({3, 4}, t), randn({4, 0}, t)).sizes(), IntArrayRef({3, 0}));
    EXPECT_TRUE(equal(mm(randn({3, 0}, t), randn({0, 5}, t)), zeros({3, 5}, t)));
    const Tensor row = randn({1, 6}, t).expand({4, 6});  // stride 0 down the rows
    const Tensor col = randn({6, 1}, t).expand({6, 3});  // stride 0 across the columns
    const Tensor got = mm(row, col);
    EXPECT_EQ(got.dtype(), t);
    if (is_complex(t)) {  // the reference is real: against the same product of copies
      EXPECT_TRUE(allclose(got, mm(row.contiguous(), col.contiguous()), 0, tol(kFloat64, 6)));
    } else {
      EXPECT_TRUE(allclose(got.to(kFloat64), reference_mm(row, col), 0, tol(t, 6)));
    }
  }
  const Tensor i = arange(12, kInt64).view({3, 4}), j = arange(8, kInt64).view({4, 2});
  EXPECT_TRUE(equal(mm(i, j), tensor<int64_t>({28, 34, 76, 98, 124, 162}).view({3, 2})));
}

TEST(GemmOps, BmmExpandedAndTransposed) {
  manual_seed(2);
  const Tensor a = randn({1, 7, 9}).expand({5, 7, 9});  // batch stride 0
  const Tensor b = randn({5, 11, 9}).transpose(1, 2);   // [5, 9, 11], column-major
  const Tensor got = bmm(a, b);
  ASSERT_EQ(got.sizes(), IntArrayRef({5, 7, 11}));
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_TRUE(allclose(got.select(0, i).to(kFloat64),
                         reference_mm(a.select(0, i), b.select(0, i)), 0, tol(kFloat32, 9)));
  // A batch big enough to be split by batch over the pool, and empty batches.
  const Tensor x = randn({64, 16, 24}, kFloat64), y = randn({64, 24, 8}, kFloat64);
  const Tensor z = bmm(x, y);
  EXPECT_TRUE(allclose(z.select(0, 63), reference_mm(x.select(0, 63), y.select(0, 63)), 0,
                       tol(kFloat64, 24)));
  EXPECT_EQ(bmm(randn({0, 3, 4}), randn({0, 4, 5})).sizes(), IntArrayRef({0, 3, 5}));
  EXPECT_TRUE(equal(bmm(randn({2, 3, 0}), randn({2, 0, 5})), zeros({2, 3, 5})));
}

TEST(GemmOps, AddmmBetaZeroIgnoresNanSelf) {
  manual_seed(3);
  const Tensor a = randn({6, 10}), b = randn({10, 5});
  const Tensor self = full({6, 5}, std::numeric_limits<double>::quiet_NaN());
  const Tensor got = addmm(self, a, b, /*beta=*/0, /*alpha=*/2);
  EXPECT_TRUE(allclose(got.to(kFloat64), reference_mm(a, b).mul(2), 0, tol(kFloat32, 10)));
}

TEST(GemmOps, AddmmBroadcastBiasAlphaBeta) {
  manual_seed(4);
  for (ScalarType t : {kFloat32, kFloat64}) {
    const Tensor a = randn({33, 17}, t), b = randn({40, 17}, t).t(), bias = randn({40}, t);
    const Tensor got = addmm(bias, a, b, /*beta=*/0.5, /*alpha=*/-1.5);
    const Tensor expect =
        add(bias.to(kFloat64).mul(0.5).unsqueeze(0), reference_mm(a, b).mul(-1.5));
    EXPECT_TRUE(allclose(got.to(kFloat64), expect, 0, 4 * tol(t, 17)));
  }
  EXPECT_THROW(addmm(randn({3}), randn({2, 4}), randn({4, 5})), Error);
  EXPECT_THROW(addmm(randn({2, 5}), randn({2, 4}), randn({3, 5})), Error);
}

TEST(GemmOps, BaddbmmBroadcastsSelfAndScales) {
  manual_seed(6);
  for (ScalarType t : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor b1 = randn({3, 9, 13}, t), b2 = randn({3, 11, 13}, t).transpose(1, 2);
    for (const Tensor& self : {randn({11}, t), randn({1, 9, 11}, t), randn({3, 9, 11}, t)}) {
      const Tensor got = baddbmm(self, b1, b2, /*beta=*/0.25, /*alpha=*/2);
      ASSERT_EQ(got.sizes(), IntArrayRef({3, 9, 11}));
      EXPECT_EQ(got.dtype(), t);
      const Tensor s64 = self.to(kFloat64).expand({3, 9, 11});
      for (int64_t i = 0; i < 3; ++i) {
        const Tensor expect =
            add(s64.select(0, i).mul(0.25), reference_mm(b1.select(0, i), b2.select(0, i)).mul(2));
        const double tl = t == kBFloat16 ? 0.05 : 4 * tol(t, 13);
        EXPECT_TRUE(allclose(got.select(0, i).to(kFloat64), expect, tl, tl)) << dtype_name(t);
      }
    }
  }
  // beta == 0: NaN in self does not reach the result.
  const Tensor nan_self = full({2, 4, 5}, std::numeric_limits<double>::quiet_NaN());
  const Tensor x = randn({2, 4, 6}), y = randn({2, 6, 5});
  EXPECT_TRUE(allclose(baddbmm(nan_self, x, y, 0, 1), bmm(x, y), 1e-6, 1e-6));
  EXPECT_EQ(baddbmm(zeros({0, 4, 5}), randn({0, 4, 6}), randn({0, 6, 5})).sizes(),
            IntArrayRef({0, 4, 5}));
  Tensor r;
  EXPECT_THROW(r = baddbmm(randn({4, 5}), randn({2, 4, 6}), randn({3, 6, 5})), RuntimeError);
  EXPECT_THROW(r = baddbmm(randn({4, 5}), randn({2, 4, 6}), randn({2, 7, 5})), RuntimeError);
  EXPECT_THROW(r = baddbmm(randn({3, 5}), randn({2, 4, 6}), randn({2, 6, 5})), RuntimeError);
  EXPECT_THROW(r = baddbmm(randn({4, 5}, kFloat64), randn({2, 4, 6}), randn({2, 6, 5})), TypeError);
}

TEST(GemmOps, MatmulFoldsBatchIntoRows) {
  manual_seed(5);
  const Tensor x = randn({2, 3, 5, 7}), w = randn({7, 4});
  const Tensor got = matmul(x, w);
  ASSERT_EQ(got.sizes(), IntArrayRef({2, 3, 5, 4}));
  const Tensor expect = reference_mm(x.reshape({30, 7}), w).reshape({2, 3, 5, 4});
  EXPECT_TRUE(allclose(got.to(kFloat64), expect, 0, tol(kFloat32, 7)));
  // Broadcast batch on the right still goes through bmm.
  const Tensor y = randn({3, 7, 2});
  EXPECT_EQ(matmul(randn({2, 1, 5, 7}), y).sizes(), IntArrayRef({2, 3, 5, 2}));
  EXPECT_THROW(matmul(x, randn({6, 4})), Error);
}

TEST(GemmOps, LargeMmSameBitsOnOneAndTwoThreads) {
  manual_seed(6);
  const int saved = get_num_threads();
  const Tensor a = randn({301, 415}), b = randn({415, 283});
  // complex64: four real products, each thread-count independent.
  const Tensor ca = view_as_complex(randn({301, 415, 2})),
               cb = view_as_complex(randn({415, 283, 2}));
  for (const auto& [x, y] : {std::pair{a, b}, std::pair{ca, cb}}) {
    set_num_threads(1);
    const Tensor one = mm(x, y);
    set_num_threads(2);
    const Tensor two = mm(x, y);
    set_num_threads(saved);
    EXPECT_TRUE(equal(one, two)) << dtype_name(x.dtype());
  }
  EXPECT_TRUE(allclose(mm(a, b).to(kFloat64), reference_mm(a, b), 0, tol(kFloat32, 415)));
}

// float16/bfloat16 compute in float32 on the engine; complex as four real products on it.
TEST(GemmOps, OtherDtypesStillWork) {
  manual_seed(7);
  const Tensor a = randn({9, 12}), b = randn({12, 7});
  for (ScalarType t : {kFloat16, kBFloat16}) {
    const Tensor got = mm(a.to(t), b.to(t));
    EXPECT_EQ(got.dtype(), t);
    EXPECT_TRUE(allclose(got.to(kFloat64), reference_mm(a.to(t), b.to(t)), 0.02, 0.05));
  }
  const Tensor ca = a.to(kComplex64), cb = b.to(kComplex64);
  const Tensor cc = mm(ca, cb);
  EXPECT_EQ(cc.dtype(), kComplex64);
  EXPECT_TRUE(allclose(cc, mm(a, b).to(kComplex64), 1e-5, 1e-5));
}

}  // namespace
}  // namespace tessera
