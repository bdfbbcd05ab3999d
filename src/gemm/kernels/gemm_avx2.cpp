// AVX2+FMA GEMM microkernels (this file is compiled for every ISA; only the avx2 copy has a
// body). 16 ymm registers: 12 accumulators, 2 B row vectors and a broadcast.
//
//   sgemm_avx2_6x16: 6 rows x 2 ymm of 8 floats; per k step 2 B loads, 6 broadcasts, 12 FMAs.
//   dgemm_avx2_6x8:  6 rows x 2 ymm of 4 doubles; same register budget.
#include "gemm/kernels/microkernel.h"

#if defined(__AVX2__) && !defined(__AVX512F__)
#include "gemm/kernels/register_tile.h"
#include "gemm/kernels/small_tile.h"

namespace tessera::cpu::TS_ISA {

const GemmKernels& gemm_kernels() {
  static const GemmKernels table{"avx2",
                                 register_tile_entry<float, 6, 2>("sgemm_avx2_6x16"),
                                 register_tile_entry<double, 6, 2>("dgemm_avx2_6x8"),
                                 epilogue_tile_f32,
                                 small_sgemm,
                                 small_dgemm};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
#endif
