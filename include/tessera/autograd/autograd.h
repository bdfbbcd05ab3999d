// Reverse-mode automatic differentiation, as torch.autograd: backward() accumulates into the
// leaves' grad(), grad() returns gradients without touching them, gradcheck() compares a
// function's analytic gradients with central finite differences in float64.
//
// The graph is recorded as operations run on tensors that require grad (in grad mode, see
// grad_mode.h), one Node per operation (function.h). A backward without retain_graph frees
// the saved tensors, so a second backward through the same graph raises PyTorch's error.
// Saved tensors modified in place in between raise PyTorch's "modified by an inplace
// operation" error instead of producing a wrong gradient.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "tessera/autograd/function.h"
#include "tessera/autograd/grad_mode.h"
#include "tessera/core/tensor.h"

namespace tessera::autograd {

// torch.autograd.backward: gradients of `tensors` (seeded with `grad_tensors`, or 1 for
// one-element tensors) accumulated into every leaf that requires grad. create_graph records
// the backward itself, so the gradients can be differentiated again.
void backward(const tensor_list& tensors, const tensor_list& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

// torch.autograd.grad: d(outputs)/d(inputs), seeded with grad_outputs (or 1). .grad fields
// are not touched. An input the outputs do not depend on is an error unless allow_unused
// (then its gradient is undefined).
tensor_list grad(const tensor_list& outputs, const tensor_list& inputs,
                 const tensor_list& grad_outputs = {},
                 std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                 bool allow_unused = false);

struct GradcheckOptions {
  double eps = 1e-6;   // finite-difference step
  double atol = 1e-5;  // |analytic - numerical| <= atol + rtol * |numerical|
  double rtol = 1e-3;
};

// torch.autograd.gradcheck: for every input that requires grad (float64, as PyTorch
// recommends), compares the Jacobian from backward with central differences of `fn`, whose
// outputs are reduced with fixed random weights. Returns true, or throws a RuntimeError naming
// the input, the element and both values.
bool gradcheck(const std::function<tensor_list(const tensor_list&)>& fn, const tensor_list& inputs,
               const GradcheckOptions& options = {});

}  // namespace tessera::autograd
