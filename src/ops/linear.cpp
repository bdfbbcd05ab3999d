// linear and linear_scaled (include/tessera/ops/blas.h). Inputs with few rows (gemm::gemv_pays)
// run on the GEMV path (src/gemm/gemv.h) with the weight in its own format and the bias
// fused as beta * Y (Y preloaded with the bias); larger plain-dtype inputs run one GEMM
// through addmm/mm on the transposed weight view (no copy).
#include <fmt/ranges.h>

#include "autograd/record.h"
#include "core/tensor_make.h"
#include "gemm/gemm.h"
#include "gemm/gemv.h"
#include "gemm/lowp.h"
#include "tessera/ops/blas.h"

namespace tessera {

namespace {

// Rows of an [..., in] input (the product of the leading dimensions).
int64_t leading_rows(const Tensor& input) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < input.dim(); ++d) rows *= input.size(d);
  return rows;
}

DimVector output_shape(const Tensor& input, int64_t out, bool keep_last) {
  DimVector os(input.sizes().begin(), input.sizes().end());
  os.pop_back();
  if (keep_last) os.push_back(out);
  return os;
}

void check_bias(std::string_view op, const Tensor& bias, int64_t out, ScalarType dtype) {
  if (!bias.defined()) return;
  TS_CHECK(bias.dtype() == dtype || bias.dtype() == kFloat32, TypeError,
           "{}(): argument 'bias' expected dtype {} (or float32), but got {}", op, dtype,
           bias.dtype());
  TS_CHECK(bias.dim() <= 1 && (bias.numel() == out || bias.numel() == 1), RuntimeError,
           "{}(): argument 'bias' expected shape [{}] (or one element), but got [{}]", op, out,
           fmt::join(bias.sizes(), ", "));
}

// Y [rows, out] float32 = X [rows, in] W^T * scales (+ bias), on the GEMV path. `p` carries
// the weight (format, pointer, strides, scales); this fills in X, Y and the bias.
Tensor gemv_rows(gemm::GemvProblem p, const Tensor& x2d, const Tensor& bias, std::string_view op) {
  const int64_t rows = x2d.size(0), out = p.n;
  Tensor y = make_empty({rows, out}, kFloat32, op);
  if (bias.defined()) {
    y.copy_(bias.to(kFloat32).reshape({bias.numel() == 1 ? 1 : out}).expand({rows, out}));
    p.beta = 1;
  }
  const Tensor x = (x2d.dtype() == kFloat32 || x2d.dtype() == kBFloat16) ? x2d : x2d.to(kFloat32);
  p.k = x.size(1);
  p.x_dtype = x.dtype();
  p.nx = rows;
  p.x = x.data_ptr(), p.x_ld = x.stride(0), p.x_inc = x.stride(1);
  p.y = y.data_ptr<float>(), p.y_ld = out, p.y_inc = 1;
  gemm::gemv(p, nullptr, op);
  return y;
}

}  // namespace

namespace {
Tensor linear_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias);
}  // namespace

// With autograd: d input = g W, d W = g^T x (leading dims folded), d bias = sum of g.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  autograd::Recorder rec({input, weight, bias});
  Tensor out = linear_kernel(input, weight, bias);
  if (rec)
    rec.finish("LinearBackward0", {out},
               [si = rec.save(input), sw = rec.save(weight), has_bias = bias.defined(),
                bias_sizes = bias.defined() ? bias.sizes().vec() : DimVector{}](
                   const autograd::tensor_list& g, const autograd::Node& n) {
                 const Tensor x = si.unpack(n), w = sw.unpack(n);
                 const Tensor w2 = w.dim() == 1 ? w.unsqueeze(0) : w;
                 const int64_t in = x.size(-1), out = w2.size(0);
                 const Tensor g2 = g[0].reshape({-1, out});
                 const Tensor x2 = x.reshape({-1, in});
                 const Tensor gx = g2.mm(w2).reshape(x.sizes());
                 const Tensor gw = g2.t().mm(x2).reshape(w.sizes());
                 Tensor gb;
                 if (has_bias) gb = autograd::sum_to(g2.sum({0}), bias_sizes);
                 return autograd::tensor_list{gx, gw, gb};
               });
  return out;
}

namespace {
Tensor linear_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  TS_CHECK(input.dim() >= 1, RuntimeError,
           "linear(): argument 'input' expected at least 1 dimension, but got a 0-D tensor");
  TS_CHECK(weight.dim() == 1 || weight.dim() == 2, RuntimeError,
           "linear(): argument 'weight' expected a 1-D or 2-D tensor [out_features, "
           "in_features], but got {}-D",
           weight.dim());
  TS_CHECK(!is_float8(weight.dtype()) && !is_packed(weight.dtype()), TypeError,
           "linear(): argument 'weight' of dtype {} needs its scales: expected "
           "float32/float64/bfloat16/float16 here (use linear_scaled), but got {}",
           weight.dtype(), weight.dtype());
  TS_CHECK(input.dtype() == weight.dtype(), TypeError,
           "linear(): expected input and weight to have the same dtype, but got {} and {}",
           input.dtype(), weight.dtype());
  const Tensor w = weight.dim() == 1 ? weight.unsqueeze(0) : weight;
  const int64_t in = input.size(-1), out = w.size(0), rows = leading_rows(input);
  TS_CHECK(w.size(1) == in, RuntimeError,
           "linear(): argument 'weight' expected in_features {} (the input's last dimension), "
           "but got weight [{}]: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
           in, fmt::join(weight.sizes(), ", "), rows, in, w.size(1), out);
  check_bias("linear", bias, out, input.dtype());
  const DimVector os = output_shape(input, out, weight.dim() == 2);
  const Tensor x2d = input.reshape({rows, in});
  gemm::WeightFormat format;
  const ScalarType t = input.dtype();
  if ((t == kFloat32 || t == kBFloat16 || t == kFloat16) && rows >= 1 &&
      gemm::gemv_pays(rows, out) && gemm::weight_format_of(t, &format)) {
    gemm::GemvProblem p;
    p.format = format;
    p.n = out;
    p.w = w.data_ptr(), p.w_rs = w.stride(0), p.w_cs = w.stride(1);
    const Tensor y = gemv_rows(p, x2d, bias, "linear");
    return (t == kFloat32 ? y : y.to(t)).reshape(os);
  }
  const Tensor wt = w.t();
  const Tensor y = bias.defined() ? addmm(bias.to(t), x2d, wt) : mm(x2d, wt);
  return y.reshape(os);
}

// A float8 weight's float32 scale: one element (per tensor: `per_tensor`, `per_row` undefined)
// or [out] (per output row: `per_row`, contiguous). Checks it and names `op` when wrong.
struct Float8Scale {
  double per_tensor = 1.0;
  Tensor per_row;
};
Float8Scale float8_scale(std::string_view op, const Tensor& weight_scale, int64_t out) {
  TS_CHECK(weight_scale.defined() && weight_scale.dtype() == kFloat32, TypeError,
           "{}(): argument 'weight_scale' expected dtype float32 for float8 weights, but got {}",
           op, weight_scale.defined() ? dtype_name(weight_scale.dtype()) : "an undefined tensor");
  TS_CHECK(weight_scale.numel() == 1 || (weight_scale.dim() == 1 && weight_scale.size(0) == out),
           ValueError,
           "{}(): argument 'weight_scale' expected one element (per tensor) or shape [{}] (per "
           "row), but got [{}]",
           op, out, fmt::join(weight_scale.sizes(), ", "));
  Float8Scale s;
  if (weight_scale.numel() == 1 && out != 1) {
    s.per_tensor = static_cast<double>(weight_scale.reshape({1}).data_ptr<float>()[0]);
  } else {
    s.per_row = weight_scale.reshape({out}).contiguous();
  }
  return s;
}
}  // namespace

PackedLinearWeight::PackedLinearWeight(const Tensor& weight) {
  constexpr std::string_view op = "PackedLinearWeight";
  TS_CHECK(weight.dim() == 2, RuntimeError,
           "{}(): argument 'weight' expected a 2-D tensor [out_features, in_features], but got "
           "{}-D",
           op, weight.dim());
  const ScalarType t = weight.dtype();
  TS_CHECK(t == kFloat32 || t == kFloat64 || t == kBFloat16 || t == kFloat16, TypeError,
           "{}(): argument 'weight' of dtype {}: prepacking takes float32, float64, bfloat16 "
           "and float16 weights, and float8 ones with their scale (PackedLinearWeight(weight, "
           "weight_scale))",
           op, t);
  // B = weight^T (in x out): B(p, j) = weight(j, p).
  if (t == kBFloat16 || t == kFloat16) {
    lowp_ = std::make_shared<const gemm::PackedLowpB>(t, weight.size(1), weight.size(0),
                                                      weight.data_ptr(), weight.stride(1),
                                                      weight.stride(0), nullptr, op);
    return;
  }
  packed_ =
      std::make_shared<const gemm::PackedB>(t, weight.size(1), weight.size(0), weight.data_ptr(),
                                            weight.stride(1), weight.stride(0), nullptr, op);
}

PackedLinearWeight::PackedLinearWeight(const Tensor& weight, const Tensor& weight_scale) {
  constexpr std::string_view op = "PackedLinearWeight";
  TS_CHECK(weight.dim() == 2, RuntimeError,
           "{}(): argument 'weight' expected a 2-D tensor [out_features, in_features], but got "
           "{}-D",
           op, weight.dim());
  TS_CHECK(is_float8(weight.dtype()), TypeError,
           "{}(): argument 'weight' expected dtype float8_e4m3fn or float8_e5m2 with a "
           "weight_scale, but got {}",
           op, weight.dtype());
  const int64_t out = weight.size(0);
  const Float8Scale scale = float8_scale(op, weight_scale, out);
  alpha_ = scale.per_tensor;
  if (scale.per_row.defined()) scale_ = scale.per_row.clone();  // a snapshot, as the weight
  lowp_ = std::make_shared<const gemm::PackedLowpB>(weight.dtype(), weight.size(1), out,
                                                    weight.data_ptr(), weight.stride(1),
                                                    weight.stride(0), nullptr, op);
}

int64_t PackedLinearWeight::out_features() const {
  return packed_ ? packed_->n() : (lowp_ ? lowp_->n() : 0);
}
int64_t PackedLinearWeight::in_features() const {
  return packed_ ? packed_->k() : (lowp_ ? lowp_->k() : 0);
}
ScalarType PackedLinearWeight::dtype() const {
  return packed_ ? packed_->dtype() : (lowp_ ? lowp_->dtype() : kFloat32);
}

Tensor linear(const Tensor& input, const PackedLinearWeight& weight, const Tensor& bias) {
  constexpr std::string_view op = "linear";
  autograd::check_no_grad_needed(std::vector<Tensor>{input, bias}, "linear (prepacked weight)");
  TS_CHECK(weight.defined(), ValueError,
           "{}(): argument 'weight' expected a packed weight, but got an empty "
           "PackedLinearWeight",
           op);
  TS_CHECK(input.dim() >= 1, RuntimeError,
           "{}(): argument 'input' expected at least 1 dimension, but got a 0-D tensor", op);
  const bool fp8 = is_float8(weight.dtype());
  TS_CHECK(fp8 ? input.dtype() == kBFloat16 : input.dtype() == weight.dtype(), TypeError,
           "{}(): expected {}, but got input {} and weight {}", op,
           fp8 ? "a bfloat16 input for a float8 packed weight"
               : "input and weight to have the same dtype",
           input.dtype(), weight.dtype());
  const int64_t in = input.size(-1), out = weight.out_features(), rows = leading_rows(input);
  TS_CHECK(in == weight.in_features(), RuntimeError,
           "{}(): argument 'weight' expected in_features {} (the input's last dimension), but "
           "got a packed weight [{}, {}]",
           op, in, out, weight.in_features());
  check_bias(op, bias, out, input.dtype());
  const Tensor x2d = input.reshape({rows, in});
  Tensor y = make_empty({rows, out}, input.dtype(), op);
  if (bias.defined()) y.copy_(bias.reshape({bias.numel() == 1 ? 1 : out}).expand({rows, out}));
  if (weight.lowp_) {
    // As linear() runs it: addmm_lowp with the bias in C (beta 1) or mm (beta 0).
    gemm::LowpProblem p;
    p.m = rows, p.n = out, p.k = in;
    p.a = {input.dtype(), x2d.data_ptr(), x2d.stride(0), x2d.stride(1)};
    p.c_dtype = input.dtype();
    p.c = y.data_ptr(), p.c_rs = out, p.c_cs = 1;
    p.beta = bias.defined() ? 1.0f : 0.0f;
    p.alpha = static_cast<float>(weight.alpha_);  // float8: the scales, applied as C is stored
    if (weight.scale_.defined()) p.col_scale = weight.scale_.data_ptr<float>();
    gemm::gemm_lowp_prepacked(p, *weight.lowp_, op);
    return y.reshape(output_shape(input, out, true));
  }
  gemm::GemmProblem p;
  p.dtype = input.dtype();
  p.m = rows, p.n = out, p.k = in;
  p.a = x2d.data_ptr(), p.a_rs = x2d.stride(0), p.a_cs = x2d.stride(1);
  p.c = y.data_ptr(), p.c_rs = out, p.c_cs = 1;
  if (bias.defined()) p.beta = 1;
  gemm::gemm_prepacked(p, *weight.packed_, op);
  return y.reshape(output_shape(input, out, true));
}

Tensor linear_scaled(const Tensor& input, const Tensor& weight, const Tensor& weight_scale,
                     double global_scale, const Tensor& bias) {
  constexpr std::string_view op = "linear_scaled";
  autograd::check_no_grad_needed(std::vector<Tensor>{input, bias}, op);
  TS_CHECK(input.dim() >= 1, RuntimeError,
           "{}(): argument 'input' expected at least 1 dimension, but got a 0-D tensor", op);
  TS_CHECK(input.dtype() == kFloat32 || input.dtype() == kBFloat16, TypeError,
           "{}(): argument 'input' expected dtype float32 or bfloat16, but got {}", op,
           input.dtype());
  TS_CHECK(weight.dim() == 2, RuntimeError,
           "{}(): argument 'weight' expected a 2-D tensor [out_features, in_features], but got "
           "{}-D",
           op, weight.dim());
  gemm::WeightFormat format;
  const bool fp4 = weight.dtype() == kFloat4_e2m1fn_x2;
  TS_CHECK(is_float8(weight.dtype()) || fp4, TypeError,
           "{}(): argument 'weight' expected dtype float8_e4m3fn, float8_e5m2 or "
           "float4_e2m1fn_x2, but got {}",
           op, weight.dtype());
  gemm::weight_format_of(weight.dtype(), &format);
  TS_CHECK(weight_scale.defined(), ValueError,
           "{}(): argument 'weight_scale' expected a tensor, but got an undefined one", op);
  const int64_t in = input.size(-1), out = weight.size(0), rows = leading_rows(input);
  const int64_t w_in = fp4 ? 2 * weight.size(1) : weight.size(1);
  TS_CHECK(w_in == in, RuntimeError,
           "{}(): argument 'weight' expected in_features {} (the input's last dimension{}), but "
           "got weight [{}] of dtype {}",
           op, in, fp4 ? ", stored as in/2 bytes" : "", fmt::join(weight.sizes(), ", "),
           weight.dtype());
  check_bias(op, bias, out, input.dtype());
  gemm::GemvProblem p;
  p.format = format;
  p.n = out;
  p.global_scale = global_scale;
  Tensor w = weight, scales;
  if (fp4) {
    TS_CHECK(in % gemm::kNvfp4Block == 0, ValueError,
             "{}(): argument 'input' expected in_features a multiple of the NVFP4 block size "
             "{}, but got {}",
             op, gemm::kNvfp4Block, in);
    TS_CHECK(weight_scale.dtype() == kFloat8_e4m3fn, TypeError,
             "{}(): argument 'weight_scale' expected dtype float8_e4m3fn for float4 weights, but "
             "got {}",
             op, weight_scale.dtype());
    TS_CHECK(weight_scale.dim() == 2 && weight_scale.size(0) == out &&
                 weight_scale.size(1) == in / gemm::kNvfp4Block,
             ValueError,
             "{}(): argument 'weight_scale' expected shape [{}, {}] (one scale per 16 values), "
             "but got [{}]",
             op, out, in / gemm::kNvfp4Block, fmt::join(weight_scale.sizes(), ", "));
    if (w.stride(1) != 1) w = w.contiguous();
    scales = weight_scale.stride(1) == 1 ? weight_scale : weight_scale.contiguous();
    p.block_scales = static_cast<const uint8_t*>(scales.data_ptr());
    p.scale_rs = scales.stride(0);
  } else {
    const Float8Scale scale = float8_scale(op, weight_scale, out);
    p.global_scale *= scale.per_tensor;
    if (scale.per_row.defined()) {
      scales = scale.per_row;
      p.row_scales = scales.data_ptr<float>();
    }
  }
  p.w = w.data_ptr(), p.w_rs = w.stride(0), p.w_cs = fp4 ? 1 : w.stride(1);
  const Tensor y = gemv_rows(p, input.reshape({rows, in}), bias, op);
  return (input.dtype() == kFloat32 ? y : y.to(input.dtype()))
      .reshape(output_shape(input, out, true));
}

}  // namespace tessera
