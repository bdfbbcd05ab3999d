// Portable GEMM microkernels (this file is compiled for every ISA; only the generic copy has
// a body). Plain C++ over Tessera's generic Vec (4 floats or 2 doubles per "vector"), which
// the compiler maps onto baseline SSE2: 16 xmm registers, 8 of them accumulators. No FMA in
// baseline x86-64, so each step is a multiply and an add.
//
//   sgemm_generic_4x8: 4 rows x 2 vectors of 4 floats.
//   dgemm_generic_4x4: 4 rows x 2 vectors of 2 doubles.
#include "gemm/kernels/microkernel.h"

#if !defined(__AVX2__)
#include "gemm/kernels/register_tile.h"
#include "gemm/kernels/small_tile.h"

namespace tessera::cpu::TS_ISA {

const GemmKernels& gemm_kernels() {
  static const GemmKernels table{"generic",
                                 register_tile_entry<float, 4, 2>("sgemm_generic_4x8"),
                                 register_tile_entry<double, 4, 2>("dgemm_generic_4x4"),
                                 epilogue_tile_f32,
                                 small_sgemm,
                                 small_dgemm};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
#endif
