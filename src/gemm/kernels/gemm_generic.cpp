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
namespace {

void sgemm_generic_4x8(int64_t k, float alpha, const float* a, const float* b, float beta, float* c,
                       int64_t rs_c, int64_t cs_c) {
  register_tile_kernel<float, 4, 2>(k, alpha, a, b, beta, c, rs_c, cs_c);
}

void dgemm_generic_4x4(int64_t k, double alpha, const double* a, const double* b, double beta,
                       double* c, int64_t rs_c, int64_t cs_c) {
  register_tile_kernel<double, 4, 2>(k, alpha, a, b, beta, c, rs_c, cs_c);
}

}  // namespace

const GemmKernels& gemm_kernels() {
  static const GemmKernels table{
      "generic",
      {sgemm_generic_4x8, 4, 8, "sgemm_generic_4x8", kTopRows<float, 4, 2>.data()},
      {dgemm_generic_4x4, 4, 4, "dgemm_generic_4x4", kTopRows<double, 4, 2>.data()},
      epilogue_tile_f32,
      small_sgemm,
      small_dgemm};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
#endif
