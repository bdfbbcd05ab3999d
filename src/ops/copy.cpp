// copy_, to(), contiguous(), clone(), fill_(), zero_(), with their derivatives.
#include "autograd/record.h"
#include "core/iterator.h"
#include "core/tensor_make.h"
#include "ops/cpu/copy_kernels.h"
#include "tessera/core/tensor.h"

namespace tessera {

const Tensor& Tensor::copy_(const Tensor& src) const {
  TS_CHECK(src.defined(), RuntimeError, "copy_(): argument 'src' is an undefined tensor");
  if (is_same(src) || numel() == 0) return *this;
  autograd::Recorder rec({*this, src});
  if (rec) autograd::check_inplace(*this, true, "copy_");
  auto iter = TensorIteratorConfig("copy_")
                  .add_output(*this)
                  .add_input(src)
                  .promote_inputs_to_common_dtype(false)
                  .cast_common_dtype_to_outputs(false)
                  .build();
  TS_DISPATCH(copy_kernels).copy(iter);
  iter.cast_outputs();
  // The old values are overwritten (no gradient); src's gradient is the broadcast sum.
  if (rec)
    rec.finish(
        "CopyBackwards", {*this},
        [src_sizes = src.sizes().vec()](const autograd::tensor_list& g, const autograd::Node&) {
          return autograd::tensor_list{Tensor(), autograd::sum_to(g[0], src_sizes)};
        });
  return *this;
}

Tensor Tensor::fill_(const Scalar& value) const {
  if (numel() == 0) return *this;
  autograd::Recorder rec({*this});
  if (rec) autograd::check_inplace(*this, true, "fill_");
  auto iter = TensorIteratorConfig("fill_")
                  .add_output(*this)
                  .promote_inputs_to_common_dtype(false)
                  .cast_common_dtype_to_outputs(false)
                  .build();
  TS_DISPATCH(copy_kernels).fill(iter, value);
  iter.cast_outputs();
  if (rec)
    rec.finish("FillBackward0", {*this}, [](const autograd::tensor_list&, const autograd::Node&) {
      return autograd::tensor_list{Tensor()};
    });
  return *this;
}

Tensor Tensor::zero_() const {
  return fill_(0);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

namespace {

// A copy of `self` into a new tensor of dtype t; its gradient is the incoming one (the engine
// casts it back to self's dtype).
Tensor copy_as(const Tensor& self, ScalarType t, const char* op, const char* node) {
  autograd::Recorder rec({self});
  Tensor out = make_empty(self.sizes(), t, op);
  out.copy_(self);
  if (rec)
    rec.finish(node, {out}, [](const autograd::tensor_list& g, const autograd::Node&) {
      return autograd::tensor_list{g[0]};
    });
  return out;
}

}  // namespace

Tensor Tensor::clone() const {
  return copy_as(*this, dtype(), "clone", "CloneBackward0");
}

Tensor Tensor::to(ScalarType t, bool copy) const {
  if (t == dtype() && !copy) return *this;
  if (!tessera::is_floating_point(t) && !tessera::is_complex(t)) {
    // No gradient through a conversion to integers or bool: the result does not require it.
    autograd::BelowAutogradGuard below;
    return copy_as(*this, t, "to", "ToCopyBackward0");
  }
  return copy_as(*this, t, "to", "ToCopyBackward0");
}

}  // namespace tessera
