// torch.nn.functional: normalisation, dropout, attention and losses. Everything here is
// differentiable (built from recorded ops) and follows PyTorch 1.13's definitions, including
// the reductions' denominators with class weights and ignore_index.
#pragma once

#include <optional>
#include <string_view>

#include "tessera/core/tensor.h"
#include "tessera/ops/random.h"

namespace tessera::nn::functional {

// (x - mean) / sqrt(var + eps) * weight + bias over the trailing `normalized_shape` dims
// (biased variance, as PyTorch); weight and bias optional (undefined).
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * weight over the trailing dims (eps default: float32 epsilon,
// PyTorch's choice when it is None).
Tensor rms_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* gen = nullptr);

// torch.nn.functional.scaled_dot_product_attention: softmax(q k^T * scale + mask) v over
// [..., L, E] queries and [..., S, E] keys/values. attn_mask: bool (true = keep) or additive
// float, broadcast to [..., L, S]; is_causal masks j > i (not with attn_mask). enable_gqa: keys
// and values may have fewer heads (dim -3) than the queries, each serving a group of them.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);

// reduction: "mean" (default), "sum" or "none".
// input [N, C] or [N, C, d1, ...] logits, target int64 class indices [N] or [N, d1, ...].
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     int64_t ignore_index = -100, std::string_view reduction = "mean",
                     double label_smoothing = 0.0);
// input: log-probabilities shaped as for cross_entropy.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                int64_t ignore_index = -100, std::string_view reduction = "mean");
Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, std::string_view reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {}, const Tensor& pos_weight = {},
                                        std::string_view reduction = "mean");

// torch.nn.functional.ctc_loss: log_probs [T, N, C] (log_softmax outputs), targets [N, S]
// padded or 1-D concatenated (int64/int32, labels != blank), input_lengths and
// target_lengths [N]. reduction "mean" divides each loss by its target length (at least 1)
// and averages over the batch, as PyTorch; zero_infinity zeroes impossible alignments (and
// their gradients). The gradient is PyTorch's (that of the logits behind a log_softmax).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0,
                std::string_view reduction = "mean", bool zero_infinity = false);

}  // namespace tessera::nn::functional
