// Tensor model: storage sharing, views, strides, copies across dtypes, factories, printing.
#include <cstring>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/tessera.h"

namespace ts = tessera;
using ::testing::HasSubstr;

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const ts::Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Tensor, FactoriesAndItem) {
  auto z = ts::zeros({2, 3}, ts::kFloat32);
  EXPECT_EQ(z.dim(), 2);
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.sum().item<float>(), 0.0f);
  auto f = ts::full({2}, 7);
  EXPECT_EQ(f.dtype(), ts::kInt64);
  EXPECT_EQ(ts::full({2}, 0.5).dtype(), ts::kFloat32);
  auto a = ts::arange(5);
  EXPECT_EQ(a.dtype(), ts::kInt64);
  EXPECT_EQ(a[4].item<int64_t>(), 4);
  EXPECT_EQ(ts::arange(0, 1, 0.25).numel(), 4);
  auto l = ts::linspace(0, 1, 5);
  EXPECT_FLOAT_EQ(l[4].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(l[1].item<float>(), 0.25f);
  auto e = ts::eye(3);
  EXPECT_EQ(e.sum().item<float>(), 3.0f);
  EXPECT_THAT(error_of([] { ts::arange(0, 10, -1); }), HasSubstr("inconsistent with step sign"));
  EXPECT_THAT(error_of([] { ts::zeros({2, -1}); }), HasSubstr("non-negative sizes"));
  EXPECT_THAT(error_of([] {
                ts::zeros({int64_t{1} << 40, int64_t{1} << 40});
              }),
              HasSubstr("overflows int64"));
}

TEST(Tensor, FromBlobSharesCallerMemory) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  bool freed = false;
  {
    auto t = ts::from_blob(data, {2, 3}, ts::kFloat32, [&](void*) { freed = true; });
    t.mul_(2);
    EXPECT_EQ(data[5], 12.0f);
    auto v = t.t();
    EXPECT_EQ(v.data_ptr(), static_cast<void*>(data));
  }
  EXPECT_TRUE(freed);
}

TEST(Tensor, ViewsShareStorageAndNeverCopy) {
  auto x = ts::arange(24, ts::kFloat32).view({2, 3, 4});
  auto p = x.permute({2, 0, 1});
  EXPECT_TRUE(p.is_alias_of(x));
  EXPECT_EQ(p.sizes(), ts::IntArrayRef({4, 2, 3}));
  EXPECT_EQ(p.strides(), ts::IntArrayRef({1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  auto s = x.slice(2, 1, 4, 2);  // columns 1, 3
  EXPECT_EQ(s.sizes(), ts::IntArrayRef({2, 3, 2}));
  EXPECT_EQ(s[1][2][1].item<float>(), 23.0f);
  auto sel = x.select(1, -1);
  EXPECT_EQ(sel.sizes(), ts::IntArrayRef({2, 4}));
  EXPECT_EQ(sel[0][0].item<float>(), 8.0f);
  auto e = ts::arange(3, ts::kFloat32).unsqueeze(1).expand({3, 4});
  EXPECT_EQ(e.strides(), ts::IntArrayRef({1, 0}));
  auto u = ts::arange(7, ts::kFloat32).unfold(0, 3, 2);
  EXPECT_EQ(u.sizes(), ts::IntArrayRef({3, 3}));
  EXPECT_EQ(u[2][2].item<float>(), 6.0f);
  auto d = ts::arange(9, ts::kFloat32).view({3, 3}).diagonal(1);
  EXPECT_EQ(d.numel(), 2);
  EXPECT_EQ(d[1].item<float>(), 5.0f);
  EXPECT_EQ(x.flatten(1).sizes(), ts::IntArrayRef({2, 12}));
  EXPECT_EQ(x.flatten(1).unflatten(1, {3, -1}).sizes(), ts::IntArrayRef({2, 3, 4}));
  EXPECT_EQ(x.squeeze().sizes(), x.sizes());
  EXPECT_EQ(ts::zeros({1, 3, 1}).squeeze().sizes(), ts::IntArrayRef({3}));
  // Writing through a view changes the base, and bumps the shared version.
  const auto v0 = x._version();
  sel.fill_(-1);
  EXPECT_EQ(x[1][2][3].item<float>(), -1.0f);
  EXPECT_GT(x._version(), v0);
}

TEST(Tensor, ReshapeCopiesOnlyWhenItMust) {
  auto x = ts::arange(12, ts::kFloat32).view({3, 4});
  EXPECT_TRUE(x.reshape({4, 3}).is_alias_of(x));
  auto t = x.t();
  auto r = t.reshape({12});
  EXPECT_FALSE(r.is_alias_of(x));
  EXPECT_EQ(r[1].item<float>(), 4.0f);
  EXPECT_THAT(error_of([&] { t.view({12}); }), HasSubstr("Use .reshape(...) instead"));
  EXPECT_THAT(error_of([&] { x.view({5, -1}); }), HasSubstr("invalid for input of size 12"));
}

TEST(Tensor, ComplexViews) {
  auto c = ts::tensor<ts::complex64>({{1, 2}, {3, -4}});
  auto r = ts::view_as_real(c);
  EXPECT_EQ(r.sizes(), ts::IntArrayRef({2, 2}));
  EXPECT_EQ(r[1][1].item<float>(), -4.0f);
  EXPECT_EQ(c.imag()[0].item<float>(), 2.0f);
  auto back = ts::view_as_complex(r);
  EXPECT_TRUE(back.is_alias_of(c));
  EXPECT_THAT(error_of([] { ts::view_as_complex(ts::zeros({3})); }), HasSubstr("size 2"));
}

TEST(Tensor, CopyAcrossAllDtypePairsAndStrides) {
  const ts::ScalarType types[] = {
      ts::kBool,      ts::kUInt8,      ts::kInt8,          ts::kInt16,      ts::kInt32,
      ts::kInt64,     ts::kFloat16,    ts::kBFloat16,      ts::kFloat32,    ts::kFloat64,
      ts::kComplex64, ts::kComplex128, ts::kFloat8_e4m3fn, ts::kFloat8_e5m2};
  // Integers 0..7, transposed: exact in every dtype, float8_e5m2 included.
  auto src = ts::arange(8, ts::kFloat32).view({2, 4}).t();
  for (auto from : types) {
    for (auto to : types) {
      auto a = src.to(from);
      auto b = a.to(to);
      ASSERT_EQ(b.dtype(), to);
      auto back = b.to(ts::kFloat64);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j) {
          double want = i + 4 * j;
          if (from == ts::kBool || to == ts::kBool) want = want != 0;
          ASSERT_EQ(back[i][j].item<double>(), want)
              << ts::dtype_name(from) << " -> " << ts::dtype_name(to);
        }
    }
  }
}

// Same-dtype copies between a contiguous and a transposed layout (either side) move through
// tiles; every element must land once, whole, at its place, for each element size, for sizes
// that leave partial tiles on both sides, and in both of the register blocks' orders.
TEST(Tensor, TransposedCopiesPutEveryElementInItsPlace) {
  // Byte i * cols + j of A's element (i, j) is compared with the copy's (j, i).
  auto same_bytes = [](const ts::Tensor& a, const ts::Tensor& at) {
    const auto w = static_cast<size_t>(ts::element_size(a.dtype()));
    const auto* x = static_cast<const unsigned char*>(a.data_ptr());
    const auto* y = static_cast<const unsigned char*>(at.data_ptr());
    const int64_t rows = a.size(0), cols = a.size(1);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (std::memcmp(x + (i * cols + j) * w, y + (j * rows + i) * w, w) != 0) return false;
    return true;
  };
  for (ts::ScalarType dt : {ts::kUInt8, ts::kInt16, ts::kFloat32, ts::kFloat64, ts::kComplex128})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                              {1, 70},
                              {70, 1},
                              {3, 5},
                              {65, 129},
                              {130, 67},
                              {300, 257},
                              // Rows 1 or 2 KiB apart on one side: the order down src's
                              // columns (core/transpose.h), partial tiles and blocks included.
                              {256, 523},
                              {523, 256},
                              {1000, 264}}) {
      SCOPED_TRACE(fmt::format("{} {}x{}", ts::dtype_name(dt), rows, cols));
      // Distinct bytes where the dtype allows (random bits in the floats).
      const ts::Tensor a = dt == ts::kUInt8 || dt == ts::kInt16
                               ? ts::arange(rows * cols, ts::kInt64).reshape({rows, cols}).to(dt)
                               : ts::randn({rows, cols}, dt);
      EXPECT_TRUE(same_bytes(a, a.t().contiguous())) << "transposed source";
      ts::Tensor into = ts::empty({cols, rows}, dt);
      into.t().copy_(a);  // transposed destination
      EXPECT_TRUE(same_bytes(a, into)) << "transposed destination";
      // A batch of them: the inner two dims of a 3-D permute.
      const ts::Tensor batch = ts::stack({a, a.neg()});
      const ts::Tensor bt = batch.permute({0, 2, 1}).contiguous();
      EXPECT_TRUE(same_bytes(batch[1].contiguous(), bt[1].contiguous())) << "batched";
    }
}

TEST(Tensor, FloatToIntConversionIsDefined) {
  auto x = ts::tensor<float>({-1.5f, 2.7f, NAN, 1e20f, -300.0f});
  auto i = x.to(ts::kInt64);
  EXPECT_EQ(i[0].item<int64_t>(), -1);
  EXPECT_EQ(i[1].item<int64_t>(), 2);
  EXPECT_EQ(i[2].item<int64_t>(), std::numeric_limits<int64_t>::min());
  auto u = x.to(ts::kUInt8);
  EXPECT_EQ(u[4].item<int64_t>(), static_cast<uint8_t>(-300));  // wraps through int64
}

TEST(Tensor, InPlaceOnOverlappingMemoryIsRefused) {
  auto e = ts::zeros({3}).expand({2, 3});
  EXPECT_THAT(error_of([&] { e.add_(1); }), HasSubstr("more than one element of the written-to"));
  auto x = ts::arange(6, ts::kFloat32);
  EXPECT_THAT(error_of([&] { x.slice(0, 1, 6).copy_(x.slice(0, 0, 5)); }),
              HasSubstr("refer to a single memory location"));
  auto i = ts::ones({3}, ts::kInt64);
  EXPECT_THAT(error_of([&] { i.add_(0.5); }),
              HasSubstr("can't be cast to the desired output type"));
}

TEST(Tensor, CopyBroadcastsTheSourceToTheDestination) {
  auto dst = ts::zeros({2, 3, 3});
  auto src = ts::arange(9, ts::kInt64).reshape({3, 3});
  dst.copy_(src);  // broadcast over the leading dim, cast int64 -> float32
  for (int64_t b = 0; b < 2; ++b) EXPECT_TRUE(ts::equal(dst[b], src.to(ts::kFloat32)));
  auto col = ts::zeros({4, 5}, ts::kFloat64).t();  // strided destination [5, 4]
  col.copy_(ts::tensor<float>({1, 2, 3, 4}));
  EXPECT_TRUE(ts::equal(col[3], ts::tensor<double>({1, 2, 3, 4})));
  // The destination never grows: a larger source is an error naming both shapes.
  auto small = ts::zeros({3, 3});
  EXPECT_THAT(error_of([&] {
                small.copy_(ts::zeros({2, 3, 3}));
              }),
              HasSubstr("copy_(): output with shape [3, 3] doesn't match the broadcast shape "
                        "[2, 3, 3]"));
  EXPECT_THAT(error_of([&] {
                small.add_(ts::zeros({2, 3, 3}));
              }),
              HasSubstr("output with shape [3, 3] doesn't match the broadcast shape [2, 3, 3]"));
  EXPECT_THAT(error_of([&] { small.copy_(ts::zeros({4})); }),
              HasSubstr("size of tensor a (3) must match the size of tensor b (4)"));
  auto x = ts::zeros({2, 3});
  x.add_(ts::ones({3}));
  EXPECT_TRUE(ts::equal(x, ts::ones({2, 3})));
}

TEST(Tensor, InterleavedSiblingViewsAreNotAnOverlap) {
  // Two columns of one matrix share no element although their memory ranges interleave.
  auto m = ts::arange(12, ts::kFloat32).reshape({4, 3});
  m.select(1, 2).copy_(m.select(1, 0));
  EXPECT_TRUE(ts::equal(m.select(1, 2), m.select(1, 0)));
  EXPECT_EQ(m[1][1].item<float>(), 4.0f);  // the middle column is untouched
  auto v = ts::arange(10, ts::kFloat64);
  v.slice(0, 0, 10, 2).add_(v.slice(0, 1, 10, 2));  // evens += odds
  EXPECT_TRUE(ts::equal(v.slice(0, 0, 10, 2), ts::tensor<double>({1, 5, 9, 13, 17})));
  // Shifted by a whole row they do share elements: still refused.
  auto x = ts::arange(12, ts::kFloat32).reshape({4, 3});
  EXPECT_THAT(error_of([&] { x.slice(0, 1, 4).copy_(x.slice(0, 0, 3)); }),
              HasSubstr("refer to a single memory location"));
  EXPECT_THAT(error_of([&] { x.slice(1, 1, 3).copy_(x.slice(1, 0, 2)); }),
              HasSubstr("refer to a single memory location"));
}

TEST(Tensor, ErrorsNameTheOpAndValues) {
  auto x = ts::zeros({2, 3});
  EXPECT_THAT(
      error_of([&] { x.select(2, 0); }),
      HasSubstr("select(): argument 'dim' expected a dimension in range [-2, 1], but got 2"));
  EXPECT_THAT(error_of([&] { x.select(1, 5); }), HasSubstr("index 5 out of range"));
  EXPECT_THAT(error_of([&] { x.permute({0, 0}); }), HasSubstr("repeated dim"));
  EXPECT_THAT(error_of([&] { x.expand({4, 3}); }), HasSubstr("must match the existing size (2)"));
  EXPECT_THAT(error_of([&] { ts::add(x, ts::zeros({4})); }),
              HasSubstr("size of tensor a (3) must match the size of tensor b (4)"));
  EXPECT_THAT(error_of([&] { x.data_ptr<double>(); }),
              HasSubstr("expected a tensor of dtype float64, but got float32"));
  EXPECT_THAT(error_of([&] { x.item(); }), HasSubstr("6 elements cannot be converted"));
  EXPECT_THAT(error_of([&] { ts::Tensor().dim(); }), HasSubstr("undefined Tensor"));
}

TEST(Tensor, PrintsLikePyTorch) {
  EXPECT_EQ(ts::tensor<float>({1, 2, 3}).repr(), "tensor([1., 2., 3.])");
  EXPECT_EQ(ts::arange(4).view({2, 2}).repr(), "tensor([[0, 1],\n        [2, 3]])");
  EXPECT_EQ(ts::tensor<double>({0.5, 1.25}).repr(), "tensor([0.5000, 1.2500], dtype=float64)");
  EXPECT_EQ(ts::tensor<bool>({true, false}).repr(), "tensor([ True, False])");
  EXPECT_EQ(ts::scalar_tensor(3.5).repr(), "tensor(3.5000)");
  EXPECT_EQ(ts::zeros({0}).repr(), "tensor([])");
  EXPECT_EQ(ts::zeros({2, 0}).repr(), "tensor([], size=(2, 0))");
  EXPECT_EQ(ts::tensor<float>({1e-5f, 1.0f}).repr(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(ts::ones({2}, ts::kBFloat16).repr(), "tensor([1., 1.], dtype=bfloat16)");
  const std::string big = ts::arange(2000).repr();
  EXPECT_THAT(big, HasSubstr("0,    1,    2,  ..., 1997, 1998, 1999"));
}

TEST(Random, SameSeedSameNumbersAnyThreadCount) {
  ts::set_num_threads(1);
  ts::Generator g1(42);
  auto a = ts::randn({100003}, {}, &g1);
  ts::set_num_threads(2);
  ts::Generator g2(42);
  auto b = ts::randn({100003}, {}, &g2);
  EXPECT_TRUE(ts::equal(a, b));
  // Moments of a large draw (seeded, so deterministic).
  EXPECT_NEAR(a.mean().item<double>(), 0.0, 0.02);
  EXPECT_NEAR(a.std().item<double>(), 1.0, 0.02);
  auto u = ts::rand({100000}, {}, &g1);
  EXPECT_GE(u.amin().item<float>(), 0.0f);
  EXPECT_LT(u.amax().item<float>(), 1.0f);
  EXPECT_NEAR(u.mean().item<double>(), 0.5, 0.01);
  auto r = ts::randint(3, 7, {10000}, {}, &g1);
  EXPECT_EQ(r.amin().item<int64_t>(), 3);
  EXPECT_EQ(r.amax().item<int64_t>(), 6);
}

TEST(Random, ComplexDrawsSplitTheVarianceOverRealAndImaginaryParts) {
  ts::Generator g(11);
  for (auto dt : {ts::kComplex64, ts::kComplex128}) {
    auto z = ts::randn({200000}, dt, &g);
    ASSERT_EQ(z.dtype(), dt);
    auto parts = ts::view_as_real(z);  // [n, 2]
    auto re = parts.select(1, 0).to(ts::kFloat64), im = parts.select(1, 1).to(ts::kFloat64);
    // torch.randn(complex): real and imaginary parts independent N(0, 1/2), E|z|^2 = 1.
    EXPECT_NEAR(re.mean().item<double>(), 0.0, 0.01);
    EXPECT_NEAR(im.mean().item<double>(), 0.0, 0.01);
    EXPECT_NEAR(re.var().item<double>(), 0.5, 0.01);
    EXPECT_NEAR(im.var().item<double>(), 0.5, 0.01);
    EXPECT_NEAR((re * im).mean().item<double>(), 0.0, 0.01);
    auto u = ts::view_as_real(ts::rand({100000}, dt, &g)).to(ts::kFloat64);
    EXPECT_GE(u.amin().item<double>(), 0.0);
    EXPECT_LT(u.amax().item<double>(), 1.0);
    EXPECT_NEAR(u.select(1, 1).mean().item<double>(), 0.5, 0.01);
    // In place on a strided complex tensor: mean goes to both parts, std is split.
    auto w = ts::zeros({1000, 200}, dt).t();
    ts::normal_(w, 3.0, 2.0, &g);
    auto wp = ts::view_as_real(w.contiguous()).to(ts::kFloat64);
    EXPECT_NEAR(wp.mean().item<double>(), 3.0, 0.02);
    EXPECT_NEAR(wp.var().item<double>(), 2.0, 0.03);
  }
}

TEST(Random, MultinomialAndBernoulli) {
  ts::Generator g(7);
  auto p = ts::tensor<float>({0.0f, 1.0f, 3.0f});
  auto s = ts::multinomial(p, 4000, true, &g);
  auto counts = ts::one_hot(s, 3).sum({0});
  EXPECT_EQ(counts[0].item<int64_t>(), 0);
  EXPECT_NEAR(counts[2].item<int64_t>() / 4000.0, 0.75, 0.03);
  auto w = ts::multinomial(ts::ones({5}), 5, false, &g);
  EXPECT_TRUE(ts::equal(std::get<0>(ts::sort(w)), ts::arange(5)));   // a permutation
  EXPECT_THROW(ts::multinomial(p, 3, false, &g), ts::RuntimeError);  // one zero weight
  auto b = ts::bernoulli(ts::full({10000}, 0.25), &g);
  EXPECT_NEAR(b.mean().item<double>(), 0.25, 0.02);
}

namespace tessera {
namespace {

TEST(CpuCache, LargeBlocksAreReusedAndCanBeReleased) {
  if (cpu_cache_stats().limit_bytes == 0) GTEST_SKIP() << "caching is off (sanitizer build)";
  empty_cpu_cache();
  const CpuCacheStats before = cpu_cache_stats();
  void* first = nullptr;
  {
    Tensor a = empty({3, 1 << 20});  // 12 MiB: cached when freed
    first = a.data_ptr();
  }
  EXPECT_EQ(cpu_cache_stats().cached_blocks, 1u);
  EXPECT_GE(cpu_cache_stats().cached_bytes, size_t{12} << 20);
  {
    Tensor b = ones({3 << 20});  // the same rounded size: served from the cache
    EXPECT_EQ(b.data_ptr(), first);
    EXPECT_EQ(b.sum().item<double>(), 3.0 * (1 << 20));
    EXPECT_EQ(cpu_cache_stats().hits, before.hits + 1);
    EXPECT_EQ(cpu_cache_stats().cached_blocks, 0u);
  }
  {
    Tensor small = empty({1000});  // small blocks never enter the cache
  }
  EXPECT_EQ(cpu_cache_stats().cached_blocks, 1u);
  empty_cpu_cache();
  EXPECT_EQ(cpu_cache_stats().cached_bytes, 0u);
  EXPECT_EQ(cpu_cache_stats().cached_blocks, 0u);
}

}  // namespace
}  // namespace tessera
