// Indexing along one dimension: index_select, gather, scatter (tensor and value), scatter_add,
// index_add, embedding (the mask ops masked_select, nonzero, one_hot are in mask_ops.cpp).
//
// Two kernels carry the dimension-indexed ops. Over the box of the index tensor (shape B):
//   gather:  out[e]                    = src[e with coordinate dim := index[e]]
//   scatter: dst[e with dim := index[e]] = src[e]        (assign, or dst + alpha * src)
// index_select and embedding are gathers whose index is a 1-d tensor expanded (stride 0)
// over the box; index_add is a scatter-add with such an index. The box is coalesced, so when
// the index is constant along a row and the row is contiguous in both tensors, a row is one
// memcpy (index_select, embedding) or one tight add loop (index_add).
//
// Threads split the box over a dimension other than `dim`: elements that write the same
// destination differ only in `dim`, so they stay in one thread and keep their serial order.
// Results therefore do not depend on the thread count.
#include <algorithm>
#include <cstring>

#include "autograd/record.h"
#include "ops/index_common.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/shape.h"

namespace tessera {

using namespace index_detail;

namespace {

DimVector strides_with_zero(const Tensor& t, int64_t dim) {
  DimVector s = t.strides().vec();
  if (!s.empty()) s[dim] = 0;
  return s;
}

// Index tensor of 1 element per dimension, dtype check shared by gather/scatter.
void check_int64_index(const Tensor& index, std::string_view op) {
  TS_CHECK(index.dtype() == kInt64, TypeError,
           "{}(): argument 'index' expected dtype int64, but got {}", op, index.dtype());
}

// gather kernel: out (box shape) = src[.., index[e], ..]. `index` is int64 with the box shape
// (any strides, expanded allowed); src's sizes are >= the box's outside `dim`.
void gather_kernel(std::string_view op, const Tensor& out, const Tensor& src, int64_t dim,
                   const Tensor& index) {
  if (out.numel() == 0) return;
  const int64_t nd = src.dim();
  const int64_t src_dim_stride = nd == 0 ? 0 : src.stride(dim);
  const int64_t src_dim_size = nd == 0 ? 1 : src.size(dim);
  RowWalker<3> w = make_walker<3>(
      index.sizes(), {out.strides().vec(), strides_with_zero(src, dim), index.strides().vec()});
  coalesce(w);
  const int64_t split = pick_split_dim(w.sizes, -1);
  const int64_t so = w.row_stride(0), ss = w.row_stride(1), si = w.row_stride(2);
  const int64_t* idx = index.data_ptr<int64_t>();
  dispatch_by_size(src.element_size(), [&]<class U>() {
    U* o = static_cast<U*>(out.data_ptr());
    const U* s = static_cast<const U*>(src.data_ptr());
    // Scalars are captured by value so the loops keep them in registers.
    w.walk_parallel(split, kGrainSize,
                    [&, o, s, so, ss, si, src_dim_size, src_dim_stride, dim](
                        const std::array<int64_t, 3>& off, int64_t b, int64_t e) {
                      U* orow = o + off[0];
                      const U* srow = s + off[1];
                      const int64_t* irow = idx + off[2];
                      if (si == 0) {
                        const int64_t v = check_index(irow[0], src_dim_size, dim, op, false);
                        const U* from = srow + v * src_dim_stride;
                        if (so == 1 && ss == 1) {
                          std::memcpy(orow + b, from + b, static_cast<size_t>(e - b) * sizeof(U));
                        } else {
                          for (int64_t j = b; j < e; ++j) orow[j * so] = from[j * ss];
                        }
                        return;
                      }
                      if (so == 1 && si == 1 && ss == 0) {
                        // Gather along the row: out[j] = row[index[j]] (the dim = -1 case).
                        for (int64_t j = b; j < e; ++j) {
                          const int64_t v = check_index(irow[j], src_dim_size, dim, op, false);
                          orow[j] = srow[v * src_dim_stride];
                        }
                        return;
                      }
                      for (int64_t j = b; j < e; ++j) {
                        const int64_t v = check_index(irow[j * si], src_dim_size, dim, op, false);
                        orow[j * so] = srow[j * ss + v * src_dim_stride];
                      }
                    });
  });
}

enum class ScatterMode { kAssign, kAdd };

// scatter kernel: for e in the box of `index`, dst[.., index[e], ..] = src[e] (assign) or
// dst + alpha * src (add). `src` covers the box (any strides; expanded allowed).
void scatter_kernel(std::string_view op, const Tensor& dst, int64_t dim, const Tensor& index,
                    const Tensor& src, ScatterMode mode, const Scalar& alpha) {
  if (index.numel() == 0) return;
  check_writable(dst, op);
  const int64_t nd = dst.dim();
  const int64_t dst_dim_stride = nd == 0 ? 0 : dst.stride(dim);
  const int64_t dst_dim_size = nd == 0 ? 1 : dst.size(dim);
  RowWalker<3> w = make_walker<3>(
      index.sizes(), {strides_with_zero(dst, dim), index.strides().vec(), src.strides().vec()});
  const int64_t kept = coalesce(w, nd == 0 ? -1 : dim);
  const int64_t split = pick_split_dim(w.sizes, kept);
  const int64_t sd = w.row_stride(0), si = w.row_stride(1), ss = w.row_stride(2);
  const int64_t* idx = index.data_ptr<int64_t>();

  if (mode == ScatterMode::kAssign) {
    dispatch_by_size(dst.element_size(), [&]<class U>() {
      U* d = static_cast<U*>(dst.data_ptr());
      const U* s = static_cast<const U*>(src.data_ptr());
      w.walk_parallel(split, kGrainSize,
                      [&, d, s, sd, si, ss, dst_dim_size, dst_dim_stride, dim](
                          const std::array<int64_t, 3>& off, int64_t b, int64_t e) {
                        U* drow = d + off[0];
                        const int64_t* irow = idx + off[1];
                        const U* srow = s + off[2];
                        for (int64_t j = b; j < e; ++j) {
                          const int64_t v = check_index(irow[j * si], dst_dim_size, dim, op, false);
                          drow[j * sd + v * dst_dim_stride] = srow[j * ss];
                        }
                      });
    });
    return;
  }
  visit_dtype<kAddTypes>(dst.dtype(), op, [&]<class T>() {
    using M = opmath_t<T>;
    T* d = static_cast<T*>(dst.data_ptr());
    const T* s = static_cast<const T*>(src.data_ptr());
    const bool unit_alpha = alpha.is_integral() && !alpha.is_bool() && alpha.to_int64() == 1;
    // Integer dtypes truncate a floating alpha, as PyTorch does.
    M a{};
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      a = static_cast<M>(alpha.to_int64());
    } else if constexpr (!std::is_same_v<T, bool>) {
      a = alpha.to<M>();
    }
    auto add_one = [&](T& x, T y) {
      if constexpr (std::is_same_v<T, bool>) {
        x = x || y;
      } else if constexpr (std::is_integral_v<T>) {
        // Wrap-around multiply, as PyTorch's integer arithmetic (no signed-overflow UB).
        const uint64_t prod = static_cast<uint64_t>(static_cast<int64_t>(y)) *
                              static_cast<uint64_t>(static_cast<int64_t>(a));
        x = add_elems<T>(x, static_cast<T>(prod));
      } else {
        if (unit_alpha) {
          x = T(static_cast<M>(x) + static_cast<M>(y));
        } else {
          x = T(static_cast<M>(x) + a * static_cast<M>(y));
        }
      }
    };
    w.walk_parallel(split, kGrainSize,
                    [&, d, s, sd, si, ss, dst_dim_size, dst_dim_stride, dim](
                        const std::array<int64_t, 3>& off, int64_t b, int64_t e) {
                      T* drow = d + off[0];
                      const int64_t* irow = idx + off[1];
                      const T* srow = s + off[2];
                      if (si == 0) {
                        // One destination row for the whole row (index_add, embedding backward).
                        const int64_t v = check_index(irow[0], dst_dim_size, dim, op, false);
                        T* to = drow + v * dst_dim_stride;
                        if (sd == 1 && ss == 1) {
                          for (int64_t j = b; j < e; ++j) add_one(to[j], srow[j]);
                        } else {
                          for (int64_t j = b; j < e; ++j) add_one(to[j * sd], srow[j * ss]);
                        }
                        return;
                      }
                      for (int64_t j = b; j < e; ++j) {
                        const int64_t v = check_index(irow[j * si], dst_dim_size, dim, op, false);
                        add_one(drow[j * sd + v * dst_dim_stride], srow[j * ss]);
                      }
                    });
  });
}

// Shape rules of gather/scatter (PyTorch's gather_shape_check / scatter_shape_check): index has
// the same number of dims as self (0-d counts as 1-d); index.size(d) <= self.size(d) for
// d != dim; and index.size(d) <= src.size(d) for every d when src is given.
void check_scatter_gather_shapes(std::string_view op, const Tensor& self, int64_t dim,
                                 const Tensor& index, const Tensor* src) {
  auto nonempty_dim = [](const Tensor& t) { return std::max<int64_t>(t.dim(), 1); };
  auto size_or_1 = [](const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); };
  TS_CHECK(nonempty_dim(index) == nonempty_dim(self), RuntimeError,
           "{}(): Index tensor must have the same number of dimensions as self tensor, but got "
           "index of {} dims and self of {} dims",
           op, index.dim(), self.dim());
  if (src != nullptr) {
    TS_CHECK(nonempty_dim(index) == nonempty_dim(*src), RuntimeError,
             "{}(): Index tensor must have the same number of dimensions as src tensor, but got "
             "index of {} dims and src of {} dims",
             op, index.dim(), src->dim());
  }
  for (int64_t d = 0; d < nonempty_dim(index); ++d) {
    const int64_t is = size_or_1(index, d);
    const bool ok_self = d == dim || is <= size_or_1(self, d);
    const bool ok_src = src == nullptr || is <= size_or_1(*src, d);
    if (src == nullptr) {
      TS_CHECK(ok_self, RuntimeError,
               "{}(): Size does not match at dimension {} expected index {} to be smaller than "
               "self {} apart from dimension {}",
               op, d, index.sizes().vec(), self.sizes().vec(), dim);
    } else {
      TS_CHECK(ok_self && ok_src, RuntimeError,
               "{}(): Expected index {} to be smaller than self {} apart from dimension {} and "
               "to be smaller size than src {}",
               op, index.sizes().vec(), self.sizes().vec(), dim, src->sizes().vec());
    }
  }
}

// A 1-d index (int64 or int32, 0-d allowed) as a contiguous int64 tensor of shape [n].
Tensor index_as_int64_vector(const Tensor& index, std::string_view op) {
  TS_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, TypeError,
           "{}(): argument 'index' expected dtype int32 or int64, but got {}", op, index.dtype());
  TS_CHECK(index.dim() <= 1, IndexError,
           "{}(): argument 'index' is supposed to be a vector, but got dim: {} with size: {}", op,
           index.dim(), index.sizes().vec());
  Tensor flat = index.reshape({index.numel()});
  return flat.dtype() == kInt64 ? flat : flat.to(kInt64);
}

// The 1-d index viewed with `box`'s shape: stride 1 (or the index's own) at `dim`, 0 elsewhere.
Tensor expand_index_over(const Tensor& index1d, IntArrayRef box, int64_t dim) {
  if (box.empty()) return index1d.view({});
  DimVector strides(box.size(), 0);
  strides[dim] = index1d.stride(0);
  return index1d.as_strided(box, strides);
}

// The embedding / index_select fast path: when the slice after `dim` is contiguous in `a` and
// at least a cache line long, out[o, j, :] = a[o, index[j], :] is one memcpy per (o, j), and
// the source row a few indices ahead is prefetched (random rows are latency-bound otherwise).
// Indices are validated first. Returns false when the layout does not fit.
bool copy_rows_with_prefetch(std::string_view op, const Tensor& out, const Tensor& a, int64_t dim,
                             const Tensor& idx) {
  const int64_t nd = a.dim();
  int64_t inner = 1;
  for (int64_t d = nd - 1; d > dim; --d) {
    if (a.size(d) != 1 && a.stride(d) != inner) return false;
    inner *= a.size(d);
  }
  const int64_t esize = a.element_size();
  const int64_t row_bytes = inner * esize;
  if (row_bytes < 64 || out.numel() == 0) return false;
  const int64_t n = idx.numel(), size = a.size(dim), stride = a.stride(dim);
  const int64_t* ix = idx.data_ptr<int64_t>();
  for (int64_t j = 0; j < n; ++j) check_index(ix[j], size, dim, op, false);
  // Offsets of the dims before `dim` (row-major).
  std::vector<int64_t> outer = {0};
  for (int64_t d = 0; d < dim; ++d) {
    std::vector<int64_t> next;
    next.reserve(outer.size() * static_cast<size_t>(a.size(d)));
    for (int64_t o : outer)
      for (int64_t k = 0; k < a.size(d); ++k) next.push_back(o + k * a.stride(d));
    outer.swap(next);
  }
  const char* src = static_cast<const char*>(a.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  const int64_t total = static_cast<int64_t>(outer.size()) * n;
  constexpr int64_t kAhead = 8;
  auto rows = [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t o = k / n, j = k % n;
      if (k + kAhead < hi) {
        const int64_t ka = k + kAhead;
        const char* p = src + (outer[ka / n] + ix[ka % n] * stride) * esize;
        for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(p + b);
      }
      std::memcpy(dst + k * row_bytes, src + (outer[o] + ix[j] * stride) * esize,
                  static_cast<size_t>(row_bytes));
    }
  };
  if (total * inner < kGrainSize || get_num_threads() == 1 || in_parallel_region()) {
    rows(0, total);
  } else {
    parallel_for(0, total, std::max<int64_t>(1, kGrainSize / inner), rows);
  }
  return true;
}

Tensor index_select_impl(std::string_view op, const Tensor& a, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), op);
  Tensor idx = index_as_int64_vector(index, op);
  const int64_t n = idx.numel();
  if (a.dim() == 0) {
    TS_CHECK(n == 1, IndexError,
             "{}(): index to a 0-dimensional tensor can have only 1 value, but got {} values", op,
             n);
    check_index(idx.data_ptr<int64_t>()[0], 1, 0, op, false);
    return a.clone();
  }
  DimVector out_sizes = a.sizes().vec();
  out_sizes[dim] = n;
  Tensor out = empty(out_sizes, a.dtype());
  if (!copy_rows_with_prefetch(op, out, a, dim, idx)) {
    gather_kernel(op, out, a, dim, expand_index_over(idx, out_sizes, dim));
  }
  return out;
}

}  // namespace

Tensor gather_kernel_op(const Tensor& a, int64_t dim, const Tensor& index);

// The selected rows' gradients are added back at their indices (repeats accumulate).
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  autograd::Recorder rec({a});
  Tensor out = index_select_impl("index_select", a, dim, index);
  if (rec) {
    const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "index_select");
    rec.finish(
        "IndexSelectBackward0", {out},
        [sizes = a.sizes().vec(), d, index](const autograd::tensor_list& g, const autograd::Node&) {
          const Tensor idx = index.dim() == 0 ? index.reshape({1}) : index;
          return autograd::tensor_list{
              zeros(sizes, g[0].dtype())
                  .index_add(d, idx, g[0].dim() == 0 ? g[0].reshape({1}) : g[0])};
        });
  }
  return out;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  autograd::Recorder rec({a});
  Tensor out = gather_kernel_op(a, dim, index);
  if (rec) {
    const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "gather");
    rec.finish(
        "GatherBackward0", {out},
        [sizes = a.sizes().vec(), d, index](const autograd::tensor_list& g, const autograd::Node&) {
          return autograd::tensor_list{zeros(sizes, g[0].dtype()).scatter_add(d, index, g[0])};
        });
  }
  return out;
}

Tensor gather_kernel_op(const Tensor& a, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "gather");
  check_int64_index(index, "gather");
  Tensor out = empty(index.sizes(), a.dtype());
  if (index.numel() == 0) return out;
  check_scatter_gather_shapes("gather", a, dim, index, nullptr);
  gather_kernel("gather", out, a, dim, index);
  return out;
}

namespace {

Tensor scatter_impl(std::string_view op, const Tensor& a, int64_t dim, const Tensor& index,
                    const Tensor& src, bool src_is_value, ScatterMode mode) {
  dim = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), op);
  check_int64_index(index, op);
  if (!src_is_value) {
    TS_CHECK(src.dtype() == a.dtype(), TypeError,
             "{}(): expected self.dtype to be equal to src.dtype, but got self {} and src {}", op,
             a.dtype(), src.dtype());
  }
  Tensor out = a.clone();
  if (index.numel() == 0) return out;
  check_scatter_gather_shapes(op, a, dim, index, src_is_value ? nullptr : &src);
  const Tensor src_box =
      src_is_value ? src.as_strided(index.sizes(), DimVector(index.dim(), 0)) : src;
  scatter_kernel(op, out, dim, index, src_box, mode, Scalar(int64_t{1}));
  return out;
}

}  // namespace

namespace {

// The gradient of scatter's src: g at the positions each src element went to, for the box of
// the index; src elements outside that box were not used (zero). PyTorch 1.13 returns the
// index-shaped gather and fails its own shape check when src is larger than the index.
Tensor scatter_source_grad(const Tensor& g, int64_t dim, const Tensor& index,
                           IntArrayRef src_sizes) {
  const Tensor r = g.gather(dim, index);
  if (r.sizes() == src_sizes) return r;
  Tensor out = zeros(src_sizes, g.dtype());
  Tensor box = out;
  for (int64_t d = 0; d < r.dim(); ++d) box = box.narrow(d, 0, r.size(d));
  box.copy_(r);
  return out;
}

}  // namespace

// scatter: the overwritten positions of self get no gradient, src gets g at its targets
// (ScatterBackward0; a value: ScatterBackward1). scatter_add: self gets g, src the same
// gather (ScatterAddBackward0).
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  autograd::Recorder rec({a, src});
  Tensor out = scatter_impl("scatter", a, dim, index, src, false, ScatterMode::kAssign);
  if (rec) {
    const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "scatter");
    rec.finish(
        "ScatterBackward0", {out},
        [d, index, ss = src.sizes().vec()](const autograd::tensor_list& g, const autograd::Node&) {
          return autograd::tensor_list{g[0].scatter(d, index, 0),
                                       scatter_source_grad(g[0], d, index, ss)};
        });
  }
  return out;
}

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Scalar& value) {
  autograd::Recorder rec({a});
  Tensor out = scatter_impl("scatter", a, dim, index, scalar_tensor(value, a.dtype()), true,
                            ScatterMode::kAssign);
  if (rec) {
    const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "scatter");
    rec.finish("ScatterBackward1", {out},
               [d, index](const autograd::tensor_list& g, const autograd::Node&) {
                 return autograd::tensor_list{g[0].scatter(d, index, 0)};
               });
  }
  return out;
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  autograd::Recorder rec({a, src});
  Tensor out = scatter_impl("scatter_add", a, dim, index, src, false, ScatterMode::kAdd);
  if (rec) {
    const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "scatter_add");
    rec.finish(
        "ScatterAddBackward0", {out},
        [d, index, ss = src.sizes().vec()](const autograd::tensor_list& g, const autograd::Node&) {
          return autograd::tensor_list{g[0], scatter_source_grad(g[0], d, index, ss)};
        });
  }
  return out;
}

namespace {

// index_add's source gradient: alpha * g.index_select(dim, index), summed over the
// dimensions along which the source slice was broadcast to the destination slice (the
// forward aligns the source slice to the right of self's, the index dimension leading).
Tensor index_add_source_grad(const Tensor& g, int64_t dim, const Tensor& idx, IntArrayRef src_sizes,
                             const Scalar& alpha) {
  Tensor r = g.dim() == 0 ? g.reshape({1}) : g.index_select(dim, idx);
  if (!(alpha.is_integral() && !alpha.is_bool() && alpha.to_int64() == 1)) r = r.mul(alpha);
  if (r.sizes() == src_sizes) return r;
  if (src_sizes.empty()) return r.sum();
  const int64_t sd = wrap_dim(dim, static_cast<int64_t>(src_sizes.size()), "index_add");
  DimVector moved_src(src_sizes.begin(), src_sizes.end());
  moved_src.erase(moved_src.begin() + sd);
  Tensor m = r.dim() == 0 ? r.reshape({1}) : r.movedim(dim, 0);
  // Sum the destination-slice dims the source slice lacks or had as 1, then restore.
  DimVector target = {m.size(0)};
  target.insert(target.end(), moved_src.begin(), moved_src.end());
  const int64_t pad = m.dim() - static_cast<int64_t>(target.size());
  DimVector lead;
  for (int64_t k = 1; k <= pad; ++k) lead.push_back(k);
  if (!lead.empty()) m = m.sum(lead);
  DimVector ones_at;
  for (int64_t k = 1; k < m.dim(); ++k)
    if (target[k] == 1 && m.size(k) != 1) ones_at.push_back(k);
  if (!ones_at.empty()) m = m.sum(ones_at, /*keepdim=*/true);
  return m.reshape(target).movedim(0, sd);
}

}  // namespace

Tensor index_add_kernel(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source,
                        const Scalar& alpha);

// self gets g; the source g at its indices times alpha (IndexAddBackward0).
Tensor index_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha) {
  autograd::Recorder rec({a, source});
  Tensor out = index_add_kernel(a, dim, index, source, alpha);
  if (rec) {
    TS_CHECK(!a.is_complex(), RuntimeError,
             "index_add(): the derivative for complex inputs is not implemented");
    const int64_t d = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "index_add");
    rec.finish(
        "IndexAddBackward0", {out},
        [d, idx = index_as_int64_vector(index, "index_add"), alpha,
         src_sizes = source.sizes().vec()](const autograd::tensor_list& g, const autograd::Node&) {
          return autograd::tensor_list{g[0], index_add_source_grad(g[0], d, idx, src_sizes, alpha)};
        });
  }
  return out;
}

// For each i: out.select(dim, index[i]) += alpha * source.select(dim, i), the source slice
// broadcast to the destination slice (as PyTorch 1.13 does).
Tensor index_add_kernel(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source,
                        const Scalar& alpha) {
  constexpr std::string_view op = "index_add";
  dim = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), op);
  Tensor idx = index_as_int64_vector(index, op);
  TS_CHECK(source.dtype() == a.dtype(), TypeError,
           "{}(): self ({}) and source ({}) must have the same scalar type", op, a.dtype(),
           source.dtype());
  const int64_t n = idx.numel();
  const int64_t source_n = source.dim() == 0 ? 1 : source.size(wrap_dim(dim, source.dim(), op));
  TS_CHECK(n == source_n, RuntimeError,
           "{}(): Number of indices ({}) should be equal to source.size(dim): ({}), for dim: {}",
           op, n, source_n, dim);
  if (!is_complex(a.dtype()) && alpha.is_complex()) {
    TS_THROW(TypeError, "{}(): argument 'alpha' expected a real number for dtype {}, but got {}",
             op, a.dtype(), alpha.repr());
  }
  Tensor out = a.clone();
  if (n == 0) return out;
  if (a.dim() == 0) {
    // Every index must be 0; the 0-d source (or 1-element source) adds n times.
    Tensor src_box = source.reshape({n});
    Tensor out1 = out.view({1});
    scatter_kernel(op, out1, 0, idx, src_box, ScatterMode::kAdd, alpha);
    return out;
  }
  // The source viewed as [.., n, ..] with the destination's slice shape (broadcast).
  DimVector box = a.sizes().vec();
  box[dim] = n;
  Tensor src_moved = source.dim() == 0 ? source.reshape({1}) : source.movedim(dim, 0);
  DimVector moved_box = {n};
  for (int64_t d = 0; d < a.dim(); ++d)
    if (d != dim) moved_box.push_back(a.size(d));
  TS_CHECK(src_moved.dim() <= static_cast<int64_t>(moved_box.size()), RuntimeError,
           "{}(): source slice shape {} does not broadcast to the destination slice shape of "
           "self {} at dim {}",
           op, source.sizes().vec(), a.sizes().vec(), dim);
  // Align the source slice to the right of the destination slice (broadcast), n leading.
  DimVector src_sizes = src_moved.sizes().vec();
  DimVector src_strides = src_moved.strides().vec();
  DimVector view_sizes = {n}, view_strides = {src_strides[0]};
  const size_t pad = moved_box.size() - src_sizes.size();
  for (size_t k = 0; k < pad; ++k) {
    view_sizes.push_back(1);
    view_strides.push_back(0);
  }
  for (size_t k = 1; k < src_sizes.size(); ++k) {
    view_sizes.push_back(src_sizes[k]);
    view_strides.push_back(src_strides[k]);
  }
  for (size_t k = 1; k < moved_box.size(); ++k) {
    TS_CHECK(view_sizes[k] == moved_box[k] || view_sizes[k] == 1, RuntimeError,
             "{}(): source slice shape {} does not broadcast to the destination slice shape of "
             "self {} at dim {}",
             op, source.sizes().vec(), a.sizes().vec(), dim);
    if (view_sizes[k] == 1) view_strides[k] = 0;
  }
  Tensor src_view =
      src_moved.as_strided(moved_box, view_strides, src_moved.storage_offset()).movedim(0, dim);
  scatter_kernel(op, out, dim, expand_index_over(idx, box, dim), src_view, ScatterMode::kAdd,
                 alpha);
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  TS_CHECK(weight.dim() == 2, RuntimeError,
           "embedding(): argument 'weight' expected a 2-D tensor, but got {} dims of shape {}",
           weight.dim(), weight.sizes().vec());
  TS_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, TypeError,
           "embedding(): argument 'indices' expected dtype int64 or int32, but got {}",
           indices.dtype());
  if (padding_idx) {
    const int64_t rows = weight.size(0);
    TS_CHECK(*padding_idx >= -rows && *padding_idx < rows, ValueError,
             "embedding(): argument 'padding_idx' expected a value in [{}, {}], but got {}", -rows,
             rows - 1, *padding_idx);
  }
  // padding_idx only changes the gradient; the forward is a plain row lookup.
  autograd::Recorder rec({weight});
  const Tensor flat = indices.reshape({indices.numel()});
  Tensor rows = index_select_impl("embedding", weight, 0, flat);
  DimVector out_sizes = indices.sizes().vec();
  out_sizes.push_back(weight.size(1));
  Tensor out = rows.view(out_sizes);
  if (rec) {
    const int64_t pad =
        padding_idx ? (*padding_idx < 0 ? *padding_idx + weight.size(0) : *padding_idx) : -1;
    rec.finish("EmbeddingBackward0", {out},
               [sizes = weight.sizes().vec(), flat, pad](const autograd::tensor_list& g,
                                                         const autograd::Node&) {
                 Tensor gw = zeros(sizes, g[0].dtype())
                                 .index_add(0, flat.to(kInt64), g[0].reshape({-1, sizes[1]}));
                 if (pad >= 0) gw.select(0, pad).zero_();  // the padding row learns nothing
                 return autograd::tensor_list{gw};
               });
  }
  return out;
}

// ---- Tensor methods -----------------------------------------------------------------------

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return tessera::index_select(*this, dim, index);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return tessera::gather(*this, dim, index);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tessera::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Scalar& value) const {
  return tessera::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tessera::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source,
                         const Scalar& alpha) const {
  return tessera::index_add(*this, dim, index, source, alpha);
}

}  // namespace tessera
