// Joining, splitting and indexing.
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, IntArrayRef split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value);
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);
// a[indices] = values for a tuple of index tensors (undefined entries mean ":"); with
// accumulate, repeated indices add up.
const Tensor& index_put_(const Tensor& a, const std::vector<std::optional<Tensor>>& indices,
                         const Tensor& values, bool accumulate = false);
Tensor index_put(const Tensor& a, const std::vector<std::optional<Tensor>>& indices,
                 const Tensor& values, bool accumulate = false);
// a[indices] for a tuple of index tensors (advanced indexing).
Tensor index(const Tensor& a, const std::vector<std::optional<Tensor>>& indices);
Tensor masked_select(const Tensor& a, const Tensor& mask);
Tensor nonzero(const Tensor& a);  // [n, ndim] int64
std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim = -1, bool descending = false,
                                bool stable = true);
Tensor argsort(const Tensor& a, int64_t dim = -1, bool descending = false, bool stable = true);
// Sorted unique values; optionally the inverse indices and counts.
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& a, bool sorted = true,
                                          bool return_inverse = false, bool return_counts = false,
                                          std::optional<int64_t> dim = std::nullopt);
Tensor tril(const Tensor& a, int64_t diagonal = 0);
Tensor triu(const Tensor& a, int64_t diagonal = 0);
// int64 indices -> [.., num_classes] int64 (num_classes -1: max + 1).
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
// Rows of weight [num_embeddings, dim] picked by indices of any shape -> [..., dim].
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace tessera
