// The GEMV path (src/gemm/gemv.h): every weight format on every ISA table against the
// dequantize-then-float64 oracle, odd sizes, row/column/general layouts, strided and
// bfloat16 activations, row and global scales, beta 0 with NaN in Y, sentinels around Y,
// 1 vs 2 threads bitwise, every float8/float4 code decoded exactly, and errors; float64 and
// complex GEMMs with few rows or columns (gemm_as_gemv) on every ISA against the long-double
// oracle and OpenBLAS's ?gemv.
#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/cpu_features.h"
#include "gemm/epilogue.h"
#include "gemm/gemm.h"
#include "gemm/gemv.h"
#include "gemm_test_util.h"
#include "tessera/tessera.h"
#include "test_support.h"

namespace tessera::gemm {
namespace {

using gemm::testing::expect_error_mentions;

constexpr float kSentinel = -7777.25f;
constexpr int64_t kGuard = 64;

constexpr WeightFormat kFormats[] = {WeightFormat::Float32,     WeightFormat::BFloat16,
                                     WeightFormat::Float16,     WeightFormat::Float8_e4m3fn,
                                     WeightFormat::Float8_e5m2, WeightFormat::NVFP4};

struct NamedGemv {
  std::string isa;
  const cpu::GemvKernels* kernels;
};

std::vector<NamedGemv> runnable_gemv() {
  std::vector<NamedGemv> out;
  for (const auto& [isa, table] : TS_RUNNABLE_TABLES(gemv_kernels)) out.push_back({isa, table});
  if (best_isa() == CpuIsa::Avx512 && cpu_features().avx512_vbmi)
    out.push_back({"avx512vbmi", &gemv_kernels_for("avx512vbmi")});
  return out;
}

enum class Layout { Row, Col, General };

// An n x k weight matrix in format f with element strides (rs, cs) (NVFP4: row-major, rs in
// bytes) and, for NVFP4, its block scales.
struct Weights {
  WeightFormat f;
  int64_t n, k, rs = 0, cs = 0;
  std::vector<uint8_t> bytes, scales;
  int64_t scale_rs = 0;

  Weights(WeightFormat fmt, int64_t n_, int64_t k_, Layout layout, std::mt19937& rng)
      : f(fmt), n(n_), k(k_) {
    const int64_t eb = fmt == WeightFormat::NVFP4 ? 1 : format_bytes(fmt, 1);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    if (fmt == WeightFormat::NVFP4) {
      rs = k / 2 + 5;
      bytes.resize(static_cast<size_t>(n * rs));
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      scale_rs = k / kNvfp4Block + 1;
      scales.resize(static_cast<size_t>(n * scale_rs));
      for (auto& s : scales) s = static_cast<uint8_t>(0x28 + rng() % 0x20);  // ~0.03 .. 3.75
      decode_all();
      return;
    }
    switch (layout) {
      case Layout::Row:
        rs = k + 3, cs = 1;
        break;
      case Layout::Col:
        rs = 1, cs = n + 2;
        break;
      case Layout::General:
        rs = 2 * k + 1, cs = 2;
        break;
    }
    bytes.assign(static_cast<size_t>(((n - 1) * rs + (k - 1) * cs + 1) * eb), 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < k; ++p) {
        uint8_t* dst = bytes.data() + (i * rs + p * cs) * eb;
        const float v = dist(rng);
        switch (fmt) {
          case WeightFormat::Float32:
            std::memcpy(dst, &v, 4);
            break;
          case WeightFormat::BFloat16: {
            const BFloat16 h(v);
            std::memcpy(dst, &h.x, 2);
            break;
          }
          case WeightFormat::Float16: {
            const Half h(v);
            std::memcpy(dst, &h.x, 2);
            break;
          }
          case WeightFormat::Float8_e4m3fn:
            *dst = Float8_e4m3fn(v).x;
            break;
          default:
            *dst = Float8_e5m2(v).x;
            break;
        }
      }
    decode_all();
  }
  float at(int64_t i, int64_t p) const { return decoded[static_cast<size_t>(i * k + p)]; }
  void into(GemvProblem& p) const {
    p.format = f, p.n = n, p.k = k;
    p.w = bytes.data(), p.w_rs = rs, p.w_cs = f == WeightFormat::NVFP4 ? 1 : cs;
    if (f == WeightFormat::NVFP4) p.block_scales = scales.data(), p.scale_rs = scale_rs;
  }

 private:
  // Each element decoded once: the oracle's error bound reads every weight once per row of X
  // (decoding there took a sixth of a row-major test's time in the -O0 sanitizer build).
  std::vector<float> decoded;
  void decode_all() {
    decoded.resize(static_cast<size_t>(n * k));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < k; ++p)
        decoded[static_cast<size_t>(i * k + p)] =
            f == WeightFormat::NVFP4
                ? formats::decode_value(f, bytes.data() + i * rs, p, scales.data() + i * scale_rs)
                : formats::decode_element(f, bytes.data(), i * rs + p * cs);
  }
};

// nx x n outputs at Y(m, i) = y[kGuard + m * ld + i * inc], sentinels everywhere else.
struct GuardedY {
  int64_t nx, n, inc, ld;
  std::vector<float> buf;
  GuardedY(int64_t nx_, int64_t n_, int64_t inc_) : nx(nx_), n(n_), inc(inc_), ld(n_ * inc_ + 3) {
    buf.assign(static_cast<size_t>(nx * ld + 2 * kGuard), kSentinel);
  }
  float& at(int64_t m, int64_t i) { return buf[kGuard + m * ld + i * inc]; }
  float* data() { return buf.data() + kGuard; }
  bool sentinels_intact() const {
    std::vector<bool> valid(buf.size(), false);
    for (int64_t m = 0; m < nx; ++m)
      for (int64_t i = 0; i < n; ++i) valid[kGuard + m * ld + i * inc] = true;
    for (size_t e = 0; e < buf.size(); ++e)
      if (!valid[e] && buf[e] != kSentinel) return false;
    return true;
  }
};

struct Activations {
  ScalarType dtype;
  int64_t nx, k, inc, ld;
  std::vector<float> f32;
  std::vector<BFloat16> bf16;
  Activations(ScalarType t, int64_t nx_, int64_t k_, int64_t inc_, std::mt19937& rng)
      : dtype(t), nx(nx_), k(k_), inc(inc_), ld(k_ * inc_ + 1) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const size_t size = static_cast<size_t>(nx * ld);
    if (t == kFloat32) {
      f32.resize(size);
      for (auto& v : f32) v = dist(rng);
    } else {
      bf16.resize(size);
      for (auto& v : bf16) v = BFloat16(dist(rng));
    }
  }
  float at(int64_t m, int64_t p) const {
    const size_t e = static_cast<size_t>(m * ld + p * inc);
    return dtype == kFloat32 ? f32[e] : static_cast<float>(bf16[e]);
  }
  void into(GemvProblem& p) const {
    p.x_dtype = dtype, p.nx = nx;
    p.x = dtype == kFloat32 ? static_cast<const void*>(f32.data()) : bf16.data();
    p.x_inc = inc, p.x_ld = ld;
  }
};

// Runs p on `kernels` and compares with the oracle. Bound per element:
// 4 (k + 2) eps_f32 (|alpha global row_scale| sum |W x| + |beta y|).
::testing::AssertionResult check(GemvProblem p, const Weights& w, const Activations& x,
                                 const cpu::GemvKernels* kernels, float y_init, int64_t y_inc = 1) {
  GuardedY got(x.nx, w.n, y_inc);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t m = 0; m < x.nx; ++m)
    for (int64_t i = 0; i < w.n; ++i) got.at(m, i) = std::isnan(y_init) ? y_init : dist(rng);
  GuardedY ref = got, before = got;
  w.into(p);
  x.into(p);
  p.y = got.data(), p.y_inc = got.inc, p.y_ld = got.ld;
  gemv(p, kernels);
  if (!got.sentinels_intact()) return ::testing::AssertionFailure() << "write outside Y";
  p.y = ref.data();
  gemv_reference(p);
  const double eps = std::numeric_limits<float>::epsilon();
  for (int64_t m = 0; m < x.nx; ++m)
    for (int64_t i = 0; i < w.n; ++i) {
      double mag = 0;
      for (int64_t q = 0; q < w.k; ++q) mag += std::fabs(double(w.at(i, q)) * x.at(m, q));
      const double scale =
          std::fabs(p.alpha * p.global_scale * (p.row_scales ? p.row_scales[i] : 1.0));
      const double prev = p.beta == 0 ? 0.0 : std::fabs(p.beta * before.at(m, i));
      const double bound = 4.0 * (w.k + 2) * eps * (scale * mag + prev) + 1e-30;
      const double g = got.at(m, i), r = ref.at(m, i);
      if (!(std::fabs(g - r) <= bound))
        return ::testing::AssertionFailure()
               << format_name(w.f) << " Y(" << m << ", " << i << ") = " << g << ", expected " << r
               << " (bound " << bound << ") n=" << w.n << " k=" << w.k << " nx=" << x.nx;
    }
  return ::testing::AssertionSuccess();
}

std::vector<int64_t> ks_for(WeightFormat f) {
  if (f == WeightFormat::NVFP4) return {16, 32, 48, 272, 4112};
  return {1, 2, 3, 7, 17, 31, 65, 257, 4099};
}

TEST(Gemv, EveryFormatIsaAndOddSizeRowMajor) {
  std::mt19937 rng(1);
  for (const auto& [isa, kernels] : runnable_gemv()) {
    SCOPED_TRACE(isa);
    for (WeightFormat f : kFormats)
      for (int64_t n : {1, 2, 3, 7, 17, 31, 65, 257})
        for (int64_t k : ks_for(f))
          for (int64_t nx : {1, 3}) {
            const Weights w(f, n, k, Layout::Row, rng);
            const Activations x(kFloat32, nx, k, 1, rng);
            GemvProblem p;
            p.alpha = 1.0;
            EXPECT_TRUE(check(p, w, x, kernels, NAN));  // beta 0: NaN in Y never read
            p.alpha = -0.75, p.beta = 0.5;
            EXPECT_TRUE(check(p, w, x, kernels, 0.0f, 2));
          }
  }
}

TEST(Gemv, ColumnMajorGeneralStridesAndStridedActivations) {
  std::mt19937 rng(2);
  for (const auto& [isa, kernels] : runnable_gemv()) {
    SCOPED_TRACE(isa);
    for (WeightFormat f : kFormats) {
      if (f == WeightFormat::NVFP4) continue;
      for (Layout layout : {Layout::Col, Layout::General})
        for (int64_t n : {1, 3, 17, 65, 1031, 2100})
          for (int64_t k : {1, 2, 7, 31, 257})
            for (int64_t nx : {1, 2, 4, 5}) {
              const Weights w(f, n, k, layout, rng);
              const Activations x(kFloat32, nx, k, 2, rng);
              GemvProblem p;
              EXPECT_TRUE(check(p, w, x, kernels, NAN));
              p.beta = -1.5;
              EXPECT_TRUE(check(p, w, x, kernels, 0.0f, 3));
            }
    }
  }
}

TEST(Gemv, BFloat16ActivationsRowAndGlobalScales) {
  std::mt19937 rng(3);
  for (const auto& [isa, kernels] : runnable_gemv()) {
    SCOPED_TRACE(isa);
    for (WeightFormat f : kFormats)
      for (int64_t nx : {1, 4, 6}) {
        const Weights w(f, 37, 272, Layout::Row, rng);
        const Activations x(kBFloat16, nx, 272, 1, rng);
        std::vector<float> row_scales(37);
        for (auto& s : row_scales) s = std::uniform_real_distribution<float>(0.1f, 3.0f)(rng);
        GemvProblem p;
        p.row_scales = row_scales.data();
        p.global_scale = 0.37;
        p.alpha = 2.0;
        EXPECT_TRUE(check(p, w, x, kernels, NAN));
      }
  }
}

// Five to sixteen activation vectors (eight share one pass over W on AVX-512; the rest go four
// at a time): within the oracle's bound, and every output bit for bit what the same vector
// gives alone, on both kernel layouts, every format and ISA.
TEST(Gemv, EightVectorsPerPassKeepEachOutputsBits) {
  std::mt19937 rng(8);
  for (const auto& [isa, kernels] : runnable_gemv()) {
    SCOPED_TRACE(isa);
    for (WeightFormat f : kFormats)
      for (Layout layout : {Layout::Row, Layout::Col}) {
        if (f == WeightFormat::NVFP4 && layout == Layout::Col) continue;
        const Weights w(f, 67, f == WeightFormat::NVFP4 ? 272 : 259, layout, rng);
        for (int64_t nx : {5, 7, 8, 9, 16}) {
          const Activations x(kFloat32, nx, w.k, 1, rng);
          GemvProblem p;
          p.alpha = 0.5;
          ASSERT_TRUE(check(p, w, x, kernels, NAN)) << "nx=" << nx;
          std::vector<float> all(static_cast<size_t>(nx * w.n)), one(static_cast<size_t>(w.n));
          w.into(p);
          x.into(p);
          p.y = all.data(), p.y_inc = 1, p.y_ld = w.n;
          gemv(p, kernels);
          for (int64_t m = 0; m < nx; ++m) {
            GemvProblem q = p;
            q.nx = 1;
            q.x = x.f32.data() + m * x.ld;
            q.y = one.data();
            gemv(q, kernels);
            ASSERT_EQ(0, std::memcmp(one.data(), all.data() + m * w.n, one.size() * sizeof(float)))
                << format_name(f) << " nx=" << nx << " vector " << m;
          }
        }
      }
  }
}

TEST(Gemv, RowsReadSideBySideKeepEachOutputsBits) {
  // The row kernels read rows i, i + q, i + 2q, ... of a call together (far-apart weight
  // streams); an output must have the bits it has when its row is the whole problem.
  std::mt19937 rng(12);
  for (const auto& [isa, kernels] : runnable_gemv()) {
    SCOPED_TRACE(isa);
    for (WeightFormat f : kFormats)
      for (int64_t n : {5, 9, 67})
        for (int64_t nx : {1, 2}) {
          const Weights w(f, n, f == WeightFormat::NVFP4 ? 272 : 259, Layout::Row, rng);
          const Activations x(kFloat32, nx, w.k, 1, rng);
          GemvProblem p;
          w.into(p);
          x.into(p);
          std::vector<float> all(static_cast<size_t>(nx * n)), one(static_cast<size_t>(nx));
          p.y = all.data(), p.y_inc = 1, p.y_ld = n;
          gemv(p, kernels);
          for (int64_t i = 0; i < n; ++i) {
            GemvProblem q = p;
            q.n = 1;
            // NVFP4 rows are addressed in bytes, the other formats in elements.
            const int64_t row_bytes =
                f == WeightFormat::NVFP4 ? p.w_rs : p.w_rs * format_bytes(f, 1);
            q.w = static_cast<const uint8_t*>(p.w) + i * row_bytes;
            if (p.block_scales) q.block_scales = p.block_scales + i * p.scale_rs;
            q.y = one.data(), q.y_ld = 1;
            gemv(q, kernels);
            for (int64_t m = 0; m < nx; ++m)
              ASSERT_EQ(0, std::memcmp(&one[m], &all[m * n + i], sizeof(float)))
                  << format_name(f) << " n=" << n << " nx=" << nx << " row " << i;
          }
        }
  }
}

// W x (alpha 1, beta 0) on `kernels` (gemv()'s default when null): nx x n, contiguous.
std::vector<float> products(const Weights& w, const Activations& x,
                            const cpu::GemvKernels* kernels = nullptr) {
  std::vector<float> y(static_cast<size_t>(x.nx * w.n));
  GemvProblem p;
  w.into(p);
  x.into(p);
  p.y = y.data(), p.y_ld = w.n;
  gemv(p, kernels);
  return y;
}

TEST(Gemv, OneAndTwoThreadsBitwiseEqual) {
  std::mt19937 rng(4);
  const int saved = get_num_threads();
  for (WeightFormat f : kFormats)
    for (Layout layout : {Layout::Row, Layout::Col})
      for (int64_t nx : {1, 3}) {
        if (f == WeightFormat::NVFP4 && layout == Layout::Col) continue;
        const Weights w(f, 1000, f == WeightFormat::NVFP4 ? 2048 : 1031, layout, rng);
        const Activations x(kFloat32, nx, w.k, 1, rng);
        set_num_threads(1);
        const std::vector<float> y1 = products(w, x);
        set_num_threads(2);
        const std::vector<float> y2 = products(w, x);
        EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)))
            << format_name(f) << " nx=" << nx;
      }
  set_num_threads(saved);
}

// The avx512vbmi build decodes float8_e4m3fn by table, four vectors per step; it must give
// the bits of the plain AVX-512 build (the same values, the same per-lane order), for every
// number of activation vectors and with k not a multiple of the step.
TEST(Gemv, Float8TableDecodeHasTheBitsOfTheAvx512Build) {
  if (!(best_isa() == CpuIsa::Avx512 && cpu_features().avx512_vbmi))
    GTEST_SKIP() << "this CPU has no AVX512_VBMI";
  std::mt19937 rng(11);
  for (WeightFormat f : {WeightFormat::Float8_e4m3fn, WeightFormat::Float8_e5m2})
    for (int64_t nx : {1, 2, 3, 4, 5, 8}) {
      const Weights w(f, 37, 1000, Layout::Row, rng);
      const Activations x(kFloat32, nx, w.k, 1, rng);
      const std::vector<float> plain = products(w, x, &gemv_kernels_for("avx512"));
      const std::vector<float> table = products(w, x, &gemv_kernels_for("avx512vbmi"));
      EXPECT_EQ(0, std::memcmp(plain.data(), table.data(), plain.size() * sizeof(float)))
          << format_name(f) << " nx=" << nx;
    }
}

// Every float8 code (and every float4 code with a block scale) decodes exactly as the
// scalar conversions of tessera/core/half.h do.
TEST(Gemv, DecodesEveryCodeExactly) {
  for (const auto& [isa, kernels] : runnable_gemv()) {
    SCOPED_TRACE(isa);
    // Row c holds code c at column (7 c) % k and zeros elsewhere, so with x = 1 output c is
    // code c's value. k = 1 decodes on the tail path, 32 in two-vector steps, 64 and 192 in
    // the widest steps a kernel has (four vectors at once where the decoder can).
    for (WeightFormat f : {WeightFormat::Float8_e4m3fn, WeightFormat::Float8_e5m2})
      for (int64_t k : {1, 32, 64, 192}) {
        std::vector<uint8_t> codes(static_cast<size_t>(256 * k), 0);
        for (int c = 0; c < 256; ++c) codes[c * k + (7 * c) % k] = static_cast<uint8_t>(c);
        const std::vector<float> ones(static_cast<size_t>(k), 1.0f);
        std::vector<float> y(256);
        GemvProblem p;
        p.format = f, p.n = 256, p.k = k;
        p.w = codes.data(), p.w_rs = k, p.w_cs = 1;
        p.x = ones.data(), p.y = y.data();
        gemv(p, kernels);
        for (int c = 0; c < 256; ++c) {
          const float want = f == WeightFormat::Float8_e4m3fn
                                 ? float(Float8_e4m3fn(from_bits, static_cast<uint8_t>(c)))
                                 : float(Float8_e5m2(from_bits, static_cast<uint8_t>(c)));
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(y[c])) << format_name(f) << " k " << k << " code " << c;
          } else {
            EXPECT_EQ(want, y[c]) << format_name(f) << " k " << k << " code " << c;
          }
        }
      }
    // NVFP4: row r holds code r % 16 in all 16 values, block scale code 0x38 + r / 16.
    std::vector<uint8_t> w(64 * 8), scales(64);
    for (int r = 0; r < 64; ++r) {
      for (int j = 0; j < 8; ++j) w[r * 8 + j] = static_cast<uint8_t>((r % 16) * 0x11);
      scales[r] = static_cast<uint8_t>(0x38 + r / 16);
    }
    std::vector<float> x(16, 0.0f), y(64);
    x[3] = 1.0f;
    GemvProblem p;
    p.format = WeightFormat::NVFP4, p.n = 64, p.k = 16;
    p.w = w.data(), p.w_rs = 8, p.w_cs = 1, p.block_scales = scales.data(), p.scale_rs = 1;
    p.x = x.data(), p.y = y.data();
    gemv(p, kernels);
    for (int r = 0; r < 64; ++r)
      EXPECT_EQ(formats::kE2m1Values[r % 16] * float(Float8_e4m3fn(from_bits, scales[r])), y[r])
          << "nvfp4 row " << r;
  }
}

TEST(Gemv, AlphaZeroAndEmptyKReadNeitherWNorX) {
  std::vector<float> w(12, NAN), x(4, NAN), y = {1, 2, 3};
  GemvProblem p;
  p.n = 3, p.k = 4, p.w = w.data(), p.w_rs = 4, p.w_cs = 1, p.x = x.data(), p.y = y.data();
  p.alpha = 0, p.beta = 2;
  gemv(p);
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6}));
  p.alpha = 1, p.k = 0, p.beta = 0;
  y = {NAN, NAN, NAN};
  gemv(p);
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0}));
}

TEST(Gemv, ErrorsNameOpArgumentExpectedAndGiven) {
  std::vector<uint8_t> w(64), scales(8);
  std::vector<float> x(64), y(4);
  GemvProblem p;
  p.format = WeightFormat::NVFP4, p.n = 2, p.k = 24;
  p.w = w.data(), p.w_rs = 12, p.w_cs = 1, p.block_scales = scales.data(), p.scale_rs = 2;
  p.x = x.data(), p.y = y.data();
  expect_error_mentions([&] { gemv(p); }, {"gemv()", "'k'", "16", "24"});
  p.k = 32, p.w_cs = 2;
  expect_error_mentions([&] { gemv(p); }, {"gemv()", "'w'", "w_cs == 1", "w_cs=2"});
  p.w_cs = 1, p.block_scales = nullptr;
  expect_error_mentions([&] { gemv(p); }, {"'block_scales'", "null"});
  p.block_scales = scales.data(), p.x_dtype = kFloat64;
  EXPECT_THROW(gemv(p), TypeError);
  expect_error_mentions([&] { gemv(p); }, {"'x'", "float32 or bfloat16", "float64"});
  p.x_dtype = kFloat32, p.n = -1;
  expect_error_mentions([&] { gemv(p); }, {"non-negative", "n=-1"});
}

// The engine sends float32 products with m or n <= 4 to the GEMV kernels of the same ISA.
TEST(GemvEngine, TinyMOrNGemmMatchesReferenceAndIsThreadInvariant) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int saved = get_num_threads();
  for (auto [m, n, k] : {std::tuple{1, 1500, 777}, std::tuple{3, 1300, 517},
                         std::tuple{900, 1, 1029}, std::tuple{1200, 4, 333}}) {
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (auto& v : a) v = dist(rng);
    for (auto& v : b) v = dist(rng);
    std::vector<float> c1(static_cast<size_t>(m * n), NAN), c2 = c1;
    std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end()), r(c1.size());
    GemmProblem p;
    p.m = m, p.n = n, p.k = k;
    p.a = a.data(), p.a_rs = k, p.a_cs = 1;
    p.b = b.data(), p.b_rs = n, p.b_cs = 1;
    p.c_rs = n, p.c_cs = 1;
    for (auto [threads, c] : {std::pair{1, &c1}, std::pair{2, &c2}}) {
      set_num_threads(threads);
      p.c = c->data();
      gemm(p);
    }
    EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)));
    GemmProblem q = p;
    q.dtype = kFloat64, q.a = a64.data(), q.b = b64.data(), q.c = r.data();
    gemm_reference(q);
    for (size_t e = 0; e < r.size(); ++e) EXPECT_NEAR(c1[e], r[e], 1e-5 * k) << m << "x" << n;
  }
  set_num_threads(saved);
}

// Products with few rows take the small kernel when it holds them whole (m, n, k <= 64) and
// the GEMV kernels otherwise; both sum k in order with FMA, so the choice never changes a bit
// (the epilogue's GEMV form relies on it too).
TEST(GemvEngine, FewRowProductsHaveTheSameBitsOnTheSmallKernelAndTheGemv) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const cpu::GemmKernels& ks = detail::default_gemm_kernels();
  if (!ks.small_sgemm) GTEST_SKIP() << "no small kernel on " << ks.isa;
  for (auto [m, n, k, small] :
       {std::tuple{4, 4, 4, true}, std::tuple{1, 16, 16, true}, std::tuple{4, 64, 64, true},
        std::tuple{3, 8, 64, true}, std::tuple{1, 64, 512, false}, std::tuple{2, 48, 300, false}}) {
    SCOPED_TRACE(fmt::format("{}x{}x{}", m, n, k));
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (auto& v : a) v = dist(rng);
    for (auto& v : b) v = dist(rng);
    std::vector<float> got(static_cast<size_t>(m * n), NAN), by_small = got, by_gemv = got;
    GemmProblem p;
    p.m = m, p.n = n, p.k = k;
    p.a = a.data(), p.a_rs = k, p.a_cs = 1;
    p.b = b.data(), p.b_rs = n, p.b_cs = 1;
    p.c = got.data(), p.c_rs = n, p.c_cs = 1;
    gemm(p);
    ks.small_sgemm(m, n, k, 1.0f, a.data(), k, 1, b.data(), n, 0.0f, by_small.data(), n);
    GemvProblem g;  // W = B^T, the rows of A the vectors
    g.n = n, g.k = k, g.nx = m;
    g.w = b.data(), g.w_rs = 1, g.w_cs = n;
    g.x = a.data(), g.x_ld = k, g.x_inc = 1;
    g.y = by_gemv.data(), g.y_ld = n, g.y_inc = 1;
    gemv(g);
    const size_t bytes = got.size() * sizeof(float);
    EXPECT_EQ(0, std::memcmp(got.data(), by_small.data(), bytes));
    EXPECT_EQ(0, std::memcmp(got.data(), by_gemv.data(), bytes));
  }
}

// ---- float64 and complex GEMMs with few rows or columns (gemm_as_gemv) ----

// float64 for double, the part type for complex.
template <class T>
using RealPart = decltype(std::abs(std::declval<T>()));

template <class T>
void fill_values(gemm::testing::GuardedMatrix<T>& m, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j) {
      if constexpr (std::is_same_v<T, double>) {
        m.at(i, j) = d(rng);
      } else {
        const double re = d(rng), im = d(rng);
        m.at(i, j) = T(static_cast<RealPart<T>>(re), static_cast<RealPart<T>>(im));
      }
    }
}

// C = alpha A B + beta C on `kernels` (gemm_as_gemv, or gemm() when kernels is null) against
// gemm_reference: per element within 8 (k + 2) eps (|alpha| sum |A| |B| + |beta C|), nothing
// outside C written; returns C.
template <class T>
std::vector<T> check_dense(int64_t m, int64_t n, int64_t k, gemm::testing::Layout la,
                           gemm::testing::Layout lb, gemm::testing::Layout lc, double alpha,
                           double beta, const cpu::GemvKernels* kernels, std::mt19937_64& rng) {
  using gemm::testing::GuardedMatrix;
  GuardedMatrix<T> a(m, k, la), b(k, n, lb), c(m, n, lc);
  fill_values(a, rng);
  fill_values(b, rng);
  if (beta == 0) {
    c.fill(T(NAN));  // never read
  } else {
    fill_values(c, rng);
  }
  GuardedMatrix<T> ref = c;
  const GemmProblem p = gemm::testing::make_problem(m, n, k, a, b, c, alpha, beta);
  if (kernels) {
    EXPECT_TRUE(gemv_reads_in_place(p));
    gemm_as_gemv(p, *kernels, true);
  } else {
    gemm(p);
  }
  GemmProblem q = p;
  q.c = ref.data();
  gemm_reference(q);
  const double eps = std::numeric_limits<RealPart<T>>::epsilon();
  std::vector<T> out;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double mag = 0;
      for (int64_t x = 0; x < k; ++x) mag += std::abs(a.at(i, x)) * std::abs(b.at(x, j));
      const double prev = beta == 0 ? 0.0 : std::abs(beta) * std::abs(ref.at(i, j));
      const double bound = 8.0 * static_cast<double>(k + 2) * eps * (std::abs(alpha) * mag + prev);
      const double err =
          std::abs(std::complex<double>(c.at(i, j)) - std::complex<double>(ref.at(i, j)));
      EXPECT_LE(err, bound + 1e-300) << "C(" << i << ", " << j << ") of " << m << "x" << n << "x"
                                     << k << " " << dtype_name(p.dtype);
      out.push_back(c.at(i, j));
    }
  EXPECT_TRUE(c.sentinels_intact()) << "a write outside C";
  return out;
}

template <class T>
void check_dense_shapes(const cpu::GemvKernels* kernels, std::mt19937_64& rng) {
  using gemm::testing::Layout;
  // Few rows (W = B^T) and few columns (W = A); k around the vector widths and past the
  // two-vector steps; 1..8 vectors (odd groups, the complex pairs sharing a pass or not).
  for (auto [m, n, k] : {std::tuple{1, 37, 1},
                         {1, 70, 67},
                         {3, 45, 17},
                         {2, 33, 130},
                         {70, 1, 67},
                         {41, 4, 33},
                         {29, 5, 9},
                         {31, 8, 19},
                         {6, 23, 41}})
    for (Layout la : {Layout::RowMajor, Layout::ColMajor})
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
        for (Layout lc : {Layout::RowMajor, Layout::ColMajor}) {
          check_dense<T>(m, n, k, la, lb, lc, 1.0, 0.0, kernels, rng);
          check_dense<T>(m, n, k, la, lb, lc, -0.75, 0.5, kernels, rng);
        }
}

TEST(GemvDense, Float64AndComplexOnEveryIsaMatchTheOracle) {
  std::mt19937_64 rng(31);
  for (const auto& [isa, kernels] : runnable_gemv()) {
    SCOPED_TRACE(isa);
    check_dense_shapes<double>(kernels, rng);
    check_dense_shapes<complex64>(kernels, rng);
    check_dense_shapes<complex128>(kernels, rng);
  }
}

// Through gemm(): a W with no unit stride goes to the packed GEMM, alpha 0 and k 0 scale C,
// and column blocks past kComplexBlock (2048 outputs) are combined block by block.
TEST(GemvDense, EngineRoutesEveryLayoutAndEdge) {
  using gemm::testing::Layout;
  std::mt19937_64 rng(32);
  for (Layout la : gemm::testing::kLayouts)
    for (Layout lb : gemm::testing::kLayouts) {
      check_dense<double>(2, 300, 77, la, lb, Layout::RowMajor, 1.5, 0.0, nullptr, rng);
      check_dense<complex64>(300, 3, 77, la, lb, Layout::ColMajor, 1.0, -1.0, nullptr, rng);
      check_dense<complex128>(1, 90, 150, la, lb, Layout::General, 0.5, 2.0, nullptr, rng);
    }
  check_dense<complex64>(1, 4500, 5, Layout::RowMajor, Layout::RowMajor, Layout::RowMajor, 1.0, 0.0,
                         nullptr, rng);
  check_dense<complex128>(4500, 2, 3, Layout::ColMajor, Layout::RowMajor, Layout::RowMajor, -1.0,
                          0.25, nullptr, rng);
  check_dense<double>(3, 50, 0, Layout::RowMajor, Layout::RowMajor, Layout::RowMajor, 1.0, 0.5,
                      nullptr, rng);
  check_dense<complex64>(50, 2, 9, Layout::RowMajor, Layout::RowMajor, Layout::RowMajor, 0.0, 0.0,
                         nullptr, rng);
  check_dense<complex128>(1, 50, 9, Layout::RowMajor, Layout::RowMajor, Layout::RowMajor, 0.0, -2.0,
                          nullptr, rng);
}

// Outputs split over threads: the same bits on one and two threads, both forms, every dtype.
TEST(GemvDense, OneAndTwoThreadsBitwiseEqual) {
  using gemm::testing::Layout;
  const int saved = get_num_threads();
  auto both = [&]<class T>(int64_t m, int64_t n, int64_t k, Layout la, Layout lb) {
    std::vector<T> got[2];
    for (int t : {1, 2}) {
      set_num_threads(t);
      std::mt19937_64 rng(33);
      got[t - 1] = check_dense<T>(m, n, k, la, lb, Layout::RowMajor, 1.0, 0.0, nullptr, rng);
    }
    EXPECT_EQ(0, std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(T)))
        << m << "x" << n << "x" << k;
  };
  for (Layout l : {Layout::RowMajor, Layout::ColMajor}) {
    both.operator()<double>(1, 3000, 300, l, l);
    both.operator()<complex64>(3000, 2, 300, l, l);
    both.operator()<complex128>(1, 3000, 150, l, l);
  }
  set_num_threads(saved);
}

// The eager ops against OpenBLAS's ?gemv (the outside oracle): A x and x^T A, A transposed.
TEST(GemvDense, EagerMatrixVectorProductsMatchOpenBlas) {
  manual_seed(34);
  for (ScalarType t : {kFloat64, kComplex64, kComplex128}) {
    SCOPED_TRACE(dtype_name(t));
    const ScalarType real = t == kComplex64 ? kFloat32 : kFloat64;
    auto random = [&](std::vector<int64_t> shape) {
      if (!is_complex(t)) return randn(shape, t);
      shape.push_back(2);
      return view_as_complex(randn(shape, real));
    };
    const int64_t n = 333, k = 517;
    const Tensor a = random({n, k}), x = random({k}), xt = random({n});
    for (bool trans : {false, true}) {
      const Tensor got = trans ? matmul(xt, a) : matmul(a, x);
      const Tensor v = trans ? xt : x;
      Tensor want = empty({trans ? k : n}, t);
      const auto op = trans ? CblasTrans : CblasNoTrans;
      if (t == kFloat64) {
        cblas_dgemv(CblasRowMajor, op, n, k, 1.0, a.data_ptr<double>(), k, v.data_ptr<double>(), 1,
                    0.0, want.data_ptr<double>(), 1);
      } else if (t == kComplex64) {
        const std::complex<float> one(1), zero(0);
        cblas_cgemv(CblasRowMajor, op, n, k, &one, a.data_ptr(), k, v.data_ptr(), 1, &zero,
                    want.data_ptr(), 1);
      } else {
        const std::complex<double> one(1), zero(0);
        cblas_zgemv(CblasRowMajor, op, n, k, &one, a.data_ptr(), k, v.data_ptr(), 1, &zero,
                    want.data_ptr(), 1);
      }
      const double tol = t == kComplex64 ? 2e-5 : 1e-12;
      EXPECT_TRUE(allclose(got, want, tol, tol)) << (trans ? "x^T A" : "A x");
    }
  }
}

}  // namespace
}  // namespace tessera::gemm
