// The reduction kernels behind the public, differentiable sum/mean/amax/... (reduce.cpp); the
// public functions (reduce_grad.cpp) record their derivatives around them.
#pragma once

#include <optional>
#include <tuple>

#include "tessera/core/tensor.h"

namespace tessera {

Tensor sum_kernel(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype);
Tensor mean_kernel(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype);
Tensor amax_kernel(const Tensor& a, IntArrayRef dim, bool keepdim);
Tensor amin_kernel(const Tensor& a, IntArrayRef dim, bool keepdim);
Tensor max_all_kernel(const Tensor& a);  // Tensor::max(): every element
Tensor min_all_kernel(const Tensor& a);
std::tuple<Tensor, Tensor> max_kernel(const Tensor& a, int64_t dim, bool keepdim);
std::tuple<Tensor, Tensor> min_kernel(const Tensor& a, int64_t dim, bool keepdim);
Tensor var_kernel(const Tensor& a, IntArrayRef dim, double correction, bool keepdim);
Tensor std_kernel(const Tensor& a, IntArrayRef dim, double correction, bool keepdim);
Tensor norm_kernel(const Tensor& a, const Scalar& p, IntArrayRef dim, bool keepdim);
Tensor prod_kernel(const Tensor& a, std::optional<int64_t> dim, bool keepdim,
                   std::optional<ScalarType> dtype);
std::tuple<Tensor, Tensor> var_mean_kernel(const Tensor& a, IntArrayRef dim, double correction,
                                           bool keepdim);

// The gradient of a reduction that picks one element per line along `dim` (max/min/median
// along a dim; PyTorch's value_selecting_reduction_backward): g lands at `indices` in a zero
// tensor of `sizes`. g and indices have the result's shape (keepdim or not).
Tensor value_selecting_backward(const Tensor& g, const Tensor& indices, IntArrayRef sizes,
                                int64_t dim, bool keepdim);

// t with its elements in reverse order along `dim` (a copy; PyTorch's flip for one dim), for
// the derivatives of scans and products.
Tensor reverse_along(const Tensor& t, int64_t dim);

}  // namespace tessera
