// In-place ops on views (PyTorch's CopySlices): the base's history is rewritten, the view's
// (and its siblings') re-derived from it; version counters shared with the base still catch
// saved tensors modified through a view; PyTorch's errors for what it forbids.
#include <gtest/gtest.h>

#include <vector>

#include "tessera/autograd/autograd.h"
#include "tessera/tessera.h"
#include "test_support.h"

namespace tessera {
namespace {

using autograd::gradcheck;
using autograd::tensor_list;
using testing::expect_error_mentions;

Tensor leaf(DimVector shape) {
  return rand(shape, kFloat64).mul(2).sub(1).requires_grad_();
}

TEST(InplaceOnViews, RowScaledInPlaceFlowsToTheLeaf) {
  const Tensor w = leaf({3, 4});
  Tensor x = w.clone();
  x[0].mul_(2);
  EXPECT_EQ(x.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(x[1].grad_fn()->name(), "SelectBackward0");
  x.sum().backward();
  Tensor want = ones({3, 4}, kFloat64);
  want[0].fill_(2);
  EXPECT_TRUE(allclose(w.grad(), want, 0, 0));
}

TEST(InplaceOnViews, TheModifiedViewAndItsSiblingsFollowTheBase) {
  const Tensor w = leaf({5});
  Tensor x = w.clone();
  const Tensor a = x.narrow(0, 0, 3);  // overlaps b at element 2
  const Tensor b = x.narrow(0, 2, 3);
  b.mul_(3);
  EXPECT_EQ(b.grad_fn()->name(), "AsStridedBackward0");
  EXPECT_EQ(a.grad_fn()->name(), "AsStridedBackward0");  // re-derived: a[2] changed too
  a.mul(tensor<double>({1.0, 10.0, 100.0})).sum().backward();
  EXPECT_TRUE(allclose(w.grad(), tensor<double>({1.0, 10.0, 300.0, 0.0, 0.0}), 0, 0));
}

TEST(InplaceOnViews, ChainedViewsAndAnOperandThatRequiresGrad) {
  manual_seed(21);
  // x.narrow(0, 1, 2).select(1, 0).add_(y): rows 1-2 of column 0 get y added.
  auto f = [](const tensor_list& in) {
    Tensor x = in[0].mul(1.5);
    x.narrow(0, 1, 2).select(1, 0).add_(in[1].mul(in[1]));
    x.narrow(1, 2, 2).t().select(0, 1).mul_(in[1].sum());
    return tensor_list{x.sin()};
  };
  EXPECT_TRUE(gradcheck(f, {leaf({4, 4}), leaf({2})}));
  const Tensor w = leaf({4, 4}), y = leaf({2});
  Tensor x = w.clone();
  x.narrow(0, 1, 2).select(1, 0).add_(y, 2.0);
  x.mul(x).sum().backward();
  Tensor xv = w.detach().clone();
  xv.narrow(0, 1, 2).select(1, 0).add_(y.detach(), 2.0);
  EXPECT_TRUE(allclose(w.grad(), xv.mul(2), 1e-14, 0));
  EXPECT_TRUE(allclose(y.grad(), xv.narrow(0, 1, 2).select(1, 0).mul(4), 1e-14, 0));
}

TEST(InplaceOnViews, AZeroBaseTakesHistoryFromWhatIsCopiedIn) {
  const Tensor y = leaf({2, 3});
  Tensor z = zeros({4, 3}, kFloat64);
  EXPECT_FALSE(z.requires_grad());
  z.narrow(0, 1, 2).copy_(y.exp());
  EXPECT_TRUE(z.requires_grad());
  EXPECT_EQ(z.grad_fn()->name(), "CopySlices");
  const Tensor row = z[0];
  EXPECT_TRUE(row.requires_grad());  // a view of z, re-derived when asked
  z.mul(z).sum().backward();
  EXPECT_TRUE(allclose(y.grad(), y.detach().exp().pow(2).mul(2), 1e-14, 0));
}

TEST(InplaceOnViews, EveryInPlaceKindOnAView) {
  manual_seed(22);
  auto f = [](const tensor_list& in) {
    Tensor x = in[0].mul(1.0);
    x[1].fill_(0.5);
    x[2].clamp_(-0.2, 0.3);
    x[3].masked_fill_(in[0][3].detach().gt(0), -1.0);
    x.select(1, 1).copy_(in[1]);
    index_put_(x.select(1, 2), {tensor<int64_t>({0, 3})}, in[1].narrow(0, 1, 2));
    x.t()[3].div_(in[1].add(3));
    // Last: relu_ saves its output, which any later write to x would change (PyTorch raises
    // "modified by an inplace operation" then, and so does Tessera).
    x[0].relu_();
    return tensor_list{x};
  };
  EXPECT_TRUE(gradcheck(f, {leaf({4, 4}), leaf({4})}));
}

TEST(InplaceOnViews, ThroughAComplexView) {
  manual_seed(23);
  // cb is complex; view_as_real(cb) is a float64 view of it, written in place.
  auto f = [](const tensor_list& in) {
    Tensor cb = view_as_complex(in[0]).clone();
    view_as_real(cb).select(1, 1).mul_(in[1]);
    return tensor_list{view_as_real(cb.mul(cb))};
  };
  EXPECT_TRUE(gradcheck(f, {leaf({3, 2}), leaf({3})}));
}

TEST(InplaceOnViews, VersionCountersAreSharedWithTheBase) {
  const Tensor w = leaf({3, 2});
  Tensor x = w.clone();
  const Tensor s = x.sin();  // saves x
  x[1].mul_(2);              // changes x through a view
  expect_error_mentions([&] { s.sum().backward(); },
                        {"modified by an inplace operation", "SinBackward0", "version"});
  Tensor h = w.clone();
  const Tensor v = h[0];
  const Tensor e = v.sin();  // saves the view
  h.add_(1);                 // changes the view through its base
  expect_error_mentions([&] { e.sum().backward(); },
                        {"modified by an inplace operation", "SinBackward0"});
  EXPECT_EQ(v._version(), h._version());
}

TEST(InplaceOnViews, ErrorsPyTorchRaises) {
  const Tensor w = leaf({3});
  expect_error_mentions([&] { w[0].mul_(2); },
                        {"mul", "a view of a leaf Variable that requires grad", "in-place"});
  expect_error_mentions([&] { w.narrow(0, 0, 2).copy_(ones({2}, kFloat64)); },
                        {"copy_", "view of a leaf Variable"});
  Tensor x = w.clone();
  Tensor v;
  {
    autograd::NoGradGuard no_grad;
    v = x.narrow(0, 1, 2);
  }
  expect_error_mentions([&] { v.mul_(2); }, {"mul", "created in no_grad mode", "forbidden"});
  // Under no_grad the same write is allowed and not recorded.
  {
    autograd::NoGradGuard no_grad;
    x[0].mul_(2);
  }
  EXPECT_EQ(x.grad_fn()->name(), "CloneBackward0");
  // A detached alias is not a view of x for autograd: writing it leaves x's history alone.
  const Tensor d = x.detach();
  d[0].add_(leaf({}));
  EXPECT_EQ(x.grad_fn()->name(), "CloneBackward0");
}

TEST(InplaceOnViews, RetainGraphAndSecondBackward) {
  const Tensor w = leaf({2, 2});
  Tensor x = w.clone();
  x.t()[1].mul_(3);
  const Tensor loss = x.sum();
  loss.backward({}, /*retain_graph=*/true);
  loss.backward();
  EXPECT_TRUE(allclose(w.grad(), tensor<double>({2.0, 6.0, 2.0, 6.0}).view({2, 2}), 0, 0));
  // The same graph again, released: a clear error.
  expect_error_mentions([&] { x.sum().backward(); }, {"second time"});
}

}  // namespace
}  // namespace tessera
