// The LU pieces that lu.cpp shares with solve.cpp (solve, inv, det, slogdet).
#pragma once

#include <string_view>
#include <tuple>

#include "tessera/core/tensor.h"

namespace tessera::linalg::detail {

// getrf on a contiguous copy of A [*, m, n] (validated by the caller): (LU [*, m, n], pivots
// [*, min(m, n)] int32, info [*] int32).
std::tuple<Tensor, Tensor, Tensor> lu_factor_work(const Tensor& A, std::string_view op);

// X := op(A)^{-1} X (left) or X op(A)^{-1} (right) in place, op(A) = A or A^H (adjoint), for
// A = P L U given by (LU, pivots) of square matrices (any strides) broadcast over X's batch;
// X contiguous [batch, n, k] (left) or [batch, k, n] (right). Pivots must be valid. Batches of
// small real left solves with plain factors (contiguous, one per system) run the lane-
// interleaved getrs (small/small_kernels.h).
void lu_solve_in_place(const Tensor& X, const Tensor& LU, const Tensor& pivots, bool left,
                       bool adjoint, std::string_view op);

// X := A^{-1} X (left) or X A^{-1} in place for square A (validated) broadcast over X's batch
// (X as for lu_solve_in_place, B on entry): lu_factor_work then lu_solve_in_place, except for
// batches of small real left systems with one matrix of A per system, where getrf and getrs run
// on each group of lanes in one pass and the factors are never written (small/small_kernels.h,
// gesv; the same bits). Returns getrf's info (A's batch shape); X holds inf / NaN where it is
// nonzero. With x_identity (inv) X's contents are not read: B is the identity (the lane kernels
// write it already interchanged; elsewhere X is filled with it first).
Tensor lu_factor_and_solve(const Tensor& A, const Tensor& X, bool left, std::string_view op,
                           bool x_identity = false);

}  // namespace tessera::linalg::detail
