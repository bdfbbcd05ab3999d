// The output of the addmm family (addmm, baddbmm, their low-precision forms): `self` must
// broadcast to the product's shape; when beta != 0 it is copied into the fresh output, which
// the GEMM then updates in place (C := alpha * A B + beta * C), so beta == 0 never reads self.
#pragma once

#include <fmt/format.h>

#include <string_view>

#include "core/tensor_make.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/pointwise.h"

namespace tessera {

inline void check_addmm_self(const Tensor& self, IntArrayRef shape, std::string_view op) {
  const DimVector out_shape = broadcast_shapes(self.sizes(), shape, op);
  TS_CHECK(out_shape == shape.vec(), RuntimeError,
           "{}(): argument 'self' expected a shape broadcastable to [{}], but got [{}]", op,
           fmt::join(shape, ", "), fmt::join(self.sizes(), ", "));
}

inline Tensor addmm_output(const Tensor& self, IntArrayRef shape, ScalarType dtype, double beta,
                           std::string_view op) {
  check_addmm_self(self, shape, op);
  Tensor out = make_empty(shape, dtype, op);
  if (beta != 0) out.copy_(self.expand(shape));
  return out;
}

}  // namespace tessera
