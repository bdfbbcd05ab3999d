// Matrix transposes for kernel files compiled per ISA (like vec.h: everything lives in
// tessera::vec::TS_ISA). Users: same-dtype transposing copies (ops/cpu/copy_kernels.cpp),
// linalg's layout copies (linalg/leaf) and its lane-interleaved batches (linalg/small).
//
//   transpose_tiled(r, c, src, lds, dst, ldd)   dst(j, i) = src(i, j) for the r x c matrix of
//       words src (leading dimensions lds, ldd in words), any trivially copyable word: through a
//       60 x 60 tile, runs of 60 words of a source row read into it and runs of 60 words of a
//       destination row written from it. Element by element, one side would touch a new cache
//       line at every step, and with a power-of-two leading dimension a run of them would fall
//       into one L1 set.
//   transpose(r, c, src, lds, dst, ldd)   the same; on AVX-512, 4- and 8-byte words move as
//       16 x 16 and 8 x 8 blocks through registers (transpose_registers), the edges tiled.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#if !defined(TS_ISA)
#error "transpose.h is for kernel files compiled per ISA (TS_ISA must be defined)"
#endif

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tessera::vec::TS_ISA {

template <class Word>
void transpose_tiled(int64_t r, int64_t c, const Word* src, int64_t lds, Word* dst, int64_t ldd) {
  constexpr int64_t w = sizeof(Word);
  constexpr int64_t kTile = 60;  // not a power of two: a tile's rows fall into different sets
  Word tile[kTile][kTile];
  for (int64_t j0 = 0; j0 < c; j0 += kTile) {
    const int64_t cn = std::min(kTile, c - j0);
    for (int64_t i0 = 0; i0 < r; i0 += kTile) {
      const int64_t rn = std::min(kTile, r - i0);
      for (int64_t i = 0; i < rn; ++i) std::memcpy(tile[i], src + (i0 + i) * lds + j0, cn * w);
      Word* d = dst + j0 * ldd + i0;
      for (int64_t j = 0; j < cn; ++j)
        for (int64_t i = 0; i < rn; ++i) std::memcpy(d + j * ldd + i, &tile[i][j], w);
    }
  }
}

#if defined(__AVX512F__)
// In-register transposes of a 16 x 16 float / 8 x 8 double block (r[i] = row i in, column i
// out). Pure data movement: any 4- or 8-byte words (NaN payloads included) come out unchanged.
[[gnu::always_inline]] inline void transpose_registers(__m512* r) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  auto lo = [](__m512 x, __m512 y) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
  };
  auto hi = [](__m512 x, __m512 y) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
  };
  // u[4g + c], 128-bit lane q: column 4q + c of rows 4g .. 4g+3.
  __m512 u[16];
  for (int i = 0; i < 16; i += 4) {
    u[i] = lo(t[i], t[i + 2]);
    u[i + 1] = hi(t[i], t[i + 2]);
    u[i + 2] = lo(t[i + 1], t[i + 3]);
    u[i + 3] = hi(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 a88 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    const __m512 add = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    const __m512 b88 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 bdd = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(a88, b88, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(a88, b88, 0xdd);
    r[4 + c] = _mm512_shuffle_f32x4(add, bdd, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(add, bdd, 0xdd);
  }
}

[[gnu::always_inline]] inline void transpose_registers(__m512d* r) {
  __m512d t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);
  }
  // t[2g + c], 128-bit lane q: column 2q + c of rows 2g, 2g+1.
  for (int c = 0; c < 2; ++c) {
    const __m512d a88 = _mm512_shuffle_f64x2(t[c], t[2 + c], 0x88);
    const __m512d add = _mm512_shuffle_f64x2(t[c], t[2 + c], 0xdd);
    const __m512d b88 = _mm512_shuffle_f64x2(t[4 + c], t[6 + c], 0x88);
    const __m512d bdd = _mm512_shuffle_f64x2(t[4 + c], t[6 + c], 0xdd);
    r[c] = _mm512_shuffle_f64x2(a88, b88, 0x88);
    r[4 + c] = _mm512_shuffle_f64x2(a88, b88, 0xdd);
    r[2 + c] = _mm512_shuffle_f64x2(add, bdd, 0x88);
    r[6 + c] = _mm512_shuffle_f64x2(add, bdd, 0xdd);
  }
}
#endif

template <class Word>
void transpose(int64_t r, int64_t c, const Word* src, int64_t lds, Word* dst, int64_t ldd) {
#if defined(__AVX512F__)
  if constexpr (sizeof(Word) == 4 || sizeof(Word) == 8) {
    constexpr int W = 64 / sizeof(Word);
    const int64_t rf = r / W * W, cf = c / W * W;
    for (int64_t i0 = 0; i0 < rf; i0 += W) {
      for (int64_t j0 = 0; j0 < cf; j0 += W) {
        const Word* x = src + i0 * lds + j0;
        Word* d = dst + j0 * ldd + i0;
        if constexpr (sizeof(Word) == 4) {
          __m512 v[W];
          for (int t = 0; t < W; ++t) v[t] = _mm512_loadu_ps(x + t * lds);
          transpose_registers(v);
          for (int t = 0; t < W; ++t) _mm512_storeu_ps(d + t * ldd, v[t]);
        } else {
          __m512d v[W];
          for (int t = 0; t < W; ++t) v[t] = _mm512_loadu_pd(x + t * lds);
          transpose_registers(v);
          for (int t = 0; t < W; ++t) _mm512_storeu_pd(d + t * ldd, v[t]);
        }
      }
    }
    transpose_tiled(rf, c - cf, src + cf, lds, dst + cf * ldd, ldd);  // right edge
    transpose_tiled(r - rf, c, src + rf * lds, lds, dst + rf, ldd);   // bottom rows
    return;
  }
#endif
  transpose_tiled(r, c, src, lds, dst, ldd);
}

}  // namespace tessera::vec::TS_ISA
