// Helpers for the join / index / sort tests: seeded random tensors with exactly representable
// values, the same values in other memory layouts, and comparisons that report the first
// differing element.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::testing {

inline const std::vector<ScalarType>& all_test_dtypes() {
  static const std::vector<ScalarType> v = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64,
                                            kInt32,   kInt16,   kUInt8,   kBool};
  return v;
}

// Small integers (exact in every dtype, bfloat16 included); bool gets 0/1. Ties are common.
inline Tensor random_tensor(IntArrayRef sizes, ScalarType dtype, std::mt19937& rng, int lo = -40,
                            int hi = 40) {
  const int64_t n = checked_numel(sizes, "test");
  std::vector<double> v(static_cast<size_t>(n));
  if (dtype == kBool) {
    lo = 0;
    hi = 1;
  } else if (dtype == kUInt8) {
    lo = std::max(lo, 0);
  }
  std::uniform_int_distribution<int> dist(lo, hi);
  for (double& x : v) x = dist(rng);
  return tensor<double>(v).reshape(sizes).to(dtype);
}

// Random floats with NaNs, infinities and signed zeros mixed in (float dtypes only).
inline Tensor random_special(IntArrayRef sizes, ScalarType dtype, std::mt19937& rng) {
  const int64_t n = checked_numel(sizes, "test");
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_int_distribution<int> dist(-6, 6);
  std::uniform_int_distribution<int> kind(0, 9);
  for (double& x : v) {
    switch (kind(rng)) {
      case 0:
        x = NAN;
        break;
      case 1:
        x = -0.0;
        break;
      case 2:
        x = 0.0;
        break;
      case 3:
        x = INFINITY;
        break;
      case 4:
        x = -INFINITY;
        break;
      default:
        x = dist(rng) * 0.5;
        break;
    }
  }
  return tensor<double>(v).reshape(sizes).to(dtype);
}

inline Tensor random_index(IntArrayRef sizes, int64_t lo, int64_t hi, std::mt19937& rng) {
  const int64_t n = checked_numel(sizes, "test");
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
  for (int64_t& x : v) x = dist(rng);
  return tensor<int64_t>(v).reshape(sizes);
}

enum class Layout { kContiguous, kTransposed, kSliced };
inline const char* layout_name(Layout l) {
  return l == Layout::kContiguous   ? "contiguous"
         : l == Layout::kTransposed ? "transposed"
                                    : "sliced";
}
inline std::vector<Layout> all_layouts() {
  return {Layout::kContiguous, Layout::kTransposed, Layout::kSliced};
}

// The same values as t in another memory layout: all dims reversed in memory, or every other
// element of a larger buffer along the last dim.
inline Tensor relayout(const Tensor& t, Layout l) {
  if (l == Layout::kContiguous || t.dim() == 0) return t.contiguous();
  if (l == Layout::kTransposed) {
    DimVector rev(static_cast<size_t>(t.dim()));
    for (int64_t d = 0; d < t.dim(); ++d) rev[d] = t.dim() - 1 - d;
    return t.permute(rev).contiguous().permute(rev);
  }
  DimVector big = t.sizes().vec();
  big.back() *= 2;
  Tensor buf = zeros(big, t.dtype());
  Tensor view = buf.slice(-1, 0, std::nullopt, 2);
  view.copy_(t);
  return view;
}

// Element-wise comparison through float64 (NaN equals NaN). tol is relative.
inline ::testing::AssertionResult same_values(const Tensor& got, const Tensor& want,
                                              double tol = 0.0) {
  if (got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(got.dtype()) << " != " << dtype_name(want.dtype());
  }
  if (!(got.sizes() == want.sizes())) {
    return ::testing::AssertionFailure() << "shape " << fmt::format("{}", got.sizes().vec())
                                         << " != " << fmt::format("{}", want.sizes().vec());
  }
  const Tensor g = got.to(kFloat64).contiguous(), w = want.to(kFloat64).contiguous();
  const double* gp = g.data_ptr<double>();
  const double* wp = w.data_ptr<double>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = gp[i], b = wp[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;
    if (tol > 0 && std::abs(a - b) <= tol * std::max(1.0, std::abs(b))) continue;
    return ::testing::AssertionFailure() << "element " << i << ": got " << a << ", want " << b;
  }
  return ::testing::AssertionSuccess();
}

inline std::vector<int64_t> to_vec(const Tensor& t) {
  const Tensor c = t.to(kInt64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

inline std::vector<double> to_dvec(const Tensor& t) {
  const Tensor c = t.to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Relative tolerance for results that accumulate in the dtype itself.
inline double accumulate_tol(ScalarType t) {
  return t == kFloat16 ? 2e-3 : t == kBFloat16 ? 1.6e-2 : t == kFloat32 ? 1e-6 : 0.0;
}

}  // namespace tessera::testing

// Expects `stmt` to throw ErrorType whose message contains `substr`.
#define EXPECT_THROW_MSG(stmt, ErrorType, substr)                                   \
  do {                                                                              \
    try {                                                                           \
      stmt;                                                                         \
      ADD_FAILURE() << "expected " #ErrorType " from " #stmt;                       \
    } catch (const ErrorType& e) {                                                  \
      EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr(substr)) << #stmt;    \
    } catch (const std::exception& e) {                                             \
      ADD_FAILURE() << "expected " #ErrorType " from " #stmt ", got: " << e.what(); \
    }                                                                               \
  } while (0)
