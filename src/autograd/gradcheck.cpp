// gradcheck: analytic gradients (one backward of a randomly weighted sum of the outputs)
// against central differences of the same sum, in float64.
#include <cmath>

#include <fmt/format.h>

#include "tessera/autograd/autograd.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/random.h"
#include "tessera/ops/reduce.h"

namespace tessera::autograd {

namespace {

// sum_i <out_i, w_i> in double.
double weighted_sum(const tensor_list& outs, const tensor_list& weights) {
  double s = 0;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].defined() && weights[i].defined())
      s += outs[i].to(kFloat64).mul(weights[i]).sum().item<double>();
  return s;
}

}  // namespace

bool gradcheck(const std::function<tensor_list(const tensor_list&)>& fn, const tensor_list& inputs,
               const GradcheckOptions& options) {
  std::vector<size_t> checked;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    TS_CHECK(x.dtype() == kFloat64 && x.is_contiguous() && x.is_leaf(), ValueError,
             "gradcheck(): input {} expected a contiguous float64 leaf tensor (finite differences "
             "need double precision), but got {}{}",
             i, x.dtype(), x.is_contiguous() ? "" : ", non-contiguous");
    checked.push_back(i);
  }
  TS_CHECK(!checked.empty(), ValueError,
           "gradcheck(): expected at least one input that requires grad");

  // Fixed random weights make the vector-Jacobian product cover every output element.
  tensor_list outs = fn(inputs);
  tensor_list weights;
  {
    NoGradGuard no_grad;
    Generator gen(20261130);
    for (const Tensor& o : outs)
      weights.push_back(o.defined() ? randn(o.sizes(), kFloat64, &gen) : Tensor());
  }
  tensor_list roots, seeds, diff_inputs;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined() || !outs[i].requires_grad()) continue;
    roots.push_back(outs[i]);
    seeds.push_back(weights[i].to(outs[i].dtype()));
  }
  for (size_t i : checked) diff_inputs.push_back(inputs[i]);
  TS_CHECK(!roots.empty(), RuntimeError,
           "gradcheck(): no output requires grad: the function is not differentiable in its "
           "inputs (or records nothing)");
  const tensor_list analytic = grad(roots, diff_inputs, seeds, true, false, true);

  NoGradGuard no_grad;
  for (size_t c = 0; c < checked.size(); ++c) {
    const Tensor& x = inputs[checked[c]];
    const Tensor flat = x.view({-1});
    const Tensor an = analytic[c].defined() ? analytic[c].reshape({-1}) : zeros_like(flat);
    double* p = flat.data_ptr<double>();
    for (int64_t j = 0; j < flat.numel(); ++j) {
      const double orig = p[j];
      p[j] = orig + options.eps;
      const double plus = weighted_sum(fn(inputs), weights);
      p[j] = orig - options.eps;
      const double minus = weighted_sum(fn(inputs), weights);
      p[j] = orig;
      const double numerical = (plus - minus) / (2 * options.eps);
      const double a = an[j].item<double>();
      TS_CHECK(std::fabs(a - numerical) <= options.atol + options.rtol * std::fabs(numerical),
               RuntimeError,
               "gradcheck(): Jacobian mismatch for input {} at element {}: analytic {} vs "
               "numerical {} (atol {}, rtol {})",
               checked[c], j, a, numerical, options.atol, options.rtol);
    }
  }
  return true;
}

}  // namespace tessera::autograd
