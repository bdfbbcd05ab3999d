// Kernels of the low-precision GEMM path (src/gemm/lowp.h): the AVX512_BF16 pair microkernel
// and the epilogue that scales, biases and converts a float32 accumulator tile as it is
// stored. A table per ISA, like GemmKernels (microkernel.h), which this path also uses: where
// the bf16 kernel is absent, operands are decoded to float32 while packing and the ISA's
// float32 microkernel runs instead.
//
// Pair microkernel contract (bf16.fn):
//
//   C[MR x NR] := (accumulate ? C : 0) + Apanel * Bpanel, in float32
//
//   a:  packed A micro-panel of kp k-pairs: a[(q * MR + i) * 2 + t] = A(i, 2q + t) as bf16
//       bits, so one 32-bit broadcast feeds a row's pair;
//   b:  packed B micro-panel: b[(q * NR + j) * 2 + t] = B(2q + t, j), so one 512-bit load feeds
//       16 columns x 2 k. An odd k is padded with a zero step; rows/columns past the edge are
//       zero. Both 64-byte aligned.
//   c:  float32 tile, C(i, j) at c[i * ldc + j]; never read when accumulate is false.
//
// Each lane accumulates with vdpbf16ps: per pair, acc += a0*b0 + a1*b1 (products exact in
// float32, the two-term sum and the add rounded as the instruction does), in q order only, so
// results do not depend on tile position or thread count.
//
// AMX variant (a_tiles, kp_align = 16, MR = 32): the same B panel; kp is a multiple of 16 (the
// packers pad with zero pairs), and A's micro-panel is in tiles, a 16-row x 32-k block of bf16
// for each step s of 16 pairs and each half h of the rows, one after another:
// a[((2 s + h) * 16 + r) * 32 + t] = A(16 h + r, 32 s + t). A tile load then reads 1 KiB in a
// row (rows of a plain layout lie kp * 4 bytes apart, which aliases in L1 at kp 512). Every C
// element accumulates with TDPBF16PS, 16 pairs per instruction, starting from C when
// accumulate is set, again in q order only.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "gemm/kernels/microkernel.h"
#include "tessera/core/dtype.h"

namespace tessera::cpu {

using Bf16PairKernelFn = void (*)(int64_t kp, const uint16_t* a, const uint16_t* b, float* c,
                                  int64_t ldc, bool accumulate);

struct Bf16PairKernel {
  Bf16PairKernelFn fn = nullptr;  // null: this ISA or this CPU has no AVX512_BF16
  int mr = 0;
  int nr = 0;
  const char* name = "";
  // Measures, on this core, the multiply-add rate of the kernel's instruction over the float32
  // FMA's (2.0 where vdpbf16ps runs at the FMA's rate; some cores run it at half of that).
  double (*gain)() = nullptr;
  bool a_tiles = false;  // A micro-panel in AMX tiles instead of k-pairs
  int kp_align = 1;      // kp is a multiple of this; packers pad with zero pairs
};

// One tile of the epilogue: out(i, j) = alpha * row_scale[i] * col_scale[j] * acc(i, j)
// + bias[j] + beta * C(i, j), rounded once to `out`. Null vectors mean 1 (scales) or 0
// (bias); beta == 0 never reads C. Pointers are already offset to the tile's (0, 0).
struct LowpTile {
  const float* acc = nullptr;
  int64_t ld = 0;  // row stride of acc
  int64_t mv = 0, nv = 0;
  float alpha = 1, beta = 0;
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  const float* bias = nullptr;
  ScalarType out = ScalarType::Float32;  // Float32, BFloat16 or Float16
  void* c = nullptr;
  int64_t c_rs = 0, c_cs = 0;  // element strides of C
};

using LowpStoreFn = void (*)(const LowpTile& tile);

struct LowpGemmKernels {
  const char* isa = "";
  Bf16PairKernel bf16;
  // The AMX tile kernel where the CPU has AMX-BF16 and the OS granted the tile state; the
  // driver runs it in bf16's place (lowp.h, bf16_path()).
  Bf16PairKernel amx;
  const GemmKernels* f32 = nullptr;  // the same ISA's float32 kernels (the fallback path)
  LowpStoreFn store = nullptr;
};

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(LowpGemmKernels, lowp_gemm_kernels)
