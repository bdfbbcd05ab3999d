// Every differentiable op against central finite differences in float64 (gradcheck), on
// broadcast, strided and odd-shaped inputs.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tessera/autograd/autograd.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

using autograd::gradcheck;
using autograd::tensor_list;

// A float64 leaf that requires grad, values in [lo, hi).
Tensor leaf(DimVector shape, double lo = -1.0, double hi = 1.0) {
  return rand(shape, kFloat64).mul(hi - lo).add(lo).requires_grad_();
}

using Fn1 = std::function<Tensor(const Tensor&)>;
using Fn2 = std::function<Tensor(const Tensor&, const Tensor&)>;

void check1(const std::string& name, const Fn1& f, const Tensor& x) {
  SCOPED_TRACE(name);
  EXPECT_TRUE(gradcheck([&](const tensor_list& in) { return tensor_list{f(in[0])}; }, {x}));
}

void check2(const std::string& name, const Fn2& f, const Tensor& x, const Tensor& y) {
  SCOPED_TRACE(name);
  EXPECT_TRUE(
      gradcheck([&](const tensor_list& in) { return tensor_list{f(in[0], in[1])}; }, {x, y}));
}

TEST(Gradcheck, UnaryPointwise) {
  manual_seed(1);
  const Tensor x = leaf({3, 4});
  const Tensor pos = leaf({3, 4}, 0.2, 2.0);  // domains of log, sqrt, ...
  check1(
      "neg", [](const Tensor& t) { return t.neg(); }, x);
  check1(
      "abs", [](const Tensor& t) { return t.abs(); }, x);
  check1(
      "exp", [](const Tensor& t) { return t.exp(); }, x);
  check1(
      "expm1", [](const Tensor& t) { return t.expm1(); }, x);
  check1(
      "log", [](const Tensor& t) { return t.log(); }, pos);
  check1(
      "log1p", [](const Tensor& t) { return t.log1p(); }, pos);
  check1(
      "log2", [](const Tensor& t) { return t.log2(); }, pos);
  check1(
      "sqrt", [](const Tensor& t) { return t.sqrt(); }, pos);
  check1(
      "rsqrt", [](const Tensor& t) { return t.rsqrt(); }, pos);
  check1(
      "sin", [](const Tensor& t) { return t.sin(); }, x);
  check1(
      "cos", [](const Tensor& t) { return t.cos(); }, x);
  check1(
      "tanh", [](const Tensor& t) { return t.tanh(); }, x);
  check1(
      "sigmoid", [](const Tensor& t) { return t.sigmoid(); }, x);
  check1(
      "erf", [](const Tensor& t) { return t.erf(); }, x);
  check1(
      "reciprocal", [](const Tensor& t) { return reciprocal(t); }, pos);
  check1(
      "square", [](const Tensor& t) { return square(t); }, x);
  check1(
      "relu", [](const Tensor& t) { return t.relu(); }, x);
  check1(
      "gelu", [](const Tensor& t) { return gelu(t); }, x.mul(3).detach().requires_grad_());
  check1(
      "gelu_tanh", [](const Tensor& t) { return gelu(t, "tanh"); },
      x.mul(3).detach().requires_grad_());
  check1(
      "silu", [](const Tensor& t) { return silu(t); }, x);
  check1(
      "clamp", [](const Tensor& t) { return t.clamp(-0.5, 0.4); }, x);
  check1(
      "floor", [](const Tensor& t) { return floor(t.mul(3)).add(t); }, x);
  check1(
      "pow_scalar", [](const Tensor& t) { return t.pow(3); }, x);
  check1(
      "pow_half", [](const Tensor& t) { return t.pow(0.5); }, pos);
  check1(
      "scalar_ops", [](const Tensor& t) { return t.add(2).mul(3).sub(1).div(4); }, x);
  check1(
      "rdiv", [](const Tensor& t) { return 2.0 / t; }, pos);
}

TEST(Gradcheck, BinaryWithBroadcasting) {
  manual_seed(2);
  const Tensor a = leaf({2, 3, 4}), b = leaf({3, 1}), c = leaf({4});
  const Tensor pb = leaf({3, 1}, 0.5, 2.0);
  check2(
      "add", [](const Tensor& x, const Tensor& y) { return x.add(y, 2.5); }, a, b);
  check2(
      "sub", [](const Tensor& x, const Tensor& y) { return x.sub(y, 0.5); }, a, c);
  check2(
      "mul", [](const Tensor& x, const Tensor& y) { return x.mul(y); }, a, b);
  check2(
      "div", [](const Tensor& x, const Tensor& y) { return x.div(y); }, a, pb);
  check2(
      "pow", [](const Tensor& x, const Tensor& y) { return x.pow(y); }, leaf({3, 4}, 0.5, 2.0),
      leaf({3, 4}));
  check2(
      "maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); }, a, c);
  check2(
      "minimum", [](const Tensor& x, const Tensor& y) { return minimum(x, y); }, a, b);
  check2(
      "where", [](const Tensor& x, const Tensor& y) { return where(x.detach().gt(0), x, y); }, a,
      c);
  check2(
      "masked_fill_then_mul",
      [](const Tensor& x, const Tensor& y) {
        return x.masked_fill(x.detach().lt(-0.5), 0.25).mul(y);
      },
      a, b);
  check2(
      "inplace_on_non_leaf",
      [](const Tensor& x, const Tensor& y) {
        Tensor h = x.mul(1.0);
        h.mul_(y);
        h.add_(y, 2.0);
        return h;
      },
      a, c);
}

TEST(Gradcheck, Reductions) {
  manual_seed(3);
  const Tensor x = leaf({3, 4, 5});
  check1(
      "sum_all", [](const Tensor& t) { return t.sum(); }, x);
  check1(
      "sum_dims",
      [](const Tensor& t) {
        return t.sum({0, 2});
      },
      x);
  check1(
      "sum_keepdim", [](const Tensor& t) { return t.sum({1}, true); }, x);
  check1(
      "mean", [](const Tensor& t) { return t.mean({-1}); }, x);
  check1(
      "amax", [](const Tensor& t) { return t.amax({1}); }, x);
  check1(
      "amin_keepdim", [](const Tensor& t) { return t.amin({2}, true); }, x);
  check1(
      "max_dim", [](const Tensor& t) { return std::get<0>(t.max(1)); }, x);
  check1(
      "min_dim_keepdim", [](const Tensor& t) { return std::get<0>(t.min(2, true)); }, x);
  check1(
      "var", [](const Tensor& t) { return t.var({1}); }, x);
  check1(
      "var_all_unbiased0", [](const Tensor& t) { return t.var({}, 0); }, x);
  check1(
      "std",
      [](const Tensor& t) {
        return t.std({0, 2}, 1, true);
      },
      x);
  check1(
      "norm2", [](const Tensor& t) { return t.norm(2, {1}); }, x);
  check1(
      "logsumexp", [](const Tensor& t) { return t.logsumexp({2}); }, x);
  check1(
      "softmax", [](const Tensor& t) { return t.softmax(1); }, x);
  check1(
      "log_softmax", [](const Tensor& t) { return t.log_softmax(-1); }, x);
}

TEST(Gradcheck, MatrixProducts) {
  manual_seed(4);
  check2(
      "mm", [](const Tensor& a, const Tensor& b) { return a.mm(b); }, leaf({3, 5}), leaf({5, 4}));
  check2(
      "mm_transposed", [](const Tensor& a, const Tensor& b) { return a.t().mm(b.t()); },
      leaf({5, 3}), leaf({4, 5}));
  check2(
      "bmm", [](const Tensor& a, const Tensor& b) { return a.bmm(b); }, leaf({2, 3, 4}),
      leaf({2, 4, 5}));
  check2(
      "matmul_batched_broadcast", [](const Tensor& a, const Tensor& b) { return a.matmul(b); },
      leaf({2, 1, 3, 4}), leaf({3, 4, 2}));
  check2(
      "matmul_3d_2d", [](const Tensor& a, const Tensor& b) { return a.matmul(b); }, leaf({2, 3, 4}),
      leaf({4, 5}));
  check2(
      "matmul_vec", [](const Tensor& a, const Tensor& b) { return a.matmul(b); }, leaf({4}),
      leaf({4, 3}));
  check2(
      "dot", [](const Tensor& a, const Tensor& b) { return dot(a, b); }, leaf({5}), leaf({5}));
  check2(
      "outer", [](const Tensor& a, const Tensor& b) { return outer(a, b); }, leaf({3}), leaf({4}));
  const Tensor self = leaf({4}), m1 = leaf({3, 5}), m2 = leaf({5, 4});
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) { return tensor_list{addmm(in[0], in[1], in[2], 0.5, 2.0)}; },
      {self, m1, m2}));
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) { return tensor_list{baddbmm(in[0], in[1], in[2], -1.0, 0.5)}; },
      {leaf({1, 3, 4}), leaf({2, 3, 5}), leaf({2, 5, 4})}));
  // linear: 3-D input, bias; and the GEMV path (<= 4 rows).
  for (DimVector shape : {DimVector{2, 3, 6}, DimVector{1, 6}}) {
    EXPECT_TRUE(
        gradcheck([](const tensor_list& in) { return tensor_list{linear(in[0], in[1], in[2])}; },
                  {leaf(shape), leaf({4, 6}), leaf({4})}));
  }
}

TEST(Gradcheck, ViewsAndCopies) {
  manual_seed(5);
  const Tensor x = leaf({2, 3, 4});
  check1(
      "view",
      [](const Tensor& t) {
        return t.view({6, 4}).mul(2);
      },
      x);
  check1(
      "reshape_copy", [](const Tensor& t) { return t.transpose(0, 2).reshape({-1}); }, x);
  check1(
      "permute",
      [](const Tensor& t) {
        return t.permute({2, 0, 1}).mul(t.permute({2, 0, 1}));
      },
      x);
  check1(
      "expand",
      [](const Tensor& t) {
        return t.unsqueeze(0).expand({3, 2, 3, 4});
      },
      x);
  check1(
      "slice_step", [](const Tensor& t) { return t.slice(2, 1, 4, 2); }, x);
  check1(
      "select", [](const Tensor& t) { return t.select(1, -1); }, x);
  check1(
      "narrow", [](const Tensor& t) { return t.narrow(2, 1, 2); }, x);
  check1(
      "squeeze", [](const Tensor& t) { return t.unsqueeze(1).squeeze(1).squeeze(); }, x);
  check1(
      "flatten", [](const Tensor& t) { return t.flatten(1); }, x);
  check1(
      "contiguous", [](const Tensor& t) { return t.t().contiguous(); }, leaf({3, 4}));
  check1(
      "clone", [](const Tensor& t) { return t.clone().mul(t); }, x);
  check1(
      "cat",
      [](const Tensor& t) {
        return cat({t, t.mul(2), t.narrow(1, 0, 1)}, 1);
      },
      x);
  check1(
      "stack",
      [](const Tensor& t) {
        return stack({t, t.exp()}, 2);
      },
      x);
  check1(
      "split",
      [](const Tensor& t) {
        auto parts = t.split(2, 2);
        return parts[0].mul(parts[1]);
      },
      x);
  check1(
      "chunk", [](const Tensor& t) { return t.chunk(3, 1)[2]; }, x);
  check1(
      "copy_into_non_leaf",
      [](const Tensor& t) {
        Tensor h = zeros({2, 3, 4}, kFloat64).add(t.detach());  // no history
        h.copy_(t.mul(3));
        return h;
      },
      x);
}

TEST(Gradcheck, Indexing) {
  manual_seed(6);
  const Tensor x = leaf({5, 3});
  const Tensor idx = tensor<int64_t>({4, 0, 4, 2});
  check1(
      "index_select", [&](const Tensor& t) { return t.index_select(0, idx); }, x);
  check1(
      "index_select_dim1",
      [&](const Tensor& t) {
        return t.index_select(1, tensor<int64_t>({2, 2, 0}));
      },
      x);
  check1(
      "gather",
      [](const Tensor& t) {
        return t.gather(1, tensor<int64_t>({0, 2, 1, 1, 0, 2, 2, 2, 0, 1}).view({5, 2}));
      },
      x);
  check1(
      "embedding",
      [](const Tensor& w) {
        return embedding(w, tensor<int64_t>({1, 4, 1, 0}).view({2, 2}));
      },
      x);
  check1(
      "sort", [](const Tensor& t) { return std::get<0>(t.sort(0, true)); }, x);
  check1(
      "topk", [](const Tensor& t) { return std::get<0>(t.topk(2, 1)); }, x);
  check1(
      "tril", [](const Tensor& t) { return t.tril(); }, x);
  check1(
      "triu", [](const Tensor& t) { return t.triu(-1); }, x);
  // padding_idx rows get no gradient.
  const Tensor w = leaf({5, 3});
  embedding(w, tensor<int64_t>({1, 2, 1}), 1).sum().backward();
  EXPECT_TRUE(allclose(w.grad().select(0, 1), zeros({3}, kFloat64), 0, 0));
  EXPECT_TRUE(allclose(w.grad().select(0, 2), ones({3}, kFloat64), 0, 0));
}

}  // namespace
}  // namespace tessera
