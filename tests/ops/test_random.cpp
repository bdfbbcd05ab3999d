// The random kernels (Philox blocks, uniform and normal transforms) on every ISA this CPU runs,
// against one-counter-at-a-time references and Random123's known answer; and the factories'
// distributions (Kolmogorov-Smirnov against the exact CDFs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "ops/cpu/random_kernels.h"
#include "tessera/tessera.h"
#include "test_support.h"

namespace tessera {
namespace {

using cpu::PhiloxStream;
using cpu::RandomKernels;

std::vector<std::pair<std::string, const RandomKernels*>> random_tables() {
  return TS_RUNNABLE_TABLES(random_kernels);
}

// Word `slot` of the counter that element e of a draw with P values per block reads.
cpu::PhiloxWords words_of(const PhiloxStream& s, int64_t e, int64_t per_block) {
  const int64_t block = e / per_block, lane = e % cpu::kPhiloxLanes;
  return cpu::philox4x32(s.seed, s.base + static_cast<uint64_t>(block * cpu::kPhiloxLanes + lane));
}
int slot_of(int64_t e, int64_t per_block) {
  return static_cast<int>((e % per_block) / cpu::kPhiloxLanes);
}

// A stream whose counters cross a 2^32 boundary inside a block.
constexpr PhiloxStream kStream{0x0123456789abcdefull, (uint64_t{1} << 32) - 40};
constexpr int64_t kCount = 1000;

TEST(RandomKernels, PhiloxMatchesRandom123sKnownAnswer) {
  // Philox4x32-10, counter {0, 0, 0, 0}, key {0, 0} (Random123's kat_vectors).
  const cpu::PhiloxWords w = cpu::philox4x32(0, 0);
  EXPECT_EQ(w.w[0], 0x6627e8d5u);
  EXPECT_EQ(w.w[1], 0xe169c58du);
  EXPECT_EQ(w.w[2], 0xbc57ac4cu);
  EXPECT_EQ(w.w[3], 0x9b00dbd8u);
}

TEST(RandomKernels, BlocksMatchTheOneCounterReference) {
  for (const auto& [isa, k] : random_tables()) {
    SCOPED_TRACE(isa);
    std::vector<uint64_t> bits(kCount - 5);
    k->bits64(bits.data(), 5, kCount, kStream);
    for (int64_t e = 5; e < kCount; ++e) {
      const cpu::PhiloxWords w = words_of(kStream, e, cpu::kDoubleDrawsPerBlock);
      const int j = slot_of(e, cpu::kDoubleDrawsPerBlock);
      ASSERT_EQ(bits[e - 5], uint64_t{w.w[2 * j]} << 32 | w.w[2 * j + 1]) << "element " << e;
    }
  }
}

TEST(RandomKernels, UniformsAreTheirWordsScaled) {
  for (const auto& [isa, k] : random_tables()) {
    SCOPED_TRACE(isa);
    std::vector<float> f(kCount);
    std::vector<double> d(kCount);
    k->uniform_float(f.data(), 0, kCount, kStream, 0.0f, 1.0f);
    k->uniform_double(d.data(), 0, kCount, kStream, 0.0, 1.0);
    for (int64_t e = 0; e < kCount; ++e) {
      const cpu::PhiloxWords wf = words_of(kStream, e, cpu::kFloatDrawsPerBlock);
      ASSERT_EQ(f[e], std::ldexp(static_cast<float>(wf.w[slot_of(e, 64)] >> 8), -24)) << e;
      const cpu::PhiloxWords wd = words_of(kStream, e, cpu::kDoubleDrawsPerBlock);
      const int j = slot_of(e, cpu::kDoubleDrawsPerBlock);
      const uint64_t x = (uint64_t{wd.w[2 * j]} << 32 | wd.w[2 * j + 1]) >> 11;
      ASSERT_EQ(d[e], std::ldexp(static_cast<double>(x), -53)) << e;
    }
    // Bounds: [lo, hi) even where lo + (hi - lo) u rounds up to hi.
    k->uniform_float(f.data(), 0, kCount, kStream, 1.0f, 1.0f + 0x1p-22f);
    for (float v : f) ASSERT_TRUE(v >= 1.0f && v < 1.0f + 0x1p-22f) << v;
  }
}

// Box-Muller in long double, with the angle reduced to its quadrant exactly as the kernels do
// (an unreduced 2 pi u would lose the small results near the axes).
long double box_muller(long double u, uint64_t turn, int turn_bits, bool sine) {
  const int64_t x = static_cast<int64_t>(turn), half = int64_t{1} << (turn_bits - 3);
  const int64_t q = (x + half) >> (turn_bits - 2);
  const long double r =
      std::ldexp(static_cast<long double>(x - (q << (turn_bits - 2))), -turn_bits);
  const long double theta = 2 * std::numbers::pi_v<long double> * r;
  const long double c = std::cos(theta), s = std::sin(theta);
  const long double cos_t[] = {c, -s, -c, s}, sin_t[] = {s, c, -s, -c};
  const long double radius = std::sqrt(-2 * std::log(u));
  return radius * (sine ? sin_t[q & 3] : cos_t[q & 3]);
}

TEST(RandomKernels, NormalsMatchLongDoubleBoxMuller) {
  for (const auto& [isa, k] : random_tables()) {
    SCOPED_TRACE(isa);
    std::vector<float> f(kCount);
    std::vector<double> d(kCount);
    k->normal_float(f.data(), 0, kCount, kStream, 0.0f, 1.0f);
    k->normal_double(d.data(), 0, kCount, kStream, 0.0, 1.0);
    for (int64_t e = 0; e < kCount; ++e) {
      const cpu::PhiloxWords wf = words_of(kStream, e, cpu::kFloatDrawsPerBlock);
      const int j = slot_of(e, cpu::kFloatDrawsPerBlock), p = j / 2;
      const long double uf = std::ldexp(2.0L * (wf.w[2 * p] >> 1) + 1, -32);
      const long double zf = box_muller(uf, wf.w[2 * p + 1] >> 8, 24, j % 2 == 1);
      // A few roundings of values of the radius' size.
      const long double radius_f = std::sqrt(-2 * std::log(uf));
      ASSERT_NEAR(f[e], zf, 4 * 0x1p-24 * std::max(radius_f, 1e-3L)) << "float element " << e;

      const cpu::PhiloxWords wd = words_of(kStream, e, cpu::kDoubleDrawsPerBlock);
      const uint64_t radius_bits = uint64_t{wd.w[0]} << 32 | wd.w[1];
      const uint64_t turn_bits = uint64_t{wd.w[2]} << 32 | wd.w[3];
      const long double ud =
          std::ldexp(2.0L * static_cast<long double>(radius_bits >> 12) + 1, -53);
      const long double zd =
          box_muller(ud, turn_bits >> 11, 53, slot_of(e, cpu::kDoubleDrawsPerBlock) == 1);
      const long double radius_d = std::sqrt(-2 * std::log(ud));
      ASSERT_NEAR(d[e], zd, 4 * 0x1p-53 * std::max(radius_d, 1e-3L)) << "double element " << e;
    }
    // mean + std * z.
    std::vector<float> g(kCount);
    k->normal_float(g.data(), 0, kCount, kStream, 3.0f, 0.5f);
    for (int64_t e = 0; e < kCount; ++e) ASSERT_NEAR(g[e], 3.0f + 0.5f * f[e], 1e-6f) << e;
  }
}

// AVX2 and AVX-512 evaluate the same correctly rounded operations and fused multiply-adds.
TEST(RandomKernels, AvxKernelsGiveTheSameBits) {
  const auto tables = random_tables();
  if (tables.size() < 3) GTEST_SKIP() << "this CPU has no AVX-512";
  const RandomKernels &a2 = *tables[1].second, &a5 = *tables[2].second;
  std::vector<float> f2(kCount), f5(kCount);
  std::vector<double> d2(kCount), d5(kCount);
  a2.normal_float(f2.data(), 0, kCount, kStream, 0.25f, 2.0f);
  a5.normal_float(f5.data(), 0, kCount, kStream, 0.25f, 2.0f);
  a2.normal_double(d2.data(), 0, kCount, kStream, 0.25, 2.0);
  a5.normal_double(d5.data(), 0, kCount, kStream, 0.25, 2.0);
  EXPECT_EQ(f2, f5);
  EXPECT_EQ(d2, d5);
  a2.uniform_float(f2.data(), 0, kCount, kStream, -3.0f, 5.0f);
  a5.uniform_float(f5.data(), 0, kCount, kStream, -3.0f, 5.0f);
  EXPECT_EQ(f2, f5);
}

TEST(RandomKernels, AnyChunkingGivesTheSameElements) {
  for (const auto& [isa, k] : random_tables()) {
    SCOPED_TRACE(isa);
    std::vector<float> whole(kCount), parts(kCount);
    k->normal_float(whole.data(), 0, kCount, kStream, 0.0f, 1.0f);
    const int64_t cuts[] = {0, 7, 64, 65, 200, 511, kCount};
    for (size_t c = 0; c + 1 < std::size(cuts); ++c)
      k->normal_float(parts.data() + cuts[c], cuts[c], cuts[c + 1], kStream, 0.0f, 1.0f);
    EXPECT_EQ(whole, parts);
  }
}

// The Kolmogorov-Smirnov distance between a sample and a CDF.
template <class Cdf>
double ks_distance(const Tensor& sample, Cdf cdf) {
  const Tensor sorted = std::get<0>(sort(sample.to(kFloat64)));
  const double* x = sorted.data_ptr<double>();
  const auto n = static_cast<double>(sorted.numel());
  double d = 0;
  for (int64_t i = 0; i < sorted.numel(); ++i) {
    const double f = cdf(x[i]);
    d = std::max({d, f - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - f});
  }
  return d;
}

TEST(Random, DrawsPassKolmogorovSmirnov) {
  // Critical value at the 0.1% level: 1.95 / sqrt(n).
  constexpr int64_t n = 1 << 20;
  const double critical = 1.95 / std::sqrt(static_cast<double>(n));
  const auto phi = [](double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); };
  Generator g(2024);
  for (ScalarType dt : {kFloat32, kFloat64, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    // bfloat16 rounds each draw to 8 bits, a distance of up to ~2^-9 from the CDF.
    const double tolerance = critical + (dt == kBFloat16 ? 0x1p-8 : 0.0);
    EXPECT_LT(ks_distance(randn({n}, dt, &g), phi), tolerance);
    EXPECT_LT(ks_distance(rand({n}, dt, &g), [](double x) { return x; }), tolerance);
    EXPECT_LT(
        ks_distance(normal(-2.0, 3.0, {n}, dt, &g), [&](double x) { return phi((x + 2.0) / 3.0); }),
        tolerance * 3);
  }
}

TEST(Random, LowPrecisionUniformsStayBelowTheirUpperBound) {
  // In bfloat16 about 1 in 512 draws of [0, 1) would round up to 1.
  Generator g(5);
  for (ScalarType dt : {kBFloat16, kFloat16}) {
    const Tensor u = rand({1 << 16}, dt, &g);
    EXPECT_LT(u.amax().item<double>(), 1.0);
    EXPECT_GE(u.amin().item<double>(), 0.0);
    const Tensor w = uniform_(empty({1 << 16}, dt), -1.0, 0.0, &g);
    EXPECT_LT(w.amax().item<double>(), 0.0);
    EXPECT_GE(w.amin().item<double>(), -1.0);
  }
}

}  // namespace
}  // namespace tessera
