// Driver of the fused attention kernels (src/ops/cpu/attention_kernels.h): packs each key/value
// head once into the microkernel's panel layout, then runs one task per (batch, head, block of
// queries) on the pool; tasks are claimed dynamically, so causal blocks (whose cost grows with
// their position) balance. Short query sequences (decode) skip the packing and read the keys
// and values in place, one task per (batch, head, query).
#include "ops/attention.h"

#include <algorithm>
#include <vector>

#include "gemm/pack.h"
#include "ops/cpu/attention_kernels.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"

namespace tessera::ops {

namespace {

// Queries per task and keys per step. A block's packed queries, its accumulators and one step
// of packed keys and values stay in L2; one panel of scores (key_block x NR) in L1.
constexpr int64_t kQueryBlock = 128;
constexpr int64_t kKeyBlockTarget = 256;

// A per-thread scratch buffer, grown on demand, 64-byte aligned (over-allocated by one line).
float* thread_scratch(int64_t floats) {
  thread_local std::vector<float> buffer;
  if (static_cast<int64_t>(buffer.size()) < floats + 16) buffer.resize(floats + 16);
  auto p = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
}

}  // namespace

void attention_forward_f32(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                           double scale, const Tensor& out, const Tensor& lse) {
  const cpu::AttentionKernels& kern = TS_DISPATCH(attention_kernels);
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), e = q.size(3);
  const int64_t hk = k.size(1), s = k.size(2), ev = v.size(3), group = h / hk;
  const float* qd = q.data_ptr<float>();
  const float* kd = k.data_ptr<float>();
  const float* vd = v.data_ptr<float>();
  float* od = out.data_ptr<float>();
  float* ld = lse.data_ptr<float>();

  if (l <= kDecodeRows) {
    parallel_tasks(b * h * l, [&](int64_t task) {
      const int64_t bh = task / l, i = task % l, bi = bh / h, hi = bh % h;
      const int64_t kvh = bi * hk + hi / group;
      cpu::AttentionDecodeArgs a;
      a.q = qd + (bh * l + i) * e;
      a.k = kd + kvh * s * e;
      a.v = vd + kvh * s * ev;
      a.s = causal ? std::min(s, i + 1) : s;
      a.e = e;
      a.ev = ev;
      a.k_rs = e;
      a.v_rs = ev;
      a.scale = static_cast<float>(scale);
      a.out = od + (bh * l + i) * ev;
      a.lse = ld + bh * l + i;
      a.workspace = thread_scratch(s);
      kern.decode_row(a);
    });
    return;
  }

  // Keys as A panels of MR keys over e; V^T as A panels of MR value columns over s keys.
  const int64_t mr = kern.mr;
  const int64_t k_panels = (s + mr - 1) / mr * mr * e, v_panels = (ev + mr - 1) / mr * mr * s;
  const Tensor packed = empty({b * hk, k_panels + v_panels}, kFloat32);
  float* pd = packed.data_ptr<float>();
  parallel_tasks(b * hk, [&](int64_t kvh) {
    float* kp = pd + kvh * (k_panels + v_panels);
    gemm::pack_a_block<float>(s, e, kd + kvh * s * e, e, 1, mr, kp);
    gemm::pack_a_block<float>(ev, s, vd + kvh * s * ev, 1, ev, mr, kp + k_panels);
  });

  const int64_t key_block = std::max<int64_t>(mr, kKeyBlockTarget / mr * mr);
  const int64_t blocks = (l + kQueryBlock - 1) / kQueryBlock;
  const int64_t ws_floats = kern.block_workspace_floats(kQueryBlock, e, ev, key_block);
  // Causal blocks late in the sequence cost the most: hand them out first, all heads' last
  // blocks before anyone's second to last.
  parallel_tasks(b * h * blocks, [&](int64_t task) {
    const int64_t bh = task % (b * h), blk = blocks - 1 - task / (b * h);
    const int64_t bi = bh / h, hi = bh % h, kvh = bi * hk + hi / group;
    const int64_t q0 = blk * kQueryBlock;
    cpu::AttentionBlockArgs a;
    a.kpack = pd + kvh * (k_panels + v_panels);
    a.vpack = a.kpack + k_panels;
    a.s = s;
    a.e = e;
    a.ev = ev;
    a.q = qd + (bh * l + q0) * e;
    a.q_rs = e;
    a.q0 = q0;
    a.nq = std::min(kQueryBlock, l - q0);
    a.causal = causal;
    a.scale = static_cast<float>(scale);
    a.key_block = key_block;
    a.out = od + (bh * l + q0) * ev;
    a.out_rs = ev;
    a.lse = ld + bh * l + q0;
    a.workspace = thread_scratch(ws_floats);
    kern.forward_block(a);
  });
}

}  // namespace tessera::ops
