// The autograd engine's contract: accumulation, retain_graph, grad(), hooks, retain_grad,
// no_grad, detach, double backward, and the errors PyTorch users know (second backward,
// in-place on a leaf, a saved tensor modified in place, an op without a derivative).
#include <gtest/gtest.h>

#include <string>

#include "tessera/autograd/autograd.h"
#include "tessera/tessera.h"
#include "test_support.h"

namespace tessera {
namespace {

using autograd::NoGradGuard;

Tensor vec(std::vector<double> v) {
  return tensor<double>(v);
}

using testing::expect_error_mentions;

TEST(AutogradEngine, ChainRuleOnASmallGraph) {
  const Tensor x = vec({1.0, 2.0, 3.0}).requires_grad_();
  const Tensor y = vec({0.5, -1.0, 2.0}).requires_grad_();
  const Tensor z = x.mul(y).add(x.exp()).sum();  // dz/dx = y + exp(x), dz/dy = x
  EXPECT_EQ(z.grad_fn()->name(), "SumBackward1");
  EXPECT_FALSE(z.is_leaf());
  EXPECT_TRUE(x.is_leaf());
  z.backward();
  EXPECT_TRUE(allclose(x.grad(), y.add(x.exp()), 1e-12, 1e-12));
  EXPECT_TRUE(allclose(y.grad(), x, 1e-12, 1e-12));
}

TEST(AutogradEngine, GradientsAccumulateAcrossBackwards) {
  const Tensor x = vec({1.0, -2.0}).requires_grad_();
  const Tensor z = x.mul(x).sum();
  z.backward({}, /*retain_graph=*/true);
  z.backward();
  EXPECT_TRUE(allclose(x.grad(), x.mul(4), 1e-12, 1e-12));
  x.mutable_grad() = Tensor();  // zero_grad(set_to_none)
  x.mul(3).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({2}, 3.0, kFloat64), 0, 0));
}

TEST(AutogradEngine, SecondBackwardWithoutRetainGraphFails) {
  const Tensor x = vec({1.0, 2.0}).requires_grad_();
  const Tensor z = x.exp().sum();
  z.backward();
  expect_error_mentions([&] { z.backward(); },
                        {"backward through the graph a second time", "retain_graph"});
}

TEST(AutogradEngine, SharedSubgraphRunsOnceWithSummedGradient) {
  const Tensor x = vec({0.3, 0.7}).requires_grad_();
  const Tensor h = x.tanh();
  const Tensor z = h.mul(2).add(h.mul(h)).sum();  // dz/dh = 2 + 2h
  z.backward();
  const Tensor t = x.tanh().detach();
  EXPECT_TRUE(allclose(x.grad(), t.mul(2).add(2).mul(t.mul(t).neg().add(1)), 1e-12, 1e-12));
}

TEST(AutogradEngine, GradDoesNotTouchLeafGrads) {
  const Tensor x = vec({1.0, 2.0}).requires_grad_();
  const Tensor w = vec({3.0, 4.0}).requires_grad_();
  const Tensor unused = vec({1.0}).requires_grad_();
  const Tensor z = x.mul(w).sum();
  const auto g = autograd::grad({z}, {x, w}, {}, true);
  EXPECT_TRUE(allclose(g[0], w, 0, 0));
  EXPECT_TRUE(allclose(g[1], x, 0, 0));
  EXPECT_FALSE(x.grad().defined());
  expect_error_mentions([&] { autograd::grad({z}, {unused}, {}, true); },
                        {"not have been used", "allow_unused"});
  const auto g2 = autograd::grad({z}, {unused}, {}, true, false, /*allow_unused=*/true);
  EXPECT_FALSE(g2[0].defined());
}

TEST(AutogradEngine, DoubleBackwardWithCreateGraph) {
  const Tensor x = vec({1.5, -2.0}).requires_grad_();
  const Tensor y = x.mul(x).mul(x).sum();  // y' = 3x^2, y'' = 6x
  const auto g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_TRUE(g[0].requires_grad());
  const auto gg = autograd::grad({g[0].sum()}, {x});
  EXPECT_TRUE(allclose(gg[0], x.detach().mul(6), 1e-12, 1e-12));
}

TEST(AutogradEngine, HooksAndRetainGrad) {
  const Tensor x = vec({1.0, 2.0}).requires_grad_();
  x.register_hook([](const Tensor& g) { return g.mul(10); });
  const Tensor h = x.mul(3);
  h.retain_grad();
  Tensor seen;
  h.register_hook([&](const Tensor& g) {
    seen = g.clone();
    return Tensor();  // keep
  });
  h.sum().backward();
  EXPECT_TRUE(allclose(seen, ones_like(h), 0, 0));
  EXPECT_TRUE(allclose(h.grad(), ones_like(h), 0, 0));
  EXPECT_TRUE(allclose(x.grad(), full({2}, 30.0, kFloat64), 0, 0));
}

TEST(AutogradEngine, NoGradDetachAndRequiresGradFlags) {
  const Tensor x = vec({1.0, 2.0}).requires_grad_();
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(x.mul(2).requires_grad());
    x.add_(1);  // optimizers update leaves in place under no_grad
  }
  EXPECT_TRUE(allclose(x, vec({2.0, 3.0}), 0, 0));
  const Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_alias_of(x));
  const Tensor z = x.mul(d).sum();  // d is a constant
  z.backward();
  EXPECT_TRUE(allclose(x.grad(), d, 0, 0));
  expect_error_mentions(
      [] {
        tensor<int64_t>({1, 2}).requires_grad_();
      },
      {"requires_grad_", "floating point", "int64"});
  expect_error_mentions([&] { x.mul(2).requires_grad_(false); }, {"leaf"});
}

TEST(AutogradEngine, ErrorsUsersKnow) {
  const Tensor x = vec({1.0, 2.0}).requires_grad_();
  expect_error_mentions([&] { x.add_(1); },
                        {"add", "leaf Variable that requires grad", "in-place"});
  expect_error_mentions([&] { x.mul(2).backward(); },
                        {"backward", "implicitly created only for scalar"});
  expect_error_mentions([] { vec({1.0}).backward(); }, {"does not require grad"});
  // A saved tensor modified in place: exp saves its output.
  const Tensor y = x.exp();
  y.add_(1);
  expect_error_mentions([&] { y.sum().backward(); }, {"modified by an inplace operation",
                                                      "ExpBackward0", "version 1", "version 0"});
  // In-place on a view of a leaf that requires grad.
  expect_error_mentions([&] { x.select(0, 0).mul_(3); },
                        {"mul", "view of a leaf Variable that requires grad", "in-place"});
  // An op without a derivative says so instead of dropping the gradient.
  expect_error_mentions([&] { unique(x); }, {"unique", "derivative is not implemented"});
}

TEST(AutogradEngine, InPlaceOnANonLeafRewritesItsHistory) {
  const Tensor x = vec({1.0, 2.0}).requires_grad_();
  Tensor h = x.mul(3);
  h.mul_(h);  // h = (3x)^2
  EXPECT_EQ(h.grad_fn()->name(), "MulBackward0");
  h.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), x.detach().mul(18), 1e-12, 1e-12));
}

TEST(AutogradEngine, MismatchedGradientShapeIsReported) {
  const Tensor x = vec({1.0, 2.0, 3.0}).requires_grad_();
  expect_error_mentions([&] { x.mul(2).backward(vec({1.0, 2.0})); }, {"shape", "[2]", "[3]"});
}

}  // namespace
}  // namespace tessera
