// Planning a reduction: which dims to reduce, the result shape, and the canonical layout the
// kernels run on (see src/ops/cpu/reduce_kernels.h).
//
// plan_reduction drops size-1 dims, orders the rest by input stride and coalesces neighbours
// that are adjacent in memory (and, for kept dims, in the output), then recognises
//   Rows: one reduced dim, contiguous (stride 1): every output reduces a contiguous run;
//   Cols: one reduced dim and the innermost kept dim contiguous: reduce across rows,
//         vectorised over output columns.
// Anything else (several reduced dims that do not merge, stride-0 reduced dims, ...) is
// copied once into a contiguous layout with the kept dims first and the reduced dims last,
// which is Rows. Full reductions of any dense tensor (transposed included) are Rows with a
// single row.
#pragma once

#include <string_view>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

// The dims to reduce as a mask over a.dim() dims. `dims` empty means all dims. Negative
// dims wrap; out-of-range dims are an IndexError and repeated dims a RuntimeError, both
// naming `op`. A 0-dim tensor accepts dims -1 and 0.
std::vector<bool> reduce_dim_mask(IntArrayRef dims, int64_t ndim, std::string_view op);
// Wraps one dim (0-dim tensors accept -1 and 0).
int64_t wrap_reduce_dim(int64_t dim, int64_t ndim, std::string_view op);
// The result sizes: reduced dims removed, or kept as 1 with keepdim.
DimVector reduced_sizes(IntArrayRef sizes, const std::vector<bool>& mask, bool keepdim);
// Product of the reduced sizes (the number of elements each output reduces).
int64_t reduced_count(IntArrayRef sizes, const std::vector<bool>& mask);

struct ReducePlan {
  enum class Layout { Rows, Cols };
  Layout layout = Layout::Rows;
  Tensor input;              // the data read: the caller's tensor or a contiguous permuted copy
  int64_t K = 1;             // reduced length
  int64_t k_stride = 1;      // element stride along the reduced dim (Rows: 1)
  int64_t N = 1;             // Cols: contiguous columns per batch; Rows: 1
  int64_t n_out_stride = 0;  // Cols: output stride of a column
  // The remaining kept dims, innermost (smallest input stride) first: the rows of a Rows
  // plan, the batches of a Cols plan. Strides in elements.
  DimVector batch_sizes, batch_in_strides, batch_out_strides;
  int64_t num_batches() const;
  // Input and output element offsets of batch b (row-major over batch dims, innermost fastest).
  void batch_offsets(int64_t b, int64_t& in_off, int64_t& out_off) const;
};

// `out_strides` are the output's strides (elements) in the keepdim shape; entries of reduced
// dims are ignored. allow_cols = false forces Rows (copying when needed). a.numel() > 0.
ReducePlan plan_reduction(const Tensor& a, const std::vector<bool>& mask, IntArrayRef out_strides,
                          bool allow_cols = true);

}  // namespace tessera
