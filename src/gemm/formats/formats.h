// Weight formats the bandwidth-bound kernels read (GEMV now, scaled_mm later), and their
// scalar decoding: the plain reference that the vector decoders (formats/decode_vec.h) are
// tested against.
//
//   format          bytes/value  storage                       scales
//   Float32         4            float                         -
//   BFloat16        2            tessera::BFloat16             -
//   Float16         2            tessera::Half                 -
//   Float8_e4m3fn   1            tessera::Float8_e4m3fn        optional per-row float32
//   Float8_e5m2     1            tessera::Float8_e5m2          optional per-row float32
//   NVFP4           1/2          Float4_e2m1fn_x2 (two a byte) block scales + global scale
//
// NVFP4 (block-scaled float4 e2m1, the layout of PyTorch's float4_e2m1fn_x2 and of NVIDIA's
// NVFP4): a row of K values is K/2 bytes, value 2j in the low nibble of byte j and value 2j+1
// in the high nibble; every kNvfp4Block = 16 consecutive values along K share one
// float8_e4m3fn block scale (a row has K/16 of them); a float32 global scale multiplies the
// whole product. The dequantized weight is
//
//   W(i, p) = e2m1(code(i, p)) * e4m3(scale(i, p / 16))        (exact in float32)
//
// and the global scale is applied once to each output, never as a separate pass over W.
// K must be a multiple of 16 and the values of a row contiguous.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "tessera/core/dtype.h"
#include "tessera/core/half.h"

namespace tessera::gemm {

enum class WeightFormat : int8_t {
  Float32 = 0,
  BFloat16,
  Float16,
  Float8_e4m3fn,
  Float8_e5m2,
  NVFP4,
};
inline constexpr int kNumWeightFormats = 6;

inline constexpr int64_t kNvfp4Block = 16;

std::string_view format_name(WeightFormat f);

// The format that stores a tensor of `dtype` (float4_e2m1fn_x2 is NVFP4); false when none.
bool weight_format_of(ScalarType dtype, WeightFormat* out);

// Bytes of storage for `values` consecutive values along K (NVFP4: values / 2).
constexpr int64_t format_bytes(WeightFormat f, int64_t values) {
  switch (f) {
    case WeightFormat::Float32:
      return 4 * values;
    case WeightFormat::BFloat16:
    case WeightFormat::Float16:
      return 2 * values;
    case WeightFormat::NVFP4:
      return values / 2;
    default:
      return values;
  }
}

namespace formats {

// Every float8 / float4 code decoded, built at compile time from tessera/core/half.h.
inline constexpr std::array<float, 256> kE4m3fnValues = [] {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i)
    t[i] = ::tessera::detail::e4m3fn_bits_to_f32(static_cast<uint8_t>(i));
  return t;
}();
inline constexpr std::array<float, 256> kE5m2Values = [] {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = ::tessera::detail::e5m2_bits_to_f32(static_cast<uint8_t>(i));
  return t;
}();
inline constexpr std::array<float, 16> kE2m1Values = [] {
  std::array<float, 16> t{};
  for (int i = 0; i < 16; ++i) t[i] = ::tessera::detail::e2m1_bits_to_f32(static_cast<uint8_t>(i));
  return t;
}();

// Value p of a K-contiguous row stored in format f (NVFP4: `scales` is the row's block
// scales, the result includes its block scale but not the global scale).
inline float decode_value(WeightFormat f, const void* row, int64_t p, const uint8_t* scales) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  switch (f) {
    case WeightFormat::Float32:
      return static_cast<const float*>(row)[p];
    case WeightFormat::BFloat16:
      return static_cast<const BFloat16*>(row)[p];
    case WeightFormat::Float16:
      return static_cast<const Half*>(row)[p];
    case WeightFormat::Float8_e4m3fn:
      return kE4m3fnValues[bytes[p]];
    case WeightFormat::Float8_e5m2:
      return kE5m2Values[bytes[p]];
    case WeightFormat::NVFP4: {
      const uint8_t b = bytes[p / 2];
      return kE2m1Values[(p & 1) ? (b >> 4) : (b & 0xf)] * kE4m3fnValues[scales[p / kNvfp4Block]];
    }
  }
  return 0;
}

// Value of element e (element strides) of a typed (non-NVFP4) format.
inline float decode_element(WeightFormat f, const void* base, int64_t e) {
  return decode_value(f, base, e, nullptr);
}

// Dequantizes row values [0, k) of a K-contiguous row into `out` (the plain reference).
void dequantize_row_reference(WeightFormat f, const void* row, int64_t k, const uint8_t* scales,
                              float* out);

}  // namespace formats
}  // namespace tessera::gemm
