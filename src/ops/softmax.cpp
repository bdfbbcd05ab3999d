// softmax, log_softmax and logsumexp. The input is made contiguous and viewed as
// [B, K, N] around the softmax dim: N == 1 runs the row kernel (three passes over each row),
// otherwise the column kernel vectorised across N. logsumexp over any dims is a Rows
// reduction (reduced dims made innermost, copying when needed).
#include <cmath>
#include <limits>

#include "autograd/record.h"
#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "core/iterator.h"
#include "core/prefetch.h"
#include "ops/cpu/reduce_kernels.h"
#include "ops/reduce_driver.h"
#include "ops/reduce_plan.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/reduce.h"

namespace tessera {
namespace {

constexpr DtypeMask kKernelFloat = kFloatingTypes;

Tensor softmax_impl(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype, bool log) {
  const std::string_view op = log ? "log_softmax" : "softmax";
  Tensor x = dtype && *dtype != a.dtype() ? a.to(*dtype) : a;
  TS_CHECK((kKernelFloat & dtype_bit(x.dtype())) != 0, TypeError,
           "{}(): argument 'input' expected a floating point tensor (float16, bfloat16, float32 "
           "or float64; pass dtype= to convert), but got {}",
           op, x.dtype());
  const int64_t d = wrap_reduce_dim(dim, x.dim(), op);
  x = x.contiguous();
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype()));
  if (x.numel() == 0) return out;
  int64_t B = 1, K = 1, N = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < d) B *= x.size(i);
    if (i == d) K = x.size(i);
    if (i > d) N *= x.size(i);
  }
  const auto& k = TS_DISPATCH(softmax_kernels);
  const int64_t esize = x.element_size();
  const char* in = static_cast<const char*>(x.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  cpu::SoftmaxArgs args;
  args.dtype = x.dtype();
  args.log = log;
  args.K = K;
  if (N == 1) {
    // Large outputs are written around the cache when a row's scratch copy stays in L2, where
    // non-temporal stores overlap the exp pass's computation (core/prefetch.h). On the Zen 5
    // VM they do not: 4096x4096 float32, alternated in one process, one thread 8.6-9.5 ms
    // streamed -> 7.0-7.8 plainly, two threads 4.8-5.2 -> 4.2-4.4.
    args.stream = streamed_stores_overlap_compute() && out.nbytes() >= kStreamOutputBytes &&
                  K * esize <= (int64_t{1} << 20);
    parallel_for(0, B, std::max<int64_t>(1, kGrainSize / K), [&](int64_t b0, int64_t b1) {
      cpu::SoftmaxArgs a2 = args;
      a2.in = in + b0 * K * esize;
      a2.out = o + b0 * K * esize;
      a2.rows = b1 - b0;
      a2.in_row_stride = a2.out_row_stride = K;
      k.softmax_rows(a2);
    });
    return out;
  }
  constexpr int64_t kTile = 256;
  const int64_t ntiles = (N + kTile - 1) / kTile;
  parallel_tasks(B * ntiles, [&](int64_t t) {
    const int64_t b = t / ntiles, j0 = (t % ntiles) * kTile;
    cpu::SoftmaxArgs a2 = args;
    a2.in = in + (b * K * N + j0) * esize;
    a2.out = o + (b * K * N + j0) * esize;
    a2.N = std::min(kTile, N - j0);
    a2.in_row_stride = a2.out_row_stride = N;
    k.softmax_cols(a2);
  });
  return out;
}

}  // namespace

namespace {

// softmax: dx = y (g - sum(g y)); log_softmax: dx = g - exp(y) sum(g), both along dim.
Tensor softmax_with_grad(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype, bool log) {
  autograd::Recorder rec({a});
  Tensor out = softmax_impl(a, dim, dtype, log);
  if (rec) {
    const int64_t d = a.dim() == 0 ? 0 : wrap_dim(dim, a.dim(), log ? "log_softmax" : "softmax");
    rec.finish(
        log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", {out},
        [d, log, so = autograd::Recorder::save_output(out)](const autograd::tensor_list& g,
                                                            const autograd::Node& n) {
          const Tensor y = so.unpack(n);
          if (y.dim() == 0) return autograd::tensor_list{zeros_like(g[0])};
          if (log)
            return autograd::tensor_list{g[0].sub(y.exp().mul(g[0].sum({d}, /*keepdim=*/true)))};
          const Tensor gy = g[0].mul(y);
          return autograd::tensor_list{gy.sub(y.mul(gy.sum({d}, /*keepdim=*/true)))};
        });
  }
  return out;
}

Tensor logsumexp_kernel(const Tensor& a, IntArrayRef dim, bool keepdim);

}  // namespace

Tensor softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_with_grad(a, dim, dtype, false);
}
Tensor log_softmax(const Tensor& a, int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_with_grad(a, dim, dtype, true);
}

// d logsumexp = g exp(x - out), broadcast back over the reduced dims.
Tensor logsumexp(const Tensor& a, IntArrayRef dim, bool keepdim) {
  autograd::Recorder rec({a});
  Tensor out = logsumexp_kernel(a, dim, keepdim);
  if (rec) {
    auto mask = reduce_dim_mask(dim, a.dim(), "logsumexp");
    rec.finish("LogsumexpBackward0", {out},
               [mask, keepdim, sa = autograd::Recorder::save(a),
                so = autograd::Recorder::save_output(out)](const autograd::tensor_list& g,
                                                           const autograd::Node& n) {
                 Tensor gg = g[0], o = so.unpack(n);
                 if (!keepdim) {
                   for (size_t d = 0; d < mask.size(); ++d)
                     if (mask[d]) gg = gg.unsqueeze(d), o = o.unsqueeze(d);
                 }
                 const Tensor x = sa.unpack(n);
                 return autograd::tensor_list{gg.mul(x.sub(o).exp())};
               });
  }
  return out;
}

namespace {
Tensor logsumexp_kernel(const Tensor& a, IntArrayRef dim, bool keepdim) {
  TS_CHECK(!a.is_complex() && (kAllTypes & dtype_bit(a.dtype()) & ~kFloat8Types) != 0, TypeError,
           "logsumexp(): argument 'input' expected a real tensor, but got {}", a.dtype());
  // Integers and bool compute in the default float dtype, as PyTorch.
  Tensor x = a.is_floating_point() ? a : a.to(get_default_dtype());
  auto mask = reduce_dim_mask(dim, x.dim(), "logsumexp");
  DimVector keep = reduced_sizes(x.sizes(), mask, true);
  Tensor out = empty(keep, TensorOptions(x.dtype()));
  Tensor result = keepdim ? out : out.view(reduced_sizes(x.sizes(), mask, false));
  if (out.numel() == 0) return result;
  if (reduced_count(x.sizes(), mask) == 0) {
    out.fill_(-std::numeric_limits<double>::infinity());
    return result;
  }
  ReducePlan plan = plan_reduction(x, mask, out.strides(), /*allow_cols=*/false);
  cpu::ReduceArgs args;
  args.dtype = plan.input.dtype();
  const auto& k = TS_DISPATCH(softmax_kernels);
  visit_dtype<kKernelFloat>(x.dtype(), "logsumexp", [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    // Rows are never split into chunks for logsumexp: the max shift is per whole row.
    ReducePlan p = plan;
    auto finalize = [&](const cpu::Partial& r, int64_t off) { o[off] = convert<T>(r.a); };
    const int64_t esize = p.input.element_size();
    const char* base = static_cast<const char*>(p.input.data_ptr());
    const int64_t B = p.num_batches();
    parallel_for(0, B, std::max<int64_t>(1, kGrainSize / p.K), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t in_off, out_off;
        p.batch_offsets(b, in_off, out_off);
        cpu::Partial part;
        cpu::ReduceArgs a2 = args;
        a2.in = base + in_off * esize;
        a2.rows = 1;
        a2.K = p.K;
        a2.out = &part;
        k.logsumexp_rows(a2);
        finalize(part, out_off);
      }
    });
  });
  return result;
}
}  // namespace

Tensor Tensor::softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return tessera::softmax(*this, dim, dtype);
}
Tensor Tensor::log_softmax(int64_t dim, std::optional<ScalarType> dtype) const {
  return tessera::log_softmax(*this, dim, dtype);
}
Tensor Tensor::logsumexp(IntArrayRef dim, bool keepdim) const {
  return tessera::logsumexp(*this, dim, keepdim);
}

}  // namespace tessera
