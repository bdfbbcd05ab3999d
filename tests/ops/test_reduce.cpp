// Reductions: the fast paths against the reference implementation on many shapes, dim
// subsets, layouts and dtypes; float32 accuracy against float64; thread-count independence;
// empty inputs; error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ops/reference/reduce_reference.h"
#include "reduce_test_util.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using namespace reduce_testing;
namespace ref = reference;

const std::vector<DimVector>& test_shapes() {
  static const std::vector<DimVector> s = {{},     {1},    {3},       {7},       {17},
                                           {5, 7}, {1, 9}, {4, 1, 6}, {3, 4, 5}, {2, 3, 2, 5}};
  return s;
}
const std::vector<ScalarType>& float_dtypes() {
  static const std::vector<ScalarType> v = {kFloat32, kFloat64, kFloat16, kBFloat16};
  return v;
}
const std::vector<ScalarType>& all_dtypes() {
  static const std::vector<ScalarType> v = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64,
                                            kInt32,   kInt16,   kInt8,    kUInt8,    kBool};
  return v;
}
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> v = {Layout::kContiguous, Layout::kTransposed, Layout::kSliced,
                                        Layout::kExpanded};
  return v;
}

std::string where(IntArrayRef shape, ScalarType dt, Layout l, IntArrayRef dims, bool keepdim) {
  return fmt::format("shape {} dtype {} layout {} dims {} keepdim {}", shape.vec(), dt,
                     layout_name(l), dims.vec(), keepdim);
}

// Runs check(x, dims, keepdim, context) over shapes x layouts x dim subsets x keepdim.
template <class F>
void sweep(const std::vector<ScalarType>& dtypes, F check) {
  std::mt19937 rng(1234);
  for (const DimVector& shape : test_shapes()) {
    for (ScalarType dt : dtypes) {
      Tensor base = random_values(shape, dt, rng);
      for (Layout l : layouts()) {
        Tensor x = relayout(base, l);
        for (const DimVector& dims : dim_subsets(x.dim())) {
          for (bool keepdim : {false, true}) {
            SCOPED_TRACE(where(x.sizes(), dt, l, dims, keepdim));
            check(x, dims, keepdim);
          }
        }
      }
    }
  }
}

TEST(Reduce, SumMatchesReference) {
  sweep(all_dtypes(), [](const Tensor& x, const DimVector& dims, bool keepdim) {
    EXPECT_TRUE(close(sum(x, dims, keepdim), ref::sum(x, dims, keepdim, std::nullopt), 4));
  });
}

TEST(Reduce, MeanMatchesReference) {
  sweep(float_dtypes(), [](const Tensor& x, const DimVector& dims, bool keepdim) {
    EXPECT_TRUE(close(mean(x, dims, keepdim), ref::mean(x, dims, keepdim, std::nullopt)));
  });
}

TEST(Reduce, AmaxAminMatchReference) {
  sweep(all_dtypes(), [](const Tensor& x, const DimVector& dims, bool keepdim) {
    if (x.numel() == 0) return;
    EXPECT_TRUE(close(amax(x, dims, keepdim), ref::amax(x, dims, keepdim)));
    EXPECT_TRUE(close(amin(x, dims, keepdim), ref::amin(x, dims, keepdim)));
  });
}

TEST(Reduce, CountAllAnyMatchReference) {
  sweep(all_dtypes(), [](const Tensor& x, const DimVector& dims, bool keepdim) {
    EXPECT_TRUE(close(count_nonzero(x, dims), ref::count_nonzero(x, dims)));
    EXPECT_TRUE(close(all(x, dims, keepdim), ref::all(x, dims, keepdim)));
    EXPECT_TRUE(close(any(x, dims, keepdim), ref::any(x, dims, keepdim)));
  });
}

TEST(Reduce, VarStdMatchReference) {
  sweep(float_dtypes(), [](const Tensor& x, const DimVector& dims, bool keepdim) {
    for (double c : {0.0, 1.0}) {
      auto [v, m] = ref::var_mean(x, dims, c, keepdim, false);
      EXPECT_TRUE(close(var(x, dims, c, keepdim), v));
      auto [vm_v, vm_m] = var_mean(x, dims, c, keepdim);
      EXPECT_TRUE(close(vm_v, v));
      EXPECT_TRUE(close(vm_m, m));
      EXPECT_TRUE(close(tessera::std(x, dims, c, keepdim),
                        std::get<0>(ref::var_mean(x, dims, c, keepdim, true))));
    }
  });
}

TEST(Reduce, NormMatchesReference) {
  const double inf = std::numeric_limits<double>::infinity();
  sweep(float_dtypes(), [&](const Tensor& x, const DimVector& dims, bool keepdim) {
    for (double p : {2.0, 1.0, 0.0, inf, -inf, 3.0, 0.5}) {
      SCOPED_TRACE(fmt::format("p = {}", p));
      EXPECT_TRUE(close(norm(x, p, dims, keepdim), ref::norm(x, p, dims, keepdim), 1,
                        2 * rel_tol(x.dtype()) + 1e-6));
    }
  });
}

TEST(Reduce, LogsumexpMatchesReference) {
  sweep({kFloat32, kFloat64, kInt32, kBool},
        [](const Tensor& x, const DimVector& dims, bool keepdim) {
          EXPECT_TRUE(close(logsumexp(x, dims, keepdim), ref::logsumexp(x, dims, keepdim)));
        });
}

TEST(Reduce, ProdMatchesReference) {
  std::mt19937 rng(7);
  for (const DimVector& shape : test_shapes()) {
    for (ScalarType dt : all_dtypes()) {
      Tensor base = is_floating_point(dt) ? random_values(shape, dt, rng)
                                          : random_values(shape, dt, rng, -2, 2);
      for (Layout l : layouts()) {
        Tensor x = relayout(base, l);
        SCOPED_TRACE(where(x.sizes(), dt, l, {}, false));
        EXPECT_TRUE(close(prod(x), ref::prod(x, std::nullopt, false, std::nullopt)));
        for (int64_t d = 0; d < x.dim(); ++d) {
          for (bool keepdim : {false, true}) {
            EXPECT_TRUE(close(prod(x, d, keepdim), ref::prod(x, d, keepdim, std::nullopt)));
          }
        }
      }
    }
  }
}

TEST(Reduce, ArgExtremesMatchReference) {
  std::mt19937 rng(99);
  for (const DimVector& shape : test_shapes()) {
    for (ScalarType dt : all_dtypes()) {
      Tensor base = random_values(shape, dt, rng, -2, 2);  // many ties
      if (base.numel() == 0) continue;
      for (Layout l : layouts()) {
        Tensor x = relayout(base, l);
        SCOPED_TRACE(where(x.sizes(), dt, l, {}, false));
        if (dt != kBool) {
          EXPECT_TRUE(close(argmax(x), ref::argmax(x, std::nullopt, false)));
          EXPECT_TRUE(close(argmin(x, std::nullopt, true), ref::argmin(x, std::nullopt, true)));
        }
        for (int64_t d = 0; d < std::max<int64_t>(x.dim(), 1); ++d) {
          for (bool keepdim : {false, true}) {
            auto [v, i] = max(x, d, keepdim);
            auto [rv, ri] = ref::max(x, d, keepdim);
            EXPECT_TRUE(close(v, rv));
            EXPECT_TRUE(close(i, ri));
            auto [v2, i2] = min(x, d, keepdim);
            auto [rv2, ri2] = ref::min(x, d, keepdim);
            EXPECT_TRUE(close(v2, rv2));
            EXPECT_TRUE(close(i2, ri2));
          }
        }
      }
    }
  }
}

TEST(Reduce, NaNPropagatesAndIsTheExtreme) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor<float>({1, 5, nan, 7, nan, -3});
  EXPECT_TRUE(std::isnan(amax(x).item<double>()));
  EXPECT_TRUE(std::isnan(amin(x).item<double>()));
  EXPECT_EQ(argmax(x).item<int64_t>(), 2);
  EXPECT_EQ(argmin(x).item<int64_t>(), 2);
  EXPECT_TRUE(std::isnan(sum(x).item<double>()));
  EXPECT_TRUE(std::isnan(norm(x, INFINITY).item<double>()));
  EXPECT_TRUE(std::isnan(var(x).item<double>()));
  // Long rows: a NaN far in, several blocks and chunks later.
  Tensor big = zeros({100003});
  big.data_ptr<float>()[70001] = nan;
  big.data_ptr<float>()[90001] = nan;
  EXPECT_EQ(argmax(big).item<int64_t>(), 70001);
  EXPECT_EQ(argmin(big).item<int64_t>(), 70001);
  EXPECT_TRUE(std::isnan(var(big).item<double>()));
  Tensor inf_far = zeros({100003});
  inf_far.data_ptr<float>()[70001] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(var(inf_far).item<double>()));  // as PyTorch: inf - inf
  Tensor col = zeros({9000, 3});
  col.data_ptr<float>()[5000 * 3 + 1] = nan;
  auto [v, i] = max(col, 0);
  EXPECT_EQ(i.data_ptr<int64_t>()[1], 5000);
  EXPECT_TRUE(std::isnan(v.data_ptr<float>()[1]));
}

// The extreme kernels run the instruction's max/min (which drops NaN) with a running sum as
// a NaN detector. Both infinities make that sum NaN without any NaN present (the exact path
// must then still give the true extreme); a real NaN anywhere must win.
TEST(Reduce, FastExtremePathsSeeNaNAndBothInfinities) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = zeros({100003});
  x.data_ptr<float>()[50000] = inf;
  x.data_ptr<float>()[60000] = -inf;
  EXPECT_EQ(amax(x).item<float>(), inf);
  EXPECT_EQ(amin(x).item<float>(), -inf);
  EXPECT_EQ(argmax(x).item<int64_t>(), 50000);
  EXPECT_EQ(argmin(x).item<int64_t>(), 60000);
  EXPECT_EQ(norm(x, INFINITY).item<float>(), inf);

  // Columns: wide enough for the vector paths (two strips and a ragged tail).
  const int64_t K = 301, N = 1100;
  Tensor m = zeros({K, N});
  float* p = m.data_ptr<float>();
  p[7 * N + 20] = inf;
  p[9 * N + 20] = -inf;
  p[150 * N + 1050] = nan;
  p[200 * N + 30] = nan;
  p[210 * N + 30] = inf;
  p[5 * N + 1099] = nan;
  for (const Tensor& t : {m, m.t().contiguous().t()}) {
    const bool cols = t.is_contiguous();
    SCOPED_TRACE(cols ? "columns" : "rows");
    Tensor mx = amax(t, 0), mn = amin(t, 0), ix = argmax(t, 0), in = argmin(t, 0);
    EXPECT_EQ(mx.data_ptr<float>()[20], inf);
    EXPECT_EQ(mn.data_ptr<float>()[20], -inf);
    EXPECT_EQ(ix.data_ptr<int64_t>()[20], 7);
    EXPECT_EQ(in.data_ptr<int64_t>()[20], 9);
    for (int64_t c : {30, 1050, 1099}) {
      EXPECT_TRUE(std::isnan(mx.data_ptr<float>()[c])) << c;
      EXPECT_TRUE(std::isnan(mn.data_ptr<float>()[c])) << c;
    }
    EXPECT_EQ(ix.data_ptr<int64_t>()[30], 200);
    EXPECT_EQ(in.data_ptr<int64_t>()[1050], 150);
    EXPECT_EQ(ix.data_ptr<int64_t>()[1099], 5);
    EXPECT_EQ(mx.data_ptr<float>()[21], 0.0f);
    EXPECT_EQ(ix.data_ptr<int64_t>()[21], 0);
  }
}

TEST(Reduce, FirstIndexOfTies) {
  // The maximum appears in several chunks and blocks: the first index wins.
  Tensor x = zeros({200000});
  float* p = x.data_ptr<float>();
  p[40000] = p[3] = p[150000] = 2;
  EXPECT_EQ(argmax(x).item<int64_t>(), 3);
  Tensor m = zeros({5000, 20});
  m.data_ptr<float>()[4500 * 20 + 7] = 1;
  m.data_ptr<float>()[100 * 20 + 7] = 1;
  EXPECT_EQ(argmax(m, 0).data_ptr<int64_t>()[7], 100);
  // Within a block the first position is found four vectors at a time: the first of two equal
  // maxima at every offset of a 64-element group, and in a row's second block.
  for (int64_t pos : {0, 5, 16, 21, 38, 47, 48, 63, 64, 100, 4095, 4096, 4160, 5000, 8100}) {
    Tensor r = zeros({2, 8192});
    float* q = r.data_ptr<float>();
    const int64_t later = std::min<int64_t>(pos + 9, 8191);
    q[pos] = q[later] = 3;
    q[8192 + pos] = q[8192 + later] = -3;
    EXPECT_EQ(argmax(r, 1).data_ptr<int64_t>()[0], pos) << pos;
    EXPECT_EQ(argmin(r, 1).data_ptr<int64_t>()[1], pos) << pos;
  }
}

TEST(Reduce, TrackedRowArgExtremesFindTheFirstOfTies) {
  // Rows of kTrackedRows (4096) or more keep each lane's extreme and the step it came from
  // (two accumulators of W lanes) and settle the lanes at the end; shorter rows rescan blocks.
  // Values from {-1, -0, +0, 1} tie in every lane; lone extremes sit in the first step, in a
  // later step of either accumulator, and in the tail after the last whole step. The index is
  // the first holding the extreme (+0 and -0 equal) and max()/min() return its own value. A
  // NaN (first one wins) or both infinities in a row take the exact search.
  std::mt19937 rng(23);
  const float vals[] = {-1.0f, -0.0f, 0.0f, 1.0f};
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t K : {4095, 4096, 4097, 4131, 8192, 32768}) {
    const int64_t R = 11;
    std::vector<float> v(static_cast<size_t>(R * K));
    std::uniform_int_distribution<int> pick(0, 3);
    for (float& e : v) e = vals[pick(rng)];
    auto at = [&](int64_t r, int64_t k) -> float& { return v[static_cast<size_t>(r * K + k)]; };
    // Rows whose maximum (row 9) or minimum (row 10) is a zero held as both -0 and +0: the
    // lanes tie, and the value returned must be the first position's own.
    for (int64_t k = 0; k < K; ++k) {
      at(9, k) = vals[pick(rng) % 3];
      at(10, k) = vals[1 + pick(rng) % 3];
    }
    at(1, 3) = 2.0f;           // the first step
    at(2, K / 2 + 17) = 2.0f;  // a later step, second accumulator on AVX-512
    at(2, K - 2) = 2.0f;       // ... and a later tie
    at(3, K - 1) = 2.0f;       // the last element (the tail unless K is a whole step)
    at(4, 40) = -2.0f;         // argmin's
    at(5, 7) = std::nanf("");  // NaNs: the first wins
    at(5, K / 3) = std::nanf("");
    at(6, K - 1) = std::nanf("");  // a NaN in the tail
    at(7, 100) = inf;              // both infinities: the sum flags them, the search settles
    at(7, 200) = -inf;
    for (int64_t k = 0; k < K; ++k) at(8, k) = -inf;  // every value -inf: index 0
    Tensor x = tensor<float>(v).reshape({R, K});
    SCOPED_TRACE(fmt::format("K={}", K));
    auto [mx, ix] = max(x, 1);
    auto [mn, in] = min(x, 1);
    for (int64_t r = 0; r < R; ++r) {
      int64_t bi = 0, si = 0;
      for (int64_t k = 1; k < K; ++k) {
        const float c = at(r, k);
        if (std::isnan(at(r, bi))) break;
        if (std::isnan(c) || c > at(r, bi)) bi = k;
      }
      for (int64_t k = 1; k < K; ++k) {
        const float c = at(r, k);
        if (std::isnan(at(r, si))) break;
        if (std::isnan(c) || c < at(r, si)) si = k;
      }
      ASSERT_EQ(ix.data_ptr<int64_t>()[r], bi) << "argmax row " << r;
      ASSERT_EQ(in.data_ptr<int64_t>()[r], si) << "argmin row " << r;
      const float got_max = mx.data_ptr<float>()[r], got_min = mn.data_ptr<float>()[r];
      ASSERT_EQ(std::isnan(got_max), std::isnan(at(r, bi))) << "max row " << r;
      if (!std::isnan(got_max)) {
        ASSERT_EQ(got_max, at(r, bi));
        ASSERT_EQ(std::signbit(got_max), std::signbit(at(r, bi))) << "max row " << r;
        ASSERT_EQ(got_min, at(r, si));
        ASSERT_EQ(std::signbit(got_min), std::signbit(at(r, si))) << "min row " << r;
      }
    }
    EXPECT_TRUE(close(argmax(x, 1), ix));
    // float64 and bfloat16 rows take the same paths.
    EXPECT_TRUE(close(argmax(x.to(kFloat64), 1), ix));
    EXPECT_TRUE(close(argmin(x.to(kBFloat16), 1), in));
  }
}

TEST(Reduce, ColumnArgExtremesFindTheFirstOfTies) {
  // float32 down columns: the vector path folds eight rows per pass after row 0, one row at a
  // time after the last whole pass, and a column chunk of 4096 rows per call. Values from
  // {-1, -0, +0, 1} tie everywhere; the index is the first row holding the extreme (+0 and -0
  // equal) and max()/min() return that row's own value, sign of zero included.
  std::mt19937 rng(17);
  const float vals[] = {-1.0f, -0.0f, 0.0f, 1.0f};
  for (int64_t K : {1, 2, 8, 9, 10, 17, 64, 4097, 4105}) {
    for (int64_t N : {16, 37, 64}) {
      std::vector<float> v(static_cast<size_t>(K * N));
      std::uniform_int_distribution<int> pick(0, 3);
      for (float& e : v) e = vals[pick(rng)];
      // A lone extreme late in a pass and one in the last rows, so both paths find one.
      if (K > 6) v[static_cast<size_t>(6 * N + 3)] = 2.0f;
      if (K > 9) v[static_cast<size_t>((K - 1) * N + 5)] = -2.0f;
      Tensor x = tensor<float>(v).reshape({K, N});
      SCOPED_TRACE(fmt::format("K={} N={}", K, N));
      auto [mx, ix] = max(x, 0);
      auto [mn, in] = min(x, 0);
      for (int64_t j = 0; j < N; ++j) {
        int64_t bi = 0, si = 0;
        for (int64_t k = 1; k < K; ++k) {
          if (v[k * N + j] > v[bi * N + j]) bi = k;
          if (v[k * N + j] < v[si * N + j]) si = k;
        }
        ASSERT_EQ(ix.data_ptr<int64_t>()[j], bi) << "argmax column " << j;
        ASSERT_EQ(in.data_ptr<int64_t>()[j], si) << "argmin column " << j;
        const float got_max = mx.data_ptr<float>()[j], got_min = mn.data_ptr<float>()[j];
        ASSERT_EQ(got_max, v[bi * N + j]);
        ASSERT_EQ(std::signbit(got_max), std::signbit(v[bi * N + j])) << "max column " << j;
        ASSERT_EQ(got_min, v[si * N + j]);
        ASSERT_EQ(std::signbit(got_min), std::signbit(v[si * N + j])) << "min column " << j;
      }
      EXPECT_TRUE(close(argmax(x, 0), ix));
    }
  }
}

TEST(Reduce, Float32SumIsAccurate) {
  // Cascaded summation: the float32 result is within a few ulp of the float64 sum.
  std::mt19937 rng(5);
  for (int64_t n : {1000003, 4000037}) {
    std::vector<double> v(static_cast<size_t>(n));
    std::uniform_real_distribution<double> d(0.0, 1.0);
    for (double& x : v) x = static_cast<float>(d(rng));
    Tensor x64 = tensor<double>(v);
    Tensor x32 = x64.to(kFloat32);
    const double exact = sum(x64).item<double>();
    EXPECT_NEAR(sum(x32).item<double>(), exact, 4e-7 * exact) << n;
    EXPECT_NEAR(mean(x32).item<double>(), exact / n, 4e-7 * exact / n);
    // Column sums of a tall matrix: also cascaded.
    Tensor tall = x32.narrow(0, 0, n / 1000 * 1000).view({n / 1000, 1000});
    Tensor exact_cols = sum(tall.to(kFloat64), 0);
    EXPECT_TRUE(close(sum(tall, 0), exact_cols.to(kFloat32), 1, 1e-6));
    // Variance of data with a large offset (Welford/Chan keeps it accurate).
    Tensor shifted = (x64 + 1000.0).to(kFloat32);
    EXPECT_NEAR(var(shifted).item<double>(), var(shifted.to(kFloat64)).item<double>(), 1e-3);
  }
}

TEST(Reduce, Float32VarianceIsAccurateWhereverTheDataSits) {
  // Contiguous variance sums deviations from a shift (the mean of the blocks before) in one
  // pass, and redoes a block exactly when its mean lies far from that shift. Each case sits
  // on one side of that decision: stationary data (the one pass), a ramp and levels that jump
  // between blocks (the redo), an outlier as the first element (the first block's shift).
  const int64_t n = 1000003;
  std::mt19937 rng(6);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::pair<const char*, std::vector<double>>> cases;
  auto add = [&](const char* name, auto f) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(f(i));
    cases.emplace_back(name, std::move(v));
  };
  add("stationary, offset 1000", [&](int64_t) { return 1000.0 + normal(rng); });
  add("ramp", [&](int64_t i) { return 1e-3 * static_cast<double>(i) + normal(rng); });
  add("levels jumping every 4096", [&](int64_t i) { return (i / 4096) % 2 * 1e4 + normal(rng); });
  add("outlier first", [&](int64_t i) { return i == 0 ? 1e5 : normal(rng); });
  // Each float32 lane sums 64 terms per block: within about 128 ulp of the float64 variance.
  const double tol = 1e-5;
  for (const auto& [name, v] : cases) {
    Tensor x64 = tensor<double>(v);
    const double exact = var(x64).item<double>();
    const double got = var(x64.to(kFloat32)).item<double>();
    EXPECT_NEAR(got, exact, tol * exact) << name;
    // Rows of a matrix take the same path (two blocks per row here).
    Tensor rows = x64.narrow(0, 0, n / 8192 * 8192).view({-1, 8192});
    EXPECT_TRUE(close(var(rows.to(kFloat32), 1), var(rows, 1).to(kFloat32), 0, tol)) << name;
  }
}

TEST(Reduce, ColumnVarianceAcrossGroupBoundaries) {
  // Down columns, var shifts each group of rows (64 rows, four parts of the rows side by side,
  // where the rows are read in parts; 65 consecutive rows elsewhere) by the group's first row:
  // the group's first pass sets the shift as it folds and its last pass merges each block of
  // columns. Row counts around the groups (a last group of one row too), widths with and
  // without a vector tail, whole rows and a strip of a wider matrix, values far from zero, and
  // an infinity and a NaN as the first value of a group: against the reference.
  std::mt19937 rng(41);
  for (int64_t K : {1, 3, 4, 63, 64, 65, 66, 67, 129, 130, 257, 261}) {
    for (int64_t N : {1, 17, 40}) {
      for (ScalarType dt : {kFloat32, kFloat64, kBFloat16}) {
        Tensor wide = random_values({K, N + 3}, kFloat64, rng).mul(4).add(1000);
        if (K > 65) {
          wide.select(0, 16).narrow(0, 0, 1).fill_(std::numeric_limits<double>::infinity());
          wide.select(0, 65).narrow(0, N > 1 ? 1 : 0, 1).fill_(std::nan(""));
        }
        wide = wide.to(dt);
        for (const Tensor& x : {wide.narrow(1, 0, N).contiguous(), wide.narrow(1, 2, N)}) {
          SCOPED_TRACE(where(x.sizes(), dt,
                             x.is_contiguous() ? Layout::kContiguous : Layout::kSliced, {0},
                             false));
          for (double c : {0.0, 1.0}) {
            auto [v, m] = ref::var_mean(x, {0}, c, false, false);
            EXPECT_TRUE(close(var(x, {0}, c, false), v));
            // The mean beside a variance of a column holding an infinity is NaN, as PyTorch
            // 1.13's var_mean gives it there (the reference's sum / n is the infinity): the
            // infinite column (0) is left out of that comparison.
            const int64_t from = K > 65 ? 1 : 0;
            EXPECT_TRUE(close(std::get<1>(var_mean(x, {0}, c, false)).narrow(0, from, N - from),
                              m.narrow(0, from, N - from)));
          }
        }
      }
    }
  }
}

TEST(Reduce, RowsReadSideBySideEqualRowsAlone) {
  // A rows kernel walks several parts of its rows side by side (kReadStreams); a row's sum,
  // norm, product, extreme, arg-extreme or variance must be the same bits as when it is reduced
  // alone. Row counts leave rows over after the parts; lengths cover short rows, the cascade's
  // blocks with tails, and the blocks of argmax, amax and var (4096 float32; the special rows
  // are described where they are made).
  std::mt19937 rng(29);
  for (int64_t rows : {4, 9, 15}) {
    for (int64_t K : {3, 64, 1000, 1024 * 5 + 7, 8192 + 33}) {
      for (ScalarType dt : {kFloat32, kFloat64, kBFloat16}) {
        Tensor x = random_values({rows, K}, dt, rng);
        SCOPED_TRACE(where(x.sizes(), dt, Layout::kContiguous, {1}, false));
        if (rows > 5) {
          x.select(0, 5).narrow(0, K / 2, 1).fill_(std::nan(""));
          x.select(0, 2).narrow(0, K - 1, 1).fill_(100.0);
          x.select(0, 2).narrow(0, K / 3, 1).fill_(100.0);
          // Row 4's maximum is a zero held as both -0 and +0: which one max returns depends on
          // the order the accumulators meet them.
          Tensor r4 = x.select(0, 4);
          r4.copy_(r4.abs().neg() - 1);
          r4.narrow(0, K / 4, 1).fill_(-0.0);
          r4.narrow(0, std::min(K / 4 + 16, K - 1), 1).fill_(0.0);
          // Row 1's second half sits far from the first's mean: var redoes those blocks.
          x.select(0, 1).narrow(0, K / 2, K - K / 2).add_(50.0);
        }
        const std::vector<Tensor> together = {sum(x, 1),    norm(x, 2, 1), prod(x, 1), argmax(x, 1),
                                              argmin(x, 1), amax(x, 1),    amin(x, 1), var(x, 1)};
        for (int64_t r = 0; r < rows; ++r) {
          const Tensor row = x.select(0, r).clone();
          const std::vector<Tensor> alone = {sum(row),    norm(row), prod(row), argmax(row),
                                             argmin(row), amax(row), amin(row), var(row)};
          for (size_t i = 0; i < alone.size(); ++i)
            EXPECT_TRUE(bitwise_equal(together[i].select(0, r), alone[i]))
                << "result " << i << ", row " << r;
        }
      }
    }
  }
}

TEST(Reduce, ResultsDoNotDependOnThreadCount) {
  std::mt19937 rng(11);
  Tensor big = random_values({3000017}, kFloat32, rng);
  Tensor mat = random_values({9001, 300}, kFloat32, rng);
  Tensor wide = random_values({7, 70001}, kFloat32, rng);
  // Column tiles narrow as threads are added (one tile of 2500 columns for one thread, two
  // of 2048 and 452 for two and three).
  Tensor cols = random_values({600, 2500}, kFloat32, rng);
  auto run = [&]() {
    std::vector<Tensor> r = {sum(big),
                             mean(big),
                             amax(big),
                             argmax(big),
                             var(big),
                             norm(big),
                             sum(mat, 0),
                             sum(mat, 1),
                             var(mat, 0),
                             argmax(mat, 0),
                             sum(wide, 1),
                             norm(wide, 1, 1),
                             var(wide, 1),
                             argmin(wide, 1),
                             logsumexp(wide, 1),
                             softmax(wide, 1),
                             cumsum(mat, 0),
                             sum(mat.t(), 1),
                             sum(big.to(kBFloat16)),
                             var(mat.to(kFloat16), 0),
                             sum(cols, 0),
                             amax(cols, 0),
                             argmax(cols, 0),
                             var(cols, 0),
                             sum(wide, 0)};
    return r;
  };
  const int saved = get_num_threads();
  set_num_threads(1);
  auto one = run();
  set_num_threads(2);
  auto two = run();
  set_num_threads(3);
  auto three = run();
  set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(one[i], two[i])) << "result " << i;
    EXPECT_TRUE(bitwise_equal(one[i], three[i])) << "result " << i;
  }
}

TEST(Reduce, LargeShapesMatchReference) {
  // Rows longer than a chunk, columns taller than a row chunk, many small rows.
  std::mt19937 rng(3);
  for (DimVector shape : {DimVector{2, 70001}, DimVector{9000, 5}, DimVector{5000, 3, 4}}) {
    Tensor x = random_values(shape, kFloat32, rng);
    for (const DimVector& dims : dim_subsets(x.dim())) {
      SCOPED_TRACE(where(x.sizes(), kFloat32, Layout::kContiguous, dims, false));
      EXPECT_TRUE(close(sum(x, dims), ref::sum(x, dims, false, std::nullopt), 8));
      EXPECT_TRUE(close(var(x, dims), std::get<0>(ref::var_mean(x, dims, 1, false, false))));
      EXPECT_TRUE(close(amax(x, dims), ref::amax(x, dims, false)));
      EXPECT_TRUE(close(norm(x, 2, dims), ref::norm(x, 2, dims, false)));
    }
    for (int64_t d = 0; d < x.dim(); ++d) {
      EXPECT_TRUE(close(argmax(x, d), ref::argmax(x, d, false)));
      EXPECT_TRUE(close(std::get<0>(min(x, d)), std::get<0>(ref::min(x, d, false))));
    }
  }
}

TEST(Reduce, RowLengthsAroundTheBlocks) {
  // Row kernels take groups of four vectors, then single vectors, then scalars, and cascade
  // rows of a whole block (64 vectors) or more: lengths on each side of each edge, for every
  // vector width.
  std::mt19937 rng(11);
  for (int64_t K : {1,   5,   8,   9,    16,   17,   31,   33,   63,   64,  65,
                    100, 255, 257, 1023, 1024, 1025, 1090, 2048, 3000, 5000}) {
    for (ScalarType dt : float_dtypes()) {
      Tensor x = random_values({3, K}, dt, rng);
      SCOPED_TRACE(where(x.sizes(), dt, Layout::kContiguous, {1}, false));
      const double scale = 4 * std::sqrt(static_cast<double>(K));
      EXPECT_TRUE(close(sum(x, {1}), ref::sum(x, {1}, false, std::nullopt), scale));
      for (double p : {1.0, 2.0, 3.0})
        EXPECT_TRUE(close(norm(x, p, {1}), ref::norm(x, p, {1}, false), scale)) << "p " << p;
      // Factors near one keep the products finite in every dtype.
      Tensor f = (x * 0.01 + 1.0).to(dt);
      EXPECT_TRUE(close(prod(f, 1), ref::prod(f, 1, false, std::nullopt), 1,
                        8 * rel_tol(dt) * std::sqrt(static_cast<double>(K))));
    }
  }
}

TEST(Reduce, ColumnReductionsOfEveryRowCount) {
  // Down columns the extremes and moments fold eight consecutive rows per pass and the sums
  // four; on AMD, where a problem's rows are whole runs of at most 8192 columns over two or
  // more (batch, 4096-row chunk) tasks, one row of each of four parts of the rows side by side
  // instead (eight such passes to a group of sums, sixteen to one of moments); then the rows
  // left over. A lone extreme in the first and last row, in each part, in the rows left over
  // and past a chunk, for row counts on each side of those edges; columns for whole vectors
  // and a ragged tail, every float dtype; a batch of two with whole rows, and the same with
  // the columns narrowed out of wider rows (the consecutive passes).
  std::mt19937 rng(23);
  for (int64_t K : {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 33, 4096, 4099, 4103}) {
    for (ScalarType dt : float_dtypes()) {
      for (int64_t pad : {0, 11}) {
        const int64_t N = 37, ld = N + pad;
        Tensor wide = random_values({2, K, ld}, dt, rng);
        Tensor f = wide.to(kFloat64);
        double* p = f.data_ptr<double>();
        const int64_t rows[] = {0, K - 1, K / 4, K / 2 + 1, 3 * K / 4, K - 2, 4097};
        for (int64_t b = 0; b < 2; ++b) {
          for (int64_t j = 0; j < N; ++j) {
            const int64_t r = rows[(j + b) % 7];
            if (r < 0 || r >= K) continue;
            p[(b * K + r) * ld + j] = (j % 2 == 0) ? 100.0 : -100.0;
          }
        }
        Tensor x = wide.narrow(2, 0, N), y = f.to(dt).narrow(2, 0, N);
        SCOPED_TRACE(where(y.sizes(), dt, pad ? Layout::kSliced : Layout::kContiguous, {1}, false));
        EXPECT_TRUE(close(amax(y, 1), ref::amax(y, {1}, false)));
        EXPECT_TRUE(close(amin(y, 1), ref::amin(y, {1}, false)));
        const double scale = 4 * std::sqrt(static_cast<double>(K));
        EXPECT_TRUE(close(sum(y, 1), ref::sum(y, {1}, false, std::nullopt), scale));
        EXPECT_TRUE(close(norm(y, 2.0, {1}), ref::norm(y, 2.0, {1}, false), scale));
        // Moments of the values without the planted extremes: a lone +-100 that shifts a group
        // costs its variance ~n ulp of 100^2 (the bound in reduce_kernels.cpp), in any order.
        EXPECT_TRUE(close(var(x, 1), std::get<0>(ref::var_mean(x, {1}, 1, false, false))));
      }
    }
  }
}

TEST(Reduce, DtypesOfResults) {
  Tensor i = tensor<int32_t>({1, 2, 3});
  Tensor b = tensor<bool>({true, false, true});
  EXPECT_EQ(sum(i).dtype(), kInt64);
  EXPECT_EQ(sum(b).dtype(), kInt64);
  EXPECT_EQ(sum(b).item<int64_t>(), 2);
  EXPECT_EQ(prod(i.to(kInt8)).dtype(), kInt64);
  EXPECT_EQ(sum(i, {}, false, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(mean(i, {}, false, kFloat32).item<double>(), 2.0);
  EXPECT_EQ(amax(i).dtype(), kInt32);
  EXPECT_EQ(all(i.to(kUInt8)).dtype(), kUInt8);
  EXPECT_EQ(all(i).dtype(), kBool);
  EXPECT_EQ(count_nonzero(i).dtype(), kInt64);
  EXPECT_EQ(argmax(i).dtype(), kInt64);
  EXPECT_EQ(logsumexp(i, {0}).dtype(), kFloat32);
  EXPECT_EQ(norm(i.to(kFloat16)).dtype(), kFloat16);
  EXPECT_EQ(var(i.to(kBFloat16)).dtype(), kBFloat16);
  // Floats cast element-wise before summing when dtype is an integer type.
  EXPECT_EQ(sum(tensor<float>({1.5f, 2.5f}), {}, false, kInt32).item<int64_t>(), 3);
}

TEST(Reduce, EmptyInputs) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(sum(e).item<double>(), 0.0);
  EXPECT_EQ(prod(e).item<double>(), 1.0);
  EXPECT_TRUE(std::isnan(mean(e).item<double>()));
  EXPECT_TRUE(std::isnan(var(e).item<double>()));
  EXPECT_EQ(sum(e, 0).sizes().vec(), DimVector({3}));
  EXPECT_EQ(sum(e, 0).to(kFloat64).sum().item<double>(), 0.0);
  EXPECT_EQ(sum(e, 1).sizes().vec(), DimVector({0}));
  EXPECT_EQ(amax(e, 1).sizes().vec(), DimVector({0}));
  // The inf norm has no identity: an empty reduced dim is an error, as PyTorch.
  EXPECT_THROW(norm(e, INFINITY, 0), RuntimeError);
  EXPECT_EQ(norm(e, INFINITY, 1).sizes().vec(), DimVector({0}));
  EXPECT_EQ(count_nonzero(e).item<int64_t>(), 0);
  EXPECT_TRUE(all(e).item<bool>());
  EXPECT_FALSE(any(e).item<bool>());
  EXPECT_EQ(logsumexp(e, {0, 1}).item<double>(), -INFINITY);
  auto [v, i] = max(e, 1);
  EXPECT_EQ(v.numel(), 0);
  EXPECT_EQ(i.dtype(), kInt64);
}

TEST(Reduce, ScalarTensors) {
  Tensor s = scalar_tensor(3.5);
  EXPECT_EQ(sum(s, {0}).item<double>(), 3.5);
  EXPECT_EQ(sum(s, {-1}, true).dim(), 0);
  EXPECT_EQ(argmax(s, 0).item<int64_t>(), 0);
  EXPECT_EQ(std::get<0>(max(s, 0)).item<double>(), 3.5);
  EXPECT_TRUE(std::isnan(var(s).item<double>()));
  EXPECT_EQ(median(s).item<double>(), 3.5);
}

TEST(Reduce, MedianMatchesReference) {
  std::mt19937 rng(21);
  for (const DimVector& shape : test_shapes()) {
    for (ScalarType dt : {kFloat32, kFloat64, kInt64, kInt16, kUInt8, kFloat16}) {
      Tensor x = random_values(shape, dt, rng, -3, 3);
      if (x.numel() == 0) continue;
      SCOPED_TRACE(where(x.sizes(), dt, Layout::kContiguous, {}, false));
      EXPECT_TRUE(close(median(x), ref::median(x)));
      for (int64_t d = 0; d < std::max<int64_t>(x.dim(), 1); ++d) {
        for (bool keepdim : {false, true}) {
          auto [v, i] = median(relayout(x, Layout::kTransposed), d, keepdim);
          auto [rv, ri] = ref::median(x, d, keepdim);
          EXPECT_TRUE(close(v, rv));
          EXPECT_TRUE(close(i, ri));
        }
      }
    }
  }
  // Ties: the index of the element at sorted position (n-1)/2 under (value, index) order.
  auto [v, i] = median(tensor<int64_t>({3, 1, 2, 2}), 0);
  EXPECT_EQ(v.item<int64_t>(), 2);
  EXPECT_EQ(i.item<int64_t>(), 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto [nv, ni] = median(tensor<float>({1, nan, 3, nan}), 0);
  EXPECT_TRUE(std::isnan(nv.item<double>()));
  EXPECT_EQ(ni.item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(median(zeros({0})).item<double>()));
}

template <class E, class F>
void expect_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception containing: " << needle;
  } catch (const E& e) {
    EXPECT_THAT(e.what(), HasSubstr(needle));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

TEST(Reduce, ErrorMessages) {
  Tensor x = zeros({3, 4});
  expect_error<IndexError>([&] { sum(x, {2}); }, "sum()");
  expect_error<IndexError>([&] { amax(x, {-3}); }, "amax()");
  expect_error<RuntimeError>([&] { sum(x, {0, -2}); }, "appears multiple times");
  expect_error<RuntimeError>([&] { var(x, {1, 1}); }, "appears multiple times");
  expect_error<TypeError>([&] { mean(tensor<int64_t>({1, 2})); }, "mean(): could not infer");
  expect_error<TypeError>([&] { var(tensor<int64_t>({1, 2})); }, "var()");
  expect_error<TypeError>([&] { norm(tensor<int64_t>({1, 2})); }, "norm()");
  expect_error<TypeError>([&] { argmax(tensor<bool>({true})); }, "argmax()");
  expect_error<TypeError>([&] { median(tensor<bool>({true})); }, "median()");
  expect_error<RuntimeError>([&] { amax(zeros({0})); },
                             "amax(): Expected reduction dim to be specified");
  expect_error<RuntimeError>([&] { zeros({0}).max(); },
                             "max(): Expected reduction dim to be specified");
  expect_error<IndexError>(
      [&] {
        argmax(zeros({0, 2}));
      },
      "argmax(): Expected reduction dim to be specified");
  expect_error<IndexError>(
      [&] {
        amax(zeros({0, 2}), {0});
      },
      "amax(): Expected reduction dim 0 to have non-zero size");
  expect_error<IndexError>(
      [&] {
        max(zeros({0, 2}), 0);
      },
      "max(): Expected reduction dim 0 to have non-zero size");
  expect_error<IndexError>(
      [&] {
        median(zeros({2, 0}), 1);
      },
      "median(): Expected reduction dim 1 to have non-zero size");
  expect_error<IndexError>([&] { argmax(x, 5); }, "argmax()");
}

TEST(Reduce, TensorMethods) {
  Tensor x = arange(12, TensorOptions(kFloat32)).view({3, 4});
  EXPECT_EQ(x.sum().item<double>(), 66);
  EXPECT_EQ(x.sum(-1, true).sizes().vec(), DimVector({3, 1}));
  EXPECT_EQ(x.mean().item<double>(), 5.5);
  EXPECT_EQ(x.amax(0).data_ptr<float>()[3], 11);
  EXPECT_EQ(x.max().item<double>(), 11);
  EXPECT_EQ(x.min().item<double>(), 0);
  EXPECT_EQ(std::get<1>(x.max(1)).data_ptr<int64_t>()[2], 3);
  EXPECT_EQ(x.argmin().item<int64_t>(), 0);
  EXPECT_NEAR(x.std().item<double>(), 3.605551, 1e-5);
  EXPECT_NEAR(x.norm().item<double>(), 22.494444, 1e-4);
  EXPECT_EQ(x.count_nonzero().item<int64_t>(), 11);
  EXPECT_FALSE(x.all().item<bool>());
  EXPECT_TRUE(x.any(1).data_ptr<bool>()[0]);
  EXPECT_EQ(x.prod(1).data_ptr<float>()[0], 0);
  EXPECT_EQ(x.median().item<double>(), 5);
}

}  // namespace
}  // namespace tessera
