// softmax / log_softmax / cumsum / cumprod against the reference implementation over every
// dim of 1-D..4-D shapes, several layouts and dtypes; special values; errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/reduce_kernels.h"
#include "ops/reference/reduce_reference.h"
#include "reduce_test_util.h"
#include "tessera/tessera.h"
#include "test_support.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using namespace reduce_testing;
namespace ref = reference;

const std::vector<DimVector>& shapes() {
  static const std::vector<DimVector> s = {
      {}, {1}, {7}, {17}, {1000}, {5, 7}, {3, 4, 5}, {2, 3, 1, 33}, {0, 4}, {3, 300}, {300, 19}};
  return s;
}

TEST(Softmax, MatchesReferenceOnEveryDim) {
  std::mt19937 rng(17);
  for (const DimVector& shape : shapes()) {
    for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      Tensor base = random_values(shape, dt, rng);
      for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kSliced}) {
        Tensor x = relayout(base, l);
        for (int64_t d = -std::max<int64_t>(x.dim(), 1); d < std::max<int64_t>(x.dim(), 1); ++d) {
          SCOPED_TRACE(fmt::format("shape {} dtype {} layout {} dim {}", x.sizes().vec(), dt,
                                   layout_name(l), d));
          EXPECT_TRUE(close(softmax(x, d), ref::softmax(x, d), 1e-3));
          EXPECT_TRUE(close(log_softmax(x, d), ref::log_softmax(x, d), 1));
        }
      }
    }
  }
}

TEST(Softmax, DtypeArgumentAndSpecialValues) {
  Tensor i = tensor<int64_t>({1, 2});
  EXPECT_EQ(softmax(i, 0, kFloat64).dtype(), kFloat64);
  EXPECT_NEAR(softmax(i, 0, kFloat64).data_ptr<double>()[1], 0.7310585786300049, 1e-15);
  Tensor h = tensor<float>({1, 2}).to(kFloat16);
  EXPECT_EQ(softmax(h, 0, kFloat32).dtype(), kFloat32);
  const float inf = std::numeric_limits<float>::infinity();
  // A row of -inf is NaN (0/0), as PyTorch; a -inf entry among finite ones gets 0.
  Tensor x = tensor<float>({-inf, -inf, -inf, 1, -inf, 1}).view({2, 3});
  Tensor s = softmax(x, 1);
  EXPECT_TRUE(std::isnan(s.data_ptr<float>()[0]));
  EXPECT_EQ(s.data_ptr<float>()[4], 0.0f);
  EXPECT_NEAR(s.data_ptr<float>()[5], 0.5f, 1e-7);
  EXPECT_EQ(log_softmax(x, 1).data_ptr<float>()[4], -inf);
  EXPECT_EQ(x.softmax(-1).sizes().vec(), DimVector({2, 3}));
  EXPECT_EQ(softmax(scalar_tensor(2.0), 0).item<double>(), 1.0);
}

// Outputs of 32 MiB and more are written around the cache from scratch rows, each row's
// stores inside the next row's exp pass where the row starts on a vector boundary
// (src/ops/cpu/softmax_kernels.cpp). The arithmetic is the same as the cached path's, so the
// result must equal, bit for bit, the two halves computed separately (each below the
// threshold; the cached path is checked against the reference above): rows that start off
// the vector alignment (odd K) and on it (K = 1024), float64, log_softmax, one and two threads.
// Outputs stream only where streamed_stores_overlap_compute() (not on AMD); elsewhere this
// checks the row split alone, and StreamedRowsEqualCachedRowsOnEveryIsa below calls the
// streamed kernel directly.
TEST(Softmax, LargeStreamedOutputsEqualTheCachedPath) {
  const int saved = get_num_threads();
  std::mt19937 rng(29);
  for (auto [dt, K] : {std::pair{kFloat32, int64_t{1003}}, std::pair{kFloat32, int64_t{1024}},
                       std::pair{kFloat64, int64_t{1003}}, std::pair{kFloat64, int64_t{1024}}}) {
    const int64_t rows = (int64_t{32} << 20) / (K * element_size(dt)) + 3;
    const Tensor x = random_values({rows, K}, dt, rng);
    const Tensor top = x.narrow(0, 0, rows / 2), bottom = x.narrow(0, rows / 2, rows - rows / 2);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      SCOPED_TRACE(fmt::format("dtype {} K {} threads {}", dt, K, threads));
      EXPECT_TRUE(equal(softmax(x, 1), cat({softmax(top, 1), softmax(bottom, 1)})));
      EXPECT_TRUE(equal(log_softmax(x, 1), cat({log_softmax(top, 1), log_softmax(bottom, 1)})));
    }
  }
  set_num_threads(saved);
}

// The rows kernel of one ISA's table on a contiguous [rows, K] tensor, called directly.
template <class Table>
Tensor run_rows(const Table& table, const Tensor& x, bool log, bool stream) {
  Tensor out = empty(x.sizes(), x.dtype());
  cpu::SoftmaxArgs a;
  a.dtype = x.dtype();
  a.in = x.data_ptr();
  a.out = out.data_ptr();
  a.rows = x.size(0);
  a.K = x.size(1);
  a.in_row_stride = a.out_row_stride = a.K;
  a.log = log;
  a.stream = stream;
  table.softmax_rows(a);
  return out;
}

TEST(Softmax, StreamedRowsEqualCachedRowsOnEveryIsa) {
  // The front end streams softmax's output only where non-temporal stores overlap computation
  // (core/prefetch.h), so the streamed rows kernel (a scratch row written out inside the next
  // row's exp pass) is called here directly, on every ISA this CPU runs: the same bits as the
  // cached rows kernel, rows on and off the vector boundary, one row and many; and each row
  // the same bits as that row alone.
  std::mt19937 rng(31);
  for (const auto& [isa, table] : TS_RUNNABLE_TABLES(softmax_kernels)) {
    for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      for (int64_t K : {1, 15, 16, 1003, 1024}) {
        for (int64_t rows : {1, 2, 9}) {
          SCOPED_TRACE(fmt::format("{} {} K {} rows {}", isa, dt, K, rows));
          const Tensor x = random_values({rows, K}, dt, rng);
          const Tensor cached = run_rows(*table, x, false, false);
          const Tensor streamed = run_rows(*table, x, false, true);
          EXPECT_TRUE(equal(streamed, cached));
          EXPECT_TRUE(close(cached, softmax(x, 1)));
          // Rows pipelined (each scaled inside the next row's exp pass) and a row alone (the
          // row-at-a-time kernel): the same bits, whatever rows a thread's chunk holds.
          for (int64_t r = 0; r < rows; ++r)
            EXPECT_TRUE(equal(run_rows(*table, x.narrow(0, r, 1).contiguous(), false, false),
                              cached.narrow(0, r, 1)))
                << "row " << r;
        }
      }
    }
  }
}

// Rows long enough for the row max's fast loop (four running maxima of the instruction's max,
// which may drop a NaN, checked by two running sums that fall back to the exact loop): a NaN,
// a +inf, a -inf, +inf beside -inf, a NaN beside +inf, -inf everywhere, or values whose sums
// overflow, placed in the first four vectors, in the loop and in the tail, on every ISA this
// CPU runs; softmax, log_softmax and logsumexp against the reference, in float32, float64 and
// bfloat16.
TEST(Softmax, SpecialValuesAnywhereInLongRows) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::mt19937 rng(37);
  for (ScalarType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (int64_t K : {64, 67, 131, 1003}) {
      Tensor base = random_values({K}, kFloat64, rng).mul(20);
      std::vector<Tensor> rows;
      std::vector<std::string> what;
      for (int64_t pos : {int64_t{0}, int64_t{5}, int64_t{40}, K / 2, K - 2, K - 1}) {
        for (auto [v, name] :
             {std::pair{nan, "nan"}, std::pair{inf, "+inf"}, std::pair{-inf, "-inf"}}) {
          Tensor r = base.clone();
          r.data_ptr<double>()[pos] = v;
          rows.push_back(r);
          what.push_back(fmt::format("{} at {}", name, pos));
        }
        Tensor both = base.clone();
        both.data_ptr<double>()[pos] = inf;
        both.data_ptr<double>()[(pos + K / 3) % K] = -inf;
        rows.push_back(both);
        what.push_back(fmt::format("+inf at {} and -inf", pos));
        Tensor nan_inf = base.clone();  // logsumexp: NaN, not the +inf a dropped NaN gives
        nan_inf.data_ptr<double>()[pos] = nan;
        nan_inf.data_ptr<double>()[(pos + K / 3) % K] = inf;
        rows.push_back(nan_inf);
        what.push_back(fmt::format("nan at {} and +inf", pos));
      }
      rows.push_back(full({K}, -inf, kFloat64));
      what.push_back("all -inf");
      rows.push_back(base.clone().fill_(3.4e38));  // sums overflow to inf: no NaN, no fallback
      what.push_back("all 3.4e38");
      const Tensor x = stack(rows).to(dt);
      for (const auto& [isa, table] : TS_RUNNABLE_TABLES(softmax_kernels)) {
        const Tensor got = run_rows(*table, x, false, false);
        const Tensor got_log = run_rows(*table, x, true, false);
        const Tensor want = ref::softmax(x, 1), want_log = ref::log_softmax(x, 1);
        for (int64_t r = 0; r < x.size(0); ++r) {
          SCOPED_TRACE(fmt::format("{} {} K {} row {}: {}", isa, dt, K, r, what[r]));
          EXPECT_TRUE(close(got[r], want[r], 1e-3));
          EXPECT_TRUE(close(got_log[r], want_log[r], 1));
        }
      }
      const Tensor lse = logsumexp(x, {1}), want_lse = ref::logsumexp(x, {1}, false);
      for (int64_t r = 0; r < x.size(0); ++r) {
        SCOPED_TRACE(fmt::format("logsumexp {} K {} row {}: {}", dt, K, r, what[r]));
        EXPECT_TRUE(close(lse[r], want_lse[r], 1));
      }
    }
  }
}

TEST(Softmax, Errors) {
  try {
    softmax(tensor<int64_t>({1, 2}), 0);
    ADD_FAILURE();
  } catch (const TypeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("softmax(): argument 'input' expected a floating point"));
  }
  EXPECT_THROW(softmax(zeros({2, 3}), 2), IndexError);
  EXPECT_THROW(log_softmax(zeros({2, 3}), -3), IndexError);
}

TEST(Logsumexp, SpecialRows) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor<float>({-inf, -inf, inf, 1, nan, 1, 1000, 1000}).view({4, 2});
  Tensor r = logsumexp(x, {1});
  EXPECT_EQ(r.data_ptr<float>()[0], -inf);
  EXPECT_EQ(r.data_ptr<float>()[1], inf);
  EXPECT_TRUE(std::isnan(r.data_ptr<float>()[2]));
  EXPECT_NEAR(r.data_ptr<float>()[3], 1000 + std::log(2.0), 1e-3);
}

TEST(Scan, MatchesReferenceOnEveryDim) {
  std::mt19937 rng(23);
  for (const DimVector& shape : shapes()) {
    for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool}) {
      Tensor base = is_floating_point(dt) ? random_values(shape, dt, rng) * 0.5
                                          : random_values(shape, dt, rng, -2, 2);
      for (Layout l :
           {Layout::kContiguous, Layout::kTransposed, Layout::kSliced, Layout::kExpanded}) {
        Tensor x = relayout(base, l);
        for (int64_t d = -std::max<int64_t>(x.dim(), 1); d < std::max<int64_t>(x.dim(), 1); ++d) {
          SCOPED_TRACE(fmt::format("shape {} dtype {} layout {} dim {}", x.sizes().vec(), dt,
                                   layout_name(l), d));
          // Partial sums can cancel: scale the tolerance by the row length.
          const double scale = 1 + std::sqrt(static_cast<double>(x.numel()));
          EXPECT_TRUE(close(cumsum(x, d), ref::cumsum(x, d), scale));
          if (x.dim() == 0 || x.size(d < 0 ? d + x.dim() : d) <= 40) {
            EXPECT_TRUE(close(cumprod(x, d), ref::cumprod(x, d), 1, 4 * rel_tol(x.dtype()) + 0));
          }
        }
      }
    }
  }
}

TEST(Scan, Dtypes) {
  EXPECT_EQ(cumsum(tensor<bool>({true, true}), 0).dtype(), kInt64);
  EXPECT_EQ(cumsum(tensor<int32_t>({1, 2}), 0).dtype(), kInt64);
  EXPECT_EQ(cumprod(tensor<int32_t>({1, 2}), 0).dtype(), kInt64);
  Tensor f = cumsum(tensor<float>({1.5f, 2.0f}), 0, kInt32);
  EXPECT_EQ(f.dtype(), kInt32);
  EXPECT_EQ(f.data_ptr<int32_t>()[1], 3);
  EXPECT_EQ(cumsum(tensor<float>({1, 2}).to(kFloat16), 0, kFloat32).dtype(), kFloat32);
  EXPECT_EQ(scalar_tensor(5.0).cumsum(-1).item<double>(), 5.0);
  EXPECT_THROW(cumsum(zeros({2}), 1), IndexError);
}

}  // namespace
}  // namespace tessera
