// convert<To>(from): the element conversion behind Tensor::to / copy_ and Scalar::to, defined
// for every pair of element types and free of undefined behaviour:
//   - complex -> real keeps the real part; real -> complex has imaginary part 0;
//   - anything -> bool is (x != 0);
//   - float -> integer truncates toward zero through int64 (as PyTorch does for uint8) and
//     wraps to the target width; NaN and values outside int64 give INT64_MIN before wrapping
//     (what x86's cvttsd2si produces, so results match PyTorch on x86 where it is defined);
//   - the 16/8-bit float types convert through float with round-to-nearest-even.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tessera/core/dtype.h"

namespace tessera {

template <class T>
struct is_complex_t : std::false_type {};
template <class T>
struct is_complex_t<std::complex<T>> : std::true_type {};

template <class T>
inline constexpr bool is_narrow_float_v =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Float8_e4m3fn> ||
    std::is_same_v<T, Float8_e5m2>;

namespace detail {

inline int64_t float_to_int64(double v) {
  // [-2^63, 2^63) is exactly representable at the ends; NaN fails both comparisons.
  if (v >= -9223372036854775808.0 && v < 9223372036854775808.0) return static_cast<int64_t>(v);
  return std::numeric_limits<int64_t>::min();
}

}  // namespace detail

template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_complex_t<From>::value) {
    if constexpr (is_complex_t<To>::value) {
      using R = typename To::value_type;
      return To(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    } else {
      return convert<To>(v.real());
    }
  } else if constexpr (is_narrow_float_v<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (is_complex_t<To>::value) {
    using R = typename To::value_type;
    return To(convert<R>(v), R(0));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (is_narrow_float_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return static_cast<To>(detail::float_to_int64(static_cast<double>(v)));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace tessera
