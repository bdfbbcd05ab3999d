// Internal kernels of eigh and svd on one matrix at a time (the ops are in eigh.cpp, svd.cpp).
//
// Storage: row-major, and "columns as rows" where an algorithm works on columns: a matrix M
// (rows x cols) kept as Mc (cols x rows) with Mc[j * rows + i] = M(i, j), so that the column
// operations of Jacobi rotations, Householder reflectors and QR sweeps run along contiguous
// memory. T is float, double, complex64 or complex128; R = real_t<T>.
//
// Which algorithm runs (docs/linalg.md):
//   heev   n <= kJacobiMaxOrder: cyclic two-sided Jacobi with a threshold strategy
//          (jacobi_eigh.cpp); larger: Householder tridiagonalization (tridiagonal.cpp), then
//          implicit QL with Wilkinson shifts for values only, divide and conquer with vectors
//          (divide_conquer.cpp).
//   gesvd  min(m, n) <= kJacobiMaxOrder: one-sided (Hestenes) Jacobi, preconditioned by a
//          Householder QR when m > n (jacobi_svd.cpp); larger: Householder bidiagonalization
//          (bidiagonal.cpp), then the implicit-shift bidiagonal QR of Golub and Kahan for values
//          only, divide and conquer with vectors (bidiagonal_dc.cpp).
// Every path returns eigenvalues ascending / singular values descending with their vectors;
// U and V have orthonormal columns also for rank-deficient input (null columns completed).
//
// The plain references (spectral_reference.cpp) are textbook cyclic Jacobi in long-hand
// std::complex arithmetic; the tests compare every path with them and with LAPACK.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "linalg/kernels.h"
#include "linalg/qr_internal.h"
#include "linalg/scalar_ops.h"
#include "linalg/small/spectral_small_kernels.h"

namespace tessera::linalg::detail {

inline constexpr int64_t kJacobiMaxOrder = 64;

// ---- Householder pieces (householder.cpp)
// --------------------------------------------------------

// Reflectors come from larfg (qr_internal.h), beta real so that the tridiagonal and
// bidiagonal forms of complex matrices are real.
// x := H x, H = I - tau v v^H, v = (1, v_tail[0 .. n-1)), x of length n (conj_tau applies H^H).
template <class T>
void apply_householder(int64_t n, const T* v_tail, T tau, T* x, bool conj_tau);

// z (n x n, row j = column j of Q) := Q = H_0 H_1 ... H_{count-1} for reflectors that act on
// indices k+1 .. n-1: H_k = I - tau_k v v^H, v = (1, tail_k), tail_k = the n - k - 2 values at
// tails + k * ld_tails (the tridiagonal reduction's Q, the bidiagonal one's P). count <= n - 1.
// Blocked: orgqr (qr_internal.h) on the trailing (n-1) x (n-1) block.
template <class T>
void form_shifted_q(int64_t n, int64_t count, const T* tails, int64_t ld_tails, const T* tau, T* z);
// C (n x ncols row-major) := Q C for the same Q, without forming it (the blocked ormqr).
template <class T>
void apply_shifted_q(int64_t n, int64_t count, const T* tails, int64_t ld_tails, const T* tau,
                     int64_t ncols, T* c);

// Throws LinAlgError for the first batch element whose info is nonzero (the iteration did not
// converge), in PyTorch's words; `repeated` is "eigenvalues" or "singular values" (eigh.cpp).
void throw_if_not_converged(std::string_view op, int64_t batch_dims,
                            const std::vector<int32_t>& info, std::string_view repeated);

// ---- Jacobi rotations applied in cache-sized column blocks (rotations.cpp) -------------------

// A plane rotation of rows p and q of a columns-as-rows matrix:
//   row_p := c row_p - s row_q,   row_q := s row_p + c row_q   (c, s real).
template <class R>
using PlaneRotation = cpu::RowRotation<R>;

// The rows [0, rows) of z (ncols scalars of type T each, ld apart) while a QR iteration rotates
// them: held in column blocks of 512 bytes (block c: every row's columns [c, c + 1) * 512
// bytes, one row after another), so that a rotation of neighbouring rows p, q reads two runs
// that lie next to each other instead of two rows a page or more apart. apply() runs recorded
// rotations in order on every block (the blocks of a large batch split over the pool);
// finish() copies the rows back into z. Complex rows are rotated as 2 * ncols reals.
template <class T>
class RotatedRows {
 public:
  using R = real_t<T>;
  RotatedRows(T* z, int64_t rows, int64_t ncols, int64_t ld);
  void apply(const std::vector<PlaneRotation<R>>& rots);
  void finish();

 private:
  static constexpr int64_t kParts = kIsComplex<T> ? 2 : 1;
  static constexpr int64_t kChunk = 512 / static_cast<int64_t>(sizeof(R));
  R* block(int64_t c) { return blocks_.data() + c * rows_ * kChunk; }
  T* z_;
  int64_t rows_, total_, ld_;  // total_, ld_: in reals
  std::vector<R> blocks_;
};

// Real rows through the per-ISA level-1 kernels (spectral_small_kernels.h): the library's own
// code is compiled for the baseline ISA, where a dot product does not vectorize.
template <class R>
R dot_real(int64_t n, const R* x, const R* y) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  if constexpr (std::is_same_v<R, float>) {
    return k.dot_f32(n, x, y);
  } else {
    return k.dot_f64(n, x, y);
  }
}
// (x.x, y.y, x.y) of real rows in the Gram precision gram_t<R>: double for float rows, whose
// squares underflow to subnormals (and lose their precision) already at norms near 1e-19.
template <class R>
using gram_t = std::conditional_t<std::is_same_v<R, float>, double, R>;
template <class R>
void dot3_gram(int64_t n, const R* x, const R* y, gram_t<R>* out) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  if constexpr (std::is_same_v<R, float>) {
    k.dot3_f32_f64(n, x, y, out);
  } else {
    k.dot3_f64(n, x, y, out);
  }
}
template <class R>
void axpy_real(int64_t n, R a, const R* x, R* y) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  if constexpr (std::is_same_v<R, float>) {
    k.axpy_f32(n, a, x, y);
  } else {
    k.axpy_f64(n, a, x, y);
  }
}
// Returns x . v and does y += a x (n elements), reading x once.
template <class R>
R dot_axpy_real(int64_t n, const R* x, const R* v, R a, R* y) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  if constexpr (std::is_same_v<R, float>) {
    return k.dot_axpy_f32(n, x, v, a, y);
  } else {
    return k.dot_axpy_f64(n, x, v, a, y);
  }
}
// Rotations rots[0 .. count) in order on the rows (ncols reals each, ld apart) of z.
template <class R>
void rotate_rows_real(const cpu::RowRotation<R>* rots, int64_t count, R* z, int64_t ncols,
                      int64_t ld) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  if constexpr (std::is_same_v<R, float>) {
    k.rotate_f32(rots, count, z, ncols, ld);
  } else {
    k.rotate_f64(rots, count, z, ncols, ld);
  }
}
// One rotation of two real rows (row_p := c row_p - s row_q, row_q := s row_p + c row_q).
template <class R>
void rotate_rows_real(int64_t n, R* x, R* y, R c, R s) {
  // Rows x and y of a matrix whose "ld" is their distance: rotation (0, 1).
  const cpu::RowRotation<R> r{0, 1, c, s};
  rotate_rows_real(&r, 1, x, n, y - x);
}

// t = tan(theta) of the Jacobi rotation that diagonalizes [[a, g], [g, b]] (g != 0):
// sign(zeta) / (|zeta| + sqrt(1 + zeta^2)), zeta = (b - a) / (2 g); ~ 1 / (2 zeta) when zeta^2
// would overflow.
template <class R>
R jacobi_tangent(R a, R b, R g) {
  const R zeta = (b - a) / (2 * g);
  if (std::abs(zeta) > R(1e15)) return R(0.5) / zeta;
  return std::copysign(R(1), zeta) / (std::abs(zeta) + std::sqrt(1 + zeta * zeta));
}

// ---- eigh -------------------------------------------------------------------------------------

// Eigenvalues w[0 .. n) ascending of the Hermitian matrix a (n x n row-major, both triangles
// present, the diagonal's imaginary parts ignored); with vectors, v (n x n row-major) gets the
// eigenvectors as columns. `a` is scratch. Returns 0, or k > 0 when the iteration did not
// converge (then w and v are unspecified).
template <class T>
int64_t heev(int64_t n, T* a, real_t<T>* w, T* v);
template <class T>
int64_t heev_jacobi(int64_t n, T* a, real_t<T>* w, T* v);
template <class T>
int64_t heev_tridiagonal(int64_t n, T* a, real_t<T>* w, T* v);

// Receives a batch of plane rotations, in order, from an iteration that records them.
template <class R>
using RotationSink = std::function<void(const std::vector<PlaneRotation<R>>&)>;

// Implicit QL with Wilkinson shifts (tql2 / steqr) on the real symmetric tridiagonal matrix
// with diagonal d[0 .. n) and off-diagonal e[0 .. n-1) (e[n-1] is neither read nor written;
// e is scratch): d gets the eigenvalues, unsorted. The rotations of each sweep act on
// (columns i, i+1 of) the eigenvector matrix; they go to `sink` in batches when it is set.
// Returns 0, or l + 1 when value l did not converge in 30 iterations.
template <class R>
int64_t tridiagonal_ql(int64_t n, R* d, R* e, const RotationSink<R>& sink);

// The same matrix by Cuppen's divide and conquer (divide_conquer.cpp, LAPACK's stedc): d gets
// the eigenvalues ascending and z (n x n row-major) the eigenvectors as columns; e is scratch.
// Returns 0, or a value > 0 when a leaf's QL iteration did not converge.
template <class R>
int64_t stedc(int64_t n, R* d, R* e, R* z);

// The real upper bidiagonal n x n matrix B (diagonal d[0 .. n), superdiagonal e[0 .. n-1)) by
// divide and conquer (bidiagonal_dc.cpp, LAPACK's bdsdc): B = U diag(d) V^T with d ascending
// (>= 0), u and v n x n row-major; e is scratch. Returns 0, or a value > 0 when a leaf did not
// converge.
template <class R>
int64_t bdsdc(int64_t n, R* d, R* e, R* u, R* v);
// Leaves of bdsdc, and the largest n for which svd_bidiagonal_tall keeps its QR sweeps with
// vectors.
inline constexpr int64_t kBidiagonalLeafOrder = 32;

// ---- svd --------------------------------------------------------------------------------------

// A = U diag(s) V^H of the m x n matrix a (row-major, ld lda; read only), k = min(m, n):
// s[0 .. k) descending. With vectors (u and vh non-null): u is m x ucols (ucols = m when full,
// else k), vh is vrows x n (vrows = n when full, else k), both row-major. Returns 0 or k > 0 on
// non-convergence. Vectors are computed when either pointer is non-null (one may be null
// when its factor is empty).
template <class T>
int64_t gesvd(int64_t m, int64_t n, const T* a, int64_t lda, real_t<T>* s, T* u, T* vh, bool full);

// The two cores on a tall matrix (m >= n) in columns-as-rows form ac (n x m, ld m), which they
// overwrite: s[0 .. n) descending; with vectors, uc (ucount x m, ucount = n or m for full) gets
// U's columns as rows and vc (n x n) V's columns as rows.
template <class T>
int64_t svd_jacobi_tall(int64_t m, int64_t n, T* ac, real_t<T>* s, T* uc, int64_t ucount, T* vc);
template <class T>
int64_t svd_bidiagonal_tall(int64_t m, int64_t n, T* ac, real_t<T>* s, T* uc, int64_t ucount,
                            T* vc);

// Rows [k0, count) of uc (count x m) that are not orthonormal to rows [0, k0) (or to each
// other) are replaced by an orthonormal completion: each is orthogonalized twice against the
// rows before it (Gram-Schmidt) and, when little of it survives, replaced by the canonical
// vector that survives best. Rows [0, k0) must be orthonormal.
template <class T>
void complete_orthonormal(int64_t m, int64_t k0, int64_t count, T* uc);

// Sorts s[0 .. n) descending (ascending when `ascending`) and permutes the rows of each non-null
// columns-as-rows matrix (n rows of length len each) alike.
template <class R, class T>
void sort_with_rows(int64_t n, R* s, bool ascending, T* rows1, int64_t len1, T* rows2,
                    int64_t len2);

// ---- references (spectral_reference.cpp) -------------------------------------------------------

// Cyclic two-sided Jacobi on the full Hermitian matrix, std::complex arithmetic, no threshold:
// eigenvalues ascending, vectors as columns of v (n x n row-major) when non-null.
template <class T>
int64_t heev_reference(int64_t n, const T* a, real_t<T>* w, T* v);
// Cyclic one-sided Jacobi on the columns of a (m x n row-major, any m, n): singular values
// only, descending (min(m, n) of them).
template <class T>
int64_t svdvals_reference(int64_t m, int64_t n, const T* a, real_t<T>* s);

}  // namespace tessera::linalg::detail
