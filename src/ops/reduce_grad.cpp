// The differentiable reductions: each runs its kernel (reduce.cpp) and records its derivative
// (PyTorch's formulas) when the input requires grad.
#include <cmath>

#include "autograd/record.h"
#include "ops/pointwise_grad.h"
#include "ops/reduce_ops.h"
#include "ops/reduce_plan.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"

namespace tessera {

using autograd::Node;
using autograd::Recorder;
using autograd::SavedTensor;
using autograd::tensor_list;

namespace {

// g (the reduced shape, keepdim or not) broadcast back over the input's shape.
Tensor expand_back(const Tensor& g, const DimVector& in_sizes, const std::vector<bool>& mask,
                   bool keepdim) {
  Tensor r = g;
  if (!keepdim) {
    for (size_t d = 0; d < mask.size(); ++d)
      if (mask[d]) r = r.unsqueeze(static_cast<int64_t>(d));
  }
  return r.expand(in_sizes);
}

int64_t reduced_numel(const DimVector& sizes, const std::vector<bool>& mask) {
  int64_t k = 1;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) k *= sizes[d];
  return k;
}

struct ReduceShape {
  DimVector sizes;
  std::vector<bool> mask;
  bool keepdim;
  Tensor back(const Tensor& g) const { return expand_back(g, sizes, mask, keepdim); }
};

ReduceShape shape_of(const Tensor& a, IntArrayRef dim, bool keepdim, std::string_view op) {
  return {a.sizes().vec(), reduce_dim_mask(dim, a.dim(), op), keepdim};
}

}  // namespace

Tensor sum(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  Recorder rec({a});
  Tensor out = sum_kernel(a, dim, keepdim, dtype);
  if (rec)
    rec.finish("SumBackward1", {out},
               [rs = shape_of(a, dim, keepdim, "sum")](const tensor_list& g, const Node&) {
                 return tensor_list{rs.back(g[0])};
               });
  return out;
}

Tensor mean(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  Recorder rec({a});
  Tensor out = mean_kernel(a, dim, keepdim, dtype);
  if (rec) {
    ReduceShape rs = shape_of(a, dim, keepdim, "mean");
    const double k = static_cast<double>(reduced_numel(rs.sizes, rs.mask));
    rec.finish("MeanBackward1", {out}, [rs, k](const tensor_list& g, const Node&) {
      return tensor_list{rs.back(g[0].div(k))};
    });
  }
  return out;
}

namespace {

// amax/amin/max()/min(): the gradient is shared evenly by every element equal to the
// extreme. `all`: Tensor::max()/min() over every element.
Tensor extreme_with_grad(const Tensor& a, IntArrayRef dim, bool keepdim, bool is_max,
                         bool all = false) {
  Recorder rec({a});
  Tensor out = all ? (is_max ? max_all_kernel(a) : min_all_kernel(a))
                   : (is_max ? amax_kernel(a, dim, keepdim) : amin_kernel(a, dim, keepdim));
  if (rec) {
    ReduceShape rs = shape_of(a, dim, keepdim, is_max ? "amax" : "amin");
    rec.finish(all ? (is_max ? "MaxBackward1" : "MinBackward1")
                   : (is_max ? "AmaxBackward0" : "AminBackward0"),
               {out},
               [rs, sa = Recorder::save(a), so = Recorder::save_output(out)](const tensor_list& g,
                                                                             const Node& n) {
                 const Tensor x = sa.unpack(n);
                 const Tensor hit = x.eq(rs.back(so.unpack(n))).to(x.dtype());
                 DimVector dims;
                 for (size_t d = 0; d < rs.mask.size(); ++d)
                   if (rs.mask[d]) dims.push_back(static_cast<int64_t>(d));
                 const Tensor count = hit.sum(dims, /*keepdim=*/true);
                 return tensor_list{rs.back(g[0]).mul(hit).div(count)};
               });
  }
  return out;
}

// max/min along a dim: the gradient goes to the returned index.
std::tuple<Tensor, Tensor> arg_extreme_with_grad(const Tensor& a, int64_t dim, bool keepdim,
                                                 bool is_max) {
  Recorder rec({a});
  auto [values, indices] = is_max ? max_kernel(a, dim, keepdim) : min_kernel(a, dim, keepdim);
  if (rec) {
    const int64_t d = a.dim() == 0 ? 0 : wrap_dim(dim, a.dim(), is_max ? "max" : "min");
    rec.finish(
        is_max ? "MaxBackward0" : "MinBackward0", {values},
        [sizes = a.sizes().vec(), d, keepdim, idx = indices](const tensor_list& g, const Node&) {
          return tensor_list{value_selecting_backward(g[0], idx, sizes, d, keepdim)};
        });
  }
  return {values, indices};
}

}  // namespace

Tensor value_selecting_backward(const Tensor& g, const Tensor& indices, IntArrayRef sizes,
                                int64_t dim, bool keepdim) {
  if (sizes.empty()) return g.reshape({});
  const Tensor gi = keepdim ? g : g.unsqueeze(dim);
  const Tensor ii = keepdim ? indices : indices.unsqueeze(dim);
  return zeros(sizes, g.dtype()).scatter(dim, ii, gi);
}

Tensor Tensor::max() const {
  return extreme_with_grad(*this, {}, false, true, true);
}
Tensor Tensor::min() const {
  return extreme_with_grad(*this, {}, false, false, true);
}

Tensor amax(const Tensor& a, IntArrayRef dim, bool keepdim) {
  return extreme_with_grad(a, dim, keepdim, true);
}
Tensor amin(const Tensor& a, IntArrayRef dim, bool keepdim) {
  return extreme_with_grad(a, dim, keepdim, false);
}
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_extreme_with_grad(a, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_extreme_with_grad(a, dim, keepdim, false);
}

namespace {

// var/std: d var = 2 (x - mean) / (N - correction); d std = d var / (2 std).
Tensor moments_with_grad(const Tensor& a, IntArrayRef dim, double correction, bool keepdim,
                         bool is_std) {
  Recorder rec({a});
  Tensor out =
      is_std ? std_kernel(a, dim, correction, keepdim) : var_kernel(a, dim, correction, keepdim);
  if (rec) {
    TS_CHECK(!a.is_complex(), RuntimeError,
             "{}(): the derivative for complex inputs is not implemented", is_std ? "std" : "var");
    ReduceShape rs = shape_of(a, dim, keepdim, is_std ? "std" : "var");
    const double dof = static_cast<double>(reduced_numel(rs.sizes, rs.mask)) - correction;
    DimVector dims(dim.begin(), dim.end());
    rec.finish(is_std ? "StdBackward0" : "VarBackward0", {out},
               [rs, dof, dims, is_std, sa = Recorder::save(a), so = Recorder::save_output(out)](
                   const tensor_list& g, const Node& n) {
                 const Tensor x = sa.unpack(n);
                 const Tensor centred = x.sub(x.mean(dims, /*keepdim=*/true));
                 Tensor scale = rs.back(g[0]).mul(2.0 / dof);
                 if (is_std) scale = scale.div(rs.back(so.unpack(n)).mul(2));
                 return tensor_list{centred.mul(scale)};
               });
  }
  return out;
}

}  // namespace

Tensor var(const Tensor& a, IntArrayRef dim, double correction, bool keepdim) {
  return moments_with_grad(a, dim, correction, keepdim, false);
}
Tensor std(const Tensor& a, IntArrayRef dim, double correction, bool keepdim) {
  return moments_with_grad(a, dim, correction, keepdim, true);
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& a, IntArrayRef dim, double correction,
                                    bool keepdim) {
  Recorder rec({a});
  auto [v, m] = var_mean_kernel(a, dim, correction, keepdim);
  if (rec) {
    TS_CHECK(!a.is_complex(), RuntimeError,
             "var_mean(): the derivative for complex inputs is not implemented");
    ReduceShape rs = shape_of(a, dim, keepdim, "var_mean");
    const double k = static_cast<double>(reduced_numel(rs.sizes, rs.mask));
    // The var part as VarBackward0, the mean part as MeanBackward1, summed.
    rec.finish("VarMeanBackward0", {v, m},
               [rs, k, dof = k - correction, sa = Recorder::save(a), so = Recorder::save_output(m)](
                   const tensor_list& g, const Node& n) {
                 const Tensor x = sa.unpack(n);
                 const Tensor centred = x.sub(rs.back(so.unpack(n)));
                 const Tensor gv = centred.mul(rs.back(g[0]).mul(2.0 / dof));
                 return tensor_list{gv.add(rs.back(g[1].div(k)))};
               });
  }
  return {v, m};
}

namespace {

// prod's derivative where the input holds zeros: prod_{j != i} x_j along `dim` of x, as the
// exclusive prefix product times the exclusive suffix product (PyTorch's
// prod_safe_zeros_backward), times g (keepdim-shaped). Differentiable ops only.
Tensor prod_safe_zeros_backward(const Tensor& g, const Tensor& x, int64_t dim) {
  const int64_t n = x.size(dim);
  if (n == 0) return g.expand(x.sizes());
  DimVector one_size = x.sizes().vec();
  one_size[dim] = 1;
  const Tensor one = ones(one_size, x.dtype());
  const Tensor before = cat({one, x.narrow(dim, 0, n - 1)}, dim).cumprod(dim);
  const Tensor after =
      reverse_along(cat({one, reverse_along(x.narrow(dim, 1, n - 1), dim)}, dim).cumprod(dim), dim);
  return g.mul(before.mul(after));
}

// prod(x) -> d x (x and result in the result's dtype; g keepdim-shaped).
Tensor prod_backward(const Tensor& g, const Tensor& x, const Tensor& result,
                     std::optional<int64_t> dim) {
  if (x.dim() == 0) return g.reshape({});
  if (!x.eq(0).any().item<bool>()) return g.mul(result.div(x));
  if (!dim) return prod_safe_zeros_backward(g.reshape({1}), x.reshape({-1}), 0).view(x.sizes());
  return prod_safe_zeros_backward(g, x, *dim);
}

}  // namespace

// ProdBackward0 (all elements) / ProdBackward1 (one dim): g prod / x without zeros, the
// exclusive products with them (one zero: only its position gets a gradient; several: none).
Tensor prod(const Tensor& a, std::optional<int64_t> dim, bool keepdim,
            std::optional<ScalarType> dtype) {
  Recorder rec({a});
  Tensor out = prod_kernel(a, dim, keepdim, dtype);
  if (rec) {
    TS_CHECK(!a.is_complex(), RuntimeError,
             "prod(): the derivative for complex inputs is not implemented");
    const std::optional<int64_t> d =
        dim && a.dim() > 0 ? std::optional<int64_t>(wrap_dim(*dim, a.dim(), "prod")) : std::nullopt;
    const bool unsqueeze = d && !keepdim;
    rec.finish(dim ? "ProdBackward1" : "ProdBackward0", {out},
               [d, unsqueeze, sa = Recorder::save(a), so = Recorder::save_output(out)](
                   const tensor_list& g, const Node& n) {
                 Tensor r = so.unpack(n), gr = g[0];
                 if (unsqueeze) r = r.unsqueeze(*d), gr = gr.unsqueeze(*d);
                 const Tensor x = sa.unpack(n).to(r.dtype());
                 return tensor_list{prod_backward(gr, x, r, d)};
               });
  }
  return out;
}

// PyTorch's norm_backward for every real p: p = 0 has no gradient; 1: sgn(x) g; 2: x g / r;
// +-inf: g shared evenly by the elements whose |x| is the norm (or NaN); other p:
// sgn(x) |x|^(p-1) g / r^(p-1) (0 where r == 0, and for p < 1 where x == 0).
Tensor norm(const Tensor& a, const Scalar& p, IntArrayRef dim, bool keepdim) {
  Recorder rec({a});
  Tensor out = norm_kernel(a, p, dim, keepdim);
  if (rec) {
    TS_CHECK(!a.is_complex(), RuntimeError,
             "norm(): the derivative for complex inputs is not implemented (got {})", a.dtype());
    const double pv = p.to_double();
    ReduceShape rs = shape_of(a, dim, keepdim, "norm");
    DimVector dims;
    for (size_t d = 0; d < rs.mask.size(); ++d)
      if (rs.mask[d]) dims.push_back(static_cast<int64_t>(d));
    rec.finish("NormBackward1", {out},
               [rs, pv, dims, sa = Recorder::save(a), so = Recorder::save_output(out)](
                   const tensor_list& g, const Node& n) -> tensor_list {
                 if (pv == 0) return {Tensor()};
                 const Tensor x = sa.unpack(n), r = rs.back(so.unpack(n)), gr = rs.back(g[0]);
                 const Tensor zero = zeros_like(x);
                 if (pv == 1) return {x.sign().mul(gr)};
                 if (pv == 2) return {where(r.eq(0), zero, x.mul(gr).div(r))};
                 const Tensor ax = x.abs();
                 if (std::isinf(pv)) {
                   const Tensor hit = ax.eq(r).logical_or(isnan(ax)).to(x.dtype());
                   return {x.sign().mul(gr.div(hit.sum(dims, /*keepdim=*/true)).mul(hit))};
                 }
                 Tensor scaled = x.sign().mul(ax.pow(pv - 1));
                 if (pv < 1) scaled = where(x.eq(0), zero, scaled);
                 const Tensor scale = where(r.eq(0), zero, gr.div(r.pow(pv - 1)));
                 return {scaled.mul(scale)};
               });
  }
  return out;
}

}  // namespace tessera
