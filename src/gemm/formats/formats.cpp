// Names and the scalar reference decoder of the weight formats (formats.h).
#include "gemm/formats/formats.h"

namespace tessera::gemm {

std::string_view format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Float32:
      return "float32";
    case WeightFormat::BFloat16:
      return "bfloat16";
    case WeightFormat::Float16:
      return "float16";
    case WeightFormat::Float8_e4m3fn:
      return "float8_e4m3fn";
    case WeightFormat::Float8_e5m2:
      return "float8_e5m2";
    case WeightFormat::NVFP4:
      return "nvfp4";
  }
  return "?";
}

bool weight_format_of(ScalarType dtype, WeightFormat* out) {
  switch (dtype) {
    case ScalarType::Float32:
      *out = WeightFormat::Float32;
      return true;
    case ScalarType::BFloat16:
      *out = WeightFormat::BFloat16;
      return true;
    case ScalarType::Float16:
      *out = WeightFormat::Float16;
      return true;
    case ScalarType::Float8_e4m3fn:
      *out = WeightFormat::Float8_e4m3fn;
      return true;
    case ScalarType::Float8_e5m2:
      *out = WeightFormat::Float8_e5m2;
      return true;
    case ScalarType::Float4_e2m1fn_x2:
      *out = WeightFormat::NVFP4;
      return true;
    default:
      return false;
  }
}

namespace formats {

void dequantize_row_reference(WeightFormat f, const void* row, int64_t k, const uint8_t* scales,
                              float* out) {
  for (int64_t p = 0; p < k; ++p) out[p] = decode_value(f, row, p, scales);
}

}  // namespace formats
}  // namespace tessera::gemm
