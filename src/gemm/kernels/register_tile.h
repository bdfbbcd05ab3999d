// The register-tile microkernel, written once over Tessera's per-ISA vector type and
// instantiated by each ISA's kernel file (gemm_avx512.cpp, gemm_avx2.cpp, gemm_generic.cpp)
// with its own tile shape. Contract: src/gemm/kernels/microkernel.h.
//
// Shape: MR rows x NV vectors. The tile lives in MR * NV vector accumulators, one per
// (row, vector of columns); each k step loads NV vectors of the packed B row, broadcasts
// each of the MR packed A values once and issues MR * NV independent FMAs. Rows of C are
// contiguous in the common row-major case (cs_c == 1), so the tile stores as whole vectors.
//
// Include only from kernel files compiled per ISA (TS_ISA defined).
#pragma once

#if !defined(TS_ISA)
#error "register_tile.h is for kernel files compiled per ISA (TS_ISA must be defined)"
#endif

#include <array>
#include <cstdint>
#include <utility>

#include "core/vec.h"
#include "gemm/kernels/microkernel.h"

namespace tessera::cpu::TS_ISA {

// AS: the packed A panel's width (MR for a whole tile; the table's MR for the top-rows kernels,
// which read MR of its AS rows).
template <class T, int MR, int NV, int AS = MR>
inline void register_tile_kernel(int64_t k, T alpha, const T* __restrict a, const T* __restrict b,
                                 T beta, T* c, int64_t rs_c, int64_t cs_c) {
  using V = vec::TS_ISA::Vec<T>;
  constexpr int L = V::kSize;
  constexpr int NR = NV * L;

  // A top-rows tile of at most 8 rows (a product with few rows of C, such as decode-sized
  // batches through a prepacked weight) does too few FMAs per B byte to hide a B panel
  // streaming from memory behind them, so it prefetches B kStreamAhead bytes ahead. 8 rows
  // streaming a 64 MiB packed B, both kernels alternating in one process: 1.21-1.25x faster
  // with 1 KiB ahead on an Intel Xeon VM; on an AMD EPYC (Zen 5) VM, medians of 5
  // alternating runs, 3.74 ms at 1 KiB, 2.65 at 4 KiB, 2.36 at 8 KiB, 2.32 at 16 KiB.
  // Full tiles read B panels the driver just packed into L2, and do not.
  constexpr bool kStreamB = MR < AS && MR <= 8;
  constexpr int64_t kStreamAhead = 8192;
  V acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = V(T(0));
  }

  auto step = [&]() __attribute__((always_inline)) {
    if constexpr (kStreamB) {
#pragma GCC unroll 8
      for (int64_t line = 0; line < NR * int64_t(sizeof(T)); line += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(b) + kStreamAhead + line);
    }
    V bv[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) bv[j] = V::load(b + j * L);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const V ai(a[i]);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[i][j] = V::fmadd(ai, bv[j], acc[i][j]);
    }
    a += AS;
    b += NR;
  };
  // The C tile is needed only after the k loop: the last 2 MR steps each pull one of its
  // lines toward L1 (for reading or, when beta == 0, for the stores' ownership). Pulled at the
  // start, the lines were evicted again by the A and B panels streaming through L1 before
  // the stores came; all at once, they would ask for more lines than the core can have in
  // flight.
  constexpr int64_t kLines = 2 * MR;  // a row of NR floats spans two 64-byte lines
  int64_t p = 0;
#pragma GCC unroll 4
  for (; p < k - kLines; ++p) step();
  for (int64_t line = 0; line < kLines; ++line) {  // the last min(k, kLines) steps
    const int64_t i = line >> 1;
    __builtin_prefetch(c + i * rs_c + (line & 1) * (NR - 1) * cs_c, 1, 3);
    if (p < k) step(), ++p;
  }

  // c = alpha * acc + beta * c, row by row. A strided tile is gathered into a contiguous
  // one first so that both layouts round identically.
  alignas(64) T tile[MR * NR];
  const bool direct = cs_c == 1;
  T* out = direct ? c : tile;
  const int64_t rs_out = direct ? rs_c : NR;
  if (!direct && beta != T(0)) {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) tile[i * NR + j] = c[i * rs_c + j * cs_c];
  }
  const V va(alpha), vb(beta);
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    T* row = out + i * rs_out;
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      V r = acc[i][j] * va;
      if (beta != T(0)) r = V::fmadd(vb, V::load(row + j * L), r);
      r.store(row + j * L);
    }
  }
  if (!direct) {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) c[i * rs_c + j * cs_c] = tile[i * NR + j];
  }
}

// The top-rows kernels of an MR x NV-vector tile (GemmMicroKernel::rows): entry r computes
// rows [0, r) from MR-wide panels.
template <class T, int R, int NV, int MR>
void top_rows_kernel(int64_t k, T alpha, const T* a, const T* b, T beta, T* c, int64_t rs_c,
                     int64_t cs_c) {
  register_tile_kernel<T, R, NV, MR>(k, alpha, a, b, beta, c, rs_c, cs_c);
}

template <class T, int MR, int NV, int... R>
constexpr std::array<GemmMicroKernelFn<T>, MR> top_rows_kernels(std::integer_sequence<int, R...>) {
  return {nullptr, &top_rows_kernel<T, R + 1, NV, MR>...};
}

template <class T, int MR, int NV>
inline constexpr std::array<GemmMicroKernelFn<T>, MR> kTopRows =
    top_rows_kernels<T, MR, NV>(std::make_integer_sequence<int, MR - 1>{});

// An ISA table's entry for the MR x NV-vector register tile: the kernel, its shape, its name
// and its top-rows kernels.
template <class T, int MR, int NV>
GemmMicroKernel<T> register_tile_entry(const char* name) {
  return {&top_rows_kernel<T, MR, NV, MR>, MR, NV * vec::TS_ISA::Vec<T>::kSize, name,
          kTopRows<T, MR, NV>.data()};
}

}  // namespace tessera::cpu::TS_ISA
