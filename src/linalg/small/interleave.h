// Lane-interleaved groups of small matrices for the per-ISA batched kernels (small_kernels.cpp,
// spectral_small_kernels.cpp): W = Vec<T>::kSize matrices, element (i, j) of lane l at
// buf[(i * n + j) * W + l], so that element (i, j) of the whole group is one vector.
// Included inside namespace tessera::cpu::TS_ISA.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cached_vector.h"
#include "core/prefetch.h"
#include "core/transpose.h"
#include "core/vec.h"
#include "linalg/small/small_kernels.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tessera::cpu::TS_ISA {

namespace interleave_detail {

#if defined(__AVX512F__)
template <class T>
struct Block;
template <>
struct Block<float> {
  using R = __m512;
  static constexpr int W = 16;
  static R load(const float* p, int n) { return _mm512_maskz_loadu_ps((1u << n) - 1u, p); }
  static void store(float* p, R v, int n) { _mm512_mask_storeu_ps(p, (1u << n) - 1u, v); }
  // v with the lanes whose bit in keep is clear set to zero.
  static R keep(R v, unsigned keep) { return _mm512_maskz_mov_ps(static_cast<__mmask16>(keep), v); }
  static R zero() { return _mm512_setzero_ps(); }
  // base[l * stride] of lanes l < used (0 in the others), and its inverse.
  static __m512i offsets(int64_t stride) {
    return _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(static_cast<int>(stride)));
  }
  static R gather(const float* base, int64_t stride, int used) {
    return _mm512_mask_i32gather_ps(zero(), (1u << used) - 1u, offsets(stride), base, 4);
  }
  static void scatter(float* base, int64_t stride, int used, R v) {
    _mm512_mask_i32scatter_ps(base, (1u << used) - 1u, offsets(stride), v, 4);
  }
};
template <>
struct Block<double> {
  using R = __m512d;
  static constexpr int W = 8;
  static R load(const double* p, int n) {
    return _mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << n) - 1u), p);
  }
  static void store(double* p, R v, int n) {
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << n) - 1u), v);
  }
  static R keep(R v, unsigned keep) { return _mm512_maskz_mov_pd(static_cast<__mmask8>(keep), v); }
  static R zero() { return _mm512_setzero_pd(); }
  static __m256i offsets(int64_t stride) {
    return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                              _mm256_set1_epi32(static_cast<int>(stride)));
  }
  static R gather(const double* base, int64_t stride, int used) {
    return _mm512_mask_i32gather_pd(zero(), static_cast<__mmask8>((1u << used) - 1u),
                                    offsets(stride), base, 8);
  }
  static void scatter(double* base, int64_t stride, int used, R v) {
    _mm512_mask_i32scatter_pd(base, static_cast<__mmask8>((1u << used) - 1u), offsets(stride), v,
                              8);
  }
};
#endif

}  // namespace interleave_detail

namespace interleave_detail {

// Walks a run of lower_n x lower_n row-major elements W at a time and says which blocks of W
// lie wholly in the strict upper triangle (none when lower_n is 0).
class UpperBlocks {
 public:
  explicit UpperBlocks(int64_t lower_n) : n_(lower_n) {}
  // Whether elements e0 .. e0+len-1 (e0 advancing by W from 0) are all above the diagonal.
  bool upper(int len) const { return n_ > 0 && col_ > row_ && col_ + len <= n_; }
  // Bit t set where element e0+t of the block is above the diagonal.
  unsigned upper_mask(int len) const {
    if (n_ == 0) return 0;
    unsigned m = 0;
    int64_t row = row_, col = col_;
    for (int t = 0; t < len; ++t) {
      if (col > row) m |= 1u << t;
      if (++col == n_) col = 0, ++row;
    }
    return m;
  }
  void next(int w) {
    if (n_ == 0) return;
    for (col_ += w; col_ >= n_;) col_ -= n_, ++row_;
  }

 private:
  int64_t n_, row_ = 0, col_ = 0;
};

// A block of up to W consecutive elements of every lane's run, the unit the transposes move:
// run element e of lane l lies at l * stride + e, and the block's len elements are vectors
// v .. v + len - 1 of the interleaved buffer. With a lower triangle (lower_n > 0), `above` says
// that every element lies strictly above its diagonal and bit t of `upper` that element e + t
// does.
struct RunBlock {
  int64_t e, v;
  int len;
  bool above;
  unsigned upper;
};

// Calls f(RunBlock) for the blocks of a run of `rows` rows of `cols` elements (row-major,
// e = i * cols + j) whose element (i, j) is vector i * ld + j of the buffer. With ld == cols the
// run is one sequence cut into blocks of W across its rows; otherwise every row is cut on its
// own. lower_n > 0 (rows = cols = lower_n) marks the strict upper triangle (`upper` only with
// kMask: its walk costs a loop per block in the flat case).
template <int W, bool kMask, class F>
[[gnu::always_inline]] inline void for_each_block(int64_t rows, int64_t cols, int64_t ld,
                                                  int64_t lower_n, const F& f) {
  if (ld == cols) {
    UpperBlocks blocks(lower_n);
    const int64_t count = rows * cols;
    for (int64_t e0 = 0; e0 < count; e0 += W, blocks.next(W)) {
      const int len = static_cast<int>(std::min<int64_t>(W, count - e0));
      const bool above = blocks.upper(len);
      f(RunBlock{e0, e0, len, above, kMask && !above ? blocks.upper_mask(len) : 0u});
    }
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j0 = 0; j0 < cols; j0 += W) {
      const int len = static_cast<int>(std::min<int64_t>(W, cols - j0));
      const bool above = lower_n > 0 && j0 > i;
      // Past the diagonal: the elements j0 + t > i.
      const unsigned upper = kMask && lower_n > 0 && !above && j0 + len - 1 > i
                                 ? ((1u << len) - 1u) & ~((2u << (i - j0)) - 1u)
                                 : 0u;
      f(RunBlock{i * cols + j0, i * ld + j0, len, above, upper});
    }
  }
}

#if defined(__AVX512F__)
// A whole 16 x 16 float block (rows = lanes, `stride` apart) into 16 interleaved vectors at buf,
// 8 lanes at a time. Out of line: inlined into the fixed-order kernels' groups on the stack, GCC
// warned of stores past a 3 x 3 group's buffer on the whole-block path (which such a group
// never takes).
[[gnu::noinline]] inline void float_block_by_halves(const float* a, int64_t stride, float* buf) {
  for (int h = 0; h < 2; ++h)
    vec::TS_ISA::transpose_8x16(a + 8 * h * stride, stride, buf + 8 * h, 16);
}
#endif

// Elements [0, len) (len <= W) of W rows lying anywhere, row(l) for lanes l < used (zeros in
// the others), into len interleaved vectors at buf: buf[t * W + l] = row(l)[t] (LU reads each
// lane's rows in the order its interchanges have left them). W x W in registers on AVX-512,
// element by element elsewhere.
template <class T, class Row>
[[gnu::always_inline]] inline void lane_rows_to_interleaved(const Row& row, int used, int len,
                                                            T* buf) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
#if defined(__AVX512F__)
  using B = Block<T>;
  typename B::R r[W];
  if (used == W) {
    for (int l = 0; l < W; ++l) r[l] = B::load(row(l), len);
  } else {
    for (int l = 0; l < W; ++l) r[l] = l < used ? B::load(row(l), len) : B::zero();
  }
  vec::TS_ISA::transpose_registers(r);
  for (int t = 0; t < len; ++t) B::store(buf + t * W, r[t], W);
#else
  for (int t = 0; t < len; ++t)
    for (int l = 0; l < W; ++l) buf[t * W + l] = l < used ? row(l)[t] : T(0);
#endif
}

// buf[v(e) * W + l] = a[l * stride + e] for the runs of for_each_block and lanes l < used, 0 in
// the other lanes (W x W blocks in registers on AVX-512, element by element elsewhere). On
// AVX-512 blocks wholly above a lower triangle are neither read nor written (elsewhere the
// whole run is read).
template <class T>
[[gnu::always_inline]] inline void lane_runs_to_interleaved(const T* a, int64_t rows, int64_t cols,
                                                            int64_t ld, int64_t stride,
                                                            int64_t lower_n, int used, T* buf) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
#if defined(__AVX512F__)
  using B = Block<T>;
  static_assert(B::W == W);
  // 16 lanes whose runs are a multiple of 4 KiB apart: a block's lines share one L1 set.
  const bool one_set =
      W == 16 && vec::TS_ISA::l1_sets_reached(stride * static_cast<int64_t>(sizeof(T))) == 1;
  const bool sequential = one_set && stride == rows * cols;
  for_each_block<W, false>(
      rows, cols, ld, lower_n, [&](const RunBlock& b) __attribute__((always_inline)) {
        // The next group's lines (where a batch's groups lie back to back), a block's worth
        // at a time: the hardware prefetchers did not follow W streams `stride` apart, and
        // these loads took the misses (perf: 44% of a batch of 10,000 8 x 8 float64 Cholesky
        // solves). Past the batch's end these lines are never used, and a prefetch never
        // faults. Where the 16 lanes' lines of a float block share one L1 set (of 12 ways) and
        // the runs lie back to back, the next group is prefetched in address order instead,
        // a block's share (W * len elements) at a time, blocks above a lower triangle too (the
        // shares of the walk's blocks cover the group), and whole blocks go in as two halves
        // of 8 lanes (transpose_8x16). Batches of 10,000 float32 32 x 32 matrices, alternating
        // in one process: Cholesky 436 -> 397 ns per matrix, cholesky_solve 239 -> 224,
        // lu_solve 304 -> 301 (in cache 189 -> 181). Double groups (8 lanes) keep the order
        // of the runs: in address order 32 x 32 LU ran 3% slower.
        if (sequential) {  // 16 lanes' len floats: len lines
          for (int q = 0; q < b.len; ++q)
            __builtin_prefetch(
                ahead(a, (W * (stride + b.e)) * static_cast<int64_t>(sizeof(T)) + q * 64));
        }
        if (b.above) return;
        if (!sequential) {
          for (int l = 0; l < W; ++l)
            __builtin_prefetch(
                ahead(a, ((W + l) * stride + b.e) * static_cast<int64_t>(sizeof(T))));
        }
        if constexpr (W == 16) {  // 8 of the set's lines at a time
          if (one_set && used == W && b.len == W)
            return float_block_by_halves(a + b.e, stride, buf + b.v * W);
        }
        // Whole rows in, transposed in registers: with load_transposed's four loads per line, a
        // batch of 10,000 float32 32 x 32 Cholesky factorizations (read from memory) ran 1.2x
        // slower in an alternating comparison (486 against 403 ns per matrix).
        lane_rows_to_interleaved<T>([&](int l) { return a + l * stride + b.e; }, used, b.len,
                                    buf + b.v * W);
      });
#else
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      for (int l = 0; l < W; ++l)
        buf[(i * ld + j) * W + l] = l < used ? a[l * stride + i * cols + j] : T(0);
#endif
}

// The inverse of lane_runs_to_interleaved for lanes l < used; with lower_n > 0 the strict upper
// triangle is written as zero, whatever buf holds there. With `stream`, whole blocks of W lanes
// at 64-byte aligned addresses are written with non-temporal stores (AVX-512 only; the caller
// fences with stream_fence()).
template <class T>
[[gnu::always_inline]] inline void interleaved_runs_to_lanes(const T* buf, int64_t rows,
                                                             int64_t cols, int64_t ld,
                                                             int64_t stride, int64_t lower_n,
                                                             int used, T* out, bool stream) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
#if defined(__AVX512F__)
  using B = Block<T>;
  // Every block starts at out + l * stride + e with e a multiple of W (64 bytes).
  stream = stream && used == W && reinterpret_cast<uintptr_t>(out) % 64 == 0 &&
           stride * static_cast<int64_t>(sizeof(T)) % 64 == 0 && (ld == cols || cols % W == 0);
  typename B::R r[W];
  for_each_block<W, true>(
      rows, cols, ld, lower_n, [&](const RunBlock& b) __attribute__((always_inline)) {
        if (b.above) {  // all zero: nothing to read or transpose
          for (int l = 0; l < W; ++l) r[l] = B::zero();
        } else {
          if (b.len == W) {  // from the group's buffer, in cache
            vec::TS_ISA::load_transposed(buf + b.v * W, W, r);
          } else {
            for (int t = 0; t < W; ++t)
              r[t] = t < b.len ? B::load(buf + (b.v + t) * W, W) : B::zero();
            vec::TS_ISA::transpose_registers(r);
          }
          if (b.upper != 0)
            for (int l = 0; l < W; ++l) r[l] = B::keep(r[l], ~b.upper & ((1u << W) - 1u));
        }
        if (stream && b.len == W) {
          for (int l = 0; l < W; ++l)
            vec::TS_ISA::Vec<T>(r[l]).stream_convert(out + l * stride + b.e);
        } else {
          for (int l = 0; l < used; ++l) B::store(out + l * stride + b.e, r[l], b.len);
        }
      });
#else
  (void)stream;
  for (int l = 0; l < used; ++l)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        out[l * stride + i * cols + j] = lower_n > 0 && j > i ? T(0) : buf[(i * ld + j) * W + l];
#endif
}

}  // namespace interleave_detail

using interleave_detail::lane_rows_to_interleaved;

// buf[e * W + l] = a[l * stride + e] for e < count and lanes l < used, 0 in the other lanes: W
// runs of `count` elements (`stride` apart; 0: count, back to back) transposed into the
// interleaved layout (W x W blocks in registers on AVX-512, element by element elsewhere). With
// lower_n > 0 each run is a row-major lower_n x lower_n matrix whose strict upper triangle is
// not needed: blocks of W that lie wholly in it are neither read nor written.
template <class T>
[[gnu::always_inline]] inline void lanes_to_interleaved(const T* a, int64_t count, int used, T* buf,
                                                        int64_t lower_n = 0, int64_t stride = 0) {
  if (count == 0) return;
  if (stride == 0) stride = count;
#if defined(__AVX512F__)
  using B = interleave_detail::Block<T>;
  if (count <= B::W / 2 && small_moves_by_gathers().load(std::memory_order_relaxed)) {
    for (int64_t e = 0; e < count; ++e)
      B::store(buf + e * B::W, B::gather(a + e, stride, used), B::W);
    return;
  }
#endif
  const int64_t cols = lower_n > 0 ? lower_n : count;
  interleave_detail::lane_runs_to_interleaved(a, count / cols, cols, cols, stride, lower_n, used,
                                              buf);
}

// out[l * stride + e] = buf[e * W + l] for e < count and lanes l < used (the inverse of
// lanes_to_interleaved; stride 0: count). With lower_n > 0 each run is a row-major lower_n x
// lower_n matrix (count = lower_n^2) whose strict upper triangle is written as zero, whatever
// buf holds there. With `stream`, whole blocks of W lanes at 64-byte aligned addresses are
// written with non-temporal stores (AVX-512 only; the caller fences with stream_fence()).
template <class T>
[[gnu::always_inline]] inline void interleaved_to_lanes(const T* buf, int64_t count, int used,
                                                        T* out, int64_t lower_n = 0,
                                                        int64_t stride = 0, bool stream = false) {
  if (count == 0) return;
  if (stride == 0) stride = count;
#if defined(__AVX512F__)
  using B = interleave_detail::Block<T>;
  if (count <= B::W / 2 && lower_n == 0 &&
      small_moves_by_gathers().load(std::memory_order_relaxed)) {
    for (int64_t e = 0; e < count; ++e)
      B::scatter(out + e, stride, used, B::load(buf + e * B::W, B::W));
    return;
  }
#endif
  const int64_t cols = lower_n > 0 ? lower_n : count;
  interleave_detail::interleaved_runs_to_lanes(buf, count / cols, cols, cols, stride, lower_n, used,
                                               out, stream);
}

// W row-major rows x cols matrices at a (rows * cols apart; lanes from `used` on zero) into buf
// with rows ld >= cols vectors apart (the padding never written). `lower` (rows = cols): blocks
// wholly above the diagonal are neither read nor written.
template <class T>
[[gnu::always_inline]] inline void rows_to_interleaved(int64_t rows, int64_t cols, int64_t ld,
                                                       const T* a, int used, T* buf,
                                                       bool lower = false) {
  interleave_detail::lane_runs_to_interleaved(a, rows, cols, ld, rows * cols, lower ? cols : 0,
                                              used, buf);
}

// The inverse of rows_to_interleaved for the `used` matrices; `lower`: the strict upper
// triangle goes out as zero (`stream`: interleaved_to_lanes').
template <class T>
[[gnu::always_inline]] inline void interleaved_to_rows(int64_t rows, int64_t cols, int64_t ld,
                                                       const T* buf, int used, T* out,
                                                       bool lower = false, bool stream = false) {
  interleave_detail::interleaved_runs_to_lanes(buf, rows, cols, ld, rows * cols, lower ? cols : 0,
                                               used, out, stream);
}

// The plain layout of interleave_into below (W x W blocks transposed) into buf (n * n * W
// elements). With `lower`, only the lower triangles are needed: blocks of W wholly above the
// diagonal are left as buf held them (lanes_to_interleaved's lower_n).
template <class T>
[[gnu::always_inline]] inline void interleave_plain(int64_t n, const T* a, int used, T* buf,
                                                    bool lower = false) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
  lanes_to_interleaved(a, n * n, used, buf, lower ? n : 0);
  for (int l = used; l < W; ++l)
    for (int64_t i = 0; i < n; ++i) buf[(i * n + i) * W + l] = T(1);
}

// Fills buf with W interleaved n x n matrices: lanes below `used` from a (row-major, n*n
// apart), the others the identity. Returns buf.data(). Element (i, j) goes to vector
// i * ld + j (ld >= n; a stride that is not a power of two keeps the vectors of one column
// from aliasing in the cache), or j * ld + i when `transpose` (columns contiguous). `lines`
// (>= n) rows (columns when transposed) of ld vectors are allocated; the padding is zero.
template <class T>
[[gnu::always_inline]] inline T* interleave_into(int64_t n, const T* a, int used,
                                                 cached_vector<T>& buf, int64_t ld = 0,
                                                 bool transpose = false, int64_t lines = 0) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
  if (ld == 0) ld = n;
  if (lines == 0) lines = n;
  const int64_t nn = n * n;
  if (ld == n && lines == n) {
    buf.resize(static_cast<size_t>(nn * W));  // every element is written below
  } else {
    buf.assign(static_cast<size_t>(lines * ld * W), T(0));
  }
  if (ld == n && lines == n && !transpose) {
    interleave_plain(n, a, used, buf.data());
    return buf.data();
  }
  // Lane-major: one matrix at a time is read sequentially. (Element-major order would read W
  // streams n*n elements apart, a power of two for n = 8, 16, 32, which alias in the cache.)
  for (int l = 0; l < W; ++l) {
    const T* m = a + l * nn;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        buf[(transpose ? j * ld + i : i * ld + j) * W + l] = l < used ? m[i * n + j] : T(i == j);
  }
  return buf.data();
}

// The identity in every lane (element (i, j) at vector i * ld + j).
template <class T>
T* interleaved_identity(int64_t n, cached_vector<T>& buf, int64_t ld = 0) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
  if (ld == 0) ld = n;
  buf.assign(static_cast<size_t>(n * ld * W), T(0));
  for (int64_t i = 0; i < n; ++i)
    for (int l = 0; l < W; ++l) buf[(i * ld + i) * W + l] = T(1);
  return buf.data();
}

}  // namespace tessera::cpu::TS_ISA
