// median: the lower median (sorted position (n - 1) / 2), NaN if any input is NaN, as
// PyTorch. Along a dim, the index is that of the element at sorted position (n - 1) / 2
// under the (value, index) order, so ties resolve to a fixed index (PyTorch's CPU rule);
// with a NaN, the first NaN and its index. Not performance-critical: each line is copied and
// partitioned with std::nth_element.
//
// Derivatives as PyTorch's: median() shares the gradient evenly among the elements equal to
// the median (MedianBackward0, every NaN when it is NaN); median(dim) sends it to the
// returned index (MedianBackward1).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "autograd/record.h"
#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "ops/reduce_ops.h"
#include "ops/reduce_plan.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {
namespace {

constexpr DtypeMask kMedianTypes = kIntegralTypes | kFloatingTypes;

void check_median_dtype(const Tensor& a) {
  TS_CHECK((kMedianTypes & dtype_bit(a.dtype())) != 0, TypeError,
           "median(): argument 'input' expected an integer or floating point tensor, but got {}",
           a.dtype());
}

template <class T>
bool is_nan_value(T v) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return std::isnan(static_cast<double>(v));
  }
}

template <class T>
auto key(T v) {
  if constexpr (std::is_integral_v<T>) {
    return v;
  } else {
    return static_cast<double>(v);
  }
}

Tensor median_all_kernel(const Tensor& a) {
  check_median_dtype(a);
  Tensor out = empty({}, TensorOptions(a.dtype()));
  visit_dtype<kMedianTypes>(a.dtype(), "median", [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    if (a.numel() == 0) {
      *o = convert<T>(std::numeric_limits<double>::quiet_NaN());
      return;
    }
    Tensor c = a.contiguous();
    const T* p = static_cast<const T*>(c.data_ptr());
    std::vector<T> v(p, p + c.numel());
    for (const T& x : v) {
      if (is_nan_value(x)) {
        *o = x;
        return;
      }
    }
    auto mid = v.begin() + (static_cast<int64_t>(v.size()) - 1) / 2;
    std::nth_element(v.begin(), mid, v.end(), [](T x, T y) { return key(x) < key(y); });
    *o = *mid;
  });
  return out;
}

std::tuple<Tensor, Tensor> median_dim_kernel(const Tensor& a, int64_t dim, bool keepdim) {
  check_median_dtype(a);
  const int64_t d = wrap_reduce_dim(dim, a.dim(), "median");
  std::vector<bool> mask(static_cast<size_t>(a.dim()), false);
  if (a.dim() > 0) {
    mask[d] = true;
    TS_CHECK(a.size(d) != 0, IndexError,
             "median(): Expected reduction dim {} to have non-zero size.", d);
  }
  const DimVector shape = reduced_sizes(a.sizes(), mask, keepdim);
  Tensor values = empty(shape, TensorOptions(a.dtype()));
  Tensor indices = empty(shape, TensorOptions(kInt64));
  if (values.numel() == 0) return {values, indices};
  // Lines along dim, contiguous, in the output's row-major order.
  Tensor lines = (a.dim() == 0 ? a.reshape({1}) : a.movedim(d, -1)).contiguous();
  const int64_t K = lines.size(-1);
  const int64_t nlines = values.numel();
  visit_dtype<kMedianTypes>(a.dtype(), "median", [&]<class T>() {
    const T* in = static_cast<const T*>(lines.data_ptr());
    T* vo = static_cast<T*>(values.data_ptr());
    int64_t* io = indices.data_ptr<int64_t>();
    parallel_for(0, nlines, std::max<int64_t>(1, 4096 / K), [&](int64_t l0, int64_t l1) {
      std::vector<int64_t> idx(static_cast<size_t>(K));
      for (int64_t l = l0; l < l1; ++l) {
        const T* x = in + l * K;
        const T* nan = std::find_if(x, x + K, [](T v) { return is_nan_value(v); });
        if (nan != x + K) {
          vo[l] = *nan;
          io[l] = nan - x;
          continue;
        }
        std::iota(idx.begin(), idx.end(), 0);
        auto mid = idx.begin() + (K - 1) / 2;
        std::nth_element(idx.begin(), mid, idx.end(), [x](int64_t i, int64_t j) {
          return key(x[i]) < key(x[j]) || (key(x[i]) == key(x[j]) && i < j);
        });
        vo[l] = x[*mid];
        io[l] = *mid;
      }
    });
  });
  return {values, indices};
}

}  // namespace

Tensor median(const Tensor& a) {
  autograd::Recorder rec({a});
  Tensor out = median_all_kernel(a);
  if (rec)
    rec.finish("MedianBackward0", {out},
               [sa = autograd::Recorder::save(a), so = autograd::Recorder::save_output(out)](
                   const autograd::tensor_list& g, const autograd::Node& n) {
                 const Tensor x = sa.unpack(n), v = so.unpack(n);
                 const Tensor hit = (isnan(v).item<bool>() ? isnan(x) : x.eq(v)).to(x.dtype());
                 return autograd::tensor_list{hit.mul(g[0].div(hit.sum()))};
               });
  return out;
}

std::tuple<Tensor, Tensor> median(const Tensor& a, int64_t dim, bool keepdim) {
  autograd::Recorder rec({a});
  auto [values, indices] = median_dim_kernel(a, dim, keepdim);
  if (rec) {
    const int64_t d = a.dim() == 0 ? 0 : wrap_reduce_dim(dim, a.dim(), "median");
    rec.finish(
        "MedianBackward1", {values},
        [sizes = a.sizes().vec(), d, keepdim, idx = indices](const autograd::tensor_list& g,
                                                             const autograd::Node&) {
          return autograd::tensor_list{value_selecting_backward(g[0], idx, sizes, d, keepdim)};
        });
  }
  return {values, indices};
}

Tensor Tensor::median() const {
  return tessera::median(*this);
}
std::tuple<Tensor, Tensor> Tensor::median(int64_t dim, bool keepdim) const {
  return tessera::median(*this, dim, keepdim);
}

}  // namespace tessera
