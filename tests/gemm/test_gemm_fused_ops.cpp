// The eager fused matmuls (include/tessera/ops/fused.h) against the unfused eager ops they
// stand for: activations, pre-activation and reductions, strided operands, bfloat16 output,
// the float64 fallback, linear_act on a 3-D input, gradients of the fused path, and errors.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

#include "tessera/tessera.h"

namespace tessera {
namespace {

TEST(FusedOps, AddmmActMatchesUnfused) {
  const Tensor a = randn({37, 29}), bt = randn({45, 29}), bias = randn({45});
  const Tensor b = bt.t();  // a transposed (strided) operand
  const Tensor h = addmm(bias, a, b);
  EXPECT_TRUE(allclose(addmm_act(bias, a, b, "gelu"), gelu(h), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(addmm_act(bias, a, b, "gelu_tanh"), gelu(h, "tanh"), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(addmm_act(bias, a, b, "relu"), relu(h), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(addmm_act(bias, a, b, "silu"), silu(h), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(addmm_act(bias, a, b, "sigmoid"), sigmoid(h), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(addmm_act(bias, a, b, "tanh"), tanh(h), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(addmm_act(Tensor(), a, b, "none"), mm(a, b), 1e-4, 1e-5));
}

// Under autograd the float32/bfloat16 call still runs fused (AddmmActBackward0); its gradients
// match those of the unfused float64 ops (addmm then the activation) on the same values.
TEST(FusedOps, AddmmActGradientsMatchUnfused) {
  manual_seed(3);
  const Tensor a0 = randn({33, 20}, kFloat64), b0 = randn({20, 27}, kFloat64),
               bias0 = randn({27}, kFloat64), g = randn({33, 27}, kFloat64);
  for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"}) {
    for (ScalarType t : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(fmt::format("{} {}", act, dtype_name(t)));
      // Both runs start from the values rounded to t (relu's mask must see the same signs).
      auto grads = [&](bool fused, ScalarType dt) {
        auto input = [&](const Tensor& x0) { return x0.to(t).to(dt).clone().requires_grad_(); };
        const Tensor a = input(a0), b = input(b0), bias = input(bias0);
        Tensor y;
        if (fused) {
          y = addmm_act(bias, a, b, act);
          EXPECT_EQ(y.grad_fn()->name(), "AddmmActBackward0");
        } else {
          const Tensor h = addmm(bias, a, b);
          y = std::string(act) == "none"        ? h
              : std::string(act) == "relu"      ? relu(h)
              : std::string(act) == "gelu"      ? gelu(h)
              : std::string(act) == "gelu_tanh" ? gelu(h, "tanh")
              : std::string(act) == "silu"      ? silu(h)
              : std::string(act) == "sigmoid"   ? sigmoid(h)
                                                : tanh(h);
        }
        y.mul(g.to(t).to(dt)).sum().backward();
        return std::vector<Tensor>{y, a.grad(), b.grad(), bias.grad()};
      };
      const auto fused = grads(true, t), ref = grads(false, kFloat64);
      const double tol = t == kFloat32 ? 1e-4 : 5e-2;
      for (size_t i = 0; i < fused.size(); ++i) {
        EXPECT_EQ(fused[i].dtype(), t) << i;
        EXPECT_TRUE(allclose(fused[i].to(kFloat64), ref[i], tol, tol)) << i;
      }
    }
  }
}

TEST(FusedOps, AddmmActExReturnsAuxAndReductions) {
  const Tensor a = randn({65, 31}), b = randn({31, 17}), bias = randn({17});
  const Tensor y = silu(addmm(bias, a, b));
  FusedMatmulOptions o;
  o.activation = "silu";
  o.keep_pre_activation = true;
  o.reduce = "sum";
  FusedMatmulResult r = addmm_act_ex(bias, a, b, o);
  EXPECT_TRUE(allclose(r.out, y, 1e-4, 1e-5));
  EXPECT_TRUE(allclose(r.pre_activation, addmm(bias, a, b), 1e-4, 1e-5));
  EXPECT_TRUE(allclose(r.reduced, sum(y, {1}), 1e-4, 1e-4));
  o.reduce = "amax";
  o.reduce_dim = 0;
  o.out_dtype = kBFloat16;
  r = addmm_act_ex(bias, a, b, o);
  EXPECT_EQ(r.out.dtype(), kBFloat16);
  EXPECT_TRUE(allclose(r.out.to(kFloat32), y, 1e-2, 1e-2));
  EXPECT_TRUE(allclose(r.reduced, amax(y, {0}), 1e-4, 1e-5));
  for (const char* kind : {"mean", "amin", "sum_squares"}) {
    o.reduce = kind;
    o.reduce_dim = -1;
    r = addmm_act_ex(bias, a, b, o);
    const Tensor want = std::string(kind) == "mean"   ? mean(y, {1})
                        : std::string(kind) == "amin" ? amin(y, {1})
                                                      : sum(square(y), {1});
    EXPECT_TRUE(allclose(r.reduced, want, 1e-4, 1e-4)) << kind;
  }
}

TEST(FusedOps, Float64FallsBackWhole) {
  const Tensor a = randn({9, 7}, kFloat64), b = randn({7, 5}, kFloat64),
               bias = randn({5}, kFloat64);
  FusedMatmulOptions o;
  o.activation = "gelu";
  o.reduce = "sum";
  const FusedMatmulResult r = addmm_act_ex(bias, a, b, o);
  EXPECT_EQ(r.out.dtype(), kFloat64);
  EXPECT_TRUE(allclose(r.out, gelu(addmm(bias, a, b)), 1e-12, 1e-12));
  EXPECT_TRUE(allclose(r.reduced, sum(r.out, {1}), 1e-12, 1e-12));
}

TEST(FusedOps, LinearActOnBatchedInput) {
  const Tensor x = randn({2, 3, 16}), w = randn({24, 16}), bias = randn({24});
  const Tensor y = linear_act(x, w, bias, "relu");
  EXPECT_EQ(y.sizes(), IntArrayRef({2, 3, 24}));
  EXPECT_TRUE(allclose(y, relu(add(matmul(x, w.t()), bias)), 1e-4, 1e-5));
}

// A float32 PackedLinearWeight runs bias and activation fused into the prepacked GEMM: bit for
// bit the plain weight's linear_act where that runs the packed kernels too (more than 8 rows
// beside 77 outputs), close where it runs GEMV (3 rows). Other packs run linear and then the
// activation. Errors name the argument.
TEST(FusedOps, LinearActWithPackedWeight) {
  manual_seed(7);
  const Tensor w = randn({77, 130}), bias = randn({77});
  const PackedLinearWeight pw(w);
  for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "silu"}) {
    SCOPED_TRACE(act);
    for (const Tensor& x : {randn({9, 130}), randn({2, 20, 130}), randn({3, 130})}) {
      for (bool with_bias : {true, false}) {
        const std::optional<Tensor> b = with_bias ? std::optional<Tensor>(bias) : std::nullopt;
        const Tensor got = linear_act(x, pw, b, act), ref = linear_act(x, w, b, act);
        EXPECT_EQ(got.sizes(), ref.sizes());
        if (x.numel() / 130 > 8) {
          EXPECT_TRUE(equal(got, ref)) << x.dim() << "-D input";
        } else {
          EXPECT_TRUE(allclose(got, ref, 1e-5, 1e-5)) << x.dim() << "-D input";
        }
      }
    }
  }
  const Tensor wb = w.to(kBFloat16), xb = randn({12, 130}).to(kBFloat16);
  const PackedLinearWeight pwb(wb);
  EXPECT_TRUE(equal(linear_act(xb, pwb, bias.to(kBFloat16), "gelu"),
                    gelu(linear(xb, pwb, bias.to(kBFloat16)))));
  auto expect_error = [](const std::function<void()>& fn, const char* text) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error([&] { linear_act(randn({9, 130}).to(kFloat64), pw, bias, "relu"); }, "float64");
  expect_error([&] { linear_act(randn({9, 131}), pw, bias, "relu"); }, "in_features 131");
  expect_error([&] { linear_act(randn({9, 130}), pw, randn({76}), "relu"); }, "'bias'");
  expect_error([&] { linear_act(randn({9, 130}), pw, bias, "swish"); }, "'swish'");
}

TEST(FusedOps, ErrorsNameArgument) {
  const Tensor a = randn({4, 3}), b = randn({3, 5});
  try {
    addmm_act(randn({5}), a, b, "swish");
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'activation'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'swish'"), std::string::npos) << e.what();
  }
  try {
    addmm_act(randn({4}), a, b, "relu");
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("expected shape [5], but got [4]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(addmm_act(Tensor(), a, randn({4, 5})), ValueError);
}

}  // namespace
}  // namespace tessera
