// Per-ISA batched small factorizations (small_kernels.h): one matrix per SIMD lane.
//
// Interleaved group buffer of W lanes: element (i, j) of lane l at buf[(i * n + j) * W + l], so
// at(i, j) is one vector. The loops below are the per-matrix kernels' loops (potrf_lower_
// unblocked and getf2) with scalars replaced by vectors; the per-lane decisions are compares
// and blends (the pivot row, a zero pivot), or a small scalar loop over the lanes (a failed
// leading minor). The group buffers are 64-byte aligned (cached_vector), so no vector straddles
// two cache lines: from std::vector (16-byte alignment) a batch of 10,000 float64 32 x 32 LU
// factorizations took 24.3-24.9 ms against 17.7-18.4 ms aligned.
#include "linalg/small/small_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cached_vector.h"
#include "core/prefetch.h"
#include "core/vec.h"
#include "linalg/small/interleave.h"
#include "linalg/small/lane_qr.h"

namespace tessera::cpu::TS_ISA {

namespace {

using vec::TS_ISA::Vec;

// The group's buffer (reused per thread) holding W interleaved n x n matrices: lanes below
// `used` from a (row-major, n*n apart), the others the identity. With `lower` (Cholesky, which
// reads only lower triangles, as LAPACK's uplo = 'L') blocks wholly above the diagonal are
// skipped and hold stale values.
template <class T>
[[gnu::always_inline]] inline T* gather(int64_t n, const T* a, int used, bool lower = false) {
  thread_local cached_vector<T> buf;
  buf.resize(static_cast<size_t>(n * n * Vec<T>::kSize));
  interleave_plain(n, a, used, buf.data(), lower);
  return buf.data();
}

// The row stride (in vectors) of a group's n x n buffer in the factorizations: n, or n + 1 for
// n = 16 and 32. There a column's vectors are n * 64 bytes apart, a multiple of 1 KiB, so they
// fall in a few L1 sets and evict each other, and the Crout loops walk columns (a batch of
// 10,000 float64 32 x 32 LU: 46-50 -> 36-40 ms with the padding).
template <class N>
int64_t group_ld(N n) {
  if constexpr (std::is_same_v<N, int64_t>) {
    if (n >= 16 && n % 16 == 0) return n + 1;
  }
  return n;
}

// W interleaved n x n matrices into buf with rows ld vectors apart (gather's, for any ld).
template <class T>
[[gnu::always_inline]] inline void interleave_group(int64_t n, int64_t ld, const T* a, int used,
                                                    T* buf, bool lower = false) {
  constexpr int W = Vec<T>::kSize;
  if (ld == n) return interleave_plain(n, a, used, buf, lower);
  rows_to_interleaved(n, n, ld, a, used, buf, lower);
  for (int l = used; l < W; ++l)
    for (int64_t i = 0; i < n; ++i) buf[(i * ld + i) * W + l] = T(1);
}

// gather, into rows ld vectors apart.
template <class T>
[[gnu::always_inline]] inline T* gather_ld(int64_t n, int64_t ld, const T* a, int used,
                                           bool lower = false) {
  if (ld == n) return gather(n, a, used, lower);
  thread_local cached_vector<T> buf;
  buf.resize(static_cast<size_t>(n * ld * Vec<T>::kSize));
  interleave_group(n, ld, a, used, buf.data(), lower);
  return buf.data();
}

// The group's factors from buf (rows ld vectors apart) to out; with `lower`, the strict upper
// triangle goes out as zero (`stream`: interleaved_to_lanes').
template <class T>
[[gnu::always_inline]] inline void scatter_ld(int64_t n, int64_t ld, const T* buf, int used, T* out,
                                              bool lower, bool stream) {
  if (ld == n) return interleaved_to_lanes(buf, n * n, used, out, lower ? n : 0, 0, stream);
  interleaved_to_rows(n, n, ld, buf, used, out, lower, stream);
}

// c - a * b with one rounding where the ISA has FMA (the generic ISA's fmadd rounds twice, as
// its c - a * b does). Written out: GCC fuses the expression into one FMA only at -O2 and above,
// so the sanitizer build (-O1) rounded these twice while the leaves' explicit FMAs (getf2's row
// updates, minus_columns) rounded once, and the lane LU of a batch no longer matched the LU of
// one of its matrices alone there. The Release bits are unchanged.
template <class V>
[[gnu::always_inline]] inline V minus_product(V c, std::type_identity_t<V> a,
                                              std::type_identity_t<V> b) {
  return V::fmadd(-a, b, c);
}

// s[r] -= a(r, t) * x(t) summed in order of t < len: R rows share each x(t) and run R
// independent chains.
template <int R, class V, class A, class X>
[[gnu::always_inline]] inline void dot_rows(V* s, int64_t len, const A& a, const X& x) {
#pragma GCC unroll 8
  for (int64_t t = 0; t < len; ++t) {
    const V xt = x(t);
    for (int r = 0; r < R; ++r) s[r] = minus_product(s[r], a(r, t), xt);
  }
}

// Rows i .. i+R-1 of column j less their products with c over k < m, stored as f(s):
// s_r = a(i+r, j) - sum_k<m a(i+r, k) c(k), summed in order of k. R rows at once share the
// loads of c (a 32 x 32 group is bigger than L1) and run R independent chains.
// With k0 > 0 the sums run over k0 <= k < m (the terms below k0 are already in a(i+r, j)).
template <int R, class V, class At, class C, class F>
[[gnu::always_inline]] inline void column_update(const At& at, int64_t i, int64_t j, int64_t m,
                                                 const C& c, const F& f, int64_t k0 = 0) {
  V s[R];
  for (int r = 0; r < R; ++r) s[r] = V::load(at(i + r, j));
  dot_rows<R>(
      s, m - k0, [&](int r, int64_t t) { return V::load(at(i + r, k0 + t)); },
      [&](int64_t t) { return c(k0 + t); });
  for (int r = 0; r < R; ++r) f(s[r]).store(at(i + r, j));
}

// Column j's rows from `from` on, column_update over k0 <= k < j in blocks of four rows.
template <class V, class At, class C, class F>
[[gnu::always_inline]] inline void column_rows(const At& at, int64_t from, int64_t n, int64_t j,
                                               const C& c, const F& f, int64_t k0 = 0) {
  int64_t i = from;
  for (; i + 4 <= n; i += 4) column_update<4, V>(at, i, j, j, c, f, k0);
  for (; i < n; ++i) column_update<1, V>(at, i, j, j, c, f, k0);
}

// The blocked Cholesky's tiles: R x C elements of the group (R x C vectors) updated together,
// each L(i + r, k) and L(j0 + c, k) loaded once per k for R * C multiply-adds in R * C
// independent chains (column_update's four rows load one vector per multiply-add and run four
// chains). 4 x 4 where there are 32 vector registers, 2 x 4 where there are 16.
#if defined(__AVX512F__)
constexpr int kTileRows = 4;
#else
constexpr int kTileRows = 2;
#endif
constexpr int kTileCols = 4;

// A(i + r, j0 + c) -= sum_{k < kend} A(i + r, k) X(c, k) for r < R, c < C (c <= r with kDiag),
// in place, each sum in order of k; x(c, k) points at X(c, k). With kTriangle (the rows' own
// forward substitution, LU's U above a block of columns) the rows then take their unit lower
// R x R triangle from column kend = i on: row r less A(i + r, i + q) times row q's result, q < r.
template <int R, int C, bool kDiag, bool kTriangle, class V, class At, class X>
[[gnu::always_inline]] inline void tile_update(const At& at, int64_t i, int64_t j0, int64_t kend,
                                               const X& x) {
  V s[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      if (!kDiag || c <= r) s[r][c] = V::load(at(i + r, j0 + c));
#pragma GCC unroll 4
  for (int64_t k = 0; k < kend; ++k) {
    V xk[C];
    for (int c = 0; c < C; ++c) xk[c] = V::load(x(c, k));
    for (int r = 0; r < R; ++r) {
      const V y = V::load(at(i + r, k));
      for (int c = 0; c < C; ++c)
        if (!kDiag || c <= r) s[r][c] = minus_product(s[r][c], y, xk[c]);
    }
  }
  if constexpr (kTriangle) {
    for (int r = 1; r < R; ++r) {
      for (int q = 0; q < r; ++q) {
        const V y = V::load(at(i + r, i + q));
        for (int c = 0; c < C; ++c) s[r][c] = minus_product(s[r][c], y, s[q][c]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      if (!kDiag || c <= r) s[r][c].store(at(i + r, j0 + c));
}

// Rows [from, n) of columns [j0, j0 + C) less their sums over k < j0, kTileRows rows a tile.
template <int C, class V, class At, class X>
[[gnu::always_inline]] inline void rows_update(const At& at, int64_t from, int64_t n, int64_t j0,
                                               const X& x) {
  int64_t i = from;
  for (; i + kTileRows <= n; i += kTileRows)
    tile_update<kTileRows, C, false, false, V>(at, i, j0, j0, x);
  for (; i < n; ++i) tile_update<1, C, false, false, V>(at, i, j0, j0, x);
}

// Cholesky: columns [j0, j0 + C) on and below the diagonal less the products of the columns
// left of j0 (X(c, k) = L(j0 + c, k)).
template <int C, class V, class At>
[[gnu::always_inline]] inline void block_update(const At& at, int64_t n, int64_t j0) {
  const auto x = [&](int c, int64_t k) { return at(j0 + c, k); };
  tile_update<C, C, true, false, V>(at, j0, j0, j0, x);
  rows_update<C, V>(at, j0 + C, n, j0, x);
}

// LU (Crout): columns [j0, j0 + C) less the products of the finished columns left of j0 (X(c, k)
// = U(k, j0 + c)): rows above j0 become U by forward substitution, tile by tile down the rows
// (a tile's sums run over the rows above it, final by then, and it ends with its own
// triangle); rows from j0 down take the sums over k < j0. j0 is a multiple of kTileRows.
template <int C, class V, class At>
[[gnu::always_inline]] inline void lu_block_update(const At& at, int64_t n, int64_t j0) {
  static_assert(kTileCols % kTileRows == 0, "blocks start on a tile of rows");
  const auto x = [&](int c, int64_t k) { return at(k, j0 + c); };
  for (int64_t i = 0; i < j0; i += kTileRows)
    tile_update<kTileRows, C, false, true, V>(at, i, j0, i, x);
  rows_update<C, V>(at, j0, n, j0, x);
}

// f(integral_constant<int, C>) for the width C = min(kTileCols, n - j0) of the block of columns
// at j0.
template <class F>
[[gnu::always_inline]] inline void with_block_width(int64_t n, int64_t j0, const F& f) {
  switch (std::min<int64_t>(kTileCols, n - j0)) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, kTileCols>{});
  }
}

// Cholesky's diagonal step j: L(j, j) = sqrt(d) of the minor d stored at `diag`, and 1 / L(j, j)
// returned. Lanes whose minor is not positive (NaN fails too) record j + 1 in fail (the first
// failing order) and go on with d = 1, to stay finite (they are not scattered). 1 / L(j, j) is
// sqrt(d) * (1 / d): the square root and the division run side by side rather than one after
// the other on the column's chain (three roundings from 1 / sqrt(d) against two; in cache, 4% of
// a batch of 4 x 4 float64 factorizations, 12% of 8 x 8). It needs 1 / d normal: outside
// [min, 1 / min] (and where a minor is not positive) it is 1 / L(j, j).
template <class T, int W>
[[gnu::always_inline]] inline Vec<T> cholesky_diagonal(Vec<T> d, int64_t j, int32_t (&fail)[W],
                                                       T* diag) {
  using V = Vec<T>;
  const V lo(std::numeric_limits<T>::min()), hi(T(1) / std::numeric_limits<T>::min());
  const bool plain = V::all_lt(lo, d) && V::all_lt(d, hi);
  if (!plain && !V::all_lt(V(T(0)), d)) {
    alignas(64) T lane[W];
    d.store(lane);
    for (int l = 0; l < W; ++l) {
      if (!(lane[l] > T(0))) {
        if (!fail[l]) fail[l] = static_cast<int32_t>(j + 1);
        lane[l] = T(1);
      }
    }
    d = V::load(lane);
  }
  const V inv = V(T(1)) / d;
  d = d.sqrt();
  d.store(diag);
  return plain ? d * inv : V(T(1)) / d;
}

// Step j of `steps` of a group's factorization prefetches its share of the next group's input
// (the `bytes` after a, where this group's W matrices end), so that it arrives while this one
// computes; the transposes' own prefetch runs only a block ahead of their loads. Used by groups
// of kPrefetchGroupBytes or more (Cholesky of 10,000 float64 32 x 32 matrices 4-11% faster,
// float32 1-7%; at 16 x 16, 16 KiB a group, float32 ran slower).
inline constexpr int64_t kPrefetchGroupBytes = int64_t{32} << 10;
[[gnu::always_inline]] inline void prefetch_next_group(const void* a, int64_t bytes, int64_t j,
                                                       int64_t steps) {
  const int64_t lines = bytes / 64, per = (lines + steps - 1) / steps;
  for (int64_t q = j * per; q < std::min(lines, (j + 1) * per); ++q)
    __builtin_prefetch(ahead(a, bytes + q * 64));
}

// Lower Cholesky of one group, left-looking: column j is A(j:n, j) less the products of the
// finished columns' rows, L(i, j) = (A(i, j) - sum_k<j L(i, k) L(j, k)) / L(j, j). Each element
// is stored once per block of kTileCols columns (the right-looking update stored every trailing
// element at every step, and those stores bound it); the upper triangle is never touched and
// goes out as zero. The sums over k < j0 (the block's first column) run in register tiles
// (block_update), the rest column by column, every sum in order of k as in the unblocked loop.
template <class T, class N>
void potrf_group(N n, const T* a, T* out, int used, int32_t* info, bool stream) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const int64_t ld = group_ld(n);
  T* buf = gather_ld(n, ld, a, used, /*lower=*/true);
  auto at = [&](int64_t i, int64_t j) { return buf + (i * ld + j) * W; };
  int32_t fail[W] = {};
  const int64_t group_bytes = W * n * n * static_cast<int64_t>(sizeof(T));
  const bool prefetch = used == W && group_bytes >= kPrefetchGroupBytes;  // a next group may follow
  for (int64_t j = 0; j < n; ++j) {
    if (prefetch) prefetch_next_group(a, group_bytes, j, n);
    // Every kTileCols columns, the block's columns first take the products of all the columns
    // left of it, tile by tile; each column then needs only those within its block.
    const int64_t j0 = j / kTileCols * kTileCols;
    if (j == j0 && j0 > 0) {
      with_block_width(
          n, j0, [&](auto c) __attribute__((always_inline)) {
            block_update<decltype(c)::value, V>(at, n, j0);
          });
    }
    V d = V::load(at(j, j));
    for (int64_t k = j0; k < j; ++k) {
      const V ljk = V::load(at(j, k));
      d = minus_product(d, ljk, ljk);
    }
    const V r = cholesky_diagonal<T>(d, j, fail, at(j, j));
    column_rows<V>(
        at, j + 1, n, j, [&](int64_t k) { return V::load(at(j, k)); }, [&](V x) { return x * r; },
        j0);
  }
  scatter_ld(n, ld, buf, used, out, /*lower=*/true, stream);
  for (int l = 0; l < used; ++l) {
    info[l] = fail[l];
    if (fail[l]) std::copy(a + l * n * n, a + (l + 1) * n * n, out + l * n * n);
  }
}

// Row j's vectors [k0, k0 + B) swapped, lane by lane, with those of the rows chosen[c] in the
// lanes where take[c] is 1: row j's block stays in registers while each chosen row is read
// once and written once (row j takes that row's lanes, the row takes row j's original ones).
template <int B, class T, class Row>
[[gnu::always_inline]] inline void swap_block(int64_t j, int64_t k0, const int64_t* chosen,
                                              const Vec<T>* take, int count, const Row& row) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const V half(T(0.5));
  T* xj = row(j) + k0 * W;
  V orig[B], cur[B];
  for (int t = 0; t < B; ++t) orig[t] = cur[t] = V::load(xj + t * W);
  for (int c = 0; c < count; ++c) {
    T* xr = row(chosen[c]) + k0 * W;
    for (int t = 0; t < B; ++t) {
      const V ar = V::load(xr + t * W);
      cur[t] = V::select_lt(take[c], half, cur[t], ar);
      V::select_lt(take[c], half, ar, orig[t]).store(xr + t * W);
    }
  }
  for (int t = 0; t < B; ++t) cur[t].store(xj + t * W);
}

// Swaps `len` vectors of row j with those of row r in the lanes where p (a per-lane row index,
// -1 for none) equals r, for every r != j: LU's row interchange of step j, on the factor or on
// right-hand sides (a caller's pivots may name rows above j, as LAPACK's getrs allows). The
// rows some lane chose come from a bit mask built from the lanes' indices (testing each row
// below j for a lane that chose it took a branch per row that the predictor could not learn:
// 8-16% of a batch of 16 x 16 or 32 x 32 factorizations). Rows no lane chose are not
// touched; row j is read and written once per block of eight vectors (swapping it with each
// chosen row in turn wrote it once per row, and those stores bound a batch of 32 x 32
// factorizations).
template <class T, class Row>
void swap_pivot_rows(Vec<T> p, int64_t j, int64_t len, const Row& row) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  static_assert(kSmallMax <= 64, "one bit per row");
  const V zero(T(0)), one(T(1));
  alignas(64) T lane[W];
  p.store(lane);
  uint64_t rows = 0;  // bit r: some lane chose row r != j
  for (int l = 0; l < W; ++l)
    if (lane[l] >= T(0) && lane[l] != T(j)) rows |= uint64_t(1) << static_cast<int>(lane[l]);
  int64_t chosen[kSmallMax];
  V take[kSmallMax];
  int count = 0;
  for (; rows != 0; rows &= rows - 1) {
    const int r = std::countr_zero(rows);
    chosen[count] = r;
    take[count++] = V::select_eq(p, V(T(r)), one, zero);
  }
  if (count == 0) return;
  int64_t k = 0;
  for (; k + 8 <= len; k += 8) swap_block<8, T>(j, k, chosen, take, count, row);
  if (k + 4 <= len) swap_block<4, T>(j, k, chosen, take, count, row), k += 4;
  for (; k < len; ++k) swap_block<1, T>(j, k, chosen, take, count, row);
}

// The lanes' 0-based pivots (ipiv: n per lane, 1-based) as vectors, p[j * W + l] (-1 in unused
// lanes: no row is -1, so those lanes swap nothing). On AVX-512 the int32 pivots are moved as
// float bits by the 16-lane transposes and converted in registers: converting into a buffer
// first left the transposes' loads waiting on stores they could not forward from (29% of a
// batch of 10,000 float64 4 x 4 lu_solve calls).
template <class T>
void pivot_vectors(int64_t n, const int32_t* ipiv, int used, T* p) {
  constexpr int W = Vec<T>::kSize;
#if defined(__AVX512F__)
  alignas(64) float bits[kSmallMax * 16];
  lanes_to_interleaved(reinterpret_cast<const float*>(ipiv), n, used, bits);
  for (int64_t j = 0; j < n; ++j) {
    const __m512i v = _mm512_load_si512(bits + j * 16);
    if constexpr (std::is_same_v<T, float>) {
      _mm512_store_ps(p + j * W, _mm512_sub_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(1.0f)));
    } else {
      _mm512_store_pd(p + j * W, _mm512_sub_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(v)),
                                               _mm512_set1_pd(1.0)));
    }
  }
#else
  for (int64_t j = 0; j < n; ++j)
    for (int l = 0; l < W; ++l)
      p[j * W + l] = l < used ? static_cast<T>(ipiv[l * n + j] - 1) : T(-1);
#endif
}

// Each lane's interchanges applied in order to its one right-hand side in the interleaved x (n
// vectors), as scalar swaps: for one column these cost less than swap_pivot_rows' vector
// operation per row some lane chose. row(l, j): the row (0-based, any) lane l's step j takes.
template <class T, class Row>
void interchange_lanes(int64_t n, int used, T* x, const Row& row) {
  constexpr int W = Vec<T>::kSize;
  for (int l = 0; l < used; ++l)
    for (int64_t j = 0; j < n; ++j) std::swap(x[j * W + l], x[row(l, j) * W + l]);
}

// The row lane l's step j takes, from 1-based pivots (n per lane) and from pivot vectors
// (p[j * W + l], 0-based), for interchange_lanes.
inline auto ipiv_rows(int64_t n, const int32_t* ipiv) {
  return [=](int l, int64_t j) { return int64_t{ipiv[l * n + j]} - 1; };
}
template <class T>
auto vector_rows(const T* p) {
  return [=](int l, int64_t j) { return static_cast<int64_t>(p[j * Vec<T>::kSize + l]); };
}

// The interchanges of pivot vectors p (0-based, as getrf's) applied in order to the interleaved
// right-hand sides x (n x k vectors) of the `used` lanes.
template <class T>
void interchange_rhs(int64_t n, int64_t k, int used, const T* p, T* x) {
  constexpr int W = Vec<T>::kSize;
  if (k == 1) return interchange_lanes(n, used, x, vector_rows(p));
  for (int64_t j = 0; j < n; ++j)
    swap_pivot_rows<T>(Vec<T>::load(p + j * W), j, k, [&](int64_t i) { return x + i * k * W; });
}

// Whether, at every step j, every lane's pivot (pivot vectors p, -1 in unused lanes) is row j
// or one below it, as getrf's are: the unrolled interchange reads only those rows.
template <class T>
bool pivots_at_or_below(int64_t n, const T* p) {
  using V = Vec<T>;
  bool ok = true;
  for (int64_t j = 1; j < n; ++j) {
    const V pj = V::load(p + j * V::kSize);
    ok &= V::all_lt(V(T(j) - T(0.5)), V::select_lt(pj, V(T(0)), V(T(j)), pj));
  }
  return ok;
}

// info[l] = first_zero's lane l (getrf's first zero pivot, 1-based, 0 if none), for l < used.
template <class T>
void info_to_lanes(Vec<T> first_zero, int used, int32_t* info) {
  alignas(64) T lane[Vec<T>::kSize];
  first_zero.store(lane);
  for (int l = 0; l < used; ++l) info[l] = static_cast<int32_t>(lane[l]);
}

// The inverse of pivot_vectors for getrf's results: ipiv[l * n + j] = p[j * W + l] + 1 (p: the
// 0-based rows chosen, as vectors) and info[l] = first_zero's lane l, for lanes l < used. On
// AVX-512 the pivots are converted in registers and move out as float bits by the 16-lane
// transposes (a conversion and a store per pivot were 8-9% of a batch of 16 x 16 float64
// factorizations).
template <class T>
void pivots_to_lanes(int64_t n, const T* p, Vec<T> first_zero, int used, int32_t* ipiv,
                     int32_t* info) {
  constexpr int W = Vec<T>::kSize;
  info_to_lanes(first_zero, used, info);
#if defined(__AVX512F__)
  if (n >= 8) {  // below 8 the scalar loop costs less than a 16 x 16 transpose
    alignas(64) float bits[kSmallMax * 16];
    for (int64_t j = 0; j < n; ++j) {
      __m512i v;
      if constexpr (std::is_same_v<T, float>) {
        v = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_loadu_ps(p + j * W), _mm512_set1_ps(1.0f)));
      } else {
        v = _mm512_zextsi256_si512(
            _mm512_cvttpd_epi32(_mm512_add_pd(_mm512_loadu_pd(p + j * W), _mm512_set1_pd(1.0))));
      }
      _mm512_store_si512(bits + j * 16, v);
    }
    interleaved_to_lanes(bits, n, used, reinterpret_cast<float*>(ipiv));
    return;
  }
#endif
  for (int l = 0; l < used; ++l)
    for (int64_t j = 0; j < n; ++j) ipiv[l * n + j] = static_cast<int32_t>(p[j * W + l]) + 1;
}

// Step j's zero-pivot bookkeeping, per lane: 1 where the pivot is zero (NaN is not), 0 else
// (returned); first_zero takes j + 1 (1-based) in the lanes whose first zero pivot this is.
template <class T>
[[gnu::always_inline]] inline Vec<T> record_zero_pivot(Vec<T> pivot, int64_t j,
                                                       Vec<T>& first_zero) {
  using V = Vec<T>;
  const V zero(T(0)), one(T(1)), half(T(0.5));
  const V is_zero = V::select_eq(pivot, zero, one, zero);
  first_zero =
      V::select_eq(first_zero, zero, V::select_lt(half, is_zero, V(T(j + 1)), zero), first_zero);
  return is_zero;
}

// LU with partial pivoting of one group, left-looking (Crout order, as potrf_group): step j
// first finishes column j from the finished columns, U above the diagonal by forward
// substitution and the pivot candidates on and below it, so each element is stored once rather
// than at every step of a right-looking update (the sums run over k in the order of getf2's
// updates). The sums over the columns left of a block of kTileCols run in register tiles
// (lu_block_update; a row swapped later carries its partial sums along): batches of 10,000
// Gaussian 32 x 32 matrices 1186 -> 1115 ns per matrix float32, 1975 -> 1833 float64, 16 x 16
// 239 -> 226 and 437 -> 415 (one thread, alternating in one process, against four rows at a
// time per column). Then the pivot (per lane, compares and blends), the swap of rows and the
// scale.
//
// The group comes in from a (the `used` row-major n x n matrices; the identity in the other
// lanes) a slab of W columns at a time (whole blocks of kTileCols), as step j reaches the slab:
// until then its columns hold A as given, so each lane's rows are read from where that lane's
// interchanges so far have put them, and the swaps of a step reach only the columns up to the
// end of its slab. (Each swap costs a load, two blends and a store per vector of a row for every
// row some lane chose, and with 16 lanes most steps choose a dozen rows: on Gaussian matrices
// the swaps were a third of a float32 32 x 32 factorization.) Batches of 10,000 Gaussian
// matrices, one thread, alternating in one process with the group read whole before the first
// step: 32 x 32 float32 1020 -> 945 ns per matrix, float64 1690 -> 1590; 16 x 16 float64 410 ->
// 392. Below two slabs the group is read whole as before (one slab saves nothing; a float32
// 24 x 24 as 16 + 8 columns paid in half-empty transposes what it saved). The factors are in buf
// (rows ld vectors apart); the rows chosen at step j (0-based, per lane) go to pivots[j * W ..],
// and the lanes' first zero pivots (1-based, 0 if none) are returned.
template <class T, class N>
Vec<T> getf2_lanes(N n, int64_t ld, const T* a, int used, T* buf, T* pivots) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  auto at = [&](int64_t i, int64_t j) { return buf + (i * ld + j) * W; };
  const V zero(T(0)), one(T(1)), half(T(0.5));
  V first_zero = zero;  // 1-based step of the first zero pivot, 0 if none
  constexpr int64_t kSlab = std::max(W, kTileCols);  // whole blocks of the Crout order
  const int64_t slab = n >= 2 * kSlab ? kSlab : n;
  // Lanes < used, from the second slab on: the row of a that the lane's interchanges so far
  // have put at row i.
  const T* rows[kSmallMax][W];
  int64_t done = 0;  // the steps whose interchanges rows holds
  // Columns [j, j + len) of every row. The next group's lines are prefetched alongside, lane by
  // lane (its matrices follow this group's in a batch; past the batch's end those lines are
  // never used, and a prefetch never faults).
  const auto read_slab = [&](int64_t j, int len) {
    if (len == n) return interleave_group(n, ld, a, used, buf);
    if (j == slab) {
      for (int64_t i = 0; i < n; ++i)
        for (int l = 0; l < used; ++l) rows[i][l] = a + (l * n + i) * n;
    }
    for (; done < j; ++done)
      for (int l = 0; l < used; ++l)
        std::swap(rows[done][l], rows[static_cast<int64_t>(pivots[done * W + l])][l]);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = j; c < j + len; c += W) {
        for (int l = 0; l < W; ++l)
          __builtin_prefetch(
              ahead(a, ((W + l) * n * n + i * n + c) * static_cast<int64_t>(sizeof(T))));
        const int w = static_cast<int>(std::min<int64_t>(W, j + len - c));
        if (j == 0) {
          lane_rows_to_interleaved<T>([&](int l) { return a + (l * n + i) * n + c; }, used, w,
                                      at(i, c));
        } else {
          lane_rows_to_interleaved<T>([&](int l) { return rows[i][l] + c; }, used, w, at(i, c));
        }
      }
    }
    for (int64_t i = j; i < j + len; ++i)  // the identity in the unused lanes
      for (int l = used; l < W; ++l) at(i, i)[l] = T(1);
  };
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slab_end = std::min<int64_t>(n, (j / slab + 1) * slab);
    if (j % slab == 0) read_slab(j, static_cast<int>(slab_end - j));
    const auto u = [&](int64_t k) { return V::load(at(k, j)); };
    const auto keep = [](V x) { return x; };
    // Every kTileCols columns, the block's columns first take the products of all the finished
    // columns, tile by tile (lu_block_update); each column then needs only those within its
    // block: U(j0 .. j-1, j) by forward substitution, and the pivot candidates.
    const int64_t j0 = j / kTileCols * kTileCols;
    if (j == j0 && j0 > 0) {
      with_block_width(
          n, j0, [&](auto c) __attribute__((always_inline)) {
            lu_block_update<decltype(c)::value, V>(at, n, j0);
          });
    }
    for (int64_t i = std::max<int64_t>(j0, 1); i < j; ++i)
      column_update<1, V>(at, i, j, i, u, keep, j0);
    column_rows<V>(at, j, n, j, u, keep, j0);
    // Pivot: the first row with the largest |a(i, j)| (a < b is false for NaN: kept).
    V best = V::load(at(j, j)).abs();
    V p = V(T(j)), i_vec = p;  // i as a vector, counted up rather than converted each time
    for (int64_t i = j + 1; i < n; ++i) {
      const V v = V::load(at(i, j)).abs();
      i_vec = i_vec + one;
      p = V::select_lt(best, v, i_vec, p);
      best = V::select_lt(best, v, v, best);
    }
    p.store(pivots + j * W);
    swap_pivot_rows<T>(p, j, slab_end, [&](int64_t i) { return at(i, 0); });
    // A zero pivot is recorded and its column left unscaled (getf2 skips it); NaN is not zero.
    const V piv = V::load(at(j, j));
    const V is_zero = record_zero_pivot<T>(piv, j, first_zero);
    const V r = one / piv;
    for (int64_t i = j + 1; i < n; ++i) {
      const V x = V::load(at(i, j));
      V::select_lt(half, is_zero, x, x * r).store(at(i, j));
    }
  }
  return first_zero;
}

// A group's buffer of `vectors` vectors, filled by its factorization, reused per thread.
template <class T>
T* group_buffer(int64_t vectors) {
  thread_local cached_vector<T> buf;
  buf.resize(static_cast<size_t>(vectors * Vec<T>::kSize));
  return buf.data();
}

// The row each lane chose at each step of a group's factorization (n vectors), reused per
// thread.
template <class T>
T* pivot_scratch(int64_t n) {
  thread_local cached_vector<T> pivots;
  pivots.resize(static_cast<size_t>(n * Vec<T>::kSize));
  return pivots.data();
}

template <class T, class N>
void getrf_group(N n, const T* a, T* out, int used, int32_t* ipiv, int32_t* info, bool stream) {
  const int64_t ld = group_ld(n);
  T* buf = group_buffer<T>(n * ld);
  T* pivots = pivot_scratch<T>(n);
  const Vec<T> first_zero = getf2_lanes(n, ld, a, used, buf, pivots);
  pivots_to_lanes(n, pivots, first_zero, used, ipiv, info);
  scatter_ld(n, ld, buf, used, out, /*lower=*/false, stream);
}

// The unrolled kernels for a compile-time order n <= 8 (getrf_fixed, potrf_fixed,
// substitute_fixed) are built in optimized builds without the sanitizers only; elsewhere
// n = 2..8 run the general loops, which compute the same bits: with the sanitizers thousands of
// forced inlinings took 18 minutes to compile for one table. Their helpers and lambdas are
// forced inline: one left out of line kept its arrays of vectors in memory (2x slower).
#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__)
constexpr bool kUnrolledKernels = true;
#define TS_UNROLLED __attribute__((always_inline))
#else
constexpr bool kUnrolledKernels = false;
#define TS_UNROLLED
#endif

// Whether a group loop whose order has type N (an integral_constant from with_size, or int64_t)
// runs the unrolled kernels.
template <class N>
constexpr bool unrolled = kUnrolledKernels && !std::is_same_v<N, int64_t>;

// f(integral_constant<int64_t, i>) for i in [B, E), unrolled at compile time: indices into local
// arrays of vectors stay constants, so the arrays live in registers.
template <int64_t B, int64_t E, class F>
TS_UNROLLED inline void static_for(const F& f) {
  if constexpr (B < E) {
    f(std::integral_constant<int64_t, B>{});
    static_for<B + 1, E>(f);
  }
}

// LU's row interchange of step J on the vectors x[J .. N) of one column: in lane l, x[J] and
// x[p(l)] exchanged (p holds row numbers >= J), by a compare and two blends per row below J,
// no branches.
template <class T, int64_t J, int64_t N>
TS_UNROLLED inline void interchange(Vec<T> p, Vec<T>* x) {
  using V = Vec<T>;
  V xj = x[J];
  static_for<J + 1, N>([&](auto i) TS_UNROLLED {
    xj = V::select_eq(p, V(T(i)), x[i], xj);
    x[i] = V::select_eq(p, V(T(i)), x[J], x[i]);
  });
  x[J] = xj;
}

// G groups' W matrices of order N (back to back in a, all but the last full) interleaved into
// buf[g] (lanes from `used` on the identity; `lower`: interleave_plain's).
template <class T, int64_t N, int G>
void interleave_groups(const T* a, int used, T (*buf)[N * N * Vec<T>::kSize], bool lower = false) {
  constexpr int W = Vec<T>::kSize;
  for (int g = 0; g < G; ++g)
    interleave_plain(N, a + g * N * N * W, g + 1 < G ? W : used, buf[g], lower);
}

// potrf_group for a compile-time order N <= 8 on G groups (back to back in a and out; all but
// the last full), right-looking (every sum in the order of the left-looking loop, so the
// factor is the same bits): unrolled, column j's vectors stay in registers from its scaling
// through the trailing update, and only the lower triangle is read or written. A step is one
// chain per group (the diagonal's square root and reciprocal, the scaling, the update of the
// next diagonal); G groups side by side give the core G independent chains.
template <class T, int64_t N, int G>
void potrf_fixed(const T* a, T* out, int used, int32_t* info, bool stream) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  constexpr int64_t kGroup = N * N * W;
  const auto lanes = [&](int g) { return g + 1 < G ? W : used; };
  alignas(64) T buf[G][kGroup];
  interleave_groups<T, N, G>(a, used, buf, /*lower=*/true);
  auto at = [&](int g, int64_t i, int64_t j) { return buf[g] + (i * N + j) * W; };
  int32_t fail[G][W] = {};
  static_for<0, N>([&](auto jc) TS_UNROLLED {
    constexpr int64_t j = jc;
    V c[G][N];
    static_for<0, G>([&](auto g) TS_UNROLLED {
      const V r = cholesky_diagonal<T>(V::load(at(g, j, j)), j, fail[g], at(g, j, j));
      static_for<j + 1, N>([&](auto i) TS_UNROLLED {
        c[g][i] = V::load(at(g, i, j)) * r;
        c[g][i].store(at(g, i, j));
      });
    });
    static_for<0, G>([&](auto g) TS_UNROLLED {
      static_for<j + 1, N>([&](auto k) TS_UNROLLED {
        static_for<k, N>([&](auto i) TS_UNROLLED {
          minus_product(V::load(at(g, i, k)), c[g][i], c[g][k]).store(at(g, i, k));
        });
      });
    });
  });
  for (int g = 0; g < G; ++g) {
    interleaved_to_lanes(buf[g], N * N, lanes(g), out + g * kGroup, /*lower_n=*/N, 0, stream);
    for (int l = 0; l < lanes(g); ++l) {
      const int64_t m = g * W + l;
      info[m] = fail[g][l];
      if (fail[g][l]) std::copy(a + m * N * N, a + (m + 1) * N * N, out + m * N * N);
    }
  }
}

// getf2_lanes for a compile-time order N <= 8 on the G interleaved groups buf[g] side by side,
// right-looking as getf2 (every sum in the same order as the Crout loop above, so the factors
// are the same bits). Unrolled, the per-lane row interchange is branch-free: per row below j a
// compare of the pivot indices with the row's number and two blends per column, the trailing
// columns' blends feeding their update (the general form found the chosen rows in a loop of
// unpredictable branches and converted each row number to a vector: 3/4 of a batch of 8 x 8
// float64 factorizations). A step is one chain (pivot search, interchange, division, scaling,
// update of the next column); G groups give the core G independent chains. The rows chosen at
// step j (0-based, per lane) go to pivots[g][j * W ..], the 1-based step of each lane's first
// zero pivot (0 if none) to first_zero[g].
template <class T, int64_t N, int G>
TS_UNROLLED inline void getf2_fixed(T (*buf)[N * N * Vec<T>::kSize], T (*pivots)[N * Vec<T>::kSize],
                                    Vec<T>* first_zero) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  auto at = [&](int g, int64_t i, int64_t j) { return buf[g] + (i * N + j) * W; };
  const V zero(T(0)), one(T(1)), half(T(0.5));
  for (int g = 0; g < G; ++g) first_zero[g] = zero;
  static_for<0, N>([&](auto jc) TS_UNROLLED {
    constexpr int64_t j = jc;
    V c[G][N], p[G];
    static_for<0, G>([&](auto g) TS_UNROLLED {
      // Pivot: the first row with the largest |a(i, j)| (a < b is false for NaN: kept).
      static_for<j, N>([&](auto i) TS_UNROLLED { c[g][i] = V::load(at(g, i, j)); });
      V best = c[g][j].abs();
      p[g] = V(T(j));
      static_for<j + 1, N>([&](auto i) TS_UNROLLED {
        const V v = c[g][i].abs();
        p[g] = V::select_lt(best, v, V(T(i)), p[g]);
        best = V::select_lt(best, v, v, best);
      });
      p[g].store(pivots[g] + j * W);
      interchange<T, j, N>(p[g], c[g]);
      // A zero pivot is recorded and its column left unscaled (getf2 skips it); NaN is not zero.
      const V is_zero = record_zero_pivot<T>(c[g][j], j, first_zero[g]);
      const V r = one / c[g][j];
      c[g][j].store(at(g, j, j));
      static_for<j + 1, N>([&](auto i) TS_UNROLLED {
        c[g][i] = V::select_lt(half, is_zero, c[g][i], c[g][i] * r);
        c[g][i].store(at(g, i, j));
      });
    });
    static_for<0, N>([&](auto k) TS_UNROLLED {
      if constexpr (k != j) {
        static_for<0, G>([&](auto g) TS_UNROLLED {
          V x[N];
          static_for<j, N>([&](auto i) TS_UNROLLED { x[i] = V::load(at(g, i, k)); });
          interchange<T, j, N>(p[g], x);
          x[j].store(at(g, j, k));
          static_for<j + 1, N>([&](auto i) TS_UNROLLED {
            if constexpr (k > j) x[i] = minus_product(x[i], c[g][i], x[j]);
            x[i].store(at(g, i, k));
          });
        });
      }
    });
  });
}

// getrf on G groups of order N (back to back in a and out; all but the last full).
template <class T, int64_t N, int G>
void getrf_fixed(const T* a, T* out, int used, int32_t* ipiv, int32_t* info, bool stream) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  constexpr int64_t kGroup = N * N * W;
  const auto lanes = [&](int g) { return g + 1 < G ? W : used; };
  alignas(64) T buf[G][kGroup];
  alignas(64) T pivots[G][N * W];  // row chosen at step j, per lane, at j * W
  V first_zero[G];                 // 1-based step of the first zero pivot, 0 if none
  interleave_groups<T, N, G>(a, used, buf);
  getf2_fixed<T, N, G>(buf, pivots, first_zero);
  for (int g = 0; g < G; ++g) {
    pivots_to_lanes(N, pivots[g], first_zero[g], lanes(g), ipiv + g * W * N, info + g * W);
    interleaved_to_lanes(buf[g], N * N, lanes(g), out + g * kGroup, 0, 0, stream);
  }
}

// The right-hand sides of one group, interleaved: element (i, c) of lane l at
// buf[(i * k + c) * W + l]; lanes from `used` on are zero.
template <class T, class N>
T* gather_rhs(N n, int64_t k, const T* b, int used) {
  thread_local cached_vector<T> buf_tls;
  cached_vector<T>& buf = buf_tls;
  buf.resize(static_cast<size_t>(n * k * Vec<T>::kSize));
  lanes_to_interleaved(b, n * k, used, buf.data());
  return buf.data();
}

// The identity as right-hand sides (n x n, interleaved as gather_rhs's) with the lanes'
// interchanges p (pivot vectors, 0-based) applied: P I, written directly (a 1 per lane and row,
// where gather_rhs would read the identity and interchange_rhs swap its rows step by step).
template <class T, class N>
T* identity_rhs(N n, const T* p, int used) {
  constexpr int W = Vec<T>::kSize;
  thread_local cached_vector<T> buf;
  buf.assign(static_cast<size_t>(n * n * W), T(0));
  for (int l = 0; l < used; ++l) {
    int64_t row[kSmallMax];  // row[i]: the identity's row that the interchanges put at i
    for (int64_t i = 0; i < n; ++i) row[i] = i;
    for (int64_t j = 0; j < n; ++j) std::swap(row[j], row[static_cast<int64_t>(p[j * W + l])]);
    for (int64_t i = 0; i < n; ++i) buf[(i * n + row[i]) * W + l] = T(1);
  }
  return buf.data();
}

template <class T>
void scatter_rhs(int64_t n, int64_t k, const T* buf, int used, T* b) {
  interleaved_to_lanes(buf, n * k, used, b);
}

// Forward then backward substitution on one group: L Y = B with L the lower triangle of f (unit
// diagonal unless `cholesky`; rows ld vectors apart), then X from U X = Y (U = the upper
// triangle of f, or L^T when `cholesky`), one right-hand side column at a time. Rows go in
// blocks of four: the block's sums over the solved rows are four independent chains sharing
// the loads of x (a row at a time was one chain of FMAs per row, bound by their latency), then
// its triangle in registers. The forward sums run over m ascending, the backward ones
// descending, as reference BLAS trsv.
template <class T, class N>
void substitute(N n, int64_t ld, int64_t k, const T* f, bool cholesky, T* x) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const auto fa = [&](int64_t i, int64_t j) { return V::load(f + (i * ld + j) * W); };
  thread_local cached_vector<T> rinv_tls;
  cached_vector<T>& rinv_buf = rinv_tls;
  rinv_buf.resize(static_cast<size_t>(n * W));
  for (int64_t i = 0; i < n; ++i) (V(T(1)) / fa(i, i)).store(rinv_buf.data() + i * W);
  const auto rinv = [&](int64_t i) { return V::load(rinv_buf.data() + i * W); };
  const auto sweeps = [&](auto chol) {
    const auto u = [&](int64_t i, int64_t m) { return chol ? fa(m, i) : fa(i, m); };
    for (int64_t c = 0; c < k; ++c) {
      const auto xa = [&](int64_t i) { return x + (i * k + c) * W; };
      const auto xv = [&](int64_t i) { return V::load(xa(i)); };
      const auto forward = [&](auto rows, int64_t i) {  // rows i .. i+R-1
        constexpr int R = decltype(rows)::value;
        V s[R];
        for (int r = 0; r < R; ++r) s[r] = xv(i + r);
        dot_rows<R>(
            s, i, [&](int r, int64_t m) { return fa(i + r, m); }, xv);
        for (int r = 0; r < R; ++r) {
          for (int q = 0; q < r; ++q) s[r] = minus_product(s[r], fa(i + r, i + q), s[q]);
          if (chol) s[r] = s[r] * rinv(i + r);
          s[r].store(xa(i + r));
        }
      };
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) forward(std::integral_constant<int, 4>{}, i);
      // The tails (at most three rows) count in int: GCC 12 then bounds these loops and does
      // not warn that fa's indices could overflow (-Waggressive-loop-optimizations).
      for (int t = static_cast<int>(n - i); t > 0; --t, ++i)
        forward(std::integral_constant<int, 1>{}, i);
      const auto backward = [&](auto rows, int64_t hi) {  // rows hi-1 down to hi-R
        constexpr int R = decltype(rows)::value;
        V s[R];
        for (int r = 0; r < R; ++r) s[r] = xv(hi - 1 - r);
        dot_rows<R>(
            s, n - hi, [&](int r, int64_t t) { return u(hi - 1 - r, n - 1 - t); },
            [&](int64_t t) { return xv(n - 1 - t); });
        for (int r = 0; r < R; ++r) {
          for (int q = 0; q < r; ++q) s[r] = minus_product(s[r], u(hi - 1 - r, hi - 1 - q), s[q]);
          s[r] = s[r] * rinv(hi - 1 - r);
          s[r].store(xa(hi - 1 - r));
        }
      };
      int64_t hi = n;
      for (; hi >= 4; hi -= 4) backward(std::integral_constant<int, 4>{}, hi);
      for (int t = static_cast<int>(hi); t > 0; --t, --hi)
        backward(std::integral_constant<int, 1>{}, hi);
    }
  };
  if (cholesky) {
    sweeps(std::true_type{});
  } else {
    sweeps(std::false_type{});
  }
}

// substitute for one right-hand side of a compile-time order N (<= 8) on G groups side by side
// (factors f[g], solutions x[g]; with pivots[g], getrs's interchanges first): the solutions
// stay in registers, so neither triangular sweep waits on a store and reload of the value it
// has just computed (the general form's loops over k kept x in memory; perf put most of a
// batch of 8 x 8 float64 Cholesky solves in those dependent reloads), and the G groups' sweeps
// are independent chains.
template <class T, int64_t N, int G, bool kCholesky>
void substitute_fixed(const T (*f)[N * N * Vec<T>::kSize], T (*x)[N * Vec<T>::kSize],
                      const T (*pivots)[N * Vec<T>::kSize]) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  auto at = [&](int g, int64_t i, int64_t j) { return V::load(f[g] + (i * N + j) * W); };
  V xs[G][N], rinv[G][N];
  static_for<0, N>([&](auto i) TS_UNROLLED {
    for (int g = 0; g < G; ++g) {
      xs[g][i] = V::load(x[g] + i * W);
      rinv[g][i] = V(T(1)) / at(g, i, i);
    }
  });
  if (pivots) {
    static_for<0, N>([&](auto j) TS_UNROLLED {
      for (int g = 0; g < G; ++g) interchange<T, j, N>(V::load(pivots[g] + j * W), xs[g]);
    });
  }
  static_for<0, N>([&](auto i) TS_UNROLLED {
    for (int g = 0; g < G; ++g) {
      static_for<0, i>(
          [&](auto m) TS_UNROLLED { xs[g][i] = minus_product(xs[g][i], at(g, i, m), xs[g][m]); });
      if constexpr (kCholesky) xs[g][i] = xs[g][i] * rinv[g][i];
    }
  });
  static_for<0, N>([&](auto r) TS_UNROLLED {
    constexpr int64_t i = N - 1 - r;
    for (int g = 0; g < G; ++g) {
      static_for<i + 1, N>([&](auto m) TS_UNROLLED {
        xs[g][i] = minus_product(xs[g][i], kCholesky ? at(g, m, i) : at(g, i, m), xs[g][m]);
      });
      xs[g][i] = xs[g][i] * rinv[g][i];
      xs[g][i].store(x[g] + i * W);
    }
  });
}

// Calls f(n) with n as a compile-time constant for the sizes the batched goals name and
// their neighbours (2..8), else as an int64_t: with constant trip counts the group loops
// unroll completely and a 4 x 4 group's vectors stay in registers (factor + solve of 10,000
// float32 4 x 4 systems: see docs/linalg.md).
template <class F>
void with_size(int64_t n, F&& f) {
  switch (n) {
#define TS_SMALL_SIZE(K) \
  case K:                \
    return f(std::integral_constant<int64_t, K>{});
    TS_SMALL_SIZE(2)
    TS_SMALL_SIZE(3)
    TS_SMALL_SIZE(4)
    TS_SMALL_SIZE(5)
    TS_SMALL_SIZE(6)
    TS_SMALL_SIZE(7)
    TS_SMALL_SIZE(8)
#undef TS_SMALL_SIZE
    default:
      return f(n);
  }
}

// G groups' systems of order N with one right-hand side each (b: N per lane; the groups back
// to back in factor, ipiv and b, all but the last full) solved in place with their factors
// (row-major, N * N apart) and pivots (getrs; null for potrs), through buffers on the stack.
template <class T, int64_t N, int G>
void solve_one_fixed(const T* factor, const int32_t* ipiv, T* b, int used, bool cholesky) {
  constexpr int W = Vec<T>::kSize;
  alignas(64) T f[G][N * N * W], x[G][N * W], p[G][N * W];
  const auto lanes = [&](int g) { return g + 1 < G ? W : used; };
  for (int g = 0; g < G; ++g) {
    interleave_plain(N, factor + g * N * N * W, lanes(g), f[g], /*lower=*/cholesky);
    lanes_to_interleaved(b + g * N * W, N, lanes(g), x[g]);
    if (ipiv) {
      pivot_vectors(N, ipiv + g * N * W, lanes(g), p[g]);
      if (!pivots_at_or_below(N, p[g])) {  // a caller's pivots naming rows above: in scalar
        interchange_lanes(N, lanes(g), x[g], ipiv_rows(N, ipiv + g * N * W));
        std::fill_n(p[g], N * W, T(-1));
      }
    }
  }
  if (cholesky) {
    substitute_fixed<T, N, G, true>(f, x, nullptr);
  } else {
    substitute_fixed<T, N, G, false>(f, x, ipiv ? p : nullptr);
  }
  for (int g = 0; g < G; ++g) interleaved_to_lanes(x[g], N, lanes(g), b + g * N * W);
}

// potrs (cholesky, no ipiv) and getrs on `count` systems, a group of W at a time. With one
// right-hand side and n a compile-time constant the group's factor, solution and pivots sit in
// buffers on the stack and the solution in registers (substitute_fixed); otherwise each lane's
// row interchanges are applied in order before substitute: as scalar swaps for one right-hand
// side, else a swap of rows j and r as blends in the lanes whose pivot is r (as getrf swaps).
template <class T>
void solve_batch(int64_t n_, int64_t k, int64_t count, const T* factor, const int32_t* ipiv, T* b,
                 bool cholesky) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  with_size(n_, [&](auto n) {
    for (int64_t g = 0; g < count; g += W) {
      const int used = static_cast<int>(std::min<int64_t>(W, count - g));
      const T* fg = factor + g * n * n;
      T* bg = b + g * n * k;
      const int32_t* pg = ipiv ? ipiv + g * n : nullptr;
      if constexpr (unrolled<decltype(n)>) {
        if (k == 1) {
          constexpr int64_t N = decltype(n)::value;
          if (count - g >= 2 * W) {  // two groups: twice the independent chains
            solve_one_fixed<T, N, 2>(fg, pg, bg, W, cholesky);
            g += W;
          } else {
            solve_one_fixed<T, N, 1>(fg, pg, bg, used, cholesky);
          }
          continue;
        }
      }
      const T* f = gather(n, fg, used, /*lower=*/cholesky);
      T* x = gather_rhs(n, k, bg, used);
      if (ipiv && k == 1) {
        interchange_lanes(n, used, x, ipiv_rows(n, pg));
      } else if (ipiv) {
        alignas(64) T p[kSmallMax * W];
        pivot_vectors(n, pg, used, p);
        interchange_rhs(n, k, used, p, x);
      }
      substitute(n, n, k, f, cholesky, x);
      scatter_rhs(n, k, x, used, bg);
    }
  });
}

template <class T>
void potrs_batch(int64_t n, int64_t k, int64_t count, const T* l, T* b) {
  solve_batch(n, k, count, l, static_cast<const int32_t*>(nullptr), b, /*cholesky=*/true);
}

template <class T>
void getrs_batch(int64_t n, int64_t k, int64_t count, const T* lu, const int32_t* ipiv, T* b) {
  solve_batch(n, k, count, lu, ipiv, b, /*cholesky=*/false);
}

// The group's k right-hand sides at b (n x k per lane, n * k apart) solved in place with the LU
// factor f (interleaved, rows ld vectors apart) and its pivot vectors p (0-based): the
// interchanges in order, then forward and backward substitution. With `identity` (k = n) b is
// not read: the right-hand sides are the identity, written already interchanged.
template <class T, class N>
void solve_group_rhs(N n, int64_t ld, int64_t k, const T* f, const T* p, T* b, int used,
                     bool identity) {
  T* x = identity ? identity_rhs(n, p, used) : gather_rhs(n, k, b, used);
  if (!identity) interchange_rhs(n, k, used, p, x);
  substitute(n, ld, k, f, false, x);
  scatter_rhs(n, k, x, used, b);
}

// gesv for a compile-time order N on G groups side by side (a, b and info back to back, all but
// the last full): each group factored in its buffer on the stack (G at once where two groups'
// chains fit in the registers, N <= 4, as getrf_batch runs them), then the right-hand sides
// interchanged and substituted with the factor still there (one right-hand side in registers).
template <class T, int64_t N, int G>
void gesv_fixed(int64_t k, const T* a, T* b, int used, int32_t* info, bool identity) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const auto lanes = [&](int g) { return g + 1 < G ? W : used; };
  alignas(64) T buf[G][N * N * W];
  alignas(64) T pivots[G][N * W];
  V first_zero[G];
  interleave_groups<T, N, G>(a, used, buf);
  if constexpr (N <= 4) {
    getf2_fixed<T, N, G>(buf, pivots, first_zero);
  } else {
    for (int g = 0; g < G; ++g) getf2_fixed<T, N, 1>(buf + g, pivots + g, first_zero + g);
  }
  for (int g = 0; g < G; ++g) info_to_lanes(first_zero[g], lanes(g), info + g * W);
  if (k == 1 && !identity) {
    alignas(64) T x[G][N * W];
    for (int g = 0; g < G; ++g) lanes_to_interleaved(b + g * N * W, N, lanes(g), x[g]);
    substitute_fixed<T, N, G, false>(buf, x, pivots);
    for (int g = 0; g < G; ++g) interleaved_to_lanes(x[g], N, lanes(g), b + g * N * W);
    return;
  }
  for (int g = 0; g < G; ++g)
    solve_group_rhs(std::integral_constant<int64_t, N>{}, N, k, buf[g], pivots[g],
                    b + g * N * k * W, lanes(g), identity);
}

// getrf then getrs on one group with the factor kept in the group's buffer: it never goes out.
template <class T, class N>
void gesv_group(N n, int64_t k, const T* a, T* b, int used, int32_t* info, bool identity) {
  const int64_t ld = group_ld(n);
  T* buf = group_buffer<T>(n * ld);
  T* pivots = pivot_scratch<T>(n);
  info_to_lanes(getf2_lanes(n, ld, a, used, buf, pivots), used, info);
  solve_group_rhs(n, ld, k, buf, pivots, b, used, identity);
}

template <class T>
void gesv_batch(int64_t n_, int64_t k, int64_t count, const T* a, T* b, int32_t* info,
                bool identity) {
  constexpr int W = Vec<T>::kSize;
  with_size(n_, [&](auto n) {
    for (int64_t g = 0; g < count; g += W) {
      const int used = static_cast<int>(std::min<int64_t>(W, count - g));
      const T* ag = a + g * n * n;
      T* bg = b + g * n * k;
      if constexpr (unrolled<decltype(n)>) {
        constexpr int64_t N = decltype(n)::value;
        if (count - g >= 2 * W) {  // two groups: twice the independent chains
          gesv_fixed<T, N, 2>(k, ag, bg, W, info + g, identity);
          g += W;
        } else {
          gesv_fixed<T, N, 1>(k, ag, bg, used, info + g, identity);
        }
        continue;
      }
      gesv_group(n, k, ag, bg, used, info + g, identity);
    }
  });
}

template <class T>
void potrf_batch(int64_t n_, int64_t count, const T* a, T* out, int32_t* info, bool stream) {
  constexpr int W = Vec<T>::kSize;
  with_size(n_, [&](auto n) {
    for (int64_t g = 0; g < count; g += W) {
      const int used = static_cast<int>(std::min<int64_t>(W, count - g));
      if constexpr (unrolled<decltype(n)>) {
        constexpr int64_t N = decltype(n)::value;
        if (count - g >= 2 * W) {  // two groups: twice the independent chains
          potrf_fixed<T, N, 2>(a + g * N * N, out + g * N * N, W, info + g, stream);
          g += W;
        } else {
          potrf_fixed<T, N, 1>(a + g * N * N, out + g * N * N, used, info + g, stream);
        }
      } else {
        potrf_group(n, a + g * n * n, out + g * n * n, used, info + g, stream);
      }
    }
  });
  if (stream) stream_fence();
}

template <class T>
void getrf_batch(int64_t n_, int64_t count, const T* a, T* out, int32_t* ipiv, int32_t* info,
                 bool stream) {
  constexpr int W = Vec<T>::kSize;
  with_size(n_, [&](auto n) {
    for (int64_t g = 0; g < count; g += W) {
      const int used = static_cast<int>(std::min<int64_t>(W, count - g));
      if constexpr (unrolled<decltype(n)>) {
        constexpr int64_t N = decltype(n)::value;
        if (N <= 4 && count - g >= 2 * W) {  // two groups' chains fit in the registers
          getrf_fixed<T, N, 2>(a + g * N * N, out + g * N * N, W, ipiv + g * N, info + g, stream);
          g += W;
        } else {
          getrf_fixed<T, N, 1>(a + g * N * N, out + g * N * N, used, ipiv + g * N, info + g,
                               stream);
        }
      } else {
        getrf_group(n, a + g * n * n, out + g * n * n, used, ipiv + g * n, info + g, stream);
      }
    }
  });
  if (stream) stream_fence();
}

// Householder QR of one group (lane_qr.h) into x (the factor, m rows lda >= n vectors apart),
// t (tau, min(m, n)) and work (kLanePanel m): the W matrices at a interleaved (lanes from `used`
// on zero: tau 0, R 0), scaled where needed, factored, R scaled back.
template <class T, class M, class N>
void factor_group(M m, N n, int64_t lda, const T* a, int used, T* x, T* t, T* work) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const int64_t kk = std::min<int64_t>(m, n);
  rows_to_interleaved(m, n, lda, a, used, x);
  // The lanes are scaled (and R unscaled) only where one's largest |entry| is outside [lo, hi]
  // (infinite included): above hi a sum of squares could overflow; below lo a column tail that
  // lane_reflector drops (squares summing below 64 safmin / eps) could exceed eps / 16 of it.
  // max_fast may skip a NaN; a lane with one gives NaN either way.
  constexpr T kMin = std::numeric_limits<T>::min(), kEps = std::numeric_limits<T>::epsilon();
  const T lo = std::sqrt(T(64) * kMin / kEps) / (kEps / T(16));
  const T hi = std::sqrt(std::numeric_limits<T>::max()) / T(64);
  V amax(T(0));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) amax = V::max_fast(V::load(x + (i * lda + j) * W).abs(), amax);
  alignas(64) T scale[W];
  amax.store(scale);
  const bool plain =
      std::all_of(scale, scale + W, [&](T s) { return s == T(0) || (s >= lo && s <= hi); });
  if (!plain) scale_lanes_to_one<T, V>(m, n, x, lda, /*lower=*/false, scale);
  geqr2_lanes<T, V>(m, n, x, lda, t, work);
  if (!plain) {
    for (int l = 0; l < W; ++l) scale[l] = T(1) / scale[l];
    const V undo = V::load(scale);
    for (int64_t i = 0; i < kk; ++i)
      for (int64_t j = i; j < n; ++j)
        (V::load(x + (i * lda + j) * W) * undo).store(x + (i * lda + j) * W);
  }
}

// The group scratch of the QR kernels: the factor (m rows of lda), tau, the panel's reflectors
// and (qr, orgqr) Q (m rows of ldq).
template <class T>
T* qr_scratch(int64_t m, int64_t lda, int64_t ldq) {
  thread_local cached_vector<T> buf;
  buf.resize(
      static_cast<size_t>((m * lda + std::min(m, lda) + kLanePanel * m + m * ldq) * Vec<T>::kSize));
  return buf.data();
}

// Calls f(m, n) with compile-time m = n for the square sizes with_size names.
template <class F>
void with_shape(int64_t m, int64_t n, F&& f) {
  if (m == n) return with_size(n, [&](auto nn) { f(nn, nn); });
  f(m, n);
}

template <class T>
void geqrf_batch(int64_t m, int64_t n, int64_t count, const T* a, T* out, T* tau) {
  constexpr int W = Vec<T>::kSize;
  const int64_t kk = std::min(m, n), lda = group_ld(n);
  T* x = qr_scratch<T>(m, lda, 0);
  T* t = x + m * lda * W;
  T* work = t + kk * W;
  with_shape(m, n, [&](auto mm, auto nn) {
    for (int64_t g = 0; g < count; g += W) {
      const int used = static_cast<int>(std::min<int64_t>(W, count - g));
      factor_group(mm, nn, lda, a + g * m * n, used, x, t, work);
      interleaved_to_rows(m, n, lda, x, used, out + g * m * n);
      interleaved_to_lanes(t, kk, used, tau + g * kk);
    }
  });
}

// A = Q R in one pass over the group: the factor stays interleaved while Q (m x nq, unless q is
// null) is formed from it, then R (its first r_rows rows, zero below the diagonal) goes out.
template <class T>
void qr_batch(int64_t m, int64_t n, int64_t nq, int64_t r_rows, int64_t count, const T* a, T* q,
              T* r) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const int64_t kk = std::min(m, n), lda = group_ld(n), ldq = group_ld(nq);
  T* x = qr_scratch<T>(m, lda, ldq);
  T* t = x + m * lda * W;
  T* work = t + kk * W;
  T* qb = work + kLanePanel * m * W;
  with_shape(m, n, [&](auto mm, auto nn) {
    for (int64_t g = 0; g < count; g += W) {
      const int used = static_cast<int>(std::min<int64_t>(W, count - g));
      factor_group(mm, nn, lda, a + g * m * n, used, x, t, work);
      if (q) {
        org2r_lanes<T, V>(mm, nq, kk, x, lda, t, qb, ldq, work);
        interleaved_to_rows(m, nq, ldq, qb, used, q + g * m * nq);
      }
      for (int64_t i = 1; i < r_rows; ++i)
        for (int64_t j = 0; j < std::min<int64_t>(i, n); ++j) V(T(0)).store(x + (i * lda + j) * W);
      interleaved_to_rows(r_rows, n, lda, x, used, r + g * r_rows * n);
    }
  });
}

template <class T>
void orgqr_batch(int64_t m, int64_t na, int64_t nq, int64_t k, int64_t count, const T* a,
                 const T* tau, T* q) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const int64_t lda = group_ld(na), ldq = group_ld(nq);
  T* refl = qr_scratch<T>(m, lda, ldq);
  T* t = refl + m * lda * W;
  T* work = t + std::min(m, lda) * W;
  T* qb = work + kLanePanel * m * W;
  with_shape(m, nq, [&](auto mm, auto nn) {
    for (int64_t g = 0; g < count; g += W) {
      const int used = static_cast<int>(std::min<int64_t>(W, count - g));
      rows_to_interleaved(m, na, lda, a + g * m * na, used, refl);
      lanes_to_interleaved(tau + g * k, k, used, t);
      org2r_lanes<T, V>(mm, nn, k, refl, lda, t, qb, ldq, work);
      interleaved_to_rows(m, nq, ldq, qb, used, q + g * m * nq);
    }
  });
}

}  // namespace

const SmallLinalgKernels& small_linalg_kernels() {
  static const SmallLinalgKernels k{potrf_batch<float>,  potrf_batch<double>, getrf_batch<float>,
                                    getrf_batch<double>, potrs_batch<float>,  potrs_batch<double>,
                                    getrs_batch<float>,  getrs_batch<double>, gesv_batch<float>,
                                    gesv_batch<double>,  geqrf_batch<float>,  geqrf_batch<double>,
                                    orgqr_batch<float>,  orgqr_batch<double>, qr_batch<float>,
                                    qr_batch<double>,    Vec<float>::kSize,   Vec<double>::kSize};
  return k;
}

}  // namespace tessera::cpu::TS_ISA
