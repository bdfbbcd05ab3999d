// Matrix products with fused epilogues: the bias, the activation, extra outputs and row or
// column reductions are computed on each tile of the GEMM before it is stored (one pass over
// the output instead of three or four). Semantics are those of the unfused PyTorch code in
// each comment; float32 operands (bfloat16/float16 operands are computed in float32, as mm
// does) run fused, anything the engine cannot fuse (float64, ...) runs the unfused ops.
#pragma once

#include <optional>
#include <string_view>

#include "tessera/core/tensor.h"

namespace tessera {

class PackedLinearWeight;  // tessera/ops/blas.h

// What addmm_act_ex returns beyond the activation.
struct FusedMatmulOptions {
  // "none", "relu", "gelu" (erf), "gelu_tanh", "silu", "sigmoid", "tanh".
  std::string_view activation = "none";
  // dtype of `out`: float32, bfloat16 or float16 (default: the dtype of a).
  std::optional<ScalarType> out_dtype;
  // Also return pre_activation = bias + a @ b (float32), e.g. kept for backward.
  bool keep_pre_activation = false;
  // "" (none), "sum", "mean", "amax", "amin" or "sum_squares" of act(bias + a @ b) (before
  // any rounding to out_dtype) over `reduce_dim`: 1 or -1 gives one value per row ([m]), 0 or
  // -2 one value per column ([n]). float32.
  std::string_view reduce;
  int64_t reduce_dim = 1;
};

struct FusedMatmulResult {
  Tensor out;             // act(bias + a @ b) as out_dtype, [m, n]
  Tensor pre_activation;  // undefined unless keep_pre_activation
  Tensor reduced;         // undefined unless reduce is set
};

// act(bias + a @ b): a [m, k], b [k, n], bias [n] (broadcast over rows) or undefined.
//   out = act(torch.addmm(bias, a, b)).to(out_dtype); reduced = out_f32.sum(reduce_dim) ...
Tensor addmm_act(const Tensor& bias, const Tensor& a, const Tensor& b,
                 std::string_view activation = "none");
FusedMatmulResult addmm_act_ex(const Tensor& bias, const Tensor& a, const Tensor& b,
                               const FusedMatmulOptions& options);

// act(F.linear(input, weight, bias)): input [..., k], weight [n, k], bias [n] (optional).
Tensor linear_act(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                  std::string_view activation = "none");

// The same with a weight packed once (PackedLinearWeight, tessera/ops/blas.h): a float32 pack
// runs the bias and activation fused into the prepacked GEMM (gemm_epilogue_prepacked), bit
// for bit linear_act() with the plain weight wherever that runs the packed kernels too (more
// than 8 rows, or any small product); bfloat16/float16/float64 packs run linear(input, packed,
// bias) and then the activation, unfused. No autograd (as linear with a packed weight).
Tensor linear_act(const Tensor& input, const PackedLinearWeight& weight,
                  const std::optional<Tensor>& bias, std::string_view activation = "none");

}  // namespace tessera
