// Whether operations record the autograd graph, per thread, as torch.no_grad / enable_grad /
// inference_mode. Recording is on by default; it only ever happens for tensors that require
// grad, so code that never asks for gradients pays nothing.
#pragma once

namespace tessera::autograd {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Sets grad mode for a scope and restores it after (libtorch's AutoGradMode).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

// torch.no_grad(): nothing is recorded in this scope (results do not require grad).
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

// torch.enable_grad(): recording on again inside a no_grad scope.
class EnableGradGuard : public AutoGradMode {
 public:
  EnableGradGuard() : AutoGradMode(true) {}
};

// torch.inference_mode(): no recording, for inference code. (Tessera's tensors carry no
// inference flag: this is no_grad under PyTorch's name.)
using InferenceMode = NoGradGuard;

}  // namespace tessera::autograd
