#include "autograd/record.h"

#include "core/autograd_meta.h"
#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/reduce.h"

namespace tessera::autograd {

void Recorder::finish(std::string name, const std::vector<Tensor>& outputs,
                      FunctionNode::Backward backward) {
  TS_INTERNAL_ASSERT(active_);
  auto node = std::make_shared<FunctionNode>(std::move(name), std::move(backward));
  set_history(node, inputs_, outputs);
}

Tensor sum_to(const Tensor& g, IntArrayRef shape) {
  if (g.sizes() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  DimVector dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
  }
  Tensor r = dims.empty() ? g : g.sum(dims, /*keepdim=*/true);
  return r.reshape(shape);
}

void check_inplace(const Tensor& self, bool recording, std::string_view op) {
  if (!GradMode::is_enabled()) return;
  const AutogradMeta* m = meta_of(self);
  TS_CHECK(!(m && m->requires_grad && !m->grad_fn), RuntimeError,
           "{}(): a leaf Variable that requires grad is being used in an in-place operation.", op);
  if (recording) check_inplace_on_view(self, op);
}

}  // namespace tessera::autograd
