// The GEMM engine against OpenBLAS (an outside oracle) on random shapes and transposes.
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "gemm/gemm.h"

namespace tessera::gemm {
namespace {

TEST(GemmOpenBlas, RandomCasesFloat32) {
  openblas_set_num_threads(1);
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> size(1, 200);
  std::uniform_real_distribution<float> val(-1, 1);
  for (int rep = 0; rep < 40; ++rep) {
    const int64_t m = size(rng), n = size(rng), k = size(rng);
    const bool ta = rep % 2, tb = (rep / 2) % 2;
    const float alpha = rep % 3 == 0 ? 1.0f : -0.75f, beta = rep % 5 == 0 ? 0.0f : 0.5f;
    // Row-major storage; a transposed operand is stored k x m (k x n transposed).
    const int64_t lda = ta ? m : k, ldb = tb ? k : n;
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (auto& x : a) x = val(rng);
    for (auto& x : b) x = val(rng);
    for (auto& x : c) x = val(rng);
    std::vector<float> expect = c;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a.data(), lda, b.data(), ldb, beta, expect.data(), n);
    GemmProblem p;
    p.m = m, p.n = n, p.k = k;
    p.a = a.data(), p.a_rs = ta ? 1 : lda, p.a_cs = ta ? lda : 1;
    p.b = b.data(), p.b_rs = tb ? 1 : ldb, p.b_cs = tb ? ldb : 1;
    p.c = c.data(), p.c_rs = n, p.c_cs = 1;
    p.alpha = alpha, p.beta = beta;
    gemm(p);
    for (int64_t i = 0; i < m * n; ++i)
      ASSERT_NEAR(c[i], expect[i], 4e-7 * (k + 2) * 2) << m << "x" << n << "x" << k << " at " << i;
  }
}

TEST(GemmOpenBlas, RandomCasesFloat64ColumnMajor) {
  openblas_set_num_threads(1);
  std::mt19937_64 rng(12);
  std::uniform_int_distribution<int64_t> size(1, 150);
  std::uniform_real_distribution<double> val(-1, 1);
  for (int rep = 0; rep < 20; ++rep) {
    const int64_t m = size(rng), n = size(rng), k = size(rng);
    std::vector<double> a(m * k), b(k * n), c(m * n);
    for (auto& x : a) x = val(rng);
    for (auto& x : b) x = val(rng);
    for (auto& x : c) x = val(rng);
    std::vector<double> expect = c;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.5, a.data(), m, b.data(), k,
                -1.0, expect.data(), m);
    GemmProblem p;
    p.dtype = ScalarType::Float64;
    p.m = m, p.n = n, p.k = k;
    p.a = a.data(), p.a_rs = 1, p.a_cs = m;
    p.b = b.data(), p.b_rs = 1, p.b_cs = k;
    p.c = c.data(), p.c_rs = 1, p.c_cs = m;
    p.alpha = 1.5, p.beta = -1.0;
    gemm(p);
    for (int64_t i = 0; i < m * n; ++i) ASSERT_NEAR(c[i], expect[i], 1e-15 * (k + 2) * 4);
  }
}

}  // namespace
}  // namespace tessera::gemm
