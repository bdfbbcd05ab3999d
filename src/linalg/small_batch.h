// Choosing and driving the lane-interleaved kernels for batches of small real matrices
// (small/small_kernels.h, compiled per ISA) from the ops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "linalg/common.h"
#include "linalg/small/small_kernels.h"
#include "tessera/core/parallel.h"
#include "tessera/core/tensor.h"

namespace tessera::linalg::detail {

inline const cpu::SmallLinalgKernels& small_kernels() {
  return TS_DISPATCH(small_linalg_kernels);
}

template <class T>
int small_lanes() {
  return std::is_same_v<T, float> ? small_kernels().lanes_f32 : small_kernels().lanes_f64;
}

// Real dtypes, n <= cpu::kSmallMax and more than one matrix.
template <class T>
bool use_small_kernels(int64_t n, int64_t batch) {
  return (std::is_same_v<T, float> || std::is_same_v<T, double>)&&n <= cpu::kSmallMax && batch > 1;
}

// fn(first, count) over [0, batch) in whole groups of lanes, spread over the pool.
template <class T>
void for_each_group(int64_t batch, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t w = small_lanes<T>();
  const int64_t groups = (batch + w - 1) / w;
  parallel_for(0, groups, 16,
               [&](int64_t g0, int64_t g1) { fn(g0 * w, std::min(batch, g1 * w) - g0 * w); });
}

// Whether a batch of `batch` factors of order n goes out with non-temporal stores (the kernels'
// `stream`): from kStreamFactorBytes on, more than the cache keeps until a solve reads the
// factors back. Each plain store of a transposed block first read its line from L3 or memory.
// Measured on a Zen 5 VM (L3 32 MiB, one thread, batches of 10,000, two runs of `tessera bench
// linalg` alternating both ways): at 16 x 16 (10-20 MB) streaming made cholesky 1.25-2.3x
// faster, cholesky + cholesky_solve 1.2-1.9x, lu_factor + lu_solve 0.9-1.4x; at 32 x 32
// cholesky 1.0-1.4x, lu_factor + lu_solve 0.9-1.3x. Batches of 1.3-5 MB (float64 4 x 4, float32 and
// float64 8 x 8), whose factors the solve then found in L3, ran lu_factor + lu_solve up to 1.4x
// slower streamed.
inline constexpr int64_t kStreamFactorBytes = int64_t{8} << 20;

template <class T>
bool streams_factors(int64_t n, int64_t batch) {
  return batch * n * n * static_cast<int64_t>(sizeof(T)) >= kStreamFactorBytes;
}

template <class T>
void small_potrf(int64_t n, int64_t count, const T* a, T* out, int32_t* info,
                 const cpu::SmallLinalgKernels& k = small_kernels(), bool stream = false) {
  if constexpr (std::is_same_v<T, float>) k.potrf_f32(n, count, a, out, info, stream);
  if constexpr (std::is_same_v<T, double>) k.potrf_f64(n, count, a, out, info, stream);
}

template <class T>
void small_getrf(int64_t n, int64_t count, const T* a, T* out, int32_t* ipiv, int32_t* info,
                 const cpu::SmallLinalgKernels& k = small_kernels(), bool stream = false) {
  if constexpr (std::is_same_v<T, float>) k.getrf_f32(n, count, a, out, ipiv, info, stream);
  if constexpr (std::is_same_v<T, double>) k.getrf_f64(n, count, a, out, ipiv, info, stream);
}

template <class T>
void small_potrs(int64_t n, int64_t k, int64_t count, const T* l, T* b,
                 const cpu::SmallLinalgKernels& kern = small_kernels()) {
  if constexpr (std::is_same_v<T, float>) kern.potrs_f32(n, k, count, l, b);
  if constexpr (std::is_same_v<T, double>) kern.potrs_f64(n, k, count, l, b);
}

template <class T>
void small_getrs(int64_t n, int64_t k, int64_t count, const T* lu, const int32_t* ipiv, T* b,
                 const cpu::SmallLinalgKernels& kern = small_kernels()) {
  if constexpr (std::is_same_v<T, float>) kern.getrs_f32(n, k, count, lu, ipiv, b);
  if constexpr (std::is_same_v<T, double>) kern.getrs_f64(n, k, count, lu, ipiv, b);
}

template <class T>
void small_gesv(int64_t n, int64_t k, int64_t count, const T* a, T* b, int32_t* info,
                const cpu::SmallLinalgKernels& kern = small_kernels(), bool identity = false) {
  if constexpr (std::is_same_v<T, float>) kern.gesv_f32(n, k, count, a, b, info, identity);
  if constexpr (std::is_same_v<T, double>) kern.gesv_f64(n, k, count, a, b, info, identity);
}

template <class T>
void small_geqrf(int64_t m, int64_t n, int64_t count, const T* a, T* out, T* tau,
                 const cpu::SmallLinalgKernels& k = small_kernels()) {
  if constexpr (std::is_same_v<T, float>) k.geqrf_f32(m, n, count, a, out, tau);
  if constexpr (std::is_same_v<T, double>) k.geqrf_f64(m, n, count, a, out, tau);
}

template <class T>
void small_orgqr(int64_t m, int64_t na, int64_t nq, int64_t k, int64_t count, const T* a,
                 const T* tau, T* q, const cpu::SmallLinalgKernels& kern = small_kernels()) {
  if constexpr (std::is_same_v<T, float>) kern.orgqr_f32(m, na, nq, k, count, a, tau, q);
  if constexpr (std::is_same_v<T, double>) kern.orgqr_f64(m, na, nq, k, count, a, tau, q);
}

template <class T>
void small_qr(int64_t m, int64_t n, int64_t nq, int64_t r_rows, int64_t count, const T* a, T* q,
              T* r, const cpu::SmallLinalgKernels& k = small_kernels()) {
  if constexpr (std::is_same_v<T, float>) k.qr_f32(m, n, nq, r_rows, count, a, q, r);
  if constexpr (std::is_same_v<T, double>) k.qr_f64(m, n, nq, r_rows, count, a, q, r);
}

// Whether the matrices of `t` (batch_dims x n x n) are the plain layout the lane kernels read:
// row-major, n*n apart, none shared by broadcasting.
inline bool plain_matrices(const Tensor& t, int64_t batch) {
  return t.is_contiguous() && t.numel() == batch * t.size(-1) * t.size(-2);
}

// t itself when its matrices are plain, else their contiguous copy (batch_dims x rows x cols).
inline Tensor plain_or_copy(const Tensor& t, IntArrayRef batch_dims) {
  return plain_matrices(t, numel_of(batch_dims)) ? t : contiguous_matrices(t, batch_dims);
}

}  // namespace tessera::linalg::detail
