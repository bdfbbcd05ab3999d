// AMX tile shapes: LDTILECFG's operand (see request_amx_tiles() in core/cpu_features.h for the
// permission a process needs before its first tile instruction).
#pragma once

#include <cstdint>

namespace tessera {

// LDTILECFG's 64-byte operand (palette 1): tile t has rows[t] rows of colsb[t] bytes.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// All eight tiles at their largest, 16 rows of 64 bytes (the GEMM kernel's shapes).
constexpr AmxTileConfig amx_full_tiles() {
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
  return c;
}

}  // namespace tessera
