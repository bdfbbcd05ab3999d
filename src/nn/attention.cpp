// Blocked ("flash-style") attention for scaled_dot_product_attention: queries in blocks of
// kBlock rows, each block's scores against the keys it may see computed, normalised and applied
// at once, so the L x S score matrix never exists (memory O(kBlock x S) per head, not O(L x S));
// causal blocks stop at their last query (half the work). The backward recomputes each
// block's probabilities from the saved row log-sum-exps (FlashAttention's recomputation) and
// accumulates dK and dV per key/value head, so grouped-query heads need no repeated copies.
#include <array>
#include <cmath>
#include <limits>

#include "autograd/record.h"
#include "ops/attention.h"
#include "tessera/autograd/grad_mode.h"
#include "tessera/core/parallel.h"
#include "tessera/nn/functional.h"
#include "tessera/ops/blas.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"

namespace tessera::nn::functional {

namespace {

constexpr int64_t kBlock = 128;

// Scores of query rows [q0, q0 + nq) against keys [0, kv_end), scaled, causal-masked.
Tensor block_scores(const Tensor& q_blk, const Tensor& k, int64_t q0, int64_t kv_end, double scale,
                    bool causal) {
  Tensor s = q_blk.mm(k.narrow(0, 0, kv_end).t()).mul(scale);
  if (causal && q0 + 1 < kv_end) {
    const int64_t nq = q_blk.size(0);
    const Tensor future =
        arange(kv_end).unsqueeze(0).gt(arange(q0, q0 + nq).unsqueeze(1));  // j > i
    s = s.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  return s;
}

int64_t kv_end_of(int64_t q0, int64_t nq, int64_t s, bool causal) {
  return causal ? std::min(s, q0 + nq) : s;
}

// The plain blocked forward: float64 (gradcheck) and the reference the fused float32 kernel
// (src/ops/attention.cpp) is tested against. Fills out [B, H, L, Ev] and lse [B, H, L].
void blocked_attention_forward(const Tensor& qc, const Tensor& kc, const Tensor& vc, bool causal,
                               double scale, const Tensor& out, const Tensor& lse) {
  const int64_t b = qc.size(0), h = qc.size(1), l = qc.size(2), s = kc.size(2);
  const int64_t group = h / kc.size(1);
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      const Tensor qh = qc[bi][hi], kh = kc[bi][hi / group], vh = vc[bi][hi / group];
      for (int64_t q0 = 0; q0 < l; q0 += kBlock) {
        const int64_t nq = std::min(kBlock, l - q0);
        const int64_t kv_end = kv_end_of(q0, nq, s, causal);
        if (kv_end == 0) {
          out[bi][hi].narrow(0, q0, nq).fill_(NAN);  // no key to attend to, as softmax of -inf
          lse[bi][hi].narrow(0, q0, nq).fill_(-INFINITY);
          continue;
        }
        const Tensor sc = block_scores(qh.narrow(0, q0, nq), kh, q0, kv_end, scale, causal);
        const Tensor m = sc.logsumexp({1}, /*keepdim=*/true);
        const Tensor p = sc.sub(m).exp();
        out[bi][hi].narrow(0, q0, nq).copy_(p.mm(vh.narrow(0, 0, kv_end)));
        lse[bi][hi].narrow(0, q0, nq).copy_(m.squeeze(1));
      }
    }
  }
}

}  // namespace

// q [B, H, L, E], k/v [B, Hk, S, E/Ev], H a multiple of Hk; returns [B, H, L, Ev].
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                       double scale) {
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k.size(2), ev = v.size(3);
  const int64_t hk = k.size(1), group = h / hk;
  autograd::Recorder rec({q, k, v});
  // bfloat16/float16 compute in float32 (scores, softmax, accumulation), as PyTorch's kernels.
  const ScalarType cd = q.dtype() == kFloat64 ? kFloat64 : kFloat32;
  const Tensor qc = q.to(cd).contiguous(), kc = k.to(cd).contiguous(), vc = v.to(cd).contiguous();
  Tensor out = empty({b, h, l, ev}, cd);
  Tensor lse = empty({b, h, l}, cd);  // each row's log-sum-exp, to recompute P in backward
  if (cd == kFloat32 && s > 0)
    ops::attention_forward_f32(qc, kc, vc, causal, scale, out, lse);
  else
    blocked_attention_forward(qc, kc, vc, causal, scale, out, lse);
  const Tensor result = out.dtype() == q.dtype() ? out : out.to(q.dtype());
  if (rec) {
    // The output in the compute dtype: our own buffer when it was converted for the caller,
    // else the returned tensor itself (saved without its history, version-checked).
    const bool converted = !out.is_same(result);
    rec.finish("FlashAttentionBackward0", {result},
               [qc, kc, vc, internal = converted ? out : Tensor(),
                so = autograd::Recorder::save_output(result), lse, causal, scale, group,
                dtypes = std::array{q.dtype(), k.dtype(), v.dtype()}](
                   const autograd::tensor_list& g, const autograd::Node& n) {
                 const Tensor o = internal.defined() ? internal : so.unpack(n);
                 const Tensor go = g[0].to(o.dtype()).contiguous();
                 const int64_t b = qc.size(0), l = qc.size(2), s = kc.size(2);
                 Tensor dq = zeros_like(qc), dk = zeros_like(kc), dv = zeros_like(vc);
                 // D_i = sum_j dO_ij O_ij: the softmax backward's row term.
                 const Tensor d = go.mul(o).sum({3});
                 // One task per (batch, key/value head): it owns that head's dK and dV and its
                 // query heads' dQ, so tasks never write the same memory.
                 const int64_t hk = kc.size(1);
                 auto kv_head_task = [&](int64_t task) {
                   const int64_t bi = task / hk, kh = task % hk;
                   const Tensor kk = kc[bi][kh], vv = vc[bi][kh];
                   const Tensor dkh = dk[bi][kh], dvh = dv[bi][kh];
                   for (int64_t hi = kh * group; hi < (kh + 1) * group; ++hi) {
                     const Tensor qh = qc[bi][hi], dqh = dq[bi][hi];
                     for (int64_t q0 = 0; q0 < l; q0 += kBlock) {
                       const int64_t nq = std::min(kBlock, l - q0);
                       const int64_t kv_end = kv_end_of(q0, nq, s, causal);
                       if (kv_end == 0) continue;
                       const Tensor qb = qh.narrow(0, q0, nq);
                       const Tensor sc = block_scores(qb, kk, q0, kv_end, scale, causal);
                       const Tensor p = sc.sub(lse[bi][hi].narrow(0, q0, nq).unsqueeze(1)).exp();
                       const Tensor gob = go[bi][hi].narrow(0, q0, nq);
                       dvh.narrow(0, 0, kv_end).add_(p.t().mm(gob));
                       const Tensor dp = gob.mm(vv.narrow(0, 0, kv_end).t());
                       const Tensor ds =
                           p.mul(dp.sub(d[bi][hi].narrow(0, q0, nq).unsqueeze(1))).mul(scale);
                       dqh.narrow(0, q0, nq).add_(ds.mm(kk.narrow(0, 0, kv_end)));
                       dkh.narrow(0, 0, kv_end).add_(ds.t().mm(qb));
                     }
                   }
                 };
                 // Tasks in parallel when there are enough of them (each runs its ops serially,
                 // without recording); otherwise, or when the backward itself is recorded
                 // (create_graph), one after another with each op parallel inside.
                 if (autograd::GradMode::is_enabled() || b * hk < 2 * get_num_threads()) {
                   for (int64_t task = 0; task < b * hk; ++task) kv_head_task(task);
                 } else {
                   parallel_tasks(b * hk, [&](int64_t task) {
                     autograd::NoGradGuard no_grad;  // grad mode is per thread
                     kv_head_task(task);
                   });
                 }
                 return autograd::tensor_list{dq.to(dtypes[0]), dk.to(dtypes[1]), dv.to(dtypes[2])};
               });
  }
  return result;
}

}  // namespace tessera::nn::functional
