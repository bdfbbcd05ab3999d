// nn::functional, composed of recorded ops (their derivatives come with them).
#include "tessera/nn/functional.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"

namespace tessera::nn::functional {

namespace {

// The trailing dims of `input` that normalized_shape names, checked.
DimVector trailing_dims(const Tensor& input, IntArrayRef normalized_shape, std::string_view op) {
  const int64_t n = static_cast<int64_t>(normalized_shape.size());
  bool ok = n >= 1 && n <= input.dim();
  for (int64_t i = 0; ok && i < n; ++i) ok = input.size(input.dim() - n + i) == normalized_shape[i];
  TS_CHECK(ok, RuntimeError,
           "{}(): given normalized_shape=[{}], expected input with shape [*, {}], but got input "
           "of size [{}]",
           op, fmt::join(normalized_shape, ", "), fmt::join(normalized_shape, ", "),
           fmt::join(input.sizes(), ", "));
  DimVector dims;
  for (int64_t i = input.dim() - n; i < input.dim(); ++i) dims.push_back(i);
  return dims;
}

void check_affine(const Tensor& t, IntArrayRef shape, std::string_view op, std::string_view arg) {
  if (!t.defined()) return;
  TS_CHECK(t.sizes() == shape, RuntimeError,
           "{}(): argument '{}' expected shape [{}], but got [{}]", op, arg, fmt::join(shape, ", "),
           fmt::join(t.sizes(), ", "));
}

Tensor reduce(const Tensor& loss, std::string_view reduction, std::string_view op) {
  if (reduction == "mean") return loss.mean();
  if (reduction == "sum") return loss.sum();
  TS_CHECK(reduction == "none", ValueError,
           "{}(): argument 'reduction' expected 'mean', 'sum' or 'none', but got '{}'", op,
           reduction);
  return loss;
}

// input [N, C, d...] -> [N * d..., C]; target [N, d...] -> [N * d...].
std::pair<Tensor, Tensor> flatten_classes(const Tensor& input, const Tensor& target,
                                          std::string_view op) {
  TS_CHECK(input.dim() >= 1 && input.dim() <= 8, ValueError,
           "{}(): argument 'input' expected 1 to 8 dims, but got {}", op, input.dim());
  TS_CHECK(target.dtype() == kInt64, TypeError,
           "{}(): argument 'target' expected class indices of dtype int64, but got {}", op,
           target.dtype());
  if (input.dim() == 1) {
    TS_CHECK(target.dim() == 0, ValueError,
             "{}(): a 1-D input [C] expects a 0-D target, but got [{}]", op,
             fmt::join(target.sizes(), ", "));
    return {input.unsqueeze(0), target.reshape({1})};
  }
  DimVector want(input.sizes().begin(), input.sizes().end());
  want.erase(want.begin() + 1);
  TS_CHECK(target.sizes() == IntArrayRef(want), ValueError,
           "{}(): expected target of shape [{}] for input [{}], but got [{}]", op,
           fmt::join(want, ", "), fmt::join(input.sizes(), ", "), fmt::join(target.sizes(), ", "));
  const int64_t c = input.size(1);
  return {input.dim() == 2 ? input : input.movedim(1, -1).reshape({-1, c}), target.reshape({-1})};
}

// Per-element weights and the valid mask for class indices (ignore_index excluded), checking
// the indices' range.
std::pair<Tensor, Tensor> target_weights(const Tensor& target, int64_t classes,
                                         const Tensor& weight, int64_t ignore_index,
                                         ScalarType dtype, std::string_view op) {
  const Tensor valid = target.ne(ignore_index);
  const Tensor safe = where(valid, target, zeros_like(target));
  if (safe.numel() > 0) {
    const int64_t lo = safe.min().item<int64_t>(), hi = safe.max().item<int64_t>();
    TS_CHECK(lo >= 0 && hi < classes, IndexError,
             "{}(): target {} is out of bounds: expected class indices in [0, {}) (or "
             "ignore_index {})",
             op, lo < 0 ? lo : hi, classes, ignore_index);
  }
  Tensor w = weight.defined() ? weight.to(dtype).index_select(0, safe) : ones(safe.sizes(), dtype);
  return {w.mul(valid.to(dtype)), safe};
}

}  // namespace

Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const DimVector dims = trailing_dims(input, normalized_shape, "layer_norm");
  check_affine(weight, normalized_shape, "layer_norm", "weight");
  check_affine(bias, normalized_shape, "layer_norm", "bias");
  const Tensor mean = input.mean(dims, /*keepdim=*/true);
  const Tensor centred = input.sub(mean);
  const Tensor var = centred.mul(centred).mean(dims, /*keepdim=*/true);
  Tensor y = centred.mul(var.add(eps).rsqrt());
  if (weight.defined()) y = y.mul(weight);
  if (bias.defined()) y = y.add(bias);
  return y;
}

Tensor rms_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  const DimVector dims = trailing_dims(input, normalized_shape, "rms_norm");
  check_affine(weight, normalized_shape, "rms_norm", "weight");
  const double e = eps.value_or(std::numeric_limits<float>::epsilon());
  Tensor y = input.mul(input.mul(input).mean(dims, /*keepdim=*/true).add(e).rsqrt());
  return weight.defined() ? y.mul(weight) : y;
}

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  TS_CHECK(p >= 0 && p <= 1, ValueError,
           "dropout(): argument 'p' expected a probability in [0, 1], but got {}", p);
  if (!training || p == 0) return input;
  if (p == 1) return input.mul(0);
  const Tensor keep = bernoulli(input.detach(), 1 - p, gen);
  return input.mul(keep.div(1 - p));
}

// src/nn/attention.cpp: the blocked kernel for 4-D inputs without a mask or dropout.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                       double scale);

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  TS_CHECK(query.dim() >= 2 && key.dim() == query.dim() && value.dim() == query.dim(), RuntimeError,
           "{}(): expected query, key and value of the same rank >= 2, but got {}, {}, {}", op,
           query.dim(), key.dim(), value.dim());
  TS_CHECK(!(is_causal && attn_mask.defined()), RuntimeError,
           "{}(): explicit attn_mask should not be set when is_causal=True", op);
  const int64_t e = query.size(-1), l = query.size(-2), s = key.size(-2);
  TS_CHECK(key.size(-1) == e && value.size(-2) == s, RuntimeError,
           "{}(): expected key [..., S, {}] and value [..., S, Ev] matching it, but got key [{}] "
           "and value [{}]",
           op, e, fmt::join(key.sizes(), ", "), fmt::join(value.sizes(), ", "));
  const bool gqa = query.dim() >= 3 && key.size(-3) != query.size(-3);
  const bool floating =
      query.is_floating_point() && key.dtype() == query.dtype() && value.dtype() == query.dtype();
  if (query.dim() == 4 && !attn_mask.defined() && dropout_p == 0 && floating &&
      key.size(0) == query.size(0) && value.size(1) == key.size(1) &&
      (!gqa || (enable_gqa && key.size(1) > 0 && query.size(1) % key.size(1) == 0)))
    return flash_attention(query, key, value, is_causal,
                           scale.value_or(1.0 / std::sqrt(static_cast<double>(e))));
  Tensor k = key, v = value;
  if (gqa) {
    const int64_t hq = query.size(-3), hk = key.size(-3);
    TS_CHECK(enable_gqa && hk > 0 && hq % hk == 0, RuntimeError,
             "{}(): query has {} heads and key/value {}: grouped-query attention needs "
             "enable_gqa=true and a number of query heads divisible by the key/value heads",
             op, hq, hk);
    // Each key/value head serves hq / hk consecutive query heads.
    auto repeat = [&](const Tensor& t) {
      DimVector sizes = t.unsqueeze(-3).sizes().vec();
      sizes[sizes.size() - 3] = hq / hk;
      DimVector merged = t.sizes().vec();
      merged[merged.size() - 3] = hq;
      return t.unsqueeze(-3).expand(sizes).reshape(merged);
    };
    k = repeat(key);
    v = repeat(value);
  }
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(e)));
  Tensor scores = query.matmul(k.transpose(-2, -1)).mul(sc);
  if (is_causal) {
    const Tensor future = ones({l, s}, kBool).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  } else if (attn_mask.defined()) {
    scores =
        attn_mask.dtype() == kBool
            ? scores.masked_fill(attn_mask.logical_not(), -std::numeric_limits<double>::infinity())
            : scores.add(attn_mask);
  }
  Tensor p = scores.softmax(-1);
  if (dropout_p > 0) p = dropout(p, dropout_p, true);
  return p.matmul(v);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, std::string_view reduction) {
  constexpr std::string_view op = "nll_loss";
  auto [logp, t] = flatten_classes(input, target, op);
  const int64_t classes = logp.size(1);
  TS_CHECK(!weight.defined() || (weight.dim() == 1 && weight.size(0) == classes), ValueError,
           "{}(): argument 'weight' expected shape [{}], but got [{}]", op, classes,
           weight.defined() ? fmt::format("{}", fmt::join(weight.sizes(), ", ")) : "");
  auto [w, safe] = target_weights(t, classes, weight, ignore_index, logp.dtype(), op);
  const Tensor picked = logp.gather(1, safe.unsqueeze(1)).squeeze(1);
  const Tensor loss = picked.mul(w).neg();
  if (reduction == "mean") return loss.sum().div(w.sum());
  if (reduction == "none") {
    DimVector shape = target.sizes().vec();
    return loss.reshape(shape);
  }
  return reduce(loss, reduction, op);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index, std::string_view reduction, double label_smoothing) {
  constexpr std::string_view op = "cross_entropy";
  TS_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError,
           "{}(): argument 'label_smoothing' expected a value in [0, 1], but got {}", op,
           label_smoothing);
  TS_CHECK(input.dim() >= 1, ValueError, "{}(): argument 'input' expected at least 1 dim", op);
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const Tensor logp = input.log_softmax(class_dim);
  const Tensor nll = nll_loss(logp, target, weight, ignore_index, reduction);
  if (label_smoothing == 0) return nll;
  // PyTorch 1.13's smoothing term: -sum_c w_c logp_c per element, ignored ones zeroed, then
  // the weighted mean (weights) or the plain mean over every element (no weights).
  auto [lp, t] = flatten_classes(logp, target, op);
  const int64_t classes = lp.size(1);
  const Tensor valid = t.ne(ignore_index);
  Tensor smooth = (weight.defined() ? lp.mul(weight.to(lp.dtype())) : lp).sum({1}).neg();
  smooth = smooth.mul(valid.to(smooth.dtype()));
  Tensor term;
  if (reduction == "mean") {
    if (weight.defined()) {
      auto [w, safe] = target_weights(t, classes, weight, ignore_index, lp.dtype(), op);
      term = smooth.sum().div(w.sum());
    } else {
      term = smooth.mean();
    }
  } else if (reduction == "none") {
    term = smooth.reshape(target.sizes());
  } else {
    term = reduce(smooth, reduction, op);
  }
  return nll.mul(1 - label_smoothing).add(term.mul(label_smoothing / classes));
}

namespace {
void check_same_shape(const Tensor& a, const Tensor& b, std::string_view op) {
  TS_CHECK(a.sizes() == b.sizes(), ValueError,
           "{}(): expected input and target of the same shape, but got [{}] and [{}]", op,
           fmt::join(a.sizes(), ", "), fmt::join(b.sizes(), ", "));
}
}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, std::string_view reduction) {
  check_same_shape(input, target, "mse_loss");
  const Tensor d = input.sub(target);
  return reduce(d.mul(d), reduction, "mse_loss");
}

Tensor l1_loss(const Tensor& input, const Tensor& target, std::string_view reduction) {
  check_same_shape(input, target, "l1_loss");
  return reduce(input.sub(target).abs(), reduction, "l1_loss");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        std::string_view reduction) {
  constexpr std::string_view op = "binary_cross_entropy_with_logits";
  check_same_shape(input, target, op);
  // (1 - t) x + lw (log(1 + exp(-|x|)) + max(-x, 0)), lw = 1 + (pos_weight - 1) t: stable for
  // any x.
  const Tensor softplus_neg = input.abs().neg().exp().log1p().add(input.neg().relu());
  const Tensor lw = pos_weight.defined() ? pos_weight.sub(1).mul(target).add(1) : Tensor();
  Tensor loss =
      target.neg().add(1).mul(input).add(lw.defined() ? lw.mul(softplus_neg) : softplus_neg);
  if (weight.defined()) loss = loss.mul(weight);
  return reduce(loss, reduction, op);
}

}  // namespace tessera::nn::functional
