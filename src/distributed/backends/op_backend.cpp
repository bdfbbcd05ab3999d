// OpBackend: the argument checks and Op building shared by the backends that queue Ops.
#include "distributed/backends/op_backend.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "distributed/backends/reduce.h"

namespace tessera::distributed {

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::ALLREDUCE:
      return "all_reduce";
    case OpKind::BROADCAST:
      return "broadcast";
    case OpKind::REDUCE:
      return "reduce";
    case OpKind::ALLGATHER:
      return "all_gather";
    case OpKind::GATHER:
      return "gather";
    case OpKind::SCATTER:
      return "scatter";
    case OpKind::REDUCE_SCATTER:
      return "reduce_scatter";
    case OpKind::ALLTOALL:
      return "all_to_all";
    case OpKind::BARRIER:
      return "barrier";
    case OpKind::SEND:
      return "send";
    case OpKind::RECV:
      return "recv";
  }
  return "unknown op";
}

namespace {

// Contiguous, defined, CPU: what every op needs of its tensors.
void check_tensor(std::string_view op, std::string_view arg, const Tensor& t) {
  TS_CHECK(t.defined(), ValueError, "{}(): argument '{}' is an undefined tensor", op, arg);
  TS_CHECK(t.is_contiguous(), ValueError,
           "{}(): argument '{}' must be contiguous, but got sizes {} and strides {}", op, arg,
           t.sizes(), t.strides());
}

void check_like(std::string_view op, std::string_view arg, const Tensor& t, ScalarType dtype,
                int64_t numel, std::string_view like) {
  check_tensor(op, arg, t);
  TS_CHECK(t.dtype() == dtype, TypeError,
           "{}(): argument '{}' must have dtype {} (as {}), but got {}", op, arg, dtype, like,
           t.dtype());
  TS_CHECK(t.numel() == numel, ValueError,
           "{}(): argument '{}' must have {} elements (as {}), but got {}", op, arg, numel, like,
           t.numel());
}

void check_rank(std::string_view op, std::string_view arg, int64_t r, int size) {
  TS_CHECK(r >= 0 && r < size, ValueError,
           "{}(): argument '{}' must be a rank in [0, {}), but got {}", op, arg, size, r);
}

void check_list(std::string_view op, std::string_view arg, const std::vector<Tensor>& list,
                int size, ScalarType dtype, int64_t numel, std::string_view like) {
  TS_CHECK(static_cast<int>(list.size()) == size, ValueError,
           "{}(): argument '{}' must hold one tensor per rank ({}), but got {}", op, arg, size,
           list.size());
  for (size_t i = 0; i < list.size(); ++i)
    check_like(op, fmt::format("{}[{}]", arg, i), list[i], dtype, numel, like);
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const uint8_t*>(a.data_ptr());
  const auto* pb = static_cast<const uint8_t*>(b.data_ptr());
  return a.nbytes() > 0 && b.nbytes() > 0 && pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

uint8_t* bytes_of(const Tensor& t) {
  return static_cast<uint8_t*>(t.data_ptr());
}

// The first byte of each tensor of `list`, and `list` with `extra` before or after it: each
// one allocation (push_back from empty took two for two ranks, copy-then-insert two as well).
template <class P>
std::vector<P> bytes_of_each(const std::vector<Tensor>& list) {
  std::vector<P> p;
  p.reserve(list.size());
  for (const auto& t : list) p.push_back(bytes_of(t));
  return p;
}
std::vector<Tensor> joined(const Tensor* before, const std::vector<Tensor>& list,
                           const Tensor* after) {
  std::vector<Tensor> all;
  all.reserve(list.size() + 1);
  if (before) all.push_back(*before);
  all.insert(all.end(), list.begin(), list.end());
  if (after) all.push_back(*after);
  return all;
}

}  // namespace

WorkPtr OpBackend::allreduce(const Tensor& tensor, const AllreduceOptions& opts) {
  check_tensor("all_reduce", "tensor", tensor);
  check_reducible("all_reduce", tensor.dtype(), opts.reduce_op);
  Op op;
  op.kind = OpKind::ALLREDUCE;
  op.dtype = tensor.dtype();
  op.reduce_op = opts.reduce_op;
  op.count = tensor.numel();
  op.out = bytes_of(tensor);
  return submit(std::move(op), {tensor}, opts);
}

WorkPtr OpBackend::broadcast(const Tensor& tensor, const BroadcastOptions& opts) {
  check_tensor("broadcast", "tensor", tensor);
  check_rank("broadcast", "root_rank", opts.root_rank, size_);
  Op op;
  op.kind = OpKind::BROADCAST;
  op.dtype = tensor.dtype();
  op.root = static_cast<int>(opts.root_rank);
  op.count = tensor.numel();
  op.out = bytes_of(tensor);
  return submit(std::move(op), {tensor}, opts);
}

WorkPtr OpBackend::reduce(const Tensor& tensor, const ReduceOptions& opts) {
  check_tensor("reduce", "tensor", tensor);
  check_reducible("reduce", tensor.dtype(), opts.reduce_op);
  check_rank("reduce", "root_rank", opts.root_rank, size_);
  Op op;
  op.kind = OpKind::REDUCE;
  op.dtype = tensor.dtype();
  op.reduce_op = opts.reduce_op;
  op.root = static_cast<int>(opts.root_rank);
  op.count = tensor.numel();
  op.out = bytes_of(tensor);
  return submit(std::move(op), {tensor}, opts);
}

WorkPtr OpBackend::allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                             const AllgatherOptions& opts) {
  check_tensor("all_gather", "tensor", input);
  check_list("all_gather", "tensor_list", outputs, size_, input.dtype(), input.numel(), "tensor");
  Op op;
  op.kind = OpKind::ALLGATHER;
  op.dtype = input.dtype();
  op.count = input.numel();
  op.in = bytes_of(input);
  op.outs = bytes_of_each<uint8_t*>(outputs);
  return submit(std::move(op), joined(nullptr, outputs, &input), opts);
}

WorkPtr OpBackend::allgather_into_tensor(const Tensor& output, const Tensor& input,
                                         const AllgatherOptions& opts) {
  check_tensor("all_gather_into_tensor", "input_tensor", input);
  check_tensor("all_gather_into_tensor", "output_tensor", output);
  TS_CHECK(output.dtype() == input.dtype(), TypeError,
           "all_gather_into_tensor(): output_tensor must have the input's dtype {}, but got {}",
           input.dtype(), output.dtype());
  TS_CHECK(output.numel() == input.numel() * size_, ValueError,
           "all_gather_into_tensor(): output_tensor must have world size ({}) x {} = {} "
           "elements, but got {}",
           size_, input.numel(), input.numel() * size_, output.numel());
  Op op;
  op.kind = OpKind::ALLGATHER;
  op.dtype = input.dtype();
  op.count = input.numel();
  op.in = bytes_of(input);
  op.outs.reserve(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) op.outs.push_back(bytes_of(output) + r * input.nbytes());
  return submit(std::move(op), {output, input}, opts);
}

void OpBackend::check_root_list(std::string_view op, std::string_view arg,
                                const std::vector<Tensor>& list, const Tensor& like, int root,
                                std::string_view role, std::string_view root_arg) const {
  if (rank_ == root) {
    check_list(op, arg, list, size_, like.dtype(), like.numel(), "tensor");
    return;
  }
  TS_CHECK(list.empty(), ValueError,
           "{}(): argument '{}' must be empty on non-{} ranks (rank {}, {} {}), but got {} tensors",
           op, arg, role, rank_, root_arg, root, list.size());
}

WorkPtr OpBackend::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                          const GatherOptions& opts) {
  check_tensor("gather", "tensor", input);
  check_rank("gather", "dst", opts.root_rank, size_);
  Op op;
  op.kind = OpKind::GATHER;
  op.dtype = input.dtype();
  op.root = static_cast<int>(opts.root_rank);
  op.count = input.numel();
  op.in = bytes_of(input);
  check_root_list("gather", "gather_list", outputs, input, op.root, "destination", "dst");
  op.outs = bytes_of_each<uint8_t*>(outputs);
  return submit(std::move(op), joined(nullptr, outputs, &input), opts);
}

WorkPtr OpBackend::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                           const ScatterOptions& opts) {
  check_tensor("scatter", "tensor", output);
  check_rank("scatter", "src", opts.root_rank, size_);
  Op op;
  op.kind = OpKind::SCATTER;
  op.dtype = output.dtype();
  op.root = static_cast<int>(opts.root_rank);
  op.count = output.numel();
  op.out = bytes_of(output);
  check_root_list("scatter", "scatter_list", inputs, output, op.root, "source", "src");
  op.ins = bytes_of_each<const uint8_t*>(inputs);
  return submit(std::move(op), joined(&output, inputs, nullptr), opts);
}

WorkPtr OpBackend::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                  const ReduceScatterOptions& opts) {
  check_tensor("reduce_scatter", "output", output);
  check_reducible("reduce_scatter", output.dtype(), opts.reduce_op);
  check_list("reduce_scatter", "input_list", inputs, size_, output.dtype(), output.numel(),
             "output");
  Op op;
  op.kind = OpKind::REDUCE_SCATTER;
  op.dtype = output.dtype();
  op.reduce_op = opts.reduce_op;
  op.count = output.numel();
  op.out = bytes_of(output);
  for (const auto& t : inputs)
    TS_CHECK(!overlaps(t, output), ValueError,
             "reduce_scatter(): the output must not overlap the inputs");
  op.ins = bytes_of_each<const uint8_t*>(inputs);
  return submit(std::move(op), joined(&output, inputs, nullptr), opts);
}

WorkPtr OpBackend::reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                         const ReduceScatterOptions& opts) {
  check_tensor("reduce_scatter_tensor", "output", output);
  check_tensor("reduce_scatter_tensor", "input", input);
  check_reducible("reduce_scatter_tensor", output.dtype(), opts.reduce_op);
  TS_CHECK(input.dtype() == output.dtype(), TypeError,
           "reduce_scatter_tensor(): input must have the output's dtype {}, but got {}",
           output.dtype(), input.dtype());
  TS_CHECK(input.numel() == output.numel() * size_, ValueError,
           "reduce_scatter_tensor(): input must have world size ({}) x {} = {} elements, but "
           "got {}",
           size_, output.numel(), output.numel() * size_, input.numel());
  TS_CHECK(!overlaps(input, output), ValueError,
           "reduce_scatter_tensor(): the output must not overlap the input");
  Op op;
  op.kind = OpKind::REDUCE_SCATTER;
  op.dtype = output.dtype();
  op.reduce_op = opts.reduce_op;
  op.count = output.numel();
  op.out = bytes_of(output);
  op.ins.reserve(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) op.ins.push_back(bytes_of(input) + r * output.nbytes());
  return submit(std::move(op), {output, input}, opts);
}

WorkPtr OpBackend::alltoall_base(const Tensor& output, const Tensor& input,
                                 const std::vector<int64_t>& output_splits,
                                 const std::vector<int64_t>& input_splits,
                                 const AllToAllOptions& opts) {
  const char* name = "all_to_all_single";
  check_tensor(name, "output", output);
  check_tensor(name, "input", input);
  TS_CHECK(input.dtype() == output.dtype(), TypeError,
           "{}(): output must have the input's dtype {}, but got {}", name, input.dtype(),
           output.dtype());
  TS_CHECK(!overlaps(input, output), ValueError, "{}(): the output must not overlap the input",
           name);
  // Bytes per row along dim 0 (a 0-d tensor counts as one row).
  const auto splits_in_bytes = [&](const Tensor& t, const std::vector<int64_t>& splits,
                                   const char* arg) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row_bytes = rows == 0 ? 0 : t.nbytes() / rows;
    std::vector<int64_t> out;
    if (splits.empty()) {
      TS_CHECK(rows % size_ == 0, ValueError,
               "{}(): without {} the {} rows of dim 0 must split evenly over {} ranks", name, arg,
               rows, size_);
      out.assign(static_cast<size_t>(size_), rows / size_ * row_bytes);
      return out;
    }
    TS_CHECK(static_cast<int>(splits.size()) == size_, ValueError,
             "{}(): argument '{}' must have one entry per rank ({}), but got {}", name, arg, size_,
             splits.size());
    int64_t sum = 0;
    out.reserve(splits.size());
    for (const int64_t s : splits) {
      TS_CHECK(s >= 0, ValueError, "{}(): argument '{}' must not be negative, but got {}", name,
               arg, fmt::join(splits, ", "));
      sum += s;
      out.push_back(s * row_bytes);
    }
    TS_CHECK(sum == rows, ValueError, "{}(): argument '{}' must sum to dim 0 ({}), but sums to {}",
             name, arg, rows, sum);
    return out;
  };
  Op op;
  op.kind = OpKind::ALLTOALL;
  op.dtype = input.dtype();
  op.in = bytes_of(input);
  op.out = bytes_of(output);
  op.in_split_bytes = splits_in_bytes(input, input_splits, "input_split_sizes");
  op.out_split_bytes = splits_in_bytes(output, output_splits, "output_split_sizes");
  return submit(std::move(op), {output, input}, opts);
}

WorkPtr OpBackend::barrier(const BarrierOptions& opts) {
  Op op;
  op.kind = OpKind::BARRIER;
  return submit(std::move(op), {}, opts);
}

WorkPtr OpBackend::send(const Tensor& tensor, int dst, const SendRecvOptions& opts) {
  check_tensor("send", "tensor", tensor);
  check_rank("send", "dst", dst, size_);
  Op op;
  op.kind = OpKind::SEND;
  op.dtype = tensor.dtype();
  op.count = tensor.numel();
  op.in = bytes_of(tensor);
  op.peer = dst;
  op.tag = opts.tag;
  return track_p2p(enqueue(std::move(op), {tensor}, opts.timeout));
}

WorkPtr OpBackend::recv(const Tensor& tensor, int src, const SendRecvOptions& opts) {
  check_tensor("recv", "tensor", tensor);
  check_rank("recv", "src", src, size_);
  Op op;
  op.kind = OpKind::RECV;
  op.dtype = tensor.dtype();
  op.count = tensor.numel();
  op.out = bytes_of(tensor);
  op.peer = src;
  op.tag = opts.tag;
  return track_p2p(enqueue(std::move(op), {tensor}, opts.timeout));
}

void OpBackend::check_no_pending_p2p(std::string_view group) const {
  issued_p2p_.check_none(name(), group, rank_);
}

WorkPtr OpBackend::new_work(Op& op, std::vector<Tensor> keep, std::optional<Milliseconds> timeout,
                            Milliseconds fallback, std::string_view group, uint64_t& counter,
                            bool stopping, const std::exception_ptr& error, bool suspended) const {
  const std::string_view op_name = op_kind_name(op.kind);
  const Milliseconds t = timeout.value_or(fallback);
  TS_CHECK(t.count() > 0, ValueError, "{}(): argument 'timeout' must be positive, but got {}",
           op_name, t);
  TS_CHECK(!stopping, distributed::DistBackendError,
           "{}(): the {} group '{}' (rank {}) was shut down (destroy_process_group)", op_name,
           name(), group, rank_);
  TS_CHECK(!suspended, distributed::DistBackendError,
           "{}(): the {} group '{}' (rank {}) is suspended; call resume() first", op_name, name(),
           group, rank_);
  op.seq = ++counter;
  std::call_once(work_names_once_, [&] {
    const std::string backend = name();
    const auto last = static_cast<uint32_t>(OpKind::RECV);
    work_names_.resize(last + 1);
    for (auto k = static_cast<uint32_t>(OpKind::ALLREDUCE); k <= last; ++k)
      work_names_[k] = backend + ':' + std::string(op_kind_name(static_cast<OpKind>(k)));
  });
  auto work = std::make_shared<Work>(work_names_[static_cast<uint32_t>(op.kind)], std::move(keep),
                                     t, op.seq);
  op.deadline = work->deadline();
  op.timeout = t;
  if (error) work->mark_failed(WorkStatus::ERROR, error);
  return work;
}

}  // namespace tessera::distributed
