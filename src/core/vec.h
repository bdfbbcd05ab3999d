// Small SIMD wrappers, one set per ISA. Include only from kernel files compiled per ISA
// (src/ops/cpu/*.cpp): everything here lives in tessera::vec::TS_ISA, so the avx512, avx2
// and generic copies never collide. Vec<T> holds kSize lanes of T (float or double):
//
//   Vec<float> a = Vec<float>::load(p), b(2.0f);
//   (a * b + a).store(q);
//   Vec<float>::load(p, n)   // first n lanes, the rest zero (n < kSize): loop tails
//   a.swap_pairs()           // lanes 2j and 2j + 1 exchanged (interleaved complex values)
//
// Transcendentals come from Sleef (1.0-ulp variants) on avx2/avx512 and from libm on the
// generic path. load_convert/store_convert move float16 and bfloat16 through float lanes with
// round-to-nearest-even, matching the scalar conversions in tessera/core/half.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessera/core/half.h"

#if !defined(TS_ISA)
#error "vec.h is for kernel files compiled per ISA (TS_ISA must be defined)"
#endif

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#include <sleef.h>
#endif

namespace tessera::vec::TS_ISA {

template <class T>
struct Vec;

#if defined(__AVX512F__)
// ------------------------------------------------------------------------------- AVX-512
template <>
struct Vec<float> {
  static constexpr int kSize = 16;
  __m512 v;
  Vec() = default;
  Vec(__m512 x) : v(x) {}                 // NOLINT
  Vec(float x) : v(_mm512_set1_ps(x)) {}  // NOLINT
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store(float* p, int n) const { _mm512_mask_storeu_ps(p, mask(n), v); }
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }

  static Vec load_convert(const Half* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Vec load_convert(const Half* p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(n), p));
  }
  static Vec load_convert(const BFloat16* p) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static Vec load_convert(const BFloat16* p, int n) {
    __m256i h = _mm256_maskz_loadu_epi16(mask(n), p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static Vec load_convert(const float* p) { return load(p); }
  static Vec load_convert(const float* p, int n) { return load(p, n); }
  __m256i to_bf16_bits() const {
    __m512i b = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb);
    r = _mm512_srli_epi32(r, 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
    return _mm512_cvtepi32_epi16(r);
  }
  void store_convert(BFloat16* p) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16_bits());
  }
  void store_convert(BFloat16* p, int n) const {
    _mm256_mask_storeu_epi16(p, mask(n), to_bf16_bits());
  }
  void store_convert(Half* p) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  void store_convert(Half* p, int n) const {
    _mm256_mask_storeu_epi16(p, mask(n), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  // Non-temporal store_convert at an aligned p (64 bytes; 32 for the half-width dtypes), for
  // core/loops.h's streamed rows.
  void stream_convert(float* p) const { _mm512_stream_ps(p, v); }
  void stream_convert(BFloat16* p) const {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), to_bf16_bits());
  }
  void stream_convert(Half* p) const {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  void store_convert(float* p) const { store(p); }
  void store_convert(float* p, int n) const { store(p, n); }

  friend Vec operator+(Vec a, Vec b) { return _mm512_add_ps(a.v, b.v); }
  friend Vec operator-(Vec a, Vec b) { return _mm512_sub_ps(a.v, b.v); }
  friend Vec operator*(Vec a, Vec b) { return _mm512_mul_ps(a.v, b.v); }
  friend Vec operator/(Vec a, Vec b) { return _mm512_div_ps(a.v, b.v); }
  Vec operator-() const {
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)));
  }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a.v, b.v, c.v); }
  // Lanes 2j and 2j + 1 exchanged (the real and imaginary parts of interleaved complex values).
  Vec swap_pairs() const { return _mm512_permute_ps(v, 0xB1); }
  // NaN-propagating max/min (as torch.maximum): a NaN in either operand gives NaN.
  static Vec max(Vec a, Vec b) {
    __m512 m = _mm512_max_ps(a.v, b.v);
    return _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(a.v, b.v, _CMP_UNORD_Q),
                              _mm512_add_ps(a.v, b.v));
  }
  static Vec min(Vec a, Vec b) {
    __m512 m = _mm512_min_ps(a.v, b.v);
    return _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(a.v, b.v, _CMP_UNORD_Q),
                              _mm512_add_ps(a.v, b.v));
  }
  // The instruction's max/min: when either operand is NaN the result is `acc`, so a NaN
  // in x is dropped. Callers detect NaN separately (see reduce kernels).
  // Per lane: a < b ? x : y (an unordered compare picks y). copysign: |mag| with sign's sign.
  static Vec select_lt(Vec a, Vec b, Vec x, Vec y) {
    return _mm512_mask_mov_ps(y.v, _mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ), x.v);
  }
  // Whether a < b in every lane (false where either is NaN).
  static bool all_lt(Vec a, Vec b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ) == 0xFFFF; }
  // Per lane: a == b ? x : y (an unordered compare picks y).
  static Vec select_eq(Vec a, Vec b, Vec x, Vec y) {
    return _mm512_mask_mov_ps(y.v, _mm512_cmp_ps_mask(a.v, b.v, _CMP_EQ_OQ), x.v);
  }
  static Vec copysign(Vec mag, Vec sign) {
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(mag.v),
                                                         _mm512_castps_si512(sign.v),
                                                         _mm512_set1_epi32(INT32_MIN), 0xd8));
  }
  static Vec max_fast(Vec x, Vec acc) { return _mm512_max_ps(x.v, acc.v); }
  static Vec min_fast(Vec x, Vec acc) { return _mm512_min_ps(x.v, acc.v); }
  Vec abs() const { return _mm512_abs_ps(v); }
  Vec sqrt() const { return _mm512_sqrt_ps(v); }
  // Tessera's own exp (1.7x Sleef's expf in softmax's exp pass here, within 0.83 ulp of every
  // float32 input, checked exhaustively): exp(x) = 2^n * e^r, n = round(x log2 e), r = x - n ln2
  // in two parts (Cody-Waite), e^r by a degree-6 polynomial on |r| <= ln2/2 (1 + r + c2 r^2 +
  // ... + c6 r^6, c2..c6 fitted for minimal relative error, 5e-9: as accurate as the degree-7
  // Taylor polynomial, one FMA cheaper), and vscalefps for 2^n, which also yields the subnormal
  // results and the overflow to inf. The clamps keep n finite; a NaN passes through them
  // (max/min return their second operand when either is NaN).
  Vec exp() const {
    return Vec(_mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), v)))
        .exp_finite();
  }
  // exp without the clamps, for arguments known to lie in [-150, 88] (NaN passes through).
  // The polynomial goes in Estrin's order, r^2 (c2 + c3 r + r^2 (c4 + c5 r + c6 r^2)), and 1 + r
  // is kept as a sum of two floats (hi + lo, exact) that the small terms join before the last
  // rounding. Horner's six dependent FMAs made this the longest chain in softmax's exp pass;
  // with fewer operations of each vector waiting, more vectors fit in flight: softmax's passes
  // over 16M float32 in cache took 3.4-3.8 instead of 3.7-6.2 ms here, and the bound dropped
  // from 0.91 to 0.83 ulp.
  Vec exp_finite() const {
    const __m512 x = v, one = _mm512_set1_ps(1.0f);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    const __m512 r2 = _mm512_mul_ps(r, r);
    const __m512 p23 = _mm512_fmadd_ps(r, _mm512_set1_ps(0.1666652113199234f),
                                       _mm512_set1_ps(0.4999999701976776f));
    const __m512 p45 = _mm512_fmadd_ps(r, _mm512_set1_ps(0.00836869329214096f),
                                       _mm512_set1_ps(0.04166780784726143f));
    const __m512 p2_6 =
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0.001384711591526866f), r2, p45), r2, p23);
    const __m512 hi = _mm512_add_ps(one, r);  // 1 + r = hi + lo exactly (|r| < 1)
    const __m512 lo = _mm512_add_ps(_mm512_sub_ps(one, hi), r);
    return _mm512_scalef_ps(_mm512_add_ps(hi, _mm512_fmadd_ps(r2, p2_6, lo)), n);
  }
  Vec expm1() const { return Sleef_expm1f16_u10avx512f(v); }
  Vec log() const { return Sleef_logf16_u10avx512f(v); }
  Vec log1p() const { return Sleef_log1pf16_u10avx512f(v); }
  Vec log2() const { return Sleef_log2f16_u10avx512f(v); }
  Vec sin() const { return Sleef_sinf16_u10avx512f(v); }
  Vec cos() const { return Sleef_cosf16_u10avx512f(v); }
  Vec tanh() const { return Sleef_tanhf16_u10avx512f(v); }
  Vec erf() const { return Sleef_erff16_u10avx512f(v); }
  Vec pow(Vec e) const { return Sleef_powf16_u10avx512f(v, e.v); }
  float reduce_add() const { return _mm512_reduce_add_ps(v); }
  float reduce_max() const { return _mm512_reduce_max_ps(v); }
  float reduce_min() const { return _mm512_reduce_min_ps(v); }
};

template <>
struct Vec<double> {
  static constexpr int kSize = 8;
  __m512d v;
  Vec() = default;
  Vec(__m512d x) : v(x) {}                 // NOLINT
  Vec(double x) : v(_mm512_set1_pd(x)) {}  // NOLINT
  static __mmask8 mask(int n) { return static_cast<__mmask8>((1u << n) - 1u); }
  static Vec load(const double* p) { return _mm512_loadu_pd(p); }
  static Vec load(const double* p, int n) { return _mm512_maskz_loadu_pd(mask(n), p); }
  static Vec load_convert(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
  static Vec load_convert(const double* p) { return load(p); }
  static Vec load_convert(const double* p, int n) { return load(p, n); }
  void store(double* p) const { _mm512_storeu_pd(p, v); }
  void stream_convert(double* p) const { _mm512_stream_pd(p, v); }  // p 64-byte aligned
  void store(double* p, int n) const { _mm512_mask_storeu_pd(p, mask(n), v); }
  void store_convert(double* p) const { store(p); }
  void store_convert(double* p, int n) const { store(p, n); }
  friend Vec operator+(Vec a, Vec b) { return _mm512_add_pd(a.v, b.v); }
  friend Vec operator-(Vec a, Vec b) { return _mm512_sub_pd(a.v, b.v); }
  friend Vec operator*(Vec a, Vec b) { return _mm512_mul_pd(a.v, b.v); }
  friend Vec operator/(Vec a, Vec b) { return _mm512_div_pd(a.v, b.v); }
  Vec operator-() const {
    return _mm512_castsi512_pd(
        _mm512_xor_si512(_mm512_castpd_si512(v), _mm512_set1_epi64(INT64_MIN)));
  }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_pd(a.v, b.v, c.v); }
  Vec swap_pairs() const { return _mm512_permute_pd(v, 0x55); }
  static Vec max(Vec a, Vec b) {
    __m512d m = _mm512_max_pd(a.v, b.v);
    return _mm512_mask_mov_pd(m, _mm512_cmp_pd_mask(a.v, b.v, _CMP_UNORD_Q),
                              _mm512_add_pd(a.v, b.v));
  }
  static Vec min(Vec a, Vec b) {
    __m512d m = _mm512_min_pd(a.v, b.v);
    return _mm512_mask_mov_pd(m, _mm512_cmp_pd_mask(a.v, b.v, _CMP_UNORD_Q),
                              _mm512_add_pd(a.v, b.v));
  }
  // The instruction's max/min: when either operand is NaN the result is `acc`, so a NaN
  // in x is dropped. Callers detect NaN separately (see reduce kernels).
  // Per lane: a < b ? x : y (an unordered compare picks y). copysign: |mag| with sign's sign.
  static Vec select_lt(Vec a, Vec b, Vec x, Vec y) {
    return _mm512_mask_mov_pd(y.v, _mm512_cmp_pd_mask(a.v, b.v, _CMP_LT_OQ), x.v);
  }
  static bool all_lt(Vec a, Vec b) { return _mm512_cmp_pd_mask(a.v, b.v, _CMP_LT_OQ) == 0xFF; }
  static Vec select_eq(Vec a, Vec b, Vec x, Vec y) {
    return _mm512_mask_mov_pd(y.v, _mm512_cmp_pd_mask(a.v, b.v, _CMP_EQ_OQ), x.v);
  }
  static Vec copysign(Vec mag, Vec sign) {
    return _mm512_castsi512_pd(_mm512_ternarylogic_epi64(_mm512_castpd_si512(mag.v),
                                                         _mm512_castpd_si512(sign.v),
                                                         _mm512_set1_epi64(INT64_MIN), 0xd8));
  }
  static Vec max_fast(Vec x, Vec acc) { return _mm512_max_pd(x.v, acc.v); }
  static Vec min_fast(Vec x, Vec acc) { return _mm512_min_pd(x.v, acc.v); }
  Vec abs() const { return _mm512_abs_pd(v); }
  Vec sqrt() const { return _mm512_sqrt_pd(v); }
  Vec exp() const { return Sleef_expd8_u10avx512f(v); }
  Vec expm1() const { return Sleef_expm1d8_u10avx512f(v); }
  Vec log() const { return Sleef_logd8_u10avx512f(v); }
  Vec log1p() const { return Sleef_log1pd8_u10avx512f(v); }
  Vec log2() const { return Sleef_log2d8_u10avx512f(v); }
  Vec sin() const { return Sleef_sind8_u10avx512f(v); }
  Vec cos() const { return Sleef_cosd8_u10avx512f(v); }
  Vec tanh() const { return Sleef_tanhd8_u10avx512f(v); }
  Vec erf() const { return Sleef_erfd8_u10avx512f(v); }
  Vec pow(Vec e) const { return Sleef_powd8_u10avx512f(v, e.v); }
  double reduce_add() const { return _mm512_reduce_add_pd(v); }
  double reduce_max() const { return _mm512_reduce_max_pd(v); }
  double reduce_min() const { return _mm512_reduce_min_pd(v); }
};

#elif defined(__AVX2__)
// ---------------------------------------------------------------------------------- AVX2
namespace detail {
inline __m256i tail_mask32(int n) {
  alignas(32) static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n));
}
inline __m256i tail_mask64(int n) {
  alignas(32) static const int64_t kMask[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 4 - n));
}
}  // namespace detail

template <>
struct Vec<float> {
  static constexpr int kSize = 8;
  __m256 v;
  Vec() = default;
  Vec(__m256 x) : v(x) {}                 // NOLINT
  Vec(float x) : v(_mm256_set1_ps(x)) {}  // NOLINT
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec load(const float* p, int n) { return _mm256_maskload_ps(p, detail::tail_mask32(n)); }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store(float* p, int n) const { _mm256_maskstore_ps(p, detail::tail_mask32(n), v); }

  static Vec load_convert(const Half* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Vec load_convert(const BFloat16* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  template <class T>
  static Vec load_convert(const T* p, int n) {
    T tmp[kSize] = {};
    std::memcpy(tmp, p, sizeof(T) * n);
    return load_convert(tmp);
  }
  static Vec load_convert(const float* p) { return load(p); }
  static Vec load_convert(const float* p, int n) { return load(p, n); }
  __m128i to_bf16_bits() const {
    __m256i b = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), nan);
    // pack 8 x u32 (all < 65536) into 8 x u16
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    return _mm_packus_epi32(lo, hi);
  }
  void store_convert(BFloat16* p) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), to_bf16_bits());
  }
  void store_convert(Half* p) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  // Non-temporal store_convert at an aligned p (32 bytes; 16 for the half-width dtypes), for
  // core/loops.h's streamed rows.
  void stream_convert(float* p) const { _mm256_stream_ps(p, v); }
  void stream_convert(BFloat16* p) const {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), to_bf16_bits());
  }
  void stream_convert(Half* p) const {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  template <class T>
  void store_convert(T* p, int n) const {
    T tmp[kSize];
    store_convert(tmp);
    std::memcpy(p, tmp, sizeof(T) * n);
  }
  void store_convert(float* p) const { store(p); }
  void store_convert(float* p, int n) const { store(p, n); }

  friend Vec operator+(Vec a, Vec b) { return _mm256_add_ps(a.v, b.v); }
  friend Vec operator-(Vec a, Vec b) { return _mm256_sub_ps(a.v, b.v); }
  friend Vec operator*(Vec a, Vec b) { return _mm256_mul_ps(a.v, b.v); }
  friend Vec operator/(Vec a, Vec b) { return _mm256_div_ps(a.v, b.v); }
  Vec operator-() const { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a.v, b.v, c.v); }
  Vec swap_pairs() const { return _mm256_permute_ps(v, 0xB1); }
  static Vec max(Vec a, Vec b) {
    return _mm256_blendv_ps(_mm256_max_ps(a.v, b.v), _mm256_add_ps(a.v, b.v),
                            _mm256_cmp_ps(a.v, b.v, _CMP_UNORD_Q));
  }
  static Vec min(Vec a, Vec b) {
    return _mm256_blendv_ps(_mm256_min_ps(a.v, b.v), _mm256_add_ps(a.v, b.v),
                            _mm256_cmp_ps(a.v, b.v, _CMP_UNORD_Q));
  }
  // The instruction's max/min: when either operand is NaN the result is `acc`, so a NaN
  // in x is dropped. Callers detect NaN separately (see reduce kernels).
  // Per lane: a < b ? x : y (an unordered compare picks y). copysign: |mag| with sign's sign.
  static Vec select_lt(Vec a, Vec b, Vec x, Vec y) {
    return _mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ));
  }
  static bool all_lt(Vec a, Vec b) {
    return _mm256_movemask_ps(_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)) == 0xFF;
  }
  static Vec select_eq(Vec a, Vec b, Vec x, Vec y) {
    return _mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_EQ_OQ));
  }
  static Vec copysign(Vec mag, Vec sign) {
    const __m256 m = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(m, mag.v), _mm256_and_ps(m, sign.v));
  }
  static Vec max_fast(Vec x, Vec acc) { return _mm256_max_ps(x.v, acc.v); }
  static Vec min_fast(Vec x, Vec acc) { return _mm256_min_ps(x.v, acc.v); }
  Vec abs() const { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  Vec sqrt() const { return _mm256_sqrt_ps(v); }
  Vec exp() const { return Sleef_expf8_u10avx2(v); }
  Vec exp_finite() const { return exp(); }
  Vec expm1() const { return Sleef_expm1f8_u10avx2(v); }
  Vec log() const { return Sleef_logf8_u10avx2(v); }
  Vec log1p() const { return Sleef_log1pf8_u10avx2(v); }
  Vec log2() const { return Sleef_log2f8_u10avx2(v); }
  Vec sin() const { return Sleef_sinf8_u10avx2(v); }
  Vec cos() const { return Sleef_cosf8_u10avx2(v); }
  Vec tanh() const { return Sleef_tanhf8_u10avx2(v); }
  Vec erf() const { return Sleef_erff8_u10avx2(v); }
  Vec pow(Vec e) const { return Sleef_powf8_u10avx2(v, e.v); }
  float reduce_add() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  float reduce_max() const {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    float m = t[0];
    for (int i = 1; i < 8; ++i) m = t[i] > m ? t[i] : m;
    return m;
  }
  float reduce_min() const {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    float m = t[0];
    for (int i = 1; i < 8; ++i) m = t[i] < m ? t[i] : m;
    return m;
  }
};

template <>
struct Vec<double> {
  static constexpr int kSize = 4;
  __m256d v;
  Vec() = default;
  Vec(__m256d x) : v(x) {}                 // NOLINT
  Vec(double x) : v(_mm256_set1_pd(x)) {}  // NOLINT
  static Vec load(const double* p) { return _mm256_loadu_pd(p); }
  static Vec load(const double* p, int n) { return _mm256_maskload_pd(p, detail::tail_mask64(n)); }
  static Vec load_convert(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
  static Vec load_convert(const double* p) { return load(p); }
  static Vec load_convert(const double* p, int n) { return load(p, n); }
  void store(double* p) const { _mm256_storeu_pd(p, v); }
  void stream_convert(double* p) const { _mm256_stream_pd(p, v); }  // p 32-byte aligned
  void store(double* p, int n) const { _mm256_maskstore_pd(p, detail::tail_mask64(n), v); }
  void store_convert(double* p) const { store(p); }
  void store_convert(double* p, int n) const { store(p, n); }
  friend Vec operator+(Vec a, Vec b) { return _mm256_add_pd(a.v, b.v); }
  friend Vec operator-(Vec a, Vec b) { return _mm256_sub_pd(a.v, b.v); }
  friend Vec operator*(Vec a, Vec b) { return _mm256_mul_pd(a.v, b.v); }
  friend Vec operator/(Vec a, Vec b) { return _mm256_div_pd(a.v, b.v); }
  Vec operator-() const { return _mm256_xor_pd(v, _mm256_set1_pd(-0.0)); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_pd(a.v, b.v, c.v); }
  Vec swap_pairs() const { return _mm256_permute_pd(v, 0x5); }
  static Vec max(Vec a, Vec b) {
    return _mm256_blendv_pd(_mm256_max_pd(a.v, b.v), _mm256_add_pd(a.v, b.v),
                            _mm256_cmp_pd(a.v, b.v, _CMP_UNORD_Q));
  }
  static Vec min(Vec a, Vec b) {
    return _mm256_blendv_pd(_mm256_min_pd(a.v, b.v), _mm256_add_pd(a.v, b.v),
                            _mm256_cmp_pd(a.v, b.v, _CMP_UNORD_Q));
  }
  // The instruction's max/min: when either operand is NaN the result is `acc`, so a NaN
  // in x is dropped. Callers detect NaN separately (see reduce kernels).
  // Per lane: a < b ? x : y (an unordered compare picks y). copysign: |mag| with sign's sign.
  static Vec select_lt(Vec a, Vec b, Vec x, Vec y) {
    return _mm256_blendv_pd(y.v, x.v, _mm256_cmp_pd(a.v, b.v, _CMP_LT_OQ));
  }
  static bool all_lt(Vec a, Vec b) {
    return _mm256_movemask_pd(_mm256_cmp_pd(a.v, b.v, _CMP_LT_OQ)) == 0xF;
  }
  static Vec select_eq(Vec a, Vec b, Vec x, Vec y) {
    return _mm256_blendv_pd(y.v, x.v, _mm256_cmp_pd(a.v, b.v, _CMP_EQ_OQ));
  }
  static Vec copysign(Vec mag, Vec sign) {
    const __m256d m = _mm256_set1_pd(-0.0);
    return _mm256_or_pd(_mm256_andnot_pd(m, mag.v), _mm256_and_pd(m, sign.v));
  }
  static Vec max_fast(Vec x, Vec acc) { return _mm256_max_pd(x.v, acc.v); }
  static Vec min_fast(Vec x, Vec acc) { return _mm256_min_pd(x.v, acc.v); }
  Vec abs() const { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), v); }
  Vec sqrt() const { return _mm256_sqrt_pd(v); }
  Vec exp() const { return Sleef_expd4_u10avx2(v); }
  Vec expm1() const { return Sleef_expm1d4_u10avx2(v); }
  Vec log() const { return Sleef_logd4_u10avx2(v); }
  Vec log1p() const { return Sleef_log1pd4_u10avx2(v); }
  Vec log2() const { return Sleef_log2d4_u10avx2(v); }
  Vec sin() const { return Sleef_sind4_u10avx2(v); }
  Vec cos() const { return Sleef_cosd4_u10avx2(v); }
  Vec tanh() const { return Sleef_tanhd4_u10avx2(v); }
  Vec erf() const { return Sleef_erfd4_u10avx2(v); }
  Vec pow(Vec e) const { return Sleef_powd4_u10avx2(v, e.v); }
  double reduce_add() const {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }
  double reduce_max() const {
    alignas(32) double t[4];
    _mm256_store_pd(t, v);
    double m = t[0];
    for (int i = 1; i < 4; ++i) m = t[i] > m ? t[i] : m;
    return m;
  }
  double reduce_min() const {
    alignas(32) double t[4];
    _mm256_store_pd(t, v);
    double m = t[0];
    for (int i = 1; i < 4; ++i) m = t[i] < m ? t[i] : m;
    return m;
  }
};

#else
// ------------------------------------------------------------------------------- generic
// Plain arrays; the compiler vectorises the lane loops with baseline SSE2.
template <class T, int N>
struct GenericVec {
  static constexpr int kSize = N;
  T v[N];
  GenericVec() = default;
  GenericVec(T x) {  // NOLINT
    for (int i = 0; i < N; ++i) v[i] = x;
  }
  template <class F>
  static GenericVec map(const GenericVec& a, F f) {
    GenericVec r;
    for (int i = 0; i < N; ++i) r.v[i] = f(a.v[i]);
    return r;
  }
  template <class F>
  static GenericVec zip(const GenericVec& a, const GenericVec& b, F f) {
    GenericVec r;
    for (int i = 0; i < N; ++i) r.v[i] = f(a.v[i], b.v[i]);
    return r;
  }
  static GenericVec load(const T* p) {
    GenericVec r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static GenericVec load(const T* p, int n) {
    GenericVec r(T(0));
    std::memcpy(r.v, p, sizeof(T) * n);
    return r;
  }
  template <class S>
  static GenericVec load_convert(const S* p) {
    GenericVec r;
    for (int i = 0; i < N; ++i) r.v[i] = static_cast<T>(static_cast<float>(p[i]));
    return r;
  }
  static GenericVec load_convert(const T* p) { return load(p); }
  template <class S>
  static GenericVec load_convert(const S* p, int n) {
    GenericVec r(T(0));
    for (int i = 0; i < n; ++i) r.v[i] = static_cast<T>(static_cast<float>(p[i]));
    return r;
  }
  static GenericVec load_convert(const T* p, int n) { return load(p, n); }
  void store(T* p) const { std::memcpy(p, v, sizeof(v)); }
  void stream_convert(T* p) const { store(p); }  // no non-temporal stores here: plain
  void store(T* p, int n) const { std::memcpy(p, v, sizeof(T) * n); }
  template <class S>
  void store_convert(S* p) const {
    for (int i = 0; i < N; ++i) p[i] = S(static_cast<float>(v[i]));
  }
  void store_convert(T* p) const { store(p); }
  template <class S>
  void store_convert(S* p, int n) const {
    for (int i = 0; i < n; ++i) p[i] = S(static_cast<float>(v[i]));
  }
  void store_convert(T* p, int n) const { store(p, n); }

  friend GenericVec operator+(const GenericVec& a, const GenericVec& b) {
    return zip(a, b, [](T x, T y) { return x + y; });
  }
  friend GenericVec operator-(const GenericVec& a, const GenericVec& b) {
    return zip(a, b, [](T x, T y) { return x - y; });
  }
  friend GenericVec operator*(const GenericVec& a, const GenericVec& b) {
    return zip(a, b, [](T x, T y) { return x * y; });
  }
  friend GenericVec operator/(const GenericVec& a, const GenericVec& b) {
    return zip(a, b, [](T x, T y) { return x / y; });
  }
  GenericVec operator-() const {
    return map(*this, [](T x) { return -x; });
  }
  static GenericVec fmadd(const GenericVec& a, const GenericVec& b, const GenericVec& c) {
    GenericVec r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i];
    return r;
  }
  static GenericVec max(const GenericVec& a, const GenericVec& b) {
    return zip(a, b, [](T x, T y) { return (x != x || y != y) ? x + y : (x > y ? x : y); });
  }
  static GenericVec min(const GenericVec& a, const GenericVec& b) {
    return zip(a, b, [](T x, T y) { return (x != x || y != y) ? x + y : (x < y ? x : y); });
  }
  // As the x86 instructions: when either operand is NaN the result is `acc`.
  static GenericVec select_lt(const GenericVec& a, const GenericVec& b, const GenericVec& x,
                              const GenericVec& y) {
    GenericVec r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] < b.v[i] ? x.v[i] : y.v[i];
    return r;
  }
  static bool all_lt(const GenericVec& a, const GenericVec& b) {
    for (int i = 0; i < N; ++i)
      if (!(a.v[i] < b.v[i])) return false;
    return true;
  }
  static GenericVec select_eq(const GenericVec& a, const GenericVec& b, const GenericVec& x,
                              const GenericVec& y) {
    GenericVec r;
    for (int i = 0; i < N; ++i) r.v[i] = a.v[i] == b.v[i] ? x.v[i] : y.v[i];
    return r;
  }
  static GenericVec copysign(const GenericVec& mag, const GenericVec& sign) {
    return zip(mag, sign, [](T m, T s) { return std::copysign(m, s); });
  }
  static GenericVec max_fast(const GenericVec& x, const GenericVec& acc) {
    return zip(x, acc, [](T a, T b) { return a > b ? a : b; });
  }
  static GenericVec min_fast(const GenericVec& x, const GenericVec& acc) {
    return zip(x, acc, [](T a, T b) { return a < b ? a : b; });
  }
  GenericVec abs() const {
    return map(*this, [](T x) { return std::fabs(x); });
  }
  GenericVec sqrt() const {
    return map(*this, [](T x) { return std::sqrt(x); });
  }
  GenericVec exp() const {
    return map(*this, [](T x) { return std::exp(x); });
  }
  GenericVec exp_finite() const { return exp(); }
  GenericVec expm1() const {
    return map(*this, [](T x) { return std::expm1(x); });
  }
  GenericVec log() const {
    return map(*this, [](T x) { return std::log(x); });
  }
  GenericVec log1p() const {
    return map(*this, [](T x) { return std::log1p(x); });
  }
  GenericVec log2() const {
    return map(*this, [](T x) { return std::log2(x); });
  }
  GenericVec sin() const {
    return map(*this, [](T x) { return std::sin(x); });
  }
  GenericVec cos() const {
    return map(*this, [](T x) { return std::cos(x); });
  }
  GenericVec tanh() const {
    return map(*this, [](T x) { return std::tanh(x); });
  }
  GenericVec erf() const {
    return map(*this, [](T x) { return std::erf(x); });
  }
  GenericVec pow(const GenericVec& e) const {
    return zip(*this, e, [](T x, T y) { return std::pow(x, y); });
  }
  T reduce_add() const {
    T s = 0;
    for (int i = 0; i < N; ++i) s += v[i];
    return s;
  }
  T reduce_max() const {
    T m = v[0];
    for (int i = 1; i < N; ++i) m = v[i] > m ? v[i] : m;
    return m;
  }
  T reduce_min() const {
    T m = v[0];
    for (int i = 1; i < N; ++i) m = v[i] < m ? v[i] : m;
    return m;
  }
  GenericVec swap_pairs() const {
    GenericVec r;
    for (int i = 0; i < N; i += 2) r.v[i] = v[i + 1], r.v[i + 1] = v[i];
    return r;
  }
};
template <>
struct Vec<float> : GenericVec<float, 4> {
  using GenericVec::GenericVec;
  Vec(const GenericVec& g) : GenericVec(g) {}  // NOLINT
};
template <>
struct Vec<double> : GenericVec<double, 2> {
  using GenericVec::GenericVec;
  Vec(const GenericVec& g) : GenericVec(g) {}  // NOLINT
};
#endif

// Lane i holds float(i). Compared with a count it picks a vector's first lanes:
// select_lt(lane_indices(), Vec<float>(n), x, y) is x in lanes below n, y in the others.
inline Vec<float> lane_indices() {
  alignas(64) static constexpr float kIndex[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                   8, 9, 10, 11, 12, 13, 14, 15};
  static_assert(Vec<float>::kSize <= 16);
  return Vec<float>::load(kIndex);
}

}  // namespace tessera::vec::TS_ISA
