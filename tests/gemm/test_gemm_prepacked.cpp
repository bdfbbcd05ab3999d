// Prepacked B (gemm::PackedB, gemm_prepacked) and PackedLinearWeight: the same bits as the
// engine on the unpacked operand for every ISA, block layout and thread count, within the
// float64 oracle's bound, and clear errors for what does not fit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <random>

#include "gemm/gemm.h"
#include "gemm_test_util.h"
#include "tessera/tessera.h"

namespace tessera::gemm::testing {
namespace {

struct Shape {
  int64_t m, n, k;
};

template <class T>
void check_prepacked(const cpu::GemmKernels& ks, Shape s, Layout lb, double alpha, double beta,
                     std::mt19937_64& rng) {
  GuardedMatrix<T> a(s.m, s.k, Layout::RowMajor), b(s.k, s.n, lb), c(s.m, s.n, Layout::RowMajor);
  a.fill_random(rng);
  b.fill_random(rng);
  c.fill_random(rng);
  GuardedMatrix<T> plain = c, packed = c;
  GemmProblem p = make_problem<T>(s.m, s.n, s.k, a, b, plain, alpha, beta);
  gemm(p, &ks);
  const PackedB pb(dtype_of<T>(), s.k, s.n, b.data(), b.rs, b.cs, &ks);
  GemmProblem q = make_problem<T>(s.m, s.n, s.k, a, b, packed, alpha, beta);
  q.b = nullptr;  // gemm_prepacked never reads B's own memory
  gemm_prepacked(q, pb);
  EXPECT_TRUE(matches_reference<T>(p, a, b, c, packed));
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j)
      ASSERT_EQ(packed.at(i, j), plain.at(i, j))
          << "C(" << i << ", " << j << ") m=" << s.m << " n=" << s.n << " k=" << s.k;
}

TEST(GemmPrepacked, SameBitsAsUnpackedOnEveryIsa) {
  std::mt19937_64 rng(11);
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    for (Shape s : {Shape{1, 1, 1}, Shape{5, 33, 17}, Shape{64, 96, 300}, Shape{67, 257, 31}}) {
      for (Layout lb : kLayouts) {
        check_prepacked<float>(*nk.kernels, s, lb, 1, 0, rng);
        check_prepacked<double>(*nk.kernels, s, lb, -0.5, 2, rng);
      }
    }
  }
}

// One product three ways: into a row-major C (the small kernel, for small and medium shapes),
// with B prepacked (there read panel by panel), and into a column-major C, which runs packed
// (C^T = B^T A^T: A's rows are then the operand that is packed, and its stride rules the small
// kernel out). The same bits all three ways, within the oracle's bound.
template <class T>
void check_against_packed(const cpu::GemmKernels& ks, Shape s, double alpha, double beta,
                          std::mt19937_64& rng) {
  GuardedMatrix<T> a(s.m, s.k, Layout::RowMajor), b(s.k, s.n, Layout::RowMajor);
  GuardedMatrix<T> c(s.m, s.n, Layout::RowMajor), c_cols(s.m, s.n, Layout::ColMajor);
  a.fill_random(rng);
  b.fill_random(rng);
  c.fill_random(rng);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) c_cols.at(i, j) = c.at(i, j);
  GuardedMatrix<T> rows = c, prepacked = c;
  GemmProblem p = make_problem<T>(s.m, s.n, s.k, a, b, rows, alpha, beta);
  gemm(p, &ks);
  gemm(make_problem<T>(s.m, s.n, s.k, a, b, c_cols, alpha, beta), &ks);
  const PackedB pb(dtype_of<T>(), s.k, s.n, b.data(), b.rs, b.cs, &ks);
  GemmProblem q = make_problem<T>(s.m, s.n, s.k, a, b, prepacked, alpha, beta);
  q.b = nullptr;
  gemm_prepacked(q, pb);
  EXPECT_TRUE(matches_reference<T>(p, a, b, c, rows));
  EXPECT_TRUE(c_cols.sentinels_intact() && prepacked.sentinels_intact());
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      ASSERT_EQ(rows.at(i, j), c_cols.at(i, j)) << "C(" << i << ", " << j << ") packed";
      ASSERT_EQ(rows.at(i, j), prepacked.at(i, j)) << "C(" << i << ", " << j << ") prepacked";
    }
  }
}

// Products of at most 64 x 64 with k within one KC block run the unpacked small kernel
// (driver.cpp), a prepacked B panel by panel, into a column-major C packed: the same bits,
// within the oracle's bound, on every ISA, at every edge of the small kernel's 8-row (4-row),
// two-vector tiles and of its half-width tiles (AVX-512: at most 8 float / 4 double columns
// left).
TEST(GemmPrepacked, SmallKernelHasThePackedBits) {
  std::mt19937_64 rng(13);
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    for (Shape s : {Shape{5, 5, 1}, Shape{7, 9, 7}, Shape{8, 8, 8}, Shape{16, 16, 16},
                    Shape{17, 31, 64}, Shape{33, 48, 300}, Shape{64, 64, 64}, Shape{63, 61, 129},
                    Shape{5, 64, 3}, Shape{64, 5, 2}, Shape{9, 3, 11}, Shape{12, 20, 16}}) {
      check_against_packed<float>(*nk.kernels, s, 1, 0, rng);
      check_against_packed<float>(*nk.kernels, s, 0.75, -1.5, rng);
      check_against_packed<double>(*nk.kernels, s, -0.5, 2, rng);
    }
  }
}

// Medium products (up to 512 x 512, k within one KC block, B within half of L2 or prepacked)
// run on the small kernel too, their rows split among threads in whole 8-row tiles.
TEST(GemmPrepacked, MediumProductsOnTheSmallKernelHaveThePackedBits) {
  const int saved = get_num_threads();
  std::mt19937_64 rng(17);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const auto& nk : runnable_kernels()) {
      for (Shape s : {Shape{65, 66, 67}, Shape{256, 256, 256}, Shape{200, 150, 300},
                      Shape{512, 300, 64}, Shape{131, 500, 17}}) {
        SCOPED_TRACE(::testing::Message() << nk.isa << " threads " << threads << " m=" << s.m
                                          << " n=" << s.n << " k=" << s.k);
        check_against_packed<float>(*nk.kernels, s, 1, 0, rng);
        check_against_packed<float>(*nk.kernels, s, 0.5, -1, rng);
        check_against_packed<double>(*nk.kernels, s, -0.5, 2, rng);
      }
    }
  }
  set_num_threads(saved);
}

// Small blocks: several NC and KC blocks in the pack, threads cutting columns inside them.
TEST(GemmPrepacked, SmallBlocksAndTwoThreads) {
  const ScopedGemmBlocks small_blocks("24,16,64");
  const int saved = get_num_threads();
  std::mt19937_64 rng(12);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const auto& nk : runnable_kernels()) {
      SCOPED_TRACE(nk.isa);
      for (Shape s : {Shape{100, 150, 70}, Shape{300, 333, 65}, Shape{9, 200, 47}}) {
        check_prepacked<float>(*nk.kernels, s, Layout::ColMajor, 1, 0, rng);
        check_prepacked<double>(*nk.kernels, s, Layout::RowMajor, 0.5, -1, rng);
      }
    }
  }
  set_num_threads(saved);
}

// The pack keeps the block sizes it was made with, whatever the environment says later.
TEST(GemmPrepacked, BlockSizesFixedAtPackingTime) {
  std::mt19937_64 rng(13);
  const Shape s{50, 140, 90};
  GuardedMatrix<float> a(s.m, s.k, Layout::RowMajor), b(s.k, s.n, Layout::RowMajor);
  GuardedMatrix<float> c(s.m, s.n, Layout::RowMajor);
  a.fill_random(rng);
  b.fill_random(rng);
  std::optional<PackedB> pb;
  {
    const ScopedGemmBlocks small_blocks("24,16,64");
    pb.emplace(ScalarType::Float32, s.k, s.n, b.data(), b.rs, b.cs);
  }
  GemmProblem p = make_problem<float>(s.m, s.n, s.k, a, b, c, 1, 0);
  gemm_prepacked(p, *pb);
  EXPECT_TRUE(matches_reference<float>(p, a, b, c, c));
}

TEST(GemmPrepacked, ZeroSizesAndBetaOnly) {
  std::vector<float> c(6, 3.0f);
  const PackedB empty_k(ScalarType::Float32, 0, 3, nullptr, 0, 0);
  GemmProblem p;
  p.m = 2, p.n = 3, p.k = 0;
  p.a = nullptr, p.c = c.data(), p.c_rs = 3, p.c_cs = 1, p.beta = 0.5;
  gemm_prepacked(p, empty_k);
  for (float v : c) EXPECT_EQ(v, 1.5f);
  const PackedB empty_n(ScalarType::Float32, 4, 0, nullptr, 0, 0);
  p.n = 0, p.k = 4;
  gemm_prepacked(p, empty_n);  // nothing to do, nothing touched
  EXPECT_EQ(c[0], 1.5f);
}

TEST(GemmPrepacked, BadInputNamesTheProblem) {
  std::vector<float> b(12, 1.0f), a(8, 1.0f), c(8, 0.0f);
  const PackedB pb(ScalarType::Float32, 4, 3, b.data(), 3, 1);
  GemmProblem p;
  p.m = 2, p.n = 3, p.k = 5;
  p.a = a.data(), p.a_rs = 5, p.a_cs = 1, p.c = c.data(), p.c_rs = 3, p.c_cs = 1;
  expect_error_mentions([&] { gemm_prepacked(p, pb); }, {"gemm", "k=4", "n=3", "k=5"});
  p.k = 4, p.dtype = ScalarType::Float64;
  expect_error_mentions([&] { gemm_prepacked(p, pb); }, {"gemm", "float32", "float64"});
  expect_error_mentions([&] { PackedB bad(ScalarType::BFloat16, 4, 3, b.data(), 3, 1); },
                        {"pack_b", "float32 or float64", "bfloat16"});
  expect_error_mentions([&] { PackedB bad(ScalarType::Float32, 4, 3, nullptr, 3, 1); },
                        {"pack_b", "'b'", "null"});
}

}  // namespace
}  // namespace tessera::gemm::testing

namespace tessera {
namespace {

TEST(PackedLinearWeight, MatchesLinearBitForBit) {
  manual_seed(3);
  for (ScalarType t : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const Tensor w = randn({77, 130}).to(t), bias = randn({77}).to(t);
    const PackedLinearWeight pw(w);
    EXPECT_EQ(pw.out_features(), 77);
    EXPECT_EQ(pw.in_features(), 130);
    EXPECT_EQ(pw.dtype(), t);
    for (const Tensor& x : {randn({9, 130}).to(t), randn({2, 5, 130}).to(t),
                            randn({130, 12}).to(t).t()}) {  // strided rows
      EXPECT_TRUE(equal(linear(x, pw, bias), linear(x, w, bias)));
      EXPECT_TRUE(equal(linear(x, pw), linear(x, w)));
    }
    // With few rows the plain linear runs GEMV (different rounding): close, not identical.
    const Tensor x1 = randn({1, 3, 130}).to(t);
    const Tensor got = linear(x1, pw, bias);
    EXPECT_EQ(got.sizes(), (DimVector{1, 3, 77}));
    const double tol = t == kFloat32 || t == kFloat64 ? 1e-5 : 2e-2;
    EXPECT_TRUE(allclose(got.to(kFloat64), linear(x1, w, bias).to(kFloat64), tol, tol));
  }
}

// float8 weights with per-tensor or per-row scales, for bfloat16 inputs: against
// a float64 reference on the same float8 values, and against linear_scaled (the GEMV path).
TEST(PackedLinearWeight, Float8WeightsWithTheirScales) {
  manual_seed(6);
  for (ScalarType wt : {kFloat8_e4m3fn, kFloat8_e5m2})
    for (bool per_row : {false, true})
      for (ScalarType xt : {kBFloat16}) {
        SCOPED_TRACE(fmt::format("{} {} {}", dtype_name(wt), per_row ? "per row" : "per tensor",
                                 dtype_name(xt)));
        const Tensor w = randn({37, 96}).to(wt);
        const Tensor scale = per_row ? rand({37}).add(0.5) : full({1}, 0.75, kFloat32);
        const Tensor bias = randn({37}).to(xt);
        const PackedLinearWeight pw(w, scale);
        EXPECT_EQ(pw.dtype(), wt);
        const Tensor w64 = per_row ? w.to(kFloat64).mul(scale.to(kFloat64).unsqueeze(1))
                                   : w.to(kFloat64).mul(0.75);
        for (const Tensor& x :
             {randn({9, 96}).to(xt), randn({2, 5, 96}).to(xt), randn({96, 12}).to(xt).t()}) {
          const Tensor got = linear(x, pw, bias);
          EXPECT_EQ(got.dtype(), xt);
          const Tensor ref = linear(x.to(kFloat64), w64, bias.to(kFloat64));
          EXPECT_TRUE(allclose(got.to(kFloat64), ref, 1e-2, 2e-2));
          const Tensor gemv = linear_scaled(x, w, scale, 1.0, bias);
          EXPECT_TRUE(allclose(got.to(kFloat64), gemv.to(kFloat64), 1e-2, 2e-2));
        }
      }
}

TEST(PackedLinearWeight, IsASnapshot) {
  manual_seed(4);
  Tensor w = randn({16, 32});
  const PackedLinearWeight pw(w);
  const Tensor x = randn({8, 32});
  const Tensor before = linear(x, w);
  w.mul_(2.0);
  EXPECT_TRUE(equal(linear(x, pw), before));
}

TEST(PackedLinearWeight, BadInputNamesTheArgument) {
  using gemm::testing::expect_error_mentions;
  manual_seed(5);
  const Tensor w = randn({6, 8});
  const PackedLinearWeight pw(w);
  expect_error_mentions([&] { linear(randn({5, 7}), pw); }, {"linear", "in_features 7", "[6, 8]"});
  expect_error_mentions(
      [&] {
        linear(randn({5, 8}).to(kFloat64), pw);
      },
      {"linear", "float64", "float32"});
  expect_error_mentions([&] { linear(randn({5, 8}), pw, randn({5})); }, {"linear", "'bias'"});
  expect_error_mentions(
      [&] {
        linear(randn({5, 8}), PackedLinearWeight());
      },
      {"linear", "empty PackedLinearWeight"});
  expect_error_mentions([&] { PackedLinearWeight(w.to(kFloat8_e4m3fn)); },
                        {"PackedLinearWeight", "float8_e4m3fn", "weight_scale"});
  expect_error_mentions([&] { PackedLinearWeight(w, full({1}, 1.0, kFloat32)); },
                        {"PackedLinearWeight", "float8_e4m3fn or float8_e5m2", "float32"});
  expect_error_mentions([&] { PackedLinearWeight(w.to(kFloat8_e4m3fn), rand({5})); },
                        {"PackedLinearWeight", "weight_scale", "[6]", "[5]"});
  const PackedLinearWeight p8(w.to(kFloat8_e4m3fn), rand({6}));
  expect_error_mentions(
      [&] {
        linear(randn({5, 8}), p8);
      },
      {"linear", "bfloat16 input", "float32", "float8_e4m3fn"});
  const PackedLinearWeight pb(w.to(kBFloat16));
  expect_error_mentions([&] { linear(randn({5, 8}), pb); }, {"linear", "float32", "bfloat16"});
  expect_error_mentions(
      [&] {
        PackedLinearWeight(randn({3, 4, 5}));
      },
      {"PackedLinearWeight", "2-D", "3-D"});
}

}  // namespace
}  // namespace tessera
