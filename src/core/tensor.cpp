#include "tessera/core/tensor.h"

#include <algorithm>
#include <limits>

#include "core/dtype_dispatch.h"
#include "core/tensor_make.h"
#include "tessera/autograd/grad_mode.h"

namespace tessera {

int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op, std::string_view arg) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dims 0 and -1
  TS_CHECK(dim >= -n && dim < n, IndexError,
           "{}(): argument '{}' expected a dimension in range [{}, {}], but got {}", op, arg, -n,
           n - 1, dim);
  return dim < 0 ? dim + n : dim;
}

int64_t checked_numel(IntArrayRef sizes, std::string_view op) {
  int64_t n = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    TS_CHECK(sizes[i] >= 0, ValueError,
             "{}(): argument 'size' expected non-negative sizes, but got {} at dimension {}", op,
             sizes[i], i);
    TS_CHECK(!__builtin_mul_overflow(n, sizes[i], &n), ValueError,
             "{}(): size {} overflows int64 (numel does not fit)", op, fmt::join(sizes, "x"));
  }
  return n;
}

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector s(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return s;
}

int64_t storage_extent(IntArrayRef sizes, IntArrayRef strides) {
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    int64_t span;
    TS_CHECK(!__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) &&
                 !__builtin_add_overflow(extent, span, &extent),
             ValueError, "storage size for sizes [{}] and strides [{}] overflows int64",
             fmt::join(sizes, ", "), fmt::join(strides, ", "));
  }
  return extent;
}

Tensor make_empty_strided(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype,
                          std::string_view op) {
  TS_CHECK(sizes.size() == strides.size(), ValueError,
           "{}(): sizes and strides must have the same length, but got {} and {}", op, sizes.size(),
           strides.size());
  checked_numel(sizes, op);
  for (size_t i = 0; i < strides.size(); ++i)
    TS_CHECK(strides[i] >= 0, ValueError,
             "{}(): argument 'stride' expected non-negative strides, but got {} at dimension {}",
             op, strides[i], i);
  const int64_t extent = storage_extent(sizes, strides);
  int64_t nbytes;
  TS_CHECK(!__builtin_mul_overflow(extent, element_size(dtype), &nbytes), ValueError,
           "{}(): {} elements of {} overflow the addressable size", op, extent, dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(static_cast<size_t>(nbytes));
  impl->sizes.assign(sizes.begin(), sizes.end());
  impl->strides.assign(strides.begin(), strides.end());
  impl->dtype = dtype;
  impl->version = std::make_shared<VersionCounter>();
  return Tensor(std::move(impl));
}

Tensor make_empty(IntArrayRef sizes, ScalarType dtype, std::string_view op) {
  TS_CHECK(dtype != ScalarType::Undefined, TypeError, "{}(): undefined dtype", op);
  checked_numel(sizes, op);
  return make_empty_strided(sizes, contiguous_strides(sizes), dtype, op);
}

Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, int64_t storage_offset,
                 ScalarType dtype) {
  const TensorImpl& b = base.unsafe_impl();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = b.storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->storage_offset = storage_offset;
  impl->dtype = dtype;
  impl->version = b.version;
  impl->is_view = true;
  impl->view_base = b.view_base ? b.view_base : base.impl_;
  impl->view_version = b.version->version;
  impl->view_made_in_no_grad = b.view_made_in_no_grad || !autograd::GradMode::is_enabled();
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, int64_t storage_offset) {
  return make_view(base, std::move(sizes), std::move(strides), storage_offset, base.dtype());
}

int64_t Tensor::size(int64_t d) const {
  return impl().sizes[wrap_dim(d, dim(), "size")];
}

int64_t Tensor::stride(int64_t d) const {
  return impl().strides[wrap_dim(d, dim(), "stride")];
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : impl().sizes) n *= s;
  return n;
}

bool Tensor::is_contiguous() const {
  const TensorImpl& t = impl();
  int64_t expected = 1;
  for (size_t i = t.sizes.size(); i-- > 0;) {
    if (t.sizes[i] == 0) return true;
    if (t.sizes[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.sizes[i];
  }
  return true;
}

bool Tensor::is_alias_of(const Tensor& other) const {
  return defined() && other.defined() && impl().storage == other.impl().storage;
}

void* Tensor::data_ptr() const {
  const TensorImpl& t = impl();
  if (t.storage->data() == nullptr) return nullptr;
  return static_cast<char*>(t.storage->data()) + t.storage_offset * element_size();
}

Scalar Tensor::item() const {
  TS_CHECK(numel() == 1, RuntimeError,
           "item(): a Tensor with {} elements cannot be converted to Scalar", numel());
  // The element's offset from data_ptr is 0 only when every size is 1: true here.
  const void* p = data_ptr();
  return visit_dtype<kAllTypes>(
      dtype(), "item", [&]<class T>() -> Scalar { return Scalar(*static_cast<const T*>(p)); });
}

bool has_internal_overlap(const Tensor& t) {
  // Exact for the layouts ops produce: a stride of 0 on a dimension of size > 1 (expand),
  // or dimensions whose strides cannot separate their elements (sorted by stride, each
  // stride must exceed the span of the smaller dimensions).
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.sizes()[i] <= 1) continue;
    if (t.strides()[i] == 0) return true;
    dims.emplace_back(t.strides()[i], t.sizes()[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;  // max offset reachable with the smaller-stride dims
  for (const auto& [stride, size] : dims) {
    if (stride <= span) return true;
    span += stride * (size - 1);
  }
  return false;
}

}  // namespace tessera
