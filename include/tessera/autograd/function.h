// The autograd graph: a Node per recorded operation (its backward), Edges to the nodes of its
// inputs, AccumulateGrad at the leaves, and SavedTensor for what a backward formula needs,
// checked against in-place modification. The engine (autograd.h) walks it in reverse.
//
// Tensor::grad_fn() returns a Node, so its name ("MulBackward0", as PyTorch names them) and
// next_edges() can be inspected. Custom differentiable functions derive from Node (or use
// FunctionNode with a lambda) and attach themselves with set_history().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/tensor.h"

namespace tessera::autograd {

class Node;

using tensor_list = std::vector<Tensor>;
// A gradient hook: gets the gradient, returns a replacement or an undefined tensor to keep it.
using Hook = std::function<Tensor(const Tensor&)>;

// Where a gradient goes: input `input_nr` of `fn` (for a leaf, its AccumulateGrad, input 0).
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// Shape and dtype of a tensor a node produced or consumed, to validate and zero-fill grads.
struct TensorGeometry {
  DimVector sizes;
  ScalarType dtype = ScalarType::Float32;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::string name);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  // Gradients of the forward outputs (one each; zeros where none flowed) -> gradients of the
  // forward inputs (one per next edge; undefined = no gradient).
  virtual tensor_list apply(tensor_list&& grads) = 0;
  // Drops saved tensors after a backward without retain_graph; apply() then throws.
  virtual void release_variables() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const std::vector<TensorGeometry>& input_geometry() const { return inputs_; }
  const std::vector<TensorGeometry>& output_geometry() const { return outputs_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  // Hooks on the gradient of forward output `output_nr` (Tensor::register_hook on a
  // non-leaf), run before apply().
  std::vector<std::pair<uint32_t, Hook>>& pre_hooks() { return pre_hooks_; }

  // Graph construction (set_history does both).
  void add_input(const Tensor& input);                     // next edge to input's history, or none
  void add_next_edge(Edge edge, TensorGeometry geometry);  // an edge taken from another node
  uint32_t add_output(const Tensor& output);

 private:
  std::string name_;
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<TensorGeometry> inputs_, outputs_;
  std::vector<std::pair<uint32_t, Hook>> pre_hooks_;
};

// A tensor a backward formula needs. Outputs of the node itself are kept without their
// history (no reference cycle); every saved tensor records the version it had, and unpack()
// raises PyTorch's "modified by an inplace operation" error when it changed.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output);
  Tensor unpack(const Node& owner) const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint64_t version_ = 0;
  bool is_output_ = false;
};

// A node whose backward is a lambda over the output gradients (zeros where none flowed) and
// the node itself (to unpack SavedTensors). release_variables() drops the lambda with
// everything it captured.
class FunctionNode : public Node {
 public:
  using Backward = std::function<tensor_list(const tensor_list& grads, const Node& self)>;
  FunctionNode(std::string name, Backward backward);
  tensor_list apply(tensor_list&& grads) override;
  void release_variables() override;

 private:
  Backward backward_;
};

// The node that adds a leaf's gradient into its .grad (after the leaf's hooks).
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  tensor_list apply(tensor_list&& grads) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// Whether an operation on these inputs must be recorded: grad mode is on and one of them
// requires grad.
bool any_requires_grad(std::span<const Tensor> inputs);

// Makes `node` the grad_fn of `outputs` (they then require grad), with next edges to the
// histories of `inputs` (in the order its backward returns their gradients).
void set_history(const std::shared_ptr<Node>& node, std::span<const Tensor> inputs,
                 std::span<const Tensor> outputs);

// The gradient edge of a tensor: its grad_fn and output number, or its AccumulateGrad for a
// leaf that requires grad, or an invalid edge.
Edge gradient_edge(const Tensor& t);

// While alive, operations run their kernels without recording (a differentiable op's own
// kernel call: the op records itself once, around it). Unlike NoGradGuard it does not
// change what the user sees as grad mode.
class BelowAutogradGuard {
 public:
  // below = false re-enables recording for a scope inside one (autograd's own replays).
  explicit BelowAutogradGuard(bool below = true);
  ~BelowAutogradGuard();
  BelowAutogradGuard(const BelowAutogradGuard&) = delete;
  BelowAutogradGuard& operator=(const BelowAutogradGuard&) = delete;
  static bool active();

 private:
  bool prev_;
};

// Throws NotImplementedError-style RuntimeError naming `op` when an input requires grad in
// grad mode and the op has no derivative (called by kernels' drivers, e.g. TensorIterator).
void check_no_grad_needed(std::span<const Tensor> inputs, std::string_view op);

}  // namespace tessera::autograd
