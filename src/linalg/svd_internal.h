// The SVD and eigh entry points that other linalg ops build on (pinv, matrix_rank, matrix_norm,
// cond here; lstsq's gelsd/gelss drivers).
//
// Both take validated input (a linalg dtype, >= 2 dims; square for eigh) and return new
// contiguous tensors; NaN/Inf in the input and non-convergence throw LinAlgError naming `op`
// and the batch element. Per-matrix kernels on raw row-major buffers: gesvd / heev in
// spectral.h.
#pragma once

#include <string_view>
#include <tuple>

#include "tessera/core/tensor.h"

namespace tessera::linalg::detail {

// (U, S, Vh) of every matrix of A [*, m, n] as linalg.svd; with compute_uv false U and Vh are
// undefined tensors (only S is computed: the cheaper path).
std::tuple<Tensor, Tensor, Tensor> svd_work(const Tensor& A, bool full_matrices, bool compute_uv,
                                            std::string_view op);

// (eigenvalues, eigenvectors or undefined) of every matrix of A [*, n, n], reading the lower
// triangle when `lower`, else the upper one.
std::tuple<Tensor, Tensor> eigh_work(const Tensor& A, bool lower, bool compute_v,
                                     std::string_view op);

}  // namespace tessera::linalg::detail
