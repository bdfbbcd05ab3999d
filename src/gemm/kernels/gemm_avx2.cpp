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
namespace {

void sgemm_avx2_6x16(int64_t k, float alpha, const float* a, const float* b, float beta, float* c,
                     int64_t rs_c, int64_t cs_c) {
  register_tile_kernel<float, 6, 2>(k, alpha, a, b, beta, c, rs_c, cs_c);
}

void dgemm_avx2_6x8(int64_t k, double alpha, const double* a, const double* b, double beta,
                    double* c, int64_t rs_c, int64_t cs_c) {
  register_tile_kernel<double, 6, 2>(k, alpha, a, b, beta, c, rs_c, cs_c);
}

}  // namespace

const GemmKernels& gemm_kernels() {
  static const GemmKernels table{
      "avx2",
      {sgemm_avx2_6x16, 6, 16, "sgemm_avx2_6x16", kTopRows<float, 6, 2>.data()},
      {dgemm_avx2_6x8, 6, 8, "dgemm_avx2_6x8", kTopRows<double, 6, 2>.data()},
      epilogue_tile_f32,
      small_sgemm,
      small_dgemm};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
#endif
