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

// The PyTorch grad_fn name of an op: "add" -> "AddBackward0".
std::string backward_name(std::string_view op);

}  // namespace tessera
