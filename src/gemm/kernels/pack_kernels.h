// The packing routines behind src/gemm/pack.h, compiled once per ISA (pack_kernels.cpp) and
// chosen with the microkernels: the AVX-512 copy moves a whole 64-byte row per instruction
// and transposes a row-major A 16 x 16 floats at a time, where the baseline copy goes 16
// bytes at a time (packing was a sixth of a 256^3 float32 product). The bfloat16 pair panels
// of the vdpbf16ps kernel get the same treatment (pairs_bf16: in scalar code they were 15%
// of a 2048^3 bfloat16 product).
#pragma once

#include <cstdint>

#include "core/dispatch.h"

namespace tessera::cpu {

// dst[p * width + l] = src[l * ls + p * ks] for l < valid, 0 for valid <= l < width.
template <class T>
using PackPanelFn = void (*)(int64_t valid, int64_t width, int64_t kc, const T* src, int64_t ls,
                             int64_t ks, T* dst);
// A row-major kc x nc block of B (row stride rs) into NR-column micro-panels (gemm/pack.h).
template <class T>
using PackBRowsFn = void (*)(int64_t kc, int64_t nc, const T* b, int64_t rs, int64_t nr, T* dst);

// bfloat16 pair panels (gemm/pack_lowp.h): dst[(q * width + l) * 2 + t] = src[l * ls + (2 q + t)
// * ks] for l < valid and 2 q + t < kc; zeros for the lanes past valid and the half step of an
// odd kc. Only the two contiguous layouts: ks == 1 or ls == 1.
using PackPairsFn = void (*)(int64_t valid, int64_t width, int64_t kc, const uint16_t* src,
                             int64_t ls, int64_t ks, uint16_t* dst);

struct PackKernels {
  PackPanelFn<float> panel_f32 = nullptr;
  PackPanelFn<double> panel_f64 = nullptr;
  PackBRowsFn<float> b_rows_f32 = nullptr;
  PackBRowsFn<double> b_rows_f64 = nullptr;
  PackPairsFn pairs_bf16 = nullptr;
};

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(PackKernels, pack_kernels)
