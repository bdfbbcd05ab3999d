// The backward engine: one thread, the graph's nodes in dependency order (a node runs once
// every node that feeds it a gradient has run; among ready nodes the most recently created
// first, as PyTorch's CPU queue), gradients summed per node input as they arrive.
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/autograd_meta.h"
#include "tessera/autograd/autograd.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera::autograd {

namespace {

struct Root {
  Edge edge;
  Tensor grad;
};

// The gradients of every reachable node's outputs, summed as they arrive.
using Buffers = std::unordered_map<Node*, tensor_list>;

void accumulate(tensor_list& slots, uint32_t nr, Tensor g) {
  if (!g.defined()) return;
  if (!slots[nr].defined()) {
    slots[nr] = std::move(g);
  } else {
    slots[nr] = slots[nr].add(g);
  }
}

size_t slot_count(const Node& n) {
  return std::max<size_t>(1, n.output_geometry().size());
}

// Checks (and casts) the gradient a node returned for its input `i`.
Tensor validate(const Node& node, size_t i, Tensor g) {
  if (!g.defined()) return g;
  const TensorGeometry& want = node.input_geometry()[i];
  TS_CHECK(g.sizes() == IntArrayRef(want.sizes), RuntimeError,
           "Function {} returned an invalid gradient at index {} - got [{}] but expected shape "
           "compatible with [{}]",
           node.name(), i, fmt::join(g.sizes(), ", "), fmt::join(want.sizes, ", "));
  if (g.dtype() != want.dtype) g = g.to(want.dtype);
  return g;
}

struct Capture {
  Node* node;
  uint32_t nr;
};

// Runs the graph from `roots`. With `captures` (autograd::grad), the gradients arriving at
// those (node, input) slots are returned instead of being accumulated into leaves.
tensor_list run_backward(const std::vector<Root>& roots, bool keep_graph, bool create_graph,
                         const std::vector<Capture>* captures) {
  // Dependencies: how many edges into each node come from reachable nodes.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::shared_ptr<Node>> alive;  // keeps every node alive meanwhile
  std::vector<Node*> stack;
  for (const Root& r : roots) {
    if (alive.emplace(r.edge.fn.get(), r.edge.fn).second) stack.push_back(r.edge.fn.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      ++deps[e.fn.get()];
      if (alive.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
    }
  }

  Buffers buffers;
  auto slots_of = [&](Node* n) -> tensor_list& {
    auto it = buffers.find(n);
    if (it == buffers.end()) it = buffers.emplace(n, tensor_list(slot_count(*n))).first;
    return it->second;
  };
  for (const Root& r : roots) accumulate(slots_of(r.edge.fn.get()), r.edge.input_nr, r.grad);

  auto later = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  for (auto& [n, _] : alive)
    if (deps[n] == 0) ready.push(n);

  tensor_list captured(captures ? captures->size() : 0);
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    tensor_list grads = std::move(slots_of(n));
    buffers.erase(n);
    for (auto& [nr, hook] : n->pre_hooks()) {
      if (nr >= grads.size() || !grads[nr].defined()) continue;
      Tensor r = hook(grads[nr]);
      if (r.defined()) grads[nr] = std::move(r);
    }
    const bool is_leaf_node = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    if (captures) {
      for (size_t c = 0; c < captures->size(); ++c)
        if ((*captures)[c].node == n) captured[c] = grads[(*captures)[c].nr];
    }
    tensor_list outs;
    bool any = false;
    for (const Tensor& g : grads) any |= g.defined();
    if (any && !(captures && is_leaf_node)) {
      // Zeros for the outputs no gradient reached (multi-output nodes).
      for (size_t i = 0; i < grads.size() && i < n->output_geometry().size(); ++i) {
        if (!grads[i].defined()) {
          const TensorGeometry& g = n->output_geometry()[i];
          grads[i] = zeros(g.sizes, g.dtype);
        }
      }
      outs = n->apply(std::move(grads));
      if (!keep_graph) n->release_variables();
      TS_CHECK(is_leaf_node || outs.size() == n->next_edges().size(), RuntimeError,
               "Function {} returned {} gradients, but it has {} inputs", n->name(), outs.size(),
               n->next_edges().size());
    }
    for (size_t i = 0; i < n->next_edges().size(); ++i) {
      const Edge& e = n->next_edges()[i];
      if (!e.valid()) continue;
      if (i < outs.size() && outs[i].defined())
        accumulate(slots_of(e.fn.get()), e.input_nr, validate(*n, i, std::move(outs[i])));
      if (--deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
  }
  return captured;
}

std::vector<Root> make_roots(const tensor_list& tensors, const tensor_list& grad_tensors,
                             std::string_view op) {
  TS_CHECK(grad_tensors.empty() || grad_tensors.size() == tensors.size(), ValueError,
           "{}(): expected {} gradients (one per tensor), but got {}", op, tensors.size(),
           grad_tensors.size());
  std::vector<Root> roots;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.defined(), ValueError, "{}(): element {} of tensors is undefined", op, i);
    Edge e = gradient_edge(t);
    TS_CHECK(e.valid(), RuntimeError,
             "{}(): element {} of tensors does not require grad and does not have a grad_fn", op,
             i);
    Tensor g = grad_tensors.empty() ? Tensor() : grad_tensors[i];
    if (!g.defined()) {
      TS_CHECK(t.numel() == 1, RuntimeError,
               "{}(): grad can be implicitly created only for scalar outputs, but element {} has "
               "shape [{}]",
               op, i, fmt::join(t.sizes(), ", "));
      g = ones_like(t);
    } else {
      TS_CHECK(g.sizes() == t.sizes(), RuntimeError,
               "{}(): mismatch in shape: grad_output[{}] has a shape of [{}] and output[{}] has "
               "a shape of [{}]",
               op, i, fmt::join(g.sizes(), ", "), i, fmt::join(t.sizes(), ", "));
      if (g.dtype() != t.dtype()) g = g.to(t.dtype());
    }
    roots.push_back({std::move(e), std::move(g)});
  }
  return roots;
}

}  // namespace

void backward(const tensor_list& tensors, const tensor_list& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph) {
  const std::vector<Root> roots = make_roots(tensors, grad_tensors, "backward");
  AutoGradMode mode(create_graph);  // the backward records itself only for create_graph
  run_backward(roots, retain_graph.value_or(create_graph), create_graph, nullptr);
}

tensor_list grad(const tensor_list& outputs, const tensor_list& inputs,
                 const tensor_list& grad_outputs, std::optional<bool> retain_graph,
                 bool create_graph, bool allow_unused) {
  const std::vector<Root> roots = make_roots(outputs, grad_outputs, "grad");
  std::vector<Capture> captures;
  std::vector<Edge> keep;  // the inputs' accumulators stay alive while we run
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    TS_CHECK(e.valid(), RuntimeError,
             "grad(): element {} of inputs does not require grad and does not have a grad_fn", i);
    captures.push_back({e.fn.get(), e.input_nr});
    keep.push_back(std::move(e));
  }
  AutoGradMode mode(create_graph);
  tensor_list result =
      run_backward(roots, retain_graph.value_or(create_graph), create_graph, &captures);
  for (size_t i = 0; i < result.size(); ++i)
    TS_CHECK(allow_unused || result[i].defined(), RuntimeError,
             "grad(): one of the differentiated tensors (input {}) appears to not have been "
             "used in the graph. Set allow_unused=true if this is the desired behavior.",
             i);
  return result;
}

}  // namespace tessera::autograd
