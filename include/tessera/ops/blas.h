// Matrix products. For now these call OpenBLAS (single-threaded inside Tessera's pool); the
// GEMM engine replaces them.
#pragma once

#include "tessera/core/tensor.h"

namespace tessera {

Tensor mm(const Tensor& a, const Tensor& b);   // [n, k] x [k, m]
Tensor bmm(const Tensor& a, const Tensor& b);  // [b, n, k] x [b, k, m]
// beta * self + alpha * (a @ b)
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// torch.matmul: 1-d/2-d/batched with broadcasting of batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);

}  // namespace tessera
