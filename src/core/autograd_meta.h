// What a tensor carries for autograd (TensorImpl::autograd, allocated on first need): the
// flag, the accumulated gradient, the node that made it, its leaf accumulator and hooks.
// Internal: the public face is Tensor's autograd methods and tessera/autograd/*.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
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

// In-place ops on views (src/autograd/view_history.cpp).
//
// When the shared version counter of a view moved since the view's history was derived from
// its base's and the base requires grad, re-derives it: the view becomes base.as_strided(its
// geometry) over the base's current history (PyTorch's lazily regenerated AsStridedBackward0).
// Called wherever a tensor's history is read (gradient_edge, requires_grad, grad_fn, and the
// recording check of every op).
void refresh_view_history(const Tensor& t);

// A view made in no_grad mode of a base that requires grad. PyTorch counts it as requiring
// grad (its history is never derived), so that recording an in-place op on it raises the
// no_grad-view error instead of silently leaving the base's history alone.
bool is_no_grad_view_of_grad_base(const Tensor& t);

// Whether the in-place op that produced `out` (one of its `inputs`, the first) wrote through
// a view whose base's history must then be rewritten (rebase_view_history) instead of the
// view's own.
bool is_inplace_on_view(const Tensor& out, std::span<const Tensor> inputs);

// The base of `view` takes a CopySlices node as its grad_fn: its gradient passes through
// unchanged outside the view's elements, and through `fn` (the in-place op's node, whose
// first input was the view) inside them. The view's history is then re-derived from the base.
void rebase_view_history(const std::shared_ptr<Node>& fn, const Tensor& view);

// Rejects, with PyTorch's messages, a recorded in-place op on a view that autograd cannot
// rebase: a view made in no_grad mode, a view of a leaf that requires grad, a view whose
// dtype differs from its base's other than by view_as_real / view_as_complex.
void check_inplace_on_view(const Tensor& self, std::string_view op);

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
