// visit_dtype: calls a templated lambda with the C++ type of a runtime dtype.
//
//   visit_dtype<kAllTypes>(t.dtype(), "sum", [&]<class T>() { ... T ... });
//
// The mask lists the dtypes an op accepts; any other dtype is a TypeError naming the op.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/dtype.h"
#include "tessera/core/error.h"

namespace tessera {

using DtypeMask = uint32_t;
constexpr DtypeMask dtype_bit(ScalarType t) {
  return 1u << static_cast<int>(t);
}
inline constexpr DtypeMask kIntegralTypes = dtype_bit(kUInt8) | dtype_bit(kInt8) |
                                            dtype_bit(kInt16) | dtype_bit(kInt32) |
                                            dtype_bit(kInt64);
inline constexpr DtypeMask kFloatingTypes =
    dtype_bit(kFloat16) | dtype_bit(kBFloat16) | dtype_bit(kFloat32) | dtype_bit(kFloat64);
inline constexpr DtypeMask kComplexTypes = dtype_bit(kComplex64) | dtype_bit(kComplex128);
inline constexpr DtypeMask kFloat8Types = dtype_bit(kFloat8_e4m3fn) | dtype_bit(kFloat8_e5m2);
// Types elementwise arithmetic computes on.
inline constexpr DtypeMask kNumericTypes = kIntegralTypes | kFloatingTypes | kComplexTypes;
inline constexpr DtypeMask kRealTypes = kIntegralTypes | kFloatingTypes;
// Every type an element can be read and written as (float4 is a packed storage format).
inline constexpr DtypeMask kAllTypes = dtype_bit(kBool) | kNumericTypes | kFloat8Types;

std::string dtype_mask_names(DtypeMask mask);

#define TS_VISIT_CASE(ST, T)                        \
  case ST:                                          \
    if constexpr ((Allowed & dtype_bit(ST)) != 0) { \
      return f.template operator()<T>();            \
    }                                               \
    break;

// Allowed is a compile-time mask, so the lambda is only instantiated for accepted types.
template <DtypeMask Allowed, class F>
decltype(auto) visit_dtype(ScalarType t, std::string_view op, F&& f) {
  switch (t) {
    TS_VISIT_CASE(kBool, bool)
    TS_VISIT_CASE(kUInt8, uint8_t)
    TS_VISIT_CASE(kInt8, int8_t)
    TS_VISIT_CASE(kInt16, int16_t)
    TS_VISIT_CASE(kInt32, int32_t)
    TS_VISIT_CASE(kInt64, int64_t)
    TS_VISIT_CASE(kFloat16, Half)
    TS_VISIT_CASE(kBFloat16, BFloat16)
    TS_VISIT_CASE(kFloat32, float)
    TS_VISIT_CASE(kFloat64, double)
    TS_VISIT_CASE(kComplex64, complex64)
    TS_VISIT_CASE(kComplex128, complex128)
    TS_VISIT_CASE(kFloat8_e4m3fn, Float8_e4m3fn)
    TS_VISIT_CASE(kFloat8_e5m2, Float8_e5m2)
    TS_VISIT_CASE(kFloat4_e2m1fn_x2, Float4_e2m1fn_x2)
    default:
      break;
  }
  TS_THROW(TypeError, "{}(): expected a tensor of dtype {}, but got {}", op,
           dtype_mask_names(Allowed), t);
}
#undef TS_VISIT_CASE

}  // namespace tessera
