// nn::Module: parameters, buffers and submodules with PyTorch's names and semantics
// (named_parameters, state_dict / load_state_dict, train/eval, to(dtype), zero_grad), plus
// the containers Sequential and ModuleList.
//
// A layer registers its tensors in its constructor and keeps the returned handles:
//
//   struct Net : nn::Module {
//     Net() : Module("Net") { fc = register_module("fc", std::make_shared<nn::Linear>(4, 2)); }
//     Tensor forward(const Tensor& x) override { return fc->forward(x).relu(); }
//     std::shared_ptr<nn::Linear> fc;
//   };
//
// Handles share their TensorImpl with the module's registry, so to(dtype) and
// load_state_dict update what the layer holds in place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::nn {

// Names to tensors in registration order (PyTorch's OrderedDict).
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name used in messages ("Linear", "Net").
  const std::string& name() const { return name_; }

  // One-tensor modules (layers, Sequential) override this; others throw if it is called.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  std::vector<Tensor> parameters(bool recurse = true) const;
  StateDict named_parameters(bool recurse = true) const;
  StateDict named_buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  int64_t num_parameters() const;

  // Training mode for this module and every descendant (dropout looks at it).
  void train(bool mode = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Converts every floating point parameter and buffer (and existing gradients) to dtype, in
  // place: the layers' handles see the new tensors.
  void to(ScalarType dtype);
  // Resets every parameter's gradient (undefined when set_to_none, else zeros).
  void zero_grad(bool set_to_none = true);

  // Parameters and buffers by dotted name ("fc.weight"), module by module.
  StateDict state_dict() const;
  // Copies values into the existing tensors (dtype converted). strict: missing and unexpected
  // keys are errors; a shape mismatch always is. All problems are reported in one message and
  // nothing is written unless everything checks out.
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool buffers, bool recurse,
               StateDict& out) const;

  std::string name_;
  bool training_ = true;
  StateDict params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Resets the gradients of `params` (undefined when set_to_none, else zeros): what
// Module::zero_grad and Optimizer::zero_grad do.
void zero_grad(const std::vector<Tensor>& params, bool set_to_none = true);

// Modules applied in order (each forward's output is the next one's input).
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& input) override;
  size_t size() const { return named_children().size(); }
  Module& operator[](size_t i) const;
};

// A list of submodules registered under "0", "1", ... (their parameters belong to the owner).
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return named_children().size(); }
  Module& operator[](size_t i) const;
  template <class M>
  M& at(size_t i) const {
    return dynamic_cast<M&>((*this)[i]);
  }
};

}  // namespace tessera::nn
