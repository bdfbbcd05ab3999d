// Factories: empty/zeros/ones/full, ranges, eye, tensor(), from_blob.
#include "tessera/ops/factory.h"

#include <cmath>
#include <cstring>

#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_make.h"

namespace tessera {

namespace {

void check_device(const TensorOptions& o, std::string_view op) {
  TS_CHECK(o.device().is_cpu(), NotImplementedError,
           "{}(): device '{}' is not supported: Tessera runs on the CPU", op, o.device().str());
}

}  // namespace

Tensor empty(IntArrayRef size, TensorOptions options) {
  check_device(options, "empty");
  return make_empty(size, options.dtype(), "empty");
}

Tensor empty_strided(IntArrayRef size, IntArrayRef stride, TensorOptions options) {
  check_device(options, "empty_strided");
  return make_empty_strided(size, stride, options.dtype(), "empty_strided");
}

Tensor zeros(IntArrayRef size, TensorOptions options) {
  check_device(options, "zeros");
  Tensor t = make_empty(size, options.dtype(), "zeros");
  if (t.numel() > 0) std::memset(t.data_ptr(), 0, static_cast<size_t>(t.nbytes()));
  return t;
}

Tensor ones(IntArrayRef size, TensorOptions options) {
  return full(size, 1, options.dtype(options.dtype()));
}

Tensor full(IntArrayRef size, const Scalar& value, TensorOptions options) {
  check_device(options, "full");
  const ScalarType t = options.has_dtype() ? options.dtype() : value.default_dtype();
  Tensor out = make_empty(size, t, "full");
  out.fill_(value);
  return out;
}

Tensor empty_like(const Tensor& t, std::optional<ScalarType> dtype) {
  // Keeps the layout of a dense input (e.g. transposed), as torch's preserve_format.
  const bool dense =
      !has_internal_overlap(t) && storage_extent(t.sizes(), t.strides()) == t.numel();
  if (dense && !t.is_contiguous())
    return make_empty_strided(t.sizes(), t.strides(), dtype.value_or(t.dtype()), "empty_like");
  return make_empty(t.sizes(), dtype.value_or(t.dtype()), "empty_like");
}

Tensor zeros_like(const Tensor& t, std::optional<ScalarType> dtype) {
  Tensor out = empty_like(t, dtype);
  out.zero_();
  return out;
}

Tensor ones_like(const Tensor& t, std::optional<ScalarType> dtype) {
  return full_like(t, 1, dtype);
}

Tensor full_like(const Tensor& t, const Scalar& value, std::optional<ScalarType> dtype) {
  Tensor out = empty_like(t, dtype);
  out.fill_(value);
  return out;
}

Tensor scalar_tensor(const Scalar& value, TensorOptions options) {
  return full({}, value, options);
}

Tensor arange(const Scalar& end, TensorOptions options) {
  return arange(0, end, 1, options);
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  check_device(options, "arange");
  const bool all_int = !start.is_floating_point() && !start.is_complex() &&
                       !end.is_floating_point() && !end.is_complex() && !step.is_floating_point() &&
                       !step.is_complex();
  const ScalarType dtype =
      options.has_dtype() ? options.dtype() : (all_int ? kInt64 : get_default_dtype());
  TS_CHECK(!is_complex(dtype) && !is_float8(dtype) && !is_packed(dtype) && dtype != kBool,
           TypeError, "arange(): dtype {} is not supported", dtype);
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  TS_CHECK(std::isfinite(s) && std::isfinite(e), ValueError,
           "arange(): unsupported range: {} -> {}", start.repr(), end.repr());
  TS_CHECK(st != 0, ValueError, "arange(): argument 'step' must be nonzero");
  TS_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError,
           "arange(): upper bound and larger bound inconsistent with step sign (start {}, end {}, "
           "step {})",
           start.repr(), end.repr(), step.repr());
  int64_t n;
  if (all_int) {
    const int64_t si = start.to_int64(), ei = end.to_int64(), sti = step.to_int64();
    n = sti > 0 ? (ei - si + sti - 1) / sti : (si - ei + (-sti) - 1) / (-sti);
  } else {
    const double len = std::ceil((e - s) / st);
    TS_CHECK(len < 9.2e18, ValueError, "arange(): the range {} -> {} step {} is too large", s, e,
             st);
    n = static_cast<int64_t>(len);
  }
  Tensor out = make_empty({n}, dtype, "arange");
  visit_dtype<kRealTypes>(dtype, "arange", [&]<class T>() {
    T* p = out.data_ptr<T>();
    if constexpr (std::is_integral_v<T>) {
      const int64_t si = start.to_int64(), sti = step.to_int64();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(si + i * sti);
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = T(s + static_cast<double>(i) * st);
    }
  });
  return out;
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions options) {
  check_device(options, "linspace");
  TS_CHECK(steps >= 0, ValueError, "linspace(): number of steps must be non-negative, but got {}",
           steps);
  const ScalarType dtype = options.dtype();
  Tensor out = make_empty({steps}, dtype, "linspace");
  const double s = start.to_double(), e = end.to_double();
  visit_dtype<kRealTypes>(dtype, "linspace", [&]<class T>() {
    T* p = out.data_ptr<T>();
    if (steps == 1) {
      p[0] = convert<T>(s);
      return;
    }
    const double step = (e - s) / static_cast<double>(steps - 1);
    const int64_t half = steps / 2;
    // Both ends are exact: the first half counts up from start, the rest down from end.
    for (int64_t i = 0; i < steps; ++i) {
      const double v = i < half ? s + step * static_cast<double>(i)
                                : e - step * static_cast<double>(steps - 1 - i);
      p[i] = convert<T>(v);
    }
  });
  return out;
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions options) {
  TS_CHECK(n >= 0, ValueError, "eye(): argument 'n' must be greater or equal to 0, got {}", n);
  const int64_t cols = m.value_or(n);
  TS_CHECK(cols >= 0, ValueError, "eye(): argument 'm' must be greater or equal to 0, got {}",
           cols);
  Tensor out = zeros({n, cols}, options);
  if (out.numel() > 0) out.diagonal().fill_(1);
  return out;
}

template <class T>
Tensor tensor(const std::vector<T>& values) {
  Tensor out = make_empty({static_cast<int64_t>(values.size())}, scalar_type_of<T>, "tensor");
  if (!values.empty()) {
    if constexpr (std::is_same_v<T, bool>) {
      bool* p = out.data_ptr<bool>();
      for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
    } else {
      std::memcpy(out.data_ptr(), values.data(), values.size() * sizeof(T));
    }
  }
  return out;
}

template <class T>
Tensor tensor(std::initializer_list<T> values) {
  return tensor(std::vector<T>(values));
}

#define TS_INSTANTIATE(T)                                  \
  template Tensor tensor<T>(const std::vector<T>& values); \
  template Tensor tensor<T>(std::initializer_list<T> values);
TS_INSTANTIATE(bool)
TS_INSTANTIATE(uint8_t)
TS_INSTANTIATE(int8_t)
TS_INSTANTIATE(int16_t)
TS_INSTANTIATE(int32_t)
TS_INSTANTIATE(int64_t)
TS_INSTANTIATE(Half)
TS_INSTANTIATE(BFloat16)
TS_INSTANTIATE(float)
TS_INSTANTIATE(double)
TS_INSTANTIATE(complex64)
TS_INSTANTIATE(complex128)
TS_INSTANTIATE(Float8_e4m3fn)
TS_INSTANTIATE(Float8_e5m2)
#undef TS_INSTANTIATE

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options,
                 std::function<void(void*)> deleter) {
  check_device(options, "from_blob");
  TS_CHECK(sizes.size() == strides.size(), ValueError,
           "from_blob(): sizes and strides must have the same length, but got {} and {}",
           sizes.size(), strides.size());
  checked_numel(sizes, "from_blob");
  const int64_t extent = storage_extent(sizes, strides);
  TS_CHECK(data != nullptr || extent == 0, ValueError,
           "from_blob(): argument 'data' is null for a tensor of {} elements", extent);
  const ScalarType dtype = options.dtype();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(
      data, static_cast<size_t>(extent * element_size(dtype)), std::move(deleter));
  impl->sizes = sizes.vec();
  impl->strides = strides.vec();
  impl->dtype = dtype;
  impl->version = std::make_shared<VersionCounter>();
  return Tensor(std::move(impl));
}

Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options,
                 std::function<void(void*)> deleter) {
  return from_blob(data, sizes, contiguous_strides(sizes), options, std::move(deleter));
}

}  // namespace tessera
