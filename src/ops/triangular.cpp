// tril / triu over the last two dims of a batch of matrices [..., R, C].
//
// Row r of a matrix keeps columns j <= r + diagonal (tril) or j >= r + diagonal (triu) and
// zeroes the rest. Each output row is one prefix/suffix copy plus one zero fill; a contiguous
// input row is copied with memcpy. Zero is the all-zero bit pattern in every dtype, so the ops
// move bytes and work for any dtype. Rows are spread over the thread pool.
#include <algorithm>
#include <cstring>

#include "autograd/record.h"
#include "ops/index_common.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/shape.h"

namespace tessera {

using namespace index_detail;

namespace {

Tensor triangle(std::string_view op, const Tensor& a, int64_t diagonal, bool lower) {
  TS_CHECK(a.dim() >= 2, RuntimeError,
           "{}(): argument 'input' expected a tensor with at least 2 dimensions, but got {} dims",
           op, a.dim());
  Tensor out = empty(a.sizes(), a.dtype());
  const int64_t numel = a.numel();
  if (numel == 0) return out;
  const int64_t nd = a.dim();
  const int64_t R = a.size(nd - 2), C = a.size(nd - 1);
  const int64_t rs = a.stride(nd - 2), cs = a.stride(nd - 1);
  const int64_t batch = numel / (R * C);
  // Per-matrix offsets of the input.
  std::vector<int64_t> mat_off(static_cast<size_t>(batch), 0);
  {
    DimVector c(static_cast<size_t>(nd - 2), 0);
    int64_t off = 0;
    for (int64_t m = 0; m < batch; ++m) {
      mat_off[m] = off;
      for (int64_t d = nd - 3; d >= 0; --d) {
        if (++c[d] < a.size(d)) {
          off += a.stride(d);
          break;
        }
        off -= (a.size(d) - 1) * a.stride(d);
        c[d] = 0;
      }
    }
  }
  // Columns kept in row r: [keep_lo, keep_hi). Clamping first keeps r + diagonal in range.
  diagonal = std::clamp<int64_t>(diagonal, -R - 1, C + 1);
  auto kept = [&](int64_t r) -> std::pair<int64_t, int64_t> {
    const int64_t edge = r + diagonal;  // may be far outside [0, C]
    if (lower) return {0, std::clamp<int64_t>(edge + 1, 0, C)};
    return {std::clamp<int64_t>(edge, 0, C), C};  // empty when edge >= C: klo = khi = C
  };
  dispatch_by_size(a.element_size(), [&]<class U>() {
    const U* in = static_cast<const U*>(a.data_ptr());
    U* o = static_cast<U*>(out.data_ptr());
    auto rows = [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        const int64_t m = k / R, r = k % R;
        const U* src = in + mat_off[m] + r * rs;
        U* dst = o + k * C;
        const auto [klo, khi] = kept(r);
        std::memset(static_cast<void*>(dst), 0, static_cast<size_t>(klo) * sizeof(U));
        std::memset(static_cast<void*>(dst + khi), 0, static_cast<size_t>(C - khi) * sizeof(U));
        if (cs == 1) {
          if (khi > klo) {
            std::memcpy(dst + klo, src + klo, static_cast<size_t>(khi - klo) * sizeof(U));
          }
        } else {
          for (int64_t j = klo; j < khi; ++j) dst[j] = src[j * cs];
        }
      }
    };
    const int64_t total_rows = batch * R;
    if (numel < kGrainSize || get_num_threads() == 1) {
      rows(0, total_rows);
    } else {
      parallel_for(0, total_rows, std::max<int64_t>(1, kGrainSize / C), rows);
    }
  });
  return out;
}

}  // namespace

namespace {
// The gradient keeps the same triangle.
Tensor triangle_with_grad(const Tensor& a, int64_t diagonal, bool lower) {
  autograd::Recorder rec({a});
  Tensor out = triangle(lower ? "tril" : "triu", a, diagonal, lower);
  if (rec)
    rec.finish(lower ? "TrilBackward0" : "TriuBackward0", {out},
               [diagonal, lower](const autograd::tensor_list& g, const autograd::Node&) {
                 return autograd::tensor_list{lower ? g[0].tril(diagonal) : g[0].triu(diagonal)};
               });
  return out;
}
}  // namespace

Tensor tril(const Tensor& a, int64_t diagonal) {
  return triangle_with_grad(a, diagonal, true);
}
Tensor triu(const Tensor& a, int64_t diagonal) {
  return triangle_with_grad(a, diagonal, false);
}

Tensor Tensor::tril(int64_t diagonal) const {
  return tessera::tril(*this, diagonal);
}
Tensor Tensor::triu(int64_t diagonal) const {
  return tessera::triu(*this, diagonal);
}

}  // namespace tessera
