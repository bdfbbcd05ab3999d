// Reductions: argument checking, result dtypes (as PyTorch 1.13), output allocation, then a
// plan (reduce_plan.h) run by run_reduction (reduce_driver.h) on the per-ISA kernels.
// Complex inputs take the reference path (src/ops/reference/reduce_reference.cpp).
#include "tessera/ops/reduce.h"

#include <cmath>
#include <limits>

#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "ops/reduce_driver.h"
#include "ops/reduce_ops.h"
#include "ops/reduce_plan.h"
#include "ops/reference/reduce_reference.h"
#include "tessera/autograd/function.h"
#include "tessera/ops/factory.h"

namespace tessera {
namespace {

using cpu::Partial;
using cpu::ReduceKind;

constexpr DtypeMask kKernelFloat = kFloatingTypes;
constexpr DtypeMask kKernelReal = dtype_bit(kBool) | kIntegralTypes | kFloatingTypes;

bool kernel_float(ScalarType t) {
  return (kKernelFloat & dtype_bit(t)) != 0;
}
bool kernel_real(ScalarType t) {
  return (kKernelReal & dtype_bit(t)) != 0;
}

// A contiguous output in the keepdim shape, and the tensor returned (squeezed unless keepdim).
struct Output {
  Tensor keep;    // keepdim-shaped, contiguous: strides index the input's dims
  Tensor result;  // what the op returns
};

Output make_output(const Tensor& a, const std::vector<bool>& mask, bool keepdim, ScalarType dtype) {
  Output o;
  o.keep = empty(reduced_sizes(a.sizes(), mask, true), TensorOptions(dtype));
  o.result = keepdim ? o.keep : o.keep.view(reduced_sizes(a.sizes(), mask, false));
  return o;
}

double nan_max(double a, double b) {
  return (a != a || b != b) ? a + b : (b > a ? b : a);
}
double nan_min(double a, double b) {
  return (a != a || b != b) ? a + b : (b < a ? b : a);
}

Partial merge_simple(ReduceKind kind, bool int_domain, const Partial& x, const Partial& y) {
  Partial r = x;
  if (int_domain || kind == ReduceKind::CountNonzero) {
    const uint64_t a = static_cast<uint64_t>(x.i), b = static_cast<uint64_t>(y.i);
    switch (kind) {
      case ReduceKind::Prod:
        r.i = static_cast<int64_t>(a * b);
        break;
      case ReduceKind::Max:
        r.i = std::max(x.i, y.i);
        break;
      case ReduceKind::Min:
        r.i = std::min(x.i, y.i);
        break;
      default:
        r.i = static_cast<int64_t>(a + b);
        break;
    }
    return r;
  }
  switch (kind) {
    case ReduceKind::Prod:
      r.a = x.a * y.a;
      break;
    case ReduceKind::Max:
    case ReduceKind::AbsMax:
      r.a = nan_max(x.a, y.a);
      break;
    case ReduceKind::Min:
    case ReduceKind::AbsMin:
      r.a = nan_min(x.a, y.a);
      break;
    default:
      r.a = x.a + y.a;
      break;
  }
  return r;
}

// What happens to the merged value before it is stored.
enum class Post { None, Mean, Sqrt, InvPow, CountAsFloat, All, Any };

// Sum-like and extreme reductions of a real tensor whose dtype the kernels read. The result
// is empty(out_dtype); `identity` fills outputs that reduce nothing.
Tensor simple_reduce(const Tensor& a, const std::vector<bool>& mask, bool keepdim,
                     ScalarType out_dtype, ReduceKind kind, double p, Post post,
                     const Scalar& identity) {
  autograd::check_no_grad_needed({&a, 1}, "reduce");
  Output o = make_output(a, mask, keepdim, out_dtype);
  if (o.keep.numel() == 0) return o.result;
  const int64_t K = reduced_count(a.sizes(), mask);
  if (K == 0) {
    o.keep.fill_(identity);
    return o.result;
  }
  const bool int_domain = !kernel_float(a.dtype()) || kind == ReduceKind::CountNonzero;
  ReducePlan plan = plan_reduction(a, mask, o.keep.strides());
  cpu::ReduceArgs args;
  args.kind = kind;
  args.dtype = plan.input.dtype();
  args.p = p;
  const auto& k = TS_DISPATCH(reduce_kernels);
  const double inv_k = 1.0 / static_cast<double>(K);
  visit_dtype<kAllTypes>(out_dtype, "reduce", [&]<class OT>() {
    OT* out = static_cast<OT*>(o.keep.data_ptr());
    auto merge = [&](const Partial& x, const Partial& y) {
      return merge_simple(kind, int_domain, x, y);
    };
    auto finalize = [&](const Partial& r, int64_t off) {
      if (int_domain) {
        switch (post) {
          case Post::All:
            out[off] = convert<OT>(r.i == K);
            return;
          case Post::Any:
            out[off] = convert<OT>(r.i > 0);
            return;
          case Post::CountAsFloat:
            out[off] = convert<OT>(static_cast<double>(r.i));
            return;
          default:
            out[off] = convert<OT>(r.i);
            return;
        }
      }
      double v = r.a;
      switch (post) {
        case Post::Mean:
          v *= inv_k;
          break;
        case Post::Sqrt:
          v = std::sqrt(v);
          break;
        case Post::InvPow:
          v = std::pow(v, 1.0 / p);
          break;
        default:
          break;
      }
      if constexpr (std::is_same_v<OT, float>) {
        out[off] = static_cast<float>(v);
      } else {
        out[off] = convert<OT>(v);
      }
    };
    run_reduction(plan, args, k.reduce_rows, k.reduce_cols, false, merge, finalize);
  });
  return o.result;
}

void check_not_empty_full(const Tensor& a, std::string_view op, bool index_error) {
  if (a.numel() != 0) return;
  if (index_error) {
    TS_THROW(IndexError, "{}(): Expected reduction dim to be specified for input.numel() == 0.",
             op);
  }
  TS_THROW(RuntimeError,
           "{}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
           "reduction dim with the 'dim' argument.",
           op);
}

void check_reduced_dims_nonzero(const Tensor& a, const std::vector<bool>& mask,
                                std::string_view op) {
  for (int64_t d = 0; d < a.dim(); ++d) {
    TS_CHECK(!mask[d] || a.size(d) != 0, IndexError,
             "{}(): Expected reduction dim {} to have non-zero size.", op, d);
  }
}

void check_dtype(bool ok, std::string_view op, std::string_view expected, ScalarType got) {
  TS_CHECK(ok, TypeError, "{}(): argument 'input' expected {}, but got {}", op, expected, got);
}

bool is_real_number(ScalarType t) {
  return kernel_real(t);
}

Tensor extreme(const Tensor& a, IntArrayRef dim, bool keepdim, bool is_max, std::string_view op) {
  check_dtype(is_real_number(a.dtype()), op, "a real (bool, integer or floating) tensor",
              a.dtype());
  auto mask = reduce_dim_mask(dim, a.dim(), op);
  if (dim.empty()) check_not_empty_full(a, op, false);
  check_reduced_dims_nonzero(a, mask, op);
  return simple_reduce(a, mask, keepdim, a.dtype(), is_max ? ReduceKind::Max : ReduceKind::Min, 0,
                       Post::None, 0);
}

ScalarType sum_dtype(const Tensor& a, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return is_integral(a.dtype(), true) ? kInt64 : a.dtype();
}

// (values, indices) of the first extreme along one dim; NaN is the extreme.
std::tuple<Tensor, Tensor> arg_reduce(const Tensor& a, int64_t dim, bool keepdim, bool is_max,
                                      bool want_values, std::string_view op) {
  const int64_t d = wrap_reduce_dim(dim, a.dim(), op);
  std::vector<bool> mask(static_cast<size_t>(a.dim()), false);
  if (a.dim() > 0) mask[d] = true;
  check_reduced_dims_nonzero(a, mask, op);
  Output idx = make_output(a, mask, keepdim, kInt64);
  Output val;
  if (want_values) val = make_output(a, mask, keepdim, a.dtype());
  if (idx.keep.numel() == 0) return {val.result, idx.result};
  const bool fl = kernel_float(a.dtype());
  ReducePlan plan = plan_reduction(a, mask, idx.keep.strides());
  cpu::ReduceArgs args;
  args.kind = is_max ? ReduceKind::Max : ReduceKind::Min;
  args.dtype = plan.input.dtype();
  const auto& k = TS_DISPATCH(reduce_kernels);
  int64_t* iout = idx.keep.data_ptr<int64_t>();
  auto merge = [&](const Partial& x, const Partial& y) {
    if (fl) {
      if (x.a != x.a) return x;
      if (y.a != y.a) return y;
      return (is_max ? y.a > x.a : y.a < x.a) ? y : x;
    }
    return (is_max ? y.i > x.i : y.i < x.i) ? y : x;
  };
  // Values and indices outputs are both contiguous keepdim-shaped: same offsets.
  visit_dtype<kKernelReal>(a.dtype(), op, [&]<class T>() {
    T* vout = want_values ? static_cast<T*>(val.keep.data_ptr()) : nullptr;
    auto finalize = [&](const Partial& r, int64_t off) {
      iout[off] = r.n;
      if (vout) vout[off] = fl ? convert<T>(r.a) : convert<T>(r.i);
    };
    run_reduction(plan, args, k.arg_rows, k.arg_cols, true, merge, finalize);
  });
  return {val.result, idx.result};
}

std::tuple<Tensor, Tensor> moments(const Tensor& a, IntArrayRef dim, double correction,
                                   bool keepdim, bool take_sqrt, bool want_mean,
                                   std::string_view op) {
  TS_CHECK(a.is_floating_point() || a.is_complex(), TypeError,
           "{}(): argument 'input' expected a floating point or complex tensor (std and var "
           "only support floating point and complex dtypes), but got {}",
           op, a.dtype());
  auto mask = reduce_dim_mask(dim, a.dim(), op);
  if (!kernel_float(a.dtype())) return reference::var_mean(a, dim, correction, keepdim, take_sqrt);
  Output var = make_output(a, mask, keepdim, a.dtype());
  Output mean;
  if (want_mean) mean = make_output(a, mask, keepdim, a.dtype());
  if (var.keep.numel() == 0) return {var.result, mean.result};
  const int64_t K = reduced_count(a.sizes(), mask);
  if (K == 0) {
    var.keep.fill_(std::numeric_limits<double>::quiet_NaN());
    if (want_mean) mean.keep.fill_(std::numeric_limits<double>::quiet_NaN());
    return {var.result, mean.result};
  }
  ReducePlan plan = plan_reduction(a, mask, var.keep.strides());
  cpu::ReduceArgs args;
  args.dtype = plan.input.dtype();
  const auto& k = TS_DISPATCH(reduce_kernels);
  auto merge = [](const Partial& x, const Partial& y) {
    if (x.n == 0) return y;
    if (y.n == 0) return x;
    const double na = static_cast<double>(x.n), nb = static_cast<double>(y.n), n = na + nb;
    const double delta = y.a - x.a;
    Partial r;
    r.n = x.n + y.n;
    r.a = x.a + delta * (nb / n);
    r.b = x.b + y.b + delta * delta * (na * nb / n);
    return r;
  };
  visit_dtype<kKernelFloat>(a.dtype(), op, [&]<class T>() {
    T* vout = static_cast<T*>(var.keep.data_ptr());
    T* mout = want_mean ? static_cast<T*>(mean.keep.data_ptr()) : nullptr;
    auto finalize = [&](const Partial& r, int64_t off) {
      const double dof = std::max(0.0, static_cast<double>(r.n) - correction);
      double v = r.b / dof;
      if (take_sqrt) v = std::sqrt(v);
      vout[off] = convert<T>(v);
      if (mout) mout[off] = convert<T>(r.a);
    };
    run_reduction(plan, args, k.moments_rows, k.moments_cols, false, merge, finalize);
  });
  return {var.result, mean.result};
}

}  // namespace

Tensor sum_kernel(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  auto mask = reduce_dim_mask(dim, a.dim(), "sum");
  const ScalarType out = sum_dtype(a, dtype);
  Tensor x = a.dtype() == out ? a : a.to(out);
  if (!kernel_real(x.dtype())) {
    check_dtype(x.is_complex(), "sum", "a numeric tensor", x.dtype());
    return reference::sum(x, dim, keepdim, std::nullopt);
  }
  return simple_reduce(x, mask, keepdim, out, ReduceKind::Sum, 0, Post::None, 0);
}

Tensor mean_kernel(const Tensor& a, IntArrayRef dim, bool keepdim,
                   std::optional<ScalarType> dtype) {
  const ScalarType out = dtype ? *dtype : a.dtype();
  TS_CHECK(is_floating_point(out) || is_complex(out), TypeError,
           "mean(): could not infer output dtype. Input dtype must be either a floating point "
           "or complex dtype. Got: {}",
           out);
  auto mask = reduce_dim_mask(dim, a.dim(), "mean");
  Tensor x = a.dtype() == out ? a : a.to(out);
  if (!kernel_float(out)) {
    check_dtype(x.is_complex(), "mean", "a floating point or complex tensor", x.dtype());
    return reference::mean(x, dim, keepdim, std::nullopt);
  }
  return simple_reduce(x, mask, keepdim, out, ReduceKind::Sum, 0, Post::Mean,
                       std::numeric_limits<double>::quiet_NaN());
}

Tensor prod_kernel(const Tensor& a, std::optional<int64_t> dim, bool keepdim,
                   std::optional<ScalarType> dtype) {
  DimVector dims;
  if (dim) dims.push_back(*dim);
  auto mask = reduce_dim_mask(dims, a.dim(), "prod");
  const ScalarType out = sum_dtype(a, dtype);
  Tensor x = a.dtype() == out ? a : a.to(out);
  if (!kernel_real(x.dtype())) {
    check_dtype(x.is_complex(), "prod", "a numeric tensor", x.dtype());
    return reference::prod(x, dim, keepdim, std::nullopt);
  }
  return simple_reduce(x, mask, dim ? keepdim : false, out, ReduceKind::Prod, 0, Post::None, 1);
}

Tensor amax_kernel(const Tensor& a, IntArrayRef dim, bool keepdim) {
  return extreme(a, dim, keepdim, true, "amax");
}
Tensor amin_kernel(const Tensor& a, IntArrayRef dim, bool keepdim) {
  return extreme(a, dim, keepdim, false, "amin");
}

std::tuple<Tensor, Tensor> max_kernel(const Tensor& a, int64_t dim, bool keepdim) {
  check_dtype(is_real_number(a.dtype()), "max", "a real (bool, integer or floating) tensor",
              a.dtype());
  return arg_reduce(a, dim, keepdim, true, true, "max");
}
std::tuple<Tensor, Tensor> min_kernel(const Tensor& a, int64_t dim, bool keepdim) {
  check_dtype(is_real_number(a.dtype()), "min", "a real (bool, integer or floating) tensor",
              a.dtype());
  return arg_reduce(a, dim, keepdim, false, true, "min");
}

namespace {
Tensor argext(const Tensor& a, std::optional<int64_t> dim, bool keepdim, bool is_max,
              std::string_view op) {
  check_dtype(kernel_real(a.dtype()) && a.dtype() != kBool, op,
              "an integer or floating point tensor", a.dtype());
  if (dim) return std::get<1>(arg_reduce(a, *dim, keepdim, is_max, false, op));
  check_not_empty_full(a, op, true);
  Tensor flat = a.reshape({-1});
  Tensor r = std::get<1>(arg_reduce(flat, 0, false, is_max, false, op));
  if (keepdim) r = r.view(DimVector(static_cast<size_t>(a.dim()), 1));
  return r;
}
}  // namespace

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return argext(a, dim, keepdim, true, "argmax");
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return argext(a, dim, keepdim, false, "argmin");
}

Tensor var_kernel(const Tensor& a, IntArrayRef dim, double correction, bool keepdim) {
  return std::get<0>(moments(a, dim, correction, keepdim, false, false, "var"));
}
Tensor std_kernel(const Tensor& a, IntArrayRef dim, double correction, bool keepdim) {
  return std::get<0>(moments(a, dim, correction, keepdim, true, false, "std"));
}
std::tuple<Tensor, Tensor> var_mean_kernel(const Tensor& a, IntArrayRef dim, double correction,
                                           bool keepdim) {
  return moments(a, dim, correction, keepdim, false, true, "var_mean");
}

Tensor norm_kernel(const Tensor& a, const Scalar& p, IntArrayRef dim, bool keepdim) {
  TS_CHECK(a.is_floating_point() || a.is_complex(), TypeError,
           "norm(): argument 'input' expected a floating point or complex tensor, but got {}",
           a.dtype());
  TS_CHECK(!p.is_complex(), TypeError, "norm(): argument 'p' expected a real number, but got {}",
           p.repr());
  auto mask = reduce_dim_mask(dim, a.dim(), "norm");
  const double pv = p.to_double();
  if (std::isinf(pv)) {
    // max/min of |x| has no identity: an empty reduced dimension is an error, as PyTorch.
    for (int64_t d = 0; d < a.dim(); ++d)
      TS_CHECK(!(mask[d] && a.size(d) == 0), RuntimeError,
               "norm(): cannot compute the {} norm on dimension {} because this dimension is "
               "empty and the operation does not have an identity",
               pv > 0 ? "inf" : "-inf", d);
  }
  if (!kernel_float(a.dtype())) return reference::norm(a, p, dim, keepdim);
  ReduceKind kind = ReduceKind::PowSum;
  Post post = Post::InvPow;
  if (pv == 2) {
    kind = ReduceKind::SqSum;
    post = Post::Sqrt;
  } else if (pv == 1) {
    kind = ReduceKind::AbsSum;
    post = Post::None;
  } else if (pv == 0) {
    kind = ReduceKind::CountNonzero;
    post = Post::CountAsFloat;
  } else if (std::isinf(pv)) {
    kind = pv > 0 ? ReduceKind::AbsMax : ReduceKind::AbsMin;
    post = Post::None;
  }
  return simple_reduce(a, mask, keepdim, a.dtype(), kind, pv, post, 0);
}

Tensor all(const Tensor& a, IntArrayRef dim, bool keepdim) {
  auto mask = reduce_dim_mask(dim, a.dim(), "all");
  const ScalarType out = a.dtype() == kUInt8 ? kUInt8 : kBool;
  if (!kernel_real(a.dtype())) return reference::all(a, dim, keepdim);
  return simple_reduce(a, mask, keepdim, out, ReduceKind::CountNonzero, 0, Post::All, true);
}
Tensor any(const Tensor& a, IntArrayRef dim, bool keepdim) {
  auto mask = reduce_dim_mask(dim, a.dim(), "any");
  const ScalarType out = a.dtype() == kUInt8 ? kUInt8 : kBool;
  if (!kernel_real(a.dtype())) return reference::any(a, dim, keepdim);
  return simple_reduce(a, mask, keepdim, out, ReduceKind::CountNonzero, 0, Post::Any, false);
}
Tensor count_nonzero(const Tensor& a, IntArrayRef dim) {
  auto mask = reduce_dim_mask(dim, a.dim(), "count_nonzero");
  if (!kernel_real(a.dtype())) return reference::count_nonzero(a, dim);
  return simple_reduce(a, mask, false, kInt64, ReduceKind::CountNonzero, 0, Post::None, 0);
}

// ---- Tensor methods ----------------------------------------------------------------------
Tensor Tensor::sum(IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) const {
  return tessera::sum(*this, dim, keepdim, dtype);
}
Tensor Tensor::mean(IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) const {
  return tessera::mean(*this, dim, keepdim, dtype);
}
Tensor Tensor::prod(std::optional<int64_t> dim, bool keepdim,
                    std::optional<ScalarType> dtype) const {
  return tessera::prod(*this, dim, keepdim, dtype);
}
Tensor Tensor::amax(IntArrayRef dim, bool keepdim) const {
  return tessera::amax(*this, dim, keepdim);
}
Tensor Tensor::amin(IntArrayRef dim, bool keepdim) const {
  return tessera::amin(*this, dim, keepdim);
}
Tensor max_all_kernel(const Tensor& a) {
  return extreme(a, {}, false, true, "max");
}
Tensor min_all_kernel(const Tensor& a) {
  return extreme(a, {}, false, false, "min");
}
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return tessera::max(*this, dim, keepdim);
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return tessera::min(*this, dim, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return tessera::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return tessera::argmin(*this, dim, keepdim);
}
Tensor Tensor::var(IntArrayRef dim, double correction, bool keepdim) const {
  return tessera::var(*this, dim, correction, keepdim);
}
Tensor Tensor::std(IntArrayRef dim, double correction, bool keepdim) const {
  return tessera::std(*this, dim, correction, keepdim);
}
Tensor Tensor::norm(const Scalar& p, IntArrayRef dim, bool keepdim) const {
  return tessera::norm(*this, p, dim, keepdim);
}
Tensor Tensor::all() const {
  return tessera::all(*this);
}
Tensor Tensor::all(int64_t dim, bool keepdim) const {
  return tessera::all(*this, dim, keepdim);
}
Tensor Tensor::any() const {
  return tessera::any(*this);
}
Tensor Tensor::any(int64_t dim, bool keepdim) const {
  return tessera::any(*this, dim, keepdim);
}
Tensor Tensor::count_nonzero(IntArrayRef dim) const {
  return tessera::count_nonzero(*this, dim);
}

}  // namespace tessera
