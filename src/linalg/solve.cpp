// torch.linalg.solve / inv / inv_ex / det / slogdet, all from one LU factorization per matrix
// (lu_internal.h): solve runs getrs on B, inv getri (or getrs on the identity for n <= 32), det
// multiplies U's diagonal, slogdet sums log |U(i, i)| and multiplies the unit phases, each with the
// sign of the row permutation. Batches of small real systems (solve's left form with one matrix
// per system, inv for n <= 32) factor and solve each group of matrices in one pass.
#include <cmath>
#include <limits>

#include "linalg/common.h"
#include "linalg/kernels.h"
#include "linalg/lu_internal.h"
#include "tessera/ops/factory.h"

namespace tessera::linalg {

using namespace detail;

namespace {

// The inverse of every matrix of square A and info (from getrf; the values are inf/nan where
// info > 0). Batches of small matrices solve on the identity (the lane kernels take small real
// batches); larger ones run getri (U^{-1} L^{-1} P, two thirds of a solve's flops).
std::tuple<Tensor, Tensor> inv_impl(const Tensor& A, std::string_view op) {
  constexpr int64_t kSolveMax = 32;
  check_no_grad(op, {A});
  check_square_input(op, A, "A");
  const int64_t n = A.size(-1);
  if (n <= kSolveMax) {
    // The identity as right-hand sides: the lane kernels write it already interchanged, so X
    // starts empty (it is filled with the identity where they do not run).
    Tensor X = empty(A.sizes(), A.dtype());
    Tensor info = lu_factor_and_solve(A, X, /*left=*/true, op, /*x_identity=*/true);
    return {X, info};
  }
  auto [LU, pivots, info] = lu_factor_work(A, op);
  Tensor X = empty(A.sizes(), A.dtype());
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    const T* lu = static_cast<const T*>(LU.data_ptr());
    const int32_t* piv = pivots.data_ptr<int32_t>();
    T* x = static_cast<T*>(X.data_ptr());
    for_each_matrix(numel_of(batch_shape(A)), n,
                    [&](int64_t b) { getri(n, lu + b * n * n, piv + b * n, x + b * n * n); });
  });
  return {X, info};
}

// Calls fn(b, u, ipiv) with the LU factor (row-major n x n) and pivots of every matrix of A.
template <class T, class Fn>
void for_each_lu(const Tensor& LU, const Tensor& pivots, Fn&& fn) {
  const int64_t n = LU.size(-1);
  const int64_t batch = numel_of(batch_shape(LU));
  const T* base = static_cast<const T*>(LU.data_ptr());
  const int32_t* piv = pivots.data_ptr<int32_t>();
  for (int64_t b = 0; b < batch; ++b) fn(b, base + b * n * n, piv + b * n);
}

}  // namespace

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  constexpr std::string_view op = "linalg.solve";
  check_no_grad(op, {A, B});
  check_square_input(op, A, "A");
  TS_CHECK(B.defined() && B.dim() >= 1, RuntimeError,
           "{}(): argument 'B' expected a tensor with at least 1 dimension, but got {}", op,
           B.defined() ? fmt::format("{} dims", B.dim()) : std::string("undefined"));
  check_same_dtype(op, A, "A", B, "B");
  // torch.linalg.solve's rule: B is a (batch of) vector(s) when it is 1-D or has A's shape
  // without the last dim.
  const DimVector a_rows(A.sizes().begin(), A.sizes().end() - 1);
  const bool vector_case = B.dim() == 1 || (B.dim() == A.dim() - 1 && B.sizes().vec() == a_rows);
  const Tensor Bm = vector_case ? B.unsqueeze(left ? -1 : -2) : B;
  const int64_t n = A.size(-1);
  TS_CHECK((left ? Bm.size(-2) : Bm.size(-1)) == n, RuntimeError,
           "{}(): incompatible shapes of A and B for the equation {} ({}x{} and {}x{})", op,
           left ? "AX = B" : "XA = B", n, n, Bm.size(-2), Bm.size(-1));
  const DimVector batch = broadcast_batch(op, batch_shape(A), batch_shape(Bm));
  Tensor X = contiguous_matrices(Bm, batch);
  const int64_t bad = first_failure(lu_factor_and_solve(A, X, left, op));
  if (bad >= 0)
    throw LinAlgError(fmt::format("{}(): {}The solver failed because the input matrix is singular.",
                                  op, batch_prefix(A.dim() - 2, bad)));
  return vector_case ? X.squeeze(left ? -1 : -2) : X;
}

std::tuple<Tensor, Tensor> inv_ex(const Tensor& A) {
  return inv_impl(A, "linalg.inv_ex");
}

Tensor inv(const Tensor& A) {
  constexpr std::string_view op = "linalg.inv";
  auto [X, info] = inv_impl(A, op);
  const int64_t bad = first_failure(info);
  if (bad >= 0)
    throw LinAlgError(fmt::format(
        "{}(): {}The diagonal element {} is zero, the inversion could not be completed because "
        "the input matrix is singular.",
        op, batch_prefix(A.dim() - 2, bad), info.data_ptr<int32_t>()[bad]));
  return X;
}

Tensor det(const Tensor& A) {
  constexpr std::string_view op = "linalg.det";
  check_no_grad(op, {A});
  check_square_input(op, A, "A");
  auto [LU, pivots, info] = lu_factor_work(A, op);
  Tensor out = empty(batch_shape(A), A.dtype());
  const int64_t n = A.size(-1);
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    for_each_lu<T>(LU, pivots, [&](int64_t b, const T* u, const int32_t* ipiv) {
      T d(1);
      for (int64_t i = 0; i < n; ++i) {
        d *= u[i * n + i];
        if (ipiv[i] != i + 1) d = -d;
      }
      o[b] = d;
    });
  });
  return out;
}

std::tuple<Tensor, Tensor> slogdet(const Tensor& A) {
  constexpr std::string_view op = "linalg.slogdet";
  check_no_grad(op, {A});
  check_square_input(op, A, "A");
  auto [LU, pivots, info] = lu_factor_work(A, op);
  Tensor sign = empty(batch_shape(A), A.dtype());
  Tensor logabs = empty(batch_shape(A), to_real_type(A.dtype()));
  const int64_t n = A.size(-1);
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    using R = real_t<T>;
    T* s = static_cast<T*>(sign.data_ptr());
    R* l = static_cast<R*>(logabs.data_ptr());
    for_each_lu<T>(LU, pivots, [&](int64_t b, const T* u, const int32_t* ipiv) {
      T sg(1);
      R la(0);
      for (int64_t i = 0; i < n; ++i) {
        const T uii = u[i * n + i];
        const R mag = std::abs(uii);
        if (ipiv[i] != i + 1) sg = -sg;
        if (mag == R(0)) {  // singular: sign 0, log|det| = -inf (PyTorch)
          sg = T(0), la = -std::numeric_limits<R>::infinity();
          break;
        }
        sg *= uii / mag;
        la += std::log(mag);
      }
      s[b] = sg, l[b] = la;
    });
  });
  return {sign, logabs};
}

}  // namespace tessera::linalg
