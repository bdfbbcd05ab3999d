// The GEMM engine (src/gemm) against its float64 oracle: every ISA table this CPU runs,
// float32 and float64, all operand layouts, odd sizes, alpha/beta combinations, garbage in C
// when beta is 0, sentinels around C, and bitwise equality across thread counts.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "gemm/blocksizes.h"
#include "gemm_test_util.h"
#include "tessera/core/error.h"
#include "tessera/core/parallel.h"

namespace tessera::gemm::testing {
namespace {

struct Shape {
  int64_t m, n, k;
};

// Odd sizes around every MR/NR (4..32) and KC edge, K of 0 and 1, and primes.
const std::vector<Shape> kShapes = {
    {0, 0, 0},    {0, 5, 3},     {5, 0, 3},    {1, 1, 0},      {3, 7, 0},    {1, 1, 1},
    {2, 3, 1},    {7, 17, 1},    {1, 31, 5},   {31, 1, 5},     {2, 2, 2},    {3, 3, 3},
    {7, 7, 7},    {17, 17, 17},  {31, 31, 31}, {65, 65, 65},   {12, 32, 16}, {13, 33, 17},
    {11, 31, 15}, {24, 64, 9},   {6, 16, 4},   {5, 15, 3},     {4, 8, 2},    {1, 65, 17},
    {65, 1, 17},  {17, 65, 257}, {37, 41, 43}, {97, 89, 83},   {101, 7, 61}, {3, 101, 59},
    {257, 31, 7}, {31, 257, 5},  {2, 3, 300},  {61, 67, 1031}, {129, 47, 3}, {257, 257, 65},
};

struct AlphaBeta {
  double alpha, beta;
};
const std::vector<AlphaBeta> kAlphaBeta = {{1, 0}, {1, 1}, {-0.5, 2}, {0, 0.5},
                                           {2, 0}, {0, 0}, {1.5, -1}};

template <class T>
void run_case(const cpu::GemmKernels* kernels, Shape s, Layout la, Layout lb, Layout lc,
              AlphaBeta ab, std::mt19937_64& rng, bool nan_in_c) {
  GuardedMatrix<T> a(s.m, s.k, la), b(s.k, s.n, lb), c(s.m, s.n, lc);
  a.fill_random(rng);
  b.fill_random(rng);
  if (nan_in_c) {
    c.fill(std::numeric_limits<T>::quiet_NaN());
  } else {
    c.fill_random(rng);
  }
  const GuardedMatrix<T> before = c;
  const GemmProblem p = make_problem<T>(s.m, s.n, s.k, a, b, c, ab.alpha, ab.beta);
  gemm(p, kernels);
  SCOPED_TRACE(::testing::Message() << "A " << layout_name(la) << ", B " << layout_name(lb)
                                    << ", C " << layout_name(lc));
  EXPECT_TRUE(matches_reference<T>(p, a, b, before, c));
}

template <class T>
void sweep(const cpu::GemmKernels* kernels, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int variant = 0;
  for (const Shape& s : kShapes) {
    for (int rep = 0; rep < 4; ++rep, ++variant) {
      const int layouts = variant % 27;
      const AlphaBeta ab = kAlphaBeta[variant % kAlphaBeta.size()];
      run_case<T>(kernels, s, kLayouts[layouts / 9], kLayouts[(layouts / 3) % 3],
                  kLayouts[layouts % 3], ab, rng, ab.beta == 0);
    }
  }
}

TEST(GemmEngine, EveryIsaFloat32OddShapes) {
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    sweep<float>(nk.kernels, 1);
  }
}

TEST(GemmEngine, EveryIsaFloat64OddShapes) {
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    sweep<double>(nk.kernels, 2);
  }
}

// All 27 layout combinations and every alpha/beta pair at one shape with edges in both
// directions, for both dtypes and every ISA.
TEST(GemmEngine, AllLayoutsAllAlphaBeta) {
  std::mt19937_64 rng(3);
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    for (Layout la : kLayouts)
      for (Layout lb : kLayouts)
        for (Layout lc : kLayouts)
          for (const AlphaBeta& ab : kAlphaBeta) {
            run_case<float>(nk.kernels, {29, 37, 23}, la, lb, lc, ab, rng, false);
            run_case<double>(nk.kernels, {29, 37, 23}, la, lb, lc, ab, rng, false);
          }
  }
}

TEST(GemmEngine, BetaZeroNeverReadsC) {
  std::mt19937_64 rng(4);
  for (const auto& nk : runnable_kernels()) {
    for (Shape s : {Shape{13, 35, 9}, Shape{64, 64, 64}, Shape{5, 5, 0}, Shape{300, 70, 300}}) {
      GuardedMatrix<float> a(s.m, s.k, Layout::RowMajor), b(s.k, s.n, Layout::RowMajor);
      GuardedMatrix<float> c(s.m, s.n, Layout::RowMajor);
      a.fill_random(rng);
      b.fill_random(rng);
      c.fill(std::numeric_limits<float>::quiet_NaN());
      gemm(make_problem<float>(s.m, s.n, s.k, a, b, c, 1.0, 0.0), nk.kernels);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) ASSERT_FALSE(std::isnan(c.at(i, j))) << nk.isa;
      EXPECT_TRUE(c.sentinels_intact());
    }
  }
}

// alpha == 0 reads neither A nor B (BLAS semantics): NaN there does not reach C.
TEST(GemmEngine, AlphaZeroSkipsProduct) {
  GuardedMatrix<double> a(4, 5, Layout::RowMajor), b(5, 6, Layout::RowMajor);
  GuardedMatrix<double> c(4, 6, Layout::RowMajor);
  a.fill(std::numeric_limits<double>::quiet_NaN());
  b.fill(1.0);
  c.fill(2.0);
  gemm(make_problem<double>(4, 6, 5, a, b, c, 0.0, 0.5));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(c.at(i, j), 1.0);
}

// NaN and Inf in the inputs propagate as in any dot product.
TEST(GemmEngine, NanInputsPropagate) {
  GuardedMatrix<float> a(20, 20, Layout::RowMajor), b(20, 20, Layout::RowMajor);
  GuardedMatrix<float> c(20, 20, Layout::RowMajor);
  a.fill(1.0f);
  b.fill(1.0f);
  a.at(3, 7) = std::numeric_limits<float>::quiet_NaN();
  gemm(make_problem<float>(20, 20, 20, a, b, c, 1.0, 0.0));
  for (int64_t j = 0; j < 20; ++j) EXPECT_TRUE(std::isnan(c.at(3, j)));
  EXPECT_EQ(c.at(2, 0), 20.0f);
}

// Small blocksizes force every loop (several NC, KC and MC blocks, beta = 1 after the first
// KC block) to run on shapes the test can afford.
TEST(GemmEngine, SmallBlocksExerciseAllLoops) {
  const ScopedGemmBlocks small_blocks("24,16,64");
  std::mt19937_64 rng(5);
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    // m <= MC (the last two) runs the rank-KC loop outside, B packed in column chunks.
    for (Shape s :
         {Shape{100, 150, 70}, Shape{67, 131, 33}, Shape{5, 200, 47}, Shape{20, 150, 70}}) {
      for (const AlphaBeta& ab : {AlphaBeta{1, 0}, AlphaBeta{0.5, -2}}) {
        run_case<float>(nk.kernels, s, Layout::RowMajor, Layout::ColMajor, Layout::RowMajor, ab,
                        rng, ab.beta == 0);
        run_case<double>(nk.kernels, s, Layout::General, Layout::RowMajor, Layout::ColMajor, ab,
                         rng, ab.beta == 0);
      }
    }
  }
}

// Threads split C only by rows and columns: 1 and 2 threads give the same bits.
TEST(GemmEngine, ThreadCountsGiveIdenticalBits) {
  const int saved = get_num_threads();
  std::mt19937_64 rng(6);
  for (Shape s :
       {Shape{300, 290, 270}, Shape{1000, 50, 300}, Shape{40, 1000, 300}, Shape{257, 257, 600}}) {
    for (Layout lc : {Layout::RowMajor, Layout::ColMajor}) {
      GuardedMatrix<float> a(s.m, s.k, Layout::RowMajor), b(s.k, s.n, Layout::ColMajor);
      GuardedMatrix<float> c1(s.m, s.n, lc);
      a.fill_random(rng);
      b.fill_random(rng);
      c1.fill_random(rng);
      GuardedMatrix<float> c2 = c1;
      set_num_threads(1);
      gemm(make_problem<float>(s.m, s.n, s.k, a, b, c1, 1.25, 0.5));
      set_num_threads(2);
      gemm(make_problem<float>(s.m, s.n, s.k, a, b, c2, 1.25, 0.5));
      EXPECT_EQ(0, std::memcmp(c1.buf.data(), c2.buf.data(), c1.buf.size() * sizeof(float)))
          << s.m << "x" << s.n << "x" << s.k;
    }
  }
  set_num_threads(saved);
}

TEST(GemmEngine, LargeMatchesReferenceOnTwoThreads) {
  const int saved = get_num_threads();
  set_num_threads(2);
  std::mt19937_64 rng(7);
  run_case<float>(nullptr, {515, 523, 611}, Layout::RowMajor, Layout::RowMajor, Layout::RowMajor,
                  {1, 0}, rng, true);
  run_case<double>(nullptr, {301, 517, 290}, Layout::ColMajor, Layout::RowMajor, Layout::RowMajor,
                   {-1, 1}, rng, false);
  set_num_threads(saved);
}

TEST(GemmEngine, StridedBatched) {
  std::mt19937_64 rng(8);
  for (int64_t batch : {1, 3, 8}) {
    for (Shape s : {Shape{7, 9, 5}, Shape{33, 31, 40}, Shape{140, 130, 150}}) {
      // Batch stride of A is 0 for an even batch count: a shared (broadcast) operand.
      const int64_t sa = s.m * s.k, sb = s.k * s.n, sc = s.m * s.n;
      const int64_t a_bs = batch % 2 ? sa : 0;
      std::vector<float> a(sa * batch), b(sb * batch), c(sc * batch + 16, -5.0f);
      std::uniform_real_distribution<float> d(-1, 1);
      for (auto& x : a) x = d(rng);
      for (auto& x : b) x = d(rng);
      std::vector<float> ref = c;
      GemmProblem p;
      p.m = s.m, p.n = s.n, p.k = s.k;
      p.a = a.data(), p.a_rs = s.k, p.a_cs = 1;
      p.b = b.data(), p.b_rs = 1, p.b_cs = s.k;  // transposed B
      p.c = c.data(), p.c_rs = s.n, p.c_cs = 1;
      p.alpha = 1, p.beta = 0;
      gemm_strided_batched(p, batch, a_bs, sb, sc);
      for (int64_t i = 0; i < batch; ++i) {
        GemmProblem q = p;
        q.a = a.data() + i * a_bs, q.b = b.data() + i * sb, q.c = ref.data() + i * sc;
        gemm_reference(q);
      }
      for (size_t x = 0; x < c.size(); ++x)
        ASSERT_NEAR(c[x], ref[x], 1e-5f * (s.k + 2)) << "batch " << batch << " at " << x;
    }
  }
}

// A grouped GEMM: one weight, a different number of rows per problem (MoE experts).
TEST(GemmEngine, GroupedDifferentM) {
  std::mt19937_64 rng(9);
  const int64_t n = 48, k = 40;
  const std::vector<int64_t> ms = {0, 1, 17, 130, 5, 300, 64};
  GuardedMatrix<double> w(k, n, Layout::RowMajor);
  w.fill_random(rng);
  std::vector<GuardedMatrix<double>> xs, ys, before;
  for (int64_t m : ms) {
    xs.emplace_back(m, k, Layout::RowMajor);
    ys.emplace_back(m, n, Layout::RowMajor);
    xs.back().fill_random(rng);
    ys.back().fill(std::numeric_limits<double>::quiet_NaN());
    before.push_back(ys.back());
  }
  std::vector<GemmProblem> problems;
  for (size_t i = 0; i < ms.size(); ++i)
    problems.push_back(make_problem<double>(ms[i], n, k, xs[i], w, ys[i], 1.0, 0.0));
  gemm_grouped(problems);
  for (size_t i = 0; i < ms.size(); ++i)
    EXPECT_TRUE(matches_reference<double>(problems[i], xs[i], w, before[i], ys[i])) << i;
}

// gemm_triangle on C: inside the triangle within the oracle's bound; outside it, C keeps its
// bits (NaN there, which a read would spread to nothing but which a write would replace).
template <class T>
void triangle_case(const cpu::GemmKernels* kernels, Shape s, Triangle t, Layout la, Layout lc,
                   AlphaBeta ab, std::mt19937_64& rng) {
  SCOPED_TRACE(fmt::format("{}x{}x{} {} A {} C {} alpha {} beta {}", s.m, s.n, s.k,
                           t == Triangle::kUpper ? "upper" : "lower", layout_name(la),
                           layout_name(lc), ab.alpha, ab.beta));
  const auto kept = [t](int64_t i, int64_t j) { return t == Triangle::kUpper ? j >= i : j <= i; };
  GuardedMatrix<T> a(s.m, s.k, la), b(s.k, s.n, Layout::RowMajor), c(s.m, s.n, lc);
  a.fill_random(rng);
  b.fill_random(rng);
  c.fill_random(rng);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j)
      if (!kept(i, j)) c.at(i, j) = std::numeric_limits<T>::quiet_NaN();
  const GuardedMatrix<T> before = c;
  const GemmProblem p = make_problem<T>(s.m, s.n, s.k, a, b, c, ab.alpha, ab.beta);
  gemm_triangle(p, t, kernels);
  ASSERT_TRUE(c.sentinels_intact());
  GuardedMatrix<T> ref = before;
  GemmProblem q = p;
  q.c = ref.data();
  gemm_reference(q);  // NaN outside the triangle stays there
  const double eps = std::numeric_limits<T>::epsilon();
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      const T got = c.at(i, j);
      if (!kept(i, j)) {
        ASSERT_TRUE(std::isnan(got)) << "C(" << i << ", " << j << ") outside was written";
        continue;
      }
      double mag = 0;
      for (int64_t x = 0; x < s.k; ++x) mag += std::fabs(double(a.at(i, x)) * b.at(x, j));
      const double bound =
          4.0 * (s.k + 2) * eps *
              (std::fabs(ab.alpha) * mag + std::fabs(ab.beta * double(before.at(i, j)))) +
          1e-300;
      ASSERT_LE(std::fabs(double(got) - double(ref.at(i, j))), bound)
          << "C(" << i << ", " << j << ")";
    }
  }
}

// Odd, square and non-square shapes, both triangles, C row- and column-major (the engine then
// computes C^T, whose triangle is the other one) and general, every ISA, one and two threads,
// and small blocks so that blocks of rows and columns wholly outside the triangle are skipped.
TEST(GemmEngine, TriangleTouchesOnlyItsTriangle) {
  const int saved = get_num_threads();
  std::mt19937_64 rng(10);
  const std::vector<Shape> shapes = {{1, 1, 1},    {5, 5, 0},     {13, 13, 7},   {40, 40, 33},
                                     {97, 97, 64}, {70, 130, 20}, {130, 70, 20}, {300, 300, 90}};
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      int variant = 0;
      for (const Shape& s : shapes)
        for (Triangle t : {Triangle::kUpper, Triangle::kLower})
          for (Layout lc : kLayouts) {
            const AlphaBeta ab = kAlphaBeta[variant++ % kAlphaBeta.size()];
            triangle_case<float>(nk.kernels, s, t, Layout::ColMajor, lc, ab, rng);
            triangle_case<double>(nk.kernels, s, t, Layout::RowMajor, lc, ab, rng);
          }
    }
  }
  set_num_threads(1);
  const ScopedGemmBlocks small_blocks("24,16,64");
  for (Shape s : {Shape{150, 150, 40}, Shape{100, 200, 35}, Shape{20, 150, 70}})
    for (Triangle t : {Triangle::kUpper, Triangle::kLower}) {
      triangle_case<float>(nullptr, s, t, Layout::ColMajor, Layout::RowMajor, {1, 1}, rng);
      triangle_case<double>(nullptr, s, t, Layout::RowMajor, Layout::ColMajor, {-1, 0.5}, rng);
    }
  set_num_threads(saved);
}

// Inside its triangle gemm_triangle gives gemm()'s bits (the same tiles, packed the same way),
// on one thread and two (column slices of equal area instead of gemm()'s grid).
TEST(GemmEngine, TriangleHasTheBitsOfTheFullProduct) {
  const int saved = get_num_threads();
  std::mt19937_64 rng(11);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (Triangle t : {Triangle::kUpper, Triangle::kLower}) {
      GuardedMatrix<float> a(301, 280, Layout::ColMajor), b(280, 301, Layout::RowMajor);
      GuardedMatrix<float> c(301, 301, Layout::RowMajor);
      a.fill_random(rng);
      b.fill_random(rng);
      c.fill_random(rng);
      GuardedMatrix<float> full = c;
      gemm_triangle(make_problem<float>(301, 301, 280, a, b, c, -1.0, 1.0), t);
      gemm(make_problem<float>(301, 301, 280, a, b, full, -1.0, 1.0));
      for (int64_t i = 0; i < 301; ++i)
        for (int64_t j = t == Triangle::kUpper ? i : 0; j <= (t == Triangle::kUpper ? 300 : i); ++j)
          ASSERT_EQ(c.at(i, j), full.at(i, j))
              << threads << " threads, C(" << i << ", " << j << ")";
    }
  }
  set_num_threads(saved);
}

TEST(GemmEngine, BadInputErrors) {
  float x[4] = {};
  GemmProblem p;
  p.m = p.n = p.k = 2;
  p.a = p.b = p.c = x;
  p.a_rs = p.b_rs = p.c_rs = 2;
  p.a_cs = p.b_cs = p.c_cs = 1;
  GemmProblem bad = p;
  bad.dtype = ScalarType::Int32;
  EXPECT_THROW(gemm(bad), TypeError);
  bad = p;
  bad.m = -1;
  EXPECT_THROW(gemm(bad), ValueError);
  bad = p;
  bad.c_rs = 1;  // rows overlap columns
  try {
    gemm(bad);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'c'"), std::string::npos) << e.what();
  }
  bad = p;
  bad.b = nullptr;
  EXPECT_THROW(gemm(bad), ValueError);
  EXPECT_THROW(gemm_strided_batched(p, 2, 4, 4, 0), ValueError);
  expect_error_mentions([&] { gemm_triangle(p, static_cast<Triangle>(7)); },
                        {"gemm_triangle", "'triangle'", "7"});
  bad = p;
  bad.c_rs = 1;
  EXPECT_THROW(gemm_triangle(bad, Triangle::kUpper), ValueError);
  bad = p;
  bad.m = bad.n = int64_t{1} << 40;  // offsets past int64
  bad.c_rs = int64_t{1} << 40;
  EXPECT_THROW(gemm(bad), ValueError);
}

TEST(GemmEngine, BlockSizesAreSane) {
  // Every register tile of the kernels here (and the bf16 pair kernel's 14 x 32 with 2-byte
  // elements) under this machine's caches and a range of others: a 2 MiB L2 with bf16 once
  // gave MC = 1024, not a multiple of MR = 14, and the last tile of a block overran the
  // float32 accumulators.
  std::vector<CacheSizes> caches = {cache_sizes()};
  for (int64_t l1 : {32 << 10, 48 << 10})
    for (int64_t l2 : {256 << 10, 1 << 20, 2 << 20, 8 << 20}) caches.push_back({l1, l2, 32 << 20});
  std::vector<std::pair<int64_t, int64_t>> tiles = {{14, 32}, {14, 16}, {6, 16}, {6, 8}, {4, 8}};
  for (const auto& nk : runnable_kernels())
    tiles.emplace_back(nk.kernels->sgemm.mr, nk.kernels->sgemm.nr);
  for (const CacheSizes& c : caches)
    for (const auto& [mr, nr] : tiles)
      for (int64_t elem : {2, 4, 8, 16}) {
        const BlockSizes b = block_sizes(mr, nr, elem, c);
        SCOPED_TRACE(fmt::format("L1 {} L2 {} element {} B", c.l1d, c.l2, elem));
        EXPECT_EQ(b.mc % b.mr, 0) << to_string(b);
        EXPECT_EQ(b.nc % b.nr, 0) << to_string(b);
        EXPECT_GE(b.kc, kMinKc) << to_string(b);
        EXPECT_LE(b.kc, kMaxKc) << to_string(b);
      }
}

// TESSERA_GEMM_BLOCKS is read once per process and again by reload_block_override(): each
// thread's memoised blocking follows it both ways, and a malformed value is ignored.
TEST(GemmEngine, BlockOverrideIsReadAgainOnReload) {
  const CacheSizes& c = cache_sizes();
  const BlockSizes derived = block_sizes(14, 32, 4, c);
  {
    const ScopedGemmBlocks small_blocks("24,16,64");
    const BlockSizes b = block_sizes(14, 32, 4, c);
    EXPECT_EQ(b.mc, 14) << to_string(b);  // rounded down to MR
    EXPECT_EQ(b.kc, 16) << to_string(b);
    EXPECT_EQ(b.nc, 64) << to_string(b);
    ::setenv("TESSERA_GEMM_BLOCKS", "48,32,128", 1);
    EXPECT_EQ(block_sizes(14, 32, 4, c).kc, 16) << "read once, not on every call";
    reload_block_override();
    EXPECT_EQ(block_sizes(14, 32, 4, c).kc, 32);
    ::setenv("TESSERA_GEMM_BLOCKS", "48,x,128", 1);
    reload_block_override();
    EXPECT_EQ(to_string(block_sizes(14, 32, 4, c)), to_string(derived)) << "malformed: ignored";
  }
  EXPECT_EQ(to_string(block_sizes(14, 32, 4, c)), to_string(derived));
}

}  // namespace
}  // namespace tessera::gemm::testing
