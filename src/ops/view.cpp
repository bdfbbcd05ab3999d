// Views: new sizes/strides/offset over the same storage; none of these copies data
// (reshape copies only when no view can express the new shape).
#include <algorithm>
#include <numeric>

#include "autograd/record.h"
#include "core/tensor_make.h"
#include "tessera/core/tensor.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"

namespace tessera {

namespace {

// A view of `self` that requires grad when self does; `back` maps the view's gradient to
// self's shape (PyTorch's ViewBackward0, PermuteBackward0, ...).
template <class F>
Tensor with_view_grad(const Tensor& self, Tensor out, const char* name, F back) {
  autograd::Recorder rec({self});
  if (rec)
    rec.finish(name, {out},
               [back = std::move(back)](const autograd::tensor_list& g, const autograd::Node&) {
                 return autograd::tensor_list{back(g[0])};
               });
  return out;
}

// Backward of a view that only changes the shape.
auto reshape_to(const Tensor& self) {
  return [sizes = self.sizes().vec()](const Tensor& g) { return g.reshape(sizes); };
}

// Backward of a view that picks some elements: the gradient lands in a zero tensor of the
// input's shape through the same view.
template <class View>
auto scatter_into(const Tensor& self, View view) {
  return [sizes = self.sizes().vec(), view](const Tensor& g) {
    Tensor r = zeros(sizes, g.dtype());
    view(r).copy_(g);
    return r;
  };
}

// Resolves one -1 in `shape` so that the product equals numel.
DimVector infer_size(IntArrayRef shape, int64_t numel, std::string_view op) {
  DimVector out(shape.begin(), shape.end());
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TS_CHECK(!infer, RuntimeError, "{}(): only one dimension can be inferred", op);
      infer = i;
    } else {
      TS_CHECK(shape[i] >= 0, RuntimeError, "{}(): invalid shape dimension {}", op, shape[i]);
      TS_CHECK(!__builtin_mul_overflow(known, shape[i], &known), ValueError,
               "{}(): shape [{}] overflows int64", op, fmt::join(shape, ", "));
    }
  }
  if (infer) {
    TS_CHECK(known != 0 && numel % known == 0, RuntimeError,
             "{}(): shape '[{}]' is invalid for input of size {}", op, fmt::join(shape, ", "),
             numel);
    out[*infer] = numel / known;
  } else {
    TS_CHECK(known == numel, RuntimeError, "{}(): shape '[{}]' is invalid for input of size {}", op,
             fmt::join(shape, ", "), numel);
  }
  return out;
}

// Strides that let a tensor of (old_sizes, old_strides) be viewed as new_sizes, or nullopt
// when some new dimension would span two non-contiguous chunks of the old layout.
std::optional<DimVector> view_strides(IntArrayRef old_sizes, IntArrayRef old_strides,
                                      IntArrayRef new_sizes) {
  DimVector out(new_sizes.size(), 1);
  if (old_sizes.empty()) return out;
  const int64_t numel =
      std::accumulate(old_sizes.begin(), old_sizes.end(), int64_t{1}, std::multiplies<>());
  if (numel == 0) {
    if (old_sizes == new_sizes) return old_strides.vec();
    return contiguous_strides(new_sizes);
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    // A chunk ends where the next-outer dim is not laid out right after this one.
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// Where a strided tensor's elements live in its storage.
struct StridedGeometry {
  DimVector sizes, strides;
  int64_t offset = 0;
  int64_t end() const { return offset + storage_extent(sizes, strides); }  // one past the last
};

// The storage position (minus `shift`) of every element of `geo`, as an int64 tensor of its
// shape.
Tensor storage_positions(const StridedGeometry& geo, int64_t shift) {
  Tensor pos = scalar_tensor(geo.offset - shift, kInt64);
  const int64_t nd = static_cast<int64_t>(geo.sizes.size());
  for (int64_t k = 0; k < nd; ++k) {
    DimVector shape(static_cast<size_t>(nd), 1);
    shape[k] = geo.sizes[k];
    pos = pos.add(arange(geo.sizes[k], TensorOptions(kInt64)).mul(geo.strides[k]).view(shape));
  }
  return pos.expand(geo.sizes);
}

// PyTorch's as_strided_backward: each output element's gradient goes to the storage element
// it reads (summed where output elements overlap), then is read back through the input's
// geometry; storage the input does not cover gets nothing. The input's own elements must not
// overlap (checked when recording).
Tensor as_strided_backward(const Tensor& g, const StridedGeometry& in, const StridedGeometry& out) {
  const int64_t shift = std::min(in.offset, out.offset);
  Tensor flat = zeros({std::max(in.end(), out.end()) - shift}, g.dtype());
  Tensor region = flat.as_strided(out.sizes, out.strides, out.offset - shift);
  if (!has_internal_overlap(region)) {
    region.copy_(g);
  } else {
    flat = flat.index_add(0, storage_positions(out, shift).reshape({-1}), g.reshape({-1}));
  }
  return flat.as_strided(in.sizes, in.strides, in.offset - shift).contiguous();
}

}  // namespace

Tensor Tensor::as_strided(IntArrayRef size, IntArrayRef stride,
                          std::optional<int64_t> offset) const {
  autograd::Recorder rec({*this});
  TS_CHECK(!rec || !has_internal_overlap(*this), RuntimeError,
           "as_strided(): the derivative for an input whose elements overlap in memory (sizes "
           "[{}], strides [{}]) is not implemented: clone() the input first",
           fmt::join(sizes(), ", "), fmt::join(strides(), ", "));
  TS_CHECK(size.size() == stride.size(), RuntimeError,
           "as_strided(): mismatch in length of strides and shape: {} vs {}", stride.size(),
           size.size());
  const int64_t off = offset.value_or(storage_offset());
  TS_CHECK(off >= 0, RuntimeError, "as_strided(): storage_offset must be non-negative, got {}",
           off);
  for (size_t i = 0; i < stride.size(); ++i)
    TS_CHECK(stride[i] >= 0, RuntimeError,
             "as_strided(): negative strides are not supported, got {} at dimension {}", stride[i],
             i);
  checked_numel(size, "as_strided");
  const int64_t extent = storage_extent(size, stride);
  const int64_t avail = static_cast<int64_t>(storage()->nbytes()) / element_size();
  TS_CHECK(extent == 0 || off + extent <= avail, RuntimeError,
           "as_strided(): setStorage: sizes [{}], strides [{}], storage offset {} require a "
           "storage of {} elements, but the storage has only {}",
           fmt::join(size, ", "), fmt::join(stride, ", "), off, off + extent, avail);
  Tensor out = make_view(*this, size.vec(), stride.vec(), off);
  if (rec)
    rec.finish("AsStridedBackward0", {out},
               [in = StridedGeometry{sizes().vec(), strides().vec(), storage_offset()},
                geo = StridedGeometry{size.vec(), stride.vec(), off}](
                   const autograd::tensor_list& g, const autograd::Node&) {
                 return autograd::tensor_list{as_strided_backward(g[0], in, geo)};
               });
  return out;
}

Tensor Tensor::view(IntArrayRef size) const {
  DimVector shape = infer_size(size, numel(), "view");
  auto st = view_strides(sizes(), strides(), shape);
  TS_CHECK(st.has_value(), RuntimeError,
           "view(): view size is not compatible with input tensor's size and stride (at least "
           "one dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  return with_view_grad(*this, make_view(*this, std::move(shape), std::move(*st), storage_offset()),
                        "ViewBackward0", reshape_to(*this));
}

Tensor Tensor::view(ScalarType t) const {
  if (t == dtype()) return *this;
  autograd::check_no_grad_needed({this, 1}, "view");
  const int64_t old_size = element_size(), new_size = tessera::element_size(t);
  if (old_size == new_size)
    return make_view(*this, sizes().vec(), strides().vec(), storage_offset(), t);
  TS_CHECK(dim() > 0 && stride(-1) == 1, RuntimeError,
           "view(): changing dtype from {} to {} (different element size) requires the last "
           "dimension to be contiguous (stride 1), but got {}",
           dtype(), t, dim() > 0 ? stride(-1) : 0);
  DimVector sz = sizes().vec(), st = strides().vec();
  if (new_size > old_size) {
    const int64_t ratio = new_size / old_size;
    TS_CHECK(sz.back() % ratio == 0 && storage_offset() % ratio == 0, RuntimeError,
             "view(): size of the last dimension ({}) and storage offset ({}) must be divisible "
             "by {} to view {} as {}",
             sz.back(), storage_offset(), ratio, dtype(), t);
    for (size_t i = 0; i + 1 < st.size(); ++i) {
      TS_CHECK(st[i] % ratio == 0, RuntimeError,
               "view(): stride {} of dimension {} must be divisible by {} to view {} as {}", st[i],
               i, ratio, dtype(), t);
      st[i] /= ratio;
    }
    sz.back() /= ratio;
    return make_view(*this, sz, st, storage_offset() / ratio, t);
  }
  const int64_t ratio = old_size / new_size;
  for (size_t i = 0; i + 1 < st.size(); ++i) st[i] *= ratio;
  sz.back() *= ratio;
  return make_view(*this, sz, st, storage_offset() * ratio, t);
}

Tensor Tensor::reshape(IntArrayRef size) const {
  DimVector shape = infer_size(size, numel(), "reshape");
  if (auto st = view_strides(sizes(), strides(), shape))
    return with_view_grad(*this,
                          make_view(*this, std::move(shape), std::move(*st), storage_offset()),
                          "ViewBackward0", reshape_to(*this));
  return clone().view(shape);
}

Tensor Tensor::permute(IntArrayRef dims) const {
  TS_CHECK(static_cast<int64_t>(dims.size()) == dim(), RuntimeError,
           "permute(): number of dims don't match: expected {} dims, but got {}", dim(),
           dims.size());
  DimVector sz(dim()), st(dim());
  std::vector<bool> seen(dim(), false);
  for (int64_t i = 0; i < dim(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute", "dims");
    TS_CHECK(!seen[d], RuntimeError, "permute(): repeated dim {} in dims [{}]", d,
             fmt::join(dims, ", "));
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  DimVector inverse(dim());
  for (int64_t i = 0; i < dim(); ++i) inverse[wrap_dim(dims[i], dim(), "permute", "dims")] = i;
  return with_view_grad(*this, make_view(*this, std::move(sz), std::move(st), storage_offset()),
                        "PermuteBackward0",
                        [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) {
    wrap_dim(d0, 0, "transpose", "dim0");
    wrap_dim(d1, 0, "transpose", "dim1");
    return with_view_grad(*this, make_view(*this, {}, {}, storage_offset()), "TransposeBackward0",
                          reshape_to(*this));
  }
  d0 = wrap_dim(d0, dim(), "transpose", "dim0");
  d1 = wrap_dim(d1, dim(), "transpose", "dim1");
  DimVector sz = sizes().vec(), st = strides().vec();
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return with_view_grad(*this, make_view(*this, std::move(sz), std::move(st), storage_offset()),
                        "TransposeBackward0",
                        [d0, d1](const Tensor& g) { return g.transpose(d0, d1); });
}

Tensor Tensor::t() const {
  TS_CHECK(dim() <= 2, RuntimeError, "t(): expects a tensor with <= 2 dimensions, but self is {}D",
           dim());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::movedim(int64_t source, int64_t destination) const {
  const int64_t s = wrap_dim(source, dim(), "movedim", "source");
  const int64_t d = wrap_dim(destination, dim(), "movedim", "destination");
  DimVector order;
  for (int64_t i = 0; i < dim(); ++i)
    if (i != s) order.push_back(i);
  if (dim() > 0) order.insert(order.begin() + d, s);
  return permute(order);
}

Tensor Tensor::expand(IntArrayRef size) const {
  TS_CHECK(static_cast<int64_t>(size.size()) >= dim(), RuntimeError,
           "expand(): the number of sizes provided ({}) must be greater or equal to the number "
           "of dimensions in the tensor ({})",
           size.size(), dim());
  const int64_t nd = static_cast<int64_t>(size.size());
  DimVector sz(nd), st(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t src = i - (nd - dim());
    int64_t want = size[i];
    if (src < 0) {
      TS_CHECK(want >= 0, RuntimeError,
               "expand(): the expanded size of the tensor ({}) isn't allowed in a leading, "
               "non-existing dimension {}",
               want, i);
      sz[i] = want;
      st[i] = 0;
      continue;
    }
    const int64_t have = sizes()[src];
    if (want == -1) want = have;
    TS_CHECK(have == want || have == 1, RuntimeError,
             "expand(): the expanded size of the tensor ({}) must match the existing size ({}) "
             "at non-singleton dimension {}. Target sizes: [{}]. Tensor sizes: [{}]",
             want, have, i, fmt::join(size, ", "), fmt::join(sizes(), ", "));
    sz[i] = want;
    st[i] = have == want ? strides()[src] : 0;
  }
  return with_view_grad(
      *this, make_view(*this, std::move(sz), std::move(st), storage_offset()), "ExpandBackward0",
      [sizes = sizes().vec()](const Tensor& g) { return autograd::sum_to(g, sizes); });
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  TS_CHECK(dim() > 0, IndexError, "slice(): cannot slice a 0-dim tensor");
  d = wrap_dim(d, dim(), "slice");
  TS_CHECK(step > 0, ValueError, "slice(): argument 'step' must be positive, but got {}", step);
  const int64_t n = sizes()[d];
  auto clampi = [n](int64_t v) {
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  const int64_t s = start ? clampi(*start) : 0;
  const int64_t e = std::max(s, end ? clampi(*end) : n);
  DimVector sz = sizes().vec(), st = strides().vec();
  sz[d] = (e - s + step - 1) / step;
  const int64_t off = storage_offset() + (sz[d] > 0 ? s * st[d] : 0);
  st[d] *= step;
  return with_view_grad(
      *this, make_view(*this, std::move(sz), std::move(st), off), "SliceBackward0",
      scatter_into(*this, [d, s, e, step](const Tensor& r) { return r.slice(d, s, e, step); }));
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  TS_CHECK(dim() > 0, IndexError, "narrow(): cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = sizes()[d];
  TS_CHECK(start >= -n && start <= n, IndexError,
           "narrow(): start ({}) is out of range for dimension {} of size {}", start, d, n);
  if (start < 0) start += n;
  TS_CHECK(length >= 0 && start + length <= n, IndexError,
           "narrow(): start ({}) + length ({}) exceeds dimension size ({})", start, length, n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  TS_CHECK(dim() > 0, IndexError, "select(): cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = sizes()[d];
  TS_CHECK(index >= -n && index < n, IndexError,
           "select(): index {} out of range for tensor of size [{}] at dimension {}", index,
           fmt::join(sizes(), ", "), d);
  if (index < 0) index += n;
  DimVector sz = sizes().vec(), st = strides().vec();
  const int64_t off = storage_offset() + index * st[d];
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return with_view_grad(
      *this, make_view(*this, std::move(sz), std::move(st), off), "SelectBackward0",
      scatter_into(*this, [d, index](const Tensor& r) { return r.select(d, index); }));
}

Tensor Tensor::squeeze() const {
  DimVector sz, st;
  for (int64_t i = 0; i < dim(); ++i)
    if (sizes()[i] != 1) sz.push_back(sizes()[i]), st.push_back(strides()[i]);
  return with_view_grad(*this, make_view(*this, std::move(sz), std::move(st), storage_offset()),
                        "SqueezeBackward0", reshape_to(*this));
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) {
    wrap_dim(d, 0, "squeeze");
    return *this;
  }
  d = wrap_dim(d, dim(), "squeeze");
  if (sizes()[d] != 1)
    return with_view_grad(*this, make_view(*this, sizes().vec(), strides().vec(), storage_offset()),
                          "SqueezeBackward1", reshape_to(*this));
  DimVector sz = sizes().vec(), st = strides().vec();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return with_view_grad(*this, make_view(*this, std::move(sz), std::move(st), storage_offset()),
                        "SqueezeBackward1", reshape_to(*this));
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  DimVector sz = sizes().vec(), st = strides().vec();
  const int64_t new_stride = d < dim() ? sz[d] * st[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return with_view_grad(*this, make_view(*this, std::move(sz), std::move(st), storage_offset()),
                        "UnsqueezeBackward0", reshape_to(*this));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten", "start_dim");
  end_dim = wrap_dim(end_dim, dim(), "flatten", "end_dim");
  TS_CHECK(start_dim <= end_dim, RuntimeError,
           "flatten(): start_dim ({}) cannot come after end_dim ({})", start_dim, end_dim);
  if (start_dim == end_dim) return *this;
  DimVector shape;
  for (int64_t i = 0; i < start_dim; ++i) shape.push_back(sizes()[i]);
  int64_t prod = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) prod *= sizes()[i];
  shape.push_back(prod);
  for (int64_t i = end_dim + 1; i < dim(); ++i) shape.push_back(sizes()[i]);
  return reshape(shape);
}

Tensor Tensor::unflatten(int64_t d, IntArrayRef sz) const {
  d = wrap_dim(d, dim(), "unflatten");
  TS_CHECK(!sz.empty(), RuntimeError, "unflatten(): argument 'sizes' must be non-empty");
  DimVector inner = infer_size(sz, sizes()[d], "unflatten");
  DimVector shape;
  for (int64_t i = 0; i < d; ++i) shape.push_back(sizes()[i]);
  shape.insert(shape.end(), inner.begin(), inner.end());
  for (int64_t i = d + 1; i < dim(); ++i) shape.push_back(sizes()[i]);
  return view(shape);
}

// Window j of the result holds input elements [j step, j step + size) along d: the
// gradient adds every window back there (windows overlap when step < size). UnfoldBackward0.
Tensor Tensor::unfold(int64_t d, int64_t size, int64_t step) const {
  const int64_t nd = std::max<int64_t>(dim(), 1);
  d = wrap_dim(d, nd, "unfold", "dimension");
  const int64_t n = dim() == 0 ? 1 : sizes()[d];
  TS_CHECK(size >= 0 && size <= n, RuntimeError,
           "unfold(): maximum size for tensor at dimension {} is {} but size is {}", d, n, size);
  TS_CHECK(step > 0, RuntimeError, "unfold(): step is {} but must be > 0", step);
  DimVector sz = sizes().vec(), st = strides().vec();
  if (dim() == 0) {
    return with_view_grad(*this, make_view(*this, {size}, {1}, storage_offset()), "UnfoldBackward0",
                          [](const Tensor& g) { return g.sum(); });
  }
  const int64_t old_stride = st[d];
  const int64_t windows = (n - size) / step + 1;
  sz[d] = windows;
  st[d] = old_stride * step;
  sz.push_back(size);
  st.push_back(old_stride);
  return with_view_grad(
      *this, make_view(*this, std::move(sz), std::move(st), storage_offset()), "UnfoldBackward0",
      [in_sizes = sizes().vec(), d, size, step, windows](const Tensor& g) {
        // Element (j, k) of the windows comes from position j step + k along d.
        const Tensor pos = arange(windows, TensorOptions(kInt64))
                               .mul(step)
                               .view({windows, 1})
                               .add(arange(size, TensorOptions(kInt64)).view({1, size}))
                               .reshape({-1});
        const Tensor flat = g.movedim(-1, d + 1).flatten(d, d + 1);
        return zeros(in_sizes, g.dtype()).index_add(d, pos, flat);
      });
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  const int64_t d1 = wrap_dim(dim1, dim(), "diagonal", "dim1");
  const int64_t d2 = wrap_dim(dim2, dim(), "diagonal", "dim2");
  TS_CHECK(d1 != d2, RuntimeError, "diagonal(): dimensions cannot be identical {}, {}", dim1, dim2);
  int64_t off = storage_offset();
  int64_t len;
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(sizes()[d1], sizes()[d2] - offset), 0);
    if (len > 0) off += offset * strides()[d2];
  } else {
    len = std::max<int64_t>(std::min(sizes()[d1] + offset, sizes()[d2]), 0);
    if (len > 0) off -= offset * strides()[d1];
  }
  DimVector sz, st;
  for (int64_t i = 0; i < dim(); ++i)
    if (i != d1 && i != d2) sz.push_back(sizes()[i]), st.push_back(strides()[i]);
  sz.push_back(len);
  st.push_back(strides()[d1] + strides()[d2]);
  return with_view_grad(*this, make_view(*this, std::move(sz), std::move(st), off),
                        "DiagonalBackward0", scatter_into(*this, [offset, d1, d2](const Tensor& r) {
                          return r.diagonal(offset, d1, d2);
                        }));
}

// view_as_real and view_as_complex are each other's derivative (ViewAsRealBackward0,
// ViewAsComplexBackward0).
Tensor view_as_real(const Tensor& a) {
  TS_CHECK(a.is_complex(), TypeError, "view_as_real(): expected a complex tensor, but got dtype {}",
           a.dtype());
  DimVector sz = a.sizes().vec(), st = a.strides().vec();
  for (auto& s : st) s *= 2;
  sz.push_back(2);
  st.push_back(1);
  return with_view_grad(
      a,
      make_view(a, std::move(sz), std::move(st), a.storage_offset() * 2, to_real_type(a.dtype())),
      "ViewAsRealBackward0", [](const Tensor& g) { return view_as_complex(g.contiguous()); });
}

Tensor view_as_complex(const Tensor& a) {
  TS_CHECK(a.dtype() == kFloat32 || a.dtype() == kFloat64, TypeError,
           "view_as_complex(): expected a float32 or float64 tensor, but got {}", a.dtype());
  TS_CHECK(a.dim() > 0 && a.sizes().back() == 2, RuntimeError,
           "view_as_complex(): tensor must have a last dimension of size 2, but got shape [{}]",
           fmt::join(a.sizes(), ", "));
  TS_CHECK(a.strides().back() == 1, RuntimeError,
           "view_as_complex(): tensor must have a last dimension with stride 1, but got {}",
           a.strides().back());
  DimVector sz(a.sizes().begin(), a.sizes().end() - 1),
      st(a.strides().begin(), a.strides().end() - 1);
  for (auto& s : st) {
    TS_CHECK(s % 2 == 0, RuntimeError,
             "view_as_complex(): tensor must have a stride divisible by 2 for all but the last "
             "dimension, but got strides [{}]",
             fmt::join(a.strides(), ", "));
    s /= 2;
  }
  TS_CHECK(a.storage_offset() % 2 == 0, RuntimeError,
           "view_as_complex(): tensor must have a storage_offset divisible by 2, but got {}",
           a.storage_offset());
  return with_view_grad(a,
                        make_view(a, std::move(sz), std::move(st), a.storage_offset() / 2,
                                  to_complex_type(a.dtype())),
                        "ViewAsComplexBackward0",
                        [](const Tensor& g) { return view_as_real(g.contiguous()); });
}

Tensor Tensor::real() const {
  if (!is_complex()) return *this;
  return view_as_real(*this).select(-1, 0);
}

Tensor Tensor::imag() const {
  TS_CHECK(is_complex(), RuntimeError,
           "imag(): imag is not implemented for tensors with non-complex dtypes ({})", dtype());
  return view_as_real(*this).select(-1, 1);
}

Tensor real(const Tensor& a) {
  return a.real();
}
Tensor imag(const Tensor& a) {
  return a.imag();
}

}  // namespace tessera
