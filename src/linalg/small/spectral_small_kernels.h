// Per-ISA kernels of eigh and svd (spectral.h): the batched small kernels, one matrix per SIMD
// lane, and the rotation sweep of the large-n QR iterations.
//
// Batched (n <= kSmallMax, real dtypes, as small_kernels.h): a group of matrices is
// interleaved, element (i, j) of the group side by side in one vector, and every lane takes
// the same sequence of operations.
//   heev   symmetric n x n matrices a (the lower triangle is read, or the upper one when
//          `upper`; the other is never touched): w (count x n) ascending, v
//          (count x n x n, row-major, eigenvectors as columns) when non-null. Householder
//          tridiagonalization, then implicit QR with each lane's own shifts and deflation
//          (lane_tridiagonal.h), on groups of two vectors of lanes.
//   svd    square n x n matrices: s (count x n) descending; u, vh (count x n x n) when
//          non-null. Below kSvdBidiagonalMinOrder one-sided Jacobi, pairs in tournament order
//          (a lane whose pair is already converged rotates by the identity; sweeps stop when
//          no lane rotated); from it Householder bidiagonalization, then implicit QR with each
//          lane's own shifts and deflation (lane_bidiagonal.h), on groups of two vectors.
// info[b] = 0, or 1 when the matrix must be redone by the per-matrix kernel: no convergence
// within the sweep limit, or (Jacobi svd with vectors) a singular value at the noise floor
// whose U column the per-matrix kernel completes to an orthonormal basis. (The bidiagonal
// path's U is orthonormal by construction.)
//
// Level-1 pieces of the per-matrix kernels on real rows (the library's own code is compiled for
// the baseline ISA, where a dot product does not vectorize):
//   dot3   out = (x.x, y.y, x.y) over n elements (dot3_f32_f64: float rows, double sums; the
//          Jacobi svd's Gram entries).
//   dot    x . y over n elements.
//   axpy   y += a x over n elements.
//   dot_axpy  returns x . v and does y += a x over n elements, reading x once (one row of a
//          symmetric matrix-vector product on one triangle).
//
// rotate: applies `count` plane rotations (row_p := c row_p - s row_q, row_q := s row_p +
// c row_q, in order) to the columns [0, ncols) of a matrix with ld elements per row.
#pragma once

#include <cstdint>

#include "core/dispatch.h"

namespace tessera::cpu {

// The batched svd's bidiagonal path starts at this order (one-sided Jacobi below: as fast
// there, measured on AVX-512).
inline constexpr int64_t kSvdBidiagonalMinOrder = 7;

template <class R>
struct RowRotation {
  int32_t p, q;
  R c, s;
};

struct SpectralSmallKernels {
  void (*heev_f32)(int64_t n, int64_t count, const float* a, bool upper, float* w, float* v,
                   int32_t* info);
  void (*heev_f64)(int64_t n, int64_t count, const double* a, bool upper, double* w, double* v,
                   int32_t* info);
  void (*svd_f32)(int64_t n, int64_t count, const float* a, float* s, float* u, float* vh,
                  int32_t* info);
  void (*svd_f64)(int64_t n, int64_t count, const double* a, double* s, double* u, double* vh,
                  int32_t* info);
  void (*rotate_f32)(const RowRotation<float>* rots, int64_t count, float* z, int64_t ncols,
                     int64_t ld);
  void (*rotate_f64)(const RowRotation<double>* rots, int64_t count, double* z, int64_t ncols,
                     int64_t ld);
  void (*dot3_f64)(int64_t n, const double* x, const double* y, double* out);
  void (*dot3_f32_f64)(int64_t n, const float* x, const float* y, double* out);
  void (*axpy_f32)(int64_t n, float a, const float* x, float* y);
  void (*axpy_f64)(int64_t n, double a, const double* x, double* y);
  float (*dot_axpy_f32)(int64_t n, const float* x, const float* v, float a, float* y);
  double (*dot_axpy_f64)(int64_t n, const double* x, const double* v, double a, double* y);
  float (*dot_f32)(int64_t n, const float* x, const float* y);
  double (*dot_f64)(int64_t n, const double* x, const double* y);
};

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(SpectralSmallKernels, spectral_small_kernels)
