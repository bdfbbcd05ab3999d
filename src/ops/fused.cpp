// Matrix products with fused epilogues (include/tessera/ops/fused.h): one epilogue plan per
// call (src/gemm/epilogue.h) over the operands' own strides. When the plan's supports() says
// no, or the dtype is not one the engine fuses, the whole call runs the unfused eager ops
// (never half of each). Under autograd, a call that asks only for `out` still runs fused: its
// node keeps the float32 pre-activation and differentiates the activation there.
#include "tessera/ops/fused.h"

#include <array>
#include <string>
#include <utility>

#include <fmt/ranges.h>

#include "autograd/record.h"
#include "core/tensor_make.h"
#include "gemm/epilogue.h"
#include "ops/pointwise_grad.h"
#include "tessera/autograd/function.h"
#include "tessera/ops/blas.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

using gemm::EpilogueOp;
using gemm::EpilogueReduceKind;

// Each activation: its name, its epilogue node, and the pointwise op whose derivative it has.
struct Activation {
  std::string_view name;
  EpilogueOp epilogue;
  cpu::UnaryOp unary;
};
constexpr std::array<Activation, 6> kActivations = {{
    {"relu", EpilogueOp::Relu, cpu::UnaryOp::Relu},
    {"gelu", EpilogueOp::GeluErf, cpu::UnaryOp::GeluErf},
    {"gelu_tanh", EpilogueOp::GeluTanh, cpu::UnaryOp::GeluTanh},
    {"silu", EpilogueOp::Silu, cpu::UnaryOp::Silu},
    {"sigmoid", EpilogueOp::Sigmoid, cpu::UnaryOp::Sigmoid},
    {"tanh", EpilogueOp::Tanh, cpu::UnaryOp::Tanh},
}};

constexpr std::array<std::pair<std::string_view, EpilogueReduceKind>, 5> kReductions = {{
    {"sum", EpilogueReduceKind::Sum},
    {"mean", EpilogueReduceKind::Mean},
    {"amax", EpilogueReduceKind::Max},
    {"amin", EpilogueReduceKind::Min},
    {"sum_squares", EpilogueReduceKind::SumSquares},
}};

// The activation's op, or nullopt for "none"; throws for an unknown name.
std::optional<EpilogueOp> parse_activation(std::string_view name, std::string_view op) {
  if (name == "none") return std::nullopt;
  for (const Activation& a : kActivations)
    if (a.name == name) return a.epilogue;
  TS_THROW(ValueError,
           "{}(): argument 'activation' expected one of none, relu, gelu, gelu_tanh, silu, "
           "sigmoid, tanh, but got '{}'",
           op, name);
}

std::optional<EpilogueReduceKind> parse_reduce(std::string_view name, std::string_view op) {
  if (name.empty()) return std::nullopt;
  for (const auto& [n, e] : kReductions)
    if (n == name) return e;
  TS_THROW(ValueError,
           "{}(): argument 'reduce' expected one of sum, mean, amax, amin, sum_squares (or empty), "
           "but got '{}'",
           op, name);
}

Tensor activate(const Tensor& h, std::optional<EpilogueOp> act) {
  if (!act) return h;
  switch (*act) {
    case EpilogueOp::Relu:
      return relu(h);
    case EpilogueOp::GeluErf:
      return gelu(h);
    case EpilogueOp::GeluTanh:
      return gelu(h, "tanh");
    case EpilogueOp::Silu:
      return silu(h);
    case EpilogueOp::Sigmoid:
      return sigmoid(h);
    default:
      return tanh(h);
  }
}

Tensor reduce_unfused(const Tensor& y, EpilogueReduceKind kind, int64_t dim) {
  switch (kind) {
    case EpilogueReduceKind::Sum:
      return sum(y, {dim});
    case EpilogueReduceKind::Mean:
      return mean(y, {dim});
    case EpilogueReduceKind::Max:
      return amax(y, {dim});
    case EpilogueReduceKind::Min:
      return amin(y, {dim});
    default:
      return sum(square(y), {dim});
  }
}

bool float_like(ScalarType t) {
  return t == kFloat32 || t == kBFloat16 || t == kFloat16;
}

// d bias = sum_i dh, d a = dh b^T, d b = a^T dh, with dh = g * act'(h) in float32 (the
// activation's own derivative, pointwise_grad.cpp, at the kept pre-activation h and the output)
// and the products in the operands' dtype (as addmm's backward).
void record_addmm_act(autograd::Recorder& rec, const Tensor& out, const Tensor& bias,
                      const Tensor& a, const Tensor& b, const Tensor& h,
                      std::optional<EpilogueOp> act) {
  UnaryDerivative derivative = nullptr;
  for (const Activation& x : kActivations)
    if (act && x.epilogue == *act) derivative = unary_derivative(x.unary);
  rec.finish("AddmmActBackward0", {out},
             [sa = rec.save(a), sb = rec.save(b), sh = act ? rec.save(h) : autograd::SavedTensor(),
              so = act ? rec.save_output(out) : autograd::SavedTensor(), derivative,
              has_bias = bias.defined(), bias_dtype = bias.defined() ? bias.dtype() : kFloat32](
                 const autograd::tensor_list& g, const autograd::Node& n) {
               const Tensor av = sa.unpack(n), bv = sb.unpack(n);
               Tensor dh = g[0].to(kFloat32);
               if (derivative) dh = derivative(dh, sh, so, n);
               const Tensor d = dh.to(av.dtype());
               return autograd::tensor_list{has_bias ? dh.sum({0}).to(bias_dtype) : Tensor(),
                                            d.mm(bv.t()), av.t().mm(d)};
             });
}

}  // namespace

FusedMatmulResult addmm_act_ex(const Tensor& bias, const Tensor& a, const Tensor& b,
                               const FusedMatmulOptions& options) {
  constexpr std::string_view op = "addmm_act";
  TS_CHECK(a.dim() == 2 && b.dim() == 2, ValueError,
           "{}(): arguments 'a' and 'b' expected 2-D tensors, but got {}-D and {}-D", op, a.dim(),
           b.dim());
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  TS_CHECK(b.size(0) == k, ValueError,
           "{}(): a and b shapes cannot be multiplied ({}x{} and {}x{})", op, m, k, b.size(0), n);
  TS_CHECK(a.dtype() == b.dtype(), TypeError,
           "{}(): expected a and b to have the same dtype, but got {} != {}", op, a.dtype(),
           b.dtype());
  TS_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == n), ValueError,
           "{}(): argument 'bias' expected shape [{}], but got [{}]", op, n,
           bias.defined() ? fmt::format("{}", fmt::join(bias.sizes(), ", ")) : "");
  const std::optional<EpilogueOp> act = parse_activation(options.activation, op);
  const std::optional<EpilogueReduceKind> red = parse_reduce(options.reduce, op);
  const int64_t rdim = options.reduce_dim < 0 ? options.reduce_dim + 2 : options.reduce_dim;
  TS_CHECK(!red || rdim == 0 || rdim == 1, IndexError,
           "{}(): argument 'reduce_dim' expected a dim in [-2, 1], but got {}", op,
           options.reduce_dim);
  const ScalarType out_dtype = options.out_dtype.value_or(a.dtype());

  FusedMatmulResult r;
  // Fused: float-like operands (bfloat16/float16 computed in float32, as mm does). With
  // autograd, only calls that return `out` alone (their node keeps the pre-activation itself);
  // the others take the unfused path, which records every step's derivative.
  const std::vector<Tensor> inputs{bias, a, b};
  const bool fusable =
      float_like(a.dtype()) && float_like(out_dtype) &&
      (!bias.defined() || float_like(bias.dtype())) &&
      (!autograd::any_requires_grad(inputs) || (!red && !options.keep_pre_activation));
  if (fusable) {
    autograd::Recorder rec(inputs);
    const Tensor af = a.dtype() == kFloat32 ? a : a.to(kFloat32);
    const Tensor bf = b.dtype() == kFloat32 ? b : b.to(kFloat32);
    gemm::GemmProblem p;
    p.m = m, p.n = n, p.k = k;
    p.a = af.data_ptr(), p.a_rs = af.stride(0), p.a_cs = af.stride(1);
    p.b = bf.data_ptr(), p.b_rs = bf.stride(0), p.b_cs = bf.stride(1);
    r.out = make_empty({m, n}, out_dtype, op);
    if (options.keep_pre_activation || (rec && act))
      r.pre_activation = make_empty({m, n}, kFloat32, op);
    if (red) r.reduced = make_empty({rdim == 1 ? m : n}, kFloat32, op);
    gemm::EpiloguePlan plan(m, n);
    auto h = plan.accumulator();
    if (bias.defined())
      h = plan.add(h, plan.row_vector(bias.data_ptr(), bias.dtype(), bias.stride(0)));
    const auto y = act ? plan.unary(*act, h) : h;
    plan.store(y, r.out.data_ptr(), n, 1, out_dtype);
    if (r.pre_activation.defined()) plan.store(h, r.pre_activation.data_ptr(), n, 1);
    if (red)
      plan.reduce(y, *red, rdim == 1 ? gemm::EpilogueAxis::Rows : gemm::EpilogueAxis::Cols,
                  r.reduced.data_ptr());
    if (plan.supports(p).empty()) {
      gemm::gemm_epilogue(p, plan, nullptr, op);
      if (rec) {
        record_addmm_act(rec, r.out, bias, a, b, r.pre_activation, act);
        r.pre_activation = Tensor();
      }
      return r;
    }
  }
  // Unfused, whole: the eager ops in the operands' dtype, recorded step by step.
  const Tensor h = bias.defined() ? addmm(bias, a, b) : mm(a, b);
  const Tensor y = activate(h, act);
  r = {};
  r.out = y.dtype() == out_dtype ? y : y.to(out_dtype);
  if (options.keep_pre_activation) r.pre_activation = h;
  if (red) r.reduced = reduce_unfused(y, *red, rdim);
  return r;
}

Tensor addmm_act(const Tensor& bias, const Tensor& a, const Tensor& b,
                 std::string_view activation) {
  FusedMatmulOptions o;
  o.activation = activation;
  return addmm_act_ex(bias, a, b, o).out;
}

Tensor linear_act(const Tensor& input, const PackedLinearWeight& weight,
                  const std::optional<Tensor>& bias, std::string_view activation) {
  constexpr std::string_view op = "linear_act";
  const auto act = parse_activation(activation, op);
  const Tensor b = bias.value_or(Tensor());
  if (weight.dtype() != kFloat32) return activate(linear(input, weight, b), act);
  autograd::check_no_grad_needed(std::vector<Tensor>{input, b}, "linear_act (prepacked weight)");
  TS_CHECK(weight.defined(), ValueError,
           "{}(): argument 'weight' expected a packed weight, but got an empty "
           "PackedLinearWeight",
           op);
  TS_CHECK(input.dim() >= 1 && input.dtype() == kFloat32, TypeError,
           "{}(): argument 'input' expected a float32 tensor of at least 1 dimension (as the "
           "packed weight), but got {} of {} dimensions",
           op, input.dtype(), input.dim());
  const int64_t k = input.size(-1), n = weight.out_features();
  TS_CHECK(k == weight.in_features(), RuntimeError,
           "{}(): argument 'weight' expected in_features {} (the input's last dimension), but "
           "got a packed weight [{}, {}]",
           op, k, n, weight.in_features());
  TS_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == n && b.dtype() == kFloat32), ValueError,
           "{}(): argument 'bias' expected float32 [{}], but got {} [{}]", op, n,
           b.defined() ? b.dtype() : kFloat32,
           b.defined() ? fmt::format("{}", fmt::join(b.sizes(), ", ")) : std::string());
  DimVector out_shape(input.sizes().begin(), input.sizes().end());
  out_shape.back() = n;
  const Tensor x2 = input.reshape({-1, k});
  const int64_t m = x2.size(0);
  Tensor y = make_empty({m, n}, kFloat32, op);
  gemm::GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a = x2.data_ptr(), p.a_rs = x2.stride(0), p.a_cs = x2.stride(1);
  gemm::EpiloguePlan plan(m, n);
  auto h = plan.accumulator();
  if (b.defined()) h = plan.add(h, plan.row_vector(b.data_ptr(), b.dtype(), b.stride(0)));
  plan.store(act ? plan.unary(*act, h) : h, y.data_ptr(), n, 1);
  gemm::gemm_epilogue_prepacked(p, plan, *weight.packed_, op);
  return y.reshape(out_shape);
}

Tensor linear_act(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                  std::string_view activation) {
  TS_CHECK(input.dim() >= 1 && weight.dim() == 2, ValueError,
           "linear_act(): expected input of at least 1 dim and a 2-D weight, but got {}-D and "
           "{}-D",
           input.dim(), weight.dim());
  const int64_t k = input.size(input.dim() - 1);
  TS_CHECK(weight.size(1) == k, ValueError,
           "linear_act(): argument 'weight' expected shape [n, {}], but got [{}, {}]", k,
           weight.size(0), weight.size(1));
  DimVector out_shape(input.sizes().begin(), input.sizes().end());
  out_shape.back() = weight.size(0);
  const Tensor x2 = input.reshape({-1, k});
  const Tensor y = addmm_act(bias.value_or(Tensor()), x2, weight.t(), activation);
  return y.reshape(out_shape);
}

}  // namespace tessera
