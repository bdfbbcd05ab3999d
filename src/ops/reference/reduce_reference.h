// Plain reference reductions: every element is read into long double (complex<long double>)
// in logical row-major order, each output is computed from the list of its inputs with
// textbook formulas, and the result is converted to the result dtype. Slow and obviously
// correct: the fast kernels are tested against these, and complex inputs run on them.
#pragma once

#include <optional>
#include <tuple>

#include "tessera/core/tensor.h"

namespace tessera::reference {

Tensor sum(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype);
Tensor mean(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype);
Tensor prod(const Tensor& a, std::optional<int64_t> dim, bool keepdim,
            std::optional<ScalarType> dtype);
Tensor amax(const Tensor& a, IntArrayRef dim, bool keepdim);
Tensor amin(const Tensor& a, IntArrayRef dim, bool keepdim);
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim);
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim);
Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim);
// (var or std, mean).
std::tuple<Tensor, Tensor> var_mean(const Tensor& a, IntArrayRef dim, double correction,
                                    bool keepdim, bool take_sqrt = false);
Tensor norm(const Tensor& a, const Scalar& p, IntArrayRef dim, bool keepdim);
Tensor logsumexp(const Tensor& a, IntArrayRef dim, bool keepdim);
Tensor softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor cumsum(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor cumprod(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor all(const Tensor& a, IntArrayRef dim, bool keepdim);
Tensor any(const Tensor& a, IntArrayRef dim, bool keepdim);
Tensor count_nonzero(const Tensor& a, IntArrayRef dim);
Tensor median(const Tensor& a);
std::tuple<Tensor, Tensor> median(const Tensor& a, int64_t dim, bool keepdim);

}  // namespace tessera::reference
