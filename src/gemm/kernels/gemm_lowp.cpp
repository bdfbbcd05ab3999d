// Low-precision GEMM kernels for every ISA (contracts: lowp_kernels.h).
//
//   bf16_avx512_14x32: 14 rows x 2 zmm of 16 float lanes, like sgemm_avx512_14x32, but each
//                      k step is a pair: per pair 2 B loads (32 columns x 2 k of bf16), 14
//                      32-bit broadcasts of A pairs and 28 vdpbf16ps, i.e. twice the
//                      multiply-adds of a float32 FMA step for the same instruction count.
//                      Compiled with the avx512bf16 target only around the kernel, and listed
//                      in the table only when cpuid reports AVX512_BF16.
//   bf16_amx_32x32:    2 x 2 AMX tiles of 16 x 16 float32 accumulators; per 16 k-pairs two A
//                      tiles (16 rows x 32 bf16 each) and two B tiles (16 pairs x 16 columns)
//                      feed four TDPBF16PS, 16 x 16 x 32 multiply-adds each. Each call reads
//                      the thread's tile shapes (STTILECFG) and loads its own (LDTILECFG) only
//                      where they differ: another library in the same thread may have
//                      configured others since, and loading on every call measured 8-9%
//                      slower (it waits for the previous call's tile stores). Listed only
//                      where the CPU has AMX-BF16 and the OS granted the tile state
//                      (request_amx_tiles()).
//   bf16_pair_gain:    times vdpbf16ps against vfmadd231ps chains on this core (the driver
//                      keeps the pair kernel only where it wins; lowp.h, bf16_path()).
//   store_tile:        the epilogue over Tessera's Vec<float> of the ISA (16, 8 or 4 lanes):
//                      scale, bias, beta * C and the rounding to bfloat16/float16/float32.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>

#include "gemm/kernels/lowp_kernels.h"
#include "tessera/core/half.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/amx_tiles.h"
#include "core/cpu_features.h"
#include "core/vec.h"

namespace tessera::cpu::TS_ISA {
namespace {

[[maybe_unused]] volatile float g_probe_sink;

#if defined(__AVX512F__)
#pragma GCC push_options
#pragma GCC target("avx512bf16")
void bf16_avx512_14x32(int64_t kp, const uint16_t* __restrict a, const uint16_t* __restrict b,
                       float* c, int64_t ldc, bool accumulate) {
  constexpr int MR = 14;
  __m512 acc[MR][2];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t q = 0; q < kp; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + 32);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      int32_t pair;
      std::memcpy(&pair, a + 2 * i, sizeof(pair));
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(pair);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
    a += 2 * MR;
    b += 64;
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_loadu_ps(row));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_loadu_ps(row + 16));
    }
    _mm512_storeu_ps(row, acc[i][0]);
    _mm512_storeu_ps(row + 16, acc[i][1]);
  }
}

#pragma GCC pop_options

__attribute__((target("amx-tile,amx-bf16"))) void bf16_amx_32x32(int64_t kp,
                                                                 const uint16_t* __restrict a,
                                                                 const uint16_t* __restrict b,
                                                                 float* c, int64_t ldc,
                                                                 bool accumulate) {
  // Tiles 0-3 C (16 rows x 16 float32), 4-5 A (16 rows x 32 bf16), 6-7 B (16 pairs x 16
  // columns x 2 bf16): every one 16 rows of 64 bytes.
  static constexpr AmxTileConfig config = amx_full_tiles();
  AmxTileConfig current;
  _tile_storeconfig(&current);
  if (std::memcmp(&current, &config, sizeof(config)) != 0) _tile_loadconfig(&config);
  const int64_t ldc_bytes = ldc * 4;
  if (accumulate) {
    _tile_loadd(0, c, ldc_bytes);
    _tile_loadd(1, c + 16, ldc_bytes);
    _tile_loadd(2, c + 16 * ldc, ldc_bytes);
    _tile_loadd(3, c + 16 * ldc + 16, ldc_bytes);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t q = 0; q < kp; q += 16) {
    _tile_loadd(4, a, 64);  // rows 0-15 x 32 k
    _tile_loadd(5, a + 512, 64);
    _tile_loadd(6, b, 128);  // 16 pairs x 32 columns x 2: rows of 128 bytes
    _tile_loadd(7, b + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    a += 1024;
    b += 1024;
  }
  _tile_stored(0, c, ldc_bytes);
  _tile_stored(1, c + 16, ldc_bytes);
  _tile_stored(2, c + 16 * ldc, ldc_bytes);
  _tile_stored(3, c + 16 * ldc + 16, ldc_bytes);
}

#pragma GCC push_options
#pragma GCC target("avx512bf16")

// Seconds for `iters` rounds of kChains independent chains acc = step(acc): the throughput of
// the step's instruction on this core, latency hidden. (Inside the avx512bf16 region, so the
// vdpbf16ps step inlines; the FMA step needs nothing more.)
constexpr int kChains = 12;

template <class Step>
double time_chains(int64_t iters, Step step) {
  __m512 acc[kChains];
  // Distinct starting values: identical chains would be folded into one (latency-bound).
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = step(acc[k]);
  const auto t1 = std::chrono::steady_clock::now();
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  g_probe_sink = lanes[0];
  return std::chrono::duration<double>(t1 - t0).count();
}

double time_dpbf16(int64_t iters) {
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0
  const __m512bh y = (__m512bh)_mm512_set1_epi16(0x3380);  // ~6e-8
  return time_chains(iters, [&](__m512 a) { return _mm512_dpbf16_ps(a, x, y); });
}

double time_fma(int64_t iters) {
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  return time_chains(iters, [&](__m512 a) { return _mm512_fmadd_ps(a, x, y); });
}

// Multiply-adds per second of the pair kernel's instruction over the float32 kernel's: a
// vdpbf16ps does 32 of them, a vfmadd231ps 16. Best of five alternating rounds of 0.05-0.2 ms each,
// so a preempted round does not decide.
double bf16_pair_gain_avx512() {
  constexpr int64_t kIters = 8000;
  double dp = 1e30, fma = 1e30;
  time_dpbf16(kIters / 4);  // warm the unit up
  for (int r = 0; r < 5; ++r) {
    dp = std::min(dp, time_dpbf16(kIters));
    fma = std::min(fma, time_fma(kIters));
  }
  return (32.0 / dp) / (16.0 / fma);
}
#pragma GCC pop_options
#endif

// One row of the epilogue into contiguous T: out = acc * scale [* col] [+ bias] [+ beta * c].
// The optional terms are template flags, decided once per tile: tested per vector, they and
// the per-call set-up were most of the epilogue's time (6% of a 512^3 bfloat16 product).
template <class T, bool kCol, bool kBias, bool kBeta>
void store_row(const float* acc, int64_t nv, float scale, const float* col, const float* bias,
               float beta, T* c) {
  using V = vec::TS_ISA::Vec<float>;
  constexpr int L = V::kSize;
  const V vs(scale), vb(beta);
  int64_t j = 0;
  for (; j + L <= nv; j += L) {
    V v = V::load(acc + j) * vs;
    if constexpr (kCol) v = v * V::load(col + j);
    if constexpr (kBias) v = v + V::load(bias + j);
    if constexpr (kBeta) v = V::fmadd(vb, V::load_convert(c + j), v);
    v.store_convert(c + j);
  }
  if (j == nv) return;
  const int n = static_cast<int>(nv - j);
  V v = V::load(acc + j, n) * vs;
  if constexpr (kCol) v = v * V::load(col + j, n);
  if constexpr (kBias) v = v + V::load(bias + j, n);
  if constexpr (kBeta) v = V::fmadd(vb, V::load_convert(c + j, n), v);
  v.store_convert(c + j, n);
}

template <class T, bool kCol, bool kBias, bool kBeta>
void store_rows(const LowpTile& t) {
  constexpr int64_t kMaxRow = 256;
  for (int64_t i = 0; i < t.mv; ++i) {
    const float scale = t.row_scale ? t.alpha * t.row_scale[i] : t.alpha;
    T* crow = static_cast<T*>(t.c) + i * t.c_rs;
    if (t.c_cs == 1) {
      store_row<T, kCol, kBias, kBeta>(t.acc + i * t.ld, t.nv, scale, t.col_scale, t.bias, t.beta,
                                       crow);
      continue;
    }
    // Strided C: through a contiguous row, so that both layouts round identically.
    for (int64_t j0 = 0; j0 < t.nv; j0 += kMaxRow) {
      const int64_t n = t.nv - j0 < kMaxRow ? t.nv - j0 : kMaxRow;
      T row[kMaxRow];
      if constexpr (kBeta)
        for (int64_t j = 0; j < n; ++j) row[j] = crow[(j0 + j) * t.c_cs];
      store_row<T, kCol, kBias, kBeta>(t.acc + i * t.ld + j0, n, scale,
                                       kCol ? t.col_scale + j0 : nullptr,
                                       kBias ? t.bias + j0 : nullptr, t.beta, row);
      for (int64_t j = 0; j < n; ++j) crow[(j0 + j) * t.c_cs] = row[j];
    }
  }
}

// f(std::bool_constant<b>{}).
template <class F>
void with_flag(bool b, F&& f) {
  if (b) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

template <class T>
void store_rows(const LowpTile& t) {
  with_flag(t.col_scale != nullptr, [&](auto col) {
    with_flag(t.bias != nullptr, [&](auto bias) {
      with_flag(t.beta != 0.0f, [&](auto beta) {
        store_rows<T, decltype(col)::value, decltype(bias)::value, decltype(beta)::value>(t);
      });
    });
  });
}

void store_tile(const LowpTile& t) {
  switch (t.out) {
    case ScalarType::BFloat16:
      store_rows<BFloat16>(t);
      break;
    case ScalarType::Float16:
      store_rows<Half>(t);
      break;
    default:
      store_rows<float>(t);
      break;
  }
}

}  // namespace

const LowpGemmKernels& lowp_gemm_kernels() {
  static const LowpGemmKernels table = [] {
    LowpGemmKernels t;
    t.isa = gemm_kernels().isa;
    t.f32 = &gemm_kernels();
    t.store = store_tile;
#if defined(__AVX512F__)
    if (cpu_features().avx512_bf16)
      t.bf16 = {bf16_avx512_14x32, 14, 32, "bf16_avx512_14x32", bf16_pair_gain_avx512};
    if (request_amx_tiles())
      t.amx = {bf16_amx_32x32, 32, 32, "bf16_amx_32x32", nullptr, /*a_tiles=*/true,
               /*kp_align=*/16};
#endif
    return t;
  }();
  return table;
}

}  // namespace tessera::cpu::TS_ISA
