// Packing into micro-panels (layout: src/gemm/pack.h), compiled once per ISA (see
// pack_kernels.h). Two source layouts are common and get their own loop: lanes contiguous
// (ls == 1: row-major B, column-major A) copies one contiguous run per k step; steps
// contiguous (ks == 1: row-major A, column-major B) is a transpose, done 16 x 16 floats at a
// time in zmm registers on AVX-512 and 4 x 4 floats (2 x 2 doubles) in SSE2 registers
// otherwise. Anything else goes element by element.
#include "gemm/kernels/pack_kernels.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

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
// (row stride `width`), 16 steps at a time: rows n..15 of each 16 x 16 block are zeros, and
// each step's n lanes are one masked store. Returns the steps done; the caller finishes the
// rest.
int64_t transpose16(const float* src, int64_t ls, int64_t n, int64_t kc, int64_t width,
                    float* dst) {
  const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
  int64_t p = 0;
  for (; p + 16 <= kc; p += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i)
      r[i] = i < n ? _mm512_loadu_ps(src + i * ls + p) : _mm512_setzero_ps();
    __m512 a[16], b[16];
    for (int i = 0; i < 8; ++i) {
      a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // b[4i + q], 128-bit lane j: rows 4i..4i+3 of column 4j + q.
    for (int i = 0; i < 4; ++i) {
      const __m512d a0 = _mm512_castps_pd(a[4 * i]), a1 = _mm512_castps_pd(a[4 * i + 1]);
      const __m512d a2 = _mm512_castps_pd(a[4 * i + 2]), a3 = _mm512_castps_pd(a[4 * i + 3]);
      b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
      b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
      b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
      b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    for (int q = 0; q < 4; ++q) {
      const __m512 c0 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0x88);  // columns q, 8 + q
      const __m512 c1 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0xdd);  // columns 4 + q, 12 + q
      const __m512 c2 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0x88);
      const __m512 c3 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0xdd);
      float* d = dst + p * width;
      _mm512_mask_storeu_ps(d + q * width, lanes, _mm512_shuffle_f32x4(c0, c2, 0x88));
      _mm512_mask_storeu_ps(d + (8 + q) * width, lanes, _mm512_shuffle_f32x4(c0, c2, 0xdd));
      _mm512_mask_storeu_ps(d + (4 + q) * width, lanes, _mm512_shuffle_f32x4(c1, c3, 0x88));
      _mm512_mask_storeu_ps(d + (12 + q) * width, lanes, _mm512_shuffle_f32x4(c1, c3, 0xdd));
    }
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

const PackKernels& pack_kernels() {
  static const PackKernels table{pack_panel<float>, pack_panel<double>, pack_b_rows<float>,
                                 pack_b_rows<double>};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
