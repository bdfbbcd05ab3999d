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
namespace {

void sgemm_avx512_14x32(int64_t k, float alpha, const float* a, const float* b, float beta,
                        float* c, int64_t rs_c, int64_t cs_c) {
  register_tile_kernel<float, 14, 2>(k, alpha, a, b, beta, c, rs_c, cs_c);
}

void dgemm_avx512_14x16(int64_t k, double alpha, const double* a, const double* b, double beta,
                        double* c, int64_t rs_c, int64_t cs_c) {
  register_tile_kernel<double, 14, 2>(k, alpha, a, b, beta, c, rs_c, cs_c);
}

}  // namespace

const GemmKernels& gemm_kernels() {
  static const GemmKernels table{
      "avx512",
      {sgemm_avx512_14x32, 14, 32, "sgemm_avx512_14x32", kTopRows<float, 14, 2>.data()},
      {dgemm_avx512_14x16, 14, 16, "dgemm_avx512_14x16", kTopRows<double, 14, 2>.data()},
      epilogue_tile_f32,
      small_sgemm,
      small_dgemm};
  return table;
}

}  // namespace tessera::cpu::TS_ISA
#endif
