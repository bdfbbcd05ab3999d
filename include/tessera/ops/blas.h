// Matrix products on Tessera's GEMM engine (src/gemm). Products with at most 4 rows or columns
// of output (decode-time [B, 1, K] activations, matrix-vector) take the bandwidth-bound GEMV
// path automatically; see docs/gemm.md.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "tessera/core/tensor.h"

namespace tessera::gemm {
class PackedB;      // src/gemm/gemm.h
class PackedLowpB;  // src/gemm/lowp.h
}  // namespace tessera::gemm

namespace tessera {

Tensor mm(const Tensor& a, const Tensor& b);   // [n, k] x [k, m]
Tensor bmm(const Tensor& a, const Tensor& b);  // [b, n, k] x [b, k, m]
// beta * self + alpha * (a @ b)
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// torch.baddbmm: beta * self + alpha * (batch1 @ batch2) with batch1 [B, m, k], batch2
// [B, k, n] and self broadcastable to [B, m, n]. beta == 0 ignores self (NaN there does not
// propagate). float32/float64 apply beta and alpha inside the GEMM engine (one pass).
Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2,
               const Scalar& beta = 1, const Scalar& alpha = 1);
// torch.matmul: 1-d/2-d/batched with broadcasting of batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
// torch.mv: mat [n, m] @ vec [m] -> [n] (the GEMV path for float32/float64/complex).
Tensor mv(const Tensor& mat, const Tensor& vec);
// torch.addmv: beta * self + alpha * (mat @ vec), self broadcastable to [n]; beta == 0 ignores
// self (NaN there does not propagate). Real beta and alpha run inside the GEMM engine.
Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// torch.vdot: sum(conj(a) * b) over two 1-D tensors (dot for real dtypes).
Tensor vdot(const Tensor& a, const Tensor& b);

// torch.nn.functional.linear: input [..., in] @ weight.T + bias, with weight [out, in] (or
// [in]: then the output drops the last dimension) and an optional bias [out] (or a scalar
// tensor). Same dtype for all; float32/bfloat16/float16 accumulate in float32. Inputs of few
// rows (up to 4, or up to 8 beside more than 64 outputs: [B, 1, in] decode steps) take the
// GEMV path, which reads the weight once at memory speed with the bias fused; larger inputs
// one GEMM.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});

// A Linear weight [out_features, in_features] packed once into the GEMM kernels' panel layout
// (oneDNN's "prepacked weights"): linear() with it skips the packing every plain call
// repeats, which matters most for medium batches and short in_features. A snapshot: later
// in-place changes to the weight are not seen (pack again after an optimizer step). Holds
// its own copy (about the weight's size); the weight tensor itself is not kept. float32,
// float64, bfloat16 and float16 (other dtypes throw; bfloat16/float16 are packed for the
// low-precision kernels, decoded to float32 or in vdpbf16ps pairs as this CPU's path wants).
// Every batch size runs the packed GEMM, so decode with one to eight rows is better served
// by plain linear(), whose GEMV path streams the weight.
class PackedLinearWeight {
 public:
  PackedLinearWeight() = default;
  explicit PackedLinearWeight(const Tensor& weight);
  // A float8_e4m3fn/float8_e5m2 weight [out, in] with its float32 weight_scale (one element, or
  // [out]: one per output row), W = weight * scale as in linear_scaled, packed for bfloat16
  // inputs (products exact, accumulated in float32; the scale applies as each output tile is
  // stored). linear() then takes a bfloat16 input and returns bfloat16. The decode path for
  // one to eight rows is linear_scaled, which streams the weight.
  PackedLinearWeight(const Tensor& weight, const Tensor& weight_scale);
  bool defined() const { return packed_ != nullptr || lowp_ != nullptr; }
  int64_t out_features() const;
  int64_t in_features() const;
  ScalarType dtype() const;

 private:
  friend Tensor linear(const Tensor& input, const PackedLinearWeight& weight, const Tensor& bias);
  friend Tensor linear_act(const Tensor& input, const PackedLinearWeight& weight,
                           const std::optional<Tensor>& bias, std::string_view activation);
  std::shared_ptr<const gemm::PackedB> packed_;    // float32, float64
  std::shared_ptr<const gemm::PackedLowpB> lowp_;  // bfloat16, float16, float8
  Tensor scale_;        // float8: float32 [out] per-row scales (undefined: per tensor)
  double alpha_ = 1.0;  // float8: the per-tensor scale
};

// linear with a prepacked weight: the same result, bit for bit, as linear(input, weight, bias)
// for inputs that linear() does not send to its GEMV path (at most 4 rows, or 8 beside more
// than 64 outputs: gemm::gemv_pays), whose rounding differs.
Tensor linear(const Tensor& input, const PackedLinearWeight& weight, const Tensor& bias = {});

// linear with low-precision weights, dequantized on the fly inside the GEMV kernels:
//   - weight float8_e4m3fn or float8_e5m2 [out, in], weight_scale float32 with one value
//     (per tensor) or [out] values (per output row): W = weight * scale;
//   - weight float4_e2m1fn_x2 [out, in / 2] (NVFP4: two values a byte, low nibble first),
//     weight_scale float8_e4m3fn [out, in / 16] (one scale per 16 values along in), in a
//     multiple of 16: W = e2m1 * block scale.
// global_scale multiplies every output once (NVFP4's per-tensor float32 scale). input is
// float32 or bfloat16 [..., in]; the output has its dtype and shape [..., out]. bias as in
// linear (float32 or the input's dtype). Rows are processed 4 at a time (each group reads
// the weight once): this is the decode path; large batches belong to scaled_mm.
Tensor linear_scaled(const Tensor& input, const Tensor& weight, const Tensor& weight_scale,
                     double global_scale = 1.0, const Tensor& bias = {});

}  // namespace tessera

namespace tessera {

// torch._scaled_mm: out = (a * scale_a) @ (b * scale_b) [* global_scale] + bias in out_dtype,
// accumulated in float32 (src/gemm/lowp.h).
//
// float8: a [M, K] and b [K, N] of float8_e4m3fn or float8_e5m2 (any strides), float32
//   scale_a of shape [] / [1] / [1, 1] (per tensor) or [M, 1] (per row), scale_b [] / [1] /
//   [1, 1] or [1, N] (per column). Per-tensor scales multiply alpha; row and column scales
//   apply per element as each output tile is stored.
// NVFP4: a [M, K/2] and b [K/2, N] of float4_e2m1fn_x2 (two values per byte along K, low
//   nibble first), K contiguous in both (a row-major, b = w.t() for a row-major w [N, K/2]),
//   K a multiple of 16; scale_a [M, K/16] and scale_b [N, K/16] float8_e4m3fn, one per 16
//   consecutive K of a row of a / a column of b; global_scale a float32 one-element tensor,
//   applied in the epilogue (when C is written), never as a separate pass.
// bias: [N] of out_dtype or float32, added after scaling. out_dtype: bfloat16 (default; unlike
//   PyTorch, whose default is a's dtype: float8 outputs are not offered), float16 or float32.
Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                 const std::optional<Tensor>& bias = std::nullopt,
                 std::optional<ScalarType> out_dtype = std::nullopt,
                 const std::optional<Tensor>& global_scale = std::nullopt);

}  // namespace tessera
