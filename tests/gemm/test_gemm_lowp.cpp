// The low-precision engine path (src/gemm/lowp.h) against a float64 evaluation of the same
// decoded operands: bfloat16 and float16 on every ISA table this CPU runs, the avx512 table
// with and without its vdpbf16ps kernel, float8 with row/column scales, NVFP4 with block
// scales, odd sizes, K odd and K = 1, strided/transposed operands and C, beta 0 with NaN in C,
// sentinels around C, and bitwise equality across thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dispatch.h"
#include "gemm/kernels/pack_kernels.h"
#include "gemm/lowp.h"
#include "gemm_test_util.h"
#include "tessera/core/error.h"
#include "tessera/core/half.h"
#include "tessera/core/parallel.h"
#include "test_support.h"

namespace tessera::gemm::testing {
namespace {

struct NamedLowp {
  std::string name;
  cpu::LowpGemmKernels table;
};

// Every table this CPU can run; on a CPU with AVX512_BF16 also avx512 without the pair
// kernel, so both the vdpbf16ps path and the float32 fallback are exercised here, and on one
// with AMX-BF16 avx512 with the AMX kernel in the pair kernel's place.
std::vector<NamedLowp> lowp_tables() {
  std::vector<NamedLowp> out{{"generic", cpu::generic::lowp_gemm_kernels()}};
  const CpuFeatures& f = cpu_features();
  if (f.avx2 && f.fma) out.push_back({"avx2", cpu::avx2::lowp_gemm_kernels()});
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) {
    cpu::LowpGemmKernels t = cpu::avx512::lowp_gemm_kernels();
    EXPECT_EQ(t.bf16.fn != nullptr, f.avx512_bf16);
    EXPECT_EQ(t.amx.fn != nullptr, f.amx_bf16 && request_amx_tiles());
    out.push_back({t.bf16.fn ? "avx512+dpbf16" : "avx512", t});
    if (t.amx.fn) {
      cpu::LowpGemmKernels amx = t;
      amx.bf16 = t.amx;
      out.push_back({"avx512+amx", amx});
    }
    if (t.bf16.fn) {
      t.bf16 = {};
      out.push_back({"avx512-fallback", t});
    }
  }
  EXPECT_EQ(out.front().table.bf16.fn, nullptr);
  return out;
}

int64_t bytes_of(ScalarType t) {
  return t == ScalarType::Float32                                  ? 4
         : (t == ScalarType::BFloat16 || t == ScalarType::Float16) ? 2
                                                                   : 1;
}

// Rounds v to the dtype and stores it at element `e` of raw storage.
void put(ScalarType t, void* base, int64_t e, float v) {
  switch (t) {
    case ScalarType::BFloat16:
      static_cast<BFloat16*>(base)[e] = BFloat16(v);
      break;
    case ScalarType::Float16:
      static_cast<Half*>(base)[e] = Half(v);
      break;
    case ScalarType::Float8_e4m3fn:
      static_cast<Float8_e4m3fn*>(base)[e] = Float8_e4m3fn(v);
      break;
    case ScalarType::Float8_e5m2:
      static_cast<Float8_e5m2*>(base)[e] = Float8_e5m2(v);
      break;
    default:
      static_cast<float*>(base)[e] = v;
  }
}

double get(ScalarType t, const void* base, int64_t e) {
  switch (t) {
    case ScalarType::BFloat16:
      return float(static_cast<const BFloat16*>(base)[e]);
    case ScalarType::Float16:
      return float(static_cast<const Half*>(base)[e]);
    default:
      return static_cast<const float*>(base)[e];
  }
}

// A rows x cols matrix of dtype t inside guard bytes; layout 0 row-major (padded), 1
// column-major, 2 general strides.
struct Mat {
  static constexpr int64_t kGuard = 64;
  ScalarType t;
  int64_t rows, cols, rs = 0, cs = 0;
  std::vector<unsigned char> buf;
  Mat(ScalarType type, int64_t r, int64_t c, int layout) : t(type), rows(r), cols(c) {
    if (layout == 0) rs = c + 3, cs = 1;
    if (layout == 1) rs = 1, cs = r + 2;
    if (layout == 2) rs = 2 * c + 1, cs = 2;
    const int64_t span = (r > 0 && c > 0) ? (r - 1) * rs + (c - 1) * cs + 1 : 0;
    buf.assign((span + 2 * kGuard) * bytes_of(t), 0xA5);
  }
  void* data() { return buf.data() + kGuard * bytes_of(t); }
  const void* data() const { return buf.data() + kGuard * bytes_of(t); }
  void fill(std::mt19937_64& rng, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) put(t, data(), i * rs + j * cs, float(d(rng)));
  }
  void fill(float v) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) put(t, data(), i * rs + j * cs, v);
  }
  double at(int64_t i, int64_t j) const { return get(t, data(), i * rs + j * cs); }
  // Bytes the matrix does not own still hold 0xA5.
  bool guards_intact() const {
    std::vector<char> owned(buf.size(), 0);
    const int64_t es = bytes_of(t);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t b = 0; b < es; ++b) owned[(kGuard + i * rs + j * cs) * es + b] = 1;
    for (size_t x = 0; x < buf.size(); ++x)
      if (!owned[x] && buf[x] != 0xA5) return false;
    return true;
  }
};

double out_eps(ScalarType t) {
  return t == ScalarType::BFloat16 ? 0x1p-8 : t == ScalarType::Float16 ? 0x1p-11 : 0x1p-24;
}

// Checks C after the engine ran against a float64 evaluation of the decoded operands (C's
// previous values in `before`). Bound: float32 accumulation 4 (k + 2) 2^-24 sum |a b| |scale|,
// plus one rounding to C's dtype.
::testing::AssertionResult matches(const LowpProblem& p, const Mat& before, const Mat& got) {
  if (!got.guards_intact()) return ::testing::AssertionFailure() << "write outside C";
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0, mag = 0;
      if (p.alpha != 0)
        for (int64_t q = 0; q < p.k; ++q) {
          const double x = lowp_decode(p.a, false, i, q) * lowp_decode(p.b, true, q, j);
          acc += x;
          mag += std::fabs(x);
        }
      double s = p.alpha;
      if (p.row_scale) s *= p.row_scale[i];
      if (p.col_scale) s *= p.col_scale[j];
      double v = s * acc, vmag = std::fabs(s) * mag;
      if (p.bias) v += p.bias[j], vmag += std::fabs(p.bias[j]);
      if (p.beta != 0) v += p.beta * before.at(i, j), vmag += std::fabs(p.beta * before.at(i, j));
      const double bound =
          4.0 * (p.k + 2) * 0x1p-24 * vmag + out_eps(p.c_dtype) * std::fabs(v) + 1e-30;
      const double g = got.at(i, j);
      if (!(std::fabs(g - v) <= bound))
        return ::testing::AssertionFailure()
               << "C(" << i << ", " << j << ") = " << g << ", expected " << v << " (bound " << bound
               << ") for m=" << p.m << " n=" << p.n << " k=" << p.k;
    }
  }
  return ::testing::AssertionSuccess();
}

struct Shape {
  int64_t m, n, k;
};
const std::vector<Shape> kShapes = {
    {1, 1, 1},
    {2, 3, 1},
    {7, 17, 1},
    {3, 3, 3},
    {7, 7, 7},
    {17, 17, 17},
    {31, 31, 31},
    {65, 65, 65},
    {14, 32, 16},
    {15, 33, 17},
    {13, 31, 2},
    {1, 65, 17},
    {65, 1, 18},
    {37, 41, 43},
    {97, 89, 83},
    {101, 7, 61},
    {3, 101, 59},
    {257, 31, 7},
    {31, 257, 5},
    {2, 3, 300},
    {29, 67, 1031},
    {0, 5, 3},
    {5, 0, 3},
    {3, 7, 0},
    // Past the pair kernel's one-block depth (2048): two and three KC blocks, the last odd.
    {5, 35, 2049},
    {9, 37, 4099},
};

void run_sweep(const cpu::LowpGemmKernels& table, ScalarType in, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ScalarType outs[] = {ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float16};
  int v = 0;
  for (const Shape& s : kShapes) {
    for (int rep = 0; rep < 3; ++rep, ++v) {
      const ScalarType out = outs[v % 3];
      const int la = v % 3, lb = (v / 3) % 3, lc = (v / 9) % 3;
      Mat a(in, s.m, s.k, la), b(in, s.k, s.n, lb), c(out, s.m, s.n, lc);
      a.fill(rng, -1, 1);
      b.fill(rng, -1, 1);
      const bool beta_zero = rep != 1;
      if (beta_zero) {
        c.fill(std::nanf(""));
      } else {
        c.fill(rng, -1, 1);
      }
      const Mat before = c;
      LowpProblem p;
      p.m = s.m, p.n = s.n, p.k = s.k;
      p.a = {in, a.data(), a.rs, a.cs};
      p.b = {in, b.data(), b.rs, b.cs};
      p.c_dtype = out, p.c = c.data(), p.c_rs = c.rs, p.c_cs = c.cs;
      p.alpha = rep == 2 ? -1.5f : 1.0f;
      p.beta = beta_zero ? 0.0f : 0.5f;
      gemm_lowp(p, &table);
      SCOPED_TRACE(::testing::Message() << "in " << dtype_name(in) << " out " << dtype_name(out)
                                        << " layouts " << la << lb << lc);
      EXPECT_TRUE(matches(p, before, c));
    }
  }
}

// The per-ISA bfloat16 pair packer against the panel layout written out element by element:
// both contiguous layouts, even and odd row strides, a source 2 bytes off 4-byte alignment,
// lanes short of the panel width, odd kc; a sentinel past the panel stays.
TEST(GemmLowp, PairPackerMatchesTheLayoutOnEveryIsa) {
  std::mt19937 rng(11);
  std::vector<uint16_t> src(80 * 80 + 1);
  for (uint16_t& x : src) x = static_cast<uint16_t>(rng());
  constexpr uint16_t kSentinel = 0xdead;
  for (const auto& [isa, table] : TS_RUNNABLE_TABLES(pack_kernels)) {
    SCOPED_TRACE(isa);
    for (int64_t width : {1, 14, 32, 40})
      for (int64_t valid : {int64_t{1}, width / 2, width - 1, width}) {
        if (valid < 1) continue;
        for (int64_t kc : {1, 2, 7, 16, 35, 64})
          for (bool k_contiguous : {true, false})
            for (int64_t stride : {int64_t{64}, int64_t{71}})
              for (int64_t offset : {0, 1}) {
                const int64_t ls = k_contiguous ? stride : 1, ks = k_contiguous ? 1 : stride;
                const uint16_t* s = src.data() + offset;
                const int64_t kp = (kc + 1) / 2;
                std::vector<uint16_t> dst(static_cast<size_t>(kp * width * 2 + 1), kSentinel);
                table->pairs_bf16(valid, width, kc, s, ls, ks, dst.data());
                int64_t wrong = 0;
                for (int64_t q = 0; q < kp; ++q)
                  for (int64_t l = 0; l < width; ++l)
                    for (int64_t t = 0; t < 2; ++t) {
                      const int64_t p = 2 * q + t;
                      const uint16_t want = l < valid && p < kc ? s[l * ls + p * ks] : 0;
                      wrong += dst[(q * width + l) * 2 + t] != want;
                    }
                EXPECT_EQ(wrong, 0) << "width " << width << " valid " << valid << " kc " << kc
                                    << (k_contiguous ? " k" : " lanes") << " contiguous, stride "
                                    << stride << ", offset " << offset;
                EXPECT_EQ(dst.back(), kSentinel);
              }
      }
  }
}

TEST(GemmLowp, Bf16EveryTableOddShapes) {
  for (const auto& t : lowp_tables()) {
    SCOPED_TRACE(t.name);
    run_sweep(t.table, ScalarType::BFloat16, 1);
  }
}

TEST(GemmLowp, Fp16EveryTableOddShapes) {
  for (const auto& t : lowp_tables()) {
    SCOPED_TRACE(t.name);
    run_sweep(t.table, ScalarType::Float16, 2);
  }
}

TEST(GemmLowp, Float8WithRowColumnScalesAndBias) {
  std::mt19937_64 rng(3);
  for (const auto& t : lowp_tables()) {
    SCOPED_TRACE(t.name);
    for (ScalarType fa : {ScalarType::Float8_e4m3fn, ScalarType::Float8_e5m2})
      for (const Shape& s : {Shape{17, 33, 65}, Shape{1, 1, 1}, Shape{40, 70, 9}}) {
        Mat a(fa, s.m, s.k, 0), b(ScalarType::Float8_e4m3fn, s.k, s.n, 1);
        Mat c(ScalarType::BFloat16, s.m, s.n, 0);
        a.fill(rng, -8, 8);
        b.fill(rng, -8, 8);
        c.fill(std::nanf(""));
        std::vector<float> rs(s.m), cs(s.n), bias(s.n);
        for (auto& x : rs) x = float(rng() % 100) / 37.0f + 0.1f;
        for (auto& x : cs) x = float(rng() % 100) / 53.0f + 0.1f;
        for (auto& x : bias) x = float(rng() % 100) / 10.0f - 5.0f;
        const Mat before = c;
        LowpProblem p;
        p.m = s.m, p.n = s.n, p.k = s.k;
        p.a = {fa, a.data(), a.rs, a.cs};
        p.b = {ScalarType::Float8_e4m3fn, b.data(), b.rs, b.cs};
        p.c_dtype = ScalarType::BFloat16, p.c = c.data(), p.c_rs = c.rs, p.c_cs = c.cs;
        p.alpha = 0.25f, p.row_scale = rs.data(), p.col_scale = cs.data(), p.bias = bias.data();
        gemm_lowp(p, &t.table);
        EXPECT_TRUE(matches(p, before, c));
      }
  }
}

// NVFP4 operands: A [m, k/2] bytes row-major, B as w.t() of w [n, k/2]; random nibbles and
// random float8_e4m3fn block scales.
TEST(GemmLowp, Nvfp4BlockScales) {
  std::mt19937_64 rng(4);
  for (const auto& t : lowp_tables()) {
    SCOPED_TRACE(t.name);
    for (const Shape& s : {Shape{1, 1, 16}, Shape{17, 33, 48}, Shape{31, 65, 1040}}) {
      std::vector<uint8_t> a(s.m * s.k / 2), w(s.n * s.k / 2);
      for (auto& x : a) x = static_cast<uint8_t>(rng());
      for (auto& x : w) x = static_cast<uint8_t>(rng());
      std::vector<Float8_e4m3fn> sa(s.m * s.k / 16), sw(s.n * s.k / 16);
      for (auto& x : sa) x = Float8_e4m3fn(float(rng() % 64) / 16.0f + 0.0625f);
      for (auto& x : sw) x = Float8_e4m3fn(float(rng() % 64) / 16.0f + 0.0625f);
      Mat c(ScalarType::Float32, s.m, s.n, 2);
      c.fill(std::nanf(""));
      const Mat before = c;
      LowpProblem p;
      p.m = s.m, p.n = s.n, p.k = s.k;
      p.a = {ScalarType::Float4_e2m1fn_x2, a.data(), s.k, 1, sa.data(), s.k / 16, 1};
      p.b = {ScalarType::Float4_e2m1fn_x2, w.data(), 1, s.k, sw.data(), s.k / 16, 1};
      p.c_dtype = ScalarType::Float32, p.c = c.data(), p.c_rs = c.rs, p.c_cs = c.cs;
      p.alpha = 0.5f;
      gemm_lowp(p, &t.table);
      EXPECT_TRUE(matches(p, before, c));
    }
  }
}

TEST(GemmLowp, ThreadCountsGiveIdenticalBits) {
  std::mt19937_64 rng(5);
  const int saved = get_num_threads();
  for (const auto& t : lowp_tables()) {
    SCOPED_TRACE(t.name);
    for (const Shape& s : {Shape{301, 203, 1100}, Shape{90, 500, 77}}) {
      Mat a(ScalarType::BFloat16, s.m, s.k, 0), b(ScalarType::BFloat16, s.k, s.n, 0);
      a.fill(rng, -1, 1);
      b.fill(rng, -1, 1);
      std::vector<Mat> cs;
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        Mat c(ScalarType::BFloat16, s.m, s.n, 0);
        LowpProblem p;
        p.m = s.m, p.n = s.n, p.k = s.k;
        p.a = {ScalarType::BFloat16, a.data(), a.rs, a.cs};
        p.b = {ScalarType::BFloat16, b.data(), b.rs, b.cs};
        p.c_dtype = ScalarType::BFloat16, p.c = c.data(), p.c_rs = c.rs, p.c_cs = c.cs;
        gemm_lowp(p, &t.table);
        cs.push_back(c);
      }
      EXPECT_EQ(cs[0].buf, cs[1].buf);
    }
  }
  set_num_threads(saved);
}

// The default dispatch gives bfloat16 the kernel bf16_path() chose: AMX tiles where the CPU
// has them, else from its probe (the pair kernel only where vdpbf16ps beats the float32 FMA),
// bit for bit what that table gives when it is passed explicitly.
TEST(GemmLowp, DefaultBf16PathFollowsTheProbe) {
  const Bf16Path& path = bf16_path();
  const cpu::LowpGemmKernels& dispatched = TS_DISPATCH(lowp_gemm_kernels);
  const char* forced = std::getenv("TESSERA_GEMM_BF16");
  if (dispatched.bf16.fn == nullptr) {
    EXPECT_FALSE(path.pairs);
    EXPECT_NE(path.reason.find("AVX512_BF16"), std::string::npos) << path.reason;
  } else {
    EXPECT_GT(path.gain, 0.05) << path.reason;
    EXPECT_LT(path.gain, 20.0) << path.reason;
    if (forced == nullptr && dispatched.amx.fn != nullptr) {
      EXPECT_TRUE(path.amx && path.pairs) << path.reason;
    } else if (forced == nullptr) {
      EXPECT_FALSE(path.amx) << path.reason;
      EXPECT_EQ(path.pairs, path.gain >= 1.2) << path.reason;
    }
  }
  cpu::LowpGemmKernels chosen = dispatched;
  if (path.amx) chosen.bf16 = dispatched.amx;
  if (!path.pairs) chosen.bf16 = {};
  std::mt19937_64 rng(9);
  const Shape s{70, 90, 301};
  Mat a(ScalarType::BFloat16, s.m, s.k, 0), b(ScalarType::BFloat16, s.k, s.n, 0);
  a.fill(rng, -1, 1);
  b.fill(rng, -1, 1);
  std::vector<Mat> cs;
  for (const cpu::LowpGemmKernels* table : {static_cast<const cpu::LowpGemmKernels*>(nullptr),
                                            static_cast<const cpu::LowpGemmKernels*>(&chosen)}) {
    Mat c(ScalarType::Float32, s.m, s.n, 0);
    LowpProblem p;
    p.m = s.m, p.n = s.n, p.k = s.k;
    p.a = {ScalarType::BFloat16, a.data(), a.rs, a.cs};
    p.b = {ScalarType::BFloat16, b.data(), b.rs, b.cs};
    p.c_dtype = ScalarType::Float32, p.c = c.data(), p.c_rs = c.rs, p.c_cs = c.cs;
    gemm_lowp(p, table);
    cs.push_back(c);
  }
  EXPECT_EQ(cs[0].buf, cs[1].buf) << path.reason;
}

// Runs p (C of dtype `out`, filled at random) with its B unpacked on `table` and with `packed`
// on a copy of the same C, under TESSERA_GEMM_BLOCKS=`blocks` and each thread count, and
// expects the same bits. With beta, the two-thread runs take beta 1 and `bias`.
void expect_prepacked_bits(LowpProblem p, const PackedLowpB& packed,
                           const cpu::LowpGemmKernels& table, ScalarType out, const float* bias,
                           std::mt19937_64& rng, const char* blocks) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Mat c0(out, p.m, p.n, 0);
    c0.fill(rng, -1, 1);
    Mat c1 = c0;
    p.c_dtype = out, p.c = c0.data(), p.c_rs = c0.rs, p.c_cs = c0.cs;
    p.beta = threads == 1 ? 0.0f : 1.0f;
    p.bias = threads == 1 ? nullptr : bias;
    gemm_lowp(p, &table);
    LowpProblem q = p;
    q.b = {};
    q.c = c1.data();
    gemm_lowp_prepacked(q, packed);
    EXPECT_EQ(c0.buf, c1.buf) << "m=" << p.m << " n=" << p.n << " k=" << p.k
                              << " threads=" << threads << " blocks=" << blocks;
  }
}

// A prepacked B (PackedLowpB) gives gemm_lowp's bits on the same kernels: every table (the
// pair kernel and the float32 fallback), bfloat16 and float16, several KC blocks (default
// blocks and small ones), both thread counts, bfloat16 and float32 outputs, with and without
// beta and a bias.
TEST(GemmLowp, PrepackedBHasTheSameBits) {
  std::mt19937_64 rng(10);
  const int saved = get_num_threads();
  for (const char* blocks : {"", "28,16,64"}) {
    const ScopedGemmBlocks scoped(blocks);
    for (const auto& t : lowp_tables()) {
      SCOPED_TRACE(t.name);
      for (ScalarType dt : {ScalarType::BFloat16, ScalarType::Float16})
        for (const Shape& s : {Shape{37, 70, 1100}, Shape{130, 45, 33}, Shape{9, 300, 517}}) {
          Mat a(dt, s.m, s.k, 0), b(dt, s.k, s.n, 1);
          a.fill(rng, -1, 1);
          b.fill(rng, -1, 1);
          std::vector<float> bias(static_cast<size_t>(s.n));
          for (auto& v : bias) v = std::uniform_real_distribution<float>(-1, 1)(rng);
          const PackedLowpB packed(dt, s.k, s.n, b.data(), b.rs, b.cs, &t.table);
          EXPECT_EQ(packed.pairs(), t.table.bf16.fn != nullptr && dt == ScalarType::BFloat16);
          LowpProblem p;
          p.m = s.m, p.n = s.n, p.k = s.k;
          p.a = {dt, a.data(), a.rs, a.cs};
          p.b = {dt, b.data(), b.rs, b.cs};
          p.alpha = 0.75f;
          for (ScalarType out : {ScalarType::BFloat16, ScalarType::Float32})
            expect_prepacked_bits(p, packed, t.table, out, bias.data(), rng, blocks);
        }
    }
  }
  set_num_threads(saved);
  // Errors name the problem: a shape or an A dtype that does not match the pack.
  std::vector<uint16_t> w(64 * 32, 0x3f80);
  const PackedLowpB packed(ScalarType::BFloat16, 64, 32, w.data(), 32, 1);
  std::vector<float> y(8 * 32);
  LowpProblem p;
  p.m = 8, p.n = 32, p.k = 63;
  p.a = {ScalarType::BFloat16, w.data(), 64, 1};
  p.c_dtype = ScalarType::Float32, p.c = y.data(), p.c_rs = 32, p.c_cs = 1;
  tessera::testing::expect_error_mentions([&] { gemm_lowp_prepacked(p, packed); },
                                          {"gemm_lowp", "k=64", "k=63"});
  p.k = 64;
  p.a.dtype = ScalarType::Float16;
  tessera::testing::expect_error_mentions([&] { gemm_lowp_prepacked(p, packed); },
                                          {"gemm_lowp", "bfloat16", "float16"});
  tessera::testing::expect_error_mentions(
      [&] { PackedLowpB(ScalarType::Float32, 4, 4, w.data(), 4, 1); }, {"pack_b", "float32"});
  tessera::testing::expect_error_mentions(
      [&] { PackedLowpB(ScalarType::Float4_e2m1fn_x2, 32, 4, w.data(), 1, 32); },
      {"pack_b", "block scales"});
}

// Float8 (mixed formats, row and column scales, bias) and NVFP4 (block scales) B prepacked:
// gemm_lowp's bits on every table, several KC blocks, both thread counts.
TEST(GemmLowp, PrepackedFloat8AndNvfp4BHaveTheSameBits) {
  std::mt19937_64 rng(11);
  const int saved = get_num_threads();
  for (const char* blocks : {"", "28,32,64"}) {
    const ScopedGemmBlocks scoped(blocks);
    for (const auto& t : lowp_tables()) {
      SCOPED_TRACE(t.name);
      for (const Shape& s : {Shape{37, 70, 1104}, Shape{9, 45, 48}}) {
        // float8: A e5m2, B e4m3fn.
        Mat a8(ScalarType::Float8_e5m2, s.m, s.k, 0), b8(ScalarType::Float8_e4m3fn, s.k, s.n, 1);
        a8.fill(rng, -8, 8);
        b8.fill(rng, -8, 8);
        std::vector<float> rs(s.m), cs(s.n), bias(s.n);
        for (auto& x : rs) x = float(rng() % 100) / 37.0f + 0.1f;
        for (auto& x : cs) x = float(rng() % 100) / 53.0f + 0.1f;
        for (auto& x : bias) x = float(rng() % 100) / 10.0f - 5.0f;
        // NVFP4: A [m, k/2] bytes, B as w.t() of w [n, k/2], float8_e4m3fn block scales.
        std::vector<uint8_t> a4(s.m * s.k / 2), w4(s.n * s.k / 2);
        for (auto& x : a4) x = static_cast<uint8_t>(rng());
        for (auto& x : w4) x = static_cast<uint8_t>(rng());
        std::vector<Float8_e4m3fn> sa(s.m * s.k / 16), sw(s.n * s.k / 16);
        for (auto& x : sa) x = Float8_e4m3fn(float(rng() % 64) / 16.0f + 0.0625f);
        for (auto& x : sw) x = Float8_e4m3fn(float(rng() % 64) / 16.0f + 0.0625f);
        const LowpOperand fp8_a{ScalarType::Float8_e5m2, a8.data(), a8.rs, a8.cs};
        const LowpOperand fp8_b{ScalarType::Float8_e4m3fn, b8.data(), b8.rs, b8.cs};
        const LowpOperand fp4_a{
            ScalarType::Float4_e2m1fn_x2, a4.data(), s.k, 1, sa.data(), s.k / 16, 1};
        const LowpOperand fp4_b{
            ScalarType::Float4_e2m1fn_x2, w4.data(), 1, s.k, sw.data(), s.k / 16, 1};
        for (const auto& [a, b] : {std::pair{fp8_a, fp8_b}, std::pair{fp4_a, fp4_b}}) {
          SCOPED_TRACE(std::string(dtype_name(b.dtype)));
          const PackedLowpB packed(s.k, s.n, b, &t.table);
          EXPECT_EQ(packed.pairs(), t.table.bf16.fn != nullptr);
          LowpProblem p;
          p.m = s.m, p.n = s.n, p.k = s.k;
          p.a = a, p.b = b;
          p.alpha = 0.5f;
          if (b.dtype != ScalarType::Float4_e2m1fn_x2)
            p.row_scale = rs.data(), p.col_scale = cs.data();
          expect_prepacked_bits(p, packed, t.table, ScalarType::Float32, bias.data(), rng, blocks);
        }
      }
    }
  }
  set_num_threads(saved);
}

TEST(GemmLowp, ReferenceAgreesWithEngine) {
  std::mt19937_64 rng(6);
  Mat a(ScalarType::BFloat16, 19, 37, 0), b(ScalarType::BFloat16, 37, 23, 1);
  a.fill(rng, -1, 1);
  b.fill(rng, -1, 1);
  Mat c(ScalarType::Float32, 19, 23, 0), r = c;
  LowpProblem p;
  p.m = 19, p.n = 23, p.k = 37;
  p.a = {ScalarType::BFloat16, a.data(), a.rs, a.cs};
  p.b = {ScalarType::BFloat16, b.data(), b.rs, b.cs};
  p.c_dtype = ScalarType::Float32, p.c = c.data(), p.c_rs = c.rs, p.c_cs = c.cs;
  gemm_lowp(p);
  p.c = r.data();
  gemm_lowp_reference(p);
  for (int64_t i = 0; i < 19; ++i)
    for (int64_t j = 0; j < 23; ++j) EXPECT_NEAR(c.at(i, j), r.at(i, j), 1e-5);
}

TEST(GemmLowp, BadInputErrors) {
  uint8_t bytes[64] = {};
  float out[4];
  LowpProblem p;
  p.m = 1, p.n = 1, p.k = 8;
  p.a = {ScalarType::Float4_e2m1fn_x2, bytes, 8, 1, bytes, 1, 1};
  p.b = {ScalarType::Float4_e2m1fn_x2, bytes, 1, 8, bytes, 1, 1};
  p.c = out, p.c_rs = 1, p.c_cs = 1;
  try {
    gemm_lowp(p, nullptr, "myop");
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("myop(): argument 'a' expected K a multiple of 16"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("K=8"), std::string::npos) << e.what();
  }
  p.k = 16;
  p.a.cs = 2;
  EXPECT_THROW(gemm_lowp(p), ValueError);  // K not contiguous
  p.a.cs = 1;
  p.b.block_scale = nullptr;
  EXPECT_THROW(gemm_lowp(p), ValueError);  // no block scales
  p.a.dtype = ScalarType::Float32;
  EXPECT_THROW(gemm_lowp(p), TypeError);
  p.a = {ScalarType::BFloat16, bytes, 16, 1};
  p.b = {ScalarType::Float4_e2m1fn_x2, bytes, 1, 8, bytes, 1, 1};
  EXPECT_THROW(gemm_lowp(p), TypeError);  // fp4 with bf16
  p.b = {ScalarType::BFloat16, bytes, 1, 16};
  p.c_dtype = ScalarType::Float64;
  EXPECT_THROW(gemm_lowp(p), TypeError);
}

}  // namespace
}  // namespace tessera::gemm::testing
