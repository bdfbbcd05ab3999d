// Loop helpers that turn a TensorIterator and a lambda into a kernel. Per-ISA like vec.h:
// include only from kernel files compiled per ISA.
//
//   cpu_kernel<Out, A, B>(iter, [](A a, B b) -> Out { ... });
//       scalar lambda over any strides; contiguous inner loops are plain indexed loops that
//       the compiler vectorises for this file's ISA.
//   cpu_kernel_vec<S>(iter, scalar_op, vec_op);      (cpu_kernel_vec<S, true>: a cheap op whose
//                                                     large outputs bypass the cache)
//       all operands of storage type S (float, double, Half, BFloat16); computes in
//       C = compute_t<S> (float for the 16-bit types) with Vec<C> where every input is
//       contiguous or a broadcast scalar, and with scalar_op elsewhere.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/iterator.h"
#include "core/prefetch.h"
#include "core/vec.h"

namespace tessera::cpu::TS_ISA {

using vec::TS_ISA::Vec;

template <class S>
struct ComputeType {
  using type = S;
};
template <>
struct ComputeType<Half> {
  using type = float;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
template <class S>
using compute_t = typename ComputeType<S>::type;

namespace detail {

template <class Out, class... In, class Op, size_t... I>
inline void strided_row(char** p, const int64_t* s, int64_t n, Op& op, std::index_sequence<I...>) {
  constexpr int kArgs = 1 + sizeof...(In);
  bool contiguous = s[0] == sizeof(Out) && ((s[I + 1] == sizeof(In)) && ...);
  if (contiguous) {
    Out* out = reinterpret_cast<Out*>(p[0]);
    auto ins = std::make_tuple(reinterpret_cast<const In*>(p[I + 1])...);
    for (int64_t i = 0; i < n; ++i) out[i] = op(std::get<I>(ins)[i]...);
    return;
  }
  (void)kArgs;
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(p[0] + i * s[0]) =
        op(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1])...);
  }
}

}  // namespace detail

template <class Out, class... In, class Op>
void cpu_kernel(TensorIterator& iter, Op op, int64_t grain = kGrainSize) {
  constexpr int kArgs = 1 + sizeof...(In);
  iter.for_each(
      [&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
        char* p[kArgs];
        for (int k = 0; k < kArgs; ++k) p[k] = data[k];
        for (int64_t j = 0; j < n1; ++j) {
          detail::strided_row<Out, In...>(p, strides, n0, op, std::index_sequence_for<In...>{});
          for (int k = 0; k < kArgs; ++k) p[k] += strides[kArgs + k];
        }
      },
      grain);
}

namespace detail {

// Whether store_row streams outputs of dtype S: its compute type itself (float32, float64), or
// float16/bfloat16 converted from float lanes where the ISA has non-temporal stores.
template <class S>
inline constexpr bool kStreamable = std::is_same_v<S, compute_t<S>>
#if defined(__AVX512F__) || defined(__AVX2__)
                                    || std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>
#endif
    ;

// Writes out[0, n) = compute(i, cnt), a Vec<compute_t<S>> whose first cnt lanes are valid
// (cnt == W but at the tail). With `stream`, whole vectors of a streamable output (kStreamable:
// float32, float64, and float16/bfloat16 on AVX2/AVX-512) at aligned addresses go around the
// cache (outputs too large for it: their lines are not read for ownership first); the caller
// fences with stream_fence() before handing the output to another thread. Other dtypes
// ignore `stream`.
template <class S, class Compute>
inline void store_row(S* out, int64_t n, bool stream, Compute&& compute) {
  using C = compute_t<S>;
  constexpr int W = Vec<C>::kSize;
  int64_t i = 0;
  if constexpr (kStreamable<S>) {
    constexpr uintptr_t kAlign = sizeof(S) * W;  // one stored vector's bytes
    const auto addr = reinterpret_cast<uintptr_t>(out);
    if (stream && addr % sizeof(S) == 0) {
      const auto head =
          std::min<int64_t>(n, static_cast<int64_t>((kAlign - addr % kAlign) % kAlign / sizeof(S)));
      if (head > 0) compute(0, static_cast<int>(head)).store_convert(out, static_cast<int>(head));
      for (i = head; i + W <= n; i += W) compute(i, W).stream_convert(out + i);
    }
  }
  for (; i + W <= n; i += W) compute(i, W).store_convert(out + i);
  if (i < n) {
    const int cnt = static_cast<int>(n - i);
    compute(i, cnt).store_convert(out + i, cnt);
  }
}

// One row where output is contiguous and each input is contiguous or broadcast (stride 0).
template <class S, int kIn, class ScalarOp, class VecOp>
inline void vec_row(char** p, const int64_t* s, int64_t n, ScalarOp& sop, VecOp& vop, bool stream) {
  using C = compute_t<S>;
  using V = Vec<C>;
  constexpr int W = V::kSize;
  const S* in[kIn];
  V bcast[kIn] = {};
  bool is_bcast[kIn];
  for (int k = 0; k < kIn; ++k) {
    in[k] = reinterpret_cast<const S*>(p[k + 1]);
    is_bcast[k] = s[k + 1] == 0;
    if (is_bcast[k]) bcast[k] = V(static_cast<C>(in[k][0]));
  }
  const bool prefetch = stream && stream_prefetch_pays();
  auto load = [&](int k, int64_t i, int cnt) -> V {
    if (is_bcast[k]) return bcast[k];
    // Large (streamed) rows also prefetch their inputs 2 KiB ahead where that pays (not on
    // AMD, core/prefetch.h): for ops with real arithmetic (gelu) the hardware prefetchers alone
    // left the loads waiting (measured 45 -> 32 ms for gelu over 64M float32 on one Xeon core).
    // It may lie past the row's end.
    if (prefetch) __builtin_prefetch(ahead(in[k] + i, 2048));
    return cnt == W ? V::load_convert(in[k] + i) : V::load_convert(in[k] + i, cnt);
  };
  store_row(reinterpret_cast<S*>(p[0]), n, stream, [&](int64_t i, int cnt) -> V {
    if constexpr (kIn == 1) return vop(load(0, i, cnt));
    if constexpr (kIn == 2) return vop(load(0, i, cnt), load(1, i, cnt));
    if constexpr (kIn == 3) return vop(load(0, i, cnt), load(1, i, cnt), load(2, i, cnt));
  });
  (void)sop;
}

template <class S, int kIn, class ScalarOp>
inline void scalar_row(char** p, const int64_t* s, int64_t n, ScalarOp& sop) {
  using C = compute_t<S>;
  auto at = [&](int k, int64_t i) -> C {
    return static_cast<C>(*reinterpret_cast<const S*>(p[k] + i * s[k]));
  };
  for (int64_t i = 0; i < n; ++i) {
    C r;
    if constexpr (kIn == 1) r = sop(at(1, i));
    if constexpr (kIn == 2) r = sop(at(1, i), at(2, i));
    if constexpr (kIn == 3) r = sop(at(1, i), at(2, i), at(3, i));
    *reinterpret_cast<S*>(p[0] + i * s[0]) = S(r);
  }
}

}  // namespace detail

template <class S, bool kStreamLarge = false, class ScalarOp, class VecOp>
void cpu_kernel_vec(TensorIterator& iter, ScalarOp sop, VecOp vop, int64_t grain = kGrainSize) {
  using C = compute_t<S>;
  // The arity comes from the scalar lambda, so only that loop shape is instantiated.
  constexpr int N = std::is_invocable_v<ScalarOp, C>         ? 1
                    : std::is_invocable_v<ScalarOp, C, C>    ? 2
                    : std::is_invocable_v<ScalarOp, C, C, C> ? 3
                                                             : 0;
  static_assert(N > 0, "cpu_kernel_vec: the scalar op must take 1 to 3 arguments");
  TS_INTERNAL_ASSERT(iter.noutputs() == 1 && iter.ninputs() == N);
  constexpr int kArgs = N + 1;
  // With kStreamLarge, outputs past the last-level cache are written around it, unless an input
  // is the output (its lines are in the cache anyway, just read).
  bool stream =
      kStreamLarge && iter.numel() * static_cast<int64_t>(sizeof(S)) >= kStreamOutputBytes;
  for (int k = 1; k < kArgs && stream; ++k) stream = iter.data_ptr(k) != iter.data_ptr(0);
  iter.for_each(
      [&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
        char* p[kArgs];
        for (int k = 0; k < kArgs; ++k) p[k] = data[k];
        bool vectorizable = strides[0] == sizeof(S);
        for (int k = 1; k < kArgs; ++k) vectorizable &= strides[k] == sizeof(S) || strides[k] == 0;
        for (int64_t j = 0; j < n1; ++j) {
          if (vectorizable) {
            detail::vec_row<S, N>(p, strides, n0, sop, vop, stream);
          } else {
            detail::scalar_row<S, N>(p, strides, n0, sop);
          }
          for (int k = 0; k < kArgs; ++k) p[k] += strides[kArgs + k];
        }
        if (stream) stream_fence();
      },
      grain);
}

}  // namespace tessera::cpu::TS_ISA
