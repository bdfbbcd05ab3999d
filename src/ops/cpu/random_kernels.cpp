// Philox blocks and their uniform/normal transforms (stream layout: random_kernels.h).
//
// Everything is written as loops over the 16 lanes of a block of counters, which the compiler
// turns into vector code for the ISA this file is built for. The transforms are exact where
// they can be: uniforms are integers times a power of two, the Box-Muller angle is reduced to
// its quadrant in integer arithmetic, and the radius takes log(u) or log1p(-v) from whichever
// of u, v = 1 - u is the smaller (exact) value, so the radius keeps full precision near zero and
// the tail reaches 6.6 sigma (float) and 8.5 sigma (double).
#include "ops/cpu/random_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace tessera::cpu::TS_ISA {

namespace {

constexpr int L = kPhiloxLanes;

// a * b + c, fused on ISAs that have FMA (both give the same bits there).
template <class T>
inline T mul_add(T a, T b, T c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

struct Block {
  alignas(64) uint32_t w[4][L];
};

// Philox 4x32-10 on counters s.base + 16 * block + i, lane i (as philox4x32, lane by lane).
inline uint64_t first_counter(const PhiloxStream& s, int64_t block) {
  return s.base + static_cast<uint64_t>(block) * L;
}

inline void philox_block_scalar(const PhiloxStream& s, int64_t block, Block& out) {
  for (int i = 0; i < L; ++i) {
    const PhiloxWords w = philox4x32(s.seed, first_counter(s, block) + static_cast<uint64_t>(i));
    for (int j = 0; j < 4; ++j) out.w[j][i] = w.w[j];
  }
}

#if defined(__AVX2__)
// The x86 versions hold each counter's words in the low halves of 64-bit lanes, where one
// vpmuludq gives the whole 32x32 -> 64-bit product (the high halves are don't-care: vpmuludq
// and the final narrowing ignore them). The high word moves down by a shuffle (port 5) rather
// than a shift, which would compete with the multiplies for port 0.
#if defined(__AVX512F__)
struct Words64 {  // 8 counters
  __m512i v;
  static constexpr int kLanes = 8;
  static Words64 counters(uint64_t first) {
    return {_mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(first)),
                             _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7))};
  }
  static Words64 set1(uint32_t x) { return {_mm512_set1_epi64(x)}; }
  Words64 high() const { return {_mm512_shuffle_epi32(v, _MM_PERM_DDBB)}; }
  static Words64 mul(Words64 a, Words64 m) { return {_mm512_mul_epu32(a.v, m.v)}; }
  static Words64 xor3(Words64 a, Words64 b, Words64 c) {
    return {_mm512_ternarylogic_epi64(a.v, b.v, c.v, 0x96)};
  }
  void store_low(uint32_t* p) const {
    _mm256_store_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi64_epi32(v));
  }
};
#else
struct Words64 {  // 4 counters
  __m256i v;
  static constexpr int kLanes = 4;
  static Words64 counters(uint64_t first) {
    return {_mm256_add_epi64(_mm256_set1_epi64x(static_cast<int64_t>(first)),
                             _mm256_setr_epi64x(0, 1, 2, 3))};
  }
  static Words64 set1(uint32_t x) { return {_mm256_set1_epi64x(x)}; }
  Words64 high() const { return {_mm256_shuffle_epi32(v, 0xF5)}; }
  static Words64 mul(Words64 a, Words64 m) { return {_mm256_mul_epu32(a.v, m.v)}; }
  static Words64 xor3(Words64 a, Words64 b, Words64 c) {
    return {_mm256_xor_si256(_mm256_xor_si256(a.v, b.v), c.v)};
  }
  void store_low(uint32_t* p) const {
    const __m256i even = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0));
    _mm_store_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(even));
  }
};
#endif

// Blocks `block` and `block + 1`, four registers of counters at a time: independent chains of
// multiplies, interleaved so the multiplier's latency is hidden.
inline void philox_pair(const PhiloxStream& s, int64_t block, Block* out) {
  constexpr int kChains = 4, kRegisters = 2 * L / Words64::kLanes;
  const uint64_t first = first_counter(s, block);
  for (int g = 0; g < kRegisters; g += kChains) {
    Words64 c0[kChains], c1[kChains], c2[kChains], c3[kChains];
    for (int n = 0; n < kChains; ++n) {
      c0[n] = Words64::counters(first + static_cast<uint64_t>((g + n) * Words64::kLanes));
      c1[n] = c0[n].high();
      c2[n] = c3[n] = Words64::set1(0);
    }
    const Words64 m0 = Words64::set1(0xD2511F53u), m1 = Words64::set1(0xCD9E8D57u);
    uint32_t k0 = static_cast<uint32_t>(s.seed), k1 = static_cast<uint32_t>(s.seed >> 32);
    for (int r = 0; r < 10; ++r) {
      for (int n = 0; n < kChains; ++n) {
        const Words64 p0 = Words64::mul(c0[n], m0), p1 = Words64::mul(c2[n], m1);
        c0[n] = Words64::xor3(p1.high(), c1[n], Words64::set1(k0));
        c2[n] = Words64::xor3(p0.high(), c3[n], Words64::set1(k1));
        c1[n] = p1;
        c3[n] = p0;
      }
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int n = 0; n < kChains; ++n) {
      const int lane = (g + n) * Words64::kLanes;  // of the pair's 32
      Block& o = out[lane / L];
      c0[n].store_low(o.w[0] + lane % L);
      c1[n].store_low(o.w[1] + lane % L);
      c2[n].store_low(o.w[2] + lane % L);
      c3[n].store_low(o.w[3] + lane % L);
    }
  }
}
#else
inline void philox_pair(const PhiloxStream& s, int64_t block, Block* out) {
  philox_block_scalar(s, block, out[0]);
  philox_block_scalar(s, block + 1, out[1]);
}
#endif

inline uint64_t join(uint32_t hi, uint32_t lo) {
  return static_cast<uint64_t>(hi) << 32 | lo;
}

// -------------------------------------------------------------------------------- float

// ln(x) for x = 2^e (1 + f), f in [sqrt(1/2) - 1, sqrt(2) - 1], as fdlibm's logf: s = f / (2 + f),
// log1p(f) = f - f^2/2 + s (f^2/2 + R(s^2)).
inline float log_parts(float e, float f) {
  const float s = f / (2.0f + f), z = s * s, w = z * z;
  const float t1 = w * mul_add(w, 0.24279078841f, 0.40000972152f);
  const float t2 = z * mul_add(w, 0.28498786688f, 0.66666662693f);
  const float hfsq = 0.5f * f * f;
  const float low = mul_add(s, hfsq + (t1 + t2), e * 9.0580006145e-06f);
  return mul_add(e, 6.9313812256e-01f, (low - hfsq) + f);
}

// Splits a positive normal x into (e, f) for log_parts.
inline void split_log(float x, float& e, float& f) {
  const int32_t bits = std::bit_cast<int32_t>(x) + (0x3f800000 - 0x3f3504f3);
  e = static_cast<float>((bits >> 23) - 127);
  f = std::bit_cast<float>((bits & 0x007fffff) + 0x3f3504f3) - 1.0f;
}

// -2 ln(u) from a word: u = (2 m + 1) 2^-32 for m = w >> 1 in the lower half, else v = 1 - u
// of that form, ln(u) = log1p(-v).
inline float minus_two_log_uniform(uint32_t word) {
  const int32_t j = static_cast<int32_t>(word >> 1);  // 31 bits
  const bool upper = j >= (1 << 30);
  const int32_t m = upper ? 0x7fffffff - j : j;  // < 2^30
  const float t = static_cast<float>(2 * m + 1) * 0x1p-32f;
  float e, f;
  split_log(upper ? 1.0f - t : t, e, f);
  const bool direct = upper & (t <= 0.29289321881f);  // 1 - t in range: f = -t exactly
  return -2.0f * log_parts(direct ? 0.0f : e, direct ? -t : f);
}

// cos and sin of 2 pi u for u = (word >> 8) 2^-24: u = q/4 + r with |r| <= 1/8 in integers, then
// Taylor polynomials of degree 10 (cos) and 9 (sin) in r (error below 3e-9 for |2 pi r| <= pi/4).
inline void cos_sin_turn(uint32_t word, float& c, float& s) {
  const int32_t x = static_cast<int32_t>(word >> 8);
  const int32_t q = (x + (1 << 21)) >> 22;
  const float r = static_cast<float>(x - (q << 22)) * 0x1p-24f;
  const float r2 = r * r;
  float ps = 42.058693944897655f, pc = -26.4262567833744f;
  ps = mul_add(ps, r2, -76.70585975306139f);
  pc = mul_add(pc, r2, 60.24464137187666f);
  ps = mul_add(ps, r2, 81.60524927607506f);
  pc = mul_add(pc, r2, -85.45681720669373f);
  ps = mul_add(ps, r2, -41.34170224039976f);
  pc = mul_add(pc, r2, 64.9393940226683f);
  ps = mul_add(ps, r2, 6.283185307179586f);
  pc = mul_add(pc, r2, -19.739208802178716f);
  const float sr = ps * r, cr = mul_add(pc, r2, 1.0f);
  // Quadrant q (mod 4): cos = (c, -s, -c, s), sin = (s, c, -s, -c).
  const bool swap = q & 1;
  const float cm = swap ? sr : cr, sm = swap ? cr : sr;
  c = ((q + 1) & 2) ? -cm : cm;
  s = (q & 2) ? -sm : sm;
}

// ------------------------------------------------------------------------------- double

inline double log_parts(double e, double f) {
  const double s = f / (2.0 + f), z = s * s, w = z * z;
  double t1 = mul_add(w, 1.531383769920937332e-01, 2.222219843214978396e-01);
  t1 = w * mul_add(w, t1, 3.999999999940941908e-01);
  double t2 = mul_add(w, 1.479819860511658591e-01, 1.818357216161805012e-01);
  t2 = mul_add(w, t2, 2.857142874366239149e-01);
  t2 = z * mul_add(w, t2, 6.666666666666735130e-01);
  const double hfsq = 0.5 * f * f;
  const double low = mul_add(s, hfsq + (t1 + t2), e * 1.90821492927058770002e-10);
  return mul_add(e, 6.93147180369123816490e-01, (low - hfsq) + f);
}

inline void split_log(double x, double& e, double& f) {
  const int64_t bits = std::bit_cast<int64_t>(x) + (0x3ff0000000000000 - 0x3fe6a09e667f3bcd);
  e = static_cast<double>(static_cast<int32_t>(bits >> 52) - 1023);
  f = std::bit_cast<double>((bits & 0x000fffffffffffff) + 0x3fe6a09e667f3bcd) - 1.0;
}

// Exact integer -> double conversions (there is no packed 64-bit conversion before AVX-512DQ):
// for 0 <= n < 2^52, and for |n| < 2^51.
inline double uint52_to_double(int64_t n) {
  return std::bit_cast<double>(std::bit_cast<int64_t>(0x1p52) | n) - 0x1p52;
}
inline double int51_to_double(int64_t n) {
  return std::bit_cast<double>(std::bit_cast<int64_t>(0x1.8p52) + n) - 0x1.8p52;
}

inline double minus_two_log_uniform(uint64_t bits) {
  const int64_t j = static_cast<int64_t>(bits >> 12);  // 52 bits
  const bool upper = j >= (int64_t{1} << 51);
  const int64_t m = upper ? ((int64_t{1} << 52) - 1) - j : j;  // < 2^51
  const double t = uint52_to_double(2 * m + 1) * 0x1p-53;
  double e, f;
  split_log(upper ? 1.0 - t : t, e, f);
  const bool direct = upper & (t <= 0.29289321881345254);
  return -2.0 * log_parts(direct ? 0.0 : e, direct ? -t : f);
}

// cos and sin of 2 pi u for u = (bits >> 11) 2^-53; degrees 16 and 15 (error below 7e-17).
inline void cos_sin_turn(uint64_t bits, double& c, double& s) {
  const int64_t x = static_cast<int64_t>(bits >> 11);
  const int64_t q = (x + (int64_t{1} << 50)) >> 51;
  const double r = int51_to_double(x - (q << 51)) * 0x1p-53;
  const double r2 = r * r;
  // (2 pi)^k / k! with alternating signs, highest degree first.
  static constexpr double kSin[] = {-0.7181223017785006, 3.819952584848282,  -15.09464257682299,
                                    42.058693944897655,  -76.70585975306139, 81.60524927607506,
                                    -41.34170224039976,  6.283185307179586};
  static constexpr double kCos[] = {0.28200596845579123, -1.714390711088672, 7.903536371318469,
                                    -26.4262567833744,   60.24464137187666,  -85.45681720669373,
                                    64.9393940226683,    -19.739208802178716};
  double ps = kSin[0], pc = kCos[0];
#pragma GCC unroll 8
  for (int k = 1; k < 8; ++k) {
    ps = mul_add(ps, r2, kSin[k]);
    pc = mul_add(pc, r2, kCos[k]);
  }
  const double sr = ps * r, cr = mul_add(pc, r2, 1.0);
  const bool swap = q & 1;
  const double cm = swap ? sr : cr, sm = swap ? cr : sr;
  c = ((q + 1) & 2) ? -cm : cm;
  s = (q & 2) ? -sm : sm;
}

// ------------------------------------------------------------------------------- driver

// Writes elements [begin, end) to out[0, end - begin) block by block: `transform(block, dst)`
// writes a block's P values.
template <int64_t P, class T, class Transform>
void fill_blocks(T* out, int64_t begin, int64_t end, const PhiloxStream& s, Transform transform) {
  Block blocks[2];
  alignas(64) T scratch[P];
  for (int64_t first = begin / P; first * P < end; first += 2) {
    philox_pair(s, first, blocks);
    for (int64_t b = first; b < first + 2 && b * P < end; ++b) {
      const int64_t lo = std::max(begin, b * P), hi = std::min(end, (b + 1) * P);
      if (lo == b * P && hi == (b + 1) * P) {
        transform(blocks[b - first], out + (lo - begin));
      } else {
        transform(blocks[b - first], scratch);
        std::copy(scratch + (lo - b * P), scratch + (hi - b * P), out + (lo - begin));
      }
    }
  }
}

template <class T>
T below(T hi, T lo) {
  return hi > lo ? std::nextafter(hi, lo) : lo;
}

void uniform_float(float* out, int64_t begin, int64_t end, PhiloxStream s, float lo, float hi) {
  const float range = hi - lo, top = below(hi, lo);
  fill_blocks<kFloatDrawsPerBlock>(out, begin, end, s, [=](const Block& b, float* dst) {
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < L; ++i) {
        const float u = static_cast<float>(static_cast<int32_t>(b.w[j][i] >> 8)) * 0x1p-24f;
        const float v = mul_add(u, range, lo);
        dst[j * L + i] = v < hi ? v : top;
      }
  });
}

void uniform_double(double* out, int64_t begin, int64_t end, PhiloxStream s, double lo, double hi) {
  const double range = hi - lo, top = below(hi, lo);
  fill_blocks<kDoubleDrawsPerBlock>(out, begin, end, s, [=](const Block& b, double* dst) {
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < L; ++i) {
        const uint64_t x = join(b.w[2 * j][i], b.w[2 * j + 1][i]) >> 11;
        const double u = static_cast<double>(static_cast<int64_t>(x)) * 0x1p-53;
        const double v = mul_add(u, range, lo);
        dst[j * L + i] = v < hi ? v : top;
      }
  });
}

void normal_float(float* out, int64_t begin, int64_t end, PhiloxStream s, float mean, float std) {
  fill_blocks<kFloatDrawsPerBlock>(out, begin, end, s, [=](const Block& b, float* dst) {
    for (int p = 0; p < 2; ++p)
      for (int i = 0; i < L; ++i) {
        const float radius = std::sqrt(minus_two_log_uniform(b.w[2 * p][i]));
        float c, sn;
        cos_sin_turn(b.w[2 * p + 1][i], c, sn);
        dst[2 * p * L + i] = mul_add(radius * c, std, mean);
        dst[(2 * p + 1) * L + i] = mul_add(radius * sn, std, mean);
      }
  });
}

void normal_double(double* out, int64_t begin, int64_t end, PhiloxStream s, double mean,
                   double std) {
  fill_blocks<kDoubleDrawsPerBlock>(out, begin, end, s, [=](const Block& b, double* dst) {
    for (int i = 0; i < L; ++i) {
      const double radius = std::sqrt(minus_two_log_uniform(join(b.w[0][i], b.w[1][i])));
      double c, sn;
      cos_sin_turn(join(b.w[2][i], b.w[3][i]), c, sn);
      dst[i] = mul_add(radius * c, std, mean);
      dst[L + i] = mul_add(radius * sn, std, mean);
    }
  });
}

void bits64(uint64_t* out, int64_t begin, int64_t end, PhiloxStream s) {
  fill_blocks<kDoubleDrawsPerBlock>(out, begin, end, s, [](const Block& b, uint64_t* dst) {
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < L; ++i) dst[j * L + i] = join(b.w[2 * j][i], b.w[2 * j + 1][i]);
  });
}

}  // namespace

const RandomKernels& random_kernels() {
  static const RandomKernels k{uniform_float, uniform_double, normal_float, normal_double, bits64};
  return k;
}

}  // namespace tessera::cpu::TS_ISA
