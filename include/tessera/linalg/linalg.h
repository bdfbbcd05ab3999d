// tessera::linalg: dense linear algebra with torch.linalg's names and semantics.
//
// Every function takes matrices in the last two dimensions of its tensors and any number of
// leading batch dimensions (broadcast where torch.linalg broadcasts them). dtypes: float32,
// float64, complex64 and complex128; other dtypes are a TypeError naming the op. Results are
// new contiguous tensors; inputs may have any strides (transposed, sliced, expanded views).
//
// Failures that depend on the values (not positive-definite, singular) throw LinAlgError naming
// the batch element and the failing leading minor or pivot, as PyTorch 1.13 does; the `_ex`
// variants return `info` per batch element instead (0: success, k > 0: leading minor / pivot k,
// 1-based). Large matrices run blocked algorithms whose trailing updates go through Tessera's
// GEMM engine; batches are spread over Tessera's thread pool (docs/linalg.md says which
// algorithm runs for which sizes).
//
// Autograd: not implemented yet. Calling any of these on a tensor that requires grad (with grad
// mode on) throws instead of silently returning a result without history.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <tuple>

#include "tessera/core/error.h"
#include "tessera/core/tensor.h"

namespace tessera::linalg {

// torch.linalg.LinAlgError: the input's values make the operation impossible (a matrix that is
// not positive-definite, or singular). A RuntimeError, as in PyTorch.
class LinAlgError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// ---- triangular solves -------------------------------------------------------------------------

// X with A X = B (left) or X A = B (right) for triangular A [*, n, n] and B [*, n, k] (left) or
// [*, k, n] (right); batch dims broadcast. Only the `upper` (or lower) triangle of A is read;
// `unitriangular` takes its diagonal as ones without reading it. A zero on the diagonal gives
// inf/nan as in LAPACK's trsm (no error), like PyTorch.
Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left = true,
                        bool unitriangular = false);

// ---- Cholesky ----------------------------------------------------------------------------------

// L (lower, A = L L^H) or U = L^H (upper, A = U^H U) of Hermitian positive-definite A [*, n, n];
// only the lower triangle of A is read (the upper one for `upper`), the other triangle of the
// result is zero. Throws LinAlgError when a leading minor is not positive-definite (a NaN on
// the diagonal counts as not positive-definite).
Tensor cholesky(const Tensor& A, bool upper = false);
// (L, info): like cholesky without the error; info [*] int32 is 0 or the order of the first
// leading minor that is not positive-definite (then L holds the partial factor).
std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& A, bool upper = false);
// torch.cholesky_solve(B, L, upper): X with A X = B where A = L L^H (or U^H U); B [*, n, k],
// L [*, n, n], batch dims broadcast.
Tensor cholesky_solve(const Tensor& B, const Tensor& L, bool upper = false);
// torch.cholesky_inverse(L, upper): A^{-1} for A = L L^H (or U^H U). Throws LinAlgError when a
// diagonal element of L is zero.
Tensor cholesky_inverse(const Tensor& L, bool upper = false);

// ---- LU ----------------------------------------------------------------------------------------

// (LU, pivots) with P A = L U for A [*, m, n] (LAPACK's getrf, partial pivoting; complex pivots
// chosen by |re| + |im| as LAPACK does). LU [*, m, n] packs unit-lower L below the diagonal and
// U on and above it; pivots [*, min(m, n)] int32, 1-based: row i was swapped with row
// pivots[i] - 1, in order. Throws LinAlgError when U has a zero on its diagonal (as PyTorch
// 1.13: lu_solve would divide by it).
std::tuple<Tensor, Tensor> lu_factor(const Tensor& A, bool pivot = true);
// (LU, pivots, info): lu_factor without the error; info [*] int32 is 0 or the first i (1-based)
// with U[i, i] == 0.
std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& A, bool pivot = true);
// X with A X = B (left) or X A = B (right), or with A^H in place of A (adjoint), from
// lu_factor's (LU, pivots) of square A. Batch dims broadcast.
Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left = true,
                bool adjoint = false);
// (P, L, U) with A = P L U; P [*, m, m], L [*, m, k] unit lower, U [*, k, n], k = min(m, n).
std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& A, bool pivot = true);
// (P, L, U) from lu_factor's result (unpack_data / unpack_pivots as torch.lu_unpack; what is
// not unpacked is an empty tensor).
std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& LU, const Tensor& pivots,
                                             bool unpack_data = true, bool unpack_pivots = true);

// ---- solve, inverse, determinants --------------------------------------------------------------

// X with A X = B (left) or X A = B (right) for square A [*, n, n]. B [*, n, k] or, when it is
// a batch of vectors, [*, n] (torch.linalg.solve's rule). Throws LinAlgError when A is
// singular.
Tensor solve(const Tensor& A, const Tensor& B, bool left = true);
// A^{-1}; throws LinAlgError when A is singular (naming the zero pivot).
Tensor inv(const Tensor& A);
// (A^{-1}, info) without the error.
std::tuple<Tensor, Tensor> inv_ex(const Tensor& A);
// det(A) [*] from LU (0 for singular A, no error).
Tensor det(const Tensor& A);
// (sign, logabsdet): det(A) = sign * exp(logabsdet); sign is +-1 (real) or a unit complex
// number, 0 with logabsdet -inf for singular A. logabsdet is real.
std::tuple<Tensor, Tensor> slogdet(const Tensor& A);

// ---- eigendecomposition, SVD and what is built on them (eigh.cpp, svd.cpp, norms.cpp) ------

// (eigenvalues [*, n] real ascending, eigenvectors [*, n, n] as columns) of Hermitian A
// [*, n, n]; only the lower (UPLO "L") or upper ("U") triangle is read, and the imaginary parts
// of the diagonal are ignored. Throws LinAlgError for NaN/Inf in the read triangle or when the
// iteration does not converge.
std::tuple<Tensor, Tensor> eigh(const Tensor& A, std::string_view UPLO = "L");
Tensor eigvalsh(const Tensor& A, std::string_view UPLO = "L");

// (U, S, Vh) with A = U diag(S) Vh for A [*, m, n], k = min(m, n): S [*, k] real descending,
// U [*, m, m] and Vh [*, n, n] (full_matrices) or [*, m, k] and [*, k, n]. U and V have
// orthonormal columns also for rank-deficient A. Throws LinAlgError for NaN/Inf in A.
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices = true);
Tensor svdvals(const Tensor& A);

// torch.linalg.pinv: the pseudo-inverse [*, n, m]. Singular values (|eigenvalues| when
// `hermitian`, through eigh) at or below max(atol, rtol * largest) count as zero; rtol
// defaults to eps * max(m, n) unless atol > 0 is given (then 0), atol to 0.
Tensor pinv(const Tensor& A, std::optional<double> atol = std::nullopt,
            std::optional<double> rtol = std::nullopt, bool hermitian = false);
// torch.linalg.matrix_rank: the number of singular values above the same tolerance, int64 [*].
Tensor matrix_rank(const Tensor& A, std::optional<double> atol = std::nullopt,
                   std::optional<double> rtol = std::nullopt, bool hermitian = false);

// torch.linalg.matrix_norm over the two dims `dim` (real result): ord "fro" or "nuc", or a
// number 2, -2 (largest / smallest singular value), 1, -1 (max / min column sum of |a|), inf,
// -inf (max / min row sum).
Tensor matrix_norm(const Tensor& A, std::string_view ord = "fro",
                   std::array<int64_t, 2> dim = {-2, -1}, bool keepdim = false);
Tensor matrix_norm(const Tensor& A, double ord, std::array<int64_t, 2> dim = {-2, -1},
                   bool keepdim = false);

// torch.linalg.cond: with no p (or p = 2, -2) the ratio of the extreme singular values (any
// m x n); other p ("fro", "nuc", 1, -1, inf, -inf) norm(A, p) * norm(A^-1, p) of square A, inf
// where A is singular.
Tensor cond(const Tensor& A);
Tensor cond(const Tensor& A, double p);
Tensor cond(const Tensor& A, std::string_view p);
// ---- QR and least squares (qr.cpp, lstsq.cpp) --------------------------------------------------

// (Q, R) with A = Q R for A [*, m, n], k = min(m, n): Householder QR (LAPACK's geqrf + orgqr).
// mode "reduced": Q [*, m, k] with orthonormal columns, R [*, k, n] upper triangular;
// "complete": Q [*, m, m] unitary, R [*, m, n]; "r": R only ([*, k, n]) and an empty Q (shape
// [0]), as PyTorch. R's diagonal is real (also for complex A) and may be negative: the sign
// convention is LAPACK's, not a positive diagonal.
std::tuple<Tensor, Tensor> qr(const Tensor& A, std::string_view mode = "reduced");
// torch.geqrf: (a, tau) in LAPACK's packed form: R on and above the diagonal of a [*, m, n], the
// Householder vectors below it (unit first element implied), tau [*, min(m, n)];
// Q = H_0 H_1 ... with H_i = I - tau_i v_i v_i^H.
std::tuple<Tensor, Tensor> geqrf(const Tensor& A);
// torch.linalg.householder_product (LAPACK's orgqr): the first n columns of H_0 ... H_{k-1} for
// A [*, m, n] holding the vectors below its diagonal (as geqrf leaves them) and tau [*, k];
// m >= n >= k, batch dims of tau equal to A's.
Tensor householder_product(const Tensor& A, const Tensor& tau);

// torch.linalg.lstsq: (solution, residuals, rank, singular_values) for min ||A X - B||_F, A
// [*, m, n], B [*, m, k] or a batch of vectors [*, m] (B has one dim less than A); batch dims
// broadcast. driver (default "gelsy"):
//   "gels"   QR (LQ for m < n), A assumed of full rank; throws LinAlgError when R has an exact
//            zero on its diagonal.
//   "gelsy"  QR with column pivoting; rank = the largest r with the estimated condition number
//            of R(0:r, 0:r) below 1 / rcond (LAPACK's incremental estimate); the minimum-norm
//            solution of the rank-r problem.
//   "gelsd", "gelss"  SVD based (one path for both): singular values <= rcond * s_max count as
//            zero; the minimum-norm solution V S^+ U^H B.
// rcond defaults to eps(dtype) * max(m, n). As PyTorch 1.13: solution [*, n, k] ([*, n] for
// vector B); residuals ||A x_j - b_j||^2 per column [*, k] (real) when m > n and the driver is
// not gelsy (gelsd/gelss: only when every matrix has rank n), else an empty tensor (shape [0]);
// rank [*] int64 for gelsy/gelsd/gelss, else empty; singular_values [*, min(m, n)] for
// gelsd/gelss, else empty.
std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(
    const Tensor& A, const Tensor& B, std::optional<double> rcond = std::nullopt,
    std::optional<std::string_view> driver = std::nullopt);

}  // namespace tessera::linalg
