// Per-ISA kernels for the random factories (src/ops/random.cpp): Philox 4x32-10 evaluated on
// 16 counters at a time, and the transforms from its 32-bit words to uniform and normal floats.
//
// The stream. A draw reserves consecutive counters starting at `base`, in blocks of 16 (one
// counter per SIMD lane). Counter c gives four words w0..w3 = Philox(seed, c). Element e of a
// draw comes from block b = e / P (P values per block) and lane i = e % 16, whatever thread
// computes it:
// - float draws (float32, and float16/bfloat16 through float): P = 64; e's slot j = (e % 64) / 16
//   takes word j of counter base + 16 b + i. Uniform: 24 bits of word j. Normal: slots 0 and 1
//   are one Box-Muller pair (radius from w0, angle from w1: r cos, r sin), slots 2 and 3 another
//   (w2, w3).
// - double draws: P = 32; slot j = (e % 32) / 16 takes words 2j and 2j+1 (64 bits). Uniform:
//   53 bits. Normal: slot 0 is r cos and slot 1 is r sin, with the radius from (w0, w1) and the
//   angle from (w2, w3).
// - 64-bit integer draws (randint): as double draws, the raw 64 bits.
//
// The transforms use only correctly rounded operations and explicit fused multiply-adds, so the
// AVX2 and AVX-512 kernels give the same bits; the generic kernel (no FMA) may differ in the
// last bit of a normal.
#pragma once

#include <cstdint>

#include "core/dispatch.h"

namespace tessera::cpu {

inline constexpr int kPhiloxLanes = 16;
inline constexpr int64_t kFloatDrawsPerBlock = 4 * kPhiloxLanes;
inline constexpr int64_t kDoubleDrawsPerBlock = 2 * kPhiloxLanes;

struct PhiloxStream {
  uint64_t seed;
  uint64_t base;  // first counter of the draw
};

struct RandomKernels {
  // Each writes elements [begin, end) of the draw to out[0, end - begin). Uniform values lie in
  // [lo, hi) (a value that would round up to hi is replaced by the largest one below it).
  void (*uniform_float)(float* out, int64_t begin, int64_t end, PhiloxStream s, float lo, float hi);
  void (*uniform_double)(double* out, int64_t begin, int64_t end, PhiloxStream s, double lo,
                         double hi);
  void (*normal_float)(float* out, int64_t begin, int64_t end, PhiloxStream s, float mean,
                       float std);
  void (*normal_double)(double* out, int64_t begin, int64_t end, PhiloxStream s, double mean,
                        double std);
  void (*bits64)(uint64_t* out, int64_t begin, int64_t end, PhiloxStream s);
};

// The plain one-counter-at-a-time Philox 4x32-10 (the kernels' reference): the four words of
// counter c.
struct PhiloxWords {
  uint32_t w[4];
};
inline PhiloxWords philox4x32(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
    c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    c1 = static_cast<uint32_t>(p1);
    c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c3 = static_cast<uint32_t>(p0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(RandomKernels, random_kernels)
