#include "tessera/nn/layers.h"

#include <cmath>

#include "tessera/autograd/grad_mode.h"
#include "tessera/nn/functional.h"
#include "tessera/ops/blas.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/random.h"
#include "tessera/ops/shape.h"

namespace tessera::nn {

namespace F = functional;

namespace {

// U(-bound, bound) of the given shape.
Tensor uniform(IntArrayRef shape, double bound, ScalarType dtype) {
  return rand(shape, TensorOptions(kFloat32)).mul(2 * bound).sub(bound).to(dtype);
}

void check_positive(int64_t v, const char* layer, const char* arg) {
  TS_CHECK(v > 0, ValueError, "{}: argument '{}' expected a positive size, but got {}", layer, arg,
           v);
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias, ScalarType dtype)
    : Module("Linear"), in_features(in), out_features(out) {
  check_positive(in, "Linear", "in_features");
  check_positive(out, "Linear", "out_features");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", uniform({out, in}, bound, dtype));
  if (with_bias) bias = register_parameter("bias", uniform({out}, bound, dtype));
}

Tensor Linear::forward(const Tensor& input) {
  return linear(input, weight, bias);
}

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad, ScalarType dtype)
    : Module("Embedding"), num_embeddings(num), embedding_dim(dim), padding_idx(pad) {
  check_positive(num, "Embedding", "num_embeddings");
  check_positive(dim, "Embedding", "embedding_dim");
  if (pad) {
    TS_CHECK(*pad >= -num && *pad < num, ValueError,
             "Embedding: argument 'padding_idx' must be within num_embeddings ({}), but got {}",
             num, *pad);
    if (*pad < 0) padding_idx = *pad + num;
  }
  Tensor w = randn({num, dim}).to(dtype);
  if (padding_idx) w.select(0, *padding_idx).zero_();
  weight = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) {
  return embedding(weight, indices, padding_idx);
}

LayerNorm::LayerNorm(int64_t d, double e, bool affine, ScalarType dtype)
    : Module("LayerNorm"), dim(d), eps(e) {
  check_positive(d, "LayerNorm", "normalized_shape");
  if (affine) {
    weight = register_parameter("weight", ones({d}, dtype));
    bias = register_parameter("bias", zeros({d}, dtype));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return F::layer_norm(input, {dim}, weight, bias, eps);
}

RMSNorm::RMSNorm(int64_t d, std::optional<double> e, ScalarType dtype)
    : Module("RMSNorm"), dim(d), eps(e) {
  check_positive(d, "RMSNorm", "normalized_shape");
  weight = register_parameter("weight", ones({d}, dtype));
}

Tensor RMSNorm::forward(const Tensor& input) {
  return F::rms_norm(input, {dim}, weight, eps);
}

Dropout::Dropout(double prob) : Module("Dropout"), p(prob) {
  TS_CHECK(p >= 0 && p <= 1, ValueError,
           "Dropout: argument 'p' expected a probability in [0, 1], but got {}", p);
}

Tensor Dropout::forward(const Tensor& input) {
  return F::dropout(input, p, is_training());
}

Tensor ReLU::forward(const Tensor& input) {
  return relu(input);
}

GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  TS_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "GELU: argument 'approximate' expected 'none' or 'tanh', but got '{}'", approximate);
}

Tensor GELU::forward(const Tensor& input) {
  return gelu(input, approximate);
}

Tensor SiLU::forward(const Tensor& input) {
  return silu(input);
}

CausalSelfAttention::CausalSelfAttention(int64_t e, int64_t heads, std::optional<int64_t> kv,
                                         bool bias, double drop, ScalarType dtype)
    : Module("CausalSelfAttention"),
      embed_dim(e),
      num_heads(heads),
      num_kv_heads(kv.value_or(heads)),
      head_dim(0),
      dropout(drop) {
  check_positive(e, "CausalSelfAttention", "embed_dim");
  check_positive(heads, "CausalSelfAttention", "num_heads");
  TS_CHECK(e % heads == 0, ValueError,
           "CausalSelfAttention: embed_dim ({}) must be divisible by num_heads ({})", e, heads);
  TS_CHECK(num_kv_heads > 0 && heads % num_kv_heads == 0, ValueError,
           "CausalSelfAttention: num_heads ({}) must be a multiple of num_kv_heads ({})", heads,
           num_kv_heads);
  head_dim = e / heads;
  q_proj = register_module("q_proj", std::make_shared<Linear>(e, e, bias, dtype));
  k_proj =
      register_module("k_proj", std::make_shared<Linear>(e, num_kv_heads * head_dim, bias, dtype));
  v_proj =
      register_module("v_proj", std::make_shared<Linear>(e, num_kv_heads * head_dim, bias, dtype));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, bias, dtype));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  TS_CHECK(x.dim() == 3 && x.size(2) == embed_dim, ValueError,
           "CausalSelfAttention: expected input [batch, seq, {}], but got [{}]", embed_dim,
           fmt::join(x.sizes(), ", "));
  const int64_t b = x.size(0), s = x.size(1);
  auto heads = [&](const Tensor& t, int64_t h) {  // [B, S, h * D] -> [B, h, S, D]
    return t.view({b, s, h, head_dim}).transpose(1, 2);
  };
  const Tensor q = heads(q_proj->forward(x), num_heads);
  const Tensor k = heads(k_proj->forward(x), num_kv_heads);
  const Tensor v = heads(v_proj->forward(x), num_kv_heads);
  const Tensor y = F::scaled_dot_product_attention(q, k, v, {}, is_training() ? dropout : 0.0,
                                                   /*is_causal=*/true, std::nullopt,
                                                   /*enable_gqa=*/num_kv_heads != num_heads);
  return out_proj->forward(y.transpose(1, 2).reshape({b, s, embed_dim}));
}

}  // namespace tessera::nn
