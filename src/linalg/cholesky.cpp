// torch.linalg.cholesky / cholesky_ex, torch.cholesky_solve, torch.cholesky_inverse.
//
// The factor is computed as lower L on a contiguous copy (potrf_lower, cholesky_kernels.cpp);
// upper=true factors the adjoint of A (its upper triangle read as a lower one) and returns
// U = L^H. Solves run two triangular solves per matrix with L read in place through its own
// strides (trsm_left; a transpose is a swap of strides, the adjoint a swap plus conj).
#include <cmath>

#include "linalg/common.h"
#include "linalg/kernels.h"
#include "linalg/small_batch.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"

namespace tessera::linalg {

using namespace detail;

namespace {

// conj(t)^T over the last two dims (a view for real tensors, a copy for complex ones).
Tensor adjoint(const Tensor& t) {
  const Tensor tt = t.transpose(-2, -1);
  return t.is_complex() ? tt.conj() : tt;
}

// (L, info) for every matrix of A [*, n, n] (its lower triangle read): L contiguous, lower, strict
// upper triangle zeroed; info [*] int32. Batches of small real matrices run the lane-
// interleaved kernels (small/small_kernels.h), reading A once and writing L once; a matrix
// they report as failing is factored again by potrf_lower for its partial factor.
std::tuple<Tensor, Tensor> factor_lower(const Tensor& A, std::string_view op) {
  const int64_t n = A.size(-1);
  const DimVector batch_dims = batch_shape(A);
  const int64_t batch = numel_of(batch_dims);
  Tensor info = zeros(batch_dims, kInt32);
  int32_t* ip = info.data_ptr<int32_t>();
  Tensor L;
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    auto zero_upper = [n](T* a) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i + 1; j < n; ++j) a[i * n + j] = T(0);
    };
    if (use_small_kernels<T>(n, batch)) {
      const Tensor in = A.contiguous();
      L = empty(A.sizes(), A.dtype());
      const T* src = static_cast<const T*>(in.data_ptr());
      T* dst = static_cast<T*>(L.data_ptr());
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_potrf(n, count, src + b0 * n * n, dst + b0 * n * n, ip + b0);
      });
      for (int64_t b = 0; b < batch; ++b) {
        if (ip[b] == 0) continue;
        ip[b] = static_cast<int32_t>(potrf_lower(n, dst + b * n * n, n));
        zero_upper(dst + b * n * n);
      }
      return;
    }
    L = contiguous_matrices(A, batch_dims);
    T* base = static_cast<T*>(L.data_ptr());
    for_each_matrix(batch, n, [&](int64_t b) {
      ip[b] = static_cast<int32_t>(potrf_lower(n, base + b * n * n, n));
      zero_upper(base + b * n * n);
    });
  });
  return {L, info};
}

std::tuple<Tensor, Tensor> cholesky_impl(const Tensor& A, bool upper, std::string_view op) {
  check_no_grad(op, {A});
  check_square_input(op, A, "A");
  auto [L, info] = factor_lower(upper ? adjoint(A) : A, op);
  if (upper) L = adjoint(L).contiguous();
  return {L, info};
}

// X := A^{-1} X for A = L L^H (or U^H U when upper), X contiguous [batch, n, k], L [*, n, n]
// broadcast over X's batch (any strides). Batches of small real systems whose lower factors are
// plain (contiguous, one per system) run the lane-interleaved potrs (small/small_kernels.h).
void cholesky_solve_in_place(const Tensor& X, const Tensor& L, bool upper, std::string_view op) {
  const int64_t n = X.size(-2), k = X.size(-1);
  const int64_t batch = numel_of(batch_shape(X));
  const Tensor Lx = L.expand(concat(batch_shape(X), {n, n}));
  const int64_t rs = L.stride(-2), cs = L.stride(-1);
  visit_linalg_dtype(X.dtype(), op, [&]<class T>() {
    const T* lbase = static_cast<const T*>(Lx.data_ptr());
    T* xbase = static_cast<T*>(X.data_ptr());
    if (!upper && use_small_kernels<T>(n, batch) && plain_matrices(L, batch)) {
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_potrs(n, k, count, lbase + b0 * n * n, xbase + b0 * n * k);
      });
      return;
    }
    const std::vector<int64_t> off = matrix_offsets(Lx);
    for_each_matrix(batch, n, [&](int64_t b) {
      const T* l = lbase + off[b];
      T* x = xbase + b * n * k;
      if (!upper) {  // L Y = B, then L^H X = Y
        trsm_left(n, k, l, rs, cs, true, false, false, x, k, 1);
        trsm_left(n, k, l, cs, rs, false, true, false, x, k, 1);
      } else {  // U^H Y = B, then U X = Y
        trsm_left(n, k, l, cs, rs, true, true, false, x, k, 1);
        trsm_left(n, k, l, rs, cs, false, false, false, x, k, 1);
      }
    });
  });
}

}  // namespace

Tensor cholesky(const Tensor& A, bool upper) {
  constexpr std::string_view op = "linalg.cholesky";
  auto [L, info] = cholesky_impl(A, upper, op);
  const int64_t bad = first_failure(info);
  if (bad >= 0)
    throw LinAlgError(
        fmt::format("{}(): {}The factorization could not be completed because the input is not "
                    "positive-definite (the leading minor of order {} is not positive-definite).",
                    op, batch_prefix(A.dim() - 2, bad), info.data_ptr<int32_t>()[bad]));
  return L;
}

std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& A, bool upper) {
  return cholesky_impl(A, upper, "linalg.cholesky_ex");
}

Tensor cholesky_solve(const Tensor& B, const Tensor& L, bool upper) {
  constexpr std::string_view op = "cholesky_solve";
  check_no_grad(op, {B, L});
  check_matrix_input(op, B, "input");
  check_square_input(op, L, "input2");
  check_same_dtype(op, B, "input", L, "input2");
  TS_CHECK(B.size(-2) == L.size(-1), RuntimeError,
           "{}(): incompatible matrix sizes: each A matrix is {} by {} but each b matrix is {} by "
           "{}",
           op, L.size(-1), L.size(-1), B.size(-2), B.size(-1));
  const DimVector batch = broadcast_batch(op, batch_shape(B), batch_shape(L));
  Tensor X = contiguous_matrices(B, batch);
  if (X.numel() > 0) cholesky_solve_in_place(X, L, upper, op);
  return X;
}

Tensor cholesky_inverse(const Tensor& L, bool upper) {
  constexpr std::string_view op = "cholesky_inverse";
  check_no_grad(op, {L});
  check_square_input(op, L, "input");
  const int64_t n = L.size(-1);
  const DimVector batch = batch_shape(L);
  // A zero on L's diagonal makes A singular: LAPACK's potri reports it as info.
  const Tensor diag = L.diagonal(0, -2, -1).eq(0);
  const Tensor any_zero = diag.numel() > 0 ? diag.any(-1) : zeros(batch, kBool);
  const Tensor flat = any_zero.reshape({-1}).contiguous();
  for (int64_t b = 0; b < flat.numel(); ++b) {
    if (!flat.data_ptr<bool>()[b]) continue;
    const Tensor d = diag.reshape({-1, n}).select(0, b).contiguous();
    int64_t first = 0;
    while (!d.data_ptr<bool>()[first]) ++first;
    throw LinAlgError(fmt::format(
        "{}(): {}The diagonal element {} is zero, the inversion could not be completed because "
        "the input matrix is singular.",
        op, batch_prefix(L.dim() - 2, b), first + 1));
  }
  Tensor X = contiguous_matrices(eye(n, n, L.dtype()), batch);
  if (X.numel() > 0) cholesky_solve_in_place(X, L, upper, op);
  return X;
}

}  // namespace tessera::linalg
