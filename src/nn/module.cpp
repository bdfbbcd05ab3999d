#include "tessera/nn/module.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/autograd_meta.h"
#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/factory.h"

namespace tessera::nn {

namespace {

// Makes dst hold src's data (storage, geometry, dtype) in place, so that every handle of dst
// sees it (PyTorch's `param.data = ...`). Gradient and autograd flag stay with dst.
void set_data(const Tensor& dst, const Tensor& src) {
  TensorImpl& d = dst.unsafe_impl();
  const TensorImpl& s = src.unsafe_impl();
  d.storage = s.storage;
  d.sizes = s.sizes;
  d.strides = s.strides;
  d.storage_offset = s.storage_offset;
  d.dtype = s.dtype;
  d.version = std::make_shared<VersionCounter>();
  d.is_view = false;
  d.view_base = nullptr;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += fmt::format("{}\"{}\"", s.empty() ? "" : ", ", k);
  return s;
}

}  // namespace

Tensor Module::forward(const Tensor&) {
  TS_THROW(RuntimeError,
           "{}.forward(): this module does not take a single tensor (call its own forward "
           "signature)",
           name_);
}

void Module::check_new_name(const std::string& name) const {
  TS_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError,
           "{}: a parameter, buffer or module name must be non-empty and contain no '.', but got "
           "\"{}\"",
           name_, name);
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  TS_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), ValueError,
           "{}: attribute \"{}\" is already registered", name_, name);
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name);
  TS_CHECK(tensor.defined(), ValueError, "{}: parameter \"{}\" is undefined", name_, name);
  if (requires_grad) tensor.requires_grad_();
  params_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor) {
  check_new_name(name);
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  TS_CHECK(module != nullptr, ValueError, "{}: submodule \"{}\" is null", name_, name);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, bool params, bool buffers, bool recurse,
                     StateDict& out) const {
  if (params)
    for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  if (buffers)
    for (const auto& [n, t] : buffers_)
      if (t.defined()) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", params, buffers, true, out);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

StateDict Module::named_parameters(bool recurse) const {
  StateDict out;
  collect("", true, false, recurse, out);
  return out;
}

StateDict Module::named_buffers(bool recurse) const {
  StateDict out;
  collect("", false, true, recurse, out);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

void Module::train(bool mode) {
  training_ = mode;
  for (auto& [_, m] : children_) m->train(mode);
}

void Module::to(ScalarType dtype) {
  TS_CHECK(is_floating_point(dtype), TypeError,
           "{}.to(): expected a floating point dtype, but got {}", name_, dtype);
  autograd::NoGradGuard no_grad;
  auto convert = [&](const Tensor& t) {
    if (!t.defined() || !t.is_floating_point() || t.dtype() == dtype) return;
    Tensor& g = t.mutable_grad();
    if (g.defined()) g = g.to(dtype);
    set_data(t, t.to(dtype));
  };
  for (auto& [_, t] : named_parameters()) convert(t);
  for (auto& [_, t] : named_buffers()) convert(t);
}

void zero_grad(const std::vector<Tensor>& params, bool set_to_none) {
  for (const Tensor& p : params) {
    Tensor& g = p.mutable_grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      g = Tensor();
    } else {
      autograd::NoGradGuard no_grad;
      g = zeros_like(g);
    }
  }
}

void Module::zero_grad(bool set_to_none) {
  nn::zero_grad(parameters(), set_to_none);
}

StateDict Module::state_dict() const {
  StateDict out;
  // Per module: its parameters, its buffers, then its children (PyTorch's order).
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m,
                                                                    const std::string& prefix) {
    m.collect(prefix, true, true, false, out);
    for (const auto& [n, c] : m.children_) walk(*c, prefix + n + ".");
  };
  walk(*this, "");
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  std::map<std::string, Tensor> given;
  for (const auto& [k, t] : state) given[k] = t;
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> own_keys;
  for (const auto& [k, t] : own) {
    own_keys.insert(k);
    auto it = given.find(k);
    if (it == given.end()) {
      missing.push_back(k);
    } else if (it->second.sizes() != t.sizes()) {
      mismatched.push_back(fmt::format(
          "size mismatch for {}: copying a param with shape [{}] from checkpoint, the shape in "
          "current model is [{}].",
          k, fmt::join(it->second.sizes(), ", "), fmt::join(t.sizes(), ", ")));
    }
  }
  for (const auto& [k, _] : state)
    if (!own_keys.count(k)) unexpected.push_back(k);
  std::vector<std::string> errors;
  if (strict && !missing.empty())
    errors.push_back(fmt::format("Missing key(s) in state_dict: {}.", join_keys(missing)));
  if (strict && !unexpected.empty())
    errors.push_back(fmt::format("Unexpected key(s) in state_dict: {}.", join_keys(unexpected)));
  for (auto& m : mismatched) errors.push_back(std::move(m));
  TS_CHECK(errors.empty(), RuntimeError, "Error(s) in loading state_dict for {}:\n\t{}", name_,
           fmt::join(errors, "\n\t"));
  autograd::NoGradGuard no_grad;
  for (const auto& [k, t] : own) {
    auto it = given.find(k);
    if (it != given.end()) t.copy_(it->second);
  }
}

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (auto& m : modules) push_back(std::move(m));
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& [_, m] : named_children()) x = m->forward(x);
  return x;
}

Module& Sequential::operator[](size_t i) const {
  TS_CHECK(i < size(), IndexError, "Sequential: index {} is out of range (size {})", i, size());
  return *named_children()[i].second;
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
}

Module& ModuleList::operator[](size_t i) const {
  TS_CHECK(i < size(), IndexError, "ModuleList: index {} is out of range (size {})", i, size());
  return *named_children()[i].second;
}

}  // namespace tessera::nn
