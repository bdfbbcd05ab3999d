// Softmax, log_softmax, logsumexp and scans (compiled once per ISA). See reduce_kernels.h
// for the shapes. Softmax over a contiguous row makes three passes, the last two from cache:
// max; exp(x - max) written out with its sum; scale by 1 / sum. log_softmax writes once:
// x - max - log(sum). float16/bfloat16 compute in float and recompute exp in the last pass
// rather than round an intermediate. Columns (softmax over a non-innermost dim) run the same
// passes over a strip of columns small enough that K rows of it stay in cache.
// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 max/min/reduce
// (they start from _mm512_undefined_ps); nothing here reads uninitialised memory.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/loops.h"
#include "core/vec.h"
#include "ops/cpu/reduce_kernels.h"

namespace tessera::cpu::TS_ISA {
namespace {

using vec::TS_ISA::Vec;

template <class T>
using float_acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

constexpr DtypeMask kKernelFloat =
    dtype_bit(kFloat16) | dtype_bit(kBFloat16) | dtype_bit(kFloat32) | dtype_bit(kFloat64);

template <class C>
inline C nan_max(C a, C b) {
  return (a != a || b != b) ? a + b : (b > a ? b : a);
}

// The row's largest element, NaN if it holds one, with Vec::max (exact for NaN).
template <class T>
float_acc_t<T> row_max_exact(const T* x, int64_t n) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  C m = static_cast<C>(x[0]);
  V m0(m), m1(m);
  int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) {
    m0 = V::max(m0, V::load_convert(x + j));
    m1 = V::max(m1, V::load_convert(x + j + W));
  }
  for (; j + W <= n; j += W) m0 = V::max(m0, V::load_convert(x + j));
  alignas(64) C lanes[W];
  V::max(m0, m1).store(lanes);
  for (int k = 0; k < W; ++k) m = nan_max(m, lanes[k]);
  for (; j < n; ++j) m = nan_max(m, static_cast<C>(x[j]));
  return m;
}

// The same from four running maxima of the instruction's max, which may drop a NaN, and two
// running sums beside them, which do not: Vec::max (three more operations, a chain of ~8
// cycles per vector) made this pass a quarter of softmax's time from cache on the Zen 5 VM. A
// sum that came out NaN (a NaN, or +inf beside -inf) sends the row to the exact loop.
template <class T>
float_acc_t<T> row_max(const T* x, int64_t n) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  if (n < 4 * W) return row_max_exact(x, n);
  V m[4] = {V::load_convert(x), V::load_convert(x + W), V::load_convert(x + 2 * W),
            V::load_convert(x + 3 * W)};
  V s0 = m[0] + m[1], s1 = m[2] + m[3];
  int64_t j = 4 * W;
  for (; j + 4 * W <= n; j += 4 * W) {
    const V a = V::load_convert(x + j), b = V::load_convert(x + j + W);
    const V c = V::load_convert(x + j + 2 * W), d = V::load_convert(x + j + 3 * W);
    m[0] = V::max_fast(a, m[0]);
    m[1] = V::max_fast(b, m[1]);
    m[2] = V::max_fast(c, m[2]);
    m[3] = V::max_fast(d, m[3]);
    s0 = s0 + (a + b);
    s1 = s1 + (c + d);
  }
  alignas(64) C lanes[W];
  (s0 + s1).store(lanes);
  C check = 0;
  for (int k = 0; k < W; ++k) check += lanes[k];
  for (int64_t i = j; i < n; ++i) check += static_cast<C>(x[i]);
  if (check != check) return row_max_exact(x, n);
  V::max_fast(V::max_fast(m[0], m[1]), V::max_fast(m[2], m[3])).store(lanes);
  C best = lanes[0];
  for (int k = 1; k < W; ++k) best = std::max(best, lanes[k]);
  for (; j < n; ++j) best = std::max(best, static_cast<C>(x[j]));
  return best;
}

// exp(d) for d = x - (its row's max) <= 0, or NaN: Vec::exp without its upper clamp (89),
// which cannot bite here; the lower one (-104, where float's exp is 0) stays, for rows with
// -inf. The same bits as d.exp(), one operation fewer of the ~19 a vector of the exp pass
// takes: that pass 9% faster from cache on the Zen 5 VM.
template <class V>
V exp_below_max(V d) {
  if constexpr (std::is_same_v<V, Vec<float>>) {
    return V::max_fast(V(-104.0f), d).exp_finite();  // max_fast keeps a NaN d (2nd operand)
  } else {
    return d.exp();
  }
}

// The first cnt elements at p as a vector (cnt == W: a full load).
template <class V, class T>
V load_lanes(const T* p, int cnt) {
  return cnt == V::kSize ? V::load_convert(p) : V::load_convert(p, cnt);
}

struct NoSideWork {
  void operator()(int64_t) const {}
};

// sum(exp(x - m)) for m the row's max (so x - m <= 0, or NaN); when `y` is given (same type
// as compute), also writes exp(x - m) there. `next` (optional, n elements) is prefetched
// meanwhile: the next row's max pass then reads from cache instead of waiting on memory after
// this row's computation. `next_out` (optional, n elements: the next row's output, written
// with plain stores) is prefetched for writing: its lines then come in for ownership while
// this row computes, not one store miss at a time in the next row's passes (4096 x 4096
// float32 on the Zen 5 VM, alternated by library build: one thread 6.17-6.28 -> 5.22-5.51 ms,
// two threads 2.95-3.13 -> 2.51-2.73). `side(j)` runs after each pair of vectors at j (the
// pipelined softmax stores the previous row there).
template <class T, class Side = NoSideWork>
float_acc_t<T> row_exp_sum(const T* x, int64_t n, float_acc_t<T> m, T* y, const T* next = nullptr,
                           T* next_out = nullptr, const Side& side = {}) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  const V vm(m);
  V s0(C(0)), s1(C(0));
  int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) {
    if (next) {
      __builtin_prefetch(next + j);
      __builtin_prefetch(next + j + W);
    }
    if (next_out) {
      __builtin_prefetch(next_out + j, 1);
      __builtin_prefetch(next_out + j + W, 1);
    }
    const V e0 = exp_below_max(V::load_convert(x + j) - vm);
    const V e1 = exp_below_max(V::load_convert(x + j + W) - vm);
    if (y) {
      e0.store_convert(y + j);
      e1.store_convert(y + j + W);
    }
    s0 = s0 + e0;
    s1 = s1 + e1;
    side(j);
  }
  for (; j + W <= n; j += W) {
    const V e0 = exp_below_max(V::load_convert(x + j) - vm);
    if (y) e0.store_convert(y + j);
    s0 = s0 + e0;
  }
  if (j < n) {
    const int c = static_cast<int>(n - j);
    V e0 = exp_below_max(V::load_convert(x + j, c) - vm);
    if (y) e0.store_convert(y + j, c);
    // Lanes past the tail hold exp(0 - m): zero them by storing and summing only c lanes.
    alignas(64) C lanes[W];
    e0.store(lanes);
    C t = 0;
    for (int k = 0; k < c; ++k) t += lanes[k];
    return (s0 + s1).reduce_add() + t;
  }
  return (s0 + s1).reduce_add();
}

// One row. `buf` (float32/float64 only) receives exp(x - max) before the scaled values are
// stored: the output row itself, or a scratch row when `stream` writes the output around the
// cache (its lines then never come in for ownership). `next` and `next_y`: the next row's
// input and output, prefetched (see row_exp_sum; a streamed output is not).
template <class T>
void softmax_row(const T* x, T* y, int64_t n, bool log, bool stream, T* buf, const T* next,
                 T* next_y) {
  using C = float_acc_t<T>;
  using V = Vec<C>;
  T* const next_out = stream ? nullptr : next_y;
  const C m = row_max(x, n);
  if (log) {
    // (x - m) - log(s), as PyTorch: x - (m + log(s)) lost log(s) to rounding where the
    // max's ulp exceeds it (float logits of 1e7 and more).
    const V vm(m), log_s(std::log(row_exp_sum<T>(x, n, m, nullptr, next, next_out)));
    detail::store_row(y, n, stream,
                      [&](int64_t j, int c) { return (load_lanes<V>(x + j, c) - vm) - log_s; });
    return;
  }
  if constexpr (std::is_same_v<T, C>) {
    const V inv(C(1) / row_exp_sum<T>(x, n, m, buf, next, next_out));
    detail::store_row(y, n, stream,
                      [&](int64_t j, int c) { return load_lanes<V>(buf + j, c) * inv; });
  } else {  // 16-bit rows recompute exp rather than round an intermediate
    const V vm(m), inv(C(1) / row_exp_sum<T>(x, n, m, nullptr, next, next_out));
    detail::store_row(y, n, stream, [&](int64_t j, int c) {
      return exp_below_max(load_lanes<V>(x + j, c) - vm) * inv;
    });
  }
}

// float32/float64 softmax rows, pipelined: row r's exp pass also scales row r - 1 by its
// 1 / sum, so that its stores drain while the core computes instead of stalling it between
// rows. kStream: row r - 1's exp values wait in the other of two scratch rows and go out with
// non-temporal stores (the core issues them far faster than memory takes them). Otherwise
// they wait in the output row itself and are scaled in place with plain stores (its lines
// owned since the exp pass, which prefetched them for writing): on the Zen 5 VM, 4096 x 4096
// float32 alternated by library build, one thread 5.18-5.66 -> 4.61-4.76 ms against the row
// at a time (softmax_row), two threads the same (2.40-2.64 against 2.43-2.57 ms). The same
// values as softmax_row, stored in the same places.
template <class T, bool kStream>
void softmax_rows_pipelined(const SoftmaxArgs& a) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  const int64_t n = a.K;
  std::vector<T> scratch(kStream ? static_cast<size_t>(2 * n) : 0);
  const T* prev_buf = nullptr;  // row r - 1: exp(x - max), its output and 1 / sum
  T* prev_y = nullptr;
  T prev_inv = 0;
  auto store_prev_from = [&](int64_t j0) {
    const V inv(prev_inv);
    detail::store_row(prev_y + j0, n - j0, kStream,
                      [&](int64_t j, int c) { return load_lanes<V>(prev_buf + j0 + j, c) * inv; });
  };
  for (int64_t r = 0; r < a.rows; ++r) {
    const T* x = in + r * a.in_row_stride;
    T* y = out + r * a.out_row_stride;
    T* buf = kStream ? scratch.data() + (r % 2) * n : y;
    const T m = row_max(x, n);
    const bool inside =
        prev_y != nullptr && (!kStream || reinterpret_cast<uintptr_t>(prev_y) % sizeof(V) == 0);
    const V inv(prev_inv);
    int64_t stored = 0;  // elements of row r - 1 already out
    const auto side = [&](int64_t j) {
      if (!inside) return;
      if constexpr (kStream) {
        (V::load(prev_buf + j) * inv).stream_convert(prev_y + j);
        (V::load(prev_buf + j + W) * inv).stream_convert(prev_y + j + W);
      } else {
        (V::load(prev_buf + j) * inv).store(prev_y + j);
        (V::load(prev_buf + j + W) * inv).store(prev_y + j + W);
      }
      stored = j + 2 * W;
    };
    const bool more = r + 1 < a.rows;
    const T* next = more ? x + a.in_row_stride : nullptr;
    T* next_out = !kStream && more ? y + a.out_row_stride : nullptr;
    const T s = row_exp_sum<T>(x, n, m, buf, next, next_out, side);
    if (prev_y != nullptr) store_prev_from(stored);
    prev_buf = buf;
    prev_y = y;
    prev_inv = T(1) / s;
  }
  if (prev_y != nullptr) store_prev_from(0);
  if (kStream) stream_fence();
}

void softmax_rows(const SoftmaxArgs& a) {
  visit_dtype<kKernelFloat>(a.dtype, "softmax", [&]<class T>() {
    if constexpr (std::is_same_v<T, float_acc_t<T>>) {
      if (!a.log && a.rows > 1)
        return a.stream ? softmax_rows_pipelined<T, true>(a) : softmax_rows_pipelined<T, false>(a);
    }
    const T* in = static_cast<const T*>(a.in);
    T* out = static_cast<T*>(a.out);
    std::vector<T> scratch(a.stream && !a.log && std::is_same_v<T, float_acc_t<T>> ? a.K : 0);
    for (int64_t r = 0; r < a.rows; ++r) {
      T* y = out + r * a.out_row_stride;
      const T* x = in + r * a.in_row_stride;
      const bool more = r + 1 < a.rows;
      softmax_row(x, y, a.K, a.log, a.stream, scratch.empty() ? y : scratch.data(),
                  more ? x + a.in_row_stride : nullptr, more ? y + a.out_row_stride : nullptr);
    }
    if (a.stream) stream_fence();
  });
}

// Softmax along K rows of N contiguous columns: three passes over a strip of columns.
template <class T>
void softmax_cols_impl(const SoftmaxArgs& a) {
  using C = float_acc_t<T>;
  const T* x = static_cast<const T*>(a.in);
  T* y = static_cast<T*>(a.out);
  const int64_t K = a.K, N = a.N;
  // Strip width: K rows of it fit in ~128 KiB, at least 16 and at most 1024 columns.
  const int64_t strip = std::clamp<int64_t>(
      (131072 / static_cast<int64_t>(sizeof(T)) / std::max<int64_t>(K, 1)) / 16 * 16, 16, 1024);
  std::vector<C> m(strip), s(strip);
  for (int64_t c0 = 0; c0 < N; c0 += strip) {
    const int64_t nb = std::min(strip, N - c0);
    for (int64_t j = 0; j < nb; ++j) m[j] = static_cast<C>(x[c0 + j]);
    for (int64_t k = 1; k < K; ++k) {
      const T* r = x + k * a.in_row_stride + c0;
      for (int64_t j = 0; j < nb; ++j) m[j] = nan_max(m[j], static_cast<C>(r[j]));
    }
    for (int64_t j = 0; j < nb; ++j) s[j] = 0;
    for (int64_t k = 0; k < K; ++k) {
      const T* r = x + k * a.in_row_stride + c0;
      for (int64_t j = 0; j < nb; ++j) s[j] += std::exp(static_cast<C>(r[j]) - m[j]);
    }
    if (a.log) {
      for (int64_t j = 0; j < nb; ++j) s[j] = std::log(s[j]);
    } else {
      for (int64_t j = 0; j < nb; ++j) s[j] = C(1) / s[j];
    }
    for (int64_t k = 0; k < K; ++k) {
      const T* r = x + k * a.in_row_stride + c0;
      T* o = y + k * a.out_row_stride + c0;
      if (a.log) {
        for (int64_t j = 0; j < nb; ++j) o[j] = T((static_cast<C>(r[j]) - m[j]) - s[j]);
      } else {
        for (int64_t j = 0; j < nb; ++j) o[j] = T(std::exp(static_cast<C>(r[j]) - m[j]) * s[j]);
      }
    }
  }
}

void softmax_cols(const SoftmaxArgs& a) {
  visit_dtype<kKernelFloat>(a.dtype, "softmax", [&]<class T>() { softmax_cols_impl<T>(a); });
}

// log(sum(exp(x))) per row, shifted by the row max. An infinite max is the result, as in
// PyTorch: all -inf gives -inf, any +inf gives +inf; NaN propagates.
void logsumexp_rows(const ReduceArgs& a) {
  visit_dtype<kKernelFloat>(a.dtype, "logsumexp", [&]<class T>() {
    using C = float_acc_t<T>;
    const T* in = static_cast<const T*>(a.in);
    for (int64_t r = 0; r < a.rows; ++r) {
      const T* x = in + r * a.row_stride;
      const C m = row_max(x, a.K);
      if (std::isinf(m)) {
        a.out[r].a = static_cast<double>(m);
        continue;
      }
      const C s = row_exp_sum<T>(x, a.K, m, nullptr);
      a.out[r].a = static_cast<double>(std::log(s) + m);
    }
  });
}

// ---- scans -----------------------------------------------------------------------------
template <class T>
using scan_acc_t = std::conditional_t<
    std::is_integral_v<T>, int64_t,
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, double>>;

template <class A>
inline A scan_step(A acc, A v, bool prod) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(prod ? static_cast<uint64_t>(acc) * static_cast<uint64_t>(v)
                               : static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
  } else {
    return prod ? acc * v : acc + v;
  }
}

constexpr DtypeMask kScanTypes = kIntegralTypes | kKernelFloat;

void scan_rows(const ScanArgs& a) {
  visit_dtype<kScanTypes>(a.dtype, "cumsum", [&]<class T>() {
    using A = scan_acc_t<T>;
    const T* in = static_cast<const T*>(a.in);
    T* out = static_cast<T*>(a.out);
    for (int64_t r = 0; r < a.rows; ++r) {
      const T* x = in + r * a.in_row_stride;
      T* y = out + r * a.out_row_stride;
      A acc = a.prod ? A(1) : A(0);
      for (int64_t k = 0; k < a.K; ++k) {
        acc = scan_step(acc, static_cast<A>(x[k]), a.prod);
        y[k] = static_cast<T>(acc);
      }
    }
  });
}

void scan_cols(const ScanArgs& a) {
  visit_dtype<kScanTypes>(a.dtype, "cumsum", [&]<class T>() {
    using A = scan_acc_t<T>;
    constexpr int64_t kStrip = 1024;
    A acc[kStrip];
    const T* x = static_cast<const T*>(a.in);
    T* y = static_cast<T*>(a.out);
    for (int64_t c0 = 0; c0 < a.N; c0 += kStrip) {
      const int64_t nb = std::min(kStrip, a.N - c0);
      for (int64_t j = 0; j < nb; ++j) acc[j] = a.prod ? A(1) : A(0);
      for (int64_t k = 0; k < a.K; ++k) {
        const T* r = x + k * a.in_row_stride + c0;
        T* o = y + k * a.out_row_stride + c0;
        if (a.prod) {
          for (int64_t j = 0; j < nb; ++j) {
            acc[j] = scan_step(acc[j], static_cast<A>(r[j]), true);
            o[j] = static_cast<T>(acc[j]);
          }
        } else {
          for (int64_t j = 0; j < nb; ++j) {
            acc[j] = scan_step(acc[j], static_cast<A>(r[j]), false);
            o[j] = static_cast<T>(acc[j]);
          }
        }
      }
    }
  });
}

}  // namespace

const SoftmaxKernels& softmax_kernels() {
  static const SoftmaxKernels table{&softmax_rows, &softmax_cols, &logsumexp_rows, &scan_rows,
                                    &scan_cols};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
