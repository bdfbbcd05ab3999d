// linear (PyTorch 1.13's F.linear semantics) and linear_scaled (float8 / NVFP4 weights) against
// float64 references; eager mm/matmul/addmm products that land on the GEMV path.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gemm/formats/formats.h"
#include "gemm_test_util.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

using gemm::testing::expect_error_mentions;

// input [..., in] @ weight[out, in]^T + bias in float64.
Tensor reference_linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const Tensor w = (weight.dim() == 1 ? weight.unsqueeze(0) : weight).to(kFloat64).contiguous();
  const int64_t in = input.size(-1), out = w.size(0);
  const Tensor x = input.to(kFloat64).reshape({-1, in}).contiguous();
  const int64_t rows = x.size(0);
  Tensor y = zeros({rows, out}, kFloat64);
  const double* xp = x.data_ptr<double>();
  const double* wp = w.data_ptr<double>();
  double* yp = y.data_ptr<double>();
  const Tensor b = bias.defined() ? bias.to(kFloat64).reshape({-1}).contiguous() : Tensor();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b.defined() ? b.data_ptr<double>()[b.numel() == 1 ? 0 : o] : 0.0;
      for (int64_t p = 0; p < in; ++p) acc += xp[r * in + p] * wp[o * in + p];
      yp[r * out + o] = acc;
    }
  DimVector os(input.sizes().begin(), input.sizes().end());
  os.pop_back();
  if (weight.dim() == 2) os.push_back(out);
  return y.reshape(os);
}

void expect_close(const Tensor& got, const Tensor& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const Tensor g = got.to(kFloat64).contiguous().reshape({-1});
  const Tensor w = want.contiguous().reshape({-1});
  double scale = 1e-6;
  for (int64_t e = 0; e < w.numel(); ++e)
    scale = std::max(scale, std::fabs(w.data_ptr<double>()[e]));
  for (int64_t e = 0; e < w.numel(); ++e)
    ASSERT_NEAR(g.data_ptr<double>()[e], w.data_ptr<double>()[e], rtol * scale)
        << what << " element " << e;
}

double rtol(ScalarType t, int64_t k) {
  return t == kFloat32 ? 1e-6 * std::sqrt(double(k) + 1) * 4 : 2e-2;
}

TEST(Linear, ShapesBiasAndValuesAsPyTorch) {
  manual_seed(11);
  for (ScalarType t : {kFloat32, kBFloat16, kFloat16}) {
    for (const DimVector& xs : std::vector<DimVector>{
             {7}, {1, 7}, {1, 1, 7}, {3, 1, 7}, {2, 3, 7}, {4, 1, 4099}, {2, 2, 257}, {9, 31}}) {
      const int64_t in = xs.back();
      for (int64_t out : {1, 5, 65}) {
        const Tensor x = randn(IntArrayRef(xs), kFloat32).to(t);
        const Tensor w = randn({out, in}, kFloat32).to(t);
        const std::string what =
            fmt::format("{} x [{}] out {}", dtype_name(t), fmt::join(xs, ","), out);
        expect_close(linear(x, w), reference_linear(x, w, {}), rtol(t, in), what);
        const Tensor b = randn({out}, kFloat32).to(t);
        expect_close(linear(x, w, b), reference_linear(x, w, b), rtol(t, in), what + " bias");
        const Tensor b0 = randn({}, kFloat32).to(t);
        expect_close(linear(x, w, b0), reference_linear(x, w, b0), rtol(t, in), what + " bias0");
      }
      const Tensor w1 = randn({in}, kFloat32).to(t);  // 1-D weight: the last dim goes away
      const Tensor x = randn(IntArrayRef(xs), kFloat32).to(t);
      expect_close(linear(x, w1), reference_linear(x, w1, {}), rtol(t, in), "1-D weight");
    }
  }
}

TEST(Linear, TransposedWeightViewAndFloat64) {
  manual_seed(12);
  const Tensor wt = randn({33, 20}).t();  // [20, 33] with column-major strides
  const Tensor x = randn({1, 1, 33});
  expect_close(linear(x, wt), reference_linear(x, wt.contiguous(), {}), 1e-5, "transposed");
  const Tensor x64 = randn({2, 1, 9}, kFloat64), w64 = randn({4, 9}, kFloat64);
  expect_close(linear(x64, w64), reference_linear(x64, w64, {}), 1e-12, "float64");
}

TEST(Linear, BadInputErrors) {
  const Tensor x = randn({1, 1, 4096});
  expect_error_mentions(
      [&] {
        linear(x, randn({8, 4095}));
      },
      {"linear()", "'weight'", "4096", "4095"});
  expect_error_mentions(
      [&] {
        linear(x, randn({8, 4096}), randn({7}));
      },
      {"linear()", "'bias'", "[8]", "[7]"});
  expect_error_mentions(
      [&] {
        linear(x, randn({8, 4096}, kFloat64));
      },
      {"linear()", "same dtype", "float32", "float64"});
  expect_error_mentions([&] { linear(x, randn({2, 8, 4096})); }, {"'weight'", "3-D"});
}

// Builds an fp8 weight [out, in] from float values; returns it with its float64 dequantized copy.
TEST(LinearScaled, Float8PerTensorAndPerRowScales) {
  manual_seed(13);
  for (ScalarType wt : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    for (ScalarType xt : {kFloat32, kBFloat16}) {
      const int64_t out = 67, in = 4099;
      const Tensor w = (randn({out, in}) * 2).to(wt);
      const Tensor x = randn({2, 1, in}).to(xt);
      const Tensor row = rand({out}) + 0.5;
      const Tensor one = full({}, 0.25, kFloat32);
      const Tensor b = randn({out});
      const Tensor wd = w.to(kFloat64);
      expect_close(linear_scaled(x, w, one), reference_linear(x, wd * 0.25, {}), rtol(xt, in),
                   "per tensor");
      expect_close(linear_scaled(x, w, row, 1.0, b),
                   reference_linear(x, wd * row.to(kFloat64).unsqueeze(1), b), rtol(xt, in),
                   "per row + bias");
    }
  }
}

TEST(LinearScaled, Nvfp4BlockScalesAndGlobalScale) {
  std::mt19937 rng(14);
  const int64_t out = 45, in = 4096 + 16;
  Tensor w = empty({out, in / 2}, kFloat4_e2m1fn_x2);
  Tensor s = empty({out, in / 16}, kFloat8_e4m3fn);
  auto* wp = static_cast<uint8_t*>(w.data_ptr());
  auto* sp = static_cast<uint8_t*>(s.data_ptr());
  for (int64_t e = 0; e < w.numel(); ++e) wp[e] = static_cast<uint8_t>(rng());
  for (int64_t e = 0; e < s.numel(); ++e) sp[e] = static_cast<uint8_t>(0x28 + rng() % 0x20);
  Tensor wd = empty({out, in}, kFloat64);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t p = 0; p < in; ++p)
      wd.data_ptr<double>()[o * in + p] = gemm::formats::decode_value(
          gemm::WeightFormat::NVFP4, wp + o * in / 2, p, sp + o * in / 16);
  manual_seed(15);
  for (const DimVector& xs : std::vector<DimVector>{{in}, {1, 1, in}, {3, 1, in}, {6, in}}) {
    const Tensor x = randn(IntArrayRef(xs));
    const Tensor b = randn({out});
    expect_close(linear_scaled(x, w, s, 0.125, b), reference_linear(x, wd * 0.125, b),
                 rtol(kFloat32, in), fmt::format("nvfp4 [{}]", fmt::join(xs, ",")));
  }
  // Errors: block-size multiple, scale shape and dtype, weight dtype.
  const Tensor x = randn({1, in});
  expect_error_mentions(
      [&] {
        linear_scaled(randn({1, 24}), empty({2, 12}, kFloat4_e2m1fn_x2), s);
      },
      {"linear_scaled()", "'input'", "16", "24"});
  expect_error_mentions(
      [&] {
        linear_scaled(x, w, empty({out, 5}, kFloat8_e4m3fn));
      },
      {"'weight_scale'", fmt::format("[{}, {}]", out, in / 16), "5"});
  expect_error_mentions([&] { linear_scaled(x, w, s.to(kFloat32)); },
                        {"'weight_scale'", "float8_e4m3fn", "float32"});
  expect_error_mentions(
      [&] {
        linear_scaled(x, randn({out, in}), s);
      },
      {"'weight'", "float4_e2m1fn_x2", "float32"});
  expect_error_mentions(
      [&] {
        linear_scaled(x, randn({out, in}).to(kFloat8_e4m3fn), randn({out + 1}));
      },
      {"'weight_scale'", fmt::format("[{}]", out), fmt::format("[{}]", out + 1)});
}

// mm / matmul / addmm with one-row (or one-column) operands, float32 and bfloat16.
TEST(GemvOps, MatmulOfB1KLandsOnGemvWithCorrectValues) {
  manual_seed(16);
  for (ScalarType t : {kFloat32, kBFloat16, kFloat16}) {
    const Tensor x = randn({3, 1, 515}).to(t), b = randn({515, 129}).to(t);
    const Tensor want = reference_linear(x, b.t().contiguous(), {});
    expect_close(matmul(x, b), want, rtol(t, 515), "matmul [3,1,K]");
    expect_close(matmul(x.reshape({3, 515}), b), want.reshape({3, 129}), rtol(t, 515), "mm");
    const Tensor bt = randn({129, 515}).to(t);  // x @ bt^T: weight-style operand
    expect_close(mm(x.reshape({3, 515}), bt.t()), reference_linear(x.reshape({3, 515}), bt, {}),
                 rtol(t, 515), "mm W^T");
    const Tensor a = randn({300, 515}).to(t), v = randn({515, 1}).to(t);  // n == 1
    expect_close(mm(a, v), reference_linear(v.t(), a, {}).t(), rtol(t, 515), "mm n=1");
    const Tensor bias = randn({129}).to(t);
    expect_close(addmm(bias, x.reshape({3, 515}), b),
                 reference_linear(x.reshape({3, 515}), b.t().contiguous(), bias), rtol(t, 515),
                 "addmm");
  }
}

}  // namespace
}  // namespace tessera
