// Derivatives of the pointwise ops (PyTorch's derivatives.yaml entries for them), recorded by
// run_unary / run_binary in pointwise.cpp when an input requires grad.
#pragma once

#include <string_view>

#include "autograd/record.h"
#include "ops/cpu/pointwise_kernels.h"
#include "tessera/core/tensor.h"

namespace tessera {

// Whether the op has a gradient at all (comparisons, logical and bitwise ops do not: their
// results never require grad).
bool binary_is_differentiable(cpu::BinaryOp op);
bool unary_is_differentiable(cpu::UnaryOp op);

// out = op(a, b) (a or b null: a Scalar operand, given in sa/sb). `a_before`/`b_before` are
// the operands' values before an in-place op overwrote them (else the operands themselves).
void record_binary(autograd::Recorder& rec, cpu::BinaryOp op, std::string_view name,
                   const Tensor& out, const Tensor* a, const Tensor* a_before, const Tensor* b,
                   const Tensor* b_before, const Scalar* sa, const Scalar* sb, const Scalar& alpha);
void record_unary(autograd::Recorder& rec, cpu::UnaryOp op, std::string_view name,
                  const Tensor& out, const Tensor& a_before);

// A unary op's derivative: grad_input from the output gradient g, the saved input a and the
// saved output o (each unpacked only if the formula needs it, so an in-place change to the
// other never fails the version check). Null for ops without one.
using UnaryDerivative = Tensor (*)(const Tensor& g, const autograd::SavedTensor& a,
                                   const autograd::SavedTensor& o, const autograd::Node& n);
UnaryDerivative unary_derivative(cpu::UnaryOp op);

// lerp(start, end, weight): `weight` null means the Scalar `w` (LerpBackward0), else the
// tensor weight (LerpBackward1, which also differentiates the weight).
void record_lerp(autograd::Recorder& rec, const Tensor& out, const Tensor& start, const Tensor& end,
                 const Tensor* weight, const Scalar& w);
// addcmul (div false) / addcdiv (div true): out = self + value * t1 * t2 (or t1 / t2).
void record_addc(autograd::Recorder& rec, bool div, const Tensor& out, const Tensor& self,
                 const Tensor& t1, const Tensor& t2, const Scalar& value);
// softplus(a) = log(1 + exp(beta a)) / beta, and a itself where beta a > threshold.
void record_softplus(autograd::Recorder& rec, const Tensor& out, const Tensor& a,
                     const Scalar& beta, const Scalar& threshold);

// The PyTorch grad_fn name of an op: "add" -> "AddBackward0".
std::string backward_name(std::string_view op);

}  // namespace tessera
