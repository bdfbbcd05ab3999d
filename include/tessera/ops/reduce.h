// Reductions. `dim` lists the dimensions to reduce (empty: all); keepdim keeps them as size 1.
// float16/bfloat16 accumulate in float32; float32 sums are cascaded so the error does not grow
// with n; results are the same for every thread count.
#pragma once

#include <optional>
#include <tuple>

#include "tessera/core/tensor.h"

namespace tessera {

Tensor sum(const Tensor& a, IntArrayRef dim = {}, bool keepdim = false,
           std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& a, IntArrayRef dim = {}, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);
Tensor prod(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);
Tensor amax(const Tensor& a, IntArrayRef dim = {}, bool keepdim = false);
Tensor amin(const Tensor& a, IntArrayRef dim = {}, bool keepdim = false);
// (values, indices); index of the first occurrence; NaN counts as the maximum and minimum.
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Welford; correction = 1 is the unbiased estimator, 0 the population variance.
Tensor var(const Tensor& a, IntArrayRef dim = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& a, IntArrayRef dim = {}, double correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& a, IntArrayRef dim = {}, double correction = 1,
                                    bool keepdim = false);
// p: 0 (count of non-zeros), 1, 2, inf, -inf, "fro" (use 2), or any real p.
Tensor norm(const Tensor& a, const Scalar& p = 2, IntArrayRef dim = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& a, IntArrayRef dim, bool keepdim = false);
Tensor softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor cumsum(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor cumprod(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor all(const Tensor& a, IntArrayRef dim = {}, bool keepdim = false);
Tensor any(const Tensor& a, IntArrayRef dim = {}, bool keepdim = false);
Tensor count_nonzero(const Tensor& a, IntArrayRef dim = {});
// Lower median (the smaller of the two middle values for even counts), as PyTorch.
Tensor median(const Tensor& a);
std::tuple<Tensor, Tensor> median(const Tensor& a, int64_t dim, bool keepdim = false);

}  // namespace tessera
