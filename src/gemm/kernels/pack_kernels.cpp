// Packing into micro-panels (layout: src/gemm/pack.h), compiled once per ISA (see
// pack_kernels.h). Two source layouts are common and get their own loop: lanes contiguous
// (ls == 1: row-major B, column-major A) copies one contiguous run per k step (two masked zmm
// moves on AVX-512); steps
// contiguous (ks == 1: row-major A, column-major B) is a transpose, done 16 x 16 floats at a
// time in zmm registers on AVX-512 and 4 x 4 floats (2 x 2 doubles) in SSE2 registers
// otherwise. Anything else goes element by element. bfloat16 pair panels (pack_pairs) reuse
// the transposes on 32-bit pairs, or interleave two rows with 16-bit unpacks.
#include "gemm/kernels/pack_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "core/transpose.h"

namespace tessera::cpu::TS_ISA {

namespace {

// Transposes lanes [0, 4) of float (or [0, 2) of double) of a steps-contiguous source for kc
// steps into dst (row stride `width`) through SSE2 registers (baseline x86-64). Returns the
// number of steps done; the caller finishes the rest.
#if defined(__SSE2__)
int64_t transpose_lanes(const float* src, int64_t ls, int64_t kc, int64_t width, float* dst) {
  const float* s0 = src;
  const float* s1 = s0 + ls;
  const float* s2 = s1 + ls;
  const float* s3 = s2 + ls;
  int64_t p = 0;
  for (; p + 4 <= kc; p += 4) {
    __m128 r0 = _mm_loadu_ps(s0 + p), r1 = _mm_loadu_ps(s1 + p);
    __m128 r2 = _mm_loadu_ps(s2 + p), r3 = _mm_loadu_ps(s3 + p);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(dst + (p + 0) * width, r0);
    _mm_storeu_ps(dst + (p + 1) * width, r1);
    _mm_storeu_ps(dst + (p + 2) * width, r2);
    _mm_storeu_ps(dst + (p + 3) * width, r3);
  }
  return p;
}

int64_t transpose_lanes(const double* src, int64_t ls, int64_t kc, int64_t width, double* dst) {
  const double* s0 = src;
  const double* s1 = s0 + ls;
  int64_t p = 0;
  for (; p + 2 <= kc; p += 2) {
    const __m128d r0 = _mm_loadu_pd(s0 + p), r1 = _mm_loadu_pd(s1 + p);
    _mm_storeu_pd(dst + p * width, _mm_unpacklo_pd(r0, r1));
    _mm_storeu_pd(dst + (p + 1) * width, _mm_unpackhi_pd(r0, r1));
  }
  return p;
}
#else
template <class T>
int64_t transpose_lanes(const T*, int64_t, int64_t, int64_t, T*) {
  return 0;
}
#endif

#if defined(__AVX512F__)
// Transposes lanes [0, n) (n <= 16) of a steps-contiguous float source for kc steps into dst
// (row stride `width`), 16 steps at a time (core/transpose.h's load_transposed): rows n..15 of
// each 16 x 16 block are zeros, and each step's n lanes are one masked store. Returns the steps
// done; the caller finishes the rest.
int64_t transpose16(const float* src, int64_t ls, int64_t n, int64_t kc, int64_t width,
                    float* dst) {
  const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
  int64_t p = 0;
  for (; p + 16 <= kc; p += 16) {
    __m512 r[16];
    vec::TS_ISA::load_transposed(src + p, ls, r, static_cast<int>(n));
    for (int t = 0; t < 16; ++t) _mm512_mask_storeu_ps(dst + (p + t) * width, lanes, r[t]);
  }
  return p;
}
#endif

}  // namespace

template <class T>
void pack_panel(int64_t valid, int64_t width, int64_t kc, const T* src, int64_t ls, int64_t ks,
                T* dst) {
  if (valid < width) {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t l = valid; l < width; ++l) dst[p * width + l] = T(0);
  }
  if (ls == 1) {
#if defined(__AVX512F__)
    // Runs of up to 128 bytes (a micro-panel's width) as two masked zmm moves per step: a memcpy
    // call per step of 56 bytes (float32 A panels of 14) was 4% of a float32 1024 Cholesky,
    // whose trailing updates pack A from its transpose.
    const int64_t words = valid * static_cast<int64_t>(sizeof(T) / 4);
    if (words <= 32) {
      const auto mask = [](int64_t w) {
        return static_cast<__mmask16>(w >= 16 ? 0xffff : w <= 0 ? 0 : (1u << w) - 1);
      };
      const __mmask16 m0 = mask(words), m1 = mask(words - 16);
      for (int64_t p = 0; p < kc; ++p) {
        const T* s = src + p * ks;
        T* d = dst + p * width;
        _mm512_mask_storeu_epi32(d, m0, _mm512_maskz_loadu_epi32(m0, s));
        if (m1)
          _mm512_mask_storeu_epi32(
              reinterpret_cast<int32_t*>(d) + 16, m1,
              _mm512_maskz_loadu_epi32(m1, reinterpret_cast<const int32_t*>(s) + 16));
      }
      return;
    }
#endif
    for (int64_t p = 0; p < kc; ++p) std::memcpy(dst + p * width, src + p * ks, valid * sizeof(T));
  } else if (ks == 1) {
    int64_t l = 0;
#if defined(__AVX512F__)
    if constexpr (sizeof(T) == sizeof(float)) {  // 16 lanes at a time through zmm registers
      for (; l < valid; l += 16) {
        const int64_t n = std::min<int64_t>(16, valid - l);
        const T* s = src + l * ls;
        T* d = dst + l;
        for (int64_t p = transpose16(s, ls, n, kc, width, d); p < kc; ++p)
          for (int64_t x = 0; x < n; ++x) d[p * width + x] = s[x * ls + p];
      }
    }
#endif
    // A transpose: 16 bytes of lanes at a time through registers.
    constexpr int64_t kLanes = 16 / sizeof(T);
    for (; l + kLanes <= valid; l += kLanes) {
      const T* s = src + l * ls;
      T* d = dst + l;
      for (int64_t p = transpose_lanes(s, ls, kc, width, d); p < kc; ++p)
        for (int64_t x = 0; x < kLanes; ++x) d[p * width + x] = s[x * ls + p];
    }
    for (; l < valid; ++l) {
      const T* s = src + l * ls;
      for (int64_t p = 0; p < kc; ++p) dst[p * width + l] = s[p];
    }
  } else {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t l = 0; l < valid; ++l) dst[p * width + l] = src[l * ls + p * ks];
  }
}

template <class T>
void pack_b_rows(int64_t kc, int64_t nc, const T* b, int64_t rs, int64_t nr, T* dst) {
  // kRows source rows per sweep, the next sweep's rows prefetched: each panel receives kRows *
  // NR contiguous elements per visit. One row per sweep wrote NR elements to each panel in
  // turn, nr * kc elements (64 KiB for float32 14x32 tiles at KC 512) apart, all in the same
  // L1 and L2 sets. Measured on the Xeon VM, packing a row-major 4096 x 4096 float32 B in
  // 512-row blocks: 15-19 ms one row per sweep, 8.5-12 ms now (packing was a third of a
  // 64x4096x4096 product).
  constexpr int64_t kRows = 8;
  const int64_t full = nc / nr * nr, rest = nc - full;
  for (int64_t p0 = 0; p0 < kc; p0 += kRows) {
    const int64_t rows = std::min(kRows, kc - p0);
    T* d = dst + p0 * nr;
    const bool ahead = p0 + 2 * kRows <= kc;
    for (int64_t j = 0; j < full; j += nr, d += nr * kc)
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = b + (p0 + r) * rs + j;
        if (ahead)  // the same columns of the next sweep's rows
          for (int64_t x = 0; x < nr; x += 64 / static_cast<int64_t>(sizeof(T)))
            __builtin_prefetch(src + kRows * rs + x);
        T* out = d + r * nr;
        for (int64_t x = 0; x < nr; ++x) out[x] = src[x];
      }
    if (rest > 0)
      for (int64_t r = 0; r < rows; ++r) {
        const T* src = b + (p0 + r) * rs + full;
        T* out = d + r * nr;
        for (int64_t x = 0; x < rest; ++x) out[x] = src[x];
        for (int64_t x = rest; x < nr; ++x) out[x] = T(0);
      }
  }
}

// Steps contiguous (row-major A, column-major B): with an even ls and 4-byte aligned rows every
// full pair is one 32-bit word, and the panel is the float32 panel's transpose on those words
// (the SIMD transposes move bits; only intrinsics touch the data as floats).
void pairs_k_contiguous(int64_t valid, int64_t width, int64_t kc, const uint16_t* src, int64_t ls,
                        uint16_t* dst) {
  const int64_t full = kc / 2;
  auto word = [&](int64_t l, int64_t q) {  // pair q of lane l, 4 bytes
    std::memcpy(dst + (q * width + l) * 2, src + l * ls + 2 * q, 4);
  };
  int64_t l = 0;
  if (ls % 2 == 0 && reinterpret_cast<uintptr_t>(src) % 4 == 0) {
    const int64_t wls = ls / 2;  // the row stride in words
    const auto* s = reinterpret_cast<const float*>(src);
    auto* d = reinterpret_cast<float*>(dst);
#if defined(__AVX512F__)
    for (; l < valid; l += 16) {  // up to 16 lanes at a time (an MR of 14: one pass)
      const int64_t n = std::min<int64_t>(16, valid - l);
      for (int64_t q = transpose16(s + l * wls, wls, n, full, width, d + l); q < full; ++q)
        for (int64_t x = 0; x < n; ++x) word(l + x, q);
    }
#endif
#if defined(__SSE2__)
    for (; l + 4 <= valid; l += 4)
      for (int64_t q = transpose_lanes(s + l * wls, wls, full, width, d + l); q < full; ++q)
        for (int64_t x = 0; x < 4; ++x) word(l + x, q);
#endif
  }
  for (; l < valid; ++l)
    for (int64_t q = 0; q < full; ++q) word(l, q);
  if (kc % 2 == 1)
    for (int64_t x = 0; x < valid; ++x) {
      dst[(full * width + x) * 2] = src[x * ls + kc - 1];
      dst[(full * width + x) * 2 + 1] = 0;
    }
}

// Lanes contiguous (row-major B): each panel row interleaves source rows 2 q and 2 q + 1
// (a zero row for the half step of an odd kc).
void pairs_lanes_contiguous(int64_t valid, int64_t width, int64_t kc, const uint16_t* src,
                            int64_t ks, uint16_t* dst) {
  for (int64_t p = 0; p < kc; p += 2) {
    const uint16_t* r0 = src + p * ks;
    const uint16_t* r1 = p + 1 < kc ? r0 + ks : nullptr;
    uint16_t* d = dst + p * width;  // pair row p / 2
    int64_t l = 0;
#if defined(__AVX512F__)
    const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i hi_idx = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (; l + 32 <= valid; l += 32) {
      const __m512i a = _mm512_loadu_si512(r0 + l);
      const __m512i b = r1 ? _mm512_loadu_si512(r1 + l) : _mm512_setzero_si512();
      // Interleaved within 128-bit lanes, then the lanes put in order.
      const __m512i lo = _mm512_unpacklo_epi16(a, b), hi = _mm512_unpackhi_epi16(a, b);
      _mm512_storeu_si512(d + 2 * l, _mm512_permutex2var_epi64(lo, lo_idx, hi));
      _mm512_storeu_si512(d + 2 * l + 32, _mm512_permutex2var_epi64(lo, hi_idx, hi));
    }
#endif
#if defined(__SSE2__)
    for (; l + 8 <= valid; l += 8) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + l));
      const __m128i b =
          r1 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + l)) : _mm_setzero_si128();
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * l), _mm_unpacklo_epi16(a, b));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 2 * l + 8), _mm_unpackhi_epi16(a, b));
    }
#endif
    for (; l < valid; ++l) {
      d[2 * l] = r0[l];
      d[2 * l + 1] = r1 ? r1[l] : uint16_t{0};
    }
  }
}

void pack_pairs(int64_t valid, int64_t width, int64_t kc, const uint16_t* src, int64_t ls,
                int64_t ks, uint16_t* dst) {
  const int64_t kp = (kc + 1) / 2;
  if (valid < width)
    for (int64_t q = 0; q < kp; ++q)
      std::memset(dst + (q * width + valid) * 2, 0, sizeof(uint16_t) * 2 * (width - valid));
  if (ks == 1) {
    pairs_k_contiguous(valid, width, kc, src, ls, dst);
  } else {
    pairs_lanes_contiguous(valid, width, kc, src, ks, dst);
  }
}

const PackKernels& pack_kernels() {
  static const PackKernels table{pack_panel<float>, pack_panel<double>, pack_b_rows<float>,
                                 pack_b_rows<double>, pack_pairs};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
