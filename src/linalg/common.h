// Plumbing shared by the linalg ops: argument checks with PyTorch's wording, batch shapes and
// broadcasting, per-matrix offsets, the batch loop over Tessera's pool, and the errors raised
// from `info`.
//
// Op names are torch's ("linalg.cholesky", "cholesky_solve"); messages follow Tessera's form
// "<op>(): argument '<name>' expected <what>, but got <value>".
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "core/dtype_dispatch.h"
#include "tessera/core/tensor.h"
#include "tessera/linalg/linalg.h"

namespace tessera::linalg::detail {

inline constexpr DtypeMask kLinalgTypes =
    dtype_bit(kFloat32) | dtype_bit(kFloat64) | dtype_bit(kComplex64) | dtype_bit(kComplex128);

// Calls fn.template operator()<T>() with T = float, double, complex64 or complex128.
template <class Fn>
decltype(auto) visit_linalg_dtype(ScalarType t, std::string_view op, Fn&& fn) {
  return visit_dtype<kLinalgTypes>(t, op, std::forward<Fn>(fn));
}

// Throws (autograd::check_no_grad_needed) when an input requires grad: linalg has no backward
// yet, and a result without history would drop gradients silently.
void check_no_grad(std::string_view op, std::initializer_list<Tensor> inputs);

// conj(t)^T over the last two dims.
inline Tensor adjoint_of(const Tensor& t) {
  return t.conj().transpose(-2, -1);
}

// A has at least 2 dims and a linalg dtype.
void check_matrix_input(std::string_view op, const Tensor& A, std::string_view name);
// ... and its matrices are square.
void check_square_input(std::string_view op, const Tensor& A, std::string_view name);
void check_same_dtype(std::string_view op, const Tensor& A, std::string_view a_name,
                      const Tensor& B, std::string_view b_name);

// The leading (batch) dims of a tensor whose last `matrix_dims` dims are the matrix.
DimVector batch_shape(const Tensor& t, int64_t matrix_dims = 2);
int64_t numel_of(IntArrayRef shape);
// The broadcast of two batch shapes (RuntimeError naming op and both shapes).
DimVector broadcast_batch(std::string_view op, IntArrayRef a, IntArrayRef b);
DimVector concat(IntArrayRef a, IntArrayRef b);

// A new contiguous tensor of shape batch + t's last two dims holding t broadcast over batch.
Tensor contiguous_matrices(const Tensor& t, IntArrayRef batch);
// Element offsets of each matrix of t (last two dims), batch in row-major order over t's
// leading dims; expanded (stride-0) batch dims repeat an offset.
std::vector<int64_t> matrix_offsets(const Tensor& t);

// Runs fn(b) for every b in [0, batch): over Tessera's pool one matrix per task when there are
// several matrices and they are small (or at least as many as threads), else serially so that
// each matrix's GEMMs use the threads. `n` is the matrix order (cost hint).
void for_each_matrix(int64_t batch, int64_t n, const std::function<void(int64_t)>& fn);

// The "(Batch element 3): " prefix PyTorch puts on errors about batched input ("" when the
// input has no batch dims).
std::string batch_prefix(int64_t batch_dims, int64_t index);

// The first b with info[b] != 0, or -1.
int64_t first_failure(const Tensor& info);

}  // namespace tessera::linalg::detail
