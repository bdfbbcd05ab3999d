// Shared plumbing of the linalg ops (common.h).
#include "linalg/common.h"

#include <algorithm>

#include "tessera/autograd/function.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"

namespace tessera::linalg::detail {

void check_no_grad(std::string_view op, std::initializer_list<Tensor> inputs) {
  std::vector<Tensor> defined;
  for (const Tensor& t : inputs)
    if (t.defined()) defined.push_back(t);
  autograd::check_no_grad_needed(defined, op);
}

void check_matrix_input(std::string_view op, const Tensor& A, std::string_view name) {
  TS_CHECK(A.defined(), ValueError, "{}(): argument '{}' expected a tensor, but got undefined", op,
           name);
  TS_CHECK(A.dim() >= 2, RuntimeError,
           "{}(): argument '{}' expected a tensor with at least 2 dimensions, but got {} dims", op,
           name, A.dim());
  TS_CHECK((kLinalgTypes & dtype_bit(A.dtype())) != 0, TypeError,
           "{}(): argument '{}' expected a floating point or complex tensor ({}), but got {}", op,
           name, dtype_mask_names(kLinalgTypes), A.dtype());
}

void check_square_input(std::string_view op, const Tensor& A, std::string_view name) {
  check_matrix_input(op, A, name);
  TS_CHECK(A.size(-1) == A.size(-2), RuntimeError,
           "{}(): argument '{}' expected a batch of square matrices, but got {} by {} matrices", op,
           name, A.size(-2), A.size(-1));
}

void check_same_dtype(std::string_view op, const Tensor& A, std::string_view a_name,
                      const Tensor& B, std::string_view b_name) {
  TS_CHECK(A.dtype() == B.dtype(), TypeError,
           "{}(): expected {} and {} to have the same dtype, but got {} for {} and {} for {}", op,
           a_name, b_name, A.dtype(), a_name, B.dtype(), b_name);
}

DimVector batch_shape(const Tensor& t, int64_t matrix_dims) {
  const IntArrayRef s = t.sizes();
  return DimVector(s.begin(), s.end() - matrix_dims);
}

int64_t numel_of(IntArrayRef shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

DimVector broadcast_batch(std::string_view op, IntArrayRef a, IntArrayRef b) {
  return broadcast_shapes(a, b, op);
}

DimVector concat(IntArrayRef a, IntArrayRef b) {
  DimVector out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

Tensor contiguous_matrices(const Tensor& t, IntArrayRef batch) {
  const DimVector shape = concat(batch, {t.size(-2), t.size(-1)});
  Tensor out = empty(shape, t.dtype());
  if (out.numel() > 0) out.copy_(t.expand(shape));
  return out;
}

std::vector<int64_t> matrix_offsets(const Tensor& t) {
  const int64_t nd = t.dim() - 2;
  const int64_t batch = numel_of(batch_shape(t));
  std::vector<int64_t> off(static_cast<size_t>(batch), 0);
  // Sizes and strides read once (Tensor::size/stride wrap the dim on every call).
  DimVector idx(static_cast<size_t>(nd), 0), size(static_cast<size_t>(nd)),
      stride(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d) size[d] = t.size(d), stride[d] = t.stride(d);
  int64_t cur = 0;
  for (int64_t b = 0; b < batch; ++b) {
    off[b] = cur;
    for (int64_t d = nd - 1; d >= 0; --d) {  // odometer over the batch dims
      if (++idx[d] < size[d]) {
        cur += stride[d];
        break;
      }
      cur -= (size[d] - 1) * stride[d];
      idx[d] = 0;
    }
  }
  return off;
}

void for_each_matrix(int64_t batch, int64_t n, const std::function<void(int64_t)>& fn) {
  // Below this order a matrix is too small for its GEMMs to thread well.
  constexpr int64_t kSmallOrder = 256;
  const int64_t threads = get_num_threads();
  if (batch > 1 && threads > 1 && (n <= kSmallOrder || batch >= threads)) {
    // Tasks of roughly equal cost: a group of small matrices per task.
    const int64_t per_task = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * n * n / 64));
    parallel_for(0, batch, per_task, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) fn(b);
    });
    return;
  }
  for (int64_t b = 0; b < batch; ++b) fn(b);
}

std::string batch_prefix(int64_t batch_dims, int64_t index) {
  return batch_dims > 0 ? fmt::format("(Batch element {}): ", index) : std::string();
}

int64_t first_failure(const Tensor& info) {
  const int32_t* p = info.data_ptr<int32_t>();
  const int64_t count = info.numel();
  int32_t any = 0;  // branch-free, so it vectorizes: almost always nothing failed
  for (int64_t i = 0; i < count; ++i) any |= p[i];
  if (any == 0) return -1;
  const int32_t* hit = std::find_if(p, p + count, [](int32_t v) { return v != 0; });
  return hit == p + count ? -1 : hit - p;
}

}  // namespace tessera::linalg::detail
