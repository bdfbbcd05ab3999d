// Front end of the elementwise ops: argument checks, dtype rules, iterator set-up. The loops
// live in src/ops/cpu/pointwise_kernels.cpp.
#include "tessera/ops/pointwise.h"

#include "core/iterator.h"
#include "core/tensor_make.h"
#include "ops/cpu/pointwise_kernels.h"
#include "ops/pointwise_grad.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/reduce.h"

namespace tessera {

using cpu::BinaryOp;
using cpu::TernaryOp;
using cpu::UnaryOp;

namespace {

const cpu::PointwiseKernels& kernels() {
  return TS_DISPATCH(pointwise_kernels);
}

// One operand of a binary op: a tensor or a number.
struct Operand {
  const Tensor* tensor = nullptr;
  const Scalar* scalar = nullptr;
  Operand(const Tensor& t) : tensor(&t) {}  // NOLINT
  Operand(const Scalar& s) : scalar(&s) {}  // NOLINT
  void add_to(TensorIteratorConfig& cfg) const {
    if (tensor) {
      cfg.add_input(*tensor);
    } else {
      cfg.add_input(*scalar);
    }
  }
  ScalarType dtype() const { return tensor ? tensor->dtype() : scalar->default_dtype(); }
};

enum class Promote { Common, IntToFloat };

struct BinarySpec {
  std::string_view name;
  BinaryOp op;
  Promote promote = Promote::Common;
};

void check_not_packed(ScalarType t, std::string_view op) {
  TS_CHECK(!is_float8(t) && !is_packed(t), TypeError,
           "{}(): arithmetic on {} is not supported (a storage format: convert to float32 or "
           "bfloat16 first)",
           op, t);
}

Tensor run_binary_kernel(const BinarySpec& spec, const Tensor& out, Operand a, Operand b,
                         const Scalar& alpha);

// The op with its autograd: records the derivative when an input requires grad (in-place:
// `out` is a's tensor, whose old value the derivative may need, so it is cloned first).
Tensor run_binary(const BinarySpec& spec, const Tensor& out, Operand a, Operand b,
                  const Scalar& alpha = 1) {
  Tensor inputs[2];  // the tensor operands (a Scalar operand gets no gradient)
  size_t n = 0;
  if (a.tensor) inputs[n++] = *a.tensor;
  if (b.tensor) inputs[n++] = *b.tensor;
  autograd::Recorder rec(std::span<const Tensor>(inputs, n));
  const bool differentiable = binary_is_differentiable(spec.op);
  if (!rec || !differentiable) return run_binary_kernel(spec, out, a, b, alpha);
  const bool inplace = out.defined() && a.tensor && out.is_same(*a.tensor);
  TS_CHECK(!out.defined() || inplace, RuntimeError,
           "{}(): functions with out=... arguments don't support automatic differentiation, "
           "but one of the arguments requires grad.",
           spec.name);
  if (inplace) autograd::check_inplace(out, true, spec.name);
  // The derivative needs the operands' values from before the write.
  const Tensor a_before = inplace ? a.tensor->clone() : (a.tensor ? *a.tensor : Tensor());
  const Tensor b_before =
      b.tensor && inplace && b.tensor->is_alias_of(out) ? b.tensor->clone() : Tensor();
  Tensor result = run_binary_kernel(spec, out, a, b, alpha);
  record_binary(rec, spec.op, spec.name, result, a.tensor, a.tensor ? &a_before : nullptr, b.tensor,
                b_before.defined() ? &b_before : b.tensor, a.scalar, b.scalar, alpha);
  return result;
}

Tensor run_binary_kernel(const BinarySpec& spec, const Tensor& out, Operand a, Operand b,
                         const Scalar& alpha) {
  TensorIteratorConfig cfg(spec.name);
  cfg.add_output(out);
  a.add_to(cfg);
  b.add_to(cfg);
  if (spec.promote == Promote::IntToFloat) cfg.promote_integer_inputs_to_float(true);
  const bool is_cmp = spec.op == BinaryOp::Eq || spec.op == BinaryOp::Ne ||
                      spec.op == BinaryOp::Lt || spec.op == BinaryOp::Le ||
                      spec.op == BinaryOp::Gt || spec.op == BinaryOp::Ge ||
                      spec.op == BinaryOp::LogicalAnd || spec.op == BinaryOp::LogicalOr ||
                      spec.op == BinaryOp::LogicalXor;
  if (is_cmp) cfg.output_dtype(kBool);
  check_not_packed(a.dtype(), spec.name);
  check_not_packed(b.dtype(), spec.name);
  TS_CHECK(spec.op != BinaryOp::Sub || (a.dtype() != kBool && b.dtype() != kBool), RuntimeError,
           "{}(): subtraction, the `-` operator, with a bool tensor is not supported. If you "
           "are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
           spec.name);
  auto iter = cfg.build();
  const ScalarType common = iter.common_dtype();
  switch (spec.op) {
    case BinaryOp::Sub:
      TS_CHECK(common != kBool, RuntimeError,
               "{}(): subtraction, the `-` operator, with two bool tensors is not supported. "
               "Use the `^` or `logical_xor()` operator instead.",
               spec.name);
      [[fallthrough]];
    case BinaryOp::Add:
      TS_CHECK(!is_integral(common, true) || !alpha.is_floating_point(), TypeError,
               "{}(): for integral input tensors, argument 'alpha' must not be a floating point "
               "number, but got {}",
               spec.name, alpha.repr());
      break;
    case BinaryOp::DivTrunc:
    case BinaryOp::DivFloor:
    case BinaryOp::Remainder:
    case BinaryOp::Fmod:
      if (is_integral(common, false)) {
        TS_CHECK(!any(iter.input(1).eq(0)).item<bool>(), RuntimeError,
                 "{}(): ZeroDivisionError: integer division by zero", spec.name);
      }
      TS_CHECK(common != kBool, TypeError, "{}(): not supported for bool tensors", spec.name);
      TS_CHECK(!is_complex(common), TypeError, "{}(): not supported for complex tensors",
               spec.name);
      break;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum:
    case BinaryOp::Atan2:
      TS_CHECK(!is_complex(common), TypeError, "{}(): not supported for complex tensors",
               spec.name);
      break;
    case BinaryOp::BitAnd:
    case BinaryOp::BitOr:
    case BinaryOp::BitXor:
    case BinaryOp::Shl:
    case BinaryOp::Shr:
      TS_CHECK(is_integral(common, spec.op != BinaryOp::Shl && spec.op != BinaryOp::Shr), TypeError,
               "{}(): expected integer{} tensors, but got dtype {}", spec.name,
               spec.op == BinaryOp::Shl || spec.op == BinaryOp::Shr ? "" : " or bool", common);
      break;
    case BinaryOp::Lt:
    case BinaryOp::Le:
    case BinaryOp::Gt:
    case BinaryOp::Ge:
      TS_CHECK(!is_complex(common), TypeError, "{}(): not supported for complex tensors",
               spec.name);
      break;
    case BinaryOp::Pow:
      TS_CHECK(common != kBool, TypeError, "{}(): not supported for bool tensors", spec.name);
      break;
    default:
      break;
  }
  kernels().binary(iter, spec.op, alpha);
  return iter.output();
}

struct UnarySpec {
  std::string_view name;
  UnaryOp op;
  Promote promote = Promote::Common;
};

Tensor run_unary_kernel(const UnarySpec& spec, const Tensor& a, const Tensor& out,
                        std::optional<ScalarType> out_dtype);

// The op with its autograd (see run_binary).
Tensor run_unary(const UnarySpec& spec, const Tensor& a, const Tensor& out = {},
                 std::optional<ScalarType> out_dtype = std::nullopt) {
  autograd::Recorder rec({a});
  if (!rec || !unary_is_differentiable(spec.op)) return run_unary_kernel(spec, a, out, out_dtype);
  const bool inplace = out.defined() && out.is_same(a);
  TS_CHECK(!out.defined() || inplace, RuntimeError,
           "{}(): functions with out=... arguments don't support automatic differentiation, "
           "but one of the arguments requires grad.",
           spec.name);
  if (inplace) autograd::check_inplace(out, true, spec.name);
  const Tensor a_before = inplace ? a.clone() : a;
  Tensor result = run_unary_kernel(spec, a, out, out_dtype);
  record_unary(rec, spec.op, spec.name, result, a_before);
  return result;
}

Tensor run_unary_kernel(const UnarySpec& spec, const Tensor& a, const Tensor& out,
                        std::optional<ScalarType> out_dtype) {
  check_not_packed(a.dtype(), spec.name);
  TensorIteratorConfig cfg(spec.name);
  cfg.add_output(out).add_input(a);
  if (spec.promote == Promote::IntToFloat) cfg.promote_integer_inputs_to_float(true);
  if (out_dtype) cfg.output_dtype(*out_dtype);
  auto iter = cfg.build();
  kernels().unary(iter, spec.op);
  return iter.output();
}

constexpr BinarySpec kAdd{"add", BinaryOp::Add}, kSub{"sub", BinaryOp::Sub},
    kMul{"mul", BinaryOp::Mul}, kDiv{"div", BinaryOp::Div, Promote::IntToFloat},
    kDivTrunc{"div", BinaryOp::DivTrunc}, kDivFloor{"div", BinaryOp::DivFloor},
    kRemainder{"remainder", BinaryOp::Remainder}, kFmod{"fmod", BinaryOp::Fmod},
    kPow{"pow", BinaryOp::Pow}, kMaximum{"maximum", BinaryOp::Maximum},
    kMinimum{"minimum", BinaryOp::Minimum}, kAtan2{"atan2", BinaryOp::Atan2, Promote::IntToFloat},
    kEq{"eq", BinaryOp::Eq}, kNe{"ne", BinaryOp::Ne}, kLt{"lt", BinaryOp::Lt},
    kLe{"le", BinaryOp::Le}, kGt{"gt", BinaryOp::Gt}, kGe{"ge", BinaryOp::Ge};

const BinarySpec& div_spec(std::optional<std::string_view> mode) {
  if (!mode) return kDiv;
  if (*mode == "trunc") return kDivTrunc;
  if (*mode == "floor") return kDivFloor;
  TS_THROW(ValueError,
           "div(): argument 'rounding_mode' expected one of None, 'trunc' or 'floor', but got "
           "'{}'",
           *mode);
}

UnarySpec float_unary(std::string_view name, UnaryOp op) {
  return UnarySpec{name, op, Promote::IntToFloat};
}

}  // namespace

// ---------------------------------------------------------------------------- result type

ScalarType result_type(const Tensor& a, const Tensor& b) {
  ResultTypeState s;
  s.update(a, false);
  s.update(b, false);
  return s.result();
}

ScalarType result_type(const Tensor& a, const Scalar& b) {
  ResultTypeState s;
  s.update(a, false);
  s.update(b);
  return s.result();
}

DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b, std::string_view op) {
  const size_t nd = std::max(a.size(), b.size());
  DimVector out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t x = i + a.size() >= nd ? a[i + a.size() - nd] : 1;
    const int64_t y = i + b.size() >= nd ? b[i + b.size() - nd] : 1;
    TS_CHECK(x == y || x == 1 || y == 1, RuntimeError,
             "{}(): shape mismatch: [{}] and [{}] cannot be broadcast together (dimension {}: {} "
             "vs {})",
             op, fmt::join(a, ", "), fmt::join(b, ", "), i, x, y);
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// -------------------------------------------------------------------------- binary ops

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return run_binary(kAdd, {}, a, b, alpha);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return run_binary(kSub, {}, a, b, alpha);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return run_binary(kMul, {}, a, b);
}
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode) {
  return run_binary(div_spec(rounding_mode), {}, a, b);
}
Tensor remainder(const Tensor& a, const Tensor& b) {
  return run_binary(kRemainder, {}, a, b);
}
Tensor fmod(const Tensor& a, const Tensor& b) {
  return run_binary(kFmod, {}, a, b);
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return run_binary(kPow, {}, a, b);
}
Tensor pow(const Tensor& a, const Scalar& b) {
  return run_binary(kPow, {}, a, b);
}
Tensor pow(const Scalar& a, const Tensor& b) {
  return run_binary(kPow, {}, a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return run_binary(kMaximum, {}, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return run_binary(kMinimum, {}, a, b);
}
Tensor atan2(const Tensor& a, const Tensor& b) {
  return run_binary(kAtan2, {}, a, b);
}

Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  run_binary(kAdd, out, a, b, alpha);
  return out;
}
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  run_binary(kSub, out, a, b, alpha);
  return out;
}
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b) {
  run_binary(kMul, out, a, b);
  return out;
}
Tensor& div_out(Tensor& out, const Tensor& a, const Tensor& b) {
  run_binary(kDiv, out, a, b);
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return run_binary(kEq, {}, a, b);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return run_binary(kNe, {}, a, b);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return run_binary(kLt, {}, a, b);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return run_binary(kLe, {}, a, b);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return run_binary(kGt, {}, a, b);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return run_binary(kGe, {}, a, b);
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return run_binary({"logical_and", BinaryOp::LogicalAnd}, {}, a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return run_binary({"logical_or", BinaryOp::LogicalOr}, {}, a, b);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return run_binary({"logical_xor", BinaryOp::LogicalXor}, {}, a, b);
}
Tensor logical_not(const Tensor& a) {
  return run_unary({"logical_not", UnaryOp::LogicalNot}, a, {}, kBool);
}
Tensor bitwise_and(const Tensor& a, const Tensor& b) {
  return run_binary({"bitwise_and", BinaryOp::BitAnd}, {}, a, b);
}
Tensor bitwise_or(const Tensor& a, const Tensor& b) {
  return run_binary({"bitwise_or", BinaryOp::BitOr}, {}, a, b);
}
Tensor bitwise_xor(const Tensor& a, const Tensor& b) {
  return run_binary({"bitwise_xor", BinaryOp::BitXor}, {}, a, b);
}
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b) {
  return run_binary({"bitwise_left_shift", BinaryOp::Shl}, {}, a, b);
}
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b) {
  return run_binary({"bitwise_right_shift", BinaryOp::Shr}, {}, a, b);
}
Tensor bitwise_not(const Tensor& a) {
  TS_CHECK(is_integral(a.dtype(), true), TypeError,
           "bitwise_not(): expected an integer or bool tensor, but got dtype {}", a.dtype());
  return run_unary({"bitwise_not", UnaryOp::BitNot}, a);
}

Tensor isnan(const Tensor& a) {
  return run_unary({"isnan", UnaryOp::IsNan}, a, {}, kBool);
}
Tensor isinf(const Tensor& a) {
  return run_unary({"isinf", UnaryOp::IsInf}, a, {}, kBool);
}
Tensor isfinite(const Tensor& a) {
  return run_unary({"isfinite", UnaryOp::IsFinite}, a, {}, kBool);
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  return all(eq(a, b)).item<bool>();
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  const ScalarType t = promote_types(a.dtype(), b.dtype());
  const ScalarType ft = is_complex(t) ? kComplex128 : kFloat64;
  Tensor x = a.to(ft), y = b.to(ft);
  Tensor diff = abs(sub(x, y));
  Tensor tol = add(abs(y).mul(rtol), scalar_tensor(atol, kFloat64));
  Tensor close = le(diff, tol);
  close = logical_or(close, eq(x, y));  // equal infinities
  if (equal_nan) close = logical_or(close, logical_and(isnan(x), isnan(y)));
  return close.numel() == 0 || all(close).item<bool>();
}

// --------------------------------------------------------------------------- unary ops

Tensor abs(const Tensor& a) {
  if (a.is_complex())
    return run_unary({"abs", UnaryOp::AbsComplex}, a, {}, to_real_type(a.dtype()));
  return run_unary({"abs", UnaryOp::Abs}, a);
}
Tensor neg(const Tensor& a) {
  TS_CHECK(a.dtype() != kBool, TypeError,
           "neg(): negation, the `-` operator, on a bool tensor is not supported. If you are "
           "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  return run_unary({"neg", UnaryOp::Neg}, a);
}
Tensor sign(const Tensor& a) {
  TS_CHECK(!a.is_complex(), TypeError, "sign(): not supported for complex tensors, use sgn");
  return run_unary({"sign", UnaryOp::Sign}, a);
}
Tensor exp(const Tensor& a) {
  return run_unary(float_unary("exp", UnaryOp::Exp), a);
}
Tensor expm1(const Tensor& a) {
  return run_unary(float_unary("expm1", UnaryOp::Expm1), a);
}
Tensor log(const Tensor& a) {
  return run_unary(float_unary("log", UnaryOp::Log), a);
}
Tensor log1p(const Tensor& a) {
  return run_unary(float_unary("log1p", UnaryOp::Log1p), a);
}
Tensor log2(const Tensor& a) {
  return run_unary(float_unary("log2", UnaryOp::Log2), a);
}
Tensor sqrt(const Tensor& a) {
  return run_unary(float_unary("sqrt", UnaryOp::Sqrt), a);
}
Tensor rsqrt(const Tensor& a) {
  return run_unary(float_unary("rsqrt", UnaryOp::Rsqrt), a);
}
Tensor sin(const Tensor& a) {
  return run_unary(float_unary("sin", UnaryOp::Sin), a);
}
Tensor cos(const Tensor& a) {
  return run_unary(float_unary("cos", UnaryOp::Cos), a);
}
Tensor tanh(const Tensor& a) {
  return run_unary(float_unary("tanh", UnaryOp::Tanh), a);
}
Tensor sigmoid(const Tensor& a) {
  return run_unary(float_unary("sigmoid", UnaryOp::Sigmoid), a);
}
Tensor erf(const Tensor& a) {
  return run_unary(float_unary("erf", UnaryOp::Erf), a);
}
Tensor reciprocal(const Tensor& a) {
  return run_unary(float_unary("reciprocal", UnaryOp::Reciprocal), a);
}
Tensor square(const Tensor& a) {
  // square(x) is pow(x, 2): bool promotes to int64 with the integer exponent.
  return run_unary({"square", UnaryOp::Square}, a.dtype() == kBool ? a.to(kInt64) : a);
}
Tensor floor(const Tensor& a) {
  return run_unary({"floor", UnaryOp::Floor}, a);
}
Tensor ceil(const Tensor& a) {
  return run_unary({"ceil", UnaryOp::Ceil}, a);
}
Tensor round(const Tensor& a) {
  return run_unary({"round", UnaryOp::Round}, a);
}
Tensor trunc(const Tensor& a) {
  return run_unary({"trunc", UnaryOp::Trunc}, a);
}

Tensor relu(const Tensor& a) {
  TS_CHECK(a.dtype() != kBool && !a.is_complex(), TypeError,
           "relu(): expected a real, non-bool tensor, but got dtype {}", a.dtype());
  return run_unary({"relu", UnaryOp::Relu}, a);
}

Tensor gelu(const Tensor& a, std::string_view approximate) {
  TS_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu(): argument 'approximate' expected 'none' or 'tanh', but got '{}'", approximate);
  TS_CHECK(is_floating_point(a.dtype()), TypeError,
           "gelu(): expected a floating point tensor, but got dtype {}", a.dtype());
  return run_unary({"gelu", approximate == "none" ? UnaryOp::GeluErf : UnaryOp::GeluTanh}, a);
}

Tensor silu(const Tensor& a) {
  TS_CHECK(is_floating_point(a.dtype()), TypeError,
           "silu(): expected a floating point tensor, but got dtype {}", a.dtype());
  return run_unary({"silu", UnaryOp::Silu}, a);
}

Tensor softplus(const Tensor& a, const Scalar& beta, const Scalar& threshold) {
  TS_CHECK(is_floating_point(a.dtype()), TypeError,
           "softplus(): expected a floating point tensor, but got dtype {}", a.dtype());
  autograd::Recorder rec({a});
  auto iter = TensorIteratorConfig("softplus").add_output({}).add_input(a).build();
  kernels().softplus(iter, beta, threshold);
  if (rec) record_softplus(rec, iter.output(), a, beta, threshold);
  return iter.output();
}

// -------------------------------------------------------------------- ternary and clamp

namespace {
Tensor where_kernel(const Tensor& condition, const Tensor& a, const Tensor& b);
}  // namespace

// The gradient goes to a where the condition holds and to b elsewhere.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  autograd::Recorder rec({a, b});
  Tensor out = where_kernel(condition, a, b);
  if (rec)
    rec.finish("WhereBackward0", {out},
               [c = condition, as = a.sizes().vec(), bs = b.sizes().vec()](
                   const autograd::tensor_list& g, const autograd::Node&) {
                 const Tensor zero = zeros_like(g[0]);
                 return autograd::tensor_list{autograd::sum_to(where(c, g[0], zero), as),
                                              autograd::sum_to(where(c, zero, g[0]), bs)};
               });
  return out;
}

namespace {
Tensor where_kernel(const Tensor& condition, const Tensor& a, const Tensor& b) {
  TS_CHECK(condition.dtype() == kBool, TypeError,
           "where(): argument 'condition' expected dtype bool, but got {}", condition.dtype());
  ResultTypeState s;
  s.update(a, false);
  s.update(b, false);
  const ScalarType t = s.result();
  auto iter = TensorIteratorConfig("where")
                  .add_output({})
                  .add_input(condition)
                  .add_input(a.to(t))
                  .add_input(b.to(t))
                  .promote_inputs_to_common_dtype(false)
                  .common_dtype(t)
                  .build();
  kernels().ternary(iter, TernaryOp::Where, 0);
  return iter.output();
}
}  // namespace

namespace {
Tensor scalar_like_promoted(const Scalar& v, const Tensor& other) {
  return scalar_tensor(v, result_type(other, v));
}
}  // namespace

Tensor where(const Tensor& c, const Scalar& a, const Tensor& b) {
  return where(c, scalar_like_promoted(a, b), b);
}
Tensor where(const Tensor& c, const Tensor& a, const Scalar& b) {
  return where(c, a, scalar_like_promoted(b, a));
}
Tensor where(const Tensor& c, const Scalar& a, const Scalar& b) {
  ResultTypeState s;
  s.update(a);
  s.update(b);
  const ScalarType t = s.result();
  return where(c, scalar_tensor(a, t), scalar_tensor(b, t));
}

Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  TS_CHECK(min || max, ValueError, "clamp(): at least one of 'min' or 'max' must not be None");
  TS_CHECK(!a.is_complex(), TypeError, "clamp(): not supported for complex tensors");
  autograd::Recorder rec({a});
  // The gradient passes where the input lies within [min, max].
  if (rec) {
    Tensor out = clamp(a, min, max);  // below autograd: the kernel path
    rec.finish(
        "ClampBackward1", {out},
        [sa = rec.save(a), min, max](const autograd::tensor_list& g, const autograd::Node& n) {
          const Tensor x = sa.unpack(n);
          Tensor keep = ones_like(x, kBool);
          if (min) keep = keep.logical_and(x.ge(*min));
          if (max) keep = keep.logical_and(x.le(*max));
          return autograd::tensor_list{where(keep, g[0], zeros_like(g[0]))};
        });
    return out;
  }
  ResultTypeState s;
  s.update(a, false);
  if (min) s.update(*min);
  if (max) s.update(*max);
  auto iter =
      TensorIteratorConfig("clamp").add_output({}).add_input(a).common_dtype(s.result()).build();
  kernels().clamp(iter, min, max);
  return iter.output();
}

Tensor clamp(const Tensor& a, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  TS_CHECK(min || max, ValueError, "clamp(): at least one of 'min' or 'max' must not be None");
  Tensor r = a;
  if (min) r = maximum(r, *min);
  if (max) r = minimum(r, *max);
  return r;
}

Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  autograd::Recorder rec({start, end});
  // A 16-bit start keeps the weight in float32 (rounding it to bfloat16 first is visible).
  const ScalarType t = start.dtype();
  const Tensor out =
      t == kFloat16 || t == kBFloat16
          ? lerp(start.to(kFloat32), end.to(kFloat32), scalar_tensor(weight, kFloat32)).to(t)
          : lerp(start, end, scalar_tensor(weight, t));
  if (rec) record_lerp(rec, out, start, end, nullptr, weight);
  return out;
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  TS_CHECK(start.dtype() == end.dtype() && start.dtype() == weight.dtype(), TypeError,
           "lerp(): expected dtype {} for 'end' and 'weight', but got {} and {}", start.dtype(),
           end.dtype(), weight.dtype());
  TS_CHECK(is_floating_point(start.dtype()) || start.is_complex(), TypeError,
           "lerp(): expected a floating point tensor, but got dtype {}", start.dtype());
  autograd::Recorder rec({start, end, weight});
  auto iter = TensorIteratorConfig("lerp")
                  .add_output({})
                  .add_input(start)
                  .add_input(end)
                  .add_input(weight)
                  .build();
  kernels().ternary(iter, TernaryOp::Lerp, 0);
  if (rec) record_lerp(rec, iter.output(), start, end, &weight, 0);
  return iter.output();
}

namespace {
Tensor addc(std::string_view name, TernaryOp op, const Tensor& self, const Tensor& t1,
            const Tensor& t2, const Scalar& value) {
  autograd::Recorder rec({self, t1, t2});
  auto iter =
      TensorIteratorConfig(name).add_output({}).add_input(self).add_input(t1).add_input(t2).build();
  TS_CHECK(!is_integral(iter.common_dtype(), true) || !value.is_floating_point(), TypeError,
           "{}(): for integral input tensors, argument 'value' must not be a floating point "
           "number",
           name);
  TS_CHECK(op != TernaryOp::Addcdiv || !is_integral(iter.common_dtype(), true), TypeError,
           "{}(): integer division with addcdiv is no longer supported; got dtype {}", name,
           iter.common_dtype());
  kernels().ternary(iter, op, value);
  if (rec) record_addc(rec, op == TernaryOp::Addcdiv, iter.output(), self, t1, t2, value);
  return iter.output();
}
}  // namespace

Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return addc("addcmul", TernaryOp::Addcmul, self, t1, t2, value);
}
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return addc("addcdiv", TernaryOp::Addcdiv, self, t1, t2, value);
}

// ------------------------------------------------------------------------------ complex

Tensor conj(const Tensor& a) {
  if (!a.is_complex()) return a;
  return run_unary({"conj", UnaryOp::Conj}, a);
}

Tensor angle(const Tensor& a) {
  if (a.is_complex()) return run_unary({"angle", UnaryOp::Angle}, a, {}, to_real_type(a.dtype()));
  return run_unary(float_unary("angle", UnaryOp::Angle), a);
}

namespace {
Tensor make_complex(std::string_view name, TernaryOp op, const Tensor& x, const Tensor& y) {
  TS_CHECK(x.dtype() == y.dtype() && (x.dtype() == kFloat32 || x.dtype() == kFloat64), TypeError,
           "{}(): expected both inputs to be float32 or float64 of the same dtype, but got {} "
           "and {}",
           name, x.dtype(), y.dtype());
  auto iter = TensorIteratorConfig(name)
                  .add_output({})
                  .add_input(x)
                  .add_input(y)
                  .output_dtype(to_complex_type(x.dtype()))
                  .build();
  kernels().ternary(iter, op, 0);
  return iter.output();
}
}  // namespace

Tensor polar(const Tensor& abs, const Tensor& angle) {
  return make_complex("polar", TernaryOp::Polar, abs, angle);
}
Tensor complex(const Tensor& real, const Tensor& imag) {
  return make_complex("complex", TernaryOp::Complex, real, imag);
}

// The filled positions get no gradient.
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value) {
  autograd::Recorder rec({a});
  Tensor out = a.clone();
  out.masked_fill_(mask, value);
  if (rec)
    rec.finish(
        "MaskedFillBackward0", {out},
        [mask, as = a.sizes().vec()](const autograd::tensor_list& g, const autograd::Node&) {
          return autograd::tensor_list{autograd::sum_to(where(mask, zeros_like(g[0]), g[0]), as)};
        });
  return out;
}

// --------------------------------------------------------------------- Tensor methods

#define TS_BINARY_METHODS(name, fn)                \
  Tensor Tensor::name(const Tensor& other) const { \
    return fn(*this, other);                       \
  }                                                \
  Tensor Tensor::name(const Scalar& other) const { \
    return run_binary(k##fn, {}, *this, other);    \
  }

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const {
  return tessera::add(*this, o, alpha);
}
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const {
  return run_binary(kAdd, {}, *this, o, alpha);
}
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const {
  return tessera::sub(*this, o, alpha);
}
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const {
  return run_binary(kSub, {}, *this, o, alpha);
}
Tensor Tensor::mul(const Tensor& o) const {
  return tessera::mul(*this, o);
}
Tensor Tensor::mul(const Scalar& o) const {
  return run_binary(kMul, {}, *this, o);
}
Tensor Tensor::div(const Tensor& o, std::optional<std::string_view> m) const {
  return tessera::div(*this, o, m);
}
Tensor Tensor::div(const Scalar& o, std::optional<std::string_view> m) const {
  return run_binary(div_spec(m), {}, *this, o);
}
Tensor Tensor::remainder(const Tensor& o) const {
  return tessera::remainder(*this, o);
}
Tensor Tensor::remainder(const Scalar& o) const {
  return run_binary(kRemainder, {}, *this, o);
}
Tensor Tensor::pow(const Tensor& e) const {
  return tessera::pow(*this, e);
}
Tensor Tensor::pow(const Scalar& e) const {
  return tessera::pow(*this, e);
}
Tensor Tensor::maximum(const Tensor& o) const {
  return tessera::maximum(*this, o);
}
Tensor Tensor::minimum(const Tensor& o) const {
  return tessera::minimum(*this, o);
}

const Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) const {
  run_binary(kAdd, *this, *this, o, alpha);
  return *this;
}
const Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) const {
  run_binary(kAdd, *this, *this, o, alpha);
  return *this;
}
const Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) const {
  run_binary(kSub, *this, *this, o, alpha);
  return *this;
}
const Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) const {
  run_binary(kSub, *this, *this, o, alpha);
  return *this;
}
const Tensor& Tensor::mul_(const Tensor& o) const {
  run_binary(kMul, *this, *this, o);
  return *this;
}
const Tensor& Tensor::mul_(const Scalar& o) const {
  run_binary(kMul, *this, *this, o);
  return *this;
}
const Tensor& Tensor::div_(const Tensor& o) const {
  run_binary(kDiv, *this, *this, o);
  return *this;
}
const Tensor& Tensor::div_(const Scalar& o) const {
  run_binary(kDiv, *this, *this, o);
  return *this;
}
const Tensor& Tensor::pow_(const Scalar& e) const {
  run_binary(kPow, *this, *this, e);
  return *this;
}

#define TS_CMP_METHODS(name, spec)             \
  Tensor Tensor::name(const Tensor& o) const { \
    return run_binary(spec, {}, *this, o);     \
  }                                            \
  Tensor Tensor::name(const Scalar& o) const { \
    return run_binary(spec, {}, *this, o);     \
  }
TS_CMP_METHODS(eq, kEq)
TS_CMP_METHODS(ne, kNe)
TS_CMP_METHODS(lt, kLt)
TS_CMP_METHODS(le, kLe)
TS_CMP_METHODS(gt, kGt)
TS_CMP_METHODS(ge, kGe)
#undef TS_CMP_METHODS
#undef TS_BINARY_METHODS

Tensor Tensor::logical_and(const Tensor& o) const {
  return tessera::logical_and(*this, o);
}
Tensor Tensor::logical_or(const Tensor& o) const {
  return tessera::logical_or(*this, o);
}
Tensor Tensor::logical_xor(const Tensor& o) const {
  return tessera::logical_xor(*this, o);
}
Tensor Tensor::logical_not() const {
  return tessera::logical_not(*this);
}
Tensor Tensor::bitwise_and(const Tensor& o) const {
  return tessera::bitwise_and(*this, o);
}
Tensor Tensor::bitwise_or(const Tensor& o) const {
  return tessera::bitwise_or(*this, o);
}
Tensor Tensor::bitwise_xor(const Tensor& o) const {
  return tessera::bitwise_xor(*this, o);
}
Tensor Tensor::bitwise_not() const {
  return tessera::bitwise_not(*this);
}

Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return tessera::clamp(*this, min, max);
}
const Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) const {
  // clamp's derivative reads its input: when recording, clamp a copy, so that writing the
  // result back does not change what the derivative reads.
  const bool recording = autograd::any_requires_grad({this, 1});
  copy_(tessera::clamp(recording ? clone() : *this, min, max));
  return *this;
}
Tensor Tensor::abs() const {
  return tessera::abs(*this);
}
Tensor Tensor::neg() const {
  return tessera::neg(*this);
}
Tensor Tensor::sign() const {
  return tessera::sign(*this);
}
Tensor Tensor::exp() const {
  return tessera::exp(*this);
}
Tensor Tensor::expm1() const {
  return tessera::expm1(*this);
}
Tensor Tensor::log() const {
  return tessera::log(*this);
}
Tensor Tensor::log1p() const {
  return tessera::log1p(*this);
}
Tensor Tensor::log2() const {
  return tessera::log2(*this);
}
Tensor Tensor::sqrt() const {
  return tessera::sqrt(*this);
}
Tensor Tensor::rsqrt() const {
  return tessera::rsqrt(*this);
}
Tensor Tensor::sin() const {
  return tessera::sin(*this);
}
Tensor Tensor::cos() const {
  return tessera::cos(*this);
}
Tensor Tensor::tanh() const {
  return tessera::tanh(*this);
}
Tensor Tensor::sigmoid() const {
  return tessera::sigmoid(*this);
}
Tensor Tensor::erf() const {
  return tessera::erf(*this);
}
Tensor Tensor::relu() const {
  return tessera::relu(*this);
}
Tensor Tensor::conj() const {
  return tessera::conj(*this);
}
Tensor Tensor::angle() const {
  return tessera::angle(*this);
}
const Tensor& Tensor::relu_() const {
  run_unary({"relu_", UnaryOp::Relu}, *this, *this);
  return *this;
}
const Tensor& Tensor::neg_() const {
  run_unary({"neg_", UnaryOp::Neg}, *this, *this);
  return *this;
}
const Tensor& Tensor::exp_() const {
  run_unary({"exp_", UnaryOp::Exp}, *this, *this);
  return *this;
}
Tensor Tensor::lerp(const Tensor& end, const Scalar& w) const {
  return tessera::lerp(*this, end, w);
}
Tensor Tensor::lerp(const Tensor& end, const Tensor& w) const {
  return tessera::lerp(*this, end, w);
}
Tensor Tensor::addcmul(const Tensor& t1, const Tensor& t2, const Scalar& v) const {
  return tessera::addcmul(*this, t1, t2, v);
}
Tensor Tensor::addcdiv(const Tensor& t1, const Tensor& t2, const Scalar& v) const {
  return tessera::addcdiv(*this, t1, t2, v);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return tessera::masked_fill(*this, mask, value);
}
const Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) const {
  TS_CHECK(mask.dtype() == kBool, TypeError,
           "masked_fill_(): argument 'mask' expected dtype bool, but got {}", mask.dtype());
  // where(mask, value, self) written back in place; mask broadcasts to self's shape.
  Tensor filled = where(mask, scalar_tensor(value, dtype()), *this);
  TS_CHECK(filled.sizes() == sizes(), RuntimeError,
           "masked_fill_(): mask of shape [{}] cannot be broadcast to self of shape [{}]",
           fmt::join(mask.sizes(), ", "), fmt::join(sizes(), ", "));
  copy_(filled);
  return *this;
}

// ---------------------------------------------------------------------------- operators

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator+(const Tensor& a, const Scalar& b) {
  return a.add(b);
}
Tensor operator-(const Tensor& a, const Scalar& b) {
  return a.sub(b);
}
Tensor operator*(const Tensor& a, const Scalar& b) {
  return a.mul(b);
}
Tensor operator/(const Tensor& a, const Scalar& b) {
  return a.div(b);
}
Tensor operator+(const Scalar& a, const Tensor& b) {
  return b.add(a);
}
Tensor operator-(const Scalar& a, const Tensor& b) {
  return run_binary(kSub, {}, a, b);
}
Tensor operator*(const Scalar& a, const Tensor& b) {
  return b.mul(a);
}
// scalar / tensor is reciprocal(tensor) * scalar, as PyTorch's __rtruediv__.
Tensor operator/(const Scalar& a, const Tensor& b) {
  return reciprocal(b).mul(a);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}
Tensor operator==(const Tensor& a, const Tensor& b) {
  return eq(a, b);
}
Tensor operator!=(const Tensor& a, const Tensor& b) {
  return ne(a, b);
}
Tensor operator<(const Tensor& a, const Tensor& b) {
  return lt(a, b);
}
Tensor operator<=(const Tensor& a, const Tensor& b) {
  return le(a, b);
}
Tensor operator>(const Tensor& a, const Tensor& b) {
  return gt(a, b);
}
Tensor operator>=(const Tensor& a, const Tensor& b) {
  return ge(a, b);
}
Tensor operator&(const Tensor& a, const Tensor& b) {
  return bitwise_and(a, b);
}
Tensor operator|(const Tensor& a, const Tensor& b) {
  return bitwise_or(a, b);
}
Tensor operator^(const Tensor& a, const Tensor& b) {
  return bitwise_xor(a, b);
}
Tensor operator~(const Tensor& a) {
  return bitwise_not(a);
}
const Tensor& operator+=(const Tensor& a, const Tensor& b) {
  return a.add_(b);
}
const Tensor& operator-=(const Tensor& a, const Tensor& b) {
  return a.sub_(b);
}
const Tensor& operator*=(const Tensor& a, const Tensor& b) {
  return a.mul_(b);
}
const Tensor& operator/=(const Tensor& a, const Tensor& b) {
  return a.div_(b);
}
const Tensor& operator+=(const Tensor& a, const Scalar& b) {
  return a.add_(b);
}
const Tensor& operator-=(const Tensor& a, const Scalar& b) {
  return a.sub_(b);
}
const Tensor& operator*=(const Tensor& a, const Scalar& b) {
  return a.mul_(b);
}
const Tensor& operator/=(const Tensor& a, const Scalar& b) {
  return a.div_(b);
}

}  // namespace tessera
