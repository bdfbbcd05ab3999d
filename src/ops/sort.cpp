// Sorting along a dimension: sort (stable), argsort, topk, unique (flat or along a dim).
//
// Every row (1-d slice along `dim`) is sorted independently as (key, index) pairs: a stable
// LSD radix sort for long rows, std::stable_sort for short ones; rows are spread over the
// thread pool. Keys are integers whose unsigned or
// signed order is the order PyTorch sorts by:
//   - floats map to unsigned integers (sign-magnitude flipped) after -0.0 becomes +0.0 and every
//     NaN becomes one key above +inf, so NaN sorts as the largest value and -0.0 == 0.0 keeps
//     its original order (stable) exactly as torch.sort(stable=True) does;
//   - integers and bool become unsigned with the sign bit flipped.
// Values are read back from the input by index, so -0.0 and NaN payloads come out unchanged.
// topk uses std::partial_sort with (key, index) as a total order: its first k are exactly the
// first k of the stable sort (ties keep the lowest index first). unique sorts the same keys and
// treats every NaN as distinct (as PyTorch 1.13 does), placing them last.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numeric>

#include <vector>
#include "autograd/record.h"

#include "ops/index_common.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/shape.h"

namespace tessera {

using namespace index_detail;

namespace {

template <class T>
struct SortKey {
  // Integers and bool: unsigned with the sign bit flipped, so unsigned order is value order.
  using type = std::make_unsigned_t<std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;
  static type make(T v) {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<type>(static_cast<type>(v) ^ (type{1} << (8 * sizeof(type) - 1)));
    } else {
      return static_cast<type>(v);
    }
  }
  static bool is_nan(T) { return false; }
};

inline uint32_t float_key(float f) {
  if (std::isnan(f)) return 0xffffffffu;
  if (f == 0.0f) f = 0.0f;  // -0.0 == 0.0
  const uint32_t u = std::bit_cast<uint32_t>(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
template <>
struct SortKey<float> {
  using type = uint32_t;
  static type make(float v) { return float_key(v); }
  static bool is_nan(float v) { return std::isnan(v); }
};
template <>
struct SortKey<Half> {
  using type = uint32_t;
  static type make(Half v) { return float_key(static_cast<float>(v)); }
  static bool is_nan(Half v) { return std::isnan(static_cast<float>(v)); }
};
template <>
struct SortKey<BFloat16> {
  using type = uint32_t;
  static type make(BFloat16 v) { return float_key(static_cast<float>(v)); }
  static bool is_nan(BFloat16 v) { return std::isnan(static_cast<float>(v)); }
};
template <>
struct SortKey<double> {
  using type = uint64_t;
  static type make(double d) {
    if (std::isnan(d)) return ~uint64_t{0};
    if (d == 0.0) d = 0.0;
    const uint64_t u = std::bit_cast<uint64_t>(d);
    return (u & (uint64_t{1} << 63)) ? ~u : (u | (uint64_t{1} << 63));
  }
  static bool is_nan(double v) { return std::isnan(v); }
};

template <class K>
struct Entry {
  K key;
  int64_t index;
};

// Stable LSD radix sort of (key, index) entries by unsigned key, one byte per pass; passes in
// which every key has the same byte are skipped (small-range integers take one or two).
// `descending` sorts by ~key, which keeps equal keys in their original order too.
template <class K>
void radix_sort(std::vector<Entry<K>>& a, std::vector<Entry<K>>& tmp, bool descending) {
  constexpr int kBytes = sizeof(K);
  const size_t n = a.size();
  if (descending) {
    for (Entry<K>& e : a) e.key = static_cast<K>(~e.key);
  }
  std::vector<std::array<size_t, 256>> hist(kBytes);
  for (auto& h : hist) h.fill(0);
  for (const Entry<K>& e : a) {
    for (int b = 0; b < kBytes; ++b) ++hist[b][(e.key >> (8 * b)) & 0xff];
  }
  tmp.resize(n);
  for (int b = 0; b < kBytes; ++b) {
    std::array<size_t, 256>& h = hist[b];
    if (std::any_of(h.begin(), h.end(), [n](size_t c) { return c == n; })) continue;
    size_t sum = 0;
    for (size_t& c : h) {
      const size_t cnt = c;
      c = sum;
      sum += cnt;
    }
    for (const Entry<K>& e : a) tmp[h[(e.key >> (8 * b)) & 0xff]++] = e;
    a.swap(tmp);
  }
  if (descending) {
    for (Entry<K>& e : a) e.key = static_cast<K>(~e.key);
  }
}

// Rows at least this long are radix sorted; shorter ones use std::stable_sort.
constexpr int64_t kRadixMinRow = 512;

template <class K>
void sort_entries(std::vector<Entry<K>>& a, std::vector<Entry<K>>& tmp, bool descending) {
  if (static_cast<int64_t>(a.size()) >= kRadixMinRow) {
    radix_sort(a, tmp, descending);
  } else if (descending) {
    std::stable_sort(a.begin(), a.end(),
                     [](const Entry<K>& x, const Entry<K>& y) { return x.key > y.key; });
  } else {
    std::stable_sort(a.begin(), a.end(),
                     [](const Entry<K>& x, const Entry<K>& y) { return x.key < y.key; });
  }
}

// Sortable dtypes: everything real and bool (PyTorch does not sort complex).
template <class Fn>
decltype(auto) dispatch_sortable(ScalarType t, std::string_view op, Fn&& fn) {
  return visit_dtype<kSortTypes>(t, op, std::forward<Fn>(fn));
}

// Geometry of "rows along dim": a [rows] list of element offsets for the input and for a
// contiguous output, plus the strides along dim.
struct Rows {
  int64_t n = 1;      // row length (size of dim; 1 for 0-d)
  int64_t count = 1;  // number of rows
  int64_t in_stride = 0;
  std::vector<int64_t> in_offsets;   // per row
  std::vector<int64_t> out_offsets;  // per row, in a contiguous tensor of `out_sizes`
  int64_t out_stride = 0;
};

// Rows of `a` along dim, and their places in a contiguous output whose size at dim is out_n.
Rows make_rows(const Tensor& a, int64_t dim, int64_t out_n) {
  Rows r;
  if (a.dim() == 0) {
    r.in_offsets = {0};
    r.out_offsets = {0};
    return r;
  }
  r.n = a.size(dim);
  r.in_stride = a.stride(dim);
  DimVector sizes = a.sizes().vec();
  DimVector out_sizes = sizes;
  out_sizes[dim] = out_n;
  const DimVector out_strides = contiguous_strides(out_sizes);
  r.out_stride = out_strides[dim];
  sizes[dim] = 1;
  r.count = checked_numel(sizes, "sort");
  r.in_offsets.resize(static_cast<size_t>(r.count));
  r.out_offsets.resize(static_cast<size_t>(r.count));
  const int64_t nd = a.dim();
  DimVector c(static_cast<size_t>(nd), 0);
  int64_t oi = 0, oo = 0;
  for (int64_t row = 0; row < r.count; ++row) {
    r.in_offsets[row] = oi;
    r.out_offsets[row] = oo;
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++c[d] < sizes[d]) {
        oi += a.stride(d);
        oo += out_strides[d];
        break;
      }
      oi -= (sizes[d] - 1) * a.stride(d);
      oo -= (sizes[d] - 1) * out_strides[d];
      c[d] = 0;
    }
  }
  return r;
}

// Runs fn(row_begin, row_end) over rows, in parallel when the work is large.
void for_rows(const Rows& r, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(r.n, 1));
  if (r.count < 2 || r.count * r.n < kGrainSize || get_num_threads() == 1) {
    fn(0, r.count);
  } else {
    parallel_for(0, r.count, grain, fn);
  }
}

}  // namespace

namespace {
std::tuple<Tensor, Tensor> sort_kernel(const Tensor& a, int64_t dim, bool descending);
std::tuple<Tensor, Tensor> topk_kernel(const Tensor& a, int64_t k, int64_t dim, bool largest);

// sort/topk values: each gradient goes back to where its value came from.
void record_selection(autograd::Recorder& rec, const char* name, const Tensor& a,
                      const Tensor& values, const Tensor& indices, int64_t dim) {
  rec.finish(name, {values},
             [sizes = a.sizes().vec(), dim, indices](const autograd::tensor_list& g,
                                                     const autograd::Node&) {
               if (sizes.empty()) return autograd::tensor_list{g[0].reshape({})};
               return autograd::tensor_list{zeros(sizes, g[0].dtype()).scatter(dim, indices, g[0])};
             });
}
}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending, bool stable) {
  (void)stable;  // always stable: a stable order is also a valid unstable one
  autograd::Recorder rec({a});
  auto [values, indices] = sort_kernel(a, dim, descending);
  if (rec)
    record_selection(rec, "SortBackward0", a, values, indices,
                     wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "sort"));
  return {values, indices};
}

std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  (void)sorted;  // the k results always come out sorted (a valid order for sorted=false too)
  autograd::Recorder rec({a});
  auto [values, indices] = topk_kernel(a, k, dim, largest);
  if (rec)
    record_selection(rec, "TopkBackward0", a, values, indices,
                     wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "topk"));
  return {values, indices};
}

namespace {
std::tuple<Tensor, Tensor> sort_kernel(const Tensor& a, int64_t dim, bool descending) {
  dim = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "sort");
  Tensor values = empty(a.sizes(), a.dtype());
  Tensor indices = empty(a.sizes(), kInt64);
  if (a.numel() == 0) return {values, indices};
  const Rows rows = make_rows(a, dim, a.dim() == 0 ? 1 : a.size(dim));
  dispatch_sortable(a.dtype(), "sort", [&]<class T>() {
    using K = typename SortKey<T>::type;
    const T* in = static_cast<const T*>(a.data_ptr());
    T* vout = static_cast<T*>(values.data_ptr());
    int64_t* iout = indices.data_ptr<int64_t>();
    for_rows(rows, [&](int64_t lo, int64_t hi) {
      std::vector<Entry<K>> buf(static_cast<size_t>(rows.n)), tmp;
      for (int64_t row = lo; row < hi; ++row) {
        const T* src = in + rows.in_offsets[row];
        buf.resize(static_cast<size_t>(rows.n));
        for (int64_t j = 0; j < rows.n; ++j)
          buf[j] = {SortKey<T>::make(src[j * rows.in_stride]), j};
        sort_entries(buf, tmp, descending);
        T* vo = vout + rows.out_offsets[row];
        int64_t* io = iout + rows.out_offsets[row];
        for (int64_t j = 0; j < rows.n; ++j) {
          vo[j * rows.out_stride] = src[buf[j].index * rows.in_stride];
          io[j * rows.out_stride] = buf[j].index;
        }
      }
    });
  });
  return {values, indices};
}
}  // namespace

Tensor argsort(const Tensor& a, int64_t dim, bool descending, bool stable) {
  return std::get<1>(sort(a, dim, descending, stable));
}

namespace {
std::tuple<Tensor, Tensor> topk_kernel(const Tensor& a, int64_t k, int64_t dim, bool largest) {
  dim = wrap_dim(dim, std::max<int64_t>(a.dim(), 1), "topk");
  const int64_t n = a.dim() == 0 ? 1 : a.size(dim);
  TS_CHECK(k >= 0 && k <= n, RuntimeError,
           "topk(): selected index k out of range: argument 'k' expected a value in [0, {}], but "
           "got {}",
           n, k);
  TS_CHECK(a.dtype() != kBool, TypeError, "topk(): not implemented for dtype {}", a.dtype());
  DimVector out_sizes = a.sizes().vec();
  if (a.dim() > 0) out_sizes[dim] = k;
  if (a.dim() == 0 && k == 0) out_sizes = {0};
  Tensor values = empty(out_sizes, a.dtype());
  Tensor indices = empty(out_sizes, kInt64);
  if (values.numel() == 0) return {values, indices};
  const Rows rows = make_rows(a, dim, k);
  dispatch_sortable(a.dtype(), "topk", [&]<class T>() {
    using K = typename SortKey<T>::type;
    const T* in = static_cast<const T*>(a.data_ptr());
    T* vout = static_cast<T*>(values.data_ptr());
    int64_t* iout = indices.data_ptr<int64_t>();
    // (key, index) total orders: best first, ties by lowest index.
    auto first_largest = [](const Entry<K>& x, const Entry<K>& y) {
      return x.key > y.key || (x.key == y.key && x.index < y.index);
    };
    auto first_smallest = [](const Entry<K>& x, const Entry<K>& y) {
      return x.key < y.key || (x.key == y.key && x.index < y.index);
    };
    for_rows(rows, [&](int64_t lo, int64_t hi) {
      std::vector<Entry<K>> buf(static_cast<size_t>(rows.n));
      for (int64_t row = lo; row < hi; ++row) {
        const T* src = in + rows.in_offsets[row];
        for (int64_t j = 0; j < rows.n; ++j)
          buf[j] = {SortKey<T>::make(src[j * rows.in_stride]), j};
        if (largest) {
          std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), first_largest);
        } else {
          std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), first_smallest);
        }
        T* vo = vout + rows.out_offsets[row];
        int64_t* io = iout + rows.out_offsets[row];
        for (int64_t j = 0; j < k; ++j) {
          vo[j * rows.out_stride] = src[buf[j].index * rows.in_stride];
          io[j * rows.out_stride] = buf[j].index;
        }
      }
    });
  });
  return {values, indices};
}

std::tuple<Tensor, Tensor, Tensor> unique_flat(const Tensor& a, bool return_inverse,
                                               bool return_counts) {
  const Tensor flat = a.contiguous().reshape({a.numel()});
  const int64_t n = flat.numel();
  Tensor inverse = return_inverse ? empty(a.sizes(), kInt64) : empty({0}, kInt64);
  std::vector<int64_t> firsts, counts;  // per group: sorted position of its first element
  Tensor values;
  dispatch_sortable(a.dtype(), "unique", [&]<class T>() {
    using K = typename SortKey<T>::type;
    const T* in = static_cast<const T*>(flat.data_ptr());
    std::vector<Entry<K>> buf(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) buf[j] = {SortKey<T>::make(in[j]), j};
    std::vector<Entry<K>> tmp;
    sort_entries(buf, tmp, /*descending=*/false);
    int64_t* inv = return_inverse ? inverse.data_ptr<int64_t>() : nullptr;
    for (int64_t j = 0; j < n; ++j) {
      const bool nan = SortKey<T>::is_nan(in[buf[j].index]);
      const bool same = j > 0 && !nan && buf[j].key == buf[j - 1].key;
      if (!same) {
        firsts.push_back(buf[j].index);
        counts.push_back(0);
      }
      ++counts.back();
      if (inv) inv[buf[j].index] = static_cast<int64_t>(firsts.size()) - 1;
    }
    values = empty({static_cast<int64_t>(firsts.size())}, a.dtype());
    T* vo = static_cast<T*>(values.data_ptr());
    for (size_t g = 0; g < firsts.size(); ++g) vo[g] = in[firsts[g]];
  });
  Tensor count_t = empty({return_counts ? static_cast<int64_t>(counts.size()) : 0}, kInt64);
  if (return_counts) std::copy(counts.begin(), counts.end(), count_t.data_ptr<int64_t>());
  return {values, inverse, count_t};
}

// Unique slices along dim: rows of a.movedim(dim, 0) compared lexicographically by key. A row
// that holds a NaN equals no other row.
std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& a, int64_t dim, bool return_inverse,
                                              bool return_counts) {
  TS_CHECK(a.dim() > 0, IndexError,
           "unique(): Dimension specified as {} but tensor has no dimensions", dim);
  dim = wrap_dim(dim, a.dim(), "unique");
  const int64_t n = a.size(dim);
  if (a.numel() == 0) {
    TS_CHECK(n == 0, RuntimeError,
             "unique(): There are 0 sized dimensions, and they aren't selected, so unique cannot "
             "be applied (shape {}, dim {})",
             a.sizes().vec(), dim);
    return {a.clone(), empty({0}, kInt64), empty({0}, kInt64)};
  }
  const int64_t m = a.numel() / n;
  const Tensor rows = a.movedim(dim, 0).contiguous().reshape({n, m});
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> group_first, counts;
  std::vector<int64_t> inv(static_cast<size_t>(n));
  dispatch_sortable(a.dtype(), "unique", [&]<class T>() {
    using K = typename SortKey<T>::type;
    const T* in = static_cast<const T*>(rows.data_ptr());
    std::vector<K> keys(static_cast<size_t>(n * m));
    std::vector<uint8_t> has_nan(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n * m; ++i) {
      keys[i] = SortKey<T>::make(in[i]);
      if (SortKey<T>::is_nan(in[i])) has_nan[i / m] = 1;
    }
    auto row_less = [&](int64_t x, int64_t y) {
      return std::lexicographical_compare(keys.begin() + x * m, keys.begin() + (x + 1) * m,
                                          keys.begin() + y * m, keys.begin() + (y + 1) * m);
    };
    auto row_equal = [&](int64_t x, int64_t y) {
      if (has_nan[x] || has_nan[y]) return false;
      return std::equal(keys.begin() + x * m, keys.begin() + (x + 1) * m, keys.begin() + y * m);
    };
    std::stable_sort(order.begin(), order.end(), row_less);
    for (int64_t j = 0; j < n; ++j) {
      if (j == 0 || !row_equal(order[j], order[j - 1])) {
        group_first.push_back(order[j]);
        counts.push_back(0);
      }
      ++counts.back();
      inv[order[j]] = static_cast<int64_t>(group_first.size()) - 1;
    }
  });
  Tensor pick = empty({static_cast<int64_t>(group_first.size())}, kInt64);
  std::copy(group_first.begin(), group_first.end(), pick.data_ptr<int64_t>());
  Tensor values = index_select(a, dim, pick);
  Tensor inverse = empty({return_inverse ? n : 0}, kInt64);
  if (return_inverse) std::copy(inv.begin(), inv.end(), inverse.data_ptr<int64_t>());
  Tensor count_t = empty({return_counts ? static_cast<int64_t>(counts.size()) : 0}, kInt64);
  if (return_counts) std::copy(counts.begin(), counts.end(), count_t.data_ptr<int64_t>());
  return {values, inverse, count_t};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& a, bool sorted, bool return_inverse,
                                          bool return_counts, std::optional<int64_t> dim) {
  (void)sorted;  // results are always sorted (a valid order for sorted=false too)
  autograd::check_no_grad_needed({&a, 1}, "unique");
  if (dim) return unique_dim(a, *dim, return_inverse, return_counts);
  return unique_flat(a, return_inverse, return_counts);
}

std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return tessera::topk(*this, k, dim, largest, sorted);
}
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending, bool stable) const {
  return tessera::sort(*this, dim, descending, stable);
}
Tensor Tensor::argsort(int64_t dim, bool descending, bool stable) const {
  return tessera::argsort(*this, dim, descending, stable);
}

}  // namespace tessera
