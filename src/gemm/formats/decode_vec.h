// Vector decoders of the weight formats (formats.h) into float lanes, one set per ISA. For
// kernel files compiled per ISA only (like core/vec.h): everything lives in
// tessera::gemm::formats::TS_ISA.
//
//   V Decode<F>::load(base, i)        lanes i .. i+kSize-1 of a contiguous run at `base`
//   V Decode<F>::load(base, i, n)     the first n lanes (n < kSize), the rest zero
//   V DecodeNvfp4::load(row, p, s)    NVFP4 values p .. p+kSize-1 of a row (p a multiple of
//                                     kSize, inside one 16-value block) times block scale s
//   Decode<F>::kPostScale             a power of two the caller multiplies the final sum by
//   load2(..., lo, hi)                where present: 2 * kSize lanes at once (AVX-512 float8
//                                     and NVFP4 decode 32 values per full-width pass)
//   load4(..., v0, v1, v2, v3)        where present: 4 * kSize lanes at once (float8_e4m3fn
//                                     where the kernels are built for AVX512_VBMI)
//
// float8_e4m3fn decodes through float16: the code's bits shifted into a float16 (sign, 4
// exponent bits, 3 mantissa bits) are the value times 2^-8 exactly, subnormals included, so
// F16C (or AVX-512's vcvtph2ps) converts 16 lanes at once and the 2^8 goes into the final
// scale (kPostScale). NaN codes (0x7f, 0xff) are patched to a float16 NaN. With AVX512_VBMI
// (the GEMV kernels' avx512vbmi build) 64 codes decode at once by table: the value * 2^-8 of
// every magnitude is a bfloat16 (3 mantissa bits), i.e. the top two bytes of a float32, and
// two-register byte permutes (vpermi2b: 128 entries, the sign bit ignored) look up those two
// bytes for all 64 codes; the sign is ORed into the high byte and four more permutes spread
// the byte pairs into the float32 lanes, zero bytes below. NaN codes are NaN entries. The same
// values as the float16 route, bit for bit, at about half its instructions. float8_e5m2 is the
// high byte of a float16. float4 e2m1 is a 16-entry table: vpermps (AVX-512; 8 magnitudes and
// a sign bit on AVX2) looks each nibble up in the table pre-multiplied by the block scale,
// which is exact (2 significant bits times 4). The generic path reads the scalar tables.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "core/vec.h"
#include "gemm/formats/formats.h"

namespace tessera::gemm::formats::TS_ISA {

using V = vec::TS_ISA::Vec<float>;
inline constexpr int kLanes = V::kSize;

template <WeightFormat F>
struct Decode;

template <>
struct Decode<WeightFormat::Float32> {
  static constexpr float kPostScale = 1.0f;
  static V load(const uint8_t* base, int64_t i) {
    return V::load(reinterpret_cast<const float*>(base) + i);
  }
  static V load(const uint8_t* base, int64_t i, int n) {
    return V::load(reinterpret_cast<const float*>(base) + i, n);
  }
};

template <>
struct Decode<WeightFormat::BFloat16> {
  static constexpr float kPostScale = 1.0f;
  static V load(const uint8_t* base, int64_t i) {
    return V::load_convert(reinterpret_cast<const BFloat16*>(base) + i);
  }
  static V load(const uint8_t* base, int64_t i, int n) {
    return V::load_convert(reinterpret_cast<const BFloat16*>(base) + i, n);
  }
};

template <>
struct Decode<WeightFormat::Float16> {
  static constexpr float kPostScale = 1.0f;
  static V load(const uint8_t* base, int64_t i) {
    return V::load_convert(reinterpret_cast<const Half*>(base) + i);
  }
  static V load(const uint8_t* base, int64_t i, int n) {
    return V::load_convert(reinterpret_cast<const Half*>(base) + i, n);
  }
};

#if defined(__AVX512F__)
// ------------------------------------------------------------------------------- AVX-512
namespace detail {
// 16 byte codes (one per 16-bit lane) -> float16 bits of value * 2^-8.
inline __m256i e4m3_to_f16_scaled(__m256i b16) {
  const __m256i h = _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(b16, 8), 1),
                                     _mm256_set1_epi16(static_cast<int16_t>(0xbf80)));
  const __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(b16, _mm256_set1_epi16(0x7f)),
                                                _mm256_set1_epi16(0x7f));
  return _mm256_mask_mov_epi16(h, nan, _mm256_set1_epi16(0x7e00));
}
inline __mmask16 lanes(int n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

#if defined(__AVX512VBMI__)
// Byte tables of the vpermi2b decode of float8_e4m3fn (the file comment).
struct E4m3Table {
  alignas(64) uint8_t lo[128];        // byte 2 of the float32 bits of value(m) * 2^-8
  alignas(64) uint8_t hi[128];        // byte 3
  alignas(64) uint8_t spread[4][64];  // lanes 16q..16q+15 -> bytes 2, 3 of float32 lanes
};
inline constexpr E4m3Table kE4m3Table = [] {
  E4m3Table t{};
  for (int m = 0; m < 128; ++m) {
    uint32_t bits = 0x7fc00000u;  // m == 0x7f: NaN
    if (m != 0x7f) bits = std::bit_cast<uint32_t>(kE4m3fnValues[m] * (1.0f / 256.0f));
    if ((bits & 0xffffu) != 0) throw "float8_e4m3fn value * 2^-8 is not a bfloat16";
    t.lo[m] = static_cast<uint8_t>(bits >> 16);
    t.hi[m] = static_cast<uint8_t>(bits >> 24);
  }
  for (int q = 0; q < 4; ++q)
    for (int j = 0; j < 16; ++j) {
      t.spread[q][4 * j + 2] = static_cast<uint8_t>(16 * q + j);       // from lo (index < 64)
      t.spread[q][4 * j + 3] = static_cast<uint8_t>(64 + 16 * q + j);  // from hi
    }
  return t;
}();
#endif
}  // namespace detail

template <>
struct Decode<WeightFormat::Float8_e4m3fn> {
  static constexpr float kPostScale = 256.0f;
  static V convert(__m128i b) {
    return _mm512_cvtph_ps(detail::e4m3_to_f16_scaled(_mm256_cvtepu8_epi16(b)));
  }
  // 32 lanes at once: the float16 bit tricks run on full 512-bit vectors of 32 words.
  static void load2(const uint8_t* base, int64_t i, V& lo, V& hi) {
    const __m512i b16 =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + i)));
    const __m512i h = _mm512_and_si512(_mm512_srai_epi16(_mm512_slli_epi16(b16, 8), 1),
                                       _mm512_set1_epi16(static_cast<int16_t>(0xbf80)));
    const __mmask32 nan = _mm512_cmpeq_epi16_mask(_mm512_and_si512(b16, _mm512_set1_epi16(0x7f)),
                                                  _mm512_set1_epi16(0x7f));
    const __m512i f16 = _mm512_mask_mov_epi16(h, nan, _mm512_set1_epi16(0x7e00));
    lo = _mm512_cvtph_ps(_mm512_castsi512_si256(f16));
    hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(f16, 1));
  }
  static V load(const uint8_t* base, int64_t i) {
    return convert(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + i)));
  }
  static V load(const uint8_t* base, int64_t i, int n) {
    return convert(_mm_maskz_loadu_epi8(detail::lanes(n), base + i));
  }
#if defined(__AVX512VBMI__)
  static void load4(const uint8_t* base, int64_t i, V& v0, V& v1, V& v2, V& v3) {
    const auto& t = detail::kE4m3Table;
    auto table = [](const uint8_t* p) { return _mm512_load_si512(p); };
    const __m512i c = _mm512_loadu_si512(base + i);
    const __m512i lo = _mm512_permutex2var_epi8(table(t.lo), c, table(t.lo + 64));
    // hi | (c & 0x80): ternary-logic truth table A | (B & C).
    const __m512i hi =
        _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(table(t.hi), c, table(t.hi + 64)), c,
                                  _mm512_set1_epi8(static_cast<char>(0x80)), 0xf8);
    constexpr __mmask64 kTopBytes = 0xccccccccccccccccull;  // bytes 2 and 3 of each lane
    V* out[4] = {&v0, &v1, &v2, &v3};
    for (int q = 0; q < 4; ++q)
      out[q]->v = _mm512_castsi512_ps(
          _mm512_maskz_permutex2var_epi8(kTopBytes, lo, table(t.spread[q]), hi));
  }
#endif
};

template <>
struct Decode<WeightFormat::Float8_e5m2> {
  static constexpr float kPostScale = 1.0f;
  static V convert(__m128i b) {
    return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
  }
  static void load2(const uint8_t* base, int64_t i, V& lo, V& hi) {
    const __m512i h = _mm512_slli_epi16(
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + i))), 8);
    lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
  static V load(const uint8_t* base, int64_t i) {
    return convert(_mm_loadu_si128(reinterpret_cast<const __m128i*>(base + i)));
  }
  static V load(const uint8_t* base, int64_t i, int n) {
    return convert(_mm_maskz_loadu_epi8(detail::lanes(n), base + i));
  }
};

struct DecodeNvfp4 {
  // 8 bytes -> 16 nibble indices (vpermps reads only the low 4 bits of each lane).
  static V load(const uint8_t* row, int64_t p, float scale) {
    const __m128i w =
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + p / 2)));
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_or_si128(w, _mm_slli_epi16(w, 4)));
    const __m512 table = _mm512_mul_ps(_mm512_loadu_ps(kE2m1Values.data()), _mm512_set1_ps(scale));
    return _mm512_permutexvar_ps(idx, table);
  }
  // Values p .. p+31 (two blocks, scales s0 and s1) from 16 bytes.
  static void load2(const uint8_t* row, int64_t p, float s0, float s1, V& lo, V& hi) {
    const __m256i w =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + p / 2)));
    const __m256i t = _mm256_or_si256(w, _mm256_slli_epi16(w, 4));
    const __m512 table = _mm512_loadu_ps(kE2m1Values.data());
    lo = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(t)),
                               _mm512_mul_ps(table, _mm512_set1_ps(s0)));
    hi = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(t, 1)),
                               _mm512_mul_ps(table, _mm512_set1_ps(s1)));
  }
};

#elif defined(__AVX2__)
// ---------------------------------------------------------------------------------- AVX2
namespace detail {
inline __m128i load8(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}
inline __m128i load_partial(const uint8_t* p, int n) {
  uint8_t tmp[8] = {};
  std::memcpy(tmp, p, n);
  return load8(tmp);
}
}  // namespace detail

template <>
struct Decode<WeightFormat::Float8_e4m3fn> {
  static constexpr float kPostScale = 256.0f;
  static V convert(__m128i b) {
    const __m128i b16 = _mm_cvtepu8_epi16(b);
    const __m128i h = _mm_and_si128(_mm_srai_epi16(_mm_slli_epi16(b16, 8), 1),
                                    _mm_set1_epi16(static_cast<int16_t>(0xbf80)));
    const __m128i nan =
        _mm_cmpeq_epi16(_mm_and_si128(b16, _mm_set1_epi16(0x7f)), _mm_set1_epi16(0x7f));
    return _mm256_cvtph_ps(_mm_blendv_epi8(h, _mm_set1_epi16(0x7e00), nan));
  }
  static V load(const uint8_t* base, int64_t i) { return convert(detail::load8(base + i)); }
  static V load(const uint8_t* base, int64_t i, int n) {
    return convert(detail::load_partial(base + i, n));
  }
};

template <>
struct Decode<WeightFormat::Float8_e5m2> {
  static constexpr float kPostScale = 1.0f;
  static V convert(__m128i b) { return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8)); }
  static V load(const uint8_t* base, int64_t i) { return convert(detail::load8(base + i)); }
  static V load(const uint8_t* base, int64_t i, int n) {
    return convert(detail::load_partial(base + i, n));
  }
};

struct DecodeNvfp4 {
  // 4 bytes -> 8 nibbles; vpermps looks up the low 3 bits (magnitude), bit 3 is the sign.
  static V load(const uint8_t* row, int64_t p, float scale) {
    int32_t bits;
    std::memcpy(&bits, row + p / 2, 4);
    const __m128i w = _mm_cvtepu8_epi16(_mm_cvtsi32_si128(bits));
    const __m256i idx = _mm256_cvtepu8_epi32(_mm_or_si128(w, _mm_slli_epi16(w, 4)));
    const __m256 table = _mm256_mul_ps(_mm256_loadu_ps(kE2m1Values.data()), _mm256_set1_ps(scale));
    const __m256 mag = _mm256_permutevar8x32_ps(table, idx);
    const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(idx, 28), _mm256_set1_epi32(INT32_MIN));
    return _mm256_xor_ps(mag, _mm256_castsi256_ps(sign));
  }
};

#else
// ------------------------------------------------------------------------------- generic
template <WeightFormat F>
struct DecodeTable {
  static constexpr float kPostScale = 1.0f;
  static V load(const uint8_t* base, int64_t i, int n = kLanes) {
    const auto& table = F == WeightFormat::Float8_e4m3fn ? kE4m3fnValues : kE5m2Values;
    V r(0.0f);
    for (int l = 0; l < n; ++l) r.v[l] = table[base[i + l]];
    return r;
  }
};
template <>
struct Decode<WeightFormat::Float8_e4m3fn> : DecodeTable<WeightFormat::Float8_e4m3fn> {};
template <>
struct Decode<WeightFormat::Float8_e5m2> : DecodeTable<WeightFormat::Float8_e5m2> {};

struct DecodeNvfp4 {
  static V load(const uint8_t* row, int64_t p, float scale) {
    V r;
    for (int l = 0; l < kLanes; ++l) {
      const uint8_t b = row[(p + l) / 2];
      r.v[l] = kE2m1Values[((p + l) & 1) ? (b >> 4) : (b & 0xf)] * scale;
    }
    return r;
  }
};
#endif

}  // namespace tessera::gemm::formats::TS_ISA
