// cumsum and cumprod. The result dtype is `dtype` if given, else int64 for bool and integer
// inputs and the input dtype otherwise (PyTorch). The input is converted to it, made
// contiguous and viewed as [B, K, N] around the scan dim: N == 1 scans contiguous rows,
// otherwise rows are scanned one after another, vectorised across the N columns.
// Accumulation: double for float32/float64 (PyTorch's CPU acc_type), float for
// float16/bfloat16, int64 (wrapping) for integers. Complex takes the reference path.
//
// Derivatives (PyTorch's CumsumBackward0 / CumprodBackward0), for y = scan(x) along d:
//   cumsum:  dx_i = sum_{k>=i} g_k                       (a reversed cumsum)
//   cumprod: dx_i = sum_{k>=i} g_k prod_{j<=k, j!=i} x_j  = P_{i-1} T_i, with the exclusive
//            prefix product P_{i-1} = prod_{j<i} x_j and T_i = g_i + x_{i+1} T_{i+1}.
// The cumprod form never divides by x, so zeros anywhere in the input are exact (PyTorch
// divides when there are none and special-cases the first zero otherwise: same values).
#include "autograd/record.h"
#include "ops/cpu/reduce_kernels.h"
#include "ops/reduce_ops.h"
#include "ops/reduce_plan.h"
#include "ops/reference/reduce_reference.h"
#include "tessera/autograd/grad_mode.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {
namespace {

Tensor scan_impl(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype, bool prod) {
  const std::string_view op = prod ? "cumprod" : "cumsum";
  const ScalarType out_dtype = dtype ? *dtype : (is_integral(a.dtype(), true) ? kInt64 : a.dtype());
  TS_CHECK(!is_float8(out_dtype) && !is_packed(out_dtype) && out_dtype != kBool, TypeError,
           "{}(): argument 'dtype' expected a numeric dtype, but got {}", op, out_dtype);
  const int64_t d = wrap_reduce_dim(dim, a.dim(), op);
  Tensor x = (a.dtype() == out_dtype ? a : a.to(out_dtype)).contiguous();
  if (x.is_complex()) return prod ? reference::cumprod(x, d) : reference::cumsum(x, d);
  Tensor out = empty(x.sizes(), TensorOptions(out_dtype));
  if (x.numel() == 0) return out;
  int64_t B = 1, K = 1, N = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < d) B *= x.size(i);
    if (i == d) K = x.size(i);
    if (i > d) N *= x.size(i);
  }
  const auto& k = TS_DISPATCH(softmax_kernels);
  const int64_t esize = x.element_size();
  const char* in = static_cast<const char*>(x.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  cpu::ScanArgs args;
  args.dtype = out_dtype;
  args.prod = prod;
  args.K = K;
  if (N == 1) {
    parallel_for(0, B, std::max<int64_t>(1, kGrainSize / K), [&](int64_t b0, int64_t b1) {
      cpu::ScanArgs a2 = args;
      a2.in = in + b0 * K * esize;
      a2.out = o + b0 * K * esize;
      a2.rows = b1 - b0;
      a2.in_row_stride = a2.out_row_stride = K;
      k.scan_rows(a2);
    });
    return out;
  }
  constexpr int64_t kTile = 1024;
  const int64_t ntiles = (N + kTile - 1) / kTile;
  parallel_tasks(B * ntiles, [&](int64_t t) {
    const int64_t b = t / ntiles, j0 = (t % ntiles) * kTile;
    cpu::ScanArgs a2 = args;
    a2.in = in + (b * K * N + j0) * esize;
    a2.out = o + (b * K * N + j0) * esize;
    a2.N = std::min(kTile, N - j0);
    a2.in_row_stride = a2.out_row_stride = N;
    k.scan_cols(a2);
  });
  return out;
}

// The cumprod derivative over lines along the last dim of contiguous float64 x and g
// (P_{i-1} T_i above, one pass back and one forward per line).
Tensor cumprod_backward_lines(const Tensor& x, const Tensor& g) {
  Tensor out = empty(x.sizes(), TensorOptions(kFloat64));
  const int64_t K = x.dim() == 0 ? 1 : x.size(-1);
  if (x.numel() == 0) return out;
  const double* xp = x.data_ptr<double>();
  const double* gp = g.data_ptr<double>();
  double* op = out.data_ptr<double>();
  parallel_for(0, x.numel() / K, std::max<int64_t>(1, kGrainSize / K), [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      const double* xl = xp + l * K;
      const double* gl = gp + l * K;
      double* ol = op + l * K;
      double t = 0;
      for (int64_t i = K - 1; i >= 0; --i) {
        t = gl[i] + (i + 1 < K ? xl[i + 1] * t : 0.0);
        ol[i] = t;
      }
      double prefix = 1;
      for (int64_t i = 0; i < K; ++i) {
        ol[i] *= prefix;
        prefix *= xl[i];
      }
    }
  });
  return out;
}

Tensor scan_with_grad(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype, bool prod) {
  autograd::Recorder rec({a});
  Tensor out = scan_impl(a, dim, dtype, prod);
  if (!rec) return out;
  const std::string_view op = prod ? "cumprod" : "cumsum";
  TS_CHECK(!a.is_complex(), RuntimeError,
           "{}(): the derivative for complex inputs is not implemented (detach() the input or "
           "compute it under tessera::autograd::NoGradGuard)",
           op);
  const int64_t d = a.dim() == 0 ? 0 : wrap_reduce_dim(dim, a.dim(), op);
  if (!prod) {
    rec.finish("CumsumBackward0", {out},
               [d](const autograd::tensor_list& g, const autograd::Node&) {
                 if (g[0].dim() == 0) return autograd::tensor_list{g[0]};
                 return autograd::tensor_list{reverse_along(reverse_along(g[0], d).cumsum(d), d)};
               });
    return out;
  }
  rec.finish("CumprodBackward0", {out},
             [d, sa = autograd::Recorder::save(a)](const autograd::tensor_list& g,
                                                   const autograd::Node& n) {
               const Tensor x = sa.unpack(n);
               TS_CHECK(!autograd::GradMode::is_enabled(), RuntimeError,
                        "cumprod(): double backward (create_graph=true) is not implemented: the "
                        "first derivative runs as a plain loop");
               if (x.dim() == 0) return autograd::tensor_list{g[0]};
               const Tensor xl = x.to(kFloat64).movedim(d, -1).contiguous();
               const Tensor gl = g[0].to(kFloat64).movedim(d, -1).contiguous();
               return autograd::tensor_list{
                   cumprod_backward_lines(xl, gl).movedim(-1, d).to(g[0].dtype())};
             });
  return out;
}

}  // namespace

Tensor reverse_along(const Tensor& t, int64_t dim) {
  const int64_t n = t.size(dim);
  return t.index_select(dim, arange(n - 1, -1, -1, TensorOptions(kInt64)));
}

Tensor cumsum(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  return scan_with_grad(a, dim, dtype, false);
}
Tensor cumprod(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  return scan_with_grad(a, dim, dtype, true);
}

Tensor Tensor::cumsum(int64_t dim, std::optional<ScalarType> dtype) const {
  return tessera::cumsum(*this, dim, dtype);
}
Tensor Tensor::cumprod(int64_t dim, std::optional<ScalarType> dtype) const {
  return tessera::cumprod(*this, dim, dtype);
}

}  // namespace tessera
