// Layers with PyTorch's names, parameter names, shapes and default initialisation (drawn from
// the global generator: manual_seed makes them reproducible).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tessera/nn/module.h"

namespace tessera::nn {

// y = x W^T + b, W [out, in], b [out]; U(-1/sqrt(in), 1/sqrt(in)) for both (PyTorch's
// kaiming_uniform(a=sqrt(5)) works out to that bound).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true,
         ScalarType dtype = ScalarType::Float32);
  Tensor forward(const Tensor& input) override;
  int64_t in_features, out_features;
  Tensor weight, bias;
};

// Rows of weight [num, dim] looked up by index; N(0, 1) init, the padding row zero (and it
// gets no gradient).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt,
            ScalarType dtype = ScalarType::Float32);
  Tensor forward(const Tensor& indices) override;
  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;
  Tensor weight;
};

// Over the last dimension (size `dim`); weight ones, bias zeros.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true,
                     ScalarType dtype = ScalarType::Float32);
  Tensor forward(const Tensor& input) override;
  int64_t dim;
  double eps;
  Tensor weight, bias;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, std::optional<double> eps = std::nullopt,
                   ScalarType dtype = ScalarType::Float32);
  Tensor forward(const Tensor& input) override;
  int64_t dim;
  std::optional<double> eps;
  Tensor weight;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  double p;
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string approximate;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& input) override;
};

// Causal multi-head self-attention over [B, S, E] with grouped-query heads: num_kv_heads
// key/value heads (a divisor of num_heads) each serve num_heads / num_kv_heads query heads.
// Projections q_proj [E, E], k_proj and v_proj [kv_heads * head_dim, E], out_proj [E, E].
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t embed_dim, int64_t num_heads,
                      std::optional<int64_t> num_kv_heads = std::nullopt, bool bias = true,
                      double dropout = 0.0, ScalarType dtype = ScalarType::Float32);
  Tensor forward(const Tensor& x) override;
  int64_t embed_dim, num_heads, num_kv_heads, head_dim;
  double dropout;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
};

}  // namespace tessera::nn
