// Nodes, saved tensors and graph construction (tessera/autograd/function.h).
#include "tessera/autograd/function.h"

#include <atomic>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/autograd_meta.h"
#include "tessera/autograd/grad_mode.h"
#include "tessera/ops/pointwise.h"

namespace tessera::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}  // namespace

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(next_sequence_nr++) {}

Node::~Node() = default;

void Node::add_input(const Tensor& input) {
  next_edges_.push_back(input.defined() ? gradient_edge(input) : Edge{});
  inputs_.push_back(input.defined() ? TensorGeometry{input.sizes().vec(), input.dtype()}
                                    : TensorGeometry{});
}

void Node::add_next_edge(Edge edge, TensorGeometry geometry) {
  next_edges_.push_back(std::move(edge));
  inputs_.push_back(std::move(geometry));
}

uint32_t Node::add_output(const Tensor& output) {
  outputs_.push_back({output.sizes().vec(), output.dtype()});
  return static_cast<uint32_t>(outputs_.size() - 1);
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  // An output saved by its own grad_fn would hold that node alive from the node: keep only
  // the data (same storage and version counter).
  data_ = is_output ? t.detach() : t;
  version_ = t._version();
}

Tensor SavedTensor::unpack(const Node& owner) const {
  if (!data_.defined()) return data_;
  if (data_._version() != version_) {
    const AutogradMeta* m = meta_of(data_);
    const std::string origin = is_output_ ? fmt::format(", which is output 0 of {},", owner.name())
                               : m && m->grad_fn ? fmt::format(", which is output {} of {},",
                                                               m->output_nr, m->grad_fn->name())
                                                 : std::string(",");
    TS_THROW(RuntimeError,
             "one of the variables needed for gradient computation has been modified by an "
             "inplace operation: [{} [{}]]{} is at version {}; expected version {} instead. "
             "(The backward of {} needs it unchanged.)",
             data_.dtype(), fmt::join(data_.sizes(), ", "), origin, data_._version(), version_,
             owner.name());
  }
  return data_;
}

FunctionNode::FunctionNode(std::string name, Backward backward)
    : Node(std::move(name)), backward_(std::move(backward)) {}

tensor_list FunctionNode::apply(tensor_list&& grads) {
  TS_CHECK(backward_ != nullptr, RuntimeError,
           "Trying to backward through the graph a second time (or directly access saved "
           "tensors after they have already been freed): {} released its saved tensors after "
           "the first backward. Specify retain_graph=true on the first backward if you need to "
           "backward through the graph again.",
           name());
  return backward_(grads, *this);
}

void FunctionNode::release_variables() {
  backward_ = nullptr;
}

AccumulateGrad::AccumulateGrad(Tensor leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) {
  add_output(leaf_);  // one gradient slot, shaped like the leaf; no next edges
}

tensor_list AccumulateGrad::apply(tensor_list&& grads) {
  Tensor g = std::move(grads.at(0));
  AutogradMeta& m = ensure_meta(leaf_);
  for (const auto& hook : m.hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = std::move(r);
  }
  if (!g.defined()) return {};
  if (!GradMode::is_enabled()) g = g.detach();
  if (!m.grad.defined()) {
    // A fresh tensor: the same gradient tensor may have gone to several leaves.
    m.grad = GradMode::is_enabled() ? g : g.clone();
  } else if (GradMode::is_enabled()) {
    m.grad = m.grad.add(g);  // create_graph: keep the sum's history
  } else {
    NoGradGuard no_grad;
    m.grad.add_(g);
  }
  return {};
}

Edge gradient_edge(const Tensor& t) {
  refresh_view_history(t);
  AutogradMeta* m = meta_of(t);
  if (!m) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(const std::shared_ptr<Node>& node, std::span<const Tensor> inputs,
                 std::span<const Tensor> outputs) {
  for (const Tensor& in : inputs) node->add_input(in);
  for (const Tensor& out : outputs) {
    if (!out.defined()) continue;
    const uint32_t nr = node->add_output(out);
    if (is_inplace_on_view(out, inputs)) {
      rebase_view_history(node, out);
      continue;
    }
    AutogradMeta& m = ensure_meta(out);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = nr;
    m.grad_accumulator.reset();
    out.unsafe_impl().view_version = out._version();  // a view's history is current
  }
}

}  // namespace tessera::autograd
