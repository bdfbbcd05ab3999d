// Grad mode and the below-autograd flag: per-thread state consulted by every recording op and
// by the kernels' drivers (check_no_grad_needed).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/autograd/function.h"
#include "tessera/autograd/grad_mode.h"

namespace tessera::autograd {

namespace {
thread_local bool grad_enabled = true;
thread_local bool below_autograd = false;
}  // namespace

bool GradMode::is_enabled() {
  return grad_enabled;
}

void GradMode::set_enabled(bool enabled) {
  grad_enabled = enabled;
}

BelowAutogradGuard::BelowAutogradGuard(bool below) : prev_(below_autograd) {
  below_autograd = below;
}

BelowAutogradGuard::~BelowAutogradGuard() {
  below_autograd = prev_;
}

bool BelowAutogradGuard::active() {
  return below_autograd;
}

bool any_requires_grad(std::span<const Tensor> inputs) {
  if (!grad_enabled || below_autograd) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void check_no_grad_needed(std::span<const Tensor> inputs, std::string_view op) {
  if (!any_requires_grad(inputs)) return;
  TS_THROW(RuntimeError,
           "{}(): the derivative is not implemented: an input requires grad (compute it under "
           "tessera::autograd::NoGradGuard, or detach() the input, to use it without "
           "gradients)",
           op);
}

}  // namespace tessera::autograd
