// Factories: tensors made from sizes, values, ranges and caller memory.
#pragma once

#include <functional>

#include "tessera/core/tensor.h"

namespace tessera {

Tensor empty(IntArrayRef size, TensorOptions options = {});
Tensor empty_strided(IntArrayRef size, IntArrayRef stride, TensorOptions options = {});
Tensor zeros(IntArrayRef size, TensorOptions options = {});
Tensor ones(IntArrayRef size, TensorOptions options = {});
// dtype defaults to the value's: int64 for integers, the default float dtype for floats.
Tensor full(IntArrayRef size, const Scalar& fill_value, TensorOptions options = {});
Tensor empty_like(const Tensor& t, std::optional<ScalarType> dtype = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<ScalarType> dtype = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<ScalarType> dtype = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& fill_value,
                 std::optional<ScalarType> dtype = std::nullopt);
// [start, end) in steps of step; int64 when all three are integers, else the default float.
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              TensorOptions options = {});
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions options = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions options = {});
// A 0-dim tensor holding value (dtype from the value unless given).
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});
// A 1-d tensor holding a copy of values.
template <class T>
Tensor tensor(std::initializer_list<T> values);
template <class T>
Tensor tensor(const std::vector<T>& values);

// Wraps caller memory without copying. The caller keeps it alive while any view exists;
// `deleter` (optional) runs when the last view is gone. strides default to contiguous.
Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options = {},
                 std::function<void(void*)> deleter = {});
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {},
                 std::function<void(void*)> deleter = {});

}  // namespace tessera
