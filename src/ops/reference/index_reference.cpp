// Reference indexing and sorting ops: contiguous float64 copies and multi-index loops.
#include "ops/reference/index_reference.h"

#include <cmath>
#include <vector>

#include "tessera/ops/factory.h"

namespace tessera::reference {

namespace {

struct Dense {
  std::vector<double> v;
  DimVector sizes;
  DimVector strides;  // contiguous, in elements

  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  // Multi-index of linear position i.
  DimVector unravel(int64_t i) const {
    DimVector c(sizes.size());
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      c[d] = i % sizes[d];
      i /= sizes[d];
    }
    return c;
  }
  int64_t ravel(const DimVector& c) const {
    int64_t off = 0;
    for (size_t d = 0; d < c.size(); ++d) off += c[d] * strides[d];
    return off;
  }
};

Dense dense(const Tensor& t) {
  Dense d;
  const Tensor c = t.to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  d.v.assign(p, p + c.numel());
  d.sizes = t.sizes().vec();
  d.strides = contiguous_strides(d.sizes);
  return d;
}

std::vector<int64_t> ints(const Tensor& t) {
  const Tensor c = t.to(kInt64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

Tensor from_dense(const std::vector<double>& v, IntArrayRef sizes, ScalarType dtype) {
  return tessera::tensor<double>(v).reshape(sizes).to(dtype);
}

Tensor from_ints(const std::vector<int64_t>& v, IntArrayRef sizes) {
  return tessera::tensor<int64_t>(v).reshape(sizes);
}

// Strict "x comes before y" for a sort order: NaN is the largest value; -0.0 == 0.0.
bool before(double x, double y, bool descending) {
  const bool xn = std::isnan(x), yn = std::isnan(y);
  if (descending) return (xn && !yn) || (!xn && !yn && x > y);
  return (!xn && yn) || (!xn && !yn && x < y);
}

}  // namespace

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  const Dense x = dense(a);
  const std::vector<int64_t> idx = ints(index);
  DimVector out_sizes = x.sizes;
  if (out_sizes.empty()) return a.clone();
  out_sizes[dim] = static_cast<int64_t>(idx.size());
  Dense out{std::vector<double>(checked_numel(out_sizes, "ref")), out_sizes,
            contiguous_strides(out_sizes)};
  for (int64_t i = 0; i < out.numel(); ++i) {
    DimVector c = out.unravel(i);
    c[dim] = idx[c[dim]];
    out.v[i] = x.v[x.ravel(c)];
  }
  return from_dense(out.v, out_sizes, a.dtype());
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  const Dense x = dense(a);
  const Dense ix = dense(index);
  std::vector<double> out(ix.v.size());
  for (int64_t i = 0; i < ix.numel(); ++i) {
    DimVector c = ix.unravel(i);
    if (c.empty()) c = {0};
    c[dim] = static_cast<int64_t>(ix.v[i]);
    out[i] = x.sizes.empty() ? x.v[0] : x.v[x.ravel(c)];
  }
  return from_dense(out, index.sizes(), a.dtype());
}

namespace {

Tensor scatter_impl(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src,
                    bool add) {
  Dense x = dense(a);
  const Dense ix = dense(index);
  const Dense s = dense(src);
  for (int64_t i = 0; i < ix.numel(); ++i) {
    const DimVector ci = ix.unravel(i);
    DimVector cx = ci;
    if (!cx.empty()) cx[dim] = static_cast<int64_t>(ix.v[i]);
    const int64_t to = x.sizes.empty() ? 0 : x.ravel(cx);
    const double from = s.sizes.empty() ? s.v[0] : s.v[s.ravel(ci)];
    x.v[to] = add ? x.v[to] + from : from;
  }
  return from_dense(x.v, a.sizes(), a.dtype());
}

}  // namespace

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl(a, dim, index, src, false);
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl(a, dim, index, src, true);
}

Tensor index_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha) {
  Dense x = dense(a);
  const Dense s = dense(source);
  const std::vector<int64_t> idx = ints(index);
  for (int64_t i = 0; i < s.numel(); ++i) {
    DimVector c = s.unravel(i);
    if (c.empty()) {
      x.v[0] += alpha * s.v[i];
      continue;
    }
    c[dim] = idx[c[dim]];
    x.v[x.ravel(c)] += alpha * s.v[i];
  }
  return from_dense(x.v, a.sizes(), a.dtype());
}

Tensor index_leading(const Tensor& a, const std::vector<Tensor>& indices) {
  const Dense x = dense(a);
  std::vector<std::vector<int64_t>> idx;
  for (const Tensor& t : indices) idx.push_back(ints(t));
  const size_t k = indices.size();
  DimVector out_sizes = indices[0].sizes().vec();
  for (size_t d = k; d < x.sizes.size(); ++d) out_sizes.push_back(x.sizes[d]);
  const int64_t nb = indices[0].numel();
  const int64_t inner = checked_numel(DimVector(x.sizes.begin() + k, x.sizes.end()), "ref");
  std::vector<double> out(static_cast<size_t>(nb * inner));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t j = 0; j < inner; ++j) {
      DimVector c(x.sizes.size());
      for (size_t d = 0; d < k; ++d) {
        const int64_t v = idx[d][b];
        c[d] = v < 0 ? v + x.sizes[d] : v;
      }
      int64_t rem = j;
      for (int64_t d = static_cast<int64_t>(x.sizes.size()) - 1; d >= static_cast<int64_t>(k);
           --d) {
        c[d] = rem % x.sizes[d];
        rem /= x.sizes[d];
      }
      out[b * inner + j] = x.v[x.ravel(c)];
    }
  }
  return from_dense(out, out_sizes, a.dtype());
}

Tensor index_put_leading(const Tensor& a, const std::vector<Tensor>& indices, const Tensor& values,
                         bool accumulate) {
  Dense x = dense(a);
  const Dense vals = dense(values);
  std::vector<std::vector<int64_t>> idx;
  for (const Tensor& t : indices) idx.push_back(ints(t));
  const size_t k = indices.size();
  const int64_t nb = indices[0].numel();
  const int64_t inner = checked_numel(DimVector(x.sizes.begin() + k, x.sizes.end()), "ref");
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t j = 0; j < inner; ++j) {
      DimVector c(x.sizes.size());
      for (size_t d = 0; d < k; ++d) {
        const int64_t v = idx[d][b];
        c[d] = v < 0 ? v + x.sizes[d] : v;
      }
      int64_t rem = j;
      for (int64_t d = static_cast<int64_t>(x.sizes.size()) - 1; d >= static_cast<int64_t>(k);
           --d) {
        c[d] = rem % x.sizes[d];
        rem /= x.sizes[d];
      }
      const int64_t to = x.ravel(c);
      const double v = vals.v[b * inner + j];
      x.v[to] = accumulate ? x.v[to] + v : v;
    }
  }
  return from_dense(x.v, a.sizes(), a.dtype());
}

std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending) {
  const Dense x = dense(a);
  std::vector<double> vals(x.v.size());
  std::vector<int64_t> inds(x.v.size());
  if (x.sizes.empty()) {
    return {a.clone(), from_ints({0}, {})};
  }
  const int64_t n = x.sizes[dim];
  for (int64_t i = 0; i < x.numel(); ++i) {
    const DimVector c = x.unravel(i);
    // Rank of element c[dim] within its row.
    int64_t rank = 0;
    DimVector cj = c;
    for (int64_t j = 0; j < n; ++j) {
      cj[dim] = j;
      const double y = x.v[x.ravel(cj)];
      const double me = x.v[i];
      const bool equal = !before(y, me, descending) && !before(me, y, descending);
      if (before(y, me, descending) || (equal && j < c[dim])) ++rank;
    }
    DimVector co = c;
    co[dim] = rank;
    vals[x.ravel(co)] = x.v[i];
    inds[x.ravel(co)] = c[dim];
  }
  return {from_dense(vals, a.sizes(), a.dtype()), from_ints(inds, a.sizes())};
}

std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest) {
  auto [v, i] = reference::sort(a, dim, largest);
  if (a.dim() == 0) return {v, i};
  return {v.narrow(dim, 0, k).contiguous(), i.narrow(dim, 0, k).contiguous()};
}

Tensor triangle(const Tensor& a, int64_t diagonal, bool lower) {
  Dense x = dense(a);
  const int64_t nd = static_cast<int64_t>(x.sizes.size());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const DimVector c = x.unravel(i);
    const int64_t d = c[nd - 1] - c[nd - 2];
    const bool keep = lower ? d <= diagonal : d >= diagonal;
    if (!keep) x.v[i] = 0.0;
  }
  return from_dense(x.v, a.sizes(), a.dtype());
}

}  // namespace tessera::reference
