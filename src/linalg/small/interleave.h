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
// apart), the others the identity. Returns buf.data().
template <class T>
T* interleave_into(int64_t n, const T* a, int used, std::vector<T>& buf) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
  const int64_t nn = n * n;
  buf.resize(static_cast<size_t>(nn * W));
  // Lane-major: one matrix at a time is read sequentially. (Element-major order would read W
  // streams n*n elements apart, a power of two for n = 8, 16, 32, which alias in the cache.)
  for (int l = 0; l < W; ++l) {
    const T* m = a + l * nn;
    for (int64_t e = 0; e < nn; ++e) buf[e * W + l] = l < used ? m[e] : T(e % (n + 1) == 0);
  }
  return buf.data();
}

// The identity in every lane.
template <class T>
T* interleaved_identity(int64_t n, std::vector<T>& buf) {
  constexpr int W = vec::TS_ISA::Vec<T>::kSize;
  buf.assign(static_cast<size_t>(n * n * W), T(0));
  for (int64_t i = 0; i < n; ++i)
    for (int l = 0; l < W; ++l) buf[(i * n + i) * W + l] = T(1);
  return buf.data();
}

}  // namespace tessera::cpu::TS_ISA
