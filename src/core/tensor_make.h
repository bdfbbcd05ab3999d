// Internal constructors shared by views, factories and ops.
#pragma once

#include "tessera/core/tensor.h"

namespace tessera {

// A new tensor with fresh storage (uninitialised) of the given sizes, contiguous unless
// strides are given (then storage covers the furthest element).
Tensor make_empty(IntArrayRef sizes, ScalarType dtype, std::string_view op = "empty");
Tensor make_empty_strided(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype,
                          std::string_view op = "empty_strided");
// A view of base's storage with new geometry (shares the version counter).
Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, int64_t storage_offset);
// A view with a different dtype of the same storage (view_as_real, view(dtype)).
Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, int64_t storage_offset,
                 ScalarType dtype);
// Number of storage elements needed to hold sizes/strides starting at offset 0.
int64_t storage_extent(IntArrayRef sizes, IntArrayRef strides);

}  // namespace tessera
