// Plain reference versions of the indexing and sorting ops, for tests only. Each converts its
// inputs to contiguous float64 / int64 buffers and runs the definition as nested loops over
// multi-indices: slow and obviously correct. Results come back in the input's dtype (indices
// int64). Complex dtypes are not supported here.
#pragma once

#include <cstdint>
#include <tuple>

#include "tessera/core/tensor.h"

namespace tessera::reference {

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
// Accumulates in float64 and rounds once at the end.
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
// source must have a's shape with `dim` of size index.numel() (no broadcasting).
Tensor index_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha = 1.0);
// a[i0, i1, ..., ik-1] for k index tensors of one common shape B indexing the leading k dims:
// result B + a.shape[k:]. With values (shape B + a.shape[k:]), index_put instead.
Tensor index_leading(const Tensor& a, const std::vector<Tensor>& indices);
Tensor index_put_leading(const Tensor& a, const std::vector<Tensor>& indices, const Tensor& values,
                         bool accumulate);
// Stable sort by counting: the rank of element i is the number of elements before it in the
// order (smaller, or equal with a lower index). NaN is larger than everything; -0.0 == 0.0.
std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending);
// The first k of the stable sort (descending when largest).
std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest);
// Elementwise: keep a[.., i, j] when j - i <= diagonal (lower) or >= diagonal (upper).
Tensor triangle(const Tensor& a, int64_t diagonal, bool lower);

}  // namespace tessera::reference
