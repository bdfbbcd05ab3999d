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
//   transpose(r, c, src, lds, dst, ldd)   the same; on AVX-512, 2-, 4-, 8- and 16-byte words
//       move as 16 x 16, 16 x 16, 8 x 8 and 4 x 4 blocks through registers (transpose_block), in
//       an order chosen by the two leading dimensions (above transpose), the edges tiled.
//   load_transposed(x, lds, r)   (AVX-512) a 16 x 16 float / 8 x 8 double block loaded into
//       registers as its columns; also GEMM's A packing and linalg's interleaved groups.
//   transpose_8x16(x, lds, d, ldd)   (AVX-512) an 8 x 16 float block stored as 16 columns of 8
//       (half of each 16-lane vector of linalg's interleaved groups).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>

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

#if defined(__AVX512F__)
// The 16 x 16 float / 8 x 8 double block at x (rows lds words apart) loaded transposed: r[j] =
// column j. Each register is put together from four 128-bit pieces of rows, one load and three
// inserts (128-bit lane g gets row 4g + i of a float block, 2g + i of a double one), and a
// transpose within the 128-bit lanes finishes it: 2 in-lane shuffles per float column and 1 per
// double one, where transpose_registers spends 4 and 3, half of them across lanes. On the Zen 5
// build machine, one thread, a block in L1 took 1.1 ns per float column against 2.2 loaded
// whole and transposed in registers (1.2 against 1.8 per double column). A row's pieces are
// loaded one after another: with rows a multiple of 4 KiB apart, the block's lines share one
// L1 set, and a line left for the next column's pass had been evicted by then. The float form
// reads rows [0, rows) only and takes the others as zero (GEMM's packing of 14-row panels).
[[gnu::always_inline]] inline void load_transposed(const float* x, int64_t lds, __m512* r,
                                                   int rows = 16) {
  __m512 q[4][4];  // q[k][i], 128-bit lane g: row 4g + i, columns 4k .. 4k+3
  for (int i = 0; i < 4; ++i) {
    for (int k = 0; k < 4; ++k) {
      const float* p = x + i * lds + 4 * k;
      // A 128-bit load clears the rest of the register.
      q[k][i] = i < rows ? _mm512_zextps128_ps512(_mm_loadu_ps(p)) : _mm512_setzero_ps();
      if (4 + i < rows) q[k][i] = _mm512_insertf32x4(q[k][i], _mm_loadu_ps(p + 4 * lds), 1);
      if (8 + i < rows) q[k][i] = _mm512_insertf32x4(q[k][i], _mm_loadu_ps(p + 8 * lds), 2);
      if (12 + i < rows) q[k][i] = _mm512_insertf32x4(q[k][i], _mm_loadu_ps(p + 12 * lds), 3);
    }
  }
  for (int k = 0; k < 4; ++k) {
    const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(q[k][0], q[k][1]));
    const __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(q[k][0], q[k][1]));
    const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(q[k][2], q[k][3]));
    const __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(q[k][2], q[k][3]));
    r[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
}

[[gnu::always_inline]] inline void load_transposed(const double* x, int64_t lds, __m512d* r) {
  __m512d q[4][2];  // q[k][i], 128-bit lane g: row 2g + i, columns 2k, 2k+1
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 4; ++k) {
      const double* p = x + i * lds + 2 * k;
      q[k][i] = _mm512_castpd128_pd512(_mm_loadu_pd(p));
      q[k][i] = _mm512_insertf64x2(q[k][i], _mm_loadu_pd(p + 2 * lds), 1);
      q[k][i] = _mm512_insertf64x2(q[k][i], _mm_loadu_pd(p + 4 * lds), 2);
      q[k][i] = _mm512_insertf64x2(q[k][i], _mm_loadu_pd(p + 6 * lds), 3);
    }
  }
  for (int k = 0; k < 4; ++k) {
    r[2 * k] = _mm512_unpacklo_pd(q[k][0], q[k][1]);
    r[2 * k + 1] = _mm512_unpackhi_pd(q[k][0], q[k][1]);
  }
}

// The 8 x 16 float block at x (rows lds floats apart) stored transposed: its column j, 8 floats,
// at d + j * ldd (32-byte aligned). Each register takes a 256-bit piece of rows i and 4 + i (a
// load and an insert); a transpose within the 128-bit lanes and one shuffle across them leave
// two columns in its halves.
[[gnu::always_inline]] inline void transpose_8x16(const float* x, int64_t lds, float* d,
                                                  int64_t ldd) {
  for (int m = 0; m < 2; ++m) {  // columns 8m .. 8m+7
    __m512 q[4];  // q[i], 128-bit lanes: row i columns 8m + {0..3}, {4..7}, row 4 + i the same
    for (int i = 0; i < 4; ++i) {
      const float* p = x + i * lds + 8 * m;
      q[i] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(p)),
                                _mm256_loadu_ps(p + 4 * lds), 1);
    }
    const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(q[0], q[1]));
    const __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(q[0], q[1]));
    const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(q[2], q[3]));
    const __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(q[2], q[3]));
    __m512 y[4];  // y[c], 128-bit lanes: rows 0-3 of column 8m + c, 8m + 4 + c, rows 4-7 of both
    y[0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    y[1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    y[2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    y[3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    for (int c = 0; c < 4; ++c) {
      const __m512 z = _mm512_shuffle_f32x4(y[c], y[c], _MM_SHUFFLE(3, 1, 2, 0));
      _mm256_store_ps(d + (8 * m + c) * ldd, _mm512_castps512_ps256(z));
      _mm256_store_ps(d + (8 * m + 4 + c) * ldd, _mm512_extractf32x8_ps(z, 1));
    }
  }
}

// The L1 sets (of 64) that lines `bytes` apart fall into: all of them unless the stride is a
// multiple of the line, and a single one for a multiple of 4 KiB.
inline int64_t l1_sets_reached(int64_t bytes) {
  if (bytes % 64 != 0) return 64;
  return 64 / std::gcd(bytes / 64, int64_t{64});
}

// One W x W register block: W rows of src (lds apart) in, W rows of dst (ldd apart) out. Out of
// line: inlined into the loops below, the 16 x 16 float block spilled (its rows and the
// transpose's temporaries take all 32 vector registers; float32 64 x 64: 113 -> 217 GB/s out of
// line), and the 8 x 8 double block ran 0.7-0.85x as fast on rows that are not 64-byte aligned.
template <class Word>
[[gnu::noinline]] void transpose_block(const Word* x, int64_t lds, Word* d, int64_t ldd) {
  if constexpr (sizeof(Word) == 2) {
    // 2-byte words (bfloat16, float16, int16): a 16 x 16 block of 32-byte rows. Row pairs
    // interleave by words, then pairs of pairs by 4-byte and 8-byte units: v[8s + c] then holds
    // rows 8s .. 8s+7 of column c in its low 128-bit lane and of column c + 8 in its high one
    // (through the tile before, a 1000 x 1000 copy took 305 us, now 76).
    __m256i r[16], t[16], u[16], v[16];
    for (int i = 0; i < 16; ++i)
      r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i * lds));
    for (int p = 0; p < 8; ++p) {  // t[2p + h]: rows 2p, 2p+1; columns 8L + 4h + {0..3}
      t[2 * p] = _mm256_unpacklo_epi16(r[2 * p], r[2 * p + 1]);
      t[2 * p + 1] = _mm256_unpackhi_epi16(r[2 * p], r[2 * p + 1]);
    }
    for (int q = 0; q < 4; ++q)  // u[4q + 2h + g]: rows 4q .. 4q+3; columns 8L + 4h + 2g + {0, 1}
      for (int h = 0; h < 2; ++h) {
        const __m256i a = t[4 * q + h], b = t[4 * q + 2 + h];
        u[4 * q + 2 * h] = _mm256_unpacklo_epi32(a, b);
        u[4 * q + 2 * h + 1] = _mm256_unpackhi_epi32(a, b);
      }
    for (int s = 0; s < 2; ++s)  // v[8s + c]: rows 8s .. 8s+7; column 8L + c
      for (int c = 0; c < 8; c += 2) {
        const __m256i a = u[8 * s + c / 2], b = u[8 * s + 4 + c / 2];
        v[8 * s + c] = _mm256_unpacklo_epi64(a, b);
        v[8 * s + c + 1] = _mm256_unpackhi_epi64(a, b);
      }
    for (int c = 0; c < 8; ++c) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + c * ldd),
                          _mm256_permute2x128_si256(v[c], v[8 + c], 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + (c + 8) * ldd),
                          _mm256_permute2x128_si256(v[c], v[8 + c], 0x31));
    }
  } else if constexpr (sizeof(Word) == 4) {
    __m512 v[16];
    load_transposed(reinterpret_cast<const float*>(x), lds, v);
    for (int t = 0; t < 16; ++t) _mm512_storeu_ps(d + t * ldd, v[t]);
  } else if constexpr (sizeof(Word) == 8) {
    __m512d v[8];
    load_transposed(reinterpret_cast<const double*>(x), lds, v);
    for (int t = 0; t < 8; ++t) _mm512_storeu_pd(d + t * ldd, v[t]);
  } else {
    // 16-byte words (complex128): a 4 x 4 block, one 128-bit lane per word (through the tile
    // before, a 1024 x 1024 copy took 2.1 ms, now 0.88), each column put together from its
    // four words by a load and three inserts (as load_transposed).
    static_assert(sizeof(Word) == 16);
    for (int j = 0; j < 4; ++j) {
      auto word = [&](int t) {
        return _mm_loadu_pd(reinterpret_cast<const double*>(x + t * lds + j));
      };
      __m512d c = _mm512_castpd128_pd512(word(0));
      c = _mm512_insertf64x2(c, word(1), 1);
      c = _mm512_insertf64x2(c, word(2), 2);
      c = _mm512_insertf64x2(c, word(3), 3);
      _mm512_storeu_pd(d + j * ldd, c);
    }
  }
}
#endif

// On AVX-512 the blocks go in one of two orders. Along src's rows (the next block right of the
// last), src is read as W streams and each block writes W new rows of dst; down src's columns
// (the next block below), dst is written as W streams and each block reads W new rows of src.
// Whichever side is not streamed touches one line per row, and each line twice when the rows
// are not 64-byte aligned; with a leading dimension of a multiple of 1 KiB those lines fall
// into a few L1 sets and evict each other before their second use. So dst is streamed when its
// rows reach few sets, and no more than src's (the walk then runs down tiles of kDownRows rows,
// whose src lines stay in L1 until the next column of blocks needs them), and src otherwise.
// Measured on the Zen 5 build machine, one thread, 64-byte aligned matrices, GB/s moved before
// (every block along src's rows, inlined) -> now: float64 256 x 256 23 -> 67, 1024 x 1024 16 ->
// 54, float32 1024 x 1024 15 -> 37, float32 512 x 3000 17 -> 66. A small block (a tile of a
// larger copy) goes down only from 16 KiB on and when dst's rows reach at most W / 4 sets (four
// for float32's 16-row blocks, two for float64's 8-row ones): float64 64 x 64 with both leading
// dimensions 256, 28 -> 73, float32 64 -> 84; otherwise the order along rows was as fast or
// faster (float64 128 x 32 with rows 1 KiB apart: 123 against 106 down). Where neither order
// changes, float32 gained from the out-of-line block (1000 x 1000 45 -> 72) and float64 stayed
// within 0.95-1.1x.
template <class Word>
void transpose(int64_t r, int64_t c, const Word* src, int64_t lds, Word* dst, int64_t ldd) {
#if defined(__AVX512F__)
  if constexpr (sizeof(Word) == 2 || sizeof(Word) == 4 || sizeof(Word) == 8 || sizeof(Word) == 16) {
    constexpr int W = sizeof(Word) == 2 ? 16 : 64 / sizeof(Word);
    constexpr int64_t kDownRows = 256, kDownCols = 32;
    const int64_t rf = r / W * W, cf = c / W * W;
    const int64_t bytes = r * c * static_cast<int64_t>(sizeof(Word));
    const int64_t few_sets = bytes >= (int64_t{64} << 10)   ? 32
                             : bytes >= (int64_t{16} << 10) ? W / 4
                                                            : 0;
    const int64_t dst_sets = l1_sets_reached(ldd * static_cast<int64_t>(sizeof(Word)));
    const bool down = dst_sets <= few_sets &&
                      dst_sets <= l1_sets_reached(lds * static_cast<int64_t>(sizeof(Word)));
    if (down) {
      for (int64_t ti = 0; ti < rf; ti += kDownRows) {
        const int64_t ti_end = std::min(rf, ti + kDownRows);
        for (int64_t tj = 0; tj < cf; tj += kDownCols) {
          const int64_t tj_end = std::min(cf, tj + kDownCols);
          for (int64_t j0 = tj; j0 < tj_end; j0 += W)
            for (int64_t i0 = ti; i0 < ti_end; i0 += W)
              transpose_block(src + i0 * lds + j0, lds, dst + j0 * ldd + i0, ldd);
        }
      }
    } else {
      for (int64_t i0 = 0; i0 < rf; i0 += W)
        for (int64_t j0 = 0; j0 < cf; j0 += W)
          transpose_block(src + i0 * lds + j0, lds, dst + j0 * ldd + i0, ldd);
    }
    transpose_tiled(rf, c - cf, src + cf, lds, dst + cf * ldd, ldd);  // right edge
    transpose_tiled(r - rf, c, src + rf * lds, lds, dst + rf, ldd);   // bottom rows
    return;
  }
#endif
  transpose_tiled(r, c, src, lds, dst, ldd);
}

}  // namespace tessera::vec::TS_ISA
