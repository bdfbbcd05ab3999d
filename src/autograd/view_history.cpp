// In-place ops on views, as PyTorch's CopySlices.
//
// A view shares its base's storage and version counter; its history is derived from the
// base's (SelectBackward0 -> base's grad_fn, ...). An in-place op on the view changes the
// base's values too, so the op's node cannot simply become the view's grad_fn:
//
//   x = leaf.clone();  v = x[0];  v.mul_(2);        // x's values changed through v
//
// Instead (rebase_view_history) the base's grad_fn becomes a CopySlices node that wraps the
// op's node `fn`. Its backward takes the gradient of the whole base and
//   - leaves it unchanged outside the view's elements (they were not written),
//   - replaces it inside them by fn's gradient for its first input (the view's old values),
// and passes fn's gradients for its other inputs (the `2`, a `y` in v.add_(y)) straight on.
// Its next edges are the base's old history, then fn's edges for those other inputs.
//
// The view, and any other view of the same base, then re-derives its history from the base
// (refresh_view_history): as base.as_strided(view geometry), i.e. AsStridedBackward0 over
// the CopySlices node. This happens lazily, when a view's history is next read and the
// shared version counter moved since it was derived.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/autograd_meta.h"
#include "core/tensor_make.h"
#include "tessera/autograd/function.h"
#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"

namespace tessera::autograd {

namespace {

// Where a tensor's elements lie in the storage, in bytes from its start.
struct ByteGeometry {
  DimVector sizes, strides;
  int64_t offset = 0;  // in elements of `dtype`
  ScalarType dtype = ScalarType::Float32;

  explicit ByteGeometry(const Tensor& t)
      : sizes(t.sizes().vec()),
        strides(t.strides().vec()),
        offset(t.storage_offset()),
        dtype(t.dtype()) {}
  int64_t first_byte() const { return offset * element_size(dtype); }
  int64_t end_byte() const {
    return (offset + storage_extent(sizes, strides)) * element_size(dtype);
  }
};

// Whether a view of dtype `view` over a base of dtype `base` can be replayed: the same dtype,
// or view_as_real / view_as_complex (the only dtype-changing views that carry gradients).
bool replayable(ScalarType base, ScalarType view) {
  return base == view || (is_complex(base) && to_real_type(base) == view) ||
         (!is_complex(base) && is_floating_point(base) && to_complex_type(base) == view);
}

// `t` reinterpreted in dtype `dtype` (replayable).
Tensor in_dtype(const Tensor& t, ScalarType dtype) {
  if (t.dtype() == dtype) return t;
  return t.is_complex() ? view_as_real(t) : view_as_complex(t);
}

// The region of `t` that `view` covers in a tensor laid out like `t` whose own geometry is
// `origin` (the view's base itself, or a gradient buffer with the base's strides).
Tensor region_of(const Tensor& t, const ByteGeometry& origin, const ByteGeometry& view) {
  const Tensor b = in_dtype(t, view.dtype);
  const int64_t rel_bytes = view.first_byte() - origin.first_byte();
  return b.as_strided(view.sizes, view.strides,
                      b.storage_offset() + rel_bytes / element_size(view.dtype));
}

class CopySlices : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<Node> fn)
      : Node("CopySlices"), base_(base), view_(view), fn_(std::move(fn)) {
    TS_CHECK(view_.first_byte() >= base_.first_byte() && view_.end_byte() <= base_.end_byte(),
             RuntimeError,
             "{}(): in-place operation on a view whose elements reach outside its base's "
             "(view: sizes [{}], strides [{}], offset {}; base: sizes [{}], strides [{}], offset "
             "{}): rewriting the base's history is not implemented for it",
             fn_->name(), fmt::join(view_.sizes, ", "), fmt::join(view_.strides, ", "),
             view_.offset, fmt::join(base_.sizes, ", "), fmt::join(base_.strides, ", "),
             base_.offset);
    add_input(base);  // the base's history before the write
    const auto& edges = fn_->next_edges();
    for (size_t i = 1; i < edges.size(); ++i) add_next_edge(edges[i], fn_->input_geometry()[i]);
    add_output(base);
  }

  tensor_list apply(tensor_list&& grads) override {
    TS_CHECK(fn_ != nullptr, RuntimeError,
             "Trying to backward through the graph a second time: CopySlices released its saved "
             "state after the first backward. Specify retain_graph=true on the first backward.");
    // The base's gradient in the base's layout, so the view's strides address it.
    const Tensor& g = grads.at(0);
    Tensor result = empty_strided(base_.sizes, base_.strides, TensorOptions(g.dtype()));
    result.copy_(g);
    const Tensor region = region_of(result, base_, view_);
    tensor_list fn_grads = fn_->apply(tensor_list{region.clone()});
    TS_CHECK(fn_grads.size() == fn_->next_edges().size(), RuntimeError,
             "Function {} returned {} gradients, but it has {} inputs", fn_->name(),
             fn_grads.size(), fn_->next_edges().size());
    if (fn_grads[0].defined()) {
      region.copy_(fn_grads[0]);
    } else {
      region.zero_();
    }
    tensor_list out{result};
    for (size_t i = 1; i < fn_grads.size(); ++i) out.push_back(std::move(fn_grads[i]));
    return out;
  }

  void release_variables() override {
    if (fn_) fn_->release_variables();
  }

 private:
  ByteGeometry base_, view_;
  std::shared_ptr<Node> fn_;
};

// The view's history, re-derived from its base's current one.
void rederive(const Tensor& view) {
  TensorImpl& impl = view.unsafe_impl();
  const Tensor base(impl.view_base);
  Tensor replay;
  {
    AutoGradMode grad_on(true);
    BelowAutogradGuard record(false);
    replay = region_of(base, ByteGeometry(base), ByteGeometry(view));
  }
  AutogradMeta& m = ensure_meta(view);
  m.grad_fn = meta_of(replay)->grad_fn;
  m.output_nr = 0;
  m.requires_grad = true;
  m.grad_accumulator.reset();
  impl.view_version = view._version();
}

const AutogradMeta* base_meta(const Tensor& view) {
  return view.unsafe_impl().view_base->autograd.get();
}

}  // namespace

void refresh_view_history(const Tensor& t) {
  if (!t.defined()) return;
  const TensorImpl& impl = t.unsafe_impl();
  if (!impl.view_base || impl.view_made_in_no_grad || impl.view_version == impl.version->version)
    return;
  const AutogradMeta* bm = base_meta(t);
  if (bm && bm->requires_grad) rederive(t);
}

bool is_no_grad_view_of_grad_base(const Tensor& t) {
  const TensorImpl& impl = t.unsafe_impl();
  if (!impl.view_base || !impl.view_made_in_no_grad) return false;
  const AutogradMeta* bm = base_meta(t);
  return bm && bm->requires_grad;
}

bool is_inplace_on_view(const Tensor& out, std::span<const Tensor> inputs) {
  if (!out.unsafe_impl().view_base) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].is_same(out)) continue;
    TS_INTERNAL_ASSERT(i == 0);  // CopySlices replaces the gradient of fn's first input
    return true;
  }
  return false;
}

void rebase_view_history(const std::shared_ptr<Node>& fn, const Tensor& view) {
  TS_INTERNAL_ASSERT(!fn->next_edges().empty());
  const Tensor base(view.unsafe_impl().view_base);
  auto copy_slices = std::make_shared<CopySlices>(base, view, fn);
  AutogradMeta& m = ensure_meta(base);
  m.requires_grad = true;
  m.grad_fn = std::move(copy_slices);
  m.output_nr = 0;
  m.grad_accumulator.reset();
  rederive(view);
}

void check_inplace_on_view(const Tensor& self, std::string_view op) {
  const TensorImpl& impl = self.unsafe_impl();
  if (!impl.view_base) return;
  TS_CHECK(!impl.view_made_in_no_grad, RuntimeError,
           "{}(): A view was created in no_grad mode and is being modified inplace with grad "
           "mode enabled. Given that this use case is ambiguous and error-prone, it is "
           "forbidden. You can clarify your code by moving both the view and the inplace either "
           "both inside the no_grad block (if you don't want the inplace to be tracked) or both "
           "outside (if you want the inplace to be tracked).",
           op);
  const AutogradMeta* bm = base_meta(self);
  TS_CHECK(!(bm && bm->requires_grad && !bm->grad_fn), RuntimeError,
           "{}(): a view of a leaf Variable that requires grad is being used in an in-place "
           "operation.",
           op);
  TS_CHECK(replayable(impl.view_base->dtype, self.dtype()), RuntimeError,
           "{}(): in-place operation on a {} view of a {} tensor: rewriting the base's history "
           "through a view of another dtype is not implemented (only view_as_real / "
           "view_as_complex views are)",
           op, self.dtype(), impl.view_base->dtype);
}

}  // namespace tessera::autograd
