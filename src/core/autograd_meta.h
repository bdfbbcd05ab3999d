// What a tensor carries for autograd (TensorImpl::autograd, allocated on first need): the
// flag, the accumulated gradient, the node that made it, its leaf accumulator and hooks.
// Internal: the public face is Tensor's autograd methods and tessera/autograd/*.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::autograd {

struct AutogradMeta {
  bool requires_grad = false;  // leaves: set by the user; a grad_fn implies it
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // a leaf's AccumulateGrad, while a graph holds it
  bool retains_grad = false;
  std::vector<std::function<Tensor(const Tensor&)>> hooks;  // a leaf's hooks
};

// The tensor's metadata, or null when it never took part in autograd.
inline AutogradMeta* meta_of(const Tensor& t) {
  return t.defined() ? t.unsafe_impl().autograd.get() : nullptr;
}

inline AutogradMeta& ensure_meta(const Tensor& t) {
  auto& m = t.unsafe_impl().autograd;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}

}  // namespace tessera::autograd
