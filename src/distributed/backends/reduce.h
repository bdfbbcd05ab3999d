// Elementwise reductions over the buffers of all ranks, for every dtype.
//
// dst[i] = op(srcs[0][i], srcs[1][i], ..., srcs[n-1][i]) folded in rank order, so every rank
// that reduces the same element gets the same bits. Narrow floats (float16, bfloat16, float8)
// are widened to float, folded, and rounded once; AVG divides the sum by n before rounding.
// Integer SUM and PRODUCT wrap around (two's complement, no undefined behaviour).
#pragma once

#include <cstdint>
#include <string_view>

#include "tessera/core/dtype.h"
#include "tessera/distributed/types.h"

namespace tessera::distributed {

// Throws TypeError naming `op_name`, the reduce op and the dtype when `op` is not defined for
// `dtype` (AVG on integers, MIN/MAX on complex, bitwise ops on floating types, any op on
// float4).
void check_reducible(std::string_view op_name, ScalarType dtype, ReduceOp op);

// dst may be srcs[k] for some k (the same start address); no other overlap is allowed.
void reduce_into(ScalarType dtype, ReduceOp op, void* dst, const void* const* srcs, int n,
                 int64_t count);

}  // namespace tessera::distributed
