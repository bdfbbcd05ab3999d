// The narrow floating-point element types: float16, bfloat16, float8 (e4m3fn, e5m2) and the
// packed float4 e2m1 pair. Each is a trivially copyable wrapper around its bits with exact
// conversions to and from float:
//   - float -> narrow rounds to nearest, ties to even, as PyTorch does;
//   - float16/bfloat16/e5m2 overflow to +-inf, NaN stays NaN (quiet);
//   - float8_e4m3fn has no infinity: magnitudes up to 464 round to at most 448 (the largest
//     finite value); above that, inf included, the code is 0x7f, which is NaN: exactly the
//     bits PyTorch's conversion produces (clamp first to saturate);
//   - float4_e2m1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6) has no inf or NaN: it saturates to +-6
//     and NaN maps to +0 (quantisers scale first, so NaN input is the caller's bug).
// Arithmetic on these types happens in float; kernels convert once and accumulate in float.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace tessera {

namespace detail {

constexpr uint32_t f32_bits(float f) {
  return std::bit_cast<uint32_t>(f);
}
constexpr float f32_from(uint32_t b) {
  return std::bit_cast<float>(b);
}

// Rounds the float `x` (bits) to a narrower float with `mant` mantissa bits and exponent bias
// `bias` (normal range only, caller handles specials). Returns the magnitude bits of the
// narrow format, possibly overflowing into the exponent field (which is the correct carry).
constexpr uint32_t round_normal(uint32_t abs_bits, int mant, int bias) {
  const int shift = 23 - mant;
  const uint32_t odd = (abs_bits >> shift) & 1u;
  const uint32_t rebias = static_cast<uint32_t>(127 - bias) << 23;
  return (abs_bits - rebias + ((1u << (shift - 1)) - 1u) + odd) >> shift;
}

// Subnormal encoding: round(|x| / 2^min_sub) with ties to even, where x is below the smallest
// normal. Exact integer arithmetic on the float's significand.
constexpr uint32_t round_subnormal(uint32_t abs_bits, int min_sub_exp) {
  const int e = static_cast<int>(abs_bits >> 23);
  if (e == 0) return 0;  // float subnormals are far below every narrow format's range
  const uint32_t m = (abs_bits & 0x7fffffu) | 0x800000u;  // value = m * 2^(e-150)
  const int shift = min_sub_exp + 150 - e;                // q = m >> shift
  if (shift >= 25) return 0;                              // below half of the smallest step
  if (shift <= 0) return m << (-shift);
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

constexpr uint16_t f32_to_f16_bits(float f) {
  const uint32_t b = f32_bits(f);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a >= 0x38800000u) return static_cast<uint16_t>(sign | round_normal(a, 10, 15));
  return static_cast<uint16_t>(sign | round_subnormal(a, -24));
}

constexpr float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return f32_from(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float v = static_cast<float>(m) * 0x1p-24f;
    return f32_from(sign | f32_bits(v));
  }
  return f32_from(sign | ((e + 112u) << 23) | (m << 13));
}

constexpr uint16_t f32_to_bf16_bits(float f) {
  const uint32_t b = f32_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;  // NaN, as PyTorch
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

constexpr float bf16_bits_to_f32(uint16_t h) {
  return f32_from(static_cast<uint32_t>(h) << 16);
}

constexpr uint8_t f32_to_e4m3fn_bits(float f) {
  const uint32_t b = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((b >> 24) & 0x80u);
  const uint32_t a = b & 0x7fffffffu;
  if (a >= 0x43f00000u) return sign | 0x7fu;  // >= 480, inf and NaN: NaN
  if (a >= 0x3c800000u) return sign | static_cast<uint8_t>(round_normal(a, 3, 7));  // >= 2^-6
  return sign | static_cast<uint8_t>(round_subnormal(a, -9));
}

constexpr float e4m3fn_bits_to_f32(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t e = (v >> 3) & 0xfu;
  const uint32_t m = v & 0x7u;
  if (e == 0xf && m == 0x7) return f32_from(sign | 0x7fc00000u);
  if (e == 0) return f32_from(sign | f32_bits(static_cast<float>(m) * 0x1p-9f));
  return f32_from(sign | ((e + 120u) << 23) | (m << 20));
}

constexpr uint8_t f32_to_e5m2_bits(float f) {
  const uint32_t b = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((b >> 24) & 0x80u);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;                                          // NaN
  if (a >= 0x47700000u) return sign | 0x7cu;                                         // inf
  if (a >= 0x38800000u) return sign | static_cast<uint8_t>(round_normal(a, 2, 15));  // >= 2^-14
  return sign | static_cast<uint8_t>(round_subnormal(a, -16));
}

constexpr float e5m2_bits_to_f32(uint8_t v) {
  return f16_bits_to_f32(static_cast<uint16_t>(static_cast<uint16_t>(v) << 8));
}

// float4 e2m1: s ee m, bias 1. Codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6.
constexpr uint8_t f32_to_e2m1_bits(float f) {
  const uint32_t b = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((b >> 28) & 0x8u);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return 0;             // NaN -> +0
  if (a >= 0x40c00000u) return sign | 0x7u;  // >= 6 saturates
  if (a >= 0x3f800000u) return sign | static_cast<uint8_t>(round_normal(a, 1, 1));  // >= 1
  return sign | static_cast<uint8_t>(round_subnormal(a, -1));
}

constexpr float e2m1_bits_to_f32(uint8_t v) {
  constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float mag = kValues[v & 0x7u];
  return (v & 0x8u) ? -mag : mag;
}

}  // namespace detail

struct from_bits_t {};
inline constexpr from_bits_t from_bits{};

// Shared shape of the narrow float types: storage bits plus conversion through float.
#define TESSERA_NARROW_FLOAT(Name, Bits, to_bits, to_f32)                       \
  struct Name {                                                                 \
    Bits x;                                                                     \
    Name() = default;                                                           \
    constexpr Name(from_bits_t, Bits b) : x(b) {}                               \
    constexpr Name(float f) : x(detail::to_bits(f)) {}             /* NOLINT */ \
    constexpr Name(double d) : Name(static_cast<float>(d)) {}      /* NOLINT */ \
    constexpr operator float() const { return detail::to_f32(x); } /* NOLINT */ \
  };

TESSERA_NARROW_FLOAT(Half, uint16_t, f32_to_f16_bits, f16_bits_to_f32)
TESSERA_NARROW_FLOAT(BFloat16, uint16_t, f32_to_bf16_bits, bf16_bits_to_f32)
TESSERA_NARROW_FLOAT(Float8_e4m3fn, uint8_t, f32_to_e4m3fn_bits, e4m3fn_bits_to_f32)
TESSERA_NARROW_FLOAT(Float8_e5m2, uint8_t, f32_to_e5m2_bits, e5m2_bits_to_f32)
#undef TESSERA_NARROW_FLOAT

// Two float4 e2m1 values in one byte: element 2i in the low nibble, 2i+1 in the high nibble
// (the NVFP4 / PyTorch float4_e2m1fn_x2 layout). A tensor of this dtype counts bytes, so its
// last dimension is half the number of fp4 values; block scales are a separate tensor.
struct Float4_e2m1fn_x2 {
  uint8_t x;
  Float4_e2m1fn_x2() = default;
  constexpr Float4_e2m1fn_x2(from_bits_t, uint8_t b) : x(b) {}
  constexpr Float4_e2m1fn_x2(float lo, float hi)
      : x(static_cast<uint8_t>(detail::f32_to_e2m1_bits(lo) |
                               (detail::f32_to_e2m1_bits(hi) << 4))) {}
  constexpr float lo() const { return detail::e2m1_bits_to_f32(x & 0xfu); }
  constexpr float hi() const { return detail::e2m1_bits_to_f32(x >> 4); }
};

}  // namespace tessera
