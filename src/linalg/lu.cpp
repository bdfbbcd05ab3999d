// torch.linalg.lu_factor / lu_factor_ex / lu_solve / lu, torch.lu_unpack.
//
// Factorization: getrf (lu_kernels.cpp) on a contiguous copy, one matrix per task. Solves
// follow LAPACK's getrs with strided views instead of transposed copies. With A = P L U:
//   A X = B      X = U^{-1} L^{-1} P^T B        (row swaps forward, then L, then U)
//   A^H X = B    X = P L^{-H} U^{-H} B          (U^H, then L^H, then row swaps backward)
// and the right-hand forms X A = B are solved as A^T X^T = B^T (X A^H = B as conj(A) X^T =
// B^T): X^T is X with its strides swapped, A^T is LU with its strides swapped.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "linalg/common.h"
#include "linalg/kernels.h"
#include "linalg/lu_internal.h"
#include "linalg/small_batch.h"
#include "tessera/ops/factory.h"

namespace tessera::linalg {

using namespace detail;

namespace {

// Applies the interchanges ipiv[0 .. n) (1-based) to the rows of Y (n x nrhs, strides y_rs,
// y_cs), in order or in reverse.
template <class T>
void apply_pivots(T* y, int64_t y_rs, int64_t y_cs, int64_t n, int64_t nrhs, const int32_t* ipiv,
                  bool reverse) {
  for (int64_t s = 0; s < n; ++s) {
    const int64_t k = reverse ? n - 1 - s : s;
    const int64_t p = ipiv[k] - 1;
    if (p == k) continue;
    for (int64_t j = 0; j < nrhs; ++j) std::swap(y[k * y_rs + j * y_cs], y[p * y_rs + j * y_cs]);
  }
}

// Every pivot in [1, rows] (else lu_solve / lu_unpack would index out of bounds).
void check_pivot_values(std::string_view op, const Tensor& pivots, int64_t rows) {
  const Tensor p = pivots.contiguous();
  const int32_t* v = p.data_ptr<int32_t>();
  const int64_t count = p.numel();
  // One vectorisable pass over the common case; the index is found only on failure. (A running
  // min and max made each step wait on a four-instruction SSE2 select: 16% of lu_solve on a batch
  // of 10,000 4 x 4 systems; the or of two compares waits on one.)
  const int32_t hi = static_cast<int32_t>(std::min<int64_t>(rows, INT32_MAX));
  int32_t bad = 0;
  for (int64_t i = 0; i < count; ++i) bad |= static_cast<int32_t>(v[i] < 1) | (v[i] > hi);
  if (bad == 0) return;
  for (int64_t i = 0; i < count; ++i) {
    TS_CHECK(v[i] >= 1 && v[i] <= rows, RuntimeError,
             "{}(): argument 'pivots' expected values in [1, {}] (the result of lu_factor), but "
             "got {} at index {}",
             op, rows, v[i], i);
  }
}

void check_pivots(std::string_view op, const Tensor& LU, const Tensor& pivots) {
  TS_CHECK(pivots.defined() && pivots.dtype() == kInt32, TypeError,
           "{}(): argument 'pivots' expected an int32 tensor, but got {}", op,
           pivots.defined() ? fmt::format("{}", pivots.dtype()) : std::string("undefined"));
  const int64_t k = std::min(LU.size(-2), LU.size(-1));
  TS_CHECK(pivots.dim() == LU.dim() - 1 && batch_shape(pivots, 1) == batch_shape(LU) &&
               pivots.size(-1) == k,
           RuntimeError, "{}(): argument 'pivots' expected shape {}, but got {}", op,
           concat(batch_shape(LU), {k}), pivots.sizes());
}

// lu_factor, lu_factor_ex and lu take A [*, m, n] and pivot (only true: PyTorch's CPU LU always
// pivots).
void check_lu_input(std::string_view op, const Tensor& A, bool pivot) {
  check_no_grad(op, {A});
  check_matrix_input(op, A, "A");
  TS_CHECK(pivot, NotImplementedError,
           "{}(): argument 'pivot' expected true: LU without pivoting is not implemented on the "
           "CPU (as in PyTorch), but got false",
           op);
}

}  // namespace

namespace detail {

std::tuple<Tensor, Tensor, Tensor> lu_factor_work(const Tensor& A, std::string_view op) {
  const DimVector batch_dims = batch_shape(A);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  Tensor LU;
  Tensor pivots = empty(concat(batch_dims, {k}), kInt32);
  Tensor info = zeros(batch_dims, kInt32);
  const int64_t batch = numel_of(batch_dims);
  int32_t* pp = pivots.data_ptr<int32_t>();
  int32_t* ip = info.data_ptr<int32_t>();
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    if (m == n && use_small_kernels<T>(n, batch)) {
      // Lane-interleaved kernels: A read once, LU written once.
      const Tensor in = A.contiguous();
      LU = empty(A.sizes(), A.dtype());
      const T* src = static_cast<const T*>(in.data_ptr());
      T* dst = static_cast<T*>(LU.data_ptr());
      const bool stream = streams_factors<T>(n, batch);
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_getrf(n, count, src + b0 * n * n, dst + b0 * n * n, pp + b0 * n, ip + b0,
                    small_kernels(), stream);
      });
      return;
    }
    LU = contiguous_matrices(A, batch_dims);
    T* base = static_cast<T*>(LU.data_ptr());
    for_each_matrix(batch, k, [&](int64_t b) {
      ip[b] = static_cast<int32_t>(getrf(m, n, base + b * m * n, n, pp + b * k));
    });
  });
  return {LU, pivots, info};
}

void lu_solve_in_place(const Tensor& X, const Tensor& LU, const Tensor& pivots, bool left,
                       bool adjoint, std::string_view op) {
  const int64_t n = LU.size(-1);
  const DimVector batch_dims = batch_shape(X);
  const int64_t batch = numel_of(batch_dims);
  const int64_t nrhs = left ? X.size(-1) : X.size(-2);
  if (batch == 0 || n == 0 || nrhs == 0) return;
  const Tensor LUx = LU.expand(concat(batch_dims, {n, n}));
  const Tensor piv = contiguous_matrices(pivots.unsqueeze(-1), batch_dims);  // [batch, n, 1]
  // Y: the n x nrhs system of the left form (X itself, or X^T for the right form).
  const int64_t y_rs = left ? nrhs : 1, y_cs = left ? 1 : n;
  // The no-transpose solves (A, or conj(A) for right + adjoint) vs. the transposed ones.
  const bool transposed = left == adjoint;
  const bool conj = adjoint;
  const int64_t rs = LU.stride(-2), cs = LU.stride(-1);
  visit_linalg_dtype(X.dtype(), op, [&]<class T>() {
    const T* lu_base = static_cast<const T*>(LUx.data_ptr());
    T* x_base = static_cast<T*>(X.data_ptr());
    const int32_t* piv_base = piv.data_ptr<int32_t>();
    if (left && !adjoint && use_small_kernels<T>(n, batch) && plain_matrices(LU, batch)) {
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_getrs(n, nrhs, count, lu_base + b0 * n * n, piv_base + b0 * n,
                    x_base + b0 * n * nrhs);
      });
      return;
    }
    const std::vector<int64_t> off = matrix_offsets(LUx);
    for_each_matrix(batch, n, [&](int64_t b) {
      const T* a = lu_base + off[b];
      T* y = x_base + b * n * nrhs;
      const int32_t* ipiv = piv_base + b * n;
      if (!transposed) {
        apply_pivots(y, y_rs, y_cs, n, nrhs, ipiv, false);
        trsm_left(n, nrhs, a, rs, cs, true, conj, true, y, y_rs, y_cs);
        trsm_left(n, nrhs, a, rs, cs, false, conj, false, y, y_rs, y_cs);
      } else {
        trsm_left(n, nrhs, a, cs, rs, true, conj, false, y, y_rs, y_cs);
        trsm_left(n, nrhs, a, cs, rs, false, conj, true, y, y_rs, y_cs);
        apply_pivots(y, y_rs, y_cs, n, nrhs, ipiv, true);
      }
    });
  });
}

Tensor lu_factor_and_solve(const Tensor& A, const Tensor& X, bool left, std::string_view op,
                           bool x_identity) {
  const DimVector batch_dims = batch_shape(X);
  const int64_t batch = numel_of(batch_dims), n = A.size(-1), k = X.size(-1);
  Tensor info;
  if (left && n > 0 && k > 0 && std::ranges::equal(batch_shape(A), batch_dims)) {
    visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
      if (!use_small_kernels<T>(n, batch)) return;
      const Tensor in = A.contiguous();
      info = zeros(batch_dims, kInt32);
      const T* a = static_cast<const T*>(in.data_ptr());
      T* x = static_cast<T*>(X.data_ptr());
      int32_t* ip = info.data_ptr<int32_t>();
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_gesv(n, k, count, a + b0 * n * n, x + b0 * n * k, ip + b0, small_kernels(),
                   x_identity);
      });
    });
    if (info.defined()) return info;
  }
  if (x_identity) X.copy_(eye(n, n, X.dtype()).expand(X.sizes()));
  Tensor LU, pivots;
  std::tie(LU, pivots, info) = lu_factor_work(A, op);
  lu_solve_in_place(X, LU, pivots, left, false, op);
  return info;
}

}  // namespace detail

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& A, bool pivot) {
  constexpr std::string_view op = "linalg.lu_factor_ex";
  check_lu_input(op, A, pivot);
  return lu_factor_work(A, op);
}

std::tuple<Tensor, Tensor> lu_factor(const Tensor& A, bool pivot) {
  constexpr std::string_view op = "linalg.lu_factor";
  check_lu_input(op, A, pivot);
  auto [LU, pivots, info] = lu_factor_work(A, op);
  const int64_t bad = first_failure(info);
  if (bad >= 0) {
    const int32_t i = info.data_ptr<int32_t>()[bad];
    throw LinAlgError(fmt::format(
        "{}(): {}U[{},{}] is zero and using it on lu_solve would result in a division by zero. "
        "If you still want to perform the factorization, consider calling linalg.lu(A, pivot) "
        "or linalg.lu_factor_ex(A, pivot)",
        op, batch_prefix(A.dim() - 2, bad), i, i));
  }
  return {LU, pivots};
}

Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  constexpr std::string_view op = "linalg.lu_solve";
  check_no_grad(op, {LU, B});
  check_square_input(op, LU, "LU");
  check_matrix_input(op, B, "B");
  check_same_dtype(op, LU, "LU", B, "B");
  check_pivots(op, LU, pivots);
  const int64_t n = LU.size(-1);
  TS_CHECK((left ? B.size(-2) : B.size(-1)) == n, RuntimeError,
           "{}(): incompatible shapes of A and B for the equation {} ({}x{} and {}x{})", op,
           left ? "AX = B" : "XA = B", n, n, B.size(-2), B.size(-1));
  check_pivot_values(op, pivots, n);
  const DimVector batch = broadcast_batch(op, batch_shape(LU), batch_shape(B));
  Tensor X = contiguous_matrices(B, batch);
  lu_solve_in_place(X, LU, pivots, left, adjoint, op);
  return X;
}

std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& LU, const Tensor& pivots,
                                             bool unpack_data, bool unpack_pivots) {
  constexpr std::string_view op = "lu_unpack";
  check_no_grad(op, {LU});
  check_matrix_input(op, LU, "LU_data");
  check_pivots(op, LU, pivots);
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  Tensor P = empty({0}, LU.dtype()), L = empty({0}, LU.dtype()), U = empty({0}, LU.dtype());
  if (unpack_data) {
    L = LU.narrow(-1, 0, k).tril(-1);
    L.diagonal(0, -2, -1).fill_(1);
    U = LU.narrow(-2, 0, k).triu();
  }
  if (unpack_pivots) {
    check_pivot_values(op, pivots, m);
    const DimVector batch_dims = batch_shape(LU);
    P = zeros(concat(batch_dims, {m, m}), LU.dtype());
    const Tensor piv = pivots.contiguous();
    const int32_t* pp = piv.data_ptr<int32_t>();
    std::vector<int64_t> perm(static_cast<size_t>(m));
    visit_linalg_dtype(LU.dtype(), op, [&]<class T>() {
      T* pbase = static_cast<T*>(P.data_ptr());
      for (int64_t b = 0; b < numel_of(batch_dims); ++b) {
        // Row i of P A is row perm[i] of A, so A = P L U with P[perm[i], i] = 1.
        std::iota(perm.begin(), perm.end(), int64_t{0});
        for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[pp[b * k + i] - 1]);
        for (int64_t i = 0; i < m; ++i) pbase[b * m * m + perm[i] * m + i] = T(1);
      }
    });
  }
  return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& A, bool pivot) {
  constexpr std::string_view op = "linalg.lu";
  check_lu_input(op, A, pivot);
  auto [LU, pivots, info] = lu_factor_work(A, op);
  return lu_unpack(LU, pivots, true, true);
}

}  // namespace tessera::linalg
