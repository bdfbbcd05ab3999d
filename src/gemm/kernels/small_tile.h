// The small-product kernel, written once over Tessera's per-ISA vector type like
// register_tile.h and instantiated by each ISA's kernel file. Contract (microkernel.h,
// SmallGemmFn): C[m x n] = alpha A B + beta C straight from the operands, without packing, for
// B and C with contiguous rows and k within one KC block; beta == 0 never reads C.
//
// Tiles of MR = 8 rows (AVX-512; 4 elsewhere) x up to NV = 2 vectors of columns; per k step
// NV loads of B's row (the last one masked at the right edge), one broadcast of A(i, p) per
// row and MR * NV FMAs. Each element is one FMA chain over p in ascending order from zero, then
// alpha * acc (+ beta * C): the register-tile kernel's arithmetic, so a small product has the
// packed path's bits.
//
// Include only from kernel files compiled per ISA (TS_ISA defined).
#pragma once

#if !defined(TS_ISA)
#error "small_tile.h is for kernel files compiled per ISA (TS_ISA must be defined)"
#endif

#include <algorithm>
#include <cstdint>

#include "core/vec.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tessera::cpu::TS_ISA {

// Rows [0, MR) and columns [0, cols) of C, cols in ((NV - 1) L, NV L].
template <class T, int MR, int NV>
inline void small_tile(int64_t k, T alpha, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
                       int64_t b_rs, T beta, T* c, int64_t c_rs, int cols) {
  using V = vec::TS_ISA::Vec<T>;
  constexpr int L = V::kSize;
  const int last = cols - (NV - 1) * L;  // columns in the last vector, 1..L
  auto load_b = [&](const T* row, int j) {
    return j < NV - 1 || last == L ? V::load(row + j * L) : V::load(row + j * L, last);
  };
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = V(T(0));
  for (int64_t p = 0; p < k; ++p) {
    V bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = load_b(b + p * b_rs, j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const V ai(a[i * a_rs + p * a_cs]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = V::fmadd(ai, bv[j], acc[i][j]);
    }
  }
  const V va(alpha), vb(beta);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    T* row = c + i * c_rs;
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const bool full = j < NV - 1 || last == L;
      V r = acc[i][j] * va;
      if (beta != T(0))
        r = V::fmadd(vb, full ? V::load(row + j * L) : V::load(row + j * L, last), r);
      if (full) {
        r.store(row + j * L);
      } else {
        r.store(row + j * L, last);
      }
    }
  }
}

#if defined(__AVX512F__)
// Half-width (256-bit) registers for a tile of at most half a vector of columns. Zen 4 runs a
// 512-bit FMA as two 256-bit halves, so a masked 512-bit tile of 8 float columns cost as much
// as 16, where two 256-bit FMAs issue per cycle.
template <class T>
struct Half256;
template <>
struct Half256<float> {
  using R = __m256;
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R load(const float* p, int n) {
    return _mm256_maskz_loadu_ps(static_cast<__mmask8>((1u << n) - 1u), p);
  }
  static void store(float* p, R v, int n) {
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>((1u << n) - 1u), v);
  }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
};
template <>
struct Half256<double> {
  using R = __m256d;
  static R zero() { return _mm256_setzero_pd(); }
  static R set1(double x) { return _mm256_set1_pd(x); }
  static R load(const double* p, int n) {
    return _mm256_maskz_loadu_pd(static_cast<__mmask8>((1u << n) - 1u), p);
  }
  static void store(double* p, R v, int n) {
    _mm256_mask_storeu_pd(p, static_cast<__mmask8>((1u << n) - 1u), v);
  }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_pd(a, b); }
};

// small_tile<T, MR, 1> for cols <= L / 2 on half-width registers: the same operations per
// element (an FMA chain over p from zero, alpha * acc, + beta * C), so the same bits.
template <class T, int MR>
inline void small_tile_half(int64_t k, T alpha, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
                            int64_t b_rs, T beta, T* c, int64_t c_rs, int cols) {
  using H = Half256<T>;
  typename H::R acc[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i] = H::zero();
  for (int64_t p = 0; p < k; ++p) {
    const typename H::R bv = H::load(b + p * b_rs, cols);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) acc[i] = H::fmadd(H::set1(a[i * a_rs + p * a_cs]), bv, acc[i]);
  }
  const typename H::R va = H::set1(alpha), vb = H::set1(beta);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    T* row = c + i * c_rs;
    typename H::R r = H::mul(acc[i], va);
    if (beta != T(0)) r = H::fmadd(vb, H::load(row, cols), r);
    H::store(row, r, cols);
  }
}
#endif

// Rows [0, MR) of C, every column: blocks of two vectors, then one or two for the rest.
template <class T, int MR>
inline void small_rows(int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs, int64_t a_cs,
                       const T* b, int64_t b_rs, T beta, T* c, int64_t c_rs) {
  constexpr int L = vec::TS_ISA::Vec<T>::kSize;
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L)
    small_tile<T, MR, 2>(k, alpha, a, a_rs, a_cs, b + j, b_rs, beta, c + j, c_rs, 2 * L);
  const int rest = static_cast<int>(n - j);
  if (rest > L) {
    small_tile<T, MR, 2>(k, alpha, a, a_rs, a_cs, b + j, b_rs, beta, c + j, c_rs, rest);
  } else if (rest > 0) {
#if defined(__AVX512F__)
    if (rest <= L / 2) {
      small_tile_half<T, MR>(k, alpha, a, a_rs, a_cs, b + j, b_rs, beta, c + j, c_rs, rest);
      return;
    }
#endif
    small_tile<T, MR, 1>(k, alpha, a, a_rs, a_cs, b + j, b_rs, beta, c + j, c_rs, rest);
  }
}

// All `rows` rows of C (0 < rows <= R) as one tile of exactly that many rows.
template <class T, int R>
inline void small_rest(int rows, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs,
                       int64_t a_cs, const T* b, int64_t b_rs, T beta, T* c, int64_t c_rs) {
  if (rows == R) return small_rows<T, R>(n, k, alpha, a, a_rs, a_cs, b, b_rs, beta, c, c_rs);
  if constexpr (R > 1)
    small_rest<T, R - 1>(rows, n, k, alpha, a, a_rs, a_cs, b, b_rs, beta, c, c_rs);
}

template <class T>
inline void small_gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs,
                       int64_t a_cs, const T* b, int64_t b_rs, T beta, T* c, int64_t c_rs) {
  // 8-row tiles where 32 registers hold their 16 accumulators (16 independent FMA chains cover
  // the FMA latency twice over; 11% faster than 4-row tiles at 32^3 with hot operands), then one
  // tile of the rows left. (An epilogue plan's 14-row tiles, AVX-512's MR, ran as 8 + 4 + 1 + 1
  // rows before: the single rows took a quarter of a fused 64^3 product's time; as 8 + 4 + 2
  // the unpacked 256^3 plan ran slower than the packed one, as 8 + 6 faster.) Every element is
  // the same chain of FMAs in any of these tiles.
  constexpr int MR = vec::TS_ISA::Vec<float>::kSize == 16 ? 8 : 4;  // AVX-512: 32 registers
  int64_t i = 0;
  for (; i + MR <= m; i += MR)
    small_rows<T, MR>(n, k, alpha, a + i * a_rs, a_rs, a_cs, b, b_rs, beta, c + i * c_rs, c_rs);
  if (i < m)
    small_rest<T, MR - 1>(static_cast<int>(m - i), n, k, alpha, a + i * a_rs, a_rs, a_cs, b, b_rs,
                          beta, c + i * c_rs, c_rs);
}

// The table entries (SmallGemmFn) every ISA's kernel file lists.
inline void small_sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs,
                        int64_t a_cs, const float* b, int64_t b_rs, float beta, float* c,
                        int64_t c_rs) {
  small_gemm<float>(m, n, k, alpha, a, a_rs, a_cs, b, b_rs, beta, c, c_rs);
}

inline void small_dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                        int64_t a_rs, int64_t a_cs, const double* b, int64_t b_rs, double beta,
                        double* c, int64_t c_rs) {
  small_gemm<double>(m, n, k, alpha, a, a_rs, a_cs, b, b_rs, beta, c, c_rs);
}

}  // namespace tessera::cpu::TS_ISA
