// Advanced indexing: index (a[i0, i1, ...] with a tuple of optional index tensors) and
// index_put_/index_put (a[...] = values, optionally accumulating), with PyTorch's rules:
//   - bool/uint8 masks become their nonzero() coordinates, one long index per mask dim;
//     a 0-d bool mask adds a dimension of size 1 (true) or 0 (false) at its place;
//   - the index tensors broadcast together to a shape B; negative indices wrap;
//   - when the indexed dims are adjacent, the result is before + B + after (the dims before
//     and after the indexed block); otherwise the indexed dims move to the front: B + rest.
//
// Both directions are one loop over (i over the "before" dims, b over B, j over the "after"
// dims):  dst[dst_before[i] + dst_b[b] + dst_after(j)]  op=  src[src_before[i] + src_b[b] +
// src_after(j)]. The element offsets of the indexed dims (self's side) are computed once per b;
// the after block is walked as coalesced rows, so a[idx] on a [N, D] tensor is one memcpy per
// row. Writes never split b across threads: repeated indices accumulate in serial order, so
// results do not depend on the thread count.
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

// Row-major element offsets of every point of a box with the given strides.
std::vector<int64_t> box_offsets(IntArrayRef sizes, IntArrayRef strides) {
  const int64_t n = checked_numel(sizes, "index");
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (n == 0) return out;
  const int64_t nd = static_cast<int64_t>(sizes.size());
  DimVector c(static_cast<size_t>(nd), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = off;
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++c[d] < sizes[d]) {
        off += strides[d];
        break;
      }
      off -= (sizes[d] - 1) * strides[d];
      c[d] = 0;
    }
  }
  return out;
}

// The indexing problem after masks are expanded, indices broadcast and (if needed) self's
// indexed dims moved to the front.
struct IndexPlan {
  Tensor self;                  // possibly permuted / unsqueezed view of the caller's tensor
  int64_t first = 0;            // first indexed dim of `self`
  int64_t count = 0;            // number of indexed dims (adjacent in `self`)
  DimVector b_shape;            // broadcast shape of the index tensors
  std::vector<int64_t> self_b;  // per b: element offset in `self` of the indexed coordinates
  DimVector result_shape;       // before + B + after

  IntArrayRef before_sizes() const { return IntArrayRef(self.sizes().data(), first); }
  IntArrayRef before_strides() const { return IntArrayRef(self.strides().data(), first); }
  DimVector after_sizes() const {
    return DimVector(self.sizes().begin() + first + count, self.sizes().end());
  }
  DimVector after_strides() const {
    return DimVector(self.strides().begin() + first + count, self.strides().end());
  }
};

IndexPlan make_plan(std::string_view op, const Tensor& a,
                    const std::vector<std::optional<Tensor>>& indices) {
  Tensor self = a;
  // 1. Masks -> long indices; dims of `self` that each entry consumes.
  std::vector<Tensor> expanded;   // undefined = ":"
  std::vector<int64_t> orig_dim;  // the caller's dim each entry indexes (for messages)
  int64_t pos = 0, caller_dim = 0;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<Tensor>& entry = indices[k];
    if (!entry || !entry->defined()) {
      TS_CHECK(pos < self.dim(), IndexError,
               "{}(): too many indices for tensor of dimension {} (got {})", op, a.dim(),
               indices.size());
      expanded.emplace_back();
      orig_dim.push_back(caller_dim++);
      ++pos;
      continue;
    }
    const Tensor& idx = *entry;
    if (idx.dtype() == kBool || idx.dtype() == kUInt8) {
      if (idx.dim() == 0) {
        // a[True] adds a dim of size 1, a[False] one of size 0.
        self = self.unsqueeze(pos);
        const bool on = idx.to(kBool).item<bool>();
        expanded.push_back(on ? zeros({1}, kInt64) : empty({0}, kInt64));
        orig_dim.push_back(caller_dim);
        ++pos;
        continue;
      }
      TS_CHECK(pos + idx.dim() <= self.dim(), IndexError,
               "{}(): too many indices for tensor of dimension {} (got a mask of {} dims at "
               "index {})",
               op, a.dim(), idx.dim(), k);
      for (int64_t j = 0; j < idx.dim(); ++j) {
        TS_CHECK(idx.size(j) == self.size(pos + j), IndexError,
                 "{}(): The shape of the mask {} at index {} does not match the shape of the "
                 "indexed tensor {} at index {}",
                 op, idx.sizes().vec(), j, a.sizes().vec(), caller_dim + j);
      }
      const Tensor nz = nonzero(idx);
      for (int64_t j = 0; j < idx.dim(); ++j) {
        expanded.push_back(nz.select(1, j));
        orig_dim.push_back(caller_dim + j);
      }
      pos += idx.dim();
      caller_dim += idx.dim();
      continue;
    }
    TS_CHECK(idx.dtype() == kInt64, IndexError,
             "{}(): tensors used as indices must be long, byte or bool tensors, but got {} at "
             "index {}",
             op, idx.dtype(), k);
    TS_CHECK(pos < self.dim(), IndexError,
             "{}(): too many indices for tensor of dimension {} (got {})", op, a.dim(),
             indices.size());
    expanded.push_back(idx);
    orig_dim.push_back(caller_dim++);
    ++pos;
  }
  while (static_cast<int64_t>(expanded.size()) < self.dim()) {
    expanded.emplace_back();
    orig_dim.push_back(caller_dim++);
  }

  // 2. Broadcast the defined indices.
  std::vector<int64_t> defined;
  DimVector b_shape;
  for (size_t d = 0; d < expanded.size(); ++d) {
    if (!expanded[d].defined()) continue;
    if (defined.empty()) {
      b_shape = expanded[d].sizes().vec();
    } else {
      b_shape = broadcast_shapes(b_shape, expanded[d].sizes(), op);
    }
    defined.push_back(static_cast<int64_t>(d));
  }
  TS_CHECK(!defined.empty(), ValueError,
           "{}(): argument 'indices' expected at least one defined index tensor, but got none", op);

  // 3. Non-adjacent indexed dims move to the front (PyTorch's transposeToFront).
  bool adjacent = true;
  for (size_t k = 1; k < defined.size(); ++k) adjacent &= defined[k] == defined[k - 1] + 1;
  if (!adjacent) {
    DimVector perm;
    std::vector<Tensor> new_expanded;
    std::vector<int64_t> new_orig;
    for (int64_t d : defined) perm.push_back(d);
    for (int64_t d = 0; d < self.dim(); ++d)
      if (!expanded[d].defined()) perm.push_back(d);
    for (int64_t d : perm) {
      new_expanded.push_back(expanded[d]);
      new_orig.push_back(orig_dim[d]);
    }
    self = self.permute(perm);
    expanded = std::move(new_expanded);
    orig_dim = std::move(new_orig);
    for (size_t k = 0; k < defined.size(); ++k) defined[k] = static_cast<int64_t>(k);
  }

  IndexPlan plan;
  plan.self = self;
  plan.first = defined.front();
  plan.count = static_cast<int64_t>(defined.size());
  plan.b_shape = b_shape;
  const int64_t nb = checked_numel(b_shape, op);
  plan.self_b.assign(static_cast<size_t>(nb), 0);
  for (int64_t d : defined) {
    const Tensor idx = expanded[d].expand(b_shape).contiguous();
    const int64_t* v = idx.data_ptr<int64_t>();
    const int64_t size = self.size(d), stride = self.stride(d);
    for (int64_t b = 0; b < nb; ++b) {
      plan.self_b[b] += check_index(v[b], size, orig_dim[d], op, /*wrap=*/true) * stride;
    }
  }
  plan.result_shape = plan.before_sizes().vec();
  plan.result_shape.insert(plan.result_shape.end(), b_shape.begin(), b_shape.end());
  const DimVector after = plan.after_sizes();
  plan.result_shape.insert(plan.result_shape.end(), after.begin(), after.end());
  return plan;
}

// Moves elements for a plan. `dst_*`/`src_*` give each side's offsets: before (per i), b (per
// b) and after strides. `reads_only_src` says destinations never repeat (index), which lets
// threads split over b. op(dst_row, src_row, n, dst_stride, src_stride) handles one row piece.
struct Side {
  char* data;
  std::vector<int64_t> before;  // per i
  std::vector<int64_t> b;       // per b
  DimVector after_strides;
};

template <class RowOp>
void run_plan(const DimVector& after_sizes, const Side& dst, const Side& src, int64_t esize,
              bool destinations_unique, RowOp&& row_op) {
  const int64_t n_before = static_cast<int64_t>(dst.before.size());
  const int64_t nb = static_cast<int64_t>(dst.b.size());
  RowWalker<2> after = make_walker<2>(after_sizes, {dst.after_strides, src.after_strides});
  coalesce(after);
  const int64_t after_numel = after.numel();
  const int64_t total = n_before * nb * after_numel;
  if (total == 0) return;
  // The after block as a list of rows (usually one), walked once.
  std::vector<std::array<int64_t, 2>> rows;
  after.walk(0, 0, after.sizes[0], [&](const std::array<int64_t, 2>& off) { rows.push_back(off); });
  const int64_t nrows = static_cast<int64_t>(rows.size());
  const int64_t len = after.row_length();
  const int64_t rd = after.row_stride(0), rs = after.row_stride(1);
  auto block = [&](int64_t i, int64_t b, int64_t r, int64_t lo, int64_t hi) {
    char* d = dst.data + (dst.before[i] + dst.b[b] + rows[r][0] + lo * rd) * esize;
    const char* s = src.data + (src.before[i] + src.b[b] + rows[r][1] + lo * rs) * esize;
    row_op(d, s, hi - lo, rd, rs);
  };
  auto all_rows = [&](int64_t i, int64_t b) {
    for (int64_t r = 0; r < nrows; ++r) block(i, b, r, 0, len);
  };
  const int threads = get_num_threads();
  if (total < kGrainSize || threads == 1 || in_parallel_region()) {
    for (int64_t i = 0; i < n_before; ++i)
      for (int64_t b = 0; b < nb; ++b) all_rows(i, b);
    return;
  }
  const int64_t per_i = nb * after_numel;
  if (n_before >= 2 * threads) {
    parallel_for(0, n_before, std::max<int64_t>(1, kGrainSize / per_i),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t i = lo; i < hi; ++i)
                     for (int64_t b = 0; b < nb; ++b) all_rows(i, b);
                 });
    return;
  }
  if (destinations_unique) {
    parallel_for(0, n_before * nb, std::max<int64_t>(1, kGrainSize / after_numel),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t k = lo; k < hi; ++k) all_rows(k / nb, k % nb);
                 });
    return;
  }
  // Writes with possibly repeated b: split the after block (rows, else columns of the row) and
  // keep (i, b) serial within each thread.
  const int64_t per_row = n_before * nb * len;
  if (nrows >= 2 * threads) {
    parallel_for(0, nrows, std::max<int64_t>(1, kGrainSize / per_row), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        for (int64_t i = 0; i < n_before; ++i)
          for (int64_t b = 0; b < nb; ++b) block(i, b, r, 0, len);
    });
    return;
  }
  parallel_for(0, len, std::max<int64_t>(1, kGrainSize / (n_before * nb * nrows)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t r = 0; r < nrows; ++r)
                   for (int64_t i = 0; i < n_before; ++i)
                     for (int64_t b = 0; b < nb; ++b) block(i, b, r, lo, hi);
               });
}

}  // namespace

namespace {
Tensor index_kernel(const Tensor& a, const std::vector<std::optional<Tensor>>& indices);
const Tensor& index_put_kernel(const Tensor& a, const std::vector<std::optional<Tensor>>& indices,
                               const Tensor& values, bool accumulate);

// index_put's derivative (IndexPutBackward0): self keeps g except where values were written
// (unless accumulating); values get g at their positions, summed over their broadcast.
void record_index_put(autograd::Recorder& rec, const Tensor& out,
                      const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                      bool accumulate) {
  rec.finish("IndexPutBackward0", {out},
             [indices, accumulate, vs = values.sizes().vec(), vt = values.dtype()](
                 const autograd::tensor_list& g, const autograd::Node&) {
               const Tensor gs = accumulate ? g[0] : index_put(g[0], indices, zeros(vs, vt));
               return autograd::tensor_list{gs, autograd::sum_to(index(g[0], indices), vs)};
             });
}
}  // namespace

// The picked elements' gradients are added back at their positions (IndexBackward0).
Tensor index(const Tensor& a, const std::vector<std::optional<Tensor>>& indices) {
  autograd::Recorder rec({a});
  Tensor out = index_kernel(a, indices);
  if (rec)
    rec.finish(
        "IndexBackward0", {out},
        [indices, sizes = a.sizes().vec()](const autograd::tensor_list& g, const autograd::Node&) {
          return autograd::tensor_list{
              index_put(zeros(sizes, g[0].dtype()), indices, g[0], /*accumulate=*/true)};
        });
  return out;
}

const Tensor& index_put_(const Tensor& a, const std::vector<std::optional<Tensor>>& indices,
                         const Tensor& values, bool accumulate) {
  autograd::Recorder rec({a, values});
  if (rec) autograd::check_inplace(a, true, "index_put_");
  index_put_kernel(a, indices, values, accumulate);
  if (rec) record_index_put(rec, a, indices, values, accumulate);
  return a;
}

Tensor index_put(const Tensor& a, const std::vector<std::optional<Tensor>>& indices,
                 const Tensor& values, bool accumulate) {
  autograd::Recorder rec({a, values});
  Tensor out = a.clone();
  index_put_kernel(out, indices, values, accumulate);
  if (rec) record_index_put(rec, out, indices, values, accumulate);
  return out;
}

namespace {
Tensor index_kernel(const Tensor& a, const std::vector<std::optional<Tensor>>& indices) {
  IndexPlan plan = make_plan("index", a, indices);
  Tensor out = empty(plan.result_shape, a.dtype());
  if (out.numel() == 0) return out;
  const DimVector after = plan.after_sizes();
  const int64_t after_numel = checked_numel(after, "index");
  const int64_t nb = static_cast<int64_t>(plan.self_b.size());
  Side dst{static_cast<char*>(out.data_ptr()), {}, {}, contiguous_strides(after)};
  Side src{static_cast<char*>(plan.self.data_ptr()),
           box_offsets(plan.before_sizes(), plan.before_strides()), plan.self_b,
           plan.after_strides()};
  dst.before.resize(src.before.size());
  for (size_t i = 0; i < dst.before.size(); ++i)
    dst.before[i] = static_cast<int64_t>(i) * nb * after_numel;
  dst.b.resize(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) dst.b[b] = b * after_numel;
  dispatch_by_size(a.element_size(), [&]<class U>() {
    run_plan(after, dst, src, sizeof(U), /*destinations_unique=*/true,
             [](char* d, const char* s, int64_t n, int64_t sd, int64_t ss) {
               U* o = reinterpret_cast<U*>(d);
               const U* in = reinterpret_cast<const U*>(s);
               if (sd == 1 && ss == 1) {
                 std::memcpy(o, in, static_cast<size_t>(n) * sizeof(U));
               } else {
                 for (int64_t j = 0; j < n; ++j) o[j * sd] = in[j * ss];
               }
             });
  });
  return out;
}

const Tensor& index_put_kernel(const Tensor& a, const std::vector<std::optional<Tensor>>& indices,
                               const Tensor& values, bool accumulate) {
  constexpr std::string_view op = "index_put_";
  check_writable(a, op);
  TS_CHECK(values.dtype() == a.dtype(), TypeError,
           "{}(): index put requires the source and destination dtypes match, got {} for the "
           "destination and {} for the source",
           op, a.dtype(), values.dtype());
  IndexPlan plan = make_plan(op, a, indices);
  const DimVector& rshape = plan.result_shape;
  {
    // values must broadcast to the indexing result.
    bool ok = values.dim() <= static_cast<int64_t>(rshape.size());
    for (int64_t k = 1; ok && k <= values.dim(); ++k) {
      const int64_t vs = values.size(values.dim() - k);
      ok = vs == 1 || vs == rshape[rshape.size() - k];
    }
    TS_CHECK(ok, RuntimeError,
             "{}(): shape mismatch: value tensor of shape {} cannot be broadcast to indexing "
             "result of shape {}",
             op, values.sizes().vec(), rshape);
  }
  if (checked_numel(rshape, op) == 0) return a;
  // Values that share memory with the destination are read from a copy.
  const Tensor vals = (values.storage() == a.storage() ? values.clone() : values).expand(rshape);
  a.bump_version();

  const int64_t nbefore_dims = plan.first;
  const int64_t nb_dims = static_cast<int64_t>(plan.b_shape.size());
  const DimVector after = plan.after_sizes();
  IntArrayRef vstr = vals.strides();
  Side dst{static_cast<char*>(plan.self.data_ptr()),
           box_offsets(plan.before_sizes(), plan.before_strides()), plan.self_b,
           plan.after_strides()};
  Side src{static_cast<char*>(vals.data_ptr()),
           box_offsets(plan.before_sizes(), IntArrayRef(vstr.data(), nbefore_dims)),
           box_offsets(plan.b_shape, IntArrayRef(vstr.data() + nbefore_dims, nb_dims)),
           DimVector(vstr.begin() + nbefore_dims + nb_dims, vstr.end())};
  if (!accumulate) {
    dispatch_by_size(a.element_size(), [&]<class U>() {
      run_plan(after, dst, src, sizeof(U), /*destinations_unique=*/false,
               [](char* d, const char* s, int64_t n, int64_t sd, int64_t ss) {
                 U* o = reinterpret_cast<U*>(d);
                 const U* in = reinterpret_cast<const U*>(s);
                 for (int64_t j = 0; j < n; ++j) o[j * sd] = in[j * ss];
               });
    });
    return a;
  }
  visit_dtype<kAddTypes>(a.dtype(), op, [&]<class T>() {
    run_plan(after, dst, src, sizeof(T), /*destinations_unique=*/false,
             [](char* d, const char* s, int64_t n, int64_t sd, int64_t ss) {
               T* o = reinterpret_cast<T*>(d);
               const T* in = reinterpret_cast<const T*>(s);
               for (int64_t j = 0; j < n; ++j) o[j * sd] = add_elems<T>(o[j * sd], in[j * ss]);
             });
  });
  return a;
}

}  // namespace

}  // namespace tessera
