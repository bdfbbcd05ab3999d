// copy_, to(), contiguous(), clone(), fill_(), zero_().
#include "core/iterator.h"
#include "core/tensor_make.h"
#include "ops/cpu/copy_kernels.h"
#include "tessera/core/tensor.h"

namespace tessera {

const Tensor& Tensor::copy_(const Tensor& src) const {
  TS_CHECK(src.defined(), RuntimeError, "copy_(): argument 'src' is an undefined tensor");
  if (is_same(src) || numel() == 0) return *this;
  auto iter = TensorIteratorConfig("copy_")
                  .add_output(*this)
                  .add_input(src)
                  .promote_inputs_to_common_dtype(false)
                  .cast_common_dtype_to_outputs(false)
                  .build();
  TS_DISPATCH(copy_kernels).copy(iter);
  iter.cast_outputs();
  return *this;
}

Tensor Tensor::fill_(const Scalar& value) const {
  if (numel() == 0) return *this;
  auto iter = TensorIteratorConfig("fill_")
                  .add_output(*this)
                  .promote_inputs_to_common_dtype(false)
                  .cast_common_dtype_to_outputs(false)
                  .build();
  TS_DISPATCH(copy_kernels).fill(iter, value);
  iter.cast_outputs();
  return *this;
}

Tensor Tensor::zero_() const {
  return fill_(0);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = make_empty(sizes(), dtype(), "clone");
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(ScalarType t, bool copy) const {
  if (t == dtype() && !copy) return *this;
  Tensor out = make_empty(sizes(), t, "to");
  out.copy_(*this);
  return out;
}

}  // namespace tessera
