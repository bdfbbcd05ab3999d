// Elementwise ops with PyTorch's broadcasting and type promotion. Each also exists as a
// Tensor method (x.add(y)); the `_out` forms write into a given tensor, whose dtype must be
// one the result can be cast to (torch.can_cast) and whose shape must be the broadcast shape.
#pragma once

#include <optional>
#include <string_view>

#include "tessera/core/tensor.h"

namespace tessera {

// The dtype PyTorch's torch.result_type gives for these operands (0-dim tensors and scalars
// take part only by category).
ScalarType result_type(const Tensor& a, const Tensor& b);
ScalarType result_type(const Tensor& a, const Scalar& b);
// The broadcast shape of two shapes (RuntimeError naming `op` when incompatible).
DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b, std::string_view op = "broadcast_shapes");

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
// rounding_mode: none (true division), "trunc" or "floor".
Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string_view> rounding_mode = {});
Tensor remainder(const Tensor& a, const Tensor& b);  // sign of the divisor, as Python's %
Tensor fmod(const Tensor& a, const Tensor& b);       // sign of the dividend, as C's fmod
Tensor pow(const Tensor& base, const Tensor& exponent);
Tensor pow(const Tensor& base, const Scalar& exponent);
Tensor pow(const Scalar& base, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // NaN-propagating
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& a, const Tensor& b);

Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b);
Tensor& div_out(Tensor& out, const Tensor& a, const Tensor& b);

// Comparisons return bool tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor isnan(const Tensor& a);
Tensor isinf(const Tensor& a);
Tensor isfinite(const Tensor& a);
bool equal(const Tensor& a, const Tensor& b);  // same shape and same values
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);

Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor bitwise_and(const Tensor& a, const Tensor& b);  // integer and bool tensors only
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_not(const Tensor& a);
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);

// where(cond, a, b): a where cond is true, else b; broadcast over all three.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& condition, const Scalar& a, const Scalar& b);
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp(const Tensor& a, const std::optional<Tensor>& min, const std::optional<Tensor>& max);

Tensor abs(const Tensor& a);
Tensor neg(const Tensor& a);
Tensor sign(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor expm1(const Tensor& a);
Tensor log(const Tensor& a);
Tensor log1p(const Tensor& a);
Tensor log2(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor erf(const Tensor& a);
Tensor reciprocal(const Tensor& a);
Tensor square(const Tensor& a);
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a);  // half to even, as PyTorch
Tensor trunc(const Tensor& a);

// Activations.
Tensor relu(const Tensor& a);
// approximate: "none" (erf) or "tanh".
Tensor gelu(const Tensor& a, std::string_view approximate = "none");
Tensor silu(const Tensor& a);
Tensor softplus(const Tensor& a, const Scalar& beta = 1, const Scalar& threshold = 20);

// start + weight * (end - start).
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
// self + value * t1 * t2 and self + value * t1 / t2.
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);

// Complex.
Tensor real(const Tensor& a);  // view
Tensor imag(const Tensor& a);  // view
Tensor conj(const Tensor& a);  // materialised (Tessera has no lazy conjugate bit)
Tensor angle(const Tensor& a);
Tensor polar(const Tensor& abs, const Tensor& angle);
Tensor complex(const Tensor& real, const Tensor& imag);
Tensor view_as_real(const Tensor& a);     // [..] complex -> [.., 2] real, a view
Tensor view_as_complex(const Tensor& a);  // [.., 2] real -> [..] complex, a view

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value);

}  // namespace tessera
