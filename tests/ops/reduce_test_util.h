// Helpers for the reduction, softmax and scan tests: seeded random tensors, the same values
// in other layouts (transposed, sliced, expanded), and a comparison with per-dtype relative
// tolerances that treats NaNs in the same place as equal.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::reduce_testing {

// Normal values for floating dtypes; small integers (ties common) for integer dtypes; 0/1
// for bool. Values are exact in every floating dtype after rounding to it.
inline Tensor random_values(IntArrayRef sizes, ScalarType dtype, std::mt19937& rng, int int_lo = -5,
                            int int_hi = 5) {
  const int64_t n = checked_numel(sizes, "test");
  std::vector<double> v(static_cast<size_t>(n));
  if (is_floating_point(dtype)) {
    std::normal_distribution<double> d(0.0, 1.0);
    for (double& x : v) x = d(rng);
  } else {
    const int lo = dtype == kBool ? 0 : (dtype == kUInt8 ? std::max(int_lo, 0) : int_lo);
    const int hi = dtype == kBool ? 1 : int_hi;
    std::uniform_int_distribution<int> d(lo, hi);
    for (double& x : v) x = d(rng);
  }
  return tensor<double>(v).reshape(sizes).to(dtype);
}

// Per-dtype relative tolerance for results rounded to `dtype`.
inline double rel_tol(ScalarType dtype) {
  switch (dtype) {
    case kFloat16:
      return 4e-3;
    case kBFloat16:
      return 2e-2;
    case kFloat32:
      return 2e-5;
    case kFloat64:
      return 1e-11;
    default:
      return 0;
  }
}

// Same shape and dtype; values equal within rel_tol (scaled by max(|ref|, scale)); NaN where
// the reference has NaN; infinities equal.
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& want, double scale = 1,
                                        double tol = -1) {
  if (got.sizes().vec() != want.sizes().vec()) {
    return ::testing::AssertionFailure() << "shape " << fmt::format("{}", got.sizes().vec())
                                         << " vs " << fmt::format("{}", want.sizes().vec());
  }
  if (got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(got.dtype()) << " vs " << dtype_name(want.dtype());
  }
  if (tol < 0) tol = rel_tol(got.dtype());
  Tensor g = got.to(kFloat64).contiguous(), w = want.to(kFloat64).contiguous();
  const double* gp = g.data_ptr<double>();
  const double* wp = w.data_ptr<double>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = gp[i], b = wp[i];
    bool ok;
    if (std::isnan(b)) {
      ok = std::isnan(a);
    } else if (std::isinf(b)) {
      ok = a == b;
    } else {
      ok = std::fabs(a - b) <= tol * std::max(std::fabs(b), scale);
    }
    if (!ok) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << fmt::format("{}", a) << ", want "
             << fmt::format("{}", b) << " (dtype " << dtype_name(got.dtype()) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Bitwise equality (same shape, dtype and bytes).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes().vec() != b.sizes().vec() || a.dtype() != b.dtype()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<size_t>(x.nbytes())) == 0;
}

// Every subset of {0..ndim-1} as a dim list; the empty list (all dims) comes first.
inline std::vector<DimVector> dim_subsets(int64_t ndim) {
  std::vector<DimVector> out;
  for (int64_t m = 0; m < (int64_t{1} << ndim); ++m) {
    DimVector s;
    for (int64_t d = 0; d < ndim; ++d)
      if ((m >> d) & 1) s.push_back(d);
    out.push_back(s);
  }
  return out;
}

// The same values as `t` in other memory layouts.
enum class Layout { kContiguous, kTransposed, kSliced, kExpanded };
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kContiguous:
      return "contiguous";
    case Layout::kTransposed:
      return "transposed";
    case Layout::kSliced:
      return "sliced";
    case Layout::kExpanded:
      return "expanded";
  }
  return "?";
}
// Transposed: stored with dims reversed. Sliced: every other element of a bigger tensor
// along the last dim. Expanded: a size-1 dim broadcast (only when t's dim 0 has size 1 it is
// the same values; otherwise the result is a different tensor with stride 0 along a new dim).
inline Tensor relayout(const Tensor& t, Layout l) {
  const int64_t nd = t.dim();
  switch (l) {
    case Layout::kContiguous:
      return t.contiguous();
    case Layout::kTransposed: {
      if (nd < 2) return t;
      DimVector rev;
      for (int64_t d = nd - 1; d >= 0; --d) rev.push_back(d);
      return t.permute(rev).contiguous().permute(rev);
    }
    case Layout::kSliced: {
      if (nd < 1) return t;
      DimVector big = t.sizes().vec();
      big.back() *= 2;
      Tensor b = zeros(big, TensorOptions(t.dtype()));
      Tensor s = b.slice(nd - 1, 0, std::nullopt, 2);
      s.copy_(t);
      return s;
    }
    case Layout::kExpanded: {
      DimVector sz = t.sizes().vec();
      sz.insert(sz.begin(), 3);
      return t.unsqueeze(0).expand(sz);
    }
  }
  return t;
}

}  // namespace tessera::reduce_testing
