// Every differentiable op against central finite differences in float64 (gradcheck), on
// broadcast, strided and odd-shaped inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tessera/autograd/autograd.h"
#include "tessera/tessera.h"
#include "test_support.h"

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

// A float64 leaf holding exactly these values, shaped `shape`.
Tensor leaf_of(std::vector<double> v, DimVector shape) {
  return tensor<double>(v).view(shape).clone().requires_grad_();
}

TEST(Gradcheck, ProductsAndScans) {
  manual_seed(7);
  const Tensor x = leaf({3, 4}, 0.5, 1.5);
  // One zero in a row, two zeros in another, and a column with a zero.
  const Tensor z = leaf_of({0.5, 0.0, 1.5, -2.0, 0.0, 0.7, 0.0, 1.1, 0.9, -1.3, 0.8, 1.2}, {3, 4});
  for (const Tensor& t : {x, z}) {
    check1(
        "prod_all", [](const Tensor& u) { return u.prod(); }, t);
    check1(
        "prod_dim", [](const Tensor& u) { return u.prod(1); }, t);
    check1(
        "prod_dim0_keepdim", [](const Tensor& u) { return u.prod(0, true); }, t);
    check1(
        "cumsum", [](const Tensor& u) { return u.cumsum(1); }, t);
    check1(
        "cumsum_dim0", [](const Tensor& u) { return u.cumsum(0); }, t);
    check1(
        "cumprod", [](const Tensor& u) { return u.cumprod(1); }, t);
    check1(
        "cumprod_dim0", [](const Tensor& u) { return u.cumprod(-2); }, t);
  }
  // Several zeros in the whole tensor: prod() has no gradient anywhere.
  const Tensor zz = z.detach().clone().requires_grad_();
  zz.prod().backward();
  EXPECT_TRUE(allclose(zz.grad(), zeros({3, 4}, kFloat64), 0, 0));
  EXPECT_EQ(z.prod().grad_fn()->name(), "ProdBackward0");
  EXPECT_EQ(z.prod(1).grad_fn()->name(), "ProdBackward1");
  EXPECT_EQ(z.cumprod(1).grad_fn()->name(), "CumprodBackward0");
}

TEST(Gradcheck, MediansMomentsAndNorms) {
  manual_seed(8);
  const Tensor x = leaf({3, 5});  // distinct values: no ties
  check1(
      "median_all", [](const Tensor& t) { return t.median(); }, x);
  check1(
      "median_dim", [](const Tensor& t) { return std::get<0>(t.median(1)); }, x);
  check1(
      "median_dim0_keepdim", [](const Tensor& t) { return std::get<0>(t.median(0, true)); }, x);
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) {
        auto [v, m] = var_mean(in[0], {1}, 1, false);
        return tensor_list{v, m};
      },
      {x}));
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) {
        auto [v, m] = var_mean(in[0], {}, 0, true);
        return tensor_list{v, m.mul(3)};
      },
      {x}));
  const Tensor pos = leaf({3, 5}, 0.3, 1.5);
  for (double p : {1.0, 3.0, 1.5, 0.5, double(INFINITY), -double(INFINITY), 0.0}) {
    SCOPED_TRACE(p);
    check1(
        "norm_all", [p](const Tensor& t) { return t.norm(p); }, x);
    check1(
        "norm_dim", [p](const Tensor& t) { return t.norm(p, {1}); }, pos);
    check1(
        "norm_dim_keepdim", [p](const Tensor& t) { return t.norm(p, {0}, true); }, x);
  }
  // Ties: median() shares the gradient evenly among the elements equal to it, median(dim)
  // gives it to the returned index, the inf-norm shares it among the maxima of |x|.
  const Tensor t = leaf_of({1, 2, 2, 3, 2}, {5});
  t.median().backward();
  EXPECT_TRUE(allclose(t.grad(), tensor<double>({0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3}), 1e-15, 0));
  const Tensor u = leaf_of({-3, 1, 3, 2}, {4});
  u.norm(INFINITY).backward();
  EXPECT_TRUE(allclose(u.grad(), tensor<double>({-0.5, 0, 0.5, 0}), 0, 0));
  const Tensor w = leaf_of({1, 0, 2}, {3});
  w.norm(0).backward();
  EXPECT_FALSE(w.grad().defined());  // p = 0: no gradient at all, as PyTorch
}

TEST(Gradcheck, TernaryAndPiecewisePointwise) {
  manual_seed(9);
  const Tensor a = leaf({3, 4}), b = leaf({4}), w = leaf({3, 1});
  const Tensor pb = leaf({3, 4}, 0.4, 1.7);
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return tensor_list{lerp(in[0], in[1], 0.3)}; },
                        {a, b}));
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) { return tensor_list{lerp(in[0], in[1], in[2])}; }, {a, b, w}));
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) { return tensor_list{addcmul(in[0], in[1], in[2], -1.5)}; },
      {b, a, w}));
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) { return tensor_list{addcdiv(in[0], in[1], in[2], 0.5)}; },
      {a, b, pb}));
  check1(
      "softplus", [](const Tensor& t) { return softplus(t.mul(4)); }, a);
  check1(
      "softplus_beta_threshold", [](const Tensor& t) { return softplus(t.mul(4), 2, 3); }, a);
  check2(
      "atan2", [](const Tensor& x, const Tensor& y) { return atan2(x, y); }, a, b);
  check2(
      "remainder", [](const Tensor& x, const Tensor& y) { return remainder(x.mul(3), y); }, a, pb);
  check1(
      "remainder_scalar", [](const Tensor& x) { return x.mul(3).remainder(0.7); }, a);
  check2(
      "fmod", [](const Tensor& x, const Tensor& y) { return fmod(x.mul(3), y); }, a, pb);
  check2(
      "div_floor", [](const Tensor& x, const Tensor& y) { return x.div(y, "floor").add(x); }, a,
      pb);
  check1(
      "angle_real", [](const Tensor& x) { return x.angle().add(x); }, a);
  EXPECT_EQ(remainder(a, pb).grad_fn()->name(), "RemainderBackward1");
  EXPECT_EQ(a.remainder(0.5).grad_fn()->name(), "RemainderBackward0");
  EXPECT_EQ(lerp(a, b, w).grad_fn()->name(), "LerpBackward1");
}

TEST(Gradcheck, ScatterGatherAndMasks) {
  manual_seed(10);
  const Tensor x = leaf({4, 5}), src = leaf({3, 5});
  const Tensor idx = tensor<int64_t>({3, 0, 4, 1, 1, 2, 0, 0, 3}).view({3, 3});
  // scatter: no two elements of a row go to the same place (with duplicates the last write
  // wins and PyTorch's formula, like Tessera's, still gives every source element g).
  const Tensor distinct = tensor<int64_t>({3, 0, 4, 1, 2, 0, 0, 4, 3}).view({3, 3});
  EXPECT_TRUE(gradcheck(
      [&](const tensor_list& in) { return tensor_list{in[0].scatter(1, distinct, in[1])}; },
      {x, src}));
  check1(
      "scatter_value", [&](const Tensor& t) { return t.scatter(1, idx, 2.5); }, x);
  EXPECT_TRUE(gradcheck(
      [&](const tensor_list& in) { return tensor_list{in[0].scatter_add(1, idx, in[1])}; },
      {x, src}));
  const Tensor rows = tensor<int64_t>({2, 0, 2});
  EXPECT_TRUE(gradcheck(
      [&](const tensor_list& in) { return tensor_list{in[0].index_add(0, rows, in[1], -2.0)}; },
      {x, src}));
  // A source slice broadcast to the destination slice ([3, 1] over rows of 5).
  EXPECT_TRUE(
      gradcheck([&](const tensor_list& in) { return tensor_list{in[0].index_add(0, rows, in[1])}; },
                {x, leaf({3, 1})}));
  const Tensor mask = tensor<bool>({true, false, true, true, false}).view({1, 5});
  check1(
      "masked_select_broadcast", [&](const Tensor& t) { return t.masked_select(mask); }, x);
  const std::vector<std::optional<Tensor>> at = {tensor<int64_t>({3, 1, 3}),
                                                 tensor<int64_t>({0, 4, 0})};
  check1(
      "index", [&](const Tensor& t) { return index(t, at); }, x);
  check1(
      "index_rows",
      [&](const Tensor& t) {
        return index(t, {tensor<int64_t>({1, 1, 0})});
      },
      x);
  // Distinct positions (a repeated one is written by the last value only, yet every value
  // gets the gradient, as in PyTorch).
  const std::vector<std::optional<Tensor>> put_at = {tensor<int64_t>({3, 1, 0}),
                                                     tensor<int64_t>({0, 4, 0})};
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate);
    EXPECT_TRUE(gradcheck(
        [&](const tensor_list& in) {
          return tensor_list{index_put(in[0], put_at, in[1].mul(1.0), accumulate)};
        },
        {x, leaf({3})}));
    EXPECT_TRUE(gradcheck(
        [&](const tensor_list& in) {
          Tensor h = in[0].mul(2);
          index_put_(h, {tensor<int64_t>({2, 0})}, in[1], accumulate);
          return tensor_list{h};
        },
        {x, leaf({5})}));
  }
}

TEST(Gradcheck, StridedViews) {
  manual_seed(11);
  const Tensor x = leaf({4, 6});
  check1(
      "unfold_overlapping", [](const Tensor& t) { return t.unfold(1, 3, 2); }, x);
  check1(
      "unfold_dim0", [](const Tensor& t) { return t.unfold(0, 2, 1).mul(t.unfold(0, 2, 1)); }, x);
  check1(
      "diagonal", [](const Tensor& t) { return t.diagonal(); }, x);
  check1(
      "diagonal_offset", [](const Tensor& t) { return t.diagonal(2, 1, 0); }, x);
  check1(
      "diagonal_3d",
      [](const Tensor& t) {
        return t.view({2, 3, 4}).diagonal(-1, 2, 1);
      },
      x);
  check1(
      "as_strided",
      [](const Tensor& t) {
        return t.as_strided({3, 2}, {6, 2}, 1);
      },
      x);
  check1(
      "as_strided_overlapping_output",
      [](const Tensor& t) {
        return t.as_strided({3, 4}, {1, 2}, 2);
      },
      x);
  check1(
      "as_strided_of_transpose",
      [](const Tensor& t) {
        return t.t().as_strided({2, 3}, {1, 6}, 3);
      },
      x);
  // view_as_complex / view_as_real, with a complex product in between.
  const Tensor c = view_as_complex(tensor<double>({0.5, -1.0, 2.0, 0.25}).view({2, 2}));
  check1(
      "view_as_complex_real",
      [&](const Tensor& t) {
        return view_as_real(view_as_complex(t.view({3, 4, 2})).mul(c.select(0, 1)));
      },
      x);
  EXPECT_EQ(x.unfold(1, 3, 2).grad_fn()->name(), "UnfoldBackward0");
  EXPECT_EQ(x.diagonal().grad_fn()->name(), "DiagonalBackward0");
  EXPECT_EQ(x.as_strided({2}, {1}).grad_fn()->name(), "AsStridedBackward0");
  // An input whose elements overlap has no as_strided derivative yet: it says so.
  testing::expect_error_mentions(
      [&] {
        x.select(1, 0).unsqueeze(1).expand({4, 3}).as_strided({2}, {1});
      },
      {"as_strided", "overlap", "not implemented"});
}

}  // namespace
}  // namespace tessera
