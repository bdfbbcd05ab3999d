// Tensor: a strided view of a Storage, as in libtorch. Copying a Tensor copies the handle,
// not the data; views (view, permute, slice, ...) share storage and never copy.
//
// The element at index (i0, ..., in-1) lives at
//   storage.data + (storage_offset + sum_k ik * strides[k]) * element_size
// Strides are in elements and may be zero (expand) but not negative.
//
// Thread-safety: a Tensor handle may be read from many threads; writing the same elements
// from several threads is the caller's race, as in PyTorch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "tessera/core/array_ref.h"
#include "tessera/core/dtype.h"
#include "tessera/core/error.h"
#include "tessera/core/scalar.h"
#include "tessera/core/storage.h"
#include "tessera/core/tensor_options.h"

namespace tessera {

using DimVector = std::vector<int64_t>;

class Tensor;
namespace autograd {
struct AutogradMeta;  // src/core/autograd_meta.h
class Node;           // tessera/autograd/function.h
}  // namespace autograd

// Counts in-place writes to a storage's elements; shared by a tensor and its views so that
// autograd can detect that a saved tensor was modified. Atomic because in-place writes through
// different views of one base may run on different threads (e.g. attention backward's tasks).
struct VersionCounter {
  std::atomic<uint64_t> version{0};
};

struct TensorImpl {
  Storage storage;
  DimVector sizes;
  DimVector strides;
  int64_t storage_offset = 0;  // in elements
  ScalarType dtype = ScalarType::Float32;
  std::shared_ptr<VersionCounter> version;
  bool is_view = false;  // shares another tensor's storage (made by a view op)
  std::shared_ptr<autograd::AutogradMeta> autograd;  // null until autograd needs it
  // A view's base: the tensor (itself never a view) whose storage it views, so that an
  // in-place op on the view can rewrite the base's autograd history (PyTorch's CopySlices).
  // Null for non-views and for detach()ed aliases.
  std::shared_ptr<TensorImpl> view_base;
  // The version at which the view's history was last derived from its base's (autograd
  // re-derives it when an in-place write moved the shared version counter since).
  uint64_t view_version = 0;
  bool view_made_in_no_grad = false;  // made while grad mode was off (PyTorch forbids
                                      // recording in-place ops on such views)
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false, any other use throws
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata --------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t ndimension() const { return dim(); }
  IntArrayRef sizes() const { return impl().sizes; }
  IntArrayRef strides() const { return impl().strides; }
  IntArrayRef shape() const { return sizes(); }
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t numel() const;
  ScalarType dtype() const { return impl().dtype; }
  ScalarType scalar_type() const { return impl().dtype; }
  int64_t element_size() const { return tessera::element_size(dtype()); }
  int64_t nbytes() const { return numel() * element_size(); }
  int64_t storage_offset() const { return impl().storage_offset; }
  Device device() const { return Device(kCPU); }
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  bool is_contiguous() const;
  bool is_complex() const { return tessera::is_complex(dtype()); }
  bool is_floating_point() const { return tessera::is_floating_point(dtype()); }
  const Storage& storage() const { return impl().storage; }
  bool is_alias_of(const Tensor& other) const;
  uint64_t _version() const { return impl().version->version; }
  void bump_version() const { ++impl().version->version; }
  TensorImpl& unsafe_impl() const { return impl(); }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // Pointer to the first element. data_ptr<T>() checks that T matches the dtype.
  void* data_ptr() const;
  template <class T>
  T* data_ptr() const;
  template <class T>
  const T* const_data_ptr() const {
    return data_ptr<T>();
  }

  // The single element of a one-element tensor.
  Scalar item() const;
  template <class T>
  T item() const {
    return item().to<T>();
  }

  // ---- views (never copy) ----------------------------------------------------------------
  Tensor as_strided(IntArrayRef size, IntArrayRef stride,
                    std::optional<int64_t> storage_offset = std::nullopt) const;
  Tensor view(IntArrayRef size) const;
  Tensor view(ScalarType dtype) const;  // reinterpret bits (same element size)
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  Tensor reshape(IntArrayRef size) const;  // a view when possible, else a copy
  Tensor reshape_as(const Tensor& other) const { return reshape(other.sizes()); }
  Tensor permute(IntArrayRef dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor mT() const { return transpose(-2, -1); }
  Tensor movedim(int64_t source, int64_t destination) const;
  Tensor expand(IntArrayRef size) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, IntArrayRef sizes) const;
  Tensor unfold(int64_t dimension, int64_t size, int64_t step) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor real() const;  // a view for complex tensors; the tensor itself for real ones
  Tensor imag() const;  // complex tensors only

  // ---- copies and conversion -------------------------------------------------------------
  Tensor contiguous() const;
  Tensor clone() const;
  // Copies src (broadcast to this shape, any strides, any dtype pair) into this tensor.
  const Tensor& copy_(const Tensor& src) const;
  Tensor to(ScalarType dtype, bool copy = false) const;
  Tensor fill_(const Scalar& value) const;
  Tensor zero_() const;

  // ---- pointwise -------------------------------------------------------------------------
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other, std::optional<std::string_view> rounding_mode = {}) const;
  Tensor div(const Scalar& other, std::optional<std::string_view> rounding_mode = {}) const;
  Tensor remainder(const Tensor& other) const;
  Tensor remainder(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  const Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& add_(const Scalar& other, const Scalar& alpha = 1) const;
  const Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  const Tensor& sub_(const Scalar& other, const Scalar& alpha = 1) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(const Scalar& other) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& div_(const Scalar& other) const;
  const Tensor& pow_(const Scalar& exponent) const;

  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor logical_not() const;
  Tensor bitwise_and(const Tensor& other) const;
  Tensor bitwise_or(const Tensor& other) const;
  Tensor bitwise_xor(const Tensor& other) const;
  Tensor bitwise_not() const;

  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  const Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor sign() const;
  Tensor exp() const;
  Tensor expm1() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor log2() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor erf() const;
  Tensor relu() const;
  Tensor conj() const;
  Tensor angle() const;
  const Tensor& relu_() const;
  const Tensor& neg_() const;
  const Tensor& exp_() const;
  Tensor lerp(const Tensor& end, const Scalar& weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor addcmul(const Tensor& t1, const Tensor& t2, const Scalar& value = 1) const;
  Tensor addcdiv(const Tensor& t1, const Tensor& t2, const Scalar& value = 1) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  const Tensor& masked_fill_(const Tensor& mask, const Scalar& value) const;

  // ---- reductions ------------------------------------------------------------------------
  // `dim` empty means all dimensions. `dtype` sets the accumulation and result type.
  Tensor sum(IntArrayRef dim = {}, bool keepdim = false,
             std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dim = {}, bool keepdim = false,
              std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor prod(std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
              std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor amax(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(IntArrayRef dim = {}, double correction = 1, bool keepdim = false) const;
  Tensor std(IntArrayRef dim = {}, double correction = 1, bool keepdim = false) const;
  Tensor norm(const Scalar& p = 2, IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor logsumexp(IntArrayRef dim, bool keepdim = false) const;
  Tensor softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor cumsum(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor cumprod(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor count_nonzero(IntArrayRef dim = {}) const;
  Tensor median() const;
  std::tuple<Tensor, Tensor> median(int64_t dim, bool keepdim = false) const;

  // ---- shape and indexing ----------------------------------------------------------------
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(IntArrayRef split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source,
                   const Scalar& alpha = 1) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor nonzero() const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                  bool sorted = true) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false,
                                  bool stable = true) const;
  Tensor argsort(int64_t dim = -1, bool descending = false, bool stable = true) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;

  // ---- matrix products -------------------------------------------------------------------
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor matmul(const Tensor& other) const;
  Tensor dot(const Tensor& other) const;
  Tensor outer(const Tensor& other) const;

  // ---- autograd (tessera/autograd/autograd.h) ---------------------------------------------
  bool requires_grad() const;
  // Marks a leaf as needing gradients (floating point or complex only), as PyTorch.
  const Tensor& requires_grad_(bool requires_grad = true) const;
  const Tensor& set_requires_grad(bool requires_grad) const {
    return requires_grad_(requires_grad);
  }
  // The accumulated gradient (undefined until a backward reaches this leaf, or a non-leaf
  // that retain_grad()ed).
  const Tensor& grad() const;
  // The gradient slot itself: assign to it, or reset it (optimizers' zero_grad).
  Tensor& mutable_grad() const;
  // The node that made this tensor (null for leaves).
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const;
  uint32_t output_nr() const;
  // Gradients of this tensor with respect to the leaves it came from, accumulated into their
  // grad(). `gradient` defaults to 1 for a one-element tensor.
  void backward(const Tensor& gradient = {}, bool retain_graph = false,
                bool create_graph = false) const;
  // The same data without history (shares storage and version counter).
  Tensor detach() const;
  const Tensor& detach_() const;
  // Keep the gradient of this non-leaf in grad() during backward.
  const Tensor& retain_grad() const;
  bool retains_grad() const;
  // A hook on this tensor's gradient: returns a replacement, or an undefined tensor to keep it.
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  bool is_view() const { return impl().is_view; }

  // ---- printing --------------------------------------------------------------------------
  // PyTorch's repr: "tensor([[1., 2.],\n        [3., 4.]])", summarised when large.
  std::string repr() const;
  std::string str() const { return repr(); }

 private:
  TensorImpl& impl() const {
    TS_CHECK(impl_ != nullptr, RuntimeError, "use of an undefined Tensor (default-constructed)");
    return *impl_;
  }
  friend Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides,
                          int64_t storage_offset, ScalarType dtype);
  std::shared_ptr<TensorImpl> impl_;
};

template <class T>
T* Tensor::data_ptr() const {
  TS_CHECK(scalar_type_of<std::remove_cv_t<T>> == dtype(), TypeError,
           "data_ptr(): expected a tensor of dtype {}, but got {}",
           scalar_type_of<std::remove_cv_t<T>>, dtype());
  return static_cast<T*>(data_ptr());
}

// Operators, as in libtorch.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
const Tensor& operator+=(const Tensor& a, const Tensor& b);
const Tensor& operator-=(const Tensor& a, const Tensor& b);
const Tensor& operator*=(const Tensor& a, const Tensor& b);
const Tensor& operator/=(const Tensor& a, const Tensor& b);
const Tensor& operator+=(const Tensor& a, const Scalar& b);
const Tensor& operator-=(const Tensor& a, const Scalar& b);
const Tensor& operator*=(const Tensor& a, const Scalar& b);
const Tensor& operator/=(const Tensor& a, const Scalar& b);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- helpers shared by ops -----------------------------------------------------------------
// Wraps a possibly negative dim into [0, ndim). `op` and `arg` name the call in the error.
int64_t wrap_dim(int64_t dim, int64_t ndim, std::string_view op, std::string_view arg = "dim");
// Product of sizes, checking for overflow of int64.
int64_t checked_numel(IntArrayRef sizes, std::string_view op);
// Contiguous (row-major) strides for sizes.
DimVector contiguous_strides(IntArrayRef sizes);
// True when t's elements overlap in memory (some element reachable by two indices).
bool has_internal_overlap(const Tensor& t);

}  // namespace tessera

template <>
struct fmt::formatter<tessera::Tensor> : fmt::formatter<std::string_view> {
  auto format(const tessera::Tensor& t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(t.repr(), ctx);
  }
};
