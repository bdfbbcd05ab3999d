// The GEMM microkernel contract and the per-ISA kernel table.
//
// A microkernel computes one MR x NR tile of C from two packed micro-panels:
//
//   C[MR x NR] := alpha * Apanel[MR x k] * Bpanel[k x NR] + beta * C
//
//   a:  packed A micro-panel, k columns of MR contiguous elements (a[p * MR + i] = A(i, p)),
//       rows past the matrix edge zero-padded (src/gemm/pack.h).
//   b:  packed B micro-panel, k rows of NR contiguous elements (b[p * NR + j] = B(p, j)),
//       columns past the edge zero-padded. Both panels are 64-byte aligned.
//   c:  the tile, C(i, j) at c[i * rs_c + j * cs_c] (element strides). The whole MR x NR tile
//       is written; tiles at the right edge go through a temporary MR x NR tile
//       (src/gemm/driver.cpp).
//   k:  may be 0 (then C := beta * C, or 0 when beta == 0).
//   beta == 0: C is never read, so NaN or Inf garbage in C never reaches the result.
//
// Each C element is one dot product accumulated in p = 0, 1, ..., k-1 order (one fused
// multiply-add per step where the ISA has FMA), then scaled: c = alpha * acc + beta * c.
// The order depends only on k, never on where the tile sits or on how the caller threads,
// so results are bitwise reproducible across thread counts.
//
// A table may also give `rows`: rows[r] (0 < r < MR) computes only the top r rows of a tile
// from the same MR-wide panels, so that a bottom edge of r rows (m = 64 with MR = 14 leaves
// 8) costs r rows of multiply-adds instead of MR; the driver stores its r rows in place.
//
// Kernels are serial, allocate nothing, and are compiled once per ISA (TS_ISA) like the
// other kernel files; `gemm_kernels()` returns that ISA's table. To add an ISA or a better
// kernel, see docs/gemm.md.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "gemm/kernels/epilogue_tile.h"

namespace tessera::cpu {

template <class T>
using GemmMicroKernelFn = void (*)(int64_t k, T alpha, const T* a, const T* b, T beta, T* c,
                                   int64_t rs_c, int64_t cs_c);

template <class T>
struct GemmMicroKernel {
  GemmMicroKernelFn<T> fn = nullptr;
  int mr = 0;             // rows of the register tile
  int nr = 0;             // columns of the register tile
  const char* name = "";  // e.g. "sgemm_avx512_12x32"
  // Kernels for the top r rows of a tile, r = 1..mr-1 (rows[0] unused), or null.
  const GemmMicroKernelFn<T>* rows = nullptr;
};

// One ISA's GEMM kernels: float32 and float64 microkernels (more dtypes join later) and the
// float32 epilogue-plan interpreter that runs on each finished tile (epilogue_tile.h).
// Small products without packing (kernels/small_tile.h): C[m x n] = alpha A B + beta C with
// A(i, p) at a[i * a_rs + p * a_cs], B's rows and C's rows contiguous (B(p, j) at
// b[p * b_rs + j], C(i, j) at c[i * c_rs + j]), k at most one KC block. Same per-element
// arithmetic as the microkernel above, so the driver may take either path for a product.
template <class T>
using SmallGemmFn = void (*)(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs,
                             int64_t a_cs, const T* b, int64_t b_rs, T beta, T* c, int64_t c_rs);

struct GemmKernels {
  const char* isa = "";
  GemmMicroKernel<float> sgemm;
  GemmMicroKernel<double> dgemm;
  EpilogueTileFn epilogue_f32 = nullptr;
  SmallGemmFn<float> small_sgemm = nullptr;
  SmallGemmFn<double> small_dgemm = nullptr;

  template <class T>
  const GemmMicroKernel<T>& get() const {
    if constexpr (sizeof(T) == sizeof(float)) {
      return sgemm;
    } else {
      return dgemm;
    }
  }
  template <class T>
  SmallGemmFn<T> small() const {
    if constexpr (sizeof(T) == sizeof(float)) {
      return small_sgemm;
    } else {
      return small_dgemm;
    }
  }
};

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(GemmKernels, gemm_kernels)
