// Per-ISA kernels for the elementwise ops. The front end (src/ops/pointwise.cpp) validates
// dtypes and builds the TensorIterator; a kernel only loops. Inputs arrive in the common
// dtype; comparison and predicate outputs are bool.
#pragma once

#include <optional>

#include "core/dispatch.h"
#include "core/iterator.h"

namespace tessera::cpu {

enum class BinaryOp {
  Add,  // a + alpha * b
  Sub,  // a - alpha * b
  Mul,
  Div,
  DivTrunc,
  DivFloor,
  Remainder,
  Fmod,
  Pow,
  Maximum,
  Minimum,
  Atan2,
  BitAnd,
  BitOr,
  BitXor,
  Shl,
  Shr,
  LogicalAnd,
  LogicalOr,
  LogicalXor,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
};

enum class UnaryOp {
  Abs,
  Neg,
  Sign,
  Exp,
  Expm1,
  Log,
  Log1p,
  Log2,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Sigmoid,
  Erf,
  Relu,
  GeluErf,
  GeluTanh,
  Silu,
  Reciprocal,
  Square,
  Floor,
  Ceil,
  Round,
  Trunc,
  BitNot,
  LogicalNot,
  IsNan,
  IsInf,
  IsFinite,
  Angle,  // complex -> real output
  Conj,
  AbsComplex,  // complex -> real output
};

enum class TernaryOp {
  Where,    // cond (bool), a, b
  Lerp,     // start, end, weight
  Addcmul,  // self + value * t1 * t2
  Addcdiv,  // self + value * t1 / t2
  Polar,    // abs, angle -> complex output (inputs real)
  Complex,  // real, imag -> complex output
};

struct PointwiseKernels {
  void (*binary)(TensorIterator& iter, BinaryOp op, const Scalar& alpha);
  void (*unary)(TensorIterator& iter, UnaryOp op);
  void (*ternary)(TensorIterator& iter, TernaryOp op, const Scalar& value);
  // clamp(x, lo, hi) with optional bounds (NaN propagates).
  void (*clamp)(TensorIterator& iter, const std::optional<Scalar>& lo,
                const std::optional<Scalar>& hi);
  void (*softplus)(TensorIterator& iter, const Scalar& beta, const Scalar& threshold);
};

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(PointwiseKernels, pointwise_kernels)
