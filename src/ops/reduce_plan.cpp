#include "ops/reduce_plan.h"

#include <algorithm>
#include <numeric>

namespace tessera {

int64_t wrap_reduce_dim(int64_t dim, int64_t ndim, std::string_view op) {
  return wrap_dim(dim, std::max<int64_t>(ndim, 1), op, "dim");
}

std::vector<bool> reduce_dim_mask(IntArrayRef dims, int64_t ndim, std::string_view op) {
  std::vector<bool> mask(static_cast<size_t>(ndim), dims.empty());
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(ndim, 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_reduce_dim(d, ndim, op);
    TS_CHECK(!seen[w], RuntimeError,
             "{}(): argument 'dim' expected distinct dims, but dim {} "
             "appears multiple times in the list of dims",
             op, w);
    seen[w] = true;
    if (ndim > 0) mask[w] = true;
  }
  return mask;
}

DimVector reduced_sizes(IntArrayRef sizes, const std::vector<bool>& mask, bool keepdim) {
  DimVector out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!mask[d]) {
      out.push_back(sizes[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

int64_t reduced_count(IntArrayRef sizes, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (mask[d]) n *= sizes[d];
  return n;
}

int64_t ReducePlan::num_batches() const {
  int64_t n = 1;
  for (int64_t s : batch_sizes) n *= s;
  return n;
}

void ReducePlan::batch_offsets(int64_t b, int64_t& in_off, int64_t& out_off) const {
  in_off = out_off = 0;
  for (size_t d = 0; d < batch_sizes.size(); ++d) {
    const int64_t i = b % batch_sizes[d];
    b /= batch_sizes[d];
    in_off += i * batch_in_strides[d];
    out_off += i * batch_out_strides[d];
  }
}

namespace {

struct PlanDim {
  int64_t size, in_stride, out_stride;
  bool reduced;
};

// Non-trivial dims ordered innermost first (by input stride) and coalesced.
std::vector<PlanDim> canonical_dims(const Tensor& a, const std::vector<bool>& mask,
                                    IntArrayRef out_strides) {
  std::vector<PlanDim> dims;
  for (int64_t d = a.dim() - 1; d >= 0; --d) {
    if (a.size(d) == 1) continue;
    dims.push_back({a.size(d), a.stride(d), mask[d] ? 0 : out_strides[d], mask[d]});
  }
  // Stable: among equal input strides (stride 0, say) the later dim stays inner.
  std::stable_sort(dims.begin(), dims.end(),
                   [](const PlanDim& x, const PlanDim& y) { return x.in_stride < y.in_stride; });
  std::vector<PlanDim> merged;
  for (const PlanDim& d : dims) {
    if (!merged.empty()) {
      PlanDim& in = merged.back();
      const bool adjacent = in.reduced == d.reduced && d.in_stride == in.in_stride * in.size &&
                            (d.reduced || d.out_stride == in.out_stride * in.size);
      if (adjacent) {
        in.size *= d.size;
        continue;
      }
    }
    merged.push_back(d);
  }
  return merged;
}

}  // namespace

ReducePlan plan_reduction(const Tensor& a, const std::vector<bool>& mask, IntArrayRef out_strides,
                          bool allow_cols) {
  std::vector<PlanDim> dims = canonical_dims(a, mask, out_strides);
  int num_reduced = 0;
  int reduced_at = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].reduced) {
      ++num_reduced;
      reduced_at = static_cast<int>(i);
    }
  }
  ReducePlan plan;
  plan.input = a;
  auto add_batches = [&](size_t skip0, int skip1) {
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i == skip0 || static_cast<int>(i) == skip1) continue;
      plan.batch_sizes.push_back(dims[i].size);
      plan.batch_in_strides.push_back(dims[i].in_stride);
      plan.batch_out_strides.push_back(dims[i].out_stride);
    }
  };
  if (num_reduced == 0) {
    // Nothing of size > 1 is reduced: every output reduces one element.
    plan.K = 1;
    add_batches(SIZE_MAX, -1);
    return plan;
  }
  if (num_reduced == 1) {
    const PlanDim& r = dims[reduced_at];
    if (reduced_at == 0 && r.in_stride == 1) {
      plan.K = r.size;
      add_batches(0, -1);
      return plan;
    }
    if (allow_cols && reduced_at > 0 && r.in_stride > 0 && dims[0].in_stride == 1) {
      plan.layout = ReducePlan::Layout::Cols;
      plan.K = r.size;
      plan.k_stride = r.in_stride;
      plan.N = dims[0].size;
      plan.n_out_stride = dims[0].out_stride;
      add_batches(0, reduced_at);
      return plan;
    }
  }
  // General: copy with kept dims first (original order) and reduced dims last.
  DimVector perm, kept_out_strides;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!mask[d]) perm.push_back(d);
  const size_t nkept = perm.size();
  for (int64_t d = 0; d < a.dim(); ++d)
    if (mask[d]) perm.push_back(d);
  Tensor copy = a.permute(perm).contiguous();
  std::vector<bool> copy_mask(perm.size(), false);
  DimVector copy_out_strides(perm.size(), 0);
  for (size_t i = 0; i < perm.size(); ++i) {
    copy_mask[i] = i >= nkept;
    copy_out_strides[i] = mask[perm[i]] ? 0 : out_strides[perm[i]];
  }
  ReducePlan p = plan_reduction(copy, copy_mask, copy_out_strides, false);
  TS_INTERNAL_ASSERT(p.layout == ReducePlan::Layout::Rows);
  return p;
}

}  // namespace tessera
