// scaled_mm (contract: include/tessera/ops/blas.h): validates the operands and scales, turns
// per-tensor and global scales into alpha, and runs the low-precision engine path, which
// decodes float8/NVFP4 while packing and applies row/column scales and bias per stored tile.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/tensor_make.h"
#include "gemm/lowp.h"
#include "tessera/autograd/function.h"
#include "tessera/ops/blas.h"

namespace tessera {

namespace {

constexpr const char* kOp = "scaled_mm";

std::string shape_of(const Tensor& t) {
  return fmt::format("{} [{}]", t.dtype(), fmt::join(t.sizes(), ", "));
}

bool is_scalar_shape(const Tensor& t) {
  return t.numel() == 1 && t.dim() <= 2;
}

// float32 scale of a float8 operand: per tensor, or a vector of `count` along dimension `dim`
// of a [1, count] / [count, 1] tensor. Returns the per-tensor value or sets *vec.
float float8_scale(const Tensor& s, const char* name, int64_t count, int dim, Tensor* vec) {
  const char* want = dim == 0 ? "[M, 1]" : "[1, N]";
  TS_CHECK(
      s.dtype() == kFloat32, TypeError,
      "{}(): argument '{}' expected a float32 scale of shape [], [1], [1, 1] or {}, but got {}",
      kOp, name, want, shape_of(s));
  if (is_scalar_shape(s)) return s.item<float>();
  const bool ok = s.dim() == 2 && s.size(dim) == count && s.size(1 - dim) == 1;
  TS_CHECK(ok, ValueError,
           "{}(): argument '{}' expected a float32 scale of shape [], [1], [1, 1] or {} = [{}], "
           "but got {}",
           kOp, name, want, dim == 0 ? fmt::format("{}, 1", count) : fmt::format("1, {}", count),
           shape_of(s));
  *vec = s.contiguous();
  return 1.0f;
}

void check_block_scale(const Tensor& s, const char* name, int64_t lanes, int64_t blocks) {
  TS_CHECK(s.dtype() == kFloat8_e4m3fn && s.dim() == 2 && s.size(0) == lanes && s.size(1) == blocks,
           ValueError,
           "{}(): argument '{}' expected float8_e4m3fn block scales of shape [{}, {}] (one per 16 "
           "elements of K), but got {}",
           kOp, name, lanes, blocks, shape_of(s));
}

}  // namespace

Tensor scaled_mm(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
                 const std::optional<Tensor>& bias, std::optional<ScalarType> out_dtype,
                 const std::optional<Tensor>& global_scale) {
  autograd::check_no_grad_needed(std::vector<Tensor>{a, b, scale_a, scale_b}, "scaled_mm");
  TS_CHECK(a.dim() == 2 && b.dim() == 2, RuntimeError,
           "{}(): arguments 'a' and 'b' expected 2-D tensors, but got {}-D and {}-D", kOp, a.dim(),
           b.dim());
  const bool fp4 = a.dtype() == kFloat4_e2m1fn_x2;
  TS_CHECK(
      (fp4 && b.dtype() == kFloat4_e2m1fn_x2) || (is_float8(a.dtype()) && is_float8(b.dtype())),
      TypeError,
      "{}(): arguments 'a' and 'b' expected float8_e4m3fn/float8_e5m2 or both "
      "float4_e2m1fn_x2, but got {} and {}",
      kOp, a.dtype(), b.dtype());
  TS_CHECK(a.size(1) == b.size(0), RuntimeError,
           "{}(): argument 'b' expected {} rows to match a {}, but got {}", kOp, a.size(1),
           shape_of(a), shape_of(b));
  const ScalarType out_t = out_dtype.value_or(kBFloat16);
  TS_CHECK(out_t == kBFloat16 || out_t == kFloat16 || out_t == kFloat32, TypeError,
           "{}(): argument 'out_dtype' expected bfloat16, float16 or float32, but got {}", kOp,
           out_t);
  const int64_t m = a.size(0), n = b.size(1), k = fp4 ? 2 * a.size(1) : a.size(1);

  gemm::LowpProblem p;
  p.m = m, p.n = n, p.k = k;
  Tensor row, col, bias32;
  if (fp4) {
    TS_CHECK(k % 16 == 0, ValueError,
             "{}(): argument 'a' expected K (2 x {}) a multiple of 16 for NVFP4 blocks, but got "
             "K={}",
             kOp, a.size(1), k);
    TS_CHECK(a.stride(1) == 1 || a.size(1) <= 1, ValueError,
             "{}(): argument 'a' expected float4_e2m1fn_x2 contiguous along K (stride 1), but got "
             "strides [{}, {}]",
             kOp, a.stride(0), a.stride(1));
    TS_CHECK(b.stride(0) == 1 || b.size(0) <= 1, ValueError,
             "{}(): argument 'b' expected float4_e2m1fn_x2 contiguous along K (b = w.t() with "
             "stride 1 along dim 0), but got strides [{}, {}]",
             kOp, b.stride(0), b.stride(1));
    check_block_scale(scale_a, "scale_a", m, k / 16);
    check_block_scale(scale_b, "scale_b", n, k / 16);
    p.a = {a.dtype(),          a.data_ptr(),      2 * a.stride(0),  1,
           scale_a.data_ptr(), scale_a.stride(0), scale_a.stride(1)};
    p.b = {b.dtype(),         b.data_ptr(),     1, 2 * b.stride(1), scale_b.data_ptr(),
           scale_b.stride(0), scale_b.stride(1)};
    if (global_scale) {
      TS_CHECK(global_scale->dtype() == kFloat32 && global_scale->numel() == 1, TypeError,
               "{}(): argument 'global_scale' expected a float32 tensor of one element, but got "
               "{}",
               kOp, shape_of(*global_scale));
      p.alpha = global_scale->item<float>();
    }
  } else {
    TS_CHECK(!global_scale, ValueError,
             "{}(): argument 'global_scale' expected only with float4_e2m1fn_x2 operands, but got "
             "one with {}",
             kOp, a.dtype());
    const float sa = float8_scale(scale_a, "scale_a", m, 0, &row);
    const float sb = float8_scale(scale_b, "scale_b", n, 1, &col);
    p.alpha = sa * sb;
    p.a = {a.dtype(), a.data_ptr(), a.stride(0), a.stride(1)};
    p.b = {b.dtype(), b.data_ptr(), b.stride(0), b.stride(1)};
    if (row.defined()) p.row_scale = row.data_ptr<float>();
    if (col.defined()) p.col_scale = col.data_ptr<float>();
  }
  if (bias) {
    TS_CHECK((bias->dtype() == out_t || bias->dtype() == kFloat32) && bias->dim() == 1 &&
                 bias->size(0) == n,
             ValueError, "{}(): argument 'bias' expected {} or float32 of shape [{}], but got {}",
             kOp, out_t, n, shape_of(*bias));
    bias32 = bias->to(kFloat32).contiguous();
    p.bias = bias32.data_ptr<float>();
  }
  Tensor out = make_empty({m, n}, out_t, kOp);
  p.c_dtype = out_t;
  p.c = out.data_ptr(), p.c_rs = n, p.c_cs = 1;
  gemm::gemm_lowp(p, nullptr, kOp);
  return out;
}

}  // namespace tessera
