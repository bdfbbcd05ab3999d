// Batched factorizations of many small matrices (n <= kSmallMax), one matrix per SIMD lane.
//
// A group of W matrices (W = the ISA's vector width: 16 floats / 8 doubles on AVX-512, 8 / 4 on
// AVX2, 4 / 2 generic) is transposed into an interleaved buffer, element (i, j) of all W
// matrices side by side, and the unblocked algorithm runs once on vectors: every scalar step
// of the textbook loop becomes one vector instruction for W matrices. A tail group is padded
// with identity matrices. Row-major n x n matrices, contiguous and n*n elements apart; the
// factors of the `count` matrices at `a` are written to `out` (one read and one write pass,
// which is what a batch of small matrices costs: their flops are few).
//
// Semantics are those of the per-matrix kernels (kernels.h):
//   potrf   lower Cholesky, strict upper triangle zeroed. A matrix whose factorization fails
//           gets info[b] = the failing order and is copied to out unchanged (the caller runs
//           the per-matrix kernel on it for the partial factor).
//   getrf   LU with partial pivoting (first largest |a|, LAPACK's rule; a NaN is never
//           preferred), 1-based pivots ipiv[b * n + j], info[b] = first zero pivot (0 if none).
//           Zero pivots are skipped, as getf2 does.
//   potrs   solves A X = B in place, A = L L^T from potrf's lower factors l (n x n row-major,
//           n*n apart; the strict upper triangle is not read); B is n x k row-major, n*k apart.
//   getrs   solves A X = B in place, P A = L U from getrf's factors lu and 1-based pivots ipiv
//           (n apart); B as for potrs.
//   gesv    getrf then getrs on each group in one pass, the factor kept in the group's buffer
//           (it never goes out): B (as for potrs) overwritten by X, info as getrf's (X is inf /
//           NaN where info > 0). The same bits as getrf + getrs. With `identity` (k = n, inv) B
//           is not read: the right-hand sides are the identity, which each group writes already
//           interchanged (P I) instead of reading it and swapping its rows.
//   geqrf   Householder QR of m x n matrices (m, n <= kSmallMax; row-major, m*n apart), LAPACK's
//           geqr2 conventions (qr_internal.h): R on and above the diagonal of out, reflector k's
//           tail below the diagonal of column k, tau[b * min(m, n) + k]. The lanes are scaled
//           by powers of two first (exact), so tails whose squares would underflow are not lost;
//           a tail below 8 sqrt(safmin / eps) times the lane's largest entry counts as zero.
//   orgqr   Q's first nq columns (m x nq, row-major, m*nq apart; k <= nq <= m <= kSmallMax)
//           from the k reflectors in the first k columns of the m x na matrices a (as geqrf
//           left them, m*na apart) and tau (k apart): LAPACK's org2r.
//   qr      geqrf then orgqr in one pass over each group: Q (m x nq, nq = min(m, n) or m;
//           none when q is null) and R (its first r_rows rows, min(m, n) or m, zero below the
//           diagonal), as torch.linalg.qr returns them.
//   The solves are potrs / getrs ('N') of LAPACK: forward then backward substitution, each
//   diagonal entry inverted once. A singular factor gives inf / NaN, as LAPACK's do (callers
//   check info first).
// Real dtypes only (complex batches take the per-matrix path).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/dispatch.h"

namespace tessera::cpu {

// Whether a few elements per lane (n * k <= W / 2 on AVX-512: right-hand sides, LU pivots) move
// in and out of the interleaved layout by vector gathers and scatters rather than W x W
// transposes. Gathers won on the Intel VM; on AMD Zen 4, whose gathers and scatters are
// microcoded, the transposes win (LU + solve of 10,000 float64 4 x 4 systems: 0.355 -> 0.316 ms,
// Cholesky + solve 0.239 -> 0.222 ms). Tests set it both ways.
inline std::atomic<bool>& small_moves_by_gathers() {
  static std::atomic<bool> on{!cpu_features().amd};
  return on;
}

// potrf and getrf with `stream` write whole aligned blocks of the factors with non-temporal
// stores (AVX-512; the same bits, fenced before they return): for a batch too large for the
// cache to keep (small_batch.h, streams_factors).
struct SmallLinalgKernels {
  void (*potrf_f32)(int64_t n, int64_t count, const float* a, float* out, int32_t* info,
                    bool stream);
  void (*potrf_f64)(int64_t n, int64_t count, const double* a, double* out, int32_t* info,
                    bool stream);
  void (*getrf_f32)(int64_t n, int64_t count, const float* a, float* out, int32_t* ipiv,
                    int32_t* info, bool stream);
  void (*getrf_f64)(int64_t n, int64_t count, const double* a, double* out, int32_t* ipiv,
                    int32_t* info, bool stream);
  void (*potrs_f32)(int64_t n, int64_t k, int64_t count, const float* l, float* b);
  void (*potrs_f64)(int64_t n, int64_t k, int64_t count, const double* l, double* b);
  void (*getrs_f32)(int64_t n, int64_t k, int64_t count, const float* lu, const int32_t* ipiv,
                    float* b);
  void (*getrs_f64)(int64_t n, int64_t k, int64_t count, const double* lu, const int32_t* ipiv,
                    double* b);
  void (*gesv_f32)(int64_t n, int64_t k, int64_t count, const float* a, float* b, int32_t* info,
                   bool identity);
  void (*gesv_f64)(int64_t n, int64_t k, int64_t count, const double* a, double* b, int32_t* info,
                   bool identity);
  void (*geqrf_f32)(int64_t m, int64_t n, int64_t count, const float* a, float* out, float* tau);
  void (*geqrf_f64)(int64_t m, int64_t n, int64_t count, const double* a, double* out, double* tau);
  void (*orgqr_f32)(int64_t m, int64_t na, int64_t nq, int64_t k, int64_t count, const float* a,
                    const float* tau, float* q);
  void (*orgqr_f64)(int64_t m, int64_t na, int64_t nq, int64_t k, int64_t count, const double* a,
                    const double* tau, double* q);
  void (*qr_f32)(int64_t m, int64_t n, int64_t nq, int64_t r_rows, int64_t count, const float* a,
                 float* q, float* r);
  void (*qr_f64)(int64_t m, int64_t n, int64_t nq, int64_t r_rows, int64_t count, const double* a,
                 double* q, double* r);
  int lanes_f32, lanes_f64;  // W
};

inline constexpr int64_t kSmallMax = 32;

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(SmallLinalgKernels, small_linalg_kernels)
