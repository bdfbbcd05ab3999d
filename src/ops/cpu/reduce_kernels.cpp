// Reduction kernels (compiled once per ISA): sums, products, extremes, norms, counts,
// arg-extremes and moments over the two canonical shapes of reduce_kernels.h.
//
// Numerics:
//   - floating inputs accumulate in C = float (float16, bfloat16, float32) or double;
//   - rows: four vector accumulators run over fixed blocks of kBlock elements; block results
//     are merged pairwise by a binary counter (levels[l] holds the sum of 2^l blocks), so a
//     lane's rounding error grows with log(n), not n;
//   - cols: groups of kGroup rows are summed into an L1-resident column strip, and group
//     strips are merged pairwise by the same binary counter;
//   - extremes propagate NaN; arg-extremes return the first index of the extreme, NaN
//     counting as the extreme. Their hot loops use the instruction's max/min, which drops
//     NaN, with a plain sum of the same values beside it as a NaN detector: a NaN sum sends
//     the block or strip to the exact NaN-aware path;
//   - moments: per block, sums of deviations from a shift and of their squares in one pass,
//     redone exactly (mean, then squared deviations, on the block still in cache) when the
//     shift lies far from the block's mean; blocks merged with Chan's formula in double.
// Everything is deterministic: no result depends on timing or on how the caller threads.
// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 max/min/reduce
// (they start from _mm512_undefined_ps); nothing here reads uninitialised memory.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "ops/cpu/reduce_kernels.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/cpu_features.h"
#include "core/dtype_dispatch.h"
#include "core/prefetch.h"
#include "core/vec.h"
#include "tessera/core/storage.h"

namespace tessera::cpu::TS_ISA {
namespace {

using vec::TS_ISA::Vec;

template <class T>
using float_acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
inline constexpr bool is_float_input_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                         std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

constexpr DtypeMask kKernelFloat =
    dtype_bit(kFloat16) | dtype_bit(kBFloat16) | dtype_bit(kFloat32) | dtype_bit(kFloat64);
constexpr DtypeMask kKernelReal = dtype_bit(kBool) | kIntegralTypes | kKernelFloat;

// Software prefetch. The hardware prefetchers alone leave one core short of its read
// bandwidth whenever a loop does more than add, and they restart on every row of a column
// walk (rows are far apart, often a page each). Measured on an Intel Xeon (Sapphire Rapids
// class), 64M float32 and 8192x8192 float32, as a fraction of the contiguous sum's speed:
// argmax 0.84 -> 0.98, var 0.82 -> 0.97, column var 0.79 -> 0.90, column argmax 0.79 -> 0.88.
// The helpers are always_inline (see core/prefetch.h); addresses ahead come from `ahead`.

// Contiguous loops touch the lines kStreamAhead bytes ahead of the `elements` they load next,
// into L1, where `on` (stream_prefetch_pays(), core/prefetch.h: not on AMD).
constexpr int64_t kStreamAhead = 2048;
template <class T>
[[gnu::always_inline]] inline void prefetch_stream(const T* p, int64_t elements, bool on) {
  if (!on) return;
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(T));
  for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(ahead(p, kStreamAhead + o));
}

// Column loops that fold kRows rows per pass touch, beside each line they load, the same line
// of the kRows rows after them (the caller checks that those exist): one prefetch per line
// loaded, spread over the pass. Into L2 only (prefetcht2): into L1 they held the fill buffers
// the loads needed and measured up to 9% slower; bursts of whole rows measured ~20% slower (Zen 4).
// The sums', extremes' and moments' column loops prefetch only where `pf`
// (stream_prefetch_pays(): not on AMD, whose prefetchers keep up with these loops alone; Zen 5
// VM, 8192x8192 float32 over dim 0, one thread, three alternations of the two builds: sum
// 9.5-9.8 -> 8.3-8.6 ms, amax 9.7-10.1 -> 8.5-9.3, var 11.4-11.6 -> 9.7-10.1), and so does the
// float32 column argmax since its passes do as little per line as theirs. The exact argmax
// loops, with more work per loaded line, prefetch everywhere (without: 3-10% slower there).
template <int kRows, class T>
[[gnu::always_inline]] inline void prefetch_rows(const T* first, int64_t rs) {
  for (int i = 0; i < kRows; ++i) __builtin_prefetch(first + i * rs, 0, 1);
}

// The exact (NaN-aware) column path, one row per pass: the first lines of the row
// kPrefetchRows ahead.
constexpr int64_t kPrefetchRows = 4;
[[gnu::always_inline]] inline void prefetch_row(const void* p, int64_t bytes) {
  const int64_t head = std::min<int64_t>(bytes, 256);
  for (int64_t o = 0; o < head; o += 64) __builtin_prefetch(ahead(p, o));
}

// First q in [0, n) with p[q] == v (v is known to occur). The AVX-512 loop tests four vectors
// per branch: one per branch was bound by the compare-and-branch chain and took 11% of a row
// argmax over rows of 8192 float32 (each row rescans about one and a half 4096-element blocks).
template <class T, class C>
int64_t find_first_equal(const T* p, int64_t n, C v) {
  int64_t q = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 vv = _mm512_set1_ps(v);
    auto eq = [&](int64_t i) { return _mm512_cmp_ps_mask(_mm512_loadu_ps(p + i), vv, _CMP_EQ_OQ); };
    for (; q + 64 <= n; q += 64) {
      const __mmask16 m0 = eq(q), m1 = eq(q + 16), m2 = eq(q + 32), m3 = eq(q + 48);
      if ((m0 | m1 | m2 | m3) == 0) continue;
      const uint64_t all = m0 | (uint64_t{m1} << 16) | (uint64_t{m2} << 32) | (uint64_t{m3} << 48);
      return q + std::countr_zero(all);
    }
    for (; q + 16 <= n; q += 16) {
      const __mmask16 m = eq(q);
      if (m) return q + __builtin_ctz(m);
    }
  }
#elif defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    const __m256 vv = _mm256_set1_ps(v);
    for (; q + 8 <= n; q += 8) {
      const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + q), vv, _CMP_EQ_OQ));
      if (m) return q + __builtin_ctz(static_cast<unsigned>(m));
    }
  }
#endif
  while (static_cast<C>(p[q]) != v) ++q;
  return q;
}

// ---- element maps: what each element contributes ---------------------------------------
struct MapIdent {
  template <class C>
  C s(C x) const {
    return x;
  }
  template <class V>
  V v(V x) const {
    return x;
  }
};
struct MapAbs {
  template <class C>
  C s(C x) const {
    return std::fabs(x);
  }
  template <class V>
  V v(V x) const {
    return x.abs();
  }
};
struct MapSquare {
  template <class C>
  C s(C x) const {
    return x * x;
  }
  template <class V>
  V v(V x) const {
    return x * x;
  }
};
struct MapAbsPow {
  double p;
  template <class C>
  C s(C x) const {
    return std::pow(std::fabs(x), static_cast<C>(p));
  }
  Vec<float> v(Vec<float> x) const { return x.abs().pow(Vec<float>(static_cast<float>(p))); }
  Vec<double> v(Vec<double> x) const { return x.abs().pow(Vec<double>(p)); }
};

// ---- combines: how contributions merge -------------------------------------------------
// kExtreme: the combine is exact in any order (no cascade needed) and has `fast`, the
// instruction's max/min, which drops a NaN operand (callers detect NaN separately).
template <class C>
struct CombAdd {
  static constexpr C id = C(0);
  static constexpr bool kExtreme = false;
  C s(C a, C b) const { return a + b; }
  Vec<C> v(Vec<C> a, Vec<C> b) const { return a + b; }
  C h(Vec<C> a) const { return a.reduce_add(); }  // the lanes, halves first where SIMD
};
template <class C>
struct CombMul {
  static constexpr C id = C(1);
  static constexpr bool kExtreme = false;
  C s(C a, C b) const { return a * b; }
  Vec<C> v(Vec<C> a, Vec<C> b) const { return a * b; }
  C h(Vec<C> a) const {
    alignas(64) C lanes[Vec<C>::kSize];
    a.store(lanes);
    C t = lanes[0];
    for (int k = 1; k < Vec<C>::kSize; ++k) t *= lanes[k];
    return t;
  }
};
template <class C>
struct CombMax {
  static constexpr C id = -std::numeric_limits<C>::infinity();
  static constexpr bool kExtreme = true;
  C s(C a, C b) const { return (a != a || b != b) ? a + b : (b > a ? b : a); }
  Vec<C> v(Vec<C> a, Vec<C> b) const { return Vec<C>::max(a, b); }
  Vec<C> fast(Vec<C> x, Vec<C> acc) const { return Vec<C>::max_fast(x, acc); }
};
template <class C>
struct CombMin {
  static constexpr C id = std::numeric_limits<C>::infinity();
  static constexpr bool kExtreme = true;
  C s(C a, C b) const { return (a != a || b != b) ? a + b : (b < a ? b : a); }
  Vec<C> v(Vec<C> a, Vec<C> b) const { return Vec<C>::min(a, b); }
  Vec<C> fast(Vec<C> x, Vec<C> acc) const { return Vec<C>::min_fast(x, acc); }
};

// Calls f(map, comb) for a floating kind.
template <class C, class F>
void with_float_ops(ReduceKind kind, double p, F&& f) {
  switch (kind) {
    case ReduceKind::Sum:
      return f(MapIdent{}, CombAdd<C>{});
    case ReduceKind::Prod:
      return f(MapIdent{}, CombMul<C>{});
    case ReduceKind::Max:
      return f(MapIdent{}, CombMax<C>{});
    case ReduceKind::Min:
      return f(MapIdent{}, CombMin<C>{});
    case ReduceKind::AbsSum:
      return f(MapAbs{}, CombAdd<C>{});
    case ReduceKind::SqSum:
      return f(MapSquare{}, CombAdd<C>{});
    case ReduceKind::PowSum:
      return f(MapAbsPow{p}, CombAdd<C>{});
    case ReduceKind::AbsMax:
      return f(MapAbs{}, CombMax<C>{});
    case ReduceKind::AbsMin:
      return f(MapAbs{}, CombMin<C>{});
    case ReduceKind::CountNonzero:
      break;
  }
  TS_INTERNAL_ASSERT(false);
}

// ---- rows: one contiguous run --------------------------------------------------------
// Extremes are exact in any order, so they need no cascade. The hot loop runs the
// instruction's max/min (which drops a NaN operand) and, beside it, a plain sum of the same
// values: a NaN sum means the block held a NaN (or both infinities), and only then is the
// block searched for a NaN, which is the result. Eight accumulators keep loads in flight.
//
// S rows (rs elements apart) side by side, as cascade_rows reads them (kReadStreams). Each row
// keeps the eight accumulators and the order it has alone: the instruction's max/min picks
// between +0 and -0 by operand order, so fewer accumulators per row would change which zero a
// row returns.
template <class C>
inline constexpr int64_t kExtremeBlock = 8 * Vec<C>::kSize * 32;

template <int S, class T, class Map, class Comb>
std::array<float_acc_t<T>, S> extreme_rows(const T* x, int64_t rs, int64_t n, const Map& map,
                                           const Comb& comb) {
  const bool pf = stream_prefetch_pays();
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  constexpr int kAcc = 8;
  constexpr int64_t kBlock = kExtremeBlock<C>;
  std::array<C, S> out;
  bool done[S] = {};  // the row held a NaN: out[s] is final
  V a[S][kAcc];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s)
#pragma GCC unroll 8
    for (int q = 0; q < kAcc; ++q) a[s][q] = V(Comb::id);
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    V c[S][2];
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) c[s][0] = c[s][1] = V(C(0));
    for (int64_t j = i; j < i + kBlock; j += kAcc * W) {
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) prefetch_stream(x + s * rs + j, kAcc * W, pf);
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const T* p = x + s * rs + j;
#pragma GCC unroll 4
        for (int q = 0; q < kAcc; q += 2) {
          const V v0 = map.v(V::load_convert(p + q * W));
          const V v1 = map.v(V::load_convert(p + (q + 1) * W));
          a[s][q] = comb.fast(v0, a[s][q]);
          a[s][q + 1] = comb.fast(v1, a[s][q + 1]);
          c[s][0] = c[s][0] + v0;
          c[s][1] = c[s][1] + v1;
        }
      }
    }
    for (int s = 0; s < S; ++s) {
      const C check = (c[s][0] + c[s][1]).reduce_add();
      if (check == check || done[s]) continue;
      for (int64_t j = i; j < i + kBlock; ++j) {
        const C v = map.s(static_cast<C>(x[s * rs + j]));
        if (v != v) {
          out[s] = v;
          done[s] = true;
          break;
        }
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    if (done[s]) continue;
    const T* row = x + s * rs;
    int64_t j = i;
    V r = a[s][0];
    for (int q = 1; q < kAcc; ++q) r = comb.v(r, a[s][q]);
    for (; j + W <= n; j += W) r = comb.v(r, map.v(V::load_convert(row + j)));
    alignas(64) C lanes[W];
    r.store(lanes);
    C t = lanes[0];
    for (int k = 1; k < W; ++k) t = comb.s(t, lanes[k]);
    for (; j < n; ++j) t = comb.s(t, map.s(static_cast<C>(row[j])));
    out[s] = t;
  }
  return out;
}

// Sums and products of a contiguous run: four accumulators over fixed blocks, block results
// merged pairwise by a binary counter (the cascade in the file comment). Row reductions of a
// few hundred or thousand columns pay per row what a long run pays once, so the cascade's
// bookkeeping stays off short rows, the remainder loops sit behind one branch and the lanes
// combine as a tree (Comb::h). Zen 5 VM, 64M float32 read as rows, one thread, three alternated
// runs against the earlier loop (one accumulator below a block, a left-to-right lane sum, a
// 40-level merge scan per row): rows of 1024 12.3-13.9 -> 8.8-9.6 ms, rows of 8192
// 8.7-10.1 -> 8.0-8.7, rows of 256 13.6-14.1 -> 12.2-12.9; 256 rows of 256 in L2 10.7 -> 3.2 us.
// Rows of 256 took 1.5x the time of rows of 8192 from memory, one after another; read side by
// side (kReadStreams below) they run 1.66-1.8x faster, but so do long rows (1.07-1.25x), and
// on one thread rows of 256 still take ~1.5x as long (two threads: ~1.1x); the cause is not
// found. Blocks are 64 groups of 4W (4096 float32 on AVX-512): against 16 groups, alternated
// in one process (64M float32, medians of 21), one / two threads, sum 1.07-1.08 /
// 1.04-1.19x faster, norm 1.04-1.09 / 1.07-1.14x, sums and norms of rows of 8192 1.03-1.07 /
// 1.03-1.09x (the counter's merges and the accumulators' restart between blocks cost that);
// AVX2 0.98-1.06x. Each lane then adds 64 values in a row before the cascade; float32 sums and
// norms of 1M-64M uniform and offset normal values came out the same with both block sizes,
// within an ulp of the float64 result.
//
// S rows (x, x + rs, ..., rs elements apart, each n long) run side by side, each with its own
// accumulators and cascade, so a row's result is the same bits whether it ran alone or beside
// others (the driver's grouping of rows depends on the thread count); see kReadStreams.
template <int S, class T, class Map, class Comb>
[[gnu::always_inline]] inline std::array<float_acc_t<T>, S> cascade_rows(const T* x, int64_t rs,
                                                                         int64_t n, const Map& map,
                                                                         const Comb& comb) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  constexpr int64_t kBlock = 4 * W * 64;
  // Four accumulators per row over [i, i + 4W * whole groups), advancing i. The loops are
  // unrolled whole so that the accumulators stay in registers.
  auto groups = [&](V(&a)[S][4], int64_t & i, int64_t end, bool pf) __attribute__((always_inline)) {
#pragma GCC unroll 16
    for (int s = 0; s < S; ++s)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) a[s][q] = V(Comb::id);
    for (; i + 4 * W <= end; i += 4 * W) {
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) prefetch_stream(x + s * rs + i, 4 * W, pf);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q)
#pragma GCC unroll 4
        for (int s = 0; s < S; ++s)
          a[s][q] = comb.v(a[s][q], map.v(V::load_convert(x + s * rs + i + q * W)));
    }
  };
  auto combine = [&](const V(&a)[4]) { return comb.v(comb.v(a[0], a[1]), comb.v(a[2], a[3])); };
  int64_t i = 0;
  V levels[S][40];
  uint64_t occupied[S] = {};
  V a[S][4];
  if (n >= kBlock) {
    const bool pf = stream_prefetch_pays();
    for (; i + kBlock <= n;) {
      groups(a, i, i + kBlock, pf);
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        V b = combine(a[s]);
        int l = 0;
        for (; (occupied[s] >> l) & 1u; ++l) {
          b = comb.v(levels[s][l], b);
          occupied[s] &= ~(uint64_t{1} << l);
        }
        levels[s][l] = b;
        occupied[s] |= uint64_t{1} << l;
      }
    }
  }
  groups(a, i, n, false);
  std::array<C, S> out;
  for (int s = 0; s < S; ++s) {
    const T* row = x + s * rs;
    int64_t j = i;
    C tail = Comb::id;
    if (j < n) [[unlikely]] {
      for (; j + W <= n; j += W) a[s][0] = comb.v(a[s][0], map.v(V::load_convert(row + j)));
      for (; j < n; ++j) tail = comb.s(tail, map.s(static_cast<C>(row[j])));
    }
    V r = combine(a[s]);
    for (uint64_t o = occupied[s]; o != 0; o &= o - 1)
      r = comb.v(levels[s][std::countr_zero(o)], r);
    out[s] = comb.s(comb.h(r), tail);
  }
  return out;
}

// Rows read side by side. One core streams memory faster from several far-apart places at
// once than from one: its prefetchers keep a stream each in flight. Zen 5 VM, 64M float32
// summed in one thread, medians of 21 alternations: 26.8-28.1 GB/s as one stream, 33.3 as two,
// 34.7-36.4 as four quarters walked side by side (28 -> 36 GB/s on another run; 41 -> 50 with
// two threads), while four streams a few KiB apart gained nothing and software prefetch cost.
// So a rows kernel walks S equal parts of its rows side by side (row r of each part in turn):
// each part is one long stream when the rows are contiguous, and a whole reduction arrives here
// as rows of kRowChunk elements (reduce_driver.h). AVX-512 has the registers for four rows'
// accumulators, AVX2 for two. Measured the same way against one row at a time (medians of 15
// alternations in one process, 64M float32, one / two threads, two runs): sum 1.13 / 1.07-1.13x
// faster, norm 1.07 / 1.05-1.10x, sums of rows of 8192 1.25 / 1.13-1.14x, of rows of 256
// 1.80 / 1.66-1.80x, argmax 1.02-1.10 / 0.96-1.08x, argmax of rows of 8192 1.09-1.12 /
// 0.87-1.08x. Extremes (amax) and moments (var) keep eight or more accumulators per row, so
// they read two rows at a time (kWideStreams; extremes of 4- and 8-byte values as many as the
// sums, kExtremeStreams), and only rows of a block or more (shorter ones
// measured slower side by side: rows of 256 0.6-0.95x for amax, 0.75-0.82x for var): amax
// 1.01-1.14 / 0.96-1.01x, amax of rows of 8192 1.01-1.13 / 1.00-1.17x, var 1.05-1.10 /
// 1.03-1.07x, var of rows of 8192 1.09-1.15 / 1.05-1.07x.
#if defined(__AVX512F__)
constexpr int kReadStreams = 4;
#elif defined(__AVX2__)
constexpr int kReadStreams = 2;
#else
constexpr int kReadStreams = 1;
#endif
// Kernels with eight or more accumulators per row (extreme_rows, moments_rows_of): the
// registers hold two rows' worth on AVX-512.
constexpr int kWideStreams = kReadStreams >= 4 ? 2 : 1;
// Extremes of 4- and 8-byte values read as many rows as the sums, although their accumulators
// then spill: on a Sapphire Rapids class Xeon VM two rows left one core at 84-87% of its read
// bandwidth, four reach 104-106% (AVX2: one row 97%, two 105-112%). Harness, one thread,
// 256 MiB as rows of 8192 (amax(-1)), medians of 9 calls, four alternations of the two
// libraries' processes: float32 19.3-20.9 -> 14.7-16.4 ms, float64 18.4-19.7 -> 14.6-16.1 ms.
// 2-byte values, with the conversion's work per byte doubled, ran 0.93-1.0x as fast that way,
// so they keep kWideStreams. On AMD the spills cost instead, and two rows are as fast as the
// sums (extremes_read_like_sums()): Zen 5 VM, one process per library alternating, medians of
// 21 calls, 64M float32 amax 7.45-8.32 -> 6.53 ms with two rows (one thread; the sum 6.3 ms),
// 3.77 -> 3.22 ms (two threads), amax(-1) of 8192 x 8192 7.19-7.68 -> 6.41-6.49 ms. A standalone
// loop showed the same order: four rows of eight accumulators 35-38 GB/s, two rows 39-41, the
// four-row sum 41-43.
template <class T>
inline constexpr int kExtremeStreams = sizeof(T) >= 4 ? kReadStreams : kWideStreams;
inline bool extremes_read_like_sums() {
  static const bool yes = !cpu_features().amd;
  return yes;
}

// The `rows` rows of a rows kernel (rs elements apart from in) in S equal parts of q = rows / S,
// row r of every part in one call of f.template operator()<S>(x, q * rs), which returns the S
// rows' results; the rows left over go one at a time (S = 1). put(r, result) stores row r's.
template <int S, class T, class F, class Put>
void row_streams(const T* in, int64_t rows, int64_t rs, const F& f, const Put& put) {
  const int64_t q = S > 1 ? rows / S : 0;
  for (int64_t r = 0; r < q; ++r) {
    const auto v = f.template operator()<S>(in + r * rs, q * rs);
    for (int s = 0; s < S; ++s) put(r + s * q, v[s]);
  }
  for (int64_t r = S * q; r < rows; ++r) put(r, f.template operator()<1>(in + r * rs, 0)[0]);
}

template <int S, class T, class Map, class Comb>
[[gnu::always_inline]] inline std::array<float_acc_t<T>, S> reduce_rows_of(const T* x, int64_t rs,
                                                                           int64_t n,
                                                                           const Map& map,
                                                                           const Comb& comb) {
  if constexpr (Comb::kExtreme) {
    return extreme_rows<S>(x, rs, n, map, comb);
  } else {
    return cascade_rows<S>(x, rs, n, map, comb);
  }
}

template <class T>
int64_t reduce_int_contig(const T* x, int64_t n, ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum: {
      uint64_t s = 0;
      for (int64_t i = 0; i < n; ++i) s += static_cast<uint64_t>(static_cast<int64_t>(x[i]));
      return static_cast<int64_t>(s);
    }
    case ReduceKind::Prod: {
      uint64_t s = 1;
      for (int64_t i = 0; i < n; ++i) s *= static_cast<uint64_t>(static_cast<int64_t>(x[i]));
      return static_cast<int64_t>(s);
    }
    case ReduceKind::Max: {
      int64_t m = static_cast<int64_t>(x[0]);
      for (int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<int64_t>(x[i]));
      return m;
    }
    case ReduceKind::Min: {
      int64_t m = static_cast<int64_t>(x[0]);
      for (int64_t i = 1; i < n; ++i) m = std::min(m, static_cast<int64_t>(x[i]));
      return m;
    }
    default:
      TS_INTERNAL_ASSERT(false);
  }
}

template <class T>
int64_t count_nonzero_contig(const T* x, int64_t n) {
  int64_t c = 0;
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    // +-0 are the only zero encodings: compare the bits without the sign.
    const uint16_t* b = reinterpret_cast<const uint16_t*>(x);
    for (int64_t i = 0; i < n; ++i) c += (b[i] & 0x7fffu) != 0;
  } else {
    for (int64_t i = 0; i < n; ++i) c += x[i] != T(0);
  }
  return c;
}

void reduce_rows(const ReduceArgs& args) {
  visit_dtype<kKernelReal>(args.dtype, "reduce", [&]<class T>() {
    const T* in = static_cast<const T*>(args.in);
    if (args.kind == ReduceKind::CountNonzero) {
      for (int64_t r = 0; r < args.rows; ++r)
        args.out[r].i = count_nonzero_contig(in + r * args.row_stride, args.K);
    } else if constexpr (is_float_input_v<T>) {
      // The op is chosen once per call, so short rows run back to back in one loop.
      with_float_ops<float_acc_t<T>>(args.kind, args.p, [&](const auto& map, const auto& comb) {
        using Comb = std::decay_t<decltype(comb)>;
        const auto rows = [&]<int S>(const T* x, int64_t step) {
          return reduce_rows_of<S>(x, step, args.K, map, comb);
        };
        const auto put = [&](int64_t r, float_acc_t<T> v) {
          args.out[r].a = static_cast<double>(v);
        };
        if constexpr (!Comb::kExtreme) {
          row_streams<kReadStreams>(in, args.rows, args.row_stride, rows, put);
        } else if (args.K >= kExtremeBlock<float_acc_t<T>>) {
          if (extremes_read_like_sums())
            row_streams<kExtremeStreams<T>>(in, args.rows, args.row_stride, rows, put);
          else
            row_streams<kWideStreams>(in, args.rows, args.row_stride, rows, put);
        } else {  // shorter rows: see kWideStreams
          row_streams<1>(in, args.rows, args.row_stride, rows, put);
        }
      });
    } else {
      for (int64_t r = 0; r < args.rows; ++r)
        args.out[r].i = reduce_int_contig(in + r * args.row_stride, args.K, args.kind);
    }
  });
}

// ---- cols: K rows of N contiguous columns --------------------------------------------
// Uninitialised, 64-byte aligned scratch for a cols kernel's per-column state (accumulators,
// running extremes, moments). For strips of kColTile columns it runs to hundreds of KiB, more
// than belongs on a thread's stack; it comes from Tessera's caching allocator (cpu_allocate),
// so a call does not fault in fresh pages. Arrays are carved a cache line more than a
// multiple of 4 KiB apart: at exactly 4 KiB a store to one and a load from the next alias in
// the load/store unit and stall (measured on the moments loop: -30%).
class StripScratch {
 public:
  // Bytes that carve<T>(n) takes.
  template <class T>
  static size_t need(int64_t n) {
    return (static_cast<size_t>(n) * sizeof(T) + 63) / 64 * 64 + 64;
  }
  explicit StripScratch(size_t bytes)
      : bytes_(std::max<size_t>(bytes, 64)),
        base_(static_cast<std::byte*>(cpu_allocate(bytes_))),
        end_(base_ + bytes_),
        next_(base_) {}
  StripScratch(const StripScratch&) = delete;
  StripScratch& operator=(const StripScratch&) = delete;
  ~StripScratch() { cpu_free(base_, bytes_); }
  template <class T>
  T* carve(int64_t n) {
    T* p = reinterpret_cast<T*>(next_);
    next_ += need<T>(n);
    TS_INTERNAL_ASSERT(next_ <= end_);
    return p;
  }

 private:
  size_t bytes_;
  std::byte* base_;
  std::byte* end_;
  std::byte* next_;
};

// Extremes down a strip of columns: eight rows are folded into the running extremes per pass,
// or, where read_in_parts(), one row of each of kColParts parts of the rows.
// kExact = false uses the instruction's max/min and returns true when a sum of every value
// seen is NaN (a NaN, or both infinities, in the strip): the caller then redoes the strip
// with kExact = true, the NaN-propagating combine.
//
// Parts: a strip as wide as its rows (the usual case: the driver's tiles are up to kColTile
// wide) is one contiguous run of K rows; eight rows per pass read it as eight streams that
// each end after a row, while four parts of K / 4 rows side by side are four streams as long
// as the parts. So parts run only where the driver says that a problem's rows are such runs
// and that two threads never narrow its tiles (ReduceArgs::whole_rows: a fact of the shape,
// since the choice fixes the order of a sum's rows and must not follow the tiling, which
// follows the thread count). A strip narrower than its rows (a matrix wider than kColTile, a
// tile narrowed for two threads) is runs of nb elements in the parts too, and there parts
// measured slower (in the library, alternated as below: 4096 x 8192 on two threads in tiles
// of 4096 columns, var 0.85-0.91x, amax 0.89-0.99x, sum 0.97-1.00x; 2048 x 32768 on one, var
// 0.88-0.90x, sum 0.97-0.98x, amax 0.99x).
//
// Zen 5 VM, standalone loops with the kernel's instructions, 8192 x 8192 float32 over dim 0,
// one thread, medians of 15 alternated in one process: eight rows per pass 9.0-10.2 ms, four
// parts 6.3-8.8 ms (the contiguous max of the same bytes 7.3-8.4), eight parts 8.7-9.6, four
// parts of two rows per pass 8.7-9.4; narrower strips or more rows per pass were slower still.
// In the library (8192 x 8192 over dim 0, the two forms alternated call by call in one
// process, medians of 15, three runs), one / two threads: float32 amax 1.16-1.20 /
// 1.15-1.23x faster, sum 1.08-1.10 / 1.07-1.08x, mean 1.08-1.11 / 1.08-1.13x, norm 1.09 /
// 1.06-1.11x; float64 amax 1.18 / 1.18x, sum 1.04-1.05 / 1.04x, norm 1.05-1.06 / 1.06x (sums:
// sum_cols below). Only the order of the rows changes, and an extreme is the same in any
// order (but for which zero max(+0, -0) returns, which follows that order). Not measured on
// Intel, where the consecutive passes with prefetch stay.
constexpr int kColParts = 4;
inline bool read_in_parts(const ReduceArgs& args) {
  static const bool amd = cpu_features().amd;
  return amd && args.whole_rows;
}

template <bool kExact, class T, class Map, class Comb>
bool extreme_cols_strip(const T* x, int64_t K, int64_t rs, int64_t nb, bool parts,
                        float_acc_t<T>* acc, const Map& map, const Comb& comb) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  for (int64_t j = 0; j < nb; ++j) acc[j] = Comb::id;
  const bool pf = stream_prefetch_pays();
  V c0(C(0)), c1(C(0));
  // Folds M rows r, r + step, ..., r + (M - 1) step (M = 8 consecutive rows per pass: half the
  // accumulator loads and stores of four; amax of 8192x8192 float32 over dim 0, alternated in
  // one process, 7-8% faster on one thread and on two).
  auto fold = [&](const T* r, int64_t step, auto rows, bool more) {  // more: see prefetch_rows
    constexpr int M = decltype(rows)::value;
    int64_t j = 0;
    for (; j + W <= nb; j += W) {
      if (more) prefetch_rows<M>(r + M * rs + j, rs);
      V a = V::load(acc + j);
      for (int i = 0; i < M; ++i) {
        const V v = map.v(V::load_convert(r + i * step + j));
        if constexpr (kExact) {
          a = comb.v(a, v);
        } else {
          a = comb.fast(v, a);
          if (i % 2 == 0) {
            c0 = c0 + v;
          } else {
            c1 = c1 + v;
          }
        }
      }
      a.store(acc + j);
    }
    for (; j < nb; ++j)
      for (int i = 0; i < M; ++i) acc[j] = comb.s(acc[j], map.s(static_cast<C>(r[i * step + j])));
  };
  int64_t k = 0;
  if (!kExact && parts) {
    const int64_t q = K / kColParts;
    for (; k < q; ++k) fold(x + k * rs, q * rs, std::integral_constant<int, kColParts>{}, false);
    k = kColParts * q;
  }
  for (; k + 8 <= K; k += 8) {
    fold(x + k * rs, rs, std::integral_constant<int, 8>{}, pf && k + 16 <= K);
  }
  for (; k < K; ++k) fold(x + k * rs, rs, std::integral_constant<int, 1>{}, false);
  if constexpr (kExact) {
    return false;
  } else {
    const C check = (c0 + c1).reduce_add();
    return check != check;
  }
}

// Sums down columns: groups of kGroup rows are summed linearly (four rows per pass) into a
// strip of accumulators; group strips are merged pairwise by a binary counter. Where
// read_in_parts() (AMD), a pass takes one row of each of the four parts of the rows, as
// the extremes do, and a group is eight such passes.
template <class T, class Map, class Comb>
void sum_cols(const T* x, int64_t K, int64_t rs, int64_t N, bool parts, Partial* out,
              const Map& map, const Comb& comb) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  constexpr int64_t kGroup = 32;  // rows summed linearly before the cascade
  constexpr int kLevels = 8;      // a binary counter of kColRowChunk / kGroup groups
  static_assert((int64_t{1} << (kLevels - 1)) * kGroup >= kColRowChunk);
  const int64_t strip = std::min(N, kColTile);
  StripScratch scratch((1 + kLevels) * StripScratch::need<C>(strip));
  C* acc = scratch.carve<C>(strip);
  C* levels[kLevels];
  for (C*& l : levels) l = scratch.carve<C>(strip);
  const bool pf = stream_prefetch_pays();
  auto merge = [&](C* dst, const C* src, int64_t nb) {  // dst = src (+) dst
    int64_t j = 0;
    for (; j + W <= nb; j += W) comb.v(V::load(src + j), V::load(dst + j)).store(dst + j);
    for (; j < nb; ++j) dst[j] = comb.s(src[j], dst[j]);
  };
  // Adds four rows r, r + step, r + 2 step, r + 3 step (pairwise) into acc; more: see
  // prefetch_rows (consecutive rows only).
  auto add4 = [&](const T* r, int64_t step, int64_t nb, bool more) {
    auto row = [&](int i, int64_t j) { return map.v(V::load_convert(r + i * step + j)); };
    auto row_s = [&](int i, int64_t j) { return map.s(static_cast<C>(r[i * step + j])); };
    int64_t j = 0;
    for (; j + W <= nb; j += W) {
      if (more) prefetch_rows<4>(r + 4 * rs + j, rs);
      const V q = comb.v(comb.v(row(0, j), row(1, j)), comb.v(row(2, j), row(3, j)));
      comb.v(V::load(acc + j), q).store(acc + j);
    }
    for (; j < nb; ++j)
      acc[j] = comb.s(acc[j],
                      comb.s(comb.s(row_s(0, j), row_s(1, j)), comb.s(row_s(2, j), row_s(3, j))));
  };
  auto add1 = [&](const T* r0, int64_t nb) {
    int64_t j = 0;
    for (; j + W <= nb; j += W)
      comb.v(V::load(acc + j), map.v(V::load_convert(r0 + j))).store(acc + j);
    for (; j < nb; ++j) acc[j] = comb.s(acc[j], map.s(static_cast<C>(r0[j])));
  };
  for (int64_t c0 = 0; c0 < N; c0 += strip) {
    const int64_t nb = std::min(strip, N - c0);
    const T* xs = x + c0;
    uint32_t occupied = 0;
    auto push = [&] {  // acc joins the binary counter as the next group
      int l = 0;
      while ((occupied >> l) & 1u) {
        merge(acc, levels[l], nb);
        occupied &= ~(1u << l);
        ++l;
      }
      std::memcpy(levels[l], acc, sizeof(C) * nb);
      occupied |= 1u << l;
    };
    int64_t k = 0;
    if (parts) {
      // A group is kGroup / kColParts passes of one row from each part (see extreme_cols_strip);
      // the rows left over after the parts form the last group.
      const int64_t q = K / kColParts;
      constexpr int64_t kPasses = kGroup / kColParts;
      for (int64_t p0 = 0; p0 < q; p0 += kPasses) {
        for (int64_t j = 0; j < nb; ++j) acc[j] = Comb::id;
        for (int64_t p = p0; p < std::min(q, p0 + kPasses); ++p)
          add4(xs + p * rs, q * rs, nb, false);
        push();
      }
      k = kColParts * q;
    }
    for (int64_t k0 = k; k0 < K; k0 += kGroup) {
      const int64_t ke = std::min(K, k0 + kGroup);
      for (int64_t j = 0; j < nb; ++j) acc[j] = Comb::id;
      for (k = k0; k + 4 <= ke; k += 4) add4(xs + k * rs, rs, nb, pf && k + 8 <= K);
      for (; k < ke; ++k) add1(xs + k * rs, nb);
      push();
    }
    for (int64_t j = 0; j < nb; ++j) acc[j] = Comb::id;
    for (int l = 0; l < kLevels; ++l)
      if ((occupied >> l) & 1u) merge(acc, levels[l], nb);
    for (int64_t j = 0; j < nb; ++j) out[c0 + j].a = static_cast<double>(acc[j]);
  }
}

template <class T, class Map, class Comb>
void reduce_cols_float(const T* x, int64_t K, int64_t rs, int64_t N, bool parts, Partial* out,
                       const Map& map, const Comb& comb) {
  using C = float_acc_t<T>;
  if constexpr (Comb::kExtreme) {
    const int64_t strip = std::min(N, kColTile);
    StripScratch scratch(StripScratch::need<C>(strip));
    C* acc = scratch.carve<C>(strip);
    for (int64_t c0 = 0; c0 < N; c0 += strip) {
      const int64_t nb = std::min(strip, N - c0);
      if (extreme_cols_strip<false>(x + c0, K, rs, nb, parts, acc, map, comb))
        extreme_cols_strip<true>(x + c0, K, rs, nb, false, acc, map, comb);
      for (int64_t j = 0; j < nb; ++j) out[c0 + j].a = static_cast<double>(acc[j]);
    }
  } else {
    sum_cols(x, K, rs, N, parts, out, map, comb);
  }
}

template <class T>
void reduce_cols_int(const T* x, int64_t K, int64_t rs, int64_t N, Partial* out, ReduceKind kind) {
  constexpr int64_t kStrip = 512;
  int64_t acc[kStrip];
  for (int64_t c0 = 0; c0 < N; c0 += kStrip) {
    const int64_t nb = std::min(kStrip, N - c0);
    const T* r0 = x + c0;
    for (int64_t j = 0; j < nb; ++j) {
      acc[j] =
          kind == ReduceKind::CountNonzero ? int64_t{r0[j] != T(0)} : static_cast<int64_t>(r0[j]);
    }
    for (int64_t k = 1; k < K; ++k) {
      const T* r = x + k * rs + c0;
      switch (kind) {
        case ReduceKind::Sum:
          for (int64_t j = 0; j < nb; ++j)
            acc[j] = static_cast<int64_t>(static_cast<uint64_t>(acc[j]) +
                                          static_cast<uint64_t>(static_cast<int64_t>(r[j])));
          break;
        case ReduceKind::Prod:
          for (int64_t j = 0; j < nb; ++j)
            acc[j] = static_cast<int64_t>(static_cast<uint64_t>(acc[j]) *
                                          static_cast<uint64_t>(static_cast<int64_t>(r[j])));
          break;
        case ReduceKind::Max:
          for (int64_t j = 0; j < nb; ++j) acc[j] = std::max(acc[j], static_cast<int64_t>(r[j]));
          break;
        case ReduceKind::Min:
          for (int64_t j = 0; j < nb; ++j) acc[j] = std::min(acc[j], static_cast<int64_t>(r[j]));
          break;
        case ReduceKind::CountNonzero:
          for (int64_t j = 0; j < nb; ++j) acc[j] += r[j] != T(0);
          break;
        default:
          TS_INTERNAL_ASSERT(false);
      }
    }
    for (int64_t j = 0; j < nb; ++j) out[c0 + j].i = acc[j];
  }
}

void reduce_cols(const ReduceArgs& args) {
  visit_dtype<kKernelReal>(args.dtype, "reduce", [&]<class T>() {
    const T* x = static_cast<const T*>(args.in);
    if constexpr (is_float_input_v<T>) {
      if (args.kind != ReduceKind::CountNonzero) {
        with_float_ops<float_acc_t<T>>(args.kind, args.p, [&](const auto& map, const auto& comb) {
          reduce_cols_float(x, args.K, args.row_stride, args.N, read_in_parts(args), args.out, map,
                            comb);
        });
        return;
      }
      // Count non-zeros through the integer path on float values (compares against 0).
      using C = float_acc_t<T>;
      for (int64_t j = 0; j < args.N; ++j) args.out[j].i = 0;
      for (int64_t k = 0; k < args.K; ++k) {
        const T* r = x + k * args.row_stride;
        for (int64_t j = 0; j < args.N; ++j) args.out[j].i += static_cast<C>(r[j]) != C(0);
      }
    } else {
      reduce_cols_int(x, args.K, args.row_stride, args.N, args.out, args.kind);
    }
  });
}

// ---- arg-extremes --------------------------------------------------------------------
template <bool kMax, class C>
inline bool better(C v, C best) {
  // v replaces best when strictly more extreme, or when v is the first NaN.
  return (kMax ? v > best : v < best) || (v != v && best == best);
}

// The instruction's max (kMax) or min of two vectors: fast, but it may drop a NaN, so the
// callers flag NaNs apart.
template <bool kMax, class V>
[[gnu::always_inline]] inline V extreme_fast(V v, V acc) {
  return kMax ? V::max_fast(v, acc) : V::min_fast(v, acc);
}

// First index of the extreme of each row x[0..n). Block extremes are found with the instruction's
// max/min at memory speed (a plain sum beside it flags a NaN, as in extreme_rows); only a
// block whose extreme beats the running one is rescanned, from L1, for its first position.
// S rows (rs elements apart) side by side, as cascade_rows reads them; a row's result does
// not depend on the others (extremes are exact, and the position is searched per row).
template <bool kMax, int S, class T>
std::array<Partial, S> arg_rows_float(const T* x, int64_t rs, int64_t n) {
  const bool pf = stream_prefetch_pays();
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  constexpr int64_t kBlock = 4096;
  std::array<Partial, S> out;
  C best[S];
  int64_t best_i[S];
  bool done[S];  // the row held a NaN: out[s] is final
  for (int s = 0; s < S; ++s) {
    best[s] = static_cast<C>(x[s * rs]);
    best_i[s] = 0;
    done[s] = best[s] != best[s];
    if (done[s]) out[s] = Partial{static_cast<double>(best[s]), 0, 0, 0};
  }
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t nb = std::min(kBlock, n - b0);
    V m[S][4], c[S][2];
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      m[s][0] = m[s][1] = m[s][2] = m[s][3] = V(best[s]);
      c[s][0] = c[s][1] = V(C(0));
    }
    int64_t j = 0;
    for (; j + 4 * W <= nb; j += 4 * W) {
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) prefetch_stream(x + s * rs + b0 + j, 4 * W, pf);
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const T* p = x + s * rs + b0 + j;
        const V v0 = V::load_convert(p), v1 = V::load_convert(p + W);
        const V v2 = V::load_convert(p + 2 * W), v3 = V::load_convert(p + 3 * W);
        m[s][0] = extreme_fast<kMax>(v0, m[s][0]);
        m[s][1] = extreme_fast<kMax>(v1, m[s][1]);
        m[s][2] = extreme_fast<kMax>(v2, m[s][2]);
        m[s][3] = extreme_fast<kMax>(v3, m[s][3]);
        c[s][0] = c[s][0] + v0 + v2;
        c[s][1] = c[s][1] + v1 + v3;
      }
    }
    for (int s = 0; s < S; ++s) {
      if (done[s]) continue;
      const T* p = x + s * rs + b0;
      int64_t k = j;
      for (; k + W <= nb; k += W) {
        const V v0 = V::load_convert(p + k);
        m[s][0] = extreme_fast<kMax>(v0, m[s][0]);
        c[s][0] = c[s][0] + v0;
      }
      const V mv = extreme_fast<kMax>(extreme_fast<kMax>(m[s][0], m[s][1]),
                                      extreme_fast<kMax>(m[s][2], m[s][3]));
      C bm = kMax ? mv.reduce_max() : mv.reduce_min();
      C check = (c[s][0] + c[s][1]).reduce_add();
      for (; k < nb; ++k) {
        const C v = static_cast<C>(p[k]);
        check += v;
        if (kMax ? v > bm : v < bm) bm = v;
      }
      if (check != check) {
        for (int64_t q = 0; q < nb; ++q) {
          const C v = static_cast<C>(p[q]);
          if (v != v) {
            out[s] = Partial{static_cast<double>(v), 0, 0, b0 + q};
            done[s] = true;
            break;
          }
        }
        if (done[s]) continue;
      }
      if (kMax ? bm > best[s] : bm < best[s]) {
        const int64_t q = find_first_equal(p, nb, bm);
        best[s] = static_cast<C>(p[q]);
        best_i[s] = b0 + q;
      }
    }
  }
  for (int s = 0; s < S; ++s)
    if (!done[s]) out[s] = Partial{static_cast<double>(best[s]), 0, 0, best_i[s]};
  return out;
}

// Tracked form, for rows of kTrackedRows or more: each lane of two accumulators keeps its
// extreme and the step (2W elements) it first held it at, so the position comes with the
// value. arg_rows_float's rescans read a row's first block again and each later block that
// beats the running extreme (about 1.5 blocks of a random row of 8192, 2.7 of a chunk of
// 32768); here the row is read once, with a compare and a select more per vector, and its
// 2W lanes are settled at the end (the extreme, then the first position holding it, +0 and -0
// equal; the value returned is that position's own). Steps are counted in C: rows reach the
// kernel in chunks of at most kRowChunk elements. A NaN (flagged by a plain sum, as there)
// sends the row to the exact search. Zen 5 VM, 64M float32, medians of 21 alternations in one
// process against the rescanning form, three runs, one / two threads: argmax 1.01-1.08 /
// 0.99-1.08x faster, argmax of rows of 8192 1.04-1.07 / 1.06-1.08x, argmin of rows of 8192
// 1.07-1.10 / 1.02-1.17x (a fourth run, with two threads barely faster than one, gave 0.87-1.08);
// rows of 1024 measured 0.82 / 0.90x (the end-of-row settling costs what a short row's rescan
// did), so rows below kTrackedRows keep arg_rows_float.
constexpr int64_t kTrackedRows = 4096;
static_assert(kRowChunk <= (int64_t{1} << 24), "steps are counted in float lanes");

// n >= kTrackedRows: the two accumulators start from the row's first 2W elements.
template <bool kMax, int S, class T>
std::array<Partial, S> arg_rows_tracked(const T* x, int64_t rs, int64_t n) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  static_assert(kTrackedRows >= 2 * W);
  TS_INTERNAL_ASSERT(n >= kTrackedRows);
  std::array<Partial, S> out;
  V m[S][2], at[S][2], c[S][2];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    m[s][0] = V::load_convert(x + s * rs);
    m[s][1] = V::load_convert(x + s * rs + W);
    at[s][0] = at[s][1] = V(C(0));
    c[s][0] = m[s][0];
    c[s][1] = m[s][1];
  }
  int64_t j = 2 * W;
  for (; j + 2 * W <= n; j += 2 * W) {
    const V step(static_cast<C>(j));
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const T* p = x + s * rs + j;
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) {
        const V v = V::load_convert(p + q * W);
        at[s][q] = kMax ? V::select_lt(m[s][q], v, step, at[s][q])
                        : V::select_lt(v, m[s][q], step, at[s][q]);
        m[s][q] = extreme_fast<kMax>(v, m[s][q]);
        c[s][q] = c[s][q] + v;
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    const T* row = x + s * rs;
    const C check = (c[s][0] + c[s][1]).reduce_add();
    if (check != check) {  // a NaN (or both infinities): the exact search
      out[s] = arg_rows_float<kMax, 1>(row, 0, n)[0];
      continue;
    }
    alignas(64) C val[2 * W], pos[2 * W];
    m[s][0].store(val);
    m[s][1].store(val + W);
    at[s][0].store(pos);
    at[s][1].store(pos + W);
    C best = val[0];
    int64_t best_i = static_cast<int64_t>(pos[0]);
    for (int l = 1; l < 2 * W; ++l) {
      const int64_t i = static_cast<int64_t>(pos[l]) + l;
      if ((kMax ? val[l] > best : val[l] < best) || (val[l] == best && i < best_i)) {
        best = val[l];
        best_i = i;
      }
    }
    for (int64_t k = j; k < n; ++k) {
      const C v = static_cast<C>(row[k]);
      if (v != v) {
        best = v;
        best_i = k;
        break;
      }
      if (kMax ? v > best : v < best) {
        best = v;
        best_i = k;
      }
    }
    out[s] = Partial{static_cast<double>(best), 0, 0, best_i};
  }
  return out;
}

template <bool kMax, class T>
Partial arg_contig_int(const T* x, int64_t n) {
  int64_t best = static_cast<int64_t>(x[0]), best_i = 0;
  for (int64_t i = 1; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(x[i]);
    if (kMax ? v > best : v < best) {
      best = v;
      best_i = i;
    }
  }
  return Partial{0, 0, best, best_i};
}

void arg_rows(const ReduceArgs& args) {
  const bool is_max = args.kind == ReduceKind::Max;
  visit_dtype<kKernelReal>(args.dtype, "argmax", [&]<class T>() {
    const T* in = static_cast<const T*>(args.in);
    const int64_t rs = args.row_stride;
    if constexpr (is_float_input_v<T>) {
      const auto put = [&](int64_t r, const Partial& p) { args.out[r] = p; };
      const auto run = [&]<bool kMax>() {
        const auto rows = [&]<int S>(const T* x, int64_t step) {
          return args.K >= kTrackedRows ? arg_rows_tracked<kMax, S>(x, step, args.K)
                                        : arg_rows_float<kMax, S>(x, step, args.K);
        };
        row_streams<kReadStreams>(in, args.rows, rs, rows, put);
      };
      is_max ? run.template operator()<true>() : run.template operator()<false>();
    } else {
      for (int64_t r = 0; r < args.rows; ++r) {
        const T* x = in + r * rs;
        args.out[r] = is_max ? arg_contig_int<true>(x, args.K) : arg_contig_int<false>(x, args.K);
      }
    }
  });
}

// Columns: per strip, running extremes and int32 row indices live in L1; the select is
// branch-free so the compiler vectorises it (K <= kColRowChunk fits int32).
template <bool kMax, class T>
void arg_cols_strip_exact(const T* x, int64_t K, int64_t rs, int64_t nb,
                          std::conditional_t<is_float_input_v<T>, float_acc_t<T>, int64_t>* best,
                          int32_t* idx) {
  using C = std::conditional_t<is_float_input_v<T>, float_acc_t<T>, int64_t>;
  for (int64_t j = 0; j < nb; ++j) {
    best[j] = static_cast<C>(x[j]);
    idx[j] = 0;
  }
  for (int64_t k = 1; k < K; ++k) {
    const T* r = x + k * rs;
    if (k + kPrefetchRows < K)
      prefetch_row(r + kPrefetchRows * rs, nb * static_cast<int64_t>(sizeof(T)));
    const int32_t kk = static_cast<int32_t>(k);
    for (int64_t j = 0; j < nb; ++j) {
      const C v = static_cast<C>(r[j]);
      const C b = best[j];
      const bool take = better<kMax>(v, b);
      best[j] = take ? v : b;
      idx[j] = take ? kk : idx[j];
    }
  }
}

#if defined(__AVX512F__)
// float32 fast path (nb a multiple of 16), eight rows per pass: each column's extreme of the
// pass (vmaxps/vminps) meets the running extreme, and only where one is strictly better are
// the pass's rows compared with it to find the first that holds it (a branch taken ever more
// rarely as the rows go by). The earlier form carried every column's index through a four-row
// tournament (three selects of value and index per four rows) and a sum to flag NaNs:
// 8192x8192 float32 over dim 0, alternated in one process, one thread 12.7-13.0 -> 10.8-11.1
// ms, two 6.5-6.7 -> 6.2-6.4. vmaxps drops a NaN, so ordered compares of the rows in pairs,
// chained through their mask, flag any; the caller then redoes the strip exactly. Returns
// whether they flagged.
template <bool kMax>
bool arg_cols_strip_fast(const float* x, int64_t K, int64_t rs, int64_t nb, float* best,
                         int32_t* idx) {
  constexpr int kCmp = kMax ? _CMP_GT_OQ : _CMP_LT_OQ;
  constexpr int64_t kRows = 8;
  auto ext = [](__m512 a, __m512 b) { return extreme_fast<kMax>(Vec<float>(a), Vec<float>(b)).v; };
  auto pair_ordered = [](__mmask16 ok, __m512 a, __m512 b) {
    return _mm512_mask_cmp_ps_mask(ok, a, b, _CMP_ORD_Q);
  };
  const bool pf = stream_prefetch_pays();
  __mmask16 ordered = 0xffff;  // lanes with no NaN so far
  for (int64_t j = 0; j < nb; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    ordered = pair_ordered(ordered, v, v);
    _mm512_store_ps(best + j, v);
    _mm512_store_si512(idx + j, _mm512_setzero_si512());
  }
  int64_t k = 1;
  for (; k + kRows <= K; k += kRows) {
    const float* r = x + k * rs;
    const bool more = pf && k + 2 * kRows <= K;
    for (int64_t j = 0; j < nb; j += 16) {
      if (more) prefetch_rows<kRows>(r + kRows * rs + j, rs);
      __m512 v[kRows];
      for (int i = 0; i < kRows; ++i) v[i] = _mm512_loadu_ps(r + i * rs + j);
      __mmask16 ok = 0xffff;
      for (int i = 0; i < kRows; i += 2) ok = pair_ordered(ok, v[i], v[i + 1]);
      ordered &= ok;
      const __m512 m =
          ext(ext(ext(v[0], v[1]), ext(v[2], v[3])), ext(ext(v[4], v[5]), ext(v[6], v[7])));
      const __mmask16 take = _mm512_cmp_ps_mask(m, _mm512_load_ps(best + j), kCmp);
      if (take == 0) continue;
      // The first row of the pass equal to m (m is one of them; +0 and -0 compare equal, and the
      // value kept is that row's own).
      __m512 val = v[kRows - 1];
      __m512i row = _mm512_set1_epi32(static_cast<int32_t>(k + kRows - 1));
      for (int i = kRows - 2; i >= 0; --i) {
        const __mmask16 eq = _mm512_cmp_ps_mask(v[i], m, _CMP_EQ_OQ);
        val = _mm512_mask_mov_ps(val, eq, v[i]);
        row = _mm512_mask_mov_epi32(row, eq, _mm512_set1_epi32(static_cast<int32_t>(k + i)));
      }
      _mm512_mask_store_ps(best + j, take, val);
      _mm512_mask_store_epi32(idx + j, take, row);
    }
  }
  for (; k < K; ++k) {  // the last rows
    const float* r = x + k * rs;
    const __m512i kv = _mm512_set1_epi32(static_cast<int32_t>(k));
    for (int64_t j = 0; j < nb; j += 16) {
      const __m512 v = _mm512_loadu_ps(r + j), b = _mm512_load_ps(best + j);
      ordered = pair_ordered(ordered, v, v);
      const __mmask16 take = _mm512_cmp_ps_mask(v, b, kCmp);
      _mm512_store_ps(best + j, _mm512_mask_mov_ps(b, take, v));
      _mm512_store_si512(idx + j, _mm512_mask_mov_epi32(_mm512_load_si512(idx + j), take, kv));
    }
  }
  return ordered != 0xffff;
}
#endif

template <bool kMax, class T>
void arg_cols_impl(const T* x, int64_t K, int64_t rs, int64_t N, Partial* out) {
  using C = std::conditional_t<is_float_input_v<T>, float_acc_t<T>, int64_t>;
  const int64_t strip = std::min(N, kColTile);
  StripScratch scratch(StripScratch::need<C>(strip) + StripScratch::need<int32_t>(strip));
  C* best = scratch.carve<C>(strip);
  int32_t* idx = scratch.carve<int32_t>(strip);
  for (int64_t c0 = 0; c0 < N; c0 += strip) {
    const int64_t nb = std::min(strip, N - c0);
    int64_t done = 0;  // columns finished by the fast path
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) {
      const int64_t nv = nb / 16 * 16;
      if (nv > 0 && arg_cols_strip_fast<kMax>(x + c0, K, rs, nv, best, idx))
        arg_cols_strip_exact<kMax>(x + c0, K, rs, nv, best, idx);
      done = nv;
    }
#endif
    if (done < nb)
      arg_cols_strip_exact<kMax>(x + c0 + done, K, rs, nb - done, best + done, idx + done);
    for (int64_t j = 0; j < nb; ++j) {
      if constexpr (is_float_input_v<T>) {
        out[c0 + j] = Partial{static_cast<double>(best[j]), 0, 0, idx[j]};
      } else {
        out[c0 + j] = Partial{0, 0, static_cast<int64_t>(best[j]), idx[j]};
      }
    }
  }
}

void arg_cols(const ReduceArgs& args) {
  TS_INTERNAL_ASSERT(args.K <= std::numeric_limits<int32_t>::max());
  const bool is_max = args.kind == ReduceKind::Max;
  visit_dtype<kKernelReal>(args.dtype, "argmax", [&]<class T>() {
    const T* x = static_cast<const T*>(args.in);
    if (is_max) {
      arg_cols_impl<true>(x, args.K, args.row_stride, args.N, args.out);
    } else {
      arg_cols_impl<false>(x, args.K, args.row_stride, args.N, args.out);
    }
  });
}

// ---- moments -------------------------------------------------------------------------
// Chan et al.: merges (nb, mean_b, m2_b) into (n, mean, m2).
inline void chan_merge(double& n, double& mean, double& m2, double nb, double mean_b, double m2_b) {
  const double tot = n + nb;
  const double delta = mean_b - mean;
  mean += delta * (nb / tot);
  m2 += m2_b + delta * delta * (n * nb / tot);
  n = tot;
}

// Contiguous moments, per block of kBlock elements: one pass sums the deviations d = x - shift
// and their squares, where shift is the mean of the blocks before (the block's first element
// for the first block); then mean_b = shift + s1 / n and M2_b = s2 - s1^2 / n. That pass
// streams like a sum (an L1 second pass over each block ran at 61% of the read bandwidth
// where sum ran at 92-99%). s2 = M2_b + n (mean_b - shift)^2, so M2_b loses bits to
// cancellation only when the shift lies far from the block's mean: when more than two bits
// would go (s2 > 4 M2_b, a shift over sqrt(3) standard deviations away; NaN and infinities
// land here too) the block, still in cache, is redone by the corrected two-pass method: the
// same pass around the block's own (float) mean. Blocks merge with Chan's formula in double.
template <class T>
struct MomentBlocks {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  static constexpr int W = V::kSize;
  static constexpr int64_t kStep = 4 * W;

  struct Sum {
    V s0{C(0)}, s1{C(0)}, s2{C(0)}, s3{C(0)};
    void step(const T* p) {
      s0 = s0 + V::load_convert(p);
      s1 = s1 + V::load_convert(p + W);
      s2 = s2 + V::load_convert(p + 2 * W);
      s3 = s3 + V::load_convert(p + 3 * W);
    }
    C total(const T* p, int64_t nb) {
      int64_t j = 0;
      for (; j + kStep <= nb; j += kStep) step(p + j);
      for (; j + W <= nb; j += W) s0 = s0 + V::load_convert(p + j);
      C s = ((s0 + s1) + (s2 + s3)).reduce_add();
      for (; j < nb; ++j) s += static_cast<C>(p[j]);
      return s;
    }
  };

  // Sums of d = x - shift and of d^2.
  struct Deviations {
    V vm, a0{C(0)}, a1{C(0)}, a2{C(0)}, a3{C(0)}, q0{C(0)}, q1{C(0)}, q2{C(0)}, q3{C(0)};
    C shift;
    explicit Deviations(C m) : vm(m), shift(m) {}
    void one(const V& d, V& a, V& q) {
      a = a + d;
      q = V::fmadd(d, d, q);
    }
    void step(const T* p) {
      one(V::load_convert(p) - vm, a0, q0);
      one(V::load_convert(p + W) - vm, a1, q1);
      one(V::load_convert(p + 2 * W) - vm, a2, q2);
      one(V::load_convert(p + 3 * W) - vm, a3, q3);
    }
    // (sum of d, sum of d^2) over p[0, nb), prefetching the stream when pf.
    std::pair<C, C> total(const T* p, int64_t nb, bool pf) {
      int64_t j = 0;
      for (; j + kStep <= nb; j += kStep) {
        prefetch_stream(p + j, kStep, pf);
        step(p + j);
      }
      return finish(p, j, nb);
    }
    // total's end, from p[j] on (j: the whole steps taken).
    std::pair<C, C> finish(const T* p, int64_t j, int64_t nb) {
      for (; j + W <= nb; j += W) one(V::load_convert(p + j) - vm, a0, q0);
      C a = ((a0 + a1) + (a2 + a3)).reduce_add();
      C q = ((q0 + q1) + (q2 + q3)).reduce_add();
      for (; j < nb; ++j) {
        const C d = static_cast<C>(p[j]) - shift;
        a += d;
        q += d * d;
      }
      return {a, q};
    }
  };
};

// S rows (rs elements apart) side by side, as cascade_rows reads them (kReadStreams): the
// deviations' pass runs over the same block of every row together; each row keeps its own
// shift, redo and merge, so its result is the bits it has alone.
inline constexpr int64_t kMomentBlock = 4096;

template <int S, class T>
std::array<Partial, S> moments_rows_of(const T* x, int64_t rs, int64_t n) {
  const bool pf = stream_prefetch_pays();
  using B = MomentBlocks<T>;
  using C = typename B::C;
  using Dev = typename B::Deviations;
  constexpr int64_t kBlock = kMomentBlock;
  double cnt[S] = {}, mean[S] = {}, m2[S] = {};
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t nb = std::min(kBlock, n - b0);
    const double dn = static_cast<double>(nb);
    // A block's mean and M2 from one pass around its shift, and that pass's sum of squares.
    struct Around {
      double mean, m2, squares;
    };
    auto around = [&](C shift, std::pair<C, C> sums) {
      const double d1 = static_cast<double>(sums.first), d2 = static_cast<double>(sums.second);
      return Around{static_cast<double>(shift) + d1 / dn, d2 - d1 * d1 / dn, d2};
    };
    C shift[S];
    for (int s = 0; s < S; ++s)
      shift[s] = b0 == 0 ? static_cast<C>(x[s * rs]) : static_cast<C>(mean[s]);
    auto dev = [&]<size_t... I>(std::index_sequence<I...>) {
      return std::array<Dev, S>{Dev(shift[I])...};
    }
    (std::make_index_sequence<S>{});
    int64_t j = 0;
    for (; j + B::kStep <= nb; j += B::kStep) {
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) prefetch_stream(x + s * rs + b0 + j, B::kStep, pf);
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) dev[s].step(x + s * rs + b0 + j);
    }
    for (int s = 0; s < S; ++s) {
      const T* p = x + s * rs + b0;
      Around r = around(shift[s], dev[s].finish(p, j, nb));
      if (!(r.squares <= 4 * r.m2)) {  // cancellation, NaN or infinity
        // Around the block's own mean: the deviations' sum then corrects that mean's rounding
        // (a float sum of large values carries it).
        const C own = typename B::Sum().total(p, nb) / static_cast<C>(nb);
        r = around(own, Dev(own).total(p, nb, false));
      }
      chan_merge(cnt[s], mean[s], m2[s], dn, r.mean, r.m2);
    }
  }
  std::array<Partial, S> out;
  for (int s = 0; s < S; ++s) out[s] = Partial{mean[s], m2[s], 0, static_cast<int64_t>(cnt[s])};
  return out;
}

void moments_rows(const ReduceArgs& args) {
  visit_dtype<kKernelFloat>(args.dtype, "var", [&]<class T>() {
    const T* in = static_cast<const T*>(args.in);
    const auto rows = [&]<int S>(const T* x, int64_t step) {
      return moments_rows_of<S>(x, step, args.K);
    };
    const auto put = [&](int64_t r, const Partial& p) { args.out[r] = p; };
    if (args.K >= kMomentBlock) {
      row_streams<kWideStreams>(in, args.rows, args.row_stride, rows, put);
    } else {  // shorter rows: see kWideStreams
      row_streams<1>(in, args.rows, args.row_stride, rows, put);
    }
  });
}

// Columns, one pass: within a group of kGroup rows every column sums its deviations from the
// group's first row, and their squares (a shift, so nothing cancels against a large mean);
// then group mean = shift + s1 / n and M2 = s2 - s1^2 / n, merged across groups by Chan's
// formula in double. The shift is a sample of the group, so by Samuelson's inequality
// s2 <= n * M2, and the rounding error of M2 stays within about n ulp (n = kGroup).
//
// The reading never pauses: a group's first pass takes the shift from its first row as it
// folds, and its last pass merges each block of columns into the double mean and M2 as soon
// as that block is folded, so no separate sweep over the strip starts or ends a group (during
// such a sweep no row was read). A block's shift, s1 and s2 lie side by side (3 W values), so
// the accumulators are one stream rather than three. 8192 x 8192 float32 over dim 0 on the
// Zen 5 VM, one thread, a standalone loop with the kernel's instructions (medians of 11,
// alternated): 10.8-10.9 -> 9.1-9.2 ms (the column sum of the same bytes 7.1-7.2); the
// library, docs/ops.md.
template <class T>
void moments_cols_impl(const T* x, int64_t K, int64_t rs, int64_t N, bool parts, Partial* out) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  const int64_t strip = std::min(N, kColTile);
  constexpr int64_t kGroup = 65;  // the first row, then eight passes of eight
  StripScratch scratch(StripScratch::need<C>(3 * (strip + W)) +
                       2 * StripScratch::need<double>(strip));
  C* acc = scratch.carve<C>(3 * (strip + W));  // per block of W columns: shift, s1, s2
  double* mean = scratch.carve<double>(strip);
  double* m2 = scratch.carve<double>(strip);
  const bool pf = stream_prefetch_pays();
  for (int64_t c0 = 0; c0 < N; c0 += strip) {
    const int64_t nb = std::min(strip, N - c0);
    const T* xs = x + c0;
    double cnt = 0;
    for (int64_t j = 0; j < nb; ++j) mean[j] = m2[j] = 0;
    // Chan's merge of a group of `rows` rows into mean and m2: the group's weights (weights),
    // then column j from its shift, s1 and s2 (merge) or the W columns from j on (merge_block).
    struct Weights {
      double inv_n, wb, wc;
    };
    auto weights = [&](int64_t rows) {
      const double n = static_cast<double>(rows), tot = cnt + n;
      return Weights{1.0 / n, n / tot, cnt * n / tot};
    };
    auto merge = [&](const Weights& w, int64_t j, C sh, C a1, C a2) {
      const double a = static_cast<double>(a1);
      const double group_mean = static_cast<double>(sh) + a * w.inv_n;
      double group_m2 = static_cast<double>(a2) - a * a * w.inv_n;
      if (group_m2 < 0) group_m2 = 0;  // rounding; a NaN stays NaN
      const double delta = group_mean - mean[j];
      mean[j] += delta * w.wb;
      m2[j] += group_m2 + delta * delta * w.wc;
    };
    // merge_block is merge in double vectors, the same operations in the same order (no
    // contraction into FMAs, as in the scalar form): a block merged in its fold pass must not
    // cost more than the sweep it replaces (left to the compiler, an in-cache 4096 x 256
    // float32 var ran 25% slower than that sweep).
    auto merge_block = [&](const Weights& w, int64_t j, const C* sh, const C* a1, const C* a2) {
      using D = Vec<double>;
      constexpr int DW = D::kSize;
      static_assert(W % DW == 0);
      const D inv(w.inv_n), wb(w.wb), wc(w.wc), zero(0.0);
      for (int l = 0; l < W; l += DW) {
        const D a = D::load_convert(a1 + l);
        const D group_mean = D::load_convert(sh + l) + a * inv;
        const D g2 = D::load_convert(a2 + l) - a * a * inv;
        const D group_m2 = D::select_lt(g2, zero, zero, g2);  // a NaN stays NaN
        const D mu = D::load(mean + j + l);
        const D delta = group_mean - mu;
        (mu + delta * wb).store(mean + j + l);
        (D::load(m2 + j + l) + (group_m2 + delta * delta * wc)).store(m2 + j + l);
      }
    };
    // Folds M rows r, r + step, ..., r + (M - 1) step into each block's s1 and s2. `first`:
    // the group starts here, shifted by row `first_row` (s1 = s2 = 0 before); `last`: it ends
    // here and each block is merged (into mean and m2, with `w`) instead of stored. `more`:
    // the M rows after these exist (their lines are prefetched). M = 8 consecutive rows: the
    // accumulator loads and stores per row are what limit this loop; 8 measured 12% faster
    // than 4.
    auto fold = [&](const T* r, int64_t step, auto rows, bool more, const T* first_row, bool last,
                    const Weights& w) {
      constexpr int M = decltype(rows)::value;
      const bool first = first_row != nullptr;
      alignas(64) C block[3][W];
      int64_t j = 0;
      for (; j + W <= nb; j += W) {
        if (more) prefetch_rows<M>(r + M * rs + j, rs);
        C* slot = acc + 3 * j;
        V sh, a, q;
        if (first) {
          sh = V::load_convert(first_row + j);
          a = q = V(C(0));
        } else {
          sh = V::load(slot);
          a = V::load(slot + W);
          q = V::load(slot + 2 * W);
        }
        for (int i = 0; i < M; ++i) {
          const V d = V::load_convert(r + i * step + j) - sh;
          a = a + d;
          q = V::fmadd(d, d, q);
        }
        if (last) {
          sh.store(block[0]);
          a.store(block[1]);
          q.store(block[2]);
          merge_block(w, j, block[0], block[1], block[2]);
        } else {
          if (first) sh.store(slot);
          a.store(slot + W);
          q.store(slot + 2 * W);
        }
      }
      for (; j < nb; ++j) {  // the tail: a block of fewer than W columns, lane j % W
        C* slot = acc + 3 * (j - j % W) + j % W;
        C sh = first ? static_cast<C>(first_row[j]) : slot[0];
        C a = first ? C(0) : slot[W], q = first ? C(0) : slot[2 * W];
        for (int i = 0; i < M; ++i) {
          const C d = static_cast<C>(r[i * step + j]) - sh;
          a += d;
          q += d * d;
        }
        if (last) {
          merge(w, j, sh, a, q);
        } else {
          slot[0] = sh;
          slot[W] = a;
          slot[2 * W] = q;
        }
      }
    };
    int64_t k = 0;
    if (parts) {
      // A group is kPasses passes of one row from each of the four parts (see
      // extreme_cols_strip), shifted by its first row, which it folds too (a deviation of 0);
      // the rows left over after the parts form the groups below. 8192 x 8192 over dim 0 on
      // the Zen 5 VM, alternated call by call in one process (medians of 15): float32 var
      // 1.02-1.05x faster on one thread and on two (three runs each), float64 1.12x (one
      // thread, one run); two rows of each part per pass (eight, as the consecutive passes
      // take) ran 0.93-0.99x.
      const int64_t q = K / kColParts;
      constexpr int64_t kPasses = (kGroup - 1) / kColParts;
      for (int64_t p0 = 0; p0 < q; p0 += kPasses) {
        const int64_t pe = std::min(q, p0 + kPasses);
        const Weights w = weights(kColParts * (pe - p0));
        for (int64_t p = p0; p < pe; ++p)
          fold(xs + p * rs, q * rs, std::integral_constant<int, kColParts>{}, false,
               p == p0 ? xs + p0 * rs : nullptr, p + 1 == pe, w);
        cnt += static_cast<double>(kColParts * (pe - p0));
      }
      k = kColParts * q;
    }
    for (int64_t k0 = k; k0 < K; k0 += kGroup) {
      const int64_t ke = std::min(K, k0 + kGroup);
      const Weights w = weights(ke - k0);
      const T* first = xs + k0 * rs;  // the first row's deviation is 0: it is not folded
      k = k0 + 1;
      if (k == ke) fold(first, rs, std::integral_constant<int, 0>{}, false, first, true, w);
      for (; k + 8 <= ke; k += 8)
        fold(xs + k * rs, rs, std::integral_constant<int, 8>{}, pf && k + 16 <= K,
             k == k0 + 1 ? first : nullptr, k + 8 == ke, w);
      for (; k < ke; ++k)
        fold(xs + k * rs, rs, std::integral_constant<int, 1>{}, false,
             k == k0 + 1 ? first : nullptr, k + 1 == ke, w);
      cnt += static_cast<double>(ke - k0);
    }
    for (int64_t j = 0; j < nb; ++j) out[c0 + j] = Partial{mean[j], m2[j], 0, K};
  }
}

void moments_cols(const ReduceArgs& args) {
  visit_dtype<kKernelFloat>(args.dtype, "var", [&]<class T>() {
    moments_cols_impl(static_cast<const T*>(args.in), args.K, args.row_stride, args.N,
                      read_in_parts(args), args.out);
  });
}

}  // namespace

const ReduceKernels& reduce_kernels() {
  static const ReduceKernels table{&reduce_rows, &reduce_cols,  &arg_rows,
                                   &arg_cols,    &moments_rows, &moments_cols};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
