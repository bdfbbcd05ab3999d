// AVX-512 GEMM microkernels (this file is compiled for every ISA; only the avx512 copy has
// a body). 32 zmm registers: 28 accumulators, 2 B row vectors and a broadcast.
//
//   sgemm_avx512_14x32: 14 rows x 2 zmm of 16 floats; per k step 2 B loads, 14 broadcasts,
//                       28 FMAs.
//   dgemm_avx512_14x16: 14 rows x 2 zmm of 8 doubles; same register budget.
//
// Measured on Zen 5 (two 512-bit FMA pipes): 14x32 beat 12x32 (24 accumulators) and 8x48 by
// 5-10% at n >= 1024: more FMAs per C-tile update and per broadcast.
#include "gemm/kernels/microkernel.h"

#if defined(__AVX512F__)
#include "gemm/kernels/register_tile.h"
#include "gemm/kernels/small_tile.h"

namespace tessera::cpu::TS_ISA {

const GemmKernels& gemm_kernels() {
  static const GemmKernels table{"avx512",
                                 register_tile_entry<float, 14, 2>("sgemm_avx512_14x32"),
                                 register_tile_entry<double, 14, 2>("dgemm_avx512_14x16"),
                                 epilogue_tile_f32,
                                 small_sgemm,
                                 small_dgemm};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
#endif
