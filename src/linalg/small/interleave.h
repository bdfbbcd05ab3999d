// Lane-interleaved groups of small matrices for the per-ISA batched kernels (small_kernels.cpp,
// spectral_small_kernels.cpp): W = Vec<T>::kSize matrices, element (i, j) of lane l at
// buf[(i * n + j) * W + l], so that element (i, j) of the whole group is one vector.
// Included inside namespace tessera::cpu::TS_ISA.
#pragma once

#include <cstdint>
#include <vector>

#include "core/vec.h"

namespace tessera::cpu::TS_ISA {

// Fills buf with W interleaved n x n matrices: lanes below `used` from a (row-major, n*n
// apart), the others the identity. Returns buf.data(). Element (i, j) goes to vector
// i * ld + j (ld >= n; a stride that is not a power of two keeps the vectors of one column
// from aliasing in the cache), or j * ld + i when `transpose` (columns contiguous). `lines`
// (>= n) rows (columns when transposed) of ld vectors are allocated; the padding is zero.
template <class T>
T* interleave_into(int64_t n, const T* a, int used, std::vector<T>& buf, int64_t ld = 0,
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
T* interleaved_identity(int64_t n, std::vector<T>& buf, int64_t ld = 0) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
  if (ld == 0) ld = n;
  buf.assign(static_cast<size_t>(n * ld * W), T(0));
  for (int64_t i = 0; i < n; ++i)
    for (int l = 0; l < W; ++l) buf[(i * ld + i) * W + l] = T(1);
  return buf.data();
}

}  // namespace tessera::cpu::TS_ISA
