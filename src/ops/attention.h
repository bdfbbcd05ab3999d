// The fused float32 attention forward behind scaled_dot_product_attention (internal API; the
// autograd wrapper and the plain blocked reference live in src/nn/attention.cpp).
#pragma once

#include "tessera/core/tensor.h"

namespace tessera::ops {

// q [B, H, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev]: contiguous float32, H a multiple of Hk
// (query head h reads key/value head h / (H / Hk)), S > 0. Fills out [B, H, L, Ev] and the
// row log-sum-exps lse [B, H, L] (both contiguous float32). Causal is top-left aligned
// (query i sees keys j <= i), as PyTorch's is_causal. Rows of L <= kDecodeRows take the
// decode path (one query against the keys in place); longer ones the tiled prefill kernel.
void attention_forward_f32(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                           double scale, const Tensor& out, const Tensor& lse);

inline constexpr int64_t kDecodeRows = 4;

}  // namespace tessera::ops
