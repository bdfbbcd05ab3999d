// Householder QR kernels of tessera::linalg (qr_kernels.cpp), on one strided matrix at a time:
// M(i, j) = p[i * rs + j * cs]. Other linalg code may call them (the SVD can QR-precondition a
// tall matrix: geqrf, take R, and multiply U by Q with ormqr or form Q with orgqr).
//
// Conventions are LAPACK's: A = Q R with Q = H_0 H_1 ... H_{k-1}, k = min(m, n),
// H_i = I - tau_i v_i v_i^H, v_i(0 .. i) = (0, ..., 0, 1) and v_i(i + 1 ..) stored below the
// diagonal of column i; R on and above the diagonal, its diagonal real (beta) also for complex
// T. tau_i = 0 when column i is already reduced (H_i = I).
//
//   geqrf   blocked: 32-wide panels factored unblocked (geqr2) on a column-major copy, the
//           compact-WY factor T of each panel (larft, from the Gram matrix V^H V taken by the
//           GEMM engine), and the trailing update C -= V (T^H (V^H C)) as two engine GEMMs;
//           small matrices run geqr2 on a column-major copy of the whole matrix.
//   orgqr   blocked backward: the first n columns of Q from k reflectors (columns k.. start as
//           identity columns), each block applied to the columns right of it by the same
//           block reflector, then the block's own columns generated unblocked (org2r).
//   ormqr   C := Q C or Q^H C (C m x nrhs) with the same block reflectors.
//   geqp3   QR with column pivoting on column-major storage, blocked as LAPACK's geqp3: 32
//           columns at a time (laqps) factored with their update deferred to one GEMM per
//           block, the last 128 unblocked (laqp2); partial column norms downdated as Drmac and
//           Bujanovic do, recomputed where cancellation is feared.
//
// Threads: outside a parallel region the engine GEMMs thread, block reflectors split a wide C
// over the pool (kernels.h), and geqp3 splits each step's pass over the remaining columns
// (the adjoint_gemv leaf: every column's dot product is the same on any split); inside one,
// all run serially.
#pragma once

#include <cstdint>
#include <string_view>
#include <tuple>

#include "linalg/scalar_ops.h"
#include "tessera/core/tensor.h"

namespace tessera::linalg::detail {

// A = Q R in place for the m x n matrix (a, rs, cs); tau[0 .. min(m, n)).
template <class T>
void geqrf(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, T* tau);

// The m x n matrix Q(:, 0 .. n) = H_0 ... H_{k-1} (first n columns) in place of the m x n matrix
// whose first k columns hold the reflectors (below their diagonals) as geqrf left them;
// m >= n >= k. Columns k .. n on entry are ignored (overwritten).
template <class T>
void orgqr(int64_t m, int64_t n, int64_t k, T* a, int64_t rs, int64_t cs, const T* tau);

// C := Q C (adjoint false) or Q^H C (adjoint true) for the m x nrhs matrix (c, c_rs, c_cs), Q =
// H_0 ... H_{k-1} given by the m x k reflectors (a, rs, cs) and tau; k <= m.
template <class T>
void ormqr(bool adjoint, int64_t m, int64_t nrhs, int64_t k, const T* a, int64_t rs, int64_t cs,
           const T* tau, T* c, int64_t c_rs, int64_t c_cs);

// A P = Q R with column pivoting for the column-major m x n matrix a (leading dimension lda),
// in place; jpvt[j] = the column of A (0-based) that became column j of A P.
template <class T>
void geqp3(int64_t m, int64_t n, T* a, int64_t lda, int64_t* jpvt, T* tau);
// The same, every column unblocked (laqp2): the plain reference of geqp3.
template <class T>
void geqp3_unblocked(int64_t m, int64_t n, T* a, int64_t lda, int64_t* jpvt, T* tau);

// LAPACK's larfg: given alpha and x (count values, stride inc), finds beta (real), tau and v
// with H^H (alpha; x) = (beta; 0), H = I - tau (1; v) (1; v)^H; x is overwritten with v and
// alpha with beta. tau = 0 (and nothing changes) when x == 0 and alpha is real.
template <class T>
T larfg(int64_t count, T& alpha, T* x, int64_t inc);

// ---- on tensors (qr.cpp) ------------------------------------------------------------------------

// geqrf on a contiguous copy of every matrix of A [*, m, n] (validated by the caller): (a [*, m,
// n] in LAPACK's packed form, tau [*, min(m, n)]).
std::tuple<Tensor, Tensor> geqrf_work(const Tensor& A, std::string_view op);
// Q [*, m, nq]: the first nq columns of H_0 ... H_{k-1} from a [*, m, >= k] (any strides; only
// its first k columns are read) and tau [*, k]; k <= nq <= m.
Tensor orgqr_work(const Tensor& a, const Tensor& tau, int64_t nq, std::string_view op);

// ---- references ---------------------------------------------------------------------------------

// Plain references for the tests: geqr2 / org2r on the whole matrix, column by column.
template <class T>
void geqrf_reference(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, T* tau);
template <class T>
void orgqr_reference(int64_t m, int64_t n, int64_t k, T* a, int64_t rs, int64_t cs, const T* tau);

}  // namespace tessera::linalg::detail
