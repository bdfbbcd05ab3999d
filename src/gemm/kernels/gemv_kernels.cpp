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
// cols_kernel) while the kernel walks p, eight columns of W (four for float64 or eight
// activations) per pass (each a contiguous run of the block's rows), so W streams in long runs
// and every output is one sequential FMA chain over p.
#include "gemm/kernels/gemv_kernels.h"

#include <algorithm>
#include <type_traits>

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

// How far ahead of the current position each weight row is prefetched (row_tile).
constexpr int64_t kPrefetchBytes = 1024;
// On AMD, where the hardware prefetchers alone keep one activation's rows at the read
// bandwidth, row tiles prefetch only where they fell behind: several activations per pass
// (each step then takes several times as long), every line of a step kAmdPrefetchBytes ahead
// (a step shorter than a line, as bfloat16 with eight activations takes, does not). The Zen 5
// VM, k = n = 4096, one thread, a harness with the prefetches switched on and off (two rounds):
// float32 with 2 / 4 / 8 activations 2.19-2.39 -> 1.76-1.81, 3.33-3.45 -> 2.15-2.30,
// 5.87-6.50 -> 4.25 ms; one activation unchanged in float32 (1.55-1.99 against 1.62-1.83 ms)
// and not clearly faster in bfloat16 (`bench gemv` rows of 8192 x 8192 and 4096 x 14336 within
// noise, a 4096 x 4096 harness 1.2x). 1 KiB ahead was slower than 2, 4 KiB no faster.
constexpr int64_t kAmdPrefetchBytes = 2048;

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
template <class T>
T horizontal_sum(vec::TS_ISA::Vec<T> v) {
  constexpr int kWidth = vec::TS_ISA::Vec<T>::kSize;
  alignas(64) T t[kWidth];
  v.store(t);
  for (int width = kWidth / 2; width > 0; width /= 2)
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

// The vector registers of the ISA (AVX-512 has 32, the others 16): how many accumulators, x
// vectors and weight vectors a tile keeps without spilling.
constexpr int kRegisters = kLanes >= 16 ? 32 : 16;
// Whether a row tile of R rows and MX activations runs two-vector steps: its accumulators, both
// x vectors of every activation and the rows' two values each fit the vector registers.
constexpr bool pair_steps_fit(int R, int MX) {
  return R * MX + 2 * MX + 2 * R <= kRegisters;
}

// What the loops below read and write, per weight type. Formatted<F>: the weight formats
// through their decoders, float32 arithmetic (GemvArgs; `Ptr` addresses bytes). Float64: plain
// float64 weights, activations and outputs (GemvArgsF64; `Ptr` addresses elements). Each gives
// a row's start and an element's address (W(0, i) in the column layout), loads of one, two and
// (optionally) four vectors from it, a masked tail load, and the final scaling and store of an
// output.
template <WeightFormat F>
struct Formatted {
  using Args = GemvArgs;
  using Ptr = const uint8_t*;
  using Vec = V;
  static constexpr int kWidth = kLanes;
  static constexpr bool kSixteenBit = F == WeightFormat::BFloat16 || F == WeightFormat::Float16;
  static constexpr bool kQuads = F != WeightFormat::NVFP4 && DecodesQuads<Decode<F>>;
  static constexpr bool kTail = F != WeightFormat::NVFP4;  // NVFP4: k is a multiple of 16
  static constexpr bool kComplex = false;
  static Ptr row(const Args& a, int64_t i) { return a.w + i * a.w_rs; }
  static Ptr element(const Args& a, int64_t i) { return a.w + gemm::format_bytes(F, i); }
  static Ptr scales(const Args& a, int64_t i) {
    return a.scales ? a.scales + i * a.scale_rs : nullptr;
  }
  static const void* at(Ptr row, int64_t p) { return row + gemm::format_bytes(F, p); }
  static constexpr int64_t bytes(int64_t values) { return gemm::format_bytes(F, values); }
  static Vec load(Ptr row, Ptr scales, int64_t p) { return load_row<F>(row, scales, p); }
  static void load2(Ptr row, Ptr scales, int64_t p, Vec& lo, Vec& hi) {
    load_row2<F>(row, scales, p, lo, hi);
  }
  static void load4(Ptr row, int64_t p, Vec (&w)[4]) {
    if constexpr (kQuads) Decode<F>::load4(row, p, w[0], w[1], w[2], w[3]);
  }
  static Vec load(Ptr row, int64_t p, int n) { return Decode<F>::load(row, p, n); }
  static Vec load(Ptr row, int64_t p) { return Decode<F>::load(row, p); }
  static void store(const Args& a, int64_t i, int m, float sum) {
    float s = (a.alpha * post_scale<F>()) * sum;
    if (a.row_scales) s *= a.row_scales[i];
    float* out = a.y + m * a.y_ld + i * a.y_inc;
    *out = a.beta == 0.0f ? s : s + a.beta * *out;
  }
};

struct Float64 {
  using Args = GemvArgsF64;
  using Ptr = const double*;
  using Vec = vec::TS_ISA::Vec<double>;
  static constexpr int kWidth = Vec::kSize;
  static constexpr bool kSixteenBit = false, kQuads = false, kTail = true, kComplex = false;
  static Ptr row(const Args& a, int64_t i) { return a.w + i * a.w_rs; }
  static Ptr element(const Args& a, int64_t i) { return a.w + i; }
  static Ptr scales(const Args&, int64_t) { return nullptr; }
  static const void* at(Ptr row, int64_t p) { return row + p; }
  static constexpr int64_t bytes(int64_t values) { return 8 * values; }
  static Vec load(Ptr row, Ptr, int64_t p) { return Vec::load(row + p); }
  static void load2(Ptr row, Ptr, int64_t p, Vec& lo, Vec& hi) {
    lo = Vec::load(row + p);
    hi = Vec::load(row + p + kWidth);
  }
  static void load4(Ptr, int64_t, Vec (&)[4]) {}
  static Vec load(Ptr row, int64_t p, int n) { return Vec::load(row + p, n); }
  static Vec load(Ptr row, int64_t p) { return Vec::load(row + p); }
  static void store(const Args& a, int64_t i, int m, double sum) {
    const double s = a.alpha * sum;
    double* out = a.y + m * a.y_ld + i * a.y_inc;
    *out = a.beta == 0.0 ? s : s + a.beta * *out;
  }
};

// Complex rows (the row_complex64/128 contract) through the real view of Base's type:
// output pair m = 2c, 2c + 1 of a row are the real and imaginary parts of its product with
// complex activation c (interleaved at x + c * x_ld): lane sums of w * x and of w * swapped x,
// then Re = even lanes - odd lanes of the first, Im = all lanes of the second.
template <class Base>
struct ComplexRows : Base {
  static constexpr bool kComplex = true;
  // Output 2c + part of row i at y + c * y_ld + part + i * y_inc (real values).
  template <class Args, class T>
  static void store(const Args& a, int64_t i, int m, T sum) {
    const T s = a.alpha * sum;
    T* out = a.y + (m / 2) * a.y_ld + m % 2 + i * a.y_inc;
    *out = a.beta == 0 ? s : s + a.beta * *out;
  }
};

// X's vector at p for output m: activation m, or for complex rows activation m / 2, its real
// and imaginary parts exchanged in odd m (n < kWidth: the first n lanes).
template <class S>
[[gnu::always_inline]] inline typename S::Vec x_vector(const typename S::Args& a, int m, int64_t p,
                                                       int n = S::kWidth) {
  using Vt = typename S::Vec;
  const auto* x = a.x + (S::kComplex ? m / 2 : m) * a.x_ld + p;
  const Vt v = n == S::kWidth ? Vt::load(x) : Vt::load(x, n);
  if constexpr (S::kComplex) return m % 2 ? Vt(v.swap_pairs()) : v;
  return v;
}

// The sum of acc's lanes for output m (complex rows: odd lanes negated in even m).
template <class S>
auto output_sum(typename S::Vec acc, int m) {
  using Vt = typename S::Vec;
  using T = std::remove_cvref_t<decltype(*std::declval<typename S::Args>().y)>;
  if constexpr (S::kComplex) {
    if (m % 2 == 0) {
      alignas(64) T signs[S::kWidth];
      for (int l = 0; l < S::kWidth; ++l) signs[l] = l % 2 ? T(-1) : T(1);
      acc = acc * Vt::load(signs);
    }
  }
  return horizontal_sum(acc);
}

// The R rows i0, i0 + step, ..., i0 + (R - 1) step.
template <class S, int R, int MX>
void row_tile(const typename S::Args& a, int64_t i0, int64_t step) {
  using Vt = typename S::Vec;
  constexpr int L = S::kWidth;
  typename S::Ptr rows[R];
  typename S::Ptr scales[R];
  for (int r = 0; r < R; ++r) {
    rows[r] = S::row(a, i0 + r * step);
    scales[r] = S::scales(a, i0 + r * step);
  }
  Vt acc[R][MX];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MX; ++m) acc[r][m] = Vt(0.0f);
  const int64_t k = a.k;
  // Intel: kPrefetchBytes ahead, once a step; AMD: see kAmdPrefetchBytes.
  constexpr bool kAmdPrefetch = MX > 1;
  const bool intel = stream_prefetch_pays();
  const bool pf = intel || kAmdPrefetch;
  const int64_t pf_ahead = intel ? kPrefetchBytes : kAmdPrefetchBytes;
  // Prefetches a step of `bytes` of row r's weights from element p on: on Intel its first line,
  // on AMD every line.
  const auto prefetch = [&](int r, int64_t p, auto bytes) {
    const void* at = S::at(rows[r], p);
    __builtin_prefetch(ahead(at, pf_ahead));
    if constexpr (decltype(bytes)::value > 64)
      if (!intel)
        for (int64_t o = 64; o < decltype(bytes)::value; o += 64)
          __builtin_prefetch(ahead(at, pf_ahead + o));
  };
  using QuadBytes = std::integral_constant<int64_t, S::bytes(4 * L)>;
  using PairBytes = std::integral_constant<int64_t, S::bytes(2 * L)>;
  using SingleBytes = std::integral_constant<int64_t, S::bytes(L)>;
  int64_t p = 0;
  // Four vectors per step where the format decodes four at once (its table takes ~10
  // registers beside the accumulators, four x vectors per activation and one row's values),
  // then two vectors per step where the accumulators, both x vectors of every activation and
  // the row values fit the vector registers. Each keeps the per-lane order of one at a time.
  if constexpr (S::kQuads) {
    constexpr bool kQuadSteps = R * MX + 4 * MX + 4 + 10 <= kRegisters;
    for (; kQuadSteps && p + 4 * L <= k; p += 4 * L) {
      Vt xq[4][MX];
      for (int j = 0; j < 4; ++j)
        for (int m = 0; m < MX; ++m) xq[j][m] = x_vector<S>(a, m, p + j * L);
      for (int r = 0; r < R; ++r) {
        if (pf) prefetch(r, p, QuadBytes{});
        Vt w[4];
        S::load4(rows[r], p, w);
        for (int m = 0; m < MX; ++m)
          for (int j = 0; j < 4; ++j) acc[r][m] = Vt::fmadd(w[j], xq[j][m], acc[r][m]);
      }
    }
  }
  constexpr bool kPairSteps = pair_steps_fit(R, MX);
  for (; kPairSteps && p + 2 * L <= k; p += 2 * L) {
    Vt x0[MX], x1[MX];
    for (int m = 0; m < MX; ++m) {
      x0[m] = x_vector<S>(a, m, p);
      x1[m] = x_vector<S>(a, m, p + L);
    }
    for (int r = 0; r < R; ++r) {
      if (pf) prefetch(r, p, PairBytes{});
      Vt w0, w1;
      S::load2(rows[r], scales[r], p, w0, w1);
      for (int m = 0; m < MX; ++m) {
        acc[r][m] = Vt::fmadd(w0, x0[m], acc[r][m]);
        acc[r][m] = Vt::fmadd(w1, x1[m], acc[r][m]);
      }
    }
  }
  for (; p + L <= k; p += L) {
    Vt xv[MX];
    for (int m = 0; m < MX; ++m) xv[m] = x_vector<S>(a, m, p);
    for (int r = 0; r < R; ++r) {
      // The main loop where pairs do not fit: it prefetches as the pair loop does, but on AMD
      // not in steps shorter than a line (bfloat16 with eight activations, bound by their x
      // loads from L2, gained nothing from them).
      if constexpr (!kPairSteps) {
        if (intel || (kAmdPrefetch && SingleBytes::value >= 64)) prefetch(r, p, SingleBytes{});
      }
      const Vt w = S::load(rows[r], scales[r], p);
      for (int m = 0; m < MX; ++m) acc[r][m] = Vt::fmadd(w, xv[m], acc[r][m]);
    }
  }
  if constexpr (S::kTail) {
    if (p < k) {
      const int n = static_cast<int>(k - p);
      Vt xv[MX];
      for (int m = 0; m < MX; ++m) xv[m] = x_vector<S>(a, m, p, n);
      for (int r = 0; r < R; ++r) {
        const Vt w = S::load(rows[r], p, n);
        for (int m = 0; m < MX; ++m) acc[r][m] = Vt::fmadd(w, xv[m], acc[r][m]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MX; ++m) S::store(a, i0 + r * step, m, output_sum<S>(acc[r][m], m));
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
//
// Complex rows with one activation (two outputs, but one stream of x vectors and its swapped
// copy) take four rows as one activation of a real format does.
//
// Two to four real activations take four rows where the registers allow (AVX-512), two
// elsewhere: half the x loads per weight vector and twice the weight streams. The Zen 5 VM,
// k = n = 4096, one thread, three rounds against two rows: float32 2 activations 2.30-3.49 ->
// 2.02-2.91 ms, 4 activations 4.24-5.54 -> 3.39-4.09; bfloat16 1.61-2.21 -> 1.38-1.70 and
// 2.43-2.94 -> 1.67-2.10 (before the prefetches above; each output keeps its bits).
template <class S, int MX>
void rows_kernel(const typename S::Args& a) {
  constexpr int kOneStream = S::kComplex ? 2 : 1;
  // Several real activations: four rows where those still run two-vector steps (AVX-512 up to
  // four activations), else two.
  constexpr bool kFourRows = !S::kComplex && pair_steps_fit(4, MX);
  constexpr int R = MX == kOneStream ? (S::kSixteenBit && kLanes >= 16 ? 8 : 4) : kFourRows ? 4 : 2;
  // The rows of a call in R equal parts, row i of every part in one tile: each part is one long
  // run of W (see the file comment).
  const int64_t q = a.rows / R;
  for (int64_t i = 0; i < q; ++i) row_tile<S, R, MX>(a, i, q);
  for (int64_t i = R * q; i < a.rows; ++i) row_tile<S, 1, MX>(a, i, 0);
}

// Eight activation vectors share one pass over W where the registers allow it (32 vector
// registers: 8 accumulators and 16 x vectors per row tile, or 16 broadcasts per column pass);
// otherwise, and for 5..7, the first four run and then the rest, each a pass over W.
constexpr bool kEightVectors = kRegisters >= 32;

template <class S>
void split_vectors(const typename S::Args& a, void (*first_four)(const typename S::Args&),
                   void (*rest)(const typename S::Args&)) {
  constexpr int kActivations = S::kComplex ? 2 : 4;  // in the first four outputs
  typename S::Args lo = a;
  lo.nx = 4;
  first_four(lo);
  typename S::Args hi = a;
  hi.nx = a.nx - 4;
  hi.x = a.x + kActivations * a.x_ld;
  hi.y = a.y + kActivations * a.y_ld;
  rest(hi);
}

template <class S>
void row_fn(const typename S::Args& a) {
  switch (a.nx) {
    case 1:
      return rows_kernel<S, 1>(a);
    case 2:
      return rows_kernel<S, 2>(a);
    case 3:
      return rows_kernel<S, 3>(a);
    case 4:
      return rows_kernel<S, 4>(a);
    default:
      if constexpr (kEightVectors)
        if (a.nx == 8) return rows_kernel<S, 8>(a);
      return split_vectors<S>(a, rows_kernel<S, 4>, row_fn<S>);
  }
}

// acc[m][v..v+n) += sum over the J columns c[j] of W(v.., p+j) * X(m, p+j), in p order.
template <class S, int MX, int J, int64_t B, class T>
void col_step(T (*acc)[B], const typename S::Ptr* cols, const typename S::Vec (*xb)[J], int64_t v,
              int n) {
  using Vt = typename S::Vec;
  Vt w[J];
  for (int j = 0; j < J; ++j) w[j] = n == S::kWidth ? S::load(cols[j], v) : S::load(cols[j], v, n);
  for (int m = 0; m < MX; ++m) {
    Vt s = n == S::kWidth ? Vt::load(acc[m] + v) : Vt::load(acc[m] + v, n);
    for (int j = 0; j < J; ++j) s = Vt::fmadd(w[j], xb[m][j], s);
    if (n == S::kWidth) {
      s.store(acc[m] + v);
    } else {
      s.store(acc[m] + v, n);
    }
  }
}

template <class S, int MX, int J, int64_t B, class T>
void col_pass(const typename S::Args& a, T (*acc)[B], typename S::Ptr base, int64_t p, int64_t nb) {
  using Vt = typename S::Vec;
  typename S::Ptr cols[J];
  Vt xb[MX][J];
  for (int j = 0; j < J; ++j) {
    cols[j] = base + (p + j) * a.w_cs;
    for (int m = 0; m < MX; ++m) xb[m][j] = Vt(a.x[m * a.x_ld + p + j]);
  }
  int64_t v = 0;
  for (; v + S::kWidth <= nb; v += S::kWidth) col_step<S, MX, J, B>(acc, cols, xb, v, S::kWidth);
  if (v < nb) col_step<S, MX, J, B>(acc, cols, xb, v, static_cast<int>(nb - v));
}

// Up to four activations walk eight columns of W per pass (four for float64), over blocks of
// 4096 outputs: each pass reads 16 KiB runs of W's columns (rows of a row-major B), and the
// accumulators (at most 64 KiB) stay in L2, loaded and stored once a pass: with four columns
// a pass, those loads and stores held two to four activations well below the read bandwidth
// (docs/gemm.md, GEMV). With blocks of 1024 and 512 outputs, kept in L1,
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
// in p order, so it keeps its bits. (float64 takes the same blocks of outputs: runs and
// accumulators twice the bytes.)
template <class S, int MX>
void cols_kernel(const typename S::Args& a) {
  using T = std::remove_cvref_t<decltype(*a.y)>;
  constexpr bool kHalves = MX > 4;
  constexpr int64_t kBlock = kHalves ? 512 : 4096;
  constexpr int J = kHalves || sizeof(T) == 8 ? 4 : 8;
  constexpr int kHalf = kHalves ? MX / 2 : MX;  // activations per sweep of a pass
  constexpr int64_t kAheadPasses = 2;
  alignas(64) T acc[MX][kBlock];
  typename S::Args hi = a;
  hi.x = a.x + kHalf * a.x_ld;
  for (int64_t i0 = 0; i0 < a.rows; i0 += kBlock) {
    const int64_t nb = std::min(kBlock, a.rows - i0);
    for (int m = 0; m < MX; ++m) std::fill(acc[m], acc[m] + nb, T(0));
    const typename S::Ptr base = S::element(a, i0);
    const int64_t run_bytes =
        static_cast<const char*>(S::at(base, nb)) - reinterpret_cast<const char*>(base);
    int64_t p = 0;
    for (; p + J <= a.k; p += J) {
      if constexpr (kHalves) {
        const int64_t q = p + kAheadPasses * J;
        for (int j = 0; j < J && q + j < a.k; ++j)
          for (int64_t o = 0; o < run_bytes; o += 64)
            __builtin_prefetch(ahead(base + (q + j) * a.w_cs, o));
        col_pass<S, kHalf, J, kBlock>(a, acc, base, p, nb);
        col_pass<S, kHalf, J, kBlock>(hi, acc + kHalf, base, p, nb);
      } else {
        col_pass<S, MX, J, kBlock>(a, acc, base, p, nb);
      }
    }
    for (; p < a.k; ++p) col_pass<S, MX, 1, kBlock>(a, acc, base, p, nb);
    for (int m = 0; m < MX; ++m)
      for (int64_t i = 0; i < nb; ++i) S::store(a, i0 + i, m, acc[m][i]);
  }
}

template <class S>
void col_fn(const typename S::Args& a) {
  switch (a.nx) {
    case 1:
      return cols_kernel<S, 1>(a);
    case 2:
      return cols_kernel<S, 2>(a);
    case 3:
      return cols_kernel<S, 3>(a);
    case 4:
      return cols_kernel<S, 4>(a);
    default:
      if constexpr (kEightVectors)
        if (a.nx == 8) return cols_kernel<S, 8>(a);
      return split_vectors<S>(a, cols_kernel<S, 4>, col_fn<S>);
  }
}

}  // namespace

const GemvKernels& gemv_kernels() {
  using enum WeightFormat;
  static const GemvKernels table{
      TS_GEMV_STR(TS_ISA),
      {row_fn<Formatted<Float32>>, row_fn<Formatted<BFloat16>>, row_fn<Formatted<Float16>>,
       row_fn<Formatted<Float8_e4m3fn>>, row_fn<Formatted<Float8_e5m2>>, row_fn<Formatted<NVFP4>>},
      {col_fn<Formatted<Float32>>, col_fn<Formatted<BFloat16>>, col_fn<Formatted<Float16>>,
       col_fn<Formatted<Float8_e4m3fn>>, col_fn<Formatted<Float8_e5m2>>, nullptr},
      row_fn<Float64>,
      col_fn<Float64>,
      row_fn<ComplexRows<Formatted<Float32>>>,
      row_fn<ComplexRows<Float64>>};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
