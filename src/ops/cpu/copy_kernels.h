// Per-ISA kernels for copy_ (any dtype pair, any strides) and fill_.
#pragma once

#include "core/dispatch.h"
#include "core/iterator.h"

namespace tessera::cpu {

struct CopyKernels {
  // iter: output 0 = destination, input 0 = source (dtypes may differ).
  void (*copy)(TensorIterator& iter);
  // iter: output 0 only.
  void (*fill)(TensorIterator& iter, const Scalar& value);
};

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(CopyKernels, copy_kernels)
