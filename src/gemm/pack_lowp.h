// Packing with decode for the low-precision path (src/gemm/lowp.h): the same micro-panels as
// pack.h, filled from bfloat16, float16, float8 or NVFP4 operands.
//
// An operand is seen lane-major: element (lane l, step p) where lanes are rows of A or
// columns of B and steps run along k (pack.h's convention). Two panel layouts:
//   - float32: dst[p * width + l], as the float32 microkernel reads;
//   - bf16 pairs: dst[(q * width + l) * 2 + t] = bits of element (l, 2q + t), as the
//     vdpbf16ps kernel reads (lowp_kernels.h); an odd kc ends with a zero step.
// Lanes past `lanes` are zero in both. Decoding uses small tables (256 entries for each
// float8 format, 16 for float4); block scales of NVFP4 are multiplied in as each value is
// decoded (exact in float32 and in bfloat16).
#pragma once

#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::gemm {

struct LaneView {
  ScalarType dtype = ScalarType::BFloat16;
  const void* data = nullptr;
  int64_t ls = 0, ks = 0;  // element strides (4-bit elements for NVFP4)
  const void* scale = nullptr;
  int64_t scale_ls = 0, scale_ks = 0;
};

// Decoded value of element (l, p) (float32 holds every format exactly).
float lowp_value(const LaneView& v, int64_t l, int64_t p);

// Lanes [l0, l0 + lanes) x steps [p0, p0 + kc) into ceil(lanes / width) float32 panels of
// width * kc elements each.
void pack_lowp_f32(const LaneView& v, int64_t l0, int64_t p0, int64_t lanes, int64_t kc,
                   int64_t width, float* dst);

// The same block into bf16 pair panels of width * 2 * ceil(kc / 2) elements each, or of
// width * kcs where kcs (even, >= kc) is given: steps past kc are zero pairs (the AMX kernel
// takes k-pairs by 16). Width 1 gives rows. Only for formats exact in bfloat16 (not Float16).
void pack_lowp_pairs(const LaneView& v, int64_t l0, int64_t p0, int64_t lanes, int64_t kc,
                     int64_t width, uint16_t* dst, int64_t kcs = -1);

// The same block as the AMX kernel reads A (lowp_kernels.h): micro-panels of 32 lanes x kcs
// (a multiple of 32, >= kc), each a run of 16-lane x 32-step tiles of bf16, steps past kc and
// lanes past `lanes` zero.
void pack_lowp_tiles(const LaneView& v, int64_t l0, int64_t p0, int64_t lanes, int64_t kc,
                     int64_t kcs, uint16_t* dst);

}  // namespace tessera::gemm
