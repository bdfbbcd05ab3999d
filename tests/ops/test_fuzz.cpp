// Seeded fuzzing of the iterator and the reductions: random shapes (zero-size and size-1 dims
// included), random views (transposes, strided slices, broadcast dims with stride 0, offsets)
// and random dtypes, each result checked against a plain float64 computation or the reference
// reductions in src/ops/reference. Bad arguments drawn on purpose must raise tessera::Error.
// The ASan/UBSan build runs this too (make test-asan), which is where it earns its keep.
// TESSERA_FUZZ_SEED and TESSERA_FUZZ_CASES override the seed and the number of cases.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "ops/reference/reduce_reference.h"
#include "reduce_test_util.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

using reduce_testing::close;
using reduce_testing::random_values;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoll(v, nullptr, 10) : fallback;
}

struct Fuzzer {
  std::mt19937 rng;
  explicit Fuzzer(uint32_t seed) : rng(seed) {}

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

  ScalarType dtype(bool floating_only = false) {
    static const ScalarType all[] = {kBool,    kUInt8,    kInt8,    kInt32,  kInt64,
                                     kFloat16, kBFloat16, kFloat32, kFloat64};
    static const ScalarType floats[] = {kFloat16, kBFloat16, kFloat32, kFloat64};
    return floating_only ? floats[uniform(0, 3)] : all[uniform(0, 8)];
  }

  DimVector shape(int64_t max_rank = 4) {
    DimVector s;
    const int64_t rank = uniform(0, max_rank);
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t pick = uniform(0, 19);
      s.push_back(pick == 0 ? 0 : (pick < 4 ? 1 : (pick == 19 ? 37 : uniform(2, 9))));
    }
    return s;
  }

  // A tensor holding random values of `sizes` in a random memory layout.
  Tensor view_of(IntArrayRef sizes, ScalarType dt) {
    const int64_t nd = static_cast<int64_t>(sizes.size());
    switch (uniform(0, 3)) {
      case 0:  // contiguous
        return random_values(sizes, dt, rng);
      case 1: {  // stored permuted
        DimVector perm;
        for (int64_t d = 0; d < nd; ++d) perm.push_back(d);
        std::shuffle(perm.begin(), perm.end(), rng);
        DimVector stored;
        for (int64_t d : perm) stored.push_back(sizes[static_cast<size_t>(d)]);
        DimVector inverse(static_cast<size_t>(nd));
        for (int64_t i = 0; i < nd; ++i) inverse[static_cast<size_t>(perm[i])] = i;
        return random_values(stored, dt, rng).permute(inverse);
      }
      case 2: {  // strided slice of a bigger tensor, with an offset
        if (nd == 0) return random_values(sizes, dt, rng);
        const int64_t d = uniform(0, nd - 1), step = uniform(2, 3), off = uniform(0, 2);
        DimVector big = sizes.vec();
        big[static_cast<size_t>(d)] = big[static_cast<size_t>(d)] * step + off;
        return random_values(big, dt, rng).slice(d, off, std::nullopt, step).narrow(d, 0, sizes[d]);
      }
      default: {  // size-1 dims broadcast with stride 0 where the shape allows
        DimVector base = sizes.vec();
        for (auto& s : base)
          if (coin(0.4)) s = 1;
        return random_values(base, dt, rng).expand(sizes);
      }
    }
  }
};

// A shape that broadcasts to `out`: some dims dropped from the front, some set to 1.
DimVector broadcastable(Fuzzer& f, const DimVector& out) {
  DimVector s(out.begin() + f.uniform(0, static_cast<int64_t>(out.size())), out.end());
  for (auto& d : s)
    if (f.coin(0.3)) d = 1;
  return s;
}

// op(a, b) on float64 copies of the operands converted to their common dtype (as PyTorch
// computes: lt(int8 -3, uint8 [1]) compares 253 < 1), rounded to the result dtype.
Tensor binary_reference(const std::string& op, const Tensor& a, const Tensor& b, ScalarType out) {
  const DimVector shape = broadcast_shapes(a.sizes(), b.sizes());
  const ScalarType common = result_type(a, b);
  Tensor x = a.to(common).to(kFloat64).expand(shape).contiguous();
  Tensor y = b.to(common).to(kFloat64).expand(shape).contiguous();
  Tensor r = empty(shape, TensorOptions(kFloat64));
  const double* xp = x.data_ptr<double>();
  const double* yp = y.data_ptr<double>();
  double* rp = r.data_ptr<double>();
  for (int64_t i = 0; i < r.numel(); ++i) {
    const double u = xp[i], v = yp[i];
    if (op == "add") {
      rp[i] = u + v;
    } else if (op == "mul") {
      rp[i] = u * v;
    } else if (op == "maximum") {
      rp[i] = (u != u || v != v) ? u + v : std::max(u, v);
    } else {  // lt
      rp[i] = u < v;
    }
  }
  return r.to(out);
}

TEST(Fuzz, IteratorBroadcastPromotionAndLayouts) {
  const auto seed = static_cast<uint32_t>(env_int("TESSERA_FUZZ_SEED", 20261130));
  const int64_t cases = env_int("TESSERA_FUZZ_CASES", 2000);
  Fuzzer f(seed);
  static const char* ops[] = {"add", "mul", "maximum", "lt"};
  for (int64_t c = 0; c < cases; ++c) {
    const std::string op = ops[f.uniform(0, 3)];
    const DimVector out_shape = f.shape();
    const DimVector sa = f.coin() ? out_shape : broadcastable(f, out_shape);
    const DimVector sb = f.coin() ? out_shape : broadcastable(f, out_shape);
    Tensor a = f.view_of(sa, f.dtype()), b = f.view_of(sb, f.dtype());
    SCOPED_TRACE(fmt::format("case {} (seed {}): {}({} {} strides {}, {} {} strides {})", c, seed,
                             op, dtype_name(a.dtype()), a.sizes().vec(), a.strides().vec(),
                             dtype_name(b.dtype()), b.sizes().vec(), b.strides().vec()));
    Tensor got;
    if (op == "add") {
      if (a.dtype() == kBool && b.dtype() == kBool) continue;  // bool + bool is or; not here
      got = add(a, b);
    } else if (op == "mul") {
      if (a.dtype() == kBool && b.dtype() == kBool) continue;
      got = mul(a, b);
    } else if (op == "maximum") {
      got = maximum(a, b);
    } else {
      got = lt(a, b);
    }
    const ScalarType rt = op == "lt" ? kBool : result_type(a, b);
    ASSERT_EQ(got.dtype(), rt);
    ASSERT_EQ(got.sizes().vec(), broadcast_shapes(a.sizes(), b.sizes()));
    // float16/bfloat16 results round twice in the reference (to the common dtype, then
    // again); allow a rounding step of the result dtype.
    ASSERT_TRUE(close(got, binary_reference(op, a, b, rt), 1.0,
                      is_floating_point(rt) ? 2 * reduce_testing::rel_tol(rt) : 0));
  }
}

TEST(Fuzz, ReductionsOverRandomDimsAndLayouts) {
  const auto seed = static_cast<uint32_t>(env_int("TESSERA_FUZZ_SEED", 20261130)) + 1;
  const int64_t cases = env_int("TESSERA_FUZZ_CASES", 2000);
  Fuzzer f(seed);
  for (int64_t c = 0; c < cases; ++c) {
    const DimVector shape = f.shape();
    const bool floating = f.coin(0.7);
    Tensor x = f.view_of(shape, f.dtype(floating));
    const int64_t nd = x.dim();
    DimVector dims;
    for (int64_t d = 0; d < nd; ++d)
      if (f.coin()) dims.push_back(f.coin() ? d : d - nd);  // negative dims too
    const bool keepdim = f.coin();
    SCOPED_TRACE(fmt::format("case {} (seed {}): {} {} strides {}, dims {}, keepdim {}", c, seed,
                             dtype_name(x.dtype()), x.sizes().vec(), x.strides().vec(), dims,
                             keepdim));
    const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(x.numel(), 1)));
    if (x.dtype() != kBool) {
      ASSERT_TRUE(
          close(sum(x, dims, keepdim), reference::sum(x, dims, keepdim, std::nullopt), scale));
    }
    // amax over a reduced dim of size 0 is an error (as PyTorch), an empty output is not.
    bool empty_reduced = dims.empty() && x.numel() == 0;
    for (int64_t d : dims) empty_reduced |= x.size(d) == 0;
    if (empty_reduced) {
      Tensor r;
      EXPECT_THROW(r = amax(x, dims, keepdim), Error);
    } else {
      ASSERT_TRUE(close(amax(x, dims, keepdim), reference::amax(x, dims, keepdim)));
    }
    if (nd > 0 && x.numel() > 0) {
      const int64_t d = f.uniform(-nd, nd - 1);
      if (x.dtype() == kBool) {  // as PyTorch: "argmax_cpu" not implemented for 'Bool'
        Tensor r;
        EXPECT_THROW(r = argmax(x, d, keepdim), TypeError);
      } else {
        ASSERT_TRUE(close(argmax(x, d, keepdim), reference::argmax(x, d, keepdim)));
      }
    }
    if (floating && x.numel() > 1) {
      const double correction = static_cast<double>(f.uniform(0, 1));
      auto [v, m] = var_mean(x, dims, correction, keepdim);
      auto [rv, rm] = reference::var_mean(x, dims, correction, keepdim);
      ASSERT_TRUE(close(v, rv, 1.0, 4 * reduce_testing::rel_tol(v.dtype())));
      ASSERT_TRUE(close(m, rm, 1.0, 4 * reduce_testing::rel_tol(m.dtype())));
    }
  }
}

TEST(Fuzz, BadArgumentsRaiseErrors) {
  Fuzzer f(static_cast<uint32_t>(env_int("TESSERA_FUZZ_SEED", 20261130)) + 2);
  for (int64_t c = 0; c < 200; ++c) {
    const DimVector shape = f.shape();
    Tensor x = f.view_of(shape, f.dtype(true));
    const int64_t nd = x.dim();
    const int64_t bad_dim = f.coin() ? nd + f.uniform(0, 3) : -nd - 1 - f.uniform(0, 3);
    SCOPED_TRACE(fmt::format("case {}: {} dim {}", c, x.sizes().vec(), bad_dim));
    if (nd == 0 && (bad_dim == 0 || bad_dim == -1)) continue;  // valid on a 0-dim tensor
    Tensor r;
    EXPECT_THROW(r = sum(x, {bad_dim}), IndexError);
    EXPECT_THROW(r = argmax(x, bad_dim), IndexError);
    // Shapes that cannot broadcast.
    if (nd > 0 && x.size(-1) > 1) {
      DimVector other = shape;
      other.back() += 1;
      EXPECT_THROW(r = add(x, zeros(other)), Error);
    }
    // Writing through a broadcast (stride-0) view is refused.
    if (nd > 0 && x.numel() > 1) {
      DimVector one = shape;
      one[0] = 1;
      Tensor target = zeros(one).expand(shape);
      if (target.stride(0) == 0 && shape[0] > 1) {
        EXPECT_THROW(target.add_(x), Error);
      }
    }
  }
}

}  // namespace
}  // namespace tessera
