// No silent gaps: every public op given an input that requires grad either records its
// derivative (a floating result requires grad), returns integers or bools (no gradient by
// nature), or throws the "derivative is not implemented" error. A float result that silently
// does not require grad would drop part of a gradient without a word.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/autograd/autograd.h"
#include "tessera/tessera.h"

namespace tessera {
namespace {

TEST(AutogradCoverage, EveryOpRecordsReturnsIntegersOrRefuses) {
  manual_seed(7);
  const Tensor x = rand({4, 5}, kFloat64).add(0.5).requires_grad_();
  const Tensor y = rand({4, 5}, kFloat64).add(0.5);
  const Tensor idx = tensor<int64_t>({0, 2, 1, 3}).view({4, 1});
  const Tensor mask = x.detach().gt(1.0);
  std::vector<std::pair<std::string, std::function<Tensor()>>> ops = {
      {"prod", [&] { return x.prod(); }},
      {"prod_dim", [&] { return x.prod(1); }},
      {"cumsum", [&] { return x.cumsum(1); }},
      {"cumprod", [&] { return x.cumprod(0); }},
      {"median", [&] { return x.median(); }},
      {"median_dim", [&] { return std::get<0>(x.median(1)); }},
      {"sort", [&] { return std::get<0>(x.sort(1)); }},
      {"topk", [&] { return std::get<0>(x.topk(2)); }},
      {"lerp", [&] { return x.lerp(y, 0.3); }},
      {"addcmul", [&] { return x.addcmul(y, y); }},
      {"addcdiv", [&] { return x.addcdiv(y, y); }},
      {"softplus", [&] { return softplus(x); }},
      {"tril", [&] { return x.tril(); }},
      {"triu", [&] { return x.triu(1); }},
      {"scatter", [&] { return x.scatter(1, idx, 0.5); }},
      {"scatter_add", [&] { return x.scatter_add(1, idx, y.narrow(1, 0, 1)); }},
      {"index_add", [&] { return x.index_add(0, tensor<int64_t>({1}), y.narrow(0, 0, 1)); }},
      {"masked_select", [&] { return x.masked_select(mask); }},
      {"unfold", [&] { return x.unfold(1, 2, 1); }},
      {"diagonal", [&] { return x.diagonal(); }},
      {"as_strided",
       [&] {
         return x.as_strided({2, 2}, {1, 1});
       }},
      {"atan2", [&] { return atan2(x, y); }},
      {"remainder", [&] { return x.remainder(0.3); }},
      {"fmod", [&] { return fmod(x, y); }},
      {"pow_scalar_base", [&] { return pow(2.0, x); }},
      {"norm1", [&] { return x.norm(1); }},
      {"var_mean", [&] { return std::get<0>(var_mean(x, {1}, 1, false)); }},
      {"abs_complex",
       [&] {
         return view_as_complex(x.narrow(1, 0, 4).contiguous().reshape({4, 2, 2}));
       }},
      {"to_float32", [&] { return x.to(kFloat32); }},
      {"index", [&] { return index(x, {idx.view({4})}); }},
      {"index_put", [&] { return index_put(x, {idx.view({4})}, y.narrow(1, 0, 1)); }},
      {"index_put_",
       [&] {
         Tensor h = x.mul(1);
         return index_put_(h, {idx.view({4})}, y.narrow(1, 0, 1));
       }},
      {"unique", [&] { return std::get<0>(unique(x)); }},
      {"bernoulli", [&] { return bernoulli(x.div(2)); }},
      {"uniform_", [&] { return uniform_(x.mul(1)); }},
      {"angle", [&] { return x.angle(); }},
      {"view_as_real",
       [&] {
         return view_as_real(view_as_complex(x.narrow(1, 0, 4).contiguous().reshape({4, 2, 2})));
       }},
      {"var_mean_mean", [&] { return std::get<1>(var_mean(x, {1}, 1, false)); }},
      {"softplus_beta", [&] { return softplus(x, 2, 1); }},
      {"div_floor", [&] { return x.div(y, "floor"); }},
      {"polar", [&] { return polar(x, y); }},
      {"complex", [&] { return complex(x, y); }},
      {"sign", [&] { return x.sign(); }},
      {"round", [&] { return round(x); }},
      {"argmax", [&] { return x.argmax(); }},
      {"eq", [&] { return x.eq(y); }},
      {"isnan", [&] { return isnan(x); }},
      {"nonzero", [&] { return x.nonzero(); }},
      {"count_nonzero", [&] { return x.count_nonzero(); }},
      {"any", [&] { return x.any(); }},
      {"to_int", [&] { return x.to(kInt32); }},
      {"softmax_bf16", [&] { return x.softmax(1, kFloat32); }},
      {"addmm_act", [&] { return addmm_act(y.select(1, 0), x, y.t(), "gelu"); }},
      {"linear_act", [&] { return linear_act(x, y, std::nullopt, "relu"); }},
  };
  for (const auto& [name, fn] : ops) {
    SCOPED_TRACE(name);
    try {
      const Tensor out = fn();
      if (out.is_floating_point() || out.is_complex()) {
        EXPECT_TRUE(out.requires_grad()) << name << ": a floating result without a gradient";
      }
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("derivative"), std::string::npos)
          << name << " threw something else: " << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera
