// Tensor's autograd methods (declared in tessera/core/tensor.h).
#include <fmt/format.h>

#include "core/autograd_meta.h"
#include "core/tensor_make.h"
#include "tessera/autograd/autograd.h"

namespace tessera {

using autograd::AutogradMeta;
using autograd::ensure_meta;
using autograd::meta_of;

bool Tensor::requires_grad() const {
  autograd::refresh_view_history(*this);
  const AutogradMeta* m = meta_of(*this);
  return (m && m->requires_grad) || autograd::is_no_grad_view_of_grad_base(*this);
}

const Tensor& Tensor::requires_grad_(bool requires_grad) const {
  AutogradMeta* m = meta_of(*this);
  if (!requires_grad) {
    TS_CHECK(!m || !m->grad_fn, RuntimeError,
             "requires_grad_(): you can only change requires_grad flags of leaf variables. If "
             "you want to use a computed variable in a subgraph that doesn't require "
             "differentiation use var_no_grad = var.detach().");
    if (m) m->requires_grad = false;
    return *this;
  }
  TS_CHECK(is_floating_point() || is_complex(), RuntimeError,
           "requires_grad_(): only Tensors of floating point and complex dtype can require "
           "gradients, but got {}",
           dtype());
  ensure_meta(*this).requires_grad = true;
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const AutogradMeta* m = meta_of(*this);
  return m ? m->grad : undefined;
}

Tensor& Tensor::mutable_grad() const {
  return ensure_meta(*this).grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  autograd::refresh_view_history(*this);
  const AutogradMeta* m = meta_of(*this);
  return m ? m->grad_fn : none;
}

bool Tensor::is_leaf() const {
  return grad_fn() == nullptr;
}

uint32_t Tensor::output_nr() const {
  autograd::refresh_view_history(*this);
  const AutogradMeta* m = meta_of(*this);
  return m ? m->output_nr : 0;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph || create_graph, create_graph);
}

Tensor Tensor::detach() const {
  Tensor out = make_view(*this, sizes().vec(), strides().vec(), storage_offset());
  // An alias, not a new view: in-place ops on it never touch this tensor's history.
  out.unsafe_impl().is_view = impl().is_view;
  out.unsafe_impl().view_base = nullptr;
  return out;
}

const Tensor& Tensor::detach_() const {
  TS_CHECK(!impl().is_view || !requires_grad(), RuntimeError,
           "detach_(): can't detach views in-place. Use detach() instead.");
  impl().autograd.reset();
  return *this;
}

const Tensor& Tensor::retain_grad() const {
  TS_CHECK(requires_grad(), RuntimeError,
           "retain_grad(): can't retain_grad on Tensor that has requires_grad=False");
  AutogradMeta& m = ensure_meta(*this);
  if (!m.grad_fn || m.retains_grad) return *this;  // a leaf keeps its grad anyway
  m.retains_grad = true;
  std::weak_ptr<AutogradMeta> weak = impl().autograd;
  m.grad_fn->pre_hooks().emplace_back(m.output_nr, [weak](const Tensor& g) {
    if (auto meta = weak.lock()) {
      if (!meta->grad.defined()) {
        meta->grad = g.detach().clone();
      } else {
        meta->grad = meta->grad.add(g.detach());
      }
    }
    return Tensor();
  });
  return *this;
}

bool Tensor::retains_grad() const {
  const AutogradMeta* m = meta_of(*this);
  return m && m->retains_grad;
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  TS_CHECK(requires_grad(), RuntimeError,
           "register_hook(): cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = ensure_meta(*this);
  if (m.grad_fn) {
    m.grad_fn->pre_hooks().emplace_back(m.output_nr, std::move(hook));
  } else {
    m.hooks.push_back(std::move(hook));
  }
}

}  // namespace tessera
