// Eager bfloat16/float16 mm, bmm, addmm, matmul (native low-precision path, output in the
// input dtype, float32 accumulation) and scaled_mm (float8 per-tensor/row/column scales,
// NVFP4 block scales with a global scale), against float64 evaluations of the decoded
// operands, plus the errors for bad scales, dtypes and layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "tessera/core/half.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

// Largest |got - want| / (K * eps * (|A||B|)(i, j) + |want| * out_eps), want in float64.
double normalized_error(const Tensor& got, const Tensor& a64, const Tensor& b64, double eps,
                        double out_eps) {
  const Tensor want = a64.mm(b64), mag = a64.abs().mm(b64.abs());
  const Tensor g = got.to(kFloat64).contiguous(), w = want.contiguous(), m = mag.contiguous();
  const double* gp = g.data_ptr<double>();
  const double* wp = w.data_ptr<double>();
  const double* mp = m.data_ptr<double>();
  const double k = a64.size(1);
  double worst = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double bound = (k + 2) * eps * mp[i] + out_eps * std::fabs(wp[i]) + 1e-30;
    worst = std::max(worst, std::fabs(gp[i] - wp[i]) / bound);
  }
  return worst;
}

TEST(LowpOps, MmBf16AndF16KeepDtypeAccumulateInFloat32) {
  manual_seed(7);
  for (ScalarType t : {kBFloat16, kFloat16}) {
    const double out_eps = t == kBFloat16 ? 0x1p-8 : 0x1p-11;
    for (int64_t n : {1, 2, 3, 7, 17, 31, 65, 257}) {
      const int64_t m = n + 2, k = 2 * n + 1;                              // K odd
      const Tensor a = randn({m, k}).to(t), bt = randn({n, k}).to(t).t();  // transposed view
      const Tensor c = a.mm(bt);
      EXPECT_EQ(c.dtype(), t);
      EXPECT_LE(normalized_error(c, a.to(kFloat64), bt.to(kFloat64), 0x1p-22, out_eps), 1.0)
          << dtype_name(t) << " n=" << n;
    }
  }
}

TEST(LowpOps, BmmMatmulAddmmBf16) {
  manual_seed(8);
  const Tensor a = randn({3, 13, 29}).to(kBFloat16), b = randn({3, 29, 11}).to(kBFloat16);
  const Tensor c = bmm(a, b);
  ASSERT_EQ(c.dtype(), kBFloat16);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_LE(normalized_error(c.select(0, i), a.select(0, i).to(kFloat64),
                               b.select(0, i).to(kFloat64), 0x1p-22, 0x1p-8),
              1.0);
  const Tensor x = randn({2, 5, 29}).to(kBFloat16), w = randn({29, 7}).to(kBFloat16);
  EXPECT_EQ(matmul(x, w).dtype(), kBFloat16);
  EXPECT_EQ(matmul(x, w).sizes()[2], 7);
  // addmm: beta 0 ignores NaN in self; otherwise one rounding of beta*self + alpha*a@b.
  const Tensor a2 = randn({9, 33}).to(kBFloat16), b2 = randn({33, 10}).to(kBFloat16);
  const Tensor nan_self = full({9, 10}, NAN).to(kBFloat16);
  const Tensor r0 = addmm(nan_self, a2, b2, 0, 1);
  EXPECT_EQ(isnan(r0.to(kFloat32)).to(kFloat32).sum().item<float>(), 0.0f);
  const Tensor self = randn({10}).to(kBFloat16);
  const Tensor r = addmm(self, a2, b2, 0.5, 2);
  const Tensor want = self.to(kFloat64).mul(0.5).add(a2.to(kFloat64).mm(b2.to(kFloat64)).mul(2));
  EXPECT_LE(r.to(kFloat64).sub(want).abs().max().item<double>(),
            0.02 * want.abs().max().item<double>());
}

TEST(LowpOps, MmBf16TwoThreadsSameBits) {
  manual_seed(9);
  const Tensor a = randn({300, 1100}).to(kBFloat16), b = randn({1100, 260}).to(kBFloat16);
  const int saved = get_num_threads();
  set_num_threads(1);
  const Tensor c1 = a.mm(b);
  set_num_threads(2);
  const Tensor c2 = a.mm(b);
  set_num_threads(saved);
  EXPECT_EQ(std::memcmp(c1.data_ptr(), c2.data_ptr(), c1.nbytes()), 0);
}

TEST(ScaledMm, Float8PerTensorRowColumnAndBias) {
  manual_seed(10);
  for (ScalarType fa : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    const int64_t m = 17, k = 65, n = 31;
    const Tensor a = randn({m, k}).mul(4).to(fa), b = randn({n, k}).mul(4).to(kFloat8_e4m3fn).t();
    const Tensor sa = rand({m, 1}).add(0.5), sb = rand({1, n}).add(0.5);
    const Tensor bias = randn({n}).to(kBFloat16);
    const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
    const Tensor want_rc =
        a64.mm(b64).mul(sa.to(kFloat64)).mul(sb.to(kFloat64)).add(bias.to(kFloat64));
    const Tensor got = scaled_mm(a, b, sa, sb, bias);
    ASSERT_EQ(got.dtype(), kBFloat16);
    const double scale = want_rc.abs().max().item<double>();
    EXPECT_LE(got.to(kFloat64).sub(want_rc).abs().max().item<double>(), 0.01 * scale);
    const Tensor one = full({}, 0.5f), two = full({1, 1}, 2.0f);
    const Tensor got_t = scaled_mm(a, b, one, two, std::nullopt, kFloat32);
    ASSERT_EQ(got_t.dtype(), kFloat32);
    EXPECT_LE(got_t.to(kFloat64).sub(a64.mm(b64)).abs().max().item<double>(),
              1e-5 * a64.abs().mm(b64.abs()).max().item<double>());
    EXPECT_EQ(scaled_mm(a, b, one, two, std::nullopt, kFloat16).dtype(), kFloat16);
  }
}

// NVFP4: random nibbles and block scales; want = dequantize (value * block scale) then
// float64 product, times the global scale.
TEST(ScaledMm, Nvfp4BlockScalesAndGlobalScale) {
  std::mt19937_64 rng(11);
  const int64_t m = 19, n = 37, k = 96;
  Tensor a = empty({m, k / 2}, kFloat4_e2m1fn_x2), w = empty({n, k / 2}, kFloat4_e2m1fn_x2);
  auto* ap = static_cast<uint8_t*>(a.data_ptr());
  auto* wp = static_cast<uint8_t*>(w.data_ptr());
  for (int64_t i = 0; i < a.numel(); ++i) ap[i] = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < w.numel(); ++i) wp[i] = static_cast<uint8_t>(rng());
  const Tensor sa = rand({m, k / 16}).add(0.25).to(kFloat8_e4m3fn);
  const Tensor sw = rand({n, k / 16}).add(0.25).to(kFloat8_e4m3fn);
  const Tensor g = full({}, 0.125f);
  auto dequant = [](const Tensor& q, const Tensor& s) {
    const int64_t rows = q.size(0), kk = 2 * q.size(1);
    Tensor out = empty({rows, kk}, kFloat64);
    const Tensor s64 = s.to(kFloat64).contiguous();
    const auto* qp = static_cast<const uint8_t*>(q.data_ptr());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t x = 0; x < kk; ++x) {
        const Float4_e2m1fn_x2 pair(from_bits, qp[r * q.size(1) + x / 2]);
        out.data_ptr<double>()[r * kk + x] =
            double(x % 2 ? pair.hi() : pair.lo()) * s64.data_ptr<double>()[r * (kk / 16) + x / 16];
      }
    return out;
  };
  const Tensor want = dequant(a, sa).mm(dequant(w, sw).t()).mul(0.125);
  const Tensor got = scaled_mm(a, w.t(), sa, sw, std::nullopt, kFloat32, g);
  EXPECT_LE(got.to(kFloat64).sub(want).abs().max().item<double>(),
            1e-5 * want.abs().max().item<double>());
}

template <class E>
void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << needle;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ScaledMm, BadInputErrors) {
  const Tensor a = randn({4, 32}).to(kFloat8_e4m3fn), b = randn({32, 6}).to(kFloat8_e4m3fn);
  const Tensor s = full({}, 1.0f);
  expect_error<ValueError>(
      [&] {
        scaled_mm(a, b, full({3, 1}, 1.0f), s);
      },
      "scaled_mm(): argument 'scale_a' expected a float32 scale of shape [], "
      "[1], [1, 1] or [M, 1] = [4, 1], but got float32 [3, 1]");
  expect_error<ValueError>([&] { scaled_mm(a, b, s, full({6, 1}, 1.0f)); }, "'scale_b'");
  expect_error<TypeError>([&] { scaled_mm(a, b, full({}, 1.0).to(kFloat64), s); },
                          "'scale_a' expected a float32 scale");
  expect_error<TypeError>([&] { scaled_mm(a.to(kFloat32), b, s, s); }, "'a' and 'b' expected");
  expect_error<TypeError>([&] { scaled_mm(a, b, s, s, std::nullopt, kFloat64); }, "'out_dtype'");
  expect_error<ValueError>([&] { scaled_mm(a, b, s, s, randn({5})); }, "'bias' expected");
  // NVFP4: K not a multiple of 16, K not contiguous, wrong block-scale shape.
  const Tensor q = zeros({4, 12}, kUInt8).view(kFloat4_e2m1fn_x2);
  const Tensor w = zeros({6, 12}, kUInt8).view(kFloat4_e2m1fn_x2);
  const Tensor bs = zeros({4, 1}).to(kFloat8_e4m3fn), ws = zeros({6, 1}).to(kFloat8_e4m3fn);
  expect_error<ValueError>([&] { scaled_mm(q, w.t(), bs, ws); },
                           "expected K (2 x 12) a multiple of 16 for NVFP4 blocks, but got K=24");
  const Tensor q16 = zeros({4, 16}, kUInt8).view(kFloat4_e2m1fn_x2);
  const Tensor w16 = zeros({16, 6}, kUInt8).view(kFloat4_e2m1fn_x2);
  expect_error<ValueError>(
      [&] {
        scaled_mm(q16, w16, zeros({4, 2}).to(kFloat8_e4m3fn), zeros({6, 2}).to(kFloat8_e4m3fn));
      },
      "argument 'b' expected float4_e2m1fn_x2 contiguous along K");
  const Tensor w16r = zeros({6, 16}, kUInt8).view(kFloat4_e2m1fn_x2);
  expect_error<ValueError>(
      [&] {
        scaled_mm(q16, w16r.t(), bs, zeros({6, 2}).to(kFloat8_e4m3fn));
      },
      "argument 'scale_a' expected float8_e4m3fn block scales of shape [4, 2]");
}

}  // namespace
}  // namespace tessera
