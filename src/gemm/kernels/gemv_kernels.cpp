// GEMV kernels (contract in gemv_kernels.h), one template over core/vec.h and the format
// decoders of gemm/formats/decode_vec.h; this file is compiled once per ISA.
//
// Row kernels (W row-major, one dot product per output): a tile of R rows and nx activation
// vectors keeps R * nx vector accumulators; each step loads two vectors of x per activation,
// decodes two vectors of each of the R rows (AVX-512 float8/NVFP4 decoders fill both in one
// full-width pass) and issues 2 R nx FMAs, so R weight streams are in flight at once, each
// also prefetched kPrefetchBytes ahead where that pays (stream_prefetch_pays(), not on AMD).
// A tile's rows are far apart: the call's rows are cut into R equal parts and a tile takes row
// i of each, so every part is read as one long run of W (one core reads memory faster from
// several distant places at once than from neighbouring rows; see reduce_kernels.cpp's
// kReadStreams). Zen 5 VM, `linear` on a [1, K] input, medians of 21 alternations in one
// process against tiles of adjacent rows, two runs: 8192x8192 float32 1.09-1.15x faster on
// one thread (1.06x on two), bfloat16 1.12-1.13x (1.14x), 14336x4096 float32 1.16-1.21x
// (1.13x), bfloat16 1.07-1.08x (1.07x).
// R = 4 (8 for 16-bit weights on AVX-512) for one activation vector, 2 for 2..8; a tile whose
// registers would not hold two steps' x vectors takes one vector per step. A decoder with a
// four-vector form (float8_e4m3fn by table in the avx512vbmi build) runs four-vector steps
// first. Rows left over at the end run as tiles of one row, with the same arithmetic per row;
// each lane accumulates its p values in ascending order.
//
// Column kernels (W column-major, the x^T B form with B row-major): a block of up to kBlock
// outputs is accumulated in a buffer (L2 for up to four activations, L1 for eight, see
// cols_kernel) while the kernel walks p, four columns of W
// per pass (each a contiguous run of the block's rows), so W streams in long runs and every
// output is one sequential FMA chain over p.
#include "gemm/kernels/gemv_kernels.h"

#include <algorithm>

#include "core/prefetch.h"
#include "gemm/formats/decode_vec.h"

#define TS_GEMV_STR2(x) #x
#define TS_GEMV_STR(x) TS_GEMV_STR2(x)

namespace tessera::cpu::TS_ISA {
namespace {

using gemm::WeightFormat;
using gemm::formats::TS_ISA::Decode;
using gemm::formats::TS_ISA::DecodeNvfp4;
using gemm::formats::TS_ISA::kLanes;
using gemm::formats::TS_ISA::V;

// How far ahead of the current position each weight row is prefetched.
constexpr int64_t kPrefetchBytes = 1024;

template <WeightFormat F>
constexpr float post_scale() {
  if constexpr (F == WeightFormat::NVFP4) {
    return 1.0f;
  } else {
    return Decode<F>::kPostScale;
  }
}

template <WeightFormat F>
V load_row(const uint8_t* row, const uint8_t* scales, int64_t p) {
  if constexpr (F == WeightFormat::NVFP4) {
    return DecodeNvfp4::load(row, p, gemm::formats::kE4m3fnValues[scales[p / gemm::kNvfp4Block]]);
  } else {
    return Decode<F>::load(row, p);
  }
}

// Horizontal sum in a fixed pairwise order (spelled out: GCC 12 warns falsely inside
// _mm512_reduce_add_ps when it is inlined here).
inline float horizontal_sum(V v) {
  alignas(64) float t[kLanes];
  v.store(t);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) t[l] += t[l + width];
  return t[0];
}

template <class D>
concept DecodesPairs = requires(const uint8_t* row, V v) {
  D::load2(row, int64_t{0}, v, v);
};
template <class D>
concept DecodesQuads = requires(const uint8_t* row, V v) {
  D::load4(row, int64_t{0}, v, v, v, v);
};
template <class D>
concept DecodesScaledPairs = requires(const uint8_t* row, V v) {
  D::load2(row, int64_t{0}, 1.0f, 1.0f, v, v);
};

// NVFP4 values p .. p+2 kLanes-1 (two blocks) through D's two-vector decoder.
template <class D>
void nvfp4_pair(const uint8_t* row, const uint8_t* scales, int64_t p, V& lo, V& hi) {
  using gemm::formats::kE4m3fnValues;
  D::load2(row, p, kE4m3fnValues[scales[p / gemm::kNvfp4Block]],
           kE4m3fnValues[scales[p / gemm::kNvfp4Block + 1]], lo, hi);
}

// Values p .. p + 2 kLanes - 1 of a row, through the decoder's two-vector form when it has one.
template <WeightFormat F>
void load_row2(const uint8_t* row, const uint8_t* scales, int64_t p, V& lo, V& hi) {
  if constexpr (F == WeightFormat::NVFP4 && DecodesScaledPairs<DecodeNvfp4>) {
    nvfp4_pair<DecodeNvfp4>(row, scales, p, lo, hi);
  } else if constexpr (F != WeightFormat::NVFP4 && DecodesPairs<Decode<F>>) {
    Decode<F>::load2(row, p, lo, hi);
  } else {
    lo = load_row<F>(row, scales, p);
    hi = load_row<F>(row, scales, p + kLanes);
  }
}

inline void store_output(const GemvArgs& a, int64_t i, int m, float sum, float post) {
  float s = (a.alpha * post) * sum;
  if (a.row_scales) s *= a.row_scales[i];
  float* out = a.y + m * a.y_ld + i * a.y_inc;
  *out = a.beta == 0.0f ? s : s + a.beta * *out;
}

// The R rows i0, i0 + step, ..., i0 + (R - 1) step.
template <WeightFormat F, int R, int MX>
void row_tile(const GemvArgs& a, int64_t i0, int64_t step) {
  const uint8_t* rows[R];
  const uint8_t* scales[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = a.w + (i0 + r * step) * a.w_rs;
    scales[r] = a.scales ? a.scales + (i0 + r * step) * a.scale_rs : nullptr;
  }
  V acc[R][MX];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MX; ++m) acc[r][m] = V(0.0f);
  const int64_t k = a.k;
  const bool pf = stream_prefetch_pays();
  int64_t p = 0;
  // Four vectors per step where the format decodes four at once (its table takes ~10
  // registers beside the accumulators, four x vectors per activation and one row's values),
  // then two vectors per step where the accumulators, both x vectors of every activation and
  // the row values fit the vector registers. Each keeps the per-lane order of one at a time.
  if constexpr (F != WeightFormat::NVFP4 && DecodesQuads<Decode<F>>) {
    constexpr bool kQuadSteps = R * MX + 4 * MX + 4 + 10 <= 32;
    for (; kQuadSteps && p + 4 * kLanes <= k; p += 4 * kLanes) {
      V xq[4][MX];
      for (int j = 0; j < 4; ++j)
        for (int m = 0; m < MX; ++m) xq[j][m] = V::load(a.x + m * a.x_ld + p + j * kLanes);
      for (int r = 0; r < R; ++r) {
        if (pf) __builtin_prefetch(ahead(rows[r] + gemm::format_bytes(F, p), kPrefetchBytes));
        V w[4];
        Decode<F>::load4(rows[r], p, w[0], w[1], w[2], w[3]);
        for (int m = 0; m < MX; ++m)
          for (int j = 0; j < 4; ++j) acc[r][m] = V::fmadd(w[j], xq[j][m], acc[r][m]);
      }
    }
  }
  constexpr bool kPairSteps = R * MX + 2 * MX + 2 * R <= (kLanes >= 16 ? 32 : 16);
  for (; kPairSteps && p + 2 * kLanes <= k; p += 2 * kLanes) {
    V x0[MX], x1[MX];
    for (int m = 0; m < MX; ++m) {
      x0[m] = V::load(a.x + m * a.x_ld + p);
      x1[m] = V::load(a.x + m * a.x_ld + p + kLanes);
    }
    for (int r = 0; r < R; ++r) {
      if (pf) __builtin_prefetch(ahead(rows[r] + gemm::format_bytes(F, p), kPrefetchBytes));
      V w0, w1;
      load_row2<F>(rows[r], scales[r], p, w0, w1);
      for (int m = 0; m < MX; ++m) {
        acc[r][m] = V::fmadd(w0, x0[m], acc[r][m]);
        acc[r][m] = V::fmadd(w1, x1[m], acc[r][m]);
      }
    }
  }
  for (; p + kLanes <= k; p += kLanes) {
    V xv[MX];
    for (int m = 0; m < MX; ++m) xv[m] = V::load(a.x + m * a.x_ld + p);
    for (int r = 0; r < R; ++r) {
      if (!kPairSteps && pf)  // the main loop then: it prefetches as the pair loop does
        __builtin_prefetch(ahead(rows[r] + gemm::format_bytes(F, p), kPrefetchBytes));
      const V w = load_row<F>(rows[r], scales[r], p);
      for (int m = 0; m < MX; ++m) acc[r][m] = V::fmadd(w, xv[m], acc[r][m]);
    }
  }
  if constexpr (F != WeightFormat::NVFP4) {  // NVFP4: k is a multiple of 16
    if (p < k) {
      const int n = static_cast<int>(k - p);
      V xv[MX];
      for (int m = 0; m < MX; ++m) xv[m] = V::load(a.x + m * a.x_ld + p, n);
      for (int r = 0; r < R; ++r) {
        const V w = Decode<F>::load(rows[r], p, n);
        for (int m = 0; m < MX; ++m) acc[r][m] = V::fmadd(w, xv[m], acc[r][m]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MX; ++m)
      store_output(a, i0 + r * step, m, horizontal_sum(acc[r][m]), post_scale<F>());
}

// Rows per tile: every activation's x vectors are loaded once per step for all R rows, so R
// divides the x traffic (from L2 once the activations outgrow L1). Eight activations take two
// rows in one-vector steps (16 accumulators, 8 x vectors): one row with two-vector steps read
// W at 6.4 GB/s (k = n = 4096, one thread), bound by 16 x loads per two W vectors.
//
// One activation takes four rows, or eight of a 16-bit format on AVX-512 (26 of the 32
// registers): more weight streams in flight. On the Zen 4 VM, one thread, an 8192x8192
// bfloat16 weight read at 18 GB/s with four rows and at 20-22 with eight (a standalone loop
// of the same arithmetic, alternating); float32 rows gained nothing from eight (19 GB/s both).
template <WeightFormat F>
constexpr bool kSixteenBit = F == WeightFormat::BFloat16 || F == WeightFormat::Float16;

template <WeightFormat F, int MX>
void rows_kernel(const GemvArgs& a) {
  constexpr int R = MX == 1 ? (kSixteenBit<F> && kLanes >= 16 ? 8 : 4) : 2;
  // The rows of a call in R equal parts, row i of every part in one tile: each part is one long
  // run of W (see the file comment).
  const int64_t q = a.rows / R;
  for (int64_t i = 0; i < q; ++i) row_tile<F, R, MX>(a, i, q);
  for (int64_t i = R * q; i < a.rows; ++i) row_tile<F, 1, MX>(a, i, 0);
}

// Eight activation vectors share one pass over W where the registers allow it (32 vector
// registers: 8 accumulators and 16 x vectors per row tile, or 16 broadcasts per column pass);
// otherwise, and for 5..7, the first four run and then the rest, each a pass over W.
constexpr bool kEightVectors = kLanes >= 16;

void split_vectors(const GemvArgs& a, GemvFn first_four, GemvFn rest) {
  GemvArgs lo = a;
  lo.nx = 4;
  first_four(lo);
  GemvArgs hi = a;
  hi.nx = a.nx - 4;
  hi.x = a.x + 4 * a.x_ld;
  hi.y = a.y + 4 * a.y_ld;
  rest(hi);
}

template <WeightFormat F>
void row_fn(const GemvArgs& a) {
  switch (a.nx) {
    case 1:
      return rows_kernel<F, 1>(a);
    case 2:
      return rows_kernel<F, 2>(a);
    case 3:
      return rows_kernel<F, 3>(a);
    case 4:
      return rows_kernel<F, 4>(a);
    default:
      if constexpr (kEightVectors)
        if (a.nx == 8) return rows_kernel<F, 8>(a);
      return split_vectors(a, rows_kernel<F, 4>, row_fn<F>);
  }
}

// acc[m][v..v+n) += sum over the J columns c[j] of W(v.., p+j) * X(m, p+j), in p order.
template <WeightFormat F, int MX, int J, int64_t B>
void col_step(float (*acc)[B], const uint8_t* const* cols, const V (*xb)[J], int64_t v, int n) {
  V w[J];
  for (int j = 0; j < J; ++j)
    w[j] = n == kLanes ? Decode<F>::load(cols[j], v) : Decode<F>::load(cols[j], v, n);
  for (int m = 0; m < MX; ++m) {
    V s = n == kLanes ? V::load(acc[m] + v) : V::load(acc[m] + v, n);
    for (int j = 0; j < J; ++j) s = V::fmadd(w[j], xb[m][j], s);
    if (n == kLanes) {
      s.store(acc[m] + v);
    } else {
      s.store(acc[m] + v, n);
    }
  }
}

template <WeightFormat F, int MX, int J, int64_t B>
void col_pass(const GemvArgs& a, float (*acc)[B], const uint8_t* base, int64_t p, int64_t nb) {
  const uint8_t* cols[J];
  V xb[MX][J];
  for (int j = 0; j < J; ++j) {
    cols[j] = base + (p + j) * a.w_cs;
    for (int m = 0; m < MX; ++m) xb[m][j] = V(a.x[m * a.x_ld + p + j]);
  }
  int64_t v = 0;
  for (; v + kLanes <= nb; v += kLanes) col_step<F, MX, J, B>(acc, cols, xb, v, kLanes);
  if (v < nb) col_step<F, MX, J, B>(acc, cols, xb, v, static_cast<int>(nb - v));
}

// Up to four activations walk four columns of W per pass (16 broadcasts), over blocks of 4096
// outputs: each pass reads 16 KiB runs of W's columns (rows of a row-major B), and the
// accumulators (at most 64 KiB) stay in L2. With blocks of 1024 and 512 outputs, kept in L1,
// the passes read 4 and 2 KiB runs 16 KiB apart, which the prefetchers followed poorly: on the
// Xeon VM, one thread, k = n = 4096, the whole-row blocks measured 1.08-1.28x faster for 1 to
// 4 vectors (both kernels alternating in one process).
//
// Eight activations would need 128 KiB of accumulators, streamed through L2 on every pass
// (with two columns per pass, as 16 broadcasts allow, they held W at about 7 GB/s). They take
// blocks of 512 outputs, whose accumulators stay in L1, and walk four columns per pass as two
// halves of four activations (the second half reads the four 2 KiB runs again from L1/L2); the
// runs of the pass two ahead are prefetched, which the prefetchers did not do alone. 1.18-1.40x
// faster than the two-column passes (same measurement). Every output still sums its columns
// in p order, so it keeps its bits.
template <WeightFormat F, int MX>
void cols_kernel(const GemvArgs& a) {
  constexpr bool kHalves = MX > 4;
  constexpr int64_t kBlock = kHalves ? 512 : 4096;
  constexpr int J = 4;
  constexpr int kHalf = kHalves ? MX / 2 : MX;  // activations per sweep of a pass
  constexpr int64_t kAheadPasses = 2;
  alignas(64) float acc[MX][kBlock];
  GemvArgs hi = a;
  hi.x = a.x + kHalf * a.x_ld;
  for (int64_t i0 = 0; i0 < a.rows; i0 += kBlock) {
    const int64_t nb = std::min(kBlock, a.rows - i0);
    for (int m = 0; m < MX; ++m) std::fill(acc[m], acc[m] + nb, 0.0f);
    const uint8_t* base = a.w + gemm::format_bytes(F, i0);
    const int64_t run_bytes = gemm::format_bytes(F, nb);
    int64_t p = 0;
    for (; p + J <= a.k; p += J) {
      if constexpr (kHalves) {
        const int64_t q = p + kAheadPasses * J;
        for (int j = 0; j < J && q + j < a.k; ++j)
          for (int64_t o = 0; o < run_bytes; o += 64)
            __builtin_prefetch(base + (q + j) * a.w_cs + o);
        col_pass<F, kHalf, J, kBlock>(a, acc, base, p, nb);
        col_pass<F, kHalf, J, kBlock>(hi, acc + kHalf, base, p, nb);
      } else {
        col_pass<F, MX, J, kBlock>(a, acc, base, p, nb);
      }
    }
    for (; p < a.k; ++p) col_pass<F, MX, 1, kBlock>(a, acc, base, p, nb);
    for (int m = 0; m < MX; ++m)
      for (int64_t i = 0; i < nb; ++i) store_output(a, i0 + i, m, acc[m][i], post_scale<F>());
  }
}

template <WeightFormat F>
void col_fn(const GemvArgs& a) {
  switch (a.nx) {
    case 1:
      return cols_kernel<F, 1>(a);
    case 2:
      return cols_kernel<F, 2>(a);
    case 3:
      return cols_kernel<F, 3>(a);
    case 4:
      return cols_kernel<F, 4>(a);
    default:
      if constexpr (kEightVectors)
        if (a.nx == 8) return cols_kernel<F, 8>(a);
      return split_vectors(a, cols_kernel<F, 4>, col_fn<F>);
  }
}

}  // namespace

const GemvKernels& gemv_kernels() {
  static const GemvKernels table{
      TS_GEMV_STR(TS_ISA),
      {row_fn<WeightFormat::Float32>, row_fn<WeightFormat::BFloat16>, row_fn<WeightFormat::Float16>,
       row_fn<WeightFormat::Float8_e4m3fn>, row_fn<WeightFormat::Float8_e5m2>,
       row_fn<WeightFormat::NVFP4>},
      {col_fn<WeightFormat::Float32>, col_fn<WeightFormat::BFloat16>, col_fn<WeightFormat::Float16>,
       col_fn<WeightFormat::Float8_e4m3fn>, col_fn<WeightFormat::Float8_e5m2>, nullptr}};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
