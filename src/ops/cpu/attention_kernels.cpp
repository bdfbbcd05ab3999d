// Fused float32 attention kernels (compiled once per ISA); contracts in attention_kernels.h.
//
// forward_block, for each step of `key_block` keys [j0, j0 + n) and each panel of NR queries:
//
//   S^T[n x NR]  = K[j0:j0+n] Q_panel^T           (microkernel, k = e; stored as a B panel)
//   x            = scale * S^T, -inf where key > query (causal)
//   m'           = max(m, max_keys x)              (per query lane)
//   P            = exp(x - m'),  alpha = exp(m - m')
//   l            = alpha * l + sum_keys P
//   O^T[ev x NR] = alpha * O^T + V^T[:, j0:j0+n] P (microkernel, k = n, A from vpack)
//
// and at the end O = (O^T / l)^T and lse = m + log(l): FlashAttention's online softmax with
// the accumulator transposed. A query whose keys are all masked so far has m = -inf; it
// subtracts 0 instead so that exp(-inf - -inf) never makes a NaN.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/vec.h"
#include "gemm/kernels/microkernel.h"
#include "gemm/pack.h"
#include "ops/cpu/attention_kernels.h"
#include "tessera/core/error.h"

namespace tessera::cpu::TS_ISA {
namespace {

using V = vec::TS_ISA::Vec<float>;
constexpr int W = V::kSize;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

struct BlockWorkspace {
  float *qpack, *scores, *acc, *m, *l;
};

// Sizes of the workspace parts, each rounded to 16 floats (64 bytes).
struct BlockLayout {
  int64_t panels, ev_pad, qpack, scores, acc, stats;
  BlockLayout(int64_t nq, int64_t e, int64_t ev, int64_t key_block, int mr, int nr)
      : panels((nq + nr - 1) / nr),
        ev_pad(round_up(ev, mr)),
        qpack(round_up(panels * nr * e, 16)),
        scores(round_up(key_block * nr, 16)),
        acc(round_up(panels * ev_pad * nr, 16)),
        stats(round_up(panels * nr, 16)) {}
  int64_t total() const { return qpack + scores + acc + 2 * stats; }
  BlockWorkspace split(float* w) const {
    return {w, w + qpack, w + qpack + scores, w + qpack + scores + acc,
            w + qpack + scores + acc + stats};
  }
};

int64_t block_workspace_floats(int64_t nq, int64_t e, int64_t ev, int64_t key_block) {
  const GemmMicroKernel<float>& uk = gemm_kernels().sgemm;
  return BlockLayout(nq, e, ev, key_block, uk.mr, uk.nr).total();
}

// The online-softmax step for one panel: `x` holds n rows (keys j0 + p) of nr query lanes
// (queries qc0 + lane). Scales and masks x in place, then overwrites it with P; updates m and l
// and returns the rescale factors of the panel's accumulator in `alpha`.
void softmax_step(float* x, int64_t n, int nr, int64_t j0, int64_t qc0, bool causal, float scale,
                  float* m, float* l, float* alpha) {
  const V lane = vec::TS_ISA::lane_indices(), vscale(scale), neg_inf(kNegInf);
  for (int v0 = 0; v0 < nr; v0 += W) {
    V mx = V::load(m + v0);
    for (int64_t p = 0; p < n; ++p) {
      float* row = x + p * nr + v0;
      V s = V::load(row) * vscale;
      // Lanes whose query comes before key j0 + p are masked (lane < key - query_of_lane0).
      const int64_t first_visible = j0 + p - (qc0 + v0);
      if (causal && first_visible > 0) {
        s = V::select_lt(lane, V(static_cast<float>(std::min<int64_t>(first_visible, W))), neg_inf,
                         s);
      }
      s.store(row);
      mx = V::max(mx, s);
    }
    const V m_old = V::load(m + v0);
    const V base = V::select_lt(mx, V(std::numeric_limits<float>::lowest()), V(0.0f), mx);
    V sum(0.0f);
    for (int64_t p = 0; p < n; ++p) {
      float* row = x + p * nr + v0;
      const V e = (V::load(row) - base).exp();
      e.store(row);
      sum = sum + e;
    }
    const V a = (m_old - base).exp();
    a.store(alpha + v0);
    V::fmadd(a, V::load(l + v0), sum).store(l + v0);
    mx.store(m + v0);
  }
}

void forward_block(const AttentionBlockArgs& a) {
  const GemmMicroKernel<float>& uk = gemm_kernels().sgemm;
  const int mr = uk.mr, nr = uk.nr;
  const BlockLayout layout(a.nq, a.e, a.ev, a.key_block, mr, nr);
  const BlockWorkspace ws = layout.split(a.workspace);
  // Q^T as B panels of nr queries over e (rows past nq zero).
  gemm::pack_b_block<float>(a.e, a.nq, a.q, 1, a.q_rs, nr, ws.qpack);
  for (int64_t i = 0; i < layout.panels * nr; ++i) {
    ws.m[i] = kNegInf;
    ws.l[i] = 0;
  }
  alignas(64) float alpha[64];  // nr <= 64 (checked when the table is built)
  const int64_t kv_end = a.causal ? std::min(a.s, a.q0 + a.nq) : a.s;
  for (int64_t j0 = 0; j0 < kv_end; j0 += a.key_block) {
    for (int64_t c = 0; c < layout.panels; ++c) {
      const int64_t qc0 = a.q0 + c * nr;
      const int64_t panel_end = a.causal ? std::min(kv_end, qc0 + nr) : kv_end;
      if (j0 >= panel_end) continue;  // causal: the panel's queries see none of these keys
      const int64_t n = std::min(a.key_block, panel_end - j0);
      for (int64_t r = 0; r * mr < n; ++r)
        uk.fn(a.e, 1.0f, a.kpack + (j0 + r * mr) * a.e, ws.qpack + c * nr * a.e, 0.0f,
              ws.scores + r * mr * nr, nr, 1);
      softmax_step(ws.scores, n, nr, j0, qc0, a.causal, a.scale, ws.m + c * nr, ws.l + c * nr,
                   alpha);
      float* acc = ws.acc + c * layout.ev_pad * nr;
      const bool first = j0 == 0;  // every panel sees key 0, so step 0 opens every accumulator
      if (!first) {
        for (int64_t d = 0; d < layout.ev_pad; ++d)
          for (int v0 = 0; v0 < nr; v0 += W)
            (V::load(acc + d * nr + v0) * V::load(alpha + v0)).store(acc + d * nr + v0);
      }
      for (int64_t r = 0; r * mr < a.ev; ++r)
        uk.fn(n, 1.0f, a.vpack + r * mr * a.s + j0 * mr, ws.scores, first ? 0.0f : 1.0f,
              acc + r * mr * nr, nr, 1);
    }
  }
  for (int64_t i = 0; i < a.nq; ++i) {
    const int64_t c = i / nr, j = i % nr;
    const float* acc = ws.acc + c * layout.ev_pad * nr + j;
    const float l = ws.l[i], inv = 1.0f / l;
    float* out = a.out + i * a.out_rs;
    for (int64_t d = 0; d < a.ev; ++d) out[d] = acc[d * nr] * inv;
    a.lse[i] = ws.m[i] + std::log(l);
  }
}

float horizontal_sum(V v) {
  alignas(64) float lanes[W];
  v.store(lanes);
  float s = 0;
  for (int i = 0; i < W; ++i) s += lanes[i];
  return s;
}

float dot(const float* x, const float* y, int64_t n) {
  V acc0(0.0f), acc1(0.0f);
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    acc0 = V::fmadd(V::load(x + i), V::load(y + i), acc0);
    acc1 = V::fmadd(V::load(x + i + W), V::load(y + i + W), acc1);
  }
  for (; i + W <= n; i += W) acc0 = V::fmadd(V::load(x + i), V::load(y + i), acc0);
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    acc1 = V::fmadd(V::load(x + i, rest), V::load(y + i, rest), acc1);
  }
  return horizontal_sum(acc0 + acc1);
}

// One query against s keys: scores, softmax, then out = sum_j p_j v_j / l streamed over the
// values four rows at a time. Bandwidth-bound on K and V, which are read in place.
void decode_row(const AttentionDecodeArgs& a) {
  float* sc = a.workspace;
  float mx = kNegInf;
  for (int64_t j = 0; j < a.s; ++j) {
    sc[j] = dot(a.k + j * a.k_rs, a.q, a.e) * a.scale;
    mx = (std::isnan(sc[j]) || sc[j] > mx) ? sc[j] : mx;
  }
  const float base = mx == kNegInf ? 0.0f : mx;
  V vsum(0.0f);
  const V vbase(base);
  int64_t j = 0;
  for (; j + W <= a.s; j += W) {
    const V e = (V::load(sc + j) - vbase).exp();
    e.store(sc + j);
    vsum = vsum + e;
  }
  if (j < a.s) {
    const int rest = static_cast<int>(a.s - j);
    const V e = (V::load(sc + j, rest) - vbase).exp();
    e.store(sc + j, rest);
    vsum = vsum + V::load(sc + j, rest);  // the lanes past `rest` load as 0
  }
  const float l = horizontal_sum(vsum);
  const V inv(1.0f / l);
  // Up to four vectors of the output row stay in registers while the values stream by.
  for (int64_t d0 = 0; d0 < a.ev; d0 += 4 * W) {
    V acc[4] = {V(0.0f), V(0.0f), V(0.0f), V(0.0f)};
    int width[4];
    for (int t = 0; t < 4; ++t)
      width[t] = static_cast<int>(std::clamp<int64_t>(a.ev - d0 - t * W, 0, W));
    for (int64_t r = 0; r < a.s; ++r) {
      const V pr(sc[r]);
      const float* v = a.v + r * a.v_rs + d0;
      for (int t = 0; t < 4; ++t)
        if (width[t] == W)
          acc[t] = V::fmadd(pr, V::load(v + t * W), acc[t]);
        else if (width[t] > 0)
          acc[t] = V::fmadd(pr, V::load(v + t * W, width[t]), acc[t]);
    }
    for (int t = 0; t < 4; ++t)
      if (width[t] > 0) (acc[t] * inv).store(a.out + d0 + t * W, width[t]);
  }
  *a.lse = base + std::log(l);
}

}  // namespace

const AttentionKernels& attention_kernels() {
  static const AttentionKernels table = [] {
    const GemmMicroKernel<float>& uk = gemm_kernels().sgemm;
    // softmax_step works on whole vectors of query lanes and forward_block keeps nr factors.
    TS_INTERNAL_ASSERT(uk.nr % W == 0 && uk.nr <= 64);
    return AttentionKernels{uk.mr, uk.nr, block_workspace_floats, forward_block, decode_row};
  }();
  return table;
}

}  // namespace tessera::cpu::TS_ISA
