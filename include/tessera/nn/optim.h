// torch.optim: SGD, Adam, AdamW with PyTorch 1.13's update rules, gradient-norm clipping and
// learning-rate schedules. Steps run under no_grad on the parameters' own tensors.
//
// Mixed precision: a parameter of bfloat16 or float16 keeps a float32 master copy in the
// optimizer state; the update is computed on the master and rounded once into the parameter
// (the gradient is read in float32).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/nn/module.h"

namespace tessera::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr, const char* name);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update from the current gradients (parameters without a gradient are skipped).
  void step();
  void zero_grad(bool set_to_none = true);
  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }

  // Per-parameter state ("state.<i>.<name>") and the hyper-parameters ("param_groups.0.<name>",
  // 0-d float64), so a checkpoint restores the optimizer exactly.
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& state);

 protected:
  struct ParamState {
    int64_t step = 0;
    Tensor master;                // float32 copy of a low-precision parameter
    std::vector<Tensor> buffers;  // momentum / exp_avg, exp_avg_sq
  };
  // The update of one parameter `p` (float32 or float64; the master for low precision) from
  // gradient `g` of the same dtype, in place.
  virtual void update(Tensor& p, const Tensor& g, ParamState& s) = 0;
  // Names of ParamState::buffers, and the hyper-parameters, for state_dict.
  virtual std::vector<const char*> buffer_names() const = 0;
  virtual std::vector<std::pair<const char*, double*>> hyper() = 0;

  double lr_;

 private:
  const char* name_;
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;
};

struct SGDOptions {
  double lr = 1e-2, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);

 protected:
  void update(Tensor& p, const Tensor& g, ParamState& s) override;
  std::vector<const char*> buffer_names() const override { return {"momentum_buffer"}; }
  std::vector<std::pair<const char*, double*>> hyper() override;

 private:
  SGDOptions o_;
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
};
// Adam (L2 weight decay added to the gradient) or, with decoupled weight decay, AdamW.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled = false);

 protected:
  void update(Tensor& p, const Tensor& g, ParamState& s) override;
  std::vector<const char*> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::vector<std::pair<const char*, double*>> hyper() override;

 private:
  AdamOptions o_;
  bool decoupled_;
};

// AdamW: weight_decay defaults to 1e-2 and is applied to the parameter, not the gradient.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = {.weight_decay = 1e-2})
      : Adam(std::move(params), options, true) {}
};

// torch.nn.utils.clip_grad_norm_: scales every gradient by max_norm / total_norm when the total
// (over all gradients, norm_type 2 or inf) exceeds max_norm. Returns the total norm. A
// non-finite total is an error when error_if_nonfinite.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Learning-rate schedules: step() once per optimizer step (after it), as PyTorch.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_step() const { return step_; }
  // The learning rate at step `t` (t = 0 before the first step).
  virtual double lr_at(int64_t t) const = 0;

 protected:
  Optimizer& optimizer_;
  double base_lr_;

 private:
  int64_t step_ = 0;
};

// lr = base * gamma^(t / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t t) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// Linear warm-up from 0 over `warmup` steps, then cosine decay to min_lr at `total` steps
// (held after).
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup, int64_t total, double min_lr = 0.0);
  double lr_at(int64_t t) const override;

 private:
  int64_t warmup_, total_;
  double min_lr_;
};

}  // namespace tessera::optim
