// Joining and splitting: cat, stack, split, chunk (PyTorch 1.13 semantics).
//
// cat allocates the result once. Inputs of the result dtype whose elements are contiguous are
// copied as one memcpy per outer row (the dims before `dim`), all inputs of a row together so
// the output is written front to back; other inputs go through copy_ into a narrow view of
// the output, which handles any strides and any dtype pair. split and chunk return views.
#include <algorithm>
#include <cstring>

#include "autograd/record.h"
#include "ops/index_common.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/shape.h"

namespace tessera {

namespace {

// torch.cat skips 1-d tensors of size 0 ("legacy empty tensors") in shape checks.
bool is_legacy_empty(const Tensor& t) {
  return t.dim() == 1 && t.size(0) == 0;
}

// The memcpy path: out and every listed input are contiguous and of the same dtype.
// Row o of the output (o over the product of sizes before `dim`) is the concatenation of row o
// of every input.
void cat_contiguous_rows(const Tensor& out, const std::vector<const Tensor*>& inputs, int64_t dim) {
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  if (outer == 0) return;
  const int64_t esize = out.element_size();
  const int64_t out_row_bytes = out.nbytes() / outer;
  std::vector<int64_t> row_bytes(inputs.size());
  std::vector<const char*> src(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    row_bytes[i] = inputs[i]->numel() / outer * esize;
    src[i] = static_cast<const char*>(inputs[i]->data_ptr());
  }
  char* dst = static_cast<char*>(out.data_ptr());
  auto rows = [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      char* d = dst + o * out_row_bytes;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (row_bytes[i] == 0) continue;
        std::memcpy(d, src[i] + o * row_bytes[i], static_cast<size_t>(row_bytes[i]));
        d += row_bytes[i];
      }
    }
  };
  // Grain in rows so that a chunk moves at least ~256 KiB.
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(out_row_bytes, 1));
  if (outer >= 2 * grain && get_num_threads() > 1) {
    parallel_for(0, outer, grain, rows);
  } else {
    rows(0, outer);
  }
}

}  // namespace

namespace {
Tensor cat_kernel(const std::vector<Tensor>& tensors, int64_t dim);
}  // namespace

// Each input's gradient is its slice of the output's.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  autograd::Recorder rec(tensors);
  Tensor out = cat_kernel(tensors, dim);
  if (rec) {
    std::vector<DimVector> shapes;
    for (const Tensor& t : tensors) shapes.push_back(t.sizes().vec());
    const int64_t d = wrap_dim(dim, out.dim(), "cat");
    rec.finish("CatBackward0", {out},
               [shapes, d](const autograd::tensor_list& g, const autograd::Node&) {
                 autograd::tensor_list r;
                 int64_t offset = 0;
                 for (const DimVector& s : shapes) {
                   // Legacy empty 1-D inputs ([0]) take no part in the concatenation.
                   if (s.size() == 1 && s[0] == 0 && g[0].dim() != 1) {
                     r.push_back(zeros(s, g[0].dtype()));
                     continue;
                   }
                   r.push_back(g[0].narrow(d, offset, s[d]));
                   offset += s[d];
                 }
                 return r;
               });
  }
  return out;
}

namespace {
Tensor cat_kernel(const std::vector<Tensor>& tensors, int64_t dim) {
  TS_CHECK(!tensors.empty(), RuntimeError, "cat(): expected a non-empty list of Tensors");
  const Tensor* ref = nullptr;
  ScalarType dtype = ScalarType::Undefined;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.defined(), ValueError,
             "cat(): argument 'tensors' expected defined tensors, but "
             "tensor number {} in the list is undefined",
             i);
    TS_CHECK(t.dim() > 0, RuntimeError,
             "cat(): zero-dimensional tensor (at position {}) cannot be concatenated", i);
    dtype = dtype == ScalarType::Undefined ? t.dtype() : promote_types(dtype, t.dtype());
    if (ref == nullptr && !is_legacy_empty(t)) ref = &t;
  }
  if (ref == nullptr) return empty({0}, dtype);  // every input is a legacy empty tensor

  const int64_t ndim = ref->dim();
  dim = wrap_dim(dim, ndim, "cat");
  DimVector out_sizes = ref->sizes().vec();
  out_sizes[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (is_legacy_empty(t)) continue;
    TS_CHECK(t.dim() == ndim, RuntimeError,
             "cat(): Tensors must have same number of dimensions: got {} and {}", ndim, t.dim());
    for (int64_t d = 0; d < ndim; ++d) {
      if (d == dim) continue;
      TS_CHECK(t.size(d) == ref->size(d), RuntimeError,
               "cat(): Sizes of tensors must match except in dimension {}. Expected size {} but "
               "got size {} for tensor number {} in the list.",
               dim, ref->size(d), t.size(d), i);
    }
    out_sizes[dim] += t.size(dim);
  }
  checked_numel(out_sizes, "cat");
  Tensor out = empty(out_sizes, dtype);
  if (out.numel() == 0) return out;

  // Inputs the memcpy path can take; the others are copied through copy_ below.
  std::vector<const Tensor*> fast;
  bool all_fast = true;
  for (const Tensor& t : tensors) {
    if (is_legacy_empty(t) || t.size(dim) == 0) continue;
    if (t.dtype() == dtype && t.is_contiguous()) {
      fast.push_back(&t);
    } else {
      all_fast = false;
    }
  }
  if (all_fast) {
    cat_contiguous_rows(out, fast, dim);
    return out;
  }
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (is_legacy_empty(t)) continue;
    const int64_t n = t.size(dim);
    if (n > 0) out.narrow(dim, offset, n).copy_(t);
    offset += n;
  }
  return out;
}
}  // namespace

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  TS_CHECK(!tensors.empty(), RuntimeError, "stack(): expects a non-empty TensorList");
  for (size_t i = 0; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].defined(), ValueError,
             "stack(): argument 'tensors' expected defined "
             "tensors, but entry {} is undefined",
             i);
  }
  const Tensor& first = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].sizes() == first.sizes(), RuntimeError,
             "stack(): expects each tensor to be equal size, but got {} at entry 0 and {} at "
             "entry {}",
             first.sizes().vec(), tensors[i].sizes().vec(), i);
  }
  dim = wrap_dim(dim, first.dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(dim));
  return cat(parts, dim);
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  TS_CHECK(a.dim() > 0, RuntimeError, "split(): expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, a.dim(), "split");
  TS_CHECK(split_size >= 0, RuntimeError,
           "split(): expects split_size be non-negative, but got split_size={}", split_size);
  const int64_t size = a.size(dim);
  TS_CHECK(split_size > 0 || size == 0, RuntimeError,
           "split(): split_size can only be 0 if dimension size is 0, but got dimension size of {}",
           size);
  const int64_t n =
      split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t start = i * split_size;
    out.push_back(a.narrow(dim, start, std::min(split_size, size - start)));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& a, IntArrayRef split_sizes, int64_t dim) {
  TS_CHECK(a.dim() > 0, RuntimeError, "split(): expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, a.dim(), "split");
  const int64_t size = a.size(dim);
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    TS_CHECK(s >= 0, RuntimeError,
             "split_with_sizes(): expects split_sizes have only non-negative entries, but got "
             "split_sizes={}",
             split_sizes.vec());
    total += s;
  }
  TS_CHECK(total == size, RuntimeError,
           "split_with_sizes(): expects split_sizes to sum exactly to {} (input tensor's size at "
           "dimension {}), but got split_sizes={}",
           size, dim, split_sizes.vec());
  std::vector<Tensor> out;
  out.reserve(split_sizes.size());
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(a.narrow(dim, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  TS_CHECK(a.dim() > 0, RuntimeError, "chunk(): expects at least a 1-dimensional tensor");
  TS_CHECK(chunks > 0, RuntimeError, "chunk(): expects `chunks` to be greater than 0, got: {}",
           chunks);
  dim = wrap_dim(dim, a.dim(), "chunk");
  const int64_t size = a.size(dim);
  const int64_t split_size = (size + chunks - 1) / chunks;
  // As PyTorch: an empty dimension gives `chunks` empty pieces.
  if (split_size == 0 && size == 0) {
    return split(a, DimVector(static_cast<size_t>(chunks), 0), dim);
  }
  return split(a, split_size, dim);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return tessera::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(IntArrayRef split_sizes, int64_t dim) const {
  return tessera::split(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  return tessera::chunk(*this, chunks, dim);
}

}  // namespace tessera
