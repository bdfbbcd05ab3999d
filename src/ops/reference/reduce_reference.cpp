#include "ops/reference/reduce_reference.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numeric>
#include <vector>

#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "tessera/ops/factory.h"

namespace tessera::reference {
namespace {

using LD = long double;
using CLD = std::complex<long double>;
constexpr LD kNaN = std::numeric_limits<LD>::quiet_NaN();
constexpr LD kInf = std::numeric_limits<LD>::infinity();

constexpr DtypeMask kReadable = dtype_bit(kBool) | kNumericTypes;

// All elements of a, row-major.
std::vector<CLD> load(const Tensor& a) {
  std::vector<CLD> v(static_cast<size_t>(a.numel()));
  if (v.empty()) return v;
  visit_dtype<kReadable>(a.dtype(), "reference", [&]<class T>() {
    const T* p = static_cast<const T*>(a.data_ptr());
    DimVector idx(static_cast<size_t>(a.dim()), 0);
    for (size_t n = 0; n < v.size(); ++n) {
      int64_t off = 0;
      for (int64_t d = 0; d < a.dim(); ++d) off += idx[d] * a.stride(d);
      const T x = p[off];
      if constexpr (is_complex_t<T>::value) {
        v[n] = CLD(x.real(), x.imag());
      } else if constexpr (std::is_integral_v<T>) {
        v[n] = CLD(static_cast<LD>(static_cast<int64_t>(x)), 0);
      } else {
        v[n] = CLD(static_cast<LD>(convert<double>(x)), 0);
      }
      for (int64_t d = a.dim() - 1; d >= 0; --d) {
        if (++idx[d] < a.size(d)) break;
        idx[d] = 0;
      }
    }
  });
  return v;
}

Tensor store(const std::vector<CLD>& v, IntArrayRef shape, ScalarType dtype) {
  Tensor out = empty(shape, TensorOptions(dtype));
  visit_dtype<kReadable>(dtype, "reference", [&]<class T>() {
    T* p = static_cast<T*>(out.data_ptr());
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (is_complex_t<T>::value) {
        using R = typename T::value_type;
        p[i] = T(static_cast<R>(v[i].real()), static_cast<R>(v[i].imag()));
      } else if constexpr (std::is_same_v<T, bool>) {
        p[i] = v[i] != CLD(0);
      } else if constexpr (std::is_integral_v<T>) {
        const LD r = v[i].real();
        p[i] = std::isnan(r) ? convert<T>(std::numeric_limits<double>::quiet_NaN())
                             : static_cast<T>(static_cast<int64_t>(r));
      } else {
        p[i] = convert<T>(static_cast<double>(v[i].real()));
      }
    }
  });
  return out;
}

int64_t wrap(int64_t d, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  TS_CHECK(d >= -n && d < n, IndexError, "reference: dim {} out of range", d);
  return d < 0 ? d + n : d;
}

std::vector<bool> make_mask(IntArrayRef dims, int64_t ndim) {
  std::vector<bool> m(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims)
    if (ndim > 0) m[wrap(d, ndim)] = true;
  return m;
}

// Groups of a row-major array: for each output (row-major over the kept dims), the values
// of its reduced elements in row-major order.
std::vector<std::vector<CLD>> groups(const std::vector<CLD>& v, IntArrayRef sizes,
                                     const std::vector<bool>& mask) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  int64_t nout = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!mask[d]) nout *= sizes[d];
  std::vector<std::vector<CLD>> g(static_cast<size_t>(nout));
  DimVector idx(static_cast<size_t>(nd), 0);
  for (size_t n = 0; n < v.size(); ++n) {
    int64_t o = 0;
    for (int64_t d = 0; d < nd; ++d)
      if (!mask[d]) o = o * sizes[d] + idx[d];
    g[o].push_back(v[n]);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

DimVector out_shape(IntArrayRef sizes, const std::vector<bool>& mask, bool keepdim) {
  DimVector s;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!mask[d])
      s.push_back(sizes[d]);
    else if (keepdim)
      s.push_back(1);
  }
  return s;
}

template <class F>
Tensor reduce(const Tensor& a, IntArrayRef dim, bool keepdim, ScalarType dtype, F f) {
  auto mask = make_mask(dim, a.dim());
  auto g = groups(load(a), a.sizes(), mask);
  std::vector<CLD> r;
  for (auto& vals : g) r.push_back(f(vals));
  return store(r, out_shape(a.sizes(), mask, keepdim), dtype);
}

bool isnan_c(CLD x) {
  return std::isnan(x.real()) || std::isnan(x.imag());
}

ScalarType sum_type(const Tensor& a, std::optional<ScalarType> dtype) {
  return dtype ? *dtype : (is_integral(a.dtype(), true) ? kInt64 : a.dtype());
}

CLD extreme(const std::vector<CLD>& v, bool is_max) {
  CLD m = v.at(0);
  for (CLD x : v) {
    if (isnan_c(x)) return x;
    if (is_max ? x.real() > m.real() : x.real() < m.real()) m = x;
  }
  return m;
}

// Index of the first extreme (NaN first).
int64_t arg_extreme(const std::vector<CLD>& v, bool is_max) {
  int64_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (isnan_c(v[i])) return static_cast<int64_t>(i);
    if (is_max ? v[i].real() > v[best].real() : v[i].real() < v[best].real())
      best = static_cast<int64_t>(i);
  }
  return best;
}

std::tuple<Tensor, Tensor> arg_reduce(const Tensor& a, int64_t dim, bool keepdim, bool is_max,
                                      bool with_median = false) {
  const int64_t d = wrap(dim, a.dim());
  std::vector<bool> mask(static_cast<size_t>(a.dim()), false);
  if (a.dim() > 0) mask[d] = true;
  auto g = groups(load(a), a.sizes(), mask);
  std::vector<CLD> vals, idx;
  for (auto& v : g) {
    int64_t i;
    if (with_median) {
      // Sorted position (n-1)/2 under (value, index) order; the first NaN if any.
      auto nan = std::find_if(v.begin(), v.end(), isnan_c);
      if (nan != v.end()) {
        i = nan - v.begin();
      } else {
        std::vector<int64_t> order(v.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t x, int64_t y) { return v[x].real() < v[y].real(); });
        i = order[(v.size() - 1) / 2];
      }
    } else {
      i = arg_extreme(v, is_max);
    }
    vals.push_back(v[i]);
    idx.push_back(CLD(static_cast<LD>(i), 0));
  }
  auto shape = out_shape(a.sizes(), mask, keepdim);
  return {store(vals, shape, a.dtype()), store(idx, shape, kInt64)};
}

// Applies f to each line along dim (same shape in and out).
template <class F>
Tensor along(const Tensor& a, int64_t dim, ScalarType dtype, F f) {
  const int64_t d = wrap(dim, a.dim());
  Tensor moved = a.dim() == 0 ? a.reshape({1}) : a.movedim(d, -1);
  std::vector<CLD> v = load(moved);
  const int64_t K = moved.dim() == 0 ? 1 : moved.size(-1);
  if (K > 0) {
    for (size_t s = 0; s < v.size(); s += static_cast<size_t>(K)) {
      std::vector<CLD> line(v.begin() + s, v.begin() + s + K);
      f(line);
      std::copy(line.begin(), line.end(), v.begin() + s);
    }
  }
  Tensor out = store(v, moved.sizes(), dtype);
  return a.dim() == 0 ? out.reshape({}) : out.movedim(-1, d).contiguous();
}

}  // namespace

Tensor sum(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  const ScalarType t = sum_type(a, dtype);
  return reduce(a.to(t), dim, keepdim, t, [](const std::vector<CLD>& v) {
    CLD s = 0;
    for (CLD x : v) s += x;
    return s;
  });
}

Tensor mean(const Tensor& a, IntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  const ScalarType t = dtype ? *dtype : a.dtype();
  return reduce(a.to(t), dim, keepdim, t, [](const std::vector<CLD>& v) {
    if (v.empty()) return CLD(kNaN, 0);
    CLD s = 0;
    for (CLD x : v) s += x;
    return s / static_cast<LD>(v.size());
  });
}

Tensor prod(const Tensor& a, std::optional<int64_t> dim, bool keepdim,
            std::optional<ScalarType> dtype) {
  const ScalarType t = sum_type(a, dtype);
  DimVector dims;
  if (dim) dims.push_back(*dim);
  return reduce(a.to(t), dims, dim ? keepdim : false, t, [](const std::vector<CLD>& v) {
    CLD s = 1;
    for (CLD x : v) s *= x;
    return s;
  });
}

Tensor amax(const Tensor& a, IntArrayRef dim, bool keepdim) {
  return reduce(a, dim, keepdim, a.dtype(),
                [](const std::vector<CLD>& v) { return extreme(v, true); });
}
Tensor amin(const Tensor& a, IntArrayRef dim, bool keepdim) {
  return reduce(a, dim, keepdim, a.dtype(),
                [](const std::vector<CLD>& v) { return extreme(v, false); });
}
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_reduce(a, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_reduce(a, dim, keepdim, false);
}
Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  if (dim) return std::get<1>(arg_reduce(a, *dim, keepdim, true));
  Tensor r = std::get<1>(arg_reduce(a.reshape({-1}), 0, false, true));
  return keepdim ? r.reshape(DimVector(static_cast<size_t>(a.dim()), 1)) : r;
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  if (dim) return std::get<1>(arg_reduce(a, *dim, keepdim, false));
  Tensor r = std::get<1>(arg_reduce(a.reshape({-1}), 0, false, false));
  return keepdim ? r.reshape(DimVector(static_cast<size_t>(a.dim()), 1)) : r;
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& a, IntArrayRef dim, double correction,
                                    bool keepdim, bool take_sqrt) {
  const ScalarType real_t = to_real_type(a.dtype());
  Tensor v = reduce(a, dim, keepdim, real_t, [&](const std::vector<CLD>& x) {
    if (x.empty()) return CLD(kNaN, 0);
    CLD m = 0;
    for (CLD e : x) m += e;
    m /= static_cast<LD>(x.size());
    LD s = 0;
    for (CLD e : x) s += std::norm(e - m);
    const LD dof = std::max<LD>(0, static_cast<LD>(x.size()) - correction);
    const LD r = s / dof;
    return CLD(take_sqrt ? std::sqrt(r) : r, 0);
  });
  Tensor m = mean(a, dim, keepdim, std::nullopt);
  return {v, m};
}

Tensor norm(const Tensor& a, const Scalar& p, IntArrayRef dim, bool keepdim) {
  const LD pv = p.to_double();
  return reduce(a, dim, keepdim, to_real_type(a.dtype()), [&](const std::vector<CLD>& x) {
    if (pv == 0) {
      LD c = 0;
      for (CLD e : x) c += e != CLD(0);
      return CLD(c, 0);
    }
    if (std::isinf(pv)) {
      if (x.empty()) return CLD(0, 0);
      LD m = std::abs(x[0]);
      for (CLD e : x) {
        const LD q = std::abs(e);
        if (std::isnan(q)) return CLD(kNaN, 0);
        m = pv > 0 ? std::max(m, q) : std::min(m, q);
      }
      return CLD(m, 0);
    }
    LD s = 0;
    for (CLD e : x) s += std::pow(std::abs(e), pv);
    return CLD(std::pow(s, 1 / pv), 0);
  });
}

Tensor logsumexp(const Tensor& a, IntArrayRef dim, bool keepdim) {
  const ScalarType t = a.is_floating_point() ? a.dtype() : get_default_dtype();
  return reduce(a, dim, keepdim, t, [](const std::vector<CLD>& x) {
    if (x.empty()) return CLD(-kInf, 0);
    LD m = extreme(x, true).real();
    if (std::isinf(m)) m = 0;
    LD s = 0;
    for (CLD e : x) s += std::exp(e.real() - m);
    return CLD(std::log(s) + m, 0);
  });
}

Tensor softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor x = dtype ? a.to(*dtype) : a;
  return along(x, dim, x.dtype(), [](std::vector<CLD>& v) {
    LD m = extreme(v, true).real();
    LD s = 0;
    for (CLD e : v) s += std::exp(e.real() - m);
    for (CLD& e : v) e = CLD(std::exp(e.real() - m) / s, 0);
  });
}

Tensor log_softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor x = dtype ? a.to(*dtype) : a;
  return along(x, dim, x.dtype(), [](std::vector<CLD>& v) {
    LD m = extreme(v, true).real();
    LD s = 0;
    for (CLD e : v) s += std::exp(e.real() - m);
    for (CLD& e : v) e = CLD(e.real() - m - std::log(s), 0);
  });
}

Tensor cumsum(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  const ScalarType t = sum_type(a, dtype);
  return along(a.to(t), dim, t, [](std::vector<CLD>& v) {
    CLD s = 0;
    for (CLD& e : v) e = s += e;
  });
}

Tensor cumprod(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  const ScalarType t = sum_type(a, dtype);
  return along(a.to(t), dim, t, [](std::vector<CLD>& v) {
    CLD s = 1;
    for (CLD& e : v) e = s *= e;
  });
}

Tensor all(const Tensor& a, IntArrayRef dim, bool keepdim) {
  return reduce(a, dim, keepdim, a.dtype() == kUInt8 ? kUInt8 : kBool,
                [](const std::vector<CLD>& v) {
                  for (CLD e : v)
                    if (e == CLD(0)) return CLD(0);
                  return CLD(1);
                });
}
Tensor any(const Tensor& a, IntArrayRef dim, bool keepdim) {
  return reduce(a, dim, keepdim, a.dtype() == kUInt8 ? kUInt8 : kBool,
                [](const std::vector<CLD>& v) {
                  for (CLD e : v)
                    if (e != CLD(0)) return CLD(1);
                  return CLD(0);
                });
}
Tensor count_nonzero(const Tensor& a, IntArrayRef dim) {
  return reduce(a, dim, false, kInt64, [](const std::vector<CLD>& v) {
    LD c = 0;
    for (CLD e : v) c += e != CLD(0);
    return CLD(c, 0);
  });
}

Tensor median(const Tensor& a) {
  std::vector<CLD> v = load(a);
  std::vector<CLD> r(1, CLD(kNaN, 0));
  if (!v.empty() && std::none_of(v.begin(), v.end(), isnan_c)) {
    std::sort(v.begin(), v.end(), [](CLD x, CLD y) { return x.real() < y.real(); });
    r[0] = v[(v.size() - 1) / 2];
  }
  return store(r, {}, a.dtype());
}

std::tuple<Tensor, Tensor> median(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_reduce(a, dim, keepdim, true, /*with_median=*/true);
}

}  // namespace tessera::reference
