// How a differentiable op records itself (internal):
//
//   Tensor exp(const Tensor& a) {
//     autograd::Recorder rec({a});               // does any input require grad?
//     Tensor out = kernel(a);                    // runs below autograd (no nested records)
//     if (rec) rec.finish("ExpBackward0", {out}, [s = rec.save_output(out)](auto& g, Node& n) {
//       return tensor_list{g[0].mul(s.unpack(n))};
//     });
//     return out;
//   }
//
// The backward lambda gets the output gradients (zeros where none flowed) and returns one
// gradient per input (undefined for inputs without one). Names follow PyTorch's grad_fn names.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tessera/autograd/function.h"

namespace tessera::autograd {

class Recorder {
 public:
  // The inputs are kept (for the node's edges) only when recording: every op constructs a
  // Recorder, and most never record.
  explicit Recorder(std::initializer_list<Tensor> inputs)
      : Recorder(std::span<const Tensor>(inputs.begin(), inputs.size())) {}
  explicit Recorder(std::span<const Tensor> inputs) : active_(any_requires_grad(inputs)) {
    if (active_) inputs_.assign(inputs.begin(), inputs.end());
  }
  explicit operator bool() const { return active_; }

  static SavedTensor save(const Tensor& t) { return SavedTensor(t, false); }
  static SavedTensor save_output(const Tensor& t) { return SavedTensor(t, true); }

  // Attaches the node to the outputs (call only when active).
  void finish(std::string name, std::initializer_list<Tensor> outputs,
              FunctionNode::Backward backward) {
    finish(std::move(name), std::vector<Tensor>(outputs), std::move(backward));
  }
  void finish(std::string name, const std::vector<Tensor>& outputs,
              FunctionNode::Backward backward);

 private:
  std::vector<Tensor> inputs_;
  bool active_;
  BelowAutogradGuard below_;  // the op's kernels run without recording or checks
};

// The gradient of a broadcast operand: `g` summed over the broadcast dimensions down to
// `shape` (the inverse of expand).
Tensor sum_to(const Tensor& g, IntArrayRef shape);

// In-place op on `self` (which then takes the op's history; for a view, its base takes a
// CopySlices node, see view_history.cpp): rejects what autograd cannot honour, with PyTorch's
// messages (a leaf that requires grad, a view of one, a view made in no_grad mode).
void check_inplace(const Tensor& self, bool recording, std::string_view op);

}  // namespace tessera::autograd
