// ScalarType: the element types a Tensor can hold, their properties, and PyTorch's type
// promotion (`promote_types`, `can_cast`). Names match PyTorch's (`float32`, `bfloat16`, ...).
#pragma once

#include <complex>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

#include "tessera/core/half.h"

namespace tessera {

enum class ScalarType : int8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
  Float8_e4m3fn,
  Float8_e5m2,
  Float4_e2m1fn_x2,
  Undefined,
};
inline constexpr int kNumScalarTypes = static_cast<int>(ScalarType::Undefined);

using Dtype = ScalarType;
inline constexpr ScalarType kBool = ScalarType::Bool;
inline constexpr ScalarType kUInt8 = ScalarType::UInt8;
inline constexpr ScalarType kByte = ScalarType::UInt8;
inline constexpr ScalarType kInt8 = ScalarType::Int8;
inline constexpr ScalarType kChar = ScalarType::Int8;
inline constexpr ScalarType kInt16 = ScalarType::Int16;
inline constexpr ScalarType kShort = ScalarType::Int16;
inline constexpr ScalarType kInt32 = ScalarType::Int32;
inline constexpr ScalarType kInt = ScalarType::Int32;
inline constexpr ScalarType kInt64 = ScalarType::Int64;
inline constexpr ScalarType kLong = ScalarType::Int64;
inline constexpr ScalarType kFloat16 = ScalarType::Float16;
inline constexpr ScalarType kHalf = ScalarType::Float16;
inline constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
inline constexpr ScalarType kFloat32 = ScalarType::Float32;
inline constexpr ScalarType kFloat = ScalarType::Float32;
inline constexpr ScalarType kFloat64 = ScalarType::Float64;
inline constexpr ScalarType kDouble = ScalarType::Float64;
inline constexpr ScalarType kComplex64 = ScalarType::Complex64;
inline constexpr ScalarType kComplexFloat = ScalarType::Complex64;
inline constexpr ScalarType kComplex128 = ScalarType::Complex128;
inline constexpr ScalarType kComplexDouble = ScalarType::Complex128;
inline constexpr ScalarType kFloat8_e4m3fn = ScalarType::Float8_e4m3fn;
inline constexpr ScalarType kFloat8_e5m2 = ScalarType::Float8_e5m2;
inline constexpr ScalarType kFloat4_e2m1fn_x2 = ScalarType::Float4_e2m1fn_x2;

using complex64 = std::complex<float>;
using complex128 = std::complex<double>;

// Size in bytes of one element (one byte holds two float4 values: it counts as one element).
int64_t element_size(ScalarType t);
// PyTorch's name without the "torch." prefix: "float32", "complex64", "float8_e4m3fn".
std::string_view dtype_name(ScalarType t);
// Parses a name from dtype_name() (and PyTorch's aliases: "float", "half", "long", ...).
ScalarType dtype_from_name(std::string_view name);

constexpr bool is_complex(ScalarType t) {
  return t == ScalarType::Complex64 || t == ScalarType::Complex128;
}
constexpr bool is_float8(ScalarType t) {
  return t == ScalarType::Float8_e4m3fn || t == ScalarType::Float8_e5m2;
}
// float4 packs two values per byte and is a storage format only: GEMM reads it, no
// elementwise op computes on it.
constexpr bool is_packed(ScalarType t) {
  return t == ScalarType::Float4_e2m1fn_x2;
}
// Floating point in PyTorch's sense (real, not complex): float16/bfloat16/32/64 and float8.
constexpr bool is_floating_point(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 ||
         t == ScalarType::Float64 || is_float8(t);
}
constexpr bool is_integral(ScalarType t, bool include_bool) {
  return (include_bool && t == ScalarType::Bool) || t == ScalarType::UInt8 ||
         t == ScalarType::Int8 || t == ScalarType::Int16 || t == ScalarType::Int32 ||
         t == ScalarType::Int64;
}
constexpr bool is_signed(ScalarType t) {
  return t != ScalarType::Bool && t != ScalarType::UInt8 && t != ScalarType::Float4_e2m1fn_x2;
}
// Real type of a complex type (complex64 -> float32); other types map to themselves.
constexpr ScalarType to_real_type(ScalarType t) {
  return t == ScalarType::Complex64    ? ScalarType::Float32
         : t == ScalarType::Complex128 ? ScalarType::Float64
                                       : t;
}
// Complex type of a floating type (float64 -> complex128, float16/bfloat16/float32 ->
// complex64); complex types map to themselves.
ScalarType to_complex_type(ScalarType t);

// PyTorch's torch.promote_types. float8/float4 only promote with themselves (TypeError
// otherwise, as in PyTorch).
ScalarType promote_types(ScalarType a, ScalarType b);
// PyTorch's torch.can_cast: whether an op may write a result of type `from` into `to`.
bool can_cast(ScalarType from, ScalarType to);

// The default floating dtype for factories and for Python-style float scalars (float32).
ScalarType get_default_dtype();
void set_default_dtype(ScalarType t);

// C++ type <-> ScalarType.
template <class T>
struct CppTypeToScalarType;
#define TESSERA_MAP_TYPE(T, S)                         \
  template <>                                          \
  struct CppTypeToScalarType<T> {                      \
    static constexpr ScalarType value = ScalarType::S; \
  };
TESSERA_MAP_TYPE(bool, Bool)
TESSERA_MAP_TYPE(uint8_t, UInt8)
TESSERA_MAP_TYPE(int8_t, Int8)
TESSERA_MAP_TYPE(int16_t, Int16)
TESSERA_MAP_TYPE(int32_t, Int32)
TESSERA_MAP_TYPE(int64_t, Int64)
TESSERA_MAP_TYPE(Half, Float16)
TESSERA_MAP_TYPE(BFloat16, BFloat16)
TESSERA_MAP_TYPE(float, Float32)
TESSERA_MAP_TYPE(double, Float64)
TESSERA_MAP_TYPE(complex64, Complex64)
TESSERA_MAP_TYPE(complex128, Complex128)
TESSERA_MAP_TYPE(Float8_e4m3fn, Float8_e4m3fn)
TESSERA_MAP_TYPE(Float8_e5m2, Float8_e5m2)
TESSERA_MAP_TYPE(Float4_e2m1fn_x2, Float4_e2m1fn_x2)
#undef TESSERA_MAP_TYPE
template <class T>
inline constexpr ScalarType scalar_type_of = CppTypeToScalarType<T>::value;

}  // namespace tessera

template <>
struct fmt::formatter<tessera::ScalarType> : fmt::formatter<std::string_view> {
  auto format(tessera::ScalarType t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(tessera::dtype_name(t), ctx);
  }
};
