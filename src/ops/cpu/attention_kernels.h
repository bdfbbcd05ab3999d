// Per-ISA float32 attention kernels: the fused prefill block and the single-query decode row.
// The driver (src/ops/attention.cpp) packs keys and values, splits work into tasks and owns
// the workspaces; these kernels run serially inside one task and allocate nothing.
//
// Prefill: one block of queries against the keys it may see, by the GEMM microkernel of the
// same ISA. Scores are computed transposed, S^T = K Q^T, so that each micro-tile lands in the
// B-panel layout of the next product (keys down, NR queries across): the online softmax then
// runs across queries in full vector lanes with no horizontal reductions, and O^T += V^T P
// reads P straight from where the scores were written. No L x S matrix ever exists.
//
// Layouts (gemm/pack.h): kpack holds the head's keys as A micro-panels of MR keys over e
// (pack_a_block of K, s x e); vpack holds V^T as A micro-panels of MR value columns over s keys
// (pack_a_block of V^T, ev x s), so the keys [j0, j0 + n) of panel r start at
// vpack + r * MR * s + j0 * MR.
#pragma once

#include <cstdint>

#include "core/dispatch.h"

namespace tessera::cpu {

struct AttentionBlockArgs {
  const float* kpack = nullptr;  // ceil(s / MR) panels of MR x e
  const float* vpack = nullptr;  // ceil(ev / MR) panels of MR x s
  int64_t s = 0, e = 0, ev = 0;
  const float* q = nullptr;  // nq query rows of e floats, row i at q + i * q_rs
  int64_t q_rs = 0;
  int64_t q0 = 0, nq = 0;  // the block's first query (its index in the sequence) and count
  bool causal = false;     // query i sees keys j <= i (top-left aligned, as PyTorch's is_causal)
  float scale = 1;
  int64_t key_block = 0;  // keys per step, a multiple of MR
  float* out = nullptr;   // nq rows of ev floats, row i at out + i * out_rs
  int64_t out_rs = 0;
  float* lse = nullptr;        // nq row log-sum-exps (of the scaled scores)
  float* workspace = nullptr;  // block_workspace_floats(nq, e, ev, key_block) floats
};

struct AttentionDecodeArgs {
  const float* q = nullptr;  // one query row of e floats
  const float* k = nullptr;  // keys [0, s): row j at k + j * k_rs
  const float* v = nullptr;  // values: row j at v + j * v_rs, ev floats
  int64_t s = 0, e = 0, ev = 0, k_rs = 0, v_rs = 0;
  float scale = 1;
  float* out = nullptr;        // ev floats
  float* lse = nullptr;        // one value
  float* workspace = nullptr;  // s floats (the row's scores, then probabilities)
};

struct AttentionKernels {
  int mr = 0, nr = 0;  // the float32 GEMM microkernel's tile, which sets the packed layouts
  int64_t (*block_workspace_floats)(int64_t nq, int64_t e, int64_t ev, int64_t key_block);
  void (*forward_block)(const AttentionBlockArgs& args);
  void (*decode_row)(const AttentionDecodeArgs& args);
};

}  // namespace tessera::cpu

TS_DECLARE_ISA_TABLE(AttentionKernels, attention_kernels)
