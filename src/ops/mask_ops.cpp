// The mask ops: masked_select (with its derivative), nonzero, one_hot. masked_select and
// nonzero count per chunk first, then write each chunk's results at its prefix offset, so
// results do not depend on the thread count.
#include <algorithm>
#include <functional>
#include <vector>

#include "autograd/record.h"
#include "ops/index_common.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/shape.h"

namespace tessera {

using namespace index_detail;

namespace {

// Splits [0, n) into at most `parts` contiguous pieces of at least `grain`.
std::vector<int64_t> chunk_bounds(int64_t n, int64_t grain) {
  int64_t parts = std::max<int64_t>(
      1, std::min<int64_t>(get_num_threads() * 4, n / std::max<int64_t>(grain, 1)));
  if (in_parallel_region()) parts = 1;
  std::vector<int64_t> b(static_cast<size_t>(parts + 1));
  for (int64_t p = 0; p <= parts; ++p) b[p] = n * p / parts;
  return b;
}

void run_tasks(int64_t num, const std::function<void(int64_t)>& fn) {
  if (num <= 1) {
    for (int64_t t = 0; t < num; ++t) fn(t);
  } else {
    parallel_tasks(num, fn);
  }
}

// Linear element index -> offsets of a row-major walk (multi-index in `counter`).
void seek(IntArrayRef sizes, int64_t linear, DimVector& counter) {
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    counter[d] = linear % sizes[d];
    linear /= sizes[d];
  }
}

}  // namespace

Tensor masked_select_kernel(const Tensor& a, const Tensor& mask);

// The selected elements' gradients go back to their positions in the broadcast shape, then
// are summed down to self's shape (MaskedSelectBackward0).
Tensor masked_select(const Tensor& a, const Tensor& mask) {
  autograd::Recorder rec({a});
  Tensor out = masked_select_kernel(a, mask);
  if (rec)
    rec.finish(
        "MaskedSelectBackward0", {out},
        [mask, sizes = a.sizes().vec()](const autograd::tensor_list& g, const autograd::Node&) {
          const DimVector shape = broadcast_shapes(sizes, mask.sizes(), "masked_select");
          const Tensor where_set = nonzero(mask.ne(0).expand(shape).reshape({-1})).view({-1});
          const Tensor full = zeros({checked_numel(shape, "masked_select")}, g[0].dtype())
                                  .index_add(0, where_set, g[0]);
          return autograd::tensor_list{autograd::sum_to(full.view(shape), sizes)};
        });
  return out;
}

Tensor masked_select_kernel(const Tensor& a, const Tensor& mask) {
  TS_CHECK(mask.dtype() == kBool || mask.dtype() == kUInt8, TypeError,
           "masked_select(): argument 'mask' expected dtype bool or uint8, but got {}",
           mask.dtype());
  const DimVector shape = broadcast_shapes(a.sizes(), mask.sizes(), "masked_select");
  const Tensor av = a.expand(shape), mv = mask.expand(shape);
  const int64_t total = checked_numel(shape, "masked_select");
  if (total == 0) return empty({0}, a.dtype());
  RowWalker<2> w = make_walker<2>(shape, {av.strides().vec(), mv.strides().vec()});
  coalesce(w);
  const std::vector<int64_t> bounds = chunk_bounds(total, kGrainSize);
  const int64_t parts = static_cast<int64_t>(bounds.size()) - 1;
  const uint8_t* m = static_cast<const uint8_t*>(mv.data_ptr());
  // Visits linear elements [lo, hi) in row-major order: fn(a_offset, mask_offset).
  auto visit = [&](int64_t lo, int64_t hi, auto&& fn) {
    const int64_t nd = w.ndim();
    DimVector c(static_cast<size_t>(nd));
    seek(w.sizes, lo, c);
    int64_t oa = 0, om = 0;
    for (int64_t d = 0; d < nd; ++d) {
      oa += c[d] * w.strides[0][d];
      om += c[d] * w.strides[1][d];
    }
    const int64_t ra = w.row_stride(0), rm = w.row_stride(1), row = w.row_length();
    int64_t i = lo;
    while (i < hi) {
      const int64_t j0 = c[nd - 1];
      const int64_t take = std::min(row - j0, hi - i);
      for (int64_t j = 0; j < take; ++j) fn(oa + j * ra, om + j * rm);
      i += take;
      // Advance to the start of the next row.
      oa += (take - 1) * ra;
      om += (take - 1) * rm;
      c[nd - 1] = row - 1;
      if (i >= hi) break;
      int64_t d = nd - 1;
      for (; d >= 0; --d) {
        if (++c[d] < w.sizes[d]) {
          oa += w.strides[0][d];
          om += w.strides[1][d];
          break;
        }
        oa -= (w.sizes[d] - 1) * w.strides[0][d];
        om -= (w.sizes[d] - 1) * w.strides[1][d];
        c[d] = 0;
      }
    }
  };
  std::vector<int64_t> counts(static_cast<size_t>(parts) + 1, 0);
  run_tasks(parts, [&](int64_t p) {
    int64_t n = 0;
    visit(bounds[p], bounds[p + 1], [&](int64_t, int64_t om) { n += m[om] != 0; });
    counts[p + 1] = n;
  });
  for (int64_t p = 0; p < parts; ++p) counts[p + 1] += counts[p];
  Tensor out = empty({counts[parts]}, a.dtype());
  if (counts[parts] == 0) return out;
  dispatch_by_size(a.element_size(), [&]<class U>() {
    const U* src = static_cast<const U*>(av.data_ptr());
    U* dst = static_cast<U*>(out.data_ptr());
    run_tasks(parts, [&](int64_t p) {
      U* o = dst + counts[p];
      visit(bounds[p], bounds[p + 1], [&](int64_t oa, int64_t om) {
        if (m[om] != 0) *o++ = src[oa];
      });
    });
  });
  return out;
}

Tensor nonzero(const Tensor& a) {
  const int64_t nd = a.dim();
  const int64_t total = a.numel();
  if (total == 0) return empty({0, nd}, kInt64);
  const DimVector sizes = nd == 0 ? DimVector{1} : a.sizes().vec();
  const DimVector strides = nd == 0 ? DimVector{0} : a.strides().vec();
  const int64_t wnd = static_cast<int64_t>(sizes.size());
  const std::vector<int64_t> bounds = chunk_bounds(total, kGrainSize);
  const int64_t parts = static_cast<int64_t>(bounds.size()) - 1;
  std::vector<int64_t> counts(static_cast<size_t>(parts) + 1, 0);
  Tensor out;
  visit_dtype<kAddTypes>(a.dtype(), "nonzero", [&]<class T>() {
    const T* data = static_cast<const T*>(a.data_ptr());
    auto is_nonzero = [](T v) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        return static_cast<float>(v) != 0.0f;
      } else {
        return v != T(0);
      }
    };
    // Visits linear elements [lo, hi): fn(offset, counter).
    auto visit = [&](int64_t lo, int64_t hi, auto&& fn) {
      DimVector c(static_cast<size_t>(wnd));
      seek(sizes, lo, c);
      int64_t off = 0;
      for (int64_t d = 0; d < wnd; ++d) off += c[d] * strides[d];
      for (int64_t i = lo; i < hi; ++i) {
        fn(off, c);
        for (int64_t d = wnd - 1; d >= 0; --d) {
          if (++c[d] < sizes[d]) {
            off += strides[d];
            break;
          }
          off -= (sizes[d] - 1) * strides[d];
          c[d] = 0;
        }
      }
    };
    run_tasks(parts, [&](int64_t p) {
      int64_t n = 0;
      const int64_t lo = bounds[p], hi = bounds[p + 1];
      if (a.is_contiguous()) {
        for (int64_t i = lo; i < hi; ++i) n += is_nonzero(data[i]);
      } else {
        visit(lo, hi, [&](int64_t off, const DimVector&) { n += is_nonzero(data[off]); });
      }
      counts[p + 1] = n;
    });
    for (int64_t p = 0; p < parts; ++p) counts[p + 1] += counts[p];
    out = empty({counts[parts], nd}, kInt64);
    if (counts[parts] == 0 || nd == 0) return;
    int64_t* o = out.data_ptr<int64_t>();
    run_tasks(parts, [&](int64_t p) {
      int64_t* row = o + counts[p] * nd;
      visit(bounds[p], bounds[p + 1], [&](int64_t off, const DimVector& c) {
        if (!is_nonzero(data[off])) return;
        for (int64_t d = 0; d < nd; ++d) row[d] = c[d];
        row += nd;
      });
    });
  });
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  TS_CHECK(indices.dtype() == kInt64, TypeError,
           "one_hot(): argument 'indices' expected dtype int64 (one_hot is only applicable to "
           "index tensors), but got {}",
           indices.dtype());
  const Tensor idx = indices.contiguous();
  const int64_t n = idx.numel();
  const int64_t* v = idx.data_ptr<int64_t>();
  int64_t lo = 0, hi = -1;
  for (int64_t i = 0; i < n; ++i) {
    lo = i == 0 ? v[i] : std::min(lo, v[i]);
    hi = i == 0 ? v[i] : std::max(hi, v[i]);
  }
  if (num_classes == -1) {
    TS_CHECK(n > 0, RuntimeError,
             "one_hot(): can not infer the total number of classes from an empty tensor; pass "
             "num_classes");
    num_classes = hi + 1;
  }
  TS_CHECK(n == 0 || lo >= 0, RuntimeError,
           "one_hot(): class values must be non-negative, but got {}", lo);
  TS_CHECK(num_classes >= 0 && (n == 0 || hi < num_classes), RuntimeError,
           "one_hot(): class values must be smaller than num_classes ({}), but got {}", num_classes,
           n == 0 ? int64_t{0} : hi);
  DimVector out_sizes = indices.sizes().vec();
  out_sizes.push_back(num_classes);
  Tensor out = zeros(out_sizes, kInt64);
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) o[i * num_classes + v[i]] = 1;
  return out;
}

Tensor Tensor::masked_select(const Tensor& mask) const {
  return tessera::masked_select(*this, mask);
}
Tensor Tensor::nonzero() const {
  return tessera::nonzero(*this);
}

}  // namespace tessera
