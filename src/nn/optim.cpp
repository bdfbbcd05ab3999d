#include "tessera/nn/optim.h"

#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <string>

#include <fmt/format.h>

#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera::optim {

namespace {

bool low_precision(ScalarType t) {
  return t == kBFloat16 || t == kFloat16;
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name)
    : lr_(lr), name_(name), params_(std::move(params)) {
  TS_CHECK(!params_.empty(), ValueError, "{}: optimizer got an empty parameter list", name_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    TS_CHECK(p.defined() && p.is_floating_point() && p.is_leaf(), ValueError,
             "{}: parameter {} must be a defined floating point leaf tensor", name_, i);
  }
  set_lr(lr);
  state_.resize(params_.size());
}

void Optimizer::set_lr(double lr) {
  TS_CHECK(lr >= 0 && std::isfinite(lr), ValueError,
           "{}: invalid learning rate: {} (expected a finite value >= 0)", name_, lr);
  lr_ = lr;
}

void Optimizer::step() {
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    ParamState& s = state_[i];
    ++s.step;
    if (low_precision(p.dtype())) {
      if (!s.master.defined()) s.master = p.to(kFloat32);
      update(s.master, g.to(kFloat32), s);
      p.copy_(s.master);  // one rounding into bfloat16/float16
    } else {
      Tensor pv = p;
      update(pv, g.dtype() == p.dtype() ? g : g.to(p.dtype()), s);
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  nn::zero_grad(params_, set_to_none);
}

nn::StateDict Optimizer::state_dict() const {
  nn::StateDict out;
  const auto names = buffer_names();
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& s = state_[i];
    if (s.step == 0) continue;
    out.emplace_back(fmt::format("state.{}.step", i),
                     full({}, static_cast<double>(s.step), kFloat64));
    for (size_t b = 0; b < s.buffers.size() && b < names.size(); ++b)
      if (s.buffers[b].defined())
        out.emplace_back(fmt::format("state.{}.{}", i, names[b]), s.buffers[b]);
    if (s.master.defined()) out.emplace_back(fmt::format("state.{}.master", i), s.master);
  }
  out.emplace_back("param_groups.0.lr", full({}, lr_, kFloat64));
  for (auto& [name, value] : const_cast<Optimizer*>(this)->hyper())
    out.emplace_back(fmt::format("param_groups.0.{}", name), full({}, *value, kFloat64));
  return out;
}

void Optimizer::load_state_dict(const nn::StateDict& state) {
  std::map<std::string, Tensor> given(state.begin(), state.end());
  auto scalar = [&](const std::string& key) -> double {
    auto it = given.find(key);
    TS_CHECK(it != given.end() && it->second.numel() == 1, ValueError,
             "{}.load_state_dict(): missing or malformed entry \"{}\"", name_, key);
    return it->second.item<double>();
  };
  // Validate everything first: a bad state leaves the optimizer untouched.
  const auto names = buffer_names();
  std::vector<ParamState> fresh(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string prefix = fmt::format("state.{}.", i);
    if (!given.count(prefix + "step")) continue;
    fresh[i].step = static_cast<int64_t>(scalar(prefix + "step"));
    for (const char* n : names) {
      auto it = given.find(prefix + n);
      if (it == given.end()) {
        fresh[i].buffers.emplace_back();
        continue;
      }
      TS_CHECK(it->second.sizes() == params_[i].sizes(), ValueError,
               "{}.load_state_dict(): \"{}{}\" has shape [{}] but parameter {} has [{}]", name_,
               prefix, n, fmt::join(it->second.sizes(), ", "), i,
               fmt::join(params_[i].sizes(), ", "));
      fresh[i].buffers.push_back(it->second.clone());
    }
    if (auto it = given.find(prefix + "master"); it != given.end())
      fresh[i].master = it->second.to(kFloat32).clone();
  }
  for (const auto& [k, _] : given) {
    const bool ours = k.starts_with("param_groups.0.");
    if (!k.starts_with("state.")) {
      TS_CHECK(ours, ValueError, "{}.load_state_dict(): unexpected key \"{}\"", name_, k);
      continue;
    }
    const size_t idx = std::stoul(k.substr(6));
    TS_CHECK(idx < params_.size(), ValueError,
             "{}.load_state_dict(): \"{}\" refers to parameter {} but the optimizer has {}", name_,
             k, idx, params_.size());
  }
  const double lr = scalar("param_groups.0.lr");
  std::vector<double> values;
  for (auto& [name, _] : hyper()) values.push_back(scalar(fmt::format("param_groups.0.{}", name)));
  set_lr(lr);
  size_t j = 0;
  for (auto& [_, value] : hyper()) *value = values[j++];
  state_ = std::move(fresh);
}

// ---- SGD ------------------------------------------------------------------------------------

SGD::SGD(std::vector<Tensor> params, SGDOptions o)
    : Optimizer(std::move(params), o.lr, "SGD"), o_(o) {
  TS_CHECK(o.momentum >= 0 && o.weight_decay >= 0, ValueError,
           "SGD: momentum ({}) and weight_decay ({}) must be >= 0", o.momentum, o.weight_decay);
  TS_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), ValueError,
           "SGD: Nesterov momentum requires a momentum and zero dampening");
}

std::vector<std::pair<const char*, double*>> SGD::hyper() {
  return {
      {"momentum", &o_.momentum}, {"dampening", &o_.dampening}, {"weight_decay", &o_.weight_decay}};
}

void SGD::update(Tensor& p, const Tensor& grad, ParamState& s) {
  Tensor d = o_.weight_decay != 0 ? grad.add(p, o_.weight_decay) : grad;
  if (o_.momentum != 0) {
    if (s.buffers.empty() || !s.buffers[0].defined()) {
      s.buffers = {d.clone()};
    } else {
      s.buffers[0].mul_(o_.momentum).add_(d, 1 - o_.dampening);
    }
    d = o_.nesterov ? d.add(s.buffers[0], o_.momentum) : s.buffers[0];
  }
  p.add_(d, -lr_);
}

// ---- Adam / AdamW ---------------------------------------------------------------------------

Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(std::move(params), o.lr, decoupled ? "AdamW" : "Adam"),
      o_(o),
      decoupled_(decoupled) {
  TS_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, ValueError,
           "{}: betas must be in [0, 1), but got ({}, {})", decoupled ? "AdamW" : "Adam", o.beta1,
           o.beta2);
  TS_CHECK(o.eps >= 0 && o.weight_decay >= 0, ValueError,
           "{}: eps ({}) and weight_decay ({}) must be >= 0", decoupled ? "AdamW" : "Adam", o.eps,
           o.weight_decay);
}

std::vector<std::pair<const char*, double*>> Adam::hyper() {
  return {{"beta1", &o_.beta1},
          {"beta2", &o_.beta2},
          {"eps", &o_.eps},
          {"weight_decay", &o_.weight_decay}};
}

void Adam::update(Tensor& p, const Tensor& grad, ParamState& s) {
  Tensor g = grad;
  if (o_.weight_decay != 0) {
    if (decoupled_) {
      p.mul_(1 - lr_ * o_.weight_decay);
    } else {
      g = g.add(p, o_.weight_decay);
    }
  }
  if (s.buffers.size() < 2 || !s.buffers[0].defined()) s.buffers = {zeros_like(p), zeros_like(p)};
  Tensor& m = s.buffers[0];
  Tensor& v = s.buffers[1];
  m.mul_(o_.beta1).add_(g, 1 - o_.beta1);
  v.mul_(o_.beta2).add_(g.mul(g), 1 - o_.beta2);
  const double bc1 = 1 - std::pow(o_.beta1, static_cast<double>(s.step));
  const double bc2 = 1 - std::pow(o_.beta2, static_cast<double>(s.step));
  const Tensor denom = v.sqrt().div(std::sqrt(bc2)).add(o_.eps);
  p.sub_(m.div(denom).mul(lr_ / bc1));
}

// ---- clipping -------------------------------------------------------------------------------

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  TS_CHECK(norm_type == 2.0 || std::isinf(norm_type), ValueError,
           "clip_grad_norm_(): norm_type {} is not supported (2 or inf)", norm_type);
  autograd::NoGradGuard no_grad;
  double total = 0;
  for (const Tensor& p : params) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (std::isinf(norm_type)) {
      total = std::max(total, g.abs().max().to(kFloat64).item<double>());
    } else {
      const double n = g.to(kFloat64).norm().item<double>();
      total += n * n;
    }
  }
  if (!std::isinf(norm_type)) total = std::sqrt(total);
  TS_CHECK(!error_if_nonfinite || std::isfinite(total), RuntimeError,
           "clip_grad_norm_(): the total norm of order {} for gradients from `parameters` is "
           "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
           "by the non-finite norm anyway, set `error_if_nonfinite=false`",
           norm_type);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1)
    for (const Tensor& p : params)
      if (p.grad().defined()) p.grad().mul_(coef);
  return total;
}

// ---- schedules ------------------------------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::step() {
  ++step_;
  optimizer_.set_lr(lr_at(step_));
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TS_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, but got {}", step_size);
}

double StepLR::lr_at(int64_t t) const {
  return base_lr_ * std::pow(gamma_, static_cast<double>(t / step_size_));
}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup, int64_t total, double min_lr)
    : LRScheduler(optimizer), warmup_(warmup), total_(total), min_lr_(min_lr) {
  TS_CHECK(warmup >= 0 && total > warmup, ValueError,
           "WarmupCosineLR: expected 0 <= warmup < total, but got warmup={}, total={}", warmup,
           total);
  optimizer.set_lr(lr_at(0));
}

double WarmupCosineLR::lr_at(int64_t t) const {
  if (t < warmup_) return base_lr_ * static_cast<double>(t + 1) / static_cast<double>(warmup_ + 1);
  if (t >= total_) return min_lr_;
  const double progress = static_cast<double>(t - warmup_) / static_cast<double>(total_ - warmup_);
  return min_lr_ + (base_lr_ - min_lr_) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace tessera::optim
