// cumsum and cumprod. The result dtype is `dtype` if given, else int64 for bool and integer
// inputs and the input dtype otherwise (PyTorch). The input is converted to it, made
// contiguous and viewed as [B, K, N] around the scan dim: N == 1 scans contiguous rows,
// otherwise rows are scanned one after another, vectorised across the N columns.
// Accumulation: double for float32/float64 (PyTorch's CPU acc_type), float for
// float16/bfloat16, int64 (wrapping) for integers. Complex takes the reference path.
#include "ops/cpu/reduce_kernels.h"
#include "ops/reduce_plan.h"
#include "ops/reference/reduce_reference.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/reduce.h"

#include "tessera/autograd/function.h"

namespace tessera {
namespace {

Tensor scan_impl(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype, bool prod) {
  const std::string_view op = prod ? "cumprod" : "cumsum";
  autograd::check_no_grad_needed({&a, 1}, op);
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

}  // namespace

Tensor cumsum(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  return scan_impl(a, dim, dtype, false);
}
Tensor cumprod(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  return scan_impl(a, dim, dtype, true);
}

Tensor Tensor::cumsum(int64_t dim, std::optional<ScalarType> dtype) const {
  return tessera::cumsum(*this, dim, dtype);
}
Tensor Tensor::cumprod(int64_t dim, std::optional<ScalarType> dtype) const {
  return tessera::cumprod(*this, dim, dtype);
}

}  // namespace tessera
