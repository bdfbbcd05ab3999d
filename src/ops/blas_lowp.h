// bfloat16/float16 matrix products on the low-precision engine path (src/gemm/lowp.h):
// float32 accumulation, one rounding to the input dtype (PyTorch's semantics). Called by
// src/ops/blas.cpp for those dtypes.
#pragma once

#include <string_view>

#include "tessera/core/tensor.h"

namespace tessera {

// Whether mm/bmm/addmm of this dtype take the low-precision path.
bool is_lowp_mm_dtype(ScalarType t);

// [B, m, k] x [B, k, n] -> [B, m, n] in a's dtype (same dtype, shapes already checked).
Tensor bmm_lowp(const Tensor& a, const Tensor& b, std::string_view op);

// beta * self + alpha * (a @ b) for 2-D a, b of one low-precision dtype: one pass over the
// output, beta == 0 never reads self.
Tensor addmm_lowp(const Tensor& self, const Tensor& a, const Tensor& b, double beta, double alpha);

}  // namespace tessera
