// Internal helpers shared by the joining, indexing, sorting and triangular ops
// (join.cpp, index_ops.cpp, advanced_index.cpp, sort.cpp, triangular.cpp):
//   - dispatch by element size for ops that only move elements (any dtype, fp8 and complex
//     included); ops that compute use visit_dtype (core/dtype_dispatch.h);
//   - an n-dimensional row walker over several strided operands, serial or split over one
//     dimension across the thread pool;
//   - index validation with the message every op shares:
//       "gather(): index 7 is out of bounds for dimension 0 with size 5".
#pragma once

#include <algorithm>
#include <array>
#include <complex>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "tessera/core/half.h"
#include "tessera/core/parallel.h"
#include "tessera/core/tensor.h"

namespace tessera::index_detail {

// ---- dtype dispatch -------------------------------------------------------------------------

// A 16-byte element (complex128) moved as one unit.
struct alignas(16) Bytes16 {
  uint64_t lo, hi;
};

// Calls fn.template operator()<U>() with an unsigned type of the element's size: ops that only
// move elements use it, so they work for every dtype.
template <class Fn>
decltype(auto) dispatch_by_size(int64_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1:
      return fn.template operator()<uint8_t>();
    case 2:
      return fn.template operator()<uint16_t>();
    case 4:
      return fn.template operator()<uint32_t>();
    case 8:
      return fn.template operator()<uint64_t>();
    case 16:
      return fn.template operator()<Bytes16>();
    default:
      TS_THROW(RuntimeError, "internal error: unexpected element size {}", element_size);
  }
}

// Dtypes the computing ops accept (see core/dtype_dispatch.h's visit_dtype).
inline constexpr DtypeMask kAddTypes = dtype_bit(kBool) | kNumericTypes;  // scatter_add, ...
inline constexpr DtypeMask kSortTypes = dtype_bit(kBool) | kRealTypes;    // sort, unique

// The type arithmetic on T happens in: float for the 16-bit floats, T otherwise.
template <class T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <class T>
using opmath_t = typename OpMath<T>::type;

// a + b in T, the way PyTorch's add does it (bool: logical or).
template <class T>
inline T add_elems(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    // Wrap-around like PyTorch's integer add, without signed-overflow UB.
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return T(static_cast<opmath_t<T>>(a) + static_cast<opmath_t<T>>(b));
  }
}

// ---- index checks -----------------------------------------------------------------------------

// Throws the shared out-of-bounds IndexError. Kept out of line and cold so that the checks
// in hot loops stay a compare and a branch.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_index_out_of_bounds(std::string_view op,
                                                                             int64_t idx,
                                                                             int64_t dim,
                                                                             int64_t size) {
  TS_THROW(IndexError, "{}(): index {} is out of bounds for dimension {} with size {}", op, idx,
           dim, size);
}

// Checks 0 <= idx < size (after wrapping negatives when `wrap`) and returns the wrapped index.
// The message names the op, the index, the dimension and its size.
inline int64_t check_index(int64_t idx, int64_t size, int64_t dim, std::string_view op, bool wrap) {
  const int64_t wrapped = (wrap && idx < 0) ? idx + size : idx;
  if (static_cast<uint64_t>(wrapped) >= static_cast<uint64_t>(size)) [[unlikely]] {
    throw_index_out_of_bounds(op, idx, dim, size);
  }
  return wrapped;
}

// In-place ops refuse destinations where one memory location is reachable by two indices
// (expanded or overlapping strides), with PyTorch's message.
inline void check_writable(const Tensor& t, std::string_view op) {
  TS_CHECK(!has_internal_overlap(t), RuntimeError,
           "{}(): unsupported operation: more than one element of the written-to tensor refers "
           "to a single memory location. Please clone() the tensor before performing the "
           "operation.",
           op);
}

// Reads index tensor element i (int64 or int32) of a contiguous index buffer.
inline int64_t load_index(const void* data, bool is_int32, int64_t i) {
  return is_int32 ? static_cast<const int32_t*>(data)[i] : static_cast<const int64_t*>(data)[i];
}

// ---- n-dimensional row walker -----------------------------------------------------------------

// A box of `sizes` visited row by row (the last dimension is the row) for N operands with
// element strides. Offsets are in elements from each operand's base.
template <size_t N>
struct RowWalker {
  DimVector sizes;                   // ndim >= 1
  std::array<DimVector, N> strides;  // per operand, same length as sizes

  int64_t ndim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  int64_t row_length() const { return sizes.back(); }
  int64_t row_stride(size_t op) const { return strides[op].back(); }

  // Calls fn(offsets) for every row of the box where dimension `split` runs over [lo, hi),
  // in row-major order. offsets[k] is operand k's offset of the row's first element.
  template <class Fn>
  void walk(int64_t split, int64_t lo, int64_t hi, Fn&& fn) const {
    const int64_t nd = ndim();
    if (hi <= lo) return;
    for (int64_t d = 0; d + 1 < nd; ++d)
      if (sizes[d] == 0) return;
    if (sizes.back() == 0) return;
    std::array<int64_t, N> off{};
    for (size_t k = 0; k < N; ++k) off[k] = lo * strides[k][split];
    DimVector lim = sizes;
    lim[split] = hi - lo;
    if (nd == 1) {
      fn(off);
      return;
    }
    // Odometer over the dimensions before the row (split is never the row dimension here).
    DimVector counter(nd - 1, 0);
    while (true) {
      fn(off);
      int64_t d = nd - 2;
      for (; d >= 0; --d) {
        if (++counter[d] < lim[d]) {
          for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
          break;
        }
        for (size_t k = 0; k < N; ++k) off[k] -= (lim[d] - 1) * strides[k][d];
        counter[d] = 0;
      }
      if (d < 0) return;
    }
  }

  // Splits the box over dimension `split` across the thread pool when it holds at least
  // `grain` elements; fn(offsets, row_begin, row_end) gets each row's offsets and the part
  // [row_begin, row_end) of the row it must process. Within one thread, rows are visited in
  // row-major order, so elements that differ only outside `split` keep their serial order.
  template <class Fn>
  void walk_parallel(int64_t split, int64_t grain, Fn&& fn) const {
    const int64_t total = numel();
    if (total == 0) return;
    const int64_t nd = ndim();
    const int64_t row = row_length();
    const bool serial = split < 0 || total < grain || sizes[split] < 2 || get_num_threads() == 1 ||
                        in_parallel_region();
    if (serial) {
      walk(0, 0, sizes[0], [&](const std::array<int64_t, N>& off) { fn(off, int64_t{0}, row); });
      return;
    }
    const int64_t per = total / sizes[split];
    const int64_t chunk_grain = std::max<int64_t>(1, grain / std::max<int64_t>(per, 1));
    if (split == nd - 1) {
      parallel_for(0, row, chunk_grain, [&](int64_t b, int64_t e) {
        walk(0, 0, sizes[0], [&](const std::array<int64_t, N>& off) { fn(off, b, e); });
      });
      return;
    }
    parallel_for(0, sizes[split], chunk_grain, [&](int64_t b, int64_t e) {
      walk(split, b, e, [&](const std::array<int64_t, N>& off) { fn(off, int64_t{0}, row); });
    });
  }
};

// Makes a walker over `sizes` (0-d becomes one element) with the operands' element strides.
template <size_t N>
RowWalker<N> make_walker(IntArrayRef sizes, const std::array<DimVector, N>& strides) {
  RowWalker<N> w;
  if (sizes.empty()) {
    w.sizes = {1};
    for (size_t k = 0; k < N; ++k) w.strides[k] = {0};
    return w;
  }
  w.sizes = sizes.vec();
  w.strides = strides;
  for (size_t k = 0; k < N; ++k) TS_INTERNAL_ASSERT(w.strides[k].size() == w.sizes.size());
  return w;
}

// Drops size-1 dimensions and merges neighbours that every operand walks as one (stride[d] ==
// stride[d+1] * size[d+1]), so rows get as long as the layout allows. Row-major order of the
// elements is unchanged. Dimension `keep` (or -1) is never merged; returns its new position
// (-1 when it had size 1 and was dropped).
template <size_t N>
int64_t coalesce(RowWalker<N>& w, int64_t keep = -1) {
  if (w.numel() == 0) return keep;
  RowWalker<N> r;
  int64_t kept = -1;
  for (size_t d = 0; d < w.sizes.size(); ++d) {
    if (w.sizes[d] == 1) continue;
    const bool is_keep = static_cast<int64_t>(d) == keep;
    const bool prev_keep = kept >= 0 && kept == static_cast<int64_t>(r.sizes.size()) - 1;
    bool merge = !r.sizes.empty() && !is_keep && !prev_keep;
    for (size_t k = 0; merge && k < N; ++k)
      merge = r.strides[k].back() == w.strides[k][d] * w.sizes[d];
    if (merge) {
      r.sizes.back() *= w.sizes[d];
      for (size_t k = 0; k < N; ++k) r.strides[k].back() = w.strides[k][d];
      continue;
    }
    if (is_keep) kept = static_cast<int64_t>(r.sizes.size());
    r.sizes.push_back(w.sizes[d]);
    for (size_t k = 0; k < N; ++k) r.strides[k].push_back(w.strides[k][d]);
  }
  if (r.sizes.empty()) {
    r.sizes = {1};
    for (size_t k = 0; k < N; ++k) r.strides[k] = {0};
  }
  w = std::move(r);
  return kept;
}

// The dimension other than `exclude` with the largest size: the one to split across threads so
// that everything along `exclude` stays in one thread. Returns -1 if there is none.
inline int64_t pick_split_dim(IntArrayRef sizes, int64_t exclude) {
  int64_t best = -1;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d == exclude) continue;
    if (best < 0 || sizes[d] > sizes[best]) best = d;
  }
  return best;
}

}  // namespace tessera::index_detail
