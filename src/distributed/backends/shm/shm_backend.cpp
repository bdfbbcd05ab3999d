// ShmBackend: front end, queue and progress thread. See shm_backend.h.
#include "distributed/backends/shm/shm_backend.h"

#include <fmt/chrono.h>

#include <cstdlib>

#include "distributed/backends/shm/reduce.h"

namespace tessera::distributed {

namespace shm {

namespace {

constexpr uint64_t kDefaultBufferBytes = 1 << 20;

uint64_t buffer_bytes_from(uint64_t given, int size) {
  uint64_t bytes = given;
  if (bytes == 0) {
    const char* env = std::getenv("TESSERA_SHM_BUFFER_BYTES");
    bytes = kDefaultBufferBytes;
    if (env && *env) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(env, &end, 10);
      TS_CHECK(end && *end == '\0' && v > 0, ValueError,
               "shm backend: TESSERA_SHM_BUFFER_BYTES must be a positive integer, but got '{}'",
               env);
      bytes = v;
    }
  }
  const uint64_t minimum = std::max<uint64_t>(4096, 64 * static_cast<uint64_t>(size));
  TS_CHECK(bytes >= minimum && bytes <= (1ull << 32), ValueError,
           "shm backend: the buffer size must be in [{}, 4294967296] bytes for {} ranks, but got "
           "{}",
           minimum, size, bytes);
  return bytes / 64 * 64;
}

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

}  // namespace

ShmBackend::ShmBackend(const StorePtr& store, int rank, int size, Milliseconds timeout,
                       const ShmOptions& options)
    : Backend(rank, size), timeout_(timeout), group_name_(options.group_name) {
  TS_CHECK(store != nullptr, ValueError, "shm backend: argument 'store' must not be null");
  TS_CHECK(timeout.count() > 0, ValueError,
           "shm backend: argument 'timeout' must be positive, but got {}", timeout);
  TS_CHECK(options.ring_bytes >= 4096 && options.ring_bytes <= (1ull << 30), ValueError,
           "shm backend: option 'ring_bytes' must be in [4096, 1073741824], but got {}",
           options.ring_bytes);
  const uint64_t buffer = buffer_bytes_from(options.buffer_bytes, size);
  auto segment =
      Segment::rendezvous(*store, rank, size, buffer, options.ring_bytes, Clock::now() + timeout);
  comm_ = std::make_unique<Communicator>(std::move(segment), rank, group_name_);
  progress_ = std::thread([this] { progress_loop(); });
}

ShmBackend::~ShmBackend() {
  try {
    shutdown();
  } catch (...) {  // a destructor must not throw; shutdown's errors are on the Works
  }
}

// ---- front end -------------------------------------------------------------------------------

WorkPtr ShmBackend::enqueue(Op op, std::vector<Tensor> outputs,
                            std::optional<Milliseconds> timeout) {
  const Milliseconds t = timeout.value_or(timeout_);
  TS_CHECK(t.count() > 0, ValueError, "{}(): argument 'timeout' must be positive, but got {}",
           op_kind_name(op.kind), t);
  WorkPtr work;
  {
    std::lock_guard lock(mutex_);
    TS_CHECK(!stopping_, distributed::DistBackendError,
             "{}(): the shm group '{}' was shut down (destroy_process_group)",
             op_kind_name(op.kind), group_name_);
    op.seq = ++next_seq_;
    work = std::make_shared<Work>(fmt::format("shm:{}", op_kind_name(op.kind)), std::move(outputs),
                                  t, op.seq);
    op.deadline = work->deadline();
    op.timeout = t;
    if (error_) {
      work->mark_failed(WorkStatus::ERROR, error_);
      return work;
    }
    queue_.push_back({std::move(op), work});
  }
  // A Work whose wait() gives up on a stuck progress thread aborts the communicator.
  work->set_on_stuck([this](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      abort(ex.what());
    }
  });
  comm_->wake_self();
  return work;
}

WorkPtr ShmBackend::allreduce(const Tensor& tensor, const AllreduceOptions& opts) {
  check_tensor("all_reduce", "tensor", tensor);
  check_reducible("all_reduce", tensor.dtype(), opts.reduce_op);
  Op op;
  op.kind = OpKind::ALLREDUCE;
  op.dtype = tensor.dtype();
  op.reduce_op = opts.reduce_op;
  op.count = tensor.numel();
  op.out = bytes_of(tensor);
  return enqueue(std::move(op), {tensor}, opts.timeout);
}

WorkPtr ShmBackend::broadcast(const Tensor& tensor, const BroadcastOptions& opts) {
  check_tensor("broadcast", "tensor", tensor);
  check_rank("broadcast", "root_rank", opts.root_rank, size_);
  Op op;
  op.kind = OpKind::BROADCAST;
  op.dtype = tensor.dtype();
  op.root = static_cast<int>(opts.root_rank);
  op.count = tensor.numel();
  op.out = bytes_of(tensor);
  return enqueue(std::move(op), {tensor}, opts.timeout);
}

WorkPtr ShmBackend::reduce(const Tensor& tensor, const ReduceOptions& opts) {
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
  return enqueue(std::move(op), {tensor}, opts.timeout);
}

WorkPtr ShmBackend::allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                              const AllgatherOptions& opts) {
  check_tensor("all_gather", "tensor", input);
  check_list("all_gather", "tensor_list", outputs, size_, input.dtype(), input.numel(), "tensor");
  Op op;
  op.kind = OpKind::ALLGATHER;
  op.dtype = input.dtype();
  op.count = input.numel();
  op.in = bytes_of(input);
  for (const auto& t : outputs) op.outs.push_back(bytes_of(t));
  auto keep = outputs;
  keep.push_back(input);
  return enqueue(std::move(op), std::move(keep), opts.timeout);
}

WorkPtr ShmBackend::allgather_into_tensor(const Tensor& output, const Tensor& input,
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
  for (int r = 0; r < size_; ++r) op.outs.push_back(bytes_of(output) + r * input.nbytes());
  return enqueue(std::move(op), {output, input}, opts.timeout);
}

WorkPtr ShmBackend::gather(const std::vector<Tensor>& outputs, const Tensor& input,
                           const GatherOptions& opts) {
  check_tensor("gather", "tensor", input);
  check_rank("gather", "dst", opts.root_rank, size_);
  Op op;
  op.kind = OpKind::GATHER;
  op.dtype = input.dtype();
  op.root = static_cast<int>(opts.root_rank);
  op.count = input.numel();
  op.in = bytes_of(input);
  if (rank_ == op.root) {
    check_list("gather", "gather_list", outputs, size_, input.dtype(), input.numel(), "tensor");
    for (const auto& t : outputs) op.outs.push_back(bytes_of(t));
  } else {
    TS_CHECK(outputs.empty(), ValueError,
             "gather(): argument 'gather_list' must be empty on non-destination ranks (rank {}, "
             "dst {}), but got {} tensors",
             rank_, op.root, outputs.size());
  }
  auto keep = outputs;
  keep.push_back(input);
  return enqueue(std::move(op), std::move(keep), opts.timeout);
}

WorkPtr ShmBackend::scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                            const ScatterOptions& opts) {
  check_tensor("scatter", "tensor", output);
  check_rank("scatter", "src", opts.root_rank, size_);
  Op op;
  op.kind = OpKind::SCATTER;
  op.dtype = output.dtype();
  op.root = static_cast<int>(opts.root_rank);
  op.count = output.numel();
  op.out = bytes_of(output);
  if (rank_ == op.root) {
    check_list("scatter", "scatter_list", inputs, size_, output.dtype(), output.numel(), "tensor");
    for (const auto& t : inputs) op.ins.push_back(bytes_of(t));
  } else {
    TS_CHECK(inputs.empty(), ValueError,
             "scatter(): argument 'scatter_list' must be empty on non-source ranks (rank {}, src "
             "{}), but got {} tensors",
             rank_, op.root, inputs.size());
  }
  auto keep = inputs;
  keep.insert(keep.begin(), output);
  return enqueue(std::move(op), std::move(keep), opts.timeout);
}

WorkPtr ShmBackend::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
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
  for (const auto& t : inputs) {
    TS_CHECK(!overlaps(t, output), ValueError,
             "reduce_scatter(): the output must not overlap the inputs");
    op.ins.push_back(bytes_of(t));
  }
  auto keep = inputs;
  keep.insert(keep.begin(), output);
  return enqueue(std::move(op), std::move(keep), opts.timeout);
}

WorkPtr ShmBackend::reduce_scatter_tensor(const Tensor& output, const Tensor& input,
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
  for (int r = 0; r < size_; ++r) op.ins.push_back(bytes_of(input) + r * output.nbytes());
  return enqueue(std::move(op), {output, input}, opts.timeout);
}

WorkPtr ShmBackend::alltoall_base(const Tensor& output, const Tensor& input,
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
  return enqueue(std::move(op), {output, input}, opts.timeout);
}

WorkPtr ShmBackend::barrier(const BarrierOptions& opts) {
  Op op;
  op.kind = OpKind::BARRIER;
  return enqueue(std::move(op), {}, opts.timeout);
}

WorkPtr ShmBackend::send(const Tensor& tensor, int dst, const SendRecvOptions& opts) {
  check_tensor("send", "tensor", tensor);
  check_rank("send", "dst", dst, size_);
  Op op;
  op.kind = OpKind::SEND;
  op.dtype = tensor.dtype();
  op.count = tensor.numel();
  op.in = bytes_of(tensor);
  op.peer = dst;
  op.tag = opts.tag;
  return enqueue(std::move(op), {tensor}, opts.timeout);
}

WorkPtr ShmBackend::recv(const Tensor& tensor, int src, const SendRecvOptions& opts) {
  check_tensor("recv", "tensor", tensor);
  check_rank("recv", "src", src, size_);
  Op op;
  op.kind = OpKind::RECV;
  op.dtype = tensor.dtype();
  op.count = tensor.numel();
  op.out = bytes_of(tensor);
  op.peer = src;
  op.tag = opts.tag;
  return enqueue(std::move(op), {tensor}, opts.timeout);
}

// ---- progress thread -------------------------------------------------------------------------

void ShmBackend::progress_loop() {
  for (;;) {
    const uint32_t seen = comm_->doorbell();
    std::exception_ptr error;
    {
      std::lock_guard lock(mutex_);
      error = error_;
      while (!queue_.empty()) {
        Entry e = std::move(queue_.front());
        queue_.pop_front();
        if (e.op.kind == OpKind::SEND || e.op.kind == OpKind::RECV) {
          if (!error) {
            e.work->mark_started();
            comm_->post(e.op);
          }
          const uint64_t seq = e.op.seq;
          p2p_.emplace(seq, std::move(e));
        } else {
          collectives_.push_back(std::move(e));
        }
      }
      if (error) {  // aborted: everything fails with the first error
        for (auto& e : collectives_) e.work->mark_failed(WorkStatus::ERROR, error);
        for (auto& [seq, e] : p2p_) e.work->mark_failed(WorkStatus::ERROR, error);
        collectives_.clear();
        p2p_.clear();
        if (stopping_) return;
      }
      if (stopping_ && collectives_.empty() && p2p_.empty()) return;
    }
    if (error) {
      comm_->sleep(seen, 100'000'000);
      continue;
    }
    try {
      if (!collectives_.empty()) {
        Entry e = std::move(collectives_.front());
        collectives_.pop_front();
        run_front(e);
        finish_p2p(comm_->pump());
        continue;
      }
      if (!p2p_.empty()) {
        finish_p2p(comm_->pump());
        comm_->check_p2p();
        finish_p2p(comm_->pump());
      }
    } catch (const DistTimeoutError&) {
      fail_and_abort(nullptr, WorkStatus::TIMED_OUT, std::current_exception());
      continue;
    } catch (...) {
      fail_and_abort(nullptr, WorkStatus::ERROR, std::current_exception());
      continue;
    }
    // Nothing to do until a peer or the caller rings; p2p deadlines are checked every slice.
    comm_->sleep(seen, p2p_.empty() ? 100'000'000 : kSliceNs);
  }
}

void ShmBackend::run_front(Entry& e) {
  {
    std::lock_guard lock(mutex_);
    current_ = e.work;
  }
  e.work->mark_started();
  try {
    TS_CHECK(Clock::now() < e.op.deadline, distributed::DistTimeoutError,
             "shm {} (op #{} of group '{}'): timed out after {} before it could start (earlier "
             "ops took the time)",
             op_kind_name(e.op.kind), e.op.seq, group_name_, e.op.timeout);
    comm_->run_collective(e.op);
    e.work->mark_completed();
  } catch (const MismatchError&) {
    e.work->mark_failed(WorkStatus::ERROR, std::current_exception());
  } catch (const DistTimeoutError&) {
    fail_and_abort(e.work, WorkStatus::TIMED_OUT, std::current_exception());
  } catch (...) {
    fail_and_abort(e.work, WorkStatus::ERROR, std::current_exception());
  }
  std::lock_guard lock(mutex_);
  current_.reset();
}

void ShmBackend::finish_p2p(const std::vector<Communicator::P2PDone>& done) {
  for (const auto& d : done) {
    auto it = p2p_.find(d.seq);
    TS_INTERNAL_ASSERT(it != p2p_.end());
    if (d.error) {
      it->second.work->mark_failed(WorkStatus::ERROR, d.error);
    } else {
      it->second.work->mark_completed();
    }
    p2p_.erase(it);
  }
}

void ShmBackend::fail_and_abort(const WorkPtr& failed, WorkStatus status,
                                std::exception_ptr error) {
  if (failed) failed->mark_failed(status, error);  // published before the abort
  std::string reason = "unknown error";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    reason = e.what();
  }
  abort(reason);
}

void ShmBackend::abort(const std::string& reason) {
  std::vector<WorkPtr> works;
  {
    std::lock_guard lock(mutex_);
    if (error_) return;
    error_ = std::make_exception_ptr(DistBackendError(
        fmt::format("shm group '{}' (rank {}) was aborted: {}", group_name_, rank_, reason)));
    if (current_) works.push_back(current_);
    for (auto& e : queue_) works.push_back(e.work);
  }
  // In-flight and queued work fails before the communicator is torn down, so none of it can
  // complete successfully afterwards. (The progress thread fails what it holds itself.)
  for (auto& w : works) w->mark_failed(WorkStatus::ERROR, error_);
  comm_->abort(reason);
  comm_->wake_self();
  run_abort_hooks(reason);
}

void ShmBackend::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !progress_.joinable()) return;
    stopping_ = true;
  }
  comm_->wake_self();
  if (progress_.joinable()) progress_.join();  // every queued op is bounded by its deadline
  std::lock_guard lock(mutex_);
  if (!error_) comm_->detach();
}

std::exception_ptr ShmBackend::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

}  // namespace shm

BackendPtr make_shm_backend(const StorePtr& store, int rank, int size, Milliseconds timeout,
                            ShmOptions options) {
  TS_CHECK(size >= 1 && size <= 1024, ValueError,
           "shm backend: world size must be in [1, 1024], but got {}", size);
  TS_CHECK(rank >= 0 && rank < size, ValueError, "shm backend: rank must be in [0, {}), but got {}",
           size, rank);
  return std::make_shared<shm::ShmBackend>(store, rank, size, timeout, options);
}

}  // namespace tessera::distributed
