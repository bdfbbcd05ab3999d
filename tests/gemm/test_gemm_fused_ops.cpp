// The eager fused matmuls (include/tessera/ops/fused.h) against the unfused eager ops they
// stand for: activations, pre-activation and reductions, strided operands, bfloat16 output,
// the float64 fallback, linear_act on a 3-D input, and errors.
#include <gtest/gtest.h>

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
