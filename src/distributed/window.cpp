// Window: the checks every backend shares, the registration exchange and the signal
// bookkeeping. The transports (shm, mpi) only move bytes. See window.h.
#include "tessera/distributed/window.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "tessera/distributed/backend.h"
#include "tessera/ops/factory.h"

namespace tessera::distributed {

namespace {

// One rank's registration record, exchanged with all_gather_into_tensor as int64 words:
// numel, dtype, ndim, sizes (kMaxDims), the transport's handle.
constexpr size_t kMaxDims = 16;
constexpr size_t kNumelWord = 0, kDtypeWord = 1, kNdimWord = 2, kSizesWord = 3;
constexpr size_t kHandleWord = kSizesWord + kMaxDims;

// The completed Work a blocking op of kind `name` returns: one per name for the life of the
// process, handed out without a reference count (a non-owning WorkPtr, the aliasing
// constructor over an empty owner), so it outlives every window and copying it costs nothing.
// Counted copies were two locked instructions of an 8-byte put + flush of about 50 ns.
WorkPtr lasting_completed_work(const std::string& name) {
  static std::mutex mutex;
  static auto* works = new std::map<std::string, WorkPtr>();  // never destroyed
  std::lock_guard lock(mutex);
  WorkPtr& work = (*works)[name];
  if (!work) work = completed_work(name);
  return WorkPtr(WorkPtr(), work.get());
}

}  // namespace

Window::Window(std::shared_ptr<Backend> backend, Milliseconds timeout)
    : backend_(std::move(backend)),
      rank_(backend_->rank()),
      size_(backend_->size()),
      backend_name_(backend_->name()),
      timeout_(timeout),
      // The ops complete in their calls: one completed Work per kind serves every call (a
      // Work per op would cost more than an 8-byte put).
      done_put_(lasting_completed_work(backend_name_ + ":window_put")),
      done_get_(lasting_completed_work(backend_name_ + ":window_get")),
      done_accumulate_(lasting_completed_work(backend_name_ + ":window_accumulate")) {}

Window::~Window() {
  stop_async();
}

void Window::tensor_register(const Tensor& tensor) {
  TS_CHECK(!registered_, ValueError,
           "tensor_register(): window (rank {}) already has a tensor registered (sizes {}); "
           "call tensor_deregister() first",
           rank_, fmt::join(sizes_[static_cast<size_t>(rank_)], ", "));
  check_live("tensor_register");
  TS_CHECK(tensor.defined(), ValueError, "tensor_register(): argument 'tensor' is undefined");
  TS_CHECK(tensor.is_contiguous(), ValueError,
           "tensor_register(): argument 'tensor' must be contiguous, but got strides {}",
           fmt::join(tensor.strides(), ", "));
  TS_CHECK(tensor.dim() <= static_cast<int64_t>(kMaxDims), ValueError,
           "tensor_register(): argument 'tensor' may have at most {} dimensions, but has {}",
           kMaxDims, tensor.dim());
  const Handle handle = prepare(tensor);
  TS_INTERNAL_ASSERT(handle.size() <= kHandleWords);

  const int64_t words = static_cast<int64_t>(kHandleWord + kHandleWords);
  Tensor mine = zeros({words}, TensorOptions(kInt64));
  Tensor all = empty({words * size_}, TensorOptions(kInt64));
  int64_t* m = mine.data_ptr<int64_t>();
  m[kNumelWord] = tensor.numel();
  m[kDtypeWord] = static_cast<int64_t>(tensor.dtype());
  m[kNdimWord] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) m[kSizesWord + size_t(d)] = tensor.size(d);
  for (size_t i = 0; i < handle.size(); ++i) m[kHandleWord + i] = handle[i];
  try {
    AllgatherOptions opts;
    opts.timeout = timeout_;
    backend_->allgather_into_tensor(all, mine, opts)->wait();
  } catch (...) {
    detach();
    throw;
  }

  // Every rank sees the same records, so every rank throws the same error here.
  const int64_t* a = all.data_ptr<int64_t>();
  std::vector<Handle> handles(static_cast<size_t>(size_));
  std::vector<int64_t> numels(static_cast<size_t>(size_));
  std::vector<std::vector<int64_t>> sizes(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    const int64_t* rec = a + r * words;
    const auto dtype = static_cast<ScalarType>(rec[kDtypeWord]);
    if (dtype != tensor.dtype()) {
      detach();
      TS_THROW(TypeError,
               "tensor_register(): every rank must register the same dtype, but rank {} "
               "registered {} and rank {} registered {}",
               rank_, tensor.dtype(), r, dtype);
    }
    numels[size_t(r)] = rec[kNumelWord];
    sizes[size_t(r)].assign(rec + kSizesWord, rec + kSizesWord + rec[kNdimWord]);
    handles[size_t(r)].assign(rec + kHandleWord, rec + kHandleWord + kHandleWords);
  }
  attach(handles);
  tensor_ = tensor;
  dtype_ = tensor.dtype();
  numels_ = std::move(numels);
  sizes_ = std::move(sizes);
  consumed_.assign(static_cast<size_t>(size_), 0);
  registered_ = true;
}

void Window::tensor_deregister() {
  check_registered("tensor_deregister");
  // Everything issued before is visible everywhere before any rank lets go of its peers;
  // once the communicator has ended there is no one to fence with, and the memory is let go
  // here alone (queued asynchronous ops fail at once then: nothing is written).
  if (!communicator_ended()) fence();
  drain("tensor_deregister");
  detach();
  registered_ = false;
  tensor_ = Tensor();
}

const Tensor& Window::get_tensor() const {
  check_registered("get_tensor");
  return tensor_;
}

int64_t Window::get_size(int r) const {
  check_registered("get_size");
  check_rank("get_size", "rank", r);
  return numels_[static_cast<size_t>(r)];
}

const std::vector<int64_t>& Window::get_sizes(int r) const {
  check_registered("get_sizes");
  check_rank("get_sizes", "rank", r);
  return sizes_[static_cast<size_t>(r)];
}

ScalarType Window::dtype() const {
  check_registered("dtype");
  return dtype_;
}

template <class Run>
WorkPtr Window::issue(const char* op, bool async_op, const Tensor& keep, Run&& run,
                      const WorkPtr& done) {
  if (async_op && async_capable()) return submit(op, {keep}, std::forward<Run>(run));
  drain(op);
  run();
  return done;
}

WorkPtr Window::put(const Tensor& src, int dst, int64_t dst_offset, bool async_op) {
  check_registered("put");
  check_live("put");
  check_rank("put", "dst", dst);
  check_range("put", "src", src, dst, "dst_offset", dst_offset);
  const void* from = src.data_ptr();
  const int64_t count = src.numel();
  auto run = [this, from, dst, dst_offset, count] {
    do_put(from, dst, dst_offset, count);
    do_signal(dst);
  };
  return issue("put", async_op, src, std::move(run), done_put_);
}

WorkPtr Window::get(const Tensor& dst, int src_rank, int64_t src_offset, bool async_op) {
  check_registered("get");
  check_live("get");
  check_rank("get", "src_rank", src_rank);
  check_range("get", "dst", dst, src_rank, "src_offset", src_offset);
  void* to = dst.data_ptr();
  const int64_t count = dst.numel();
  auto run = [this, to, src_rank, src_offset, count] { do_get(to, src_rank, src_offset, count); };
  return issue("get", async_op, dst, std::move(run), done_get_);
}

WorkPtr Window::accumulate(const Tensor& src, int dst, int64_t dst_offset, bool async_op) {
  check_registered("accumulate");
  check_live("accumulate");
  check_rank("accumulate", "dst", dst);
  check_range("accumulate", "src", src, dst, "dst_offset", dst_offset);
  TS_CHECK(dtype_ != ScalarType::Bool && !is_complex(dtype_), TypeError,
           "accumulate(): the window's dtype {} has no sum; expected a real numeric dtype", dtype_);
  auto run = [this, src, dst, dst_offset] {  // src by value: an asynchronous run comes later
    if (src.numel() > 0) do_accumulate(src, dst, dst_offset);
  };
  return issue("accumulate", async_op, src, std::move(run), done_accumulate_);
}

void Window::signal(int peer) {
  check_registered("signal");
  check_live("signal");
  check_rank("signal", "peer", peer);
  drain("signal");  // after the data of the puts issued before it
  do_signal(peer);
}

void Window::wait_signal(int peer, std::optional<Milliseconds> timeout) {
  check_registered("wait_signal");
  check_live("wait_signal");
  check_rank("wait_signal", "peer", peer);
  const Milliseconds t = timeout.value_or(timeout_);
  TS_CHECK(t.count() >= 0, ValueError,
           "wait_signal(): argument 'timeout' must not be negative, but got {} ms", t.count());
  uint64_t& consumed = consumed_[static_cast<size_t>(peer)];
  do_wait_signal(peer, consumed, Clock::now() + t, t);
  ++consumed;  // extras stay counted: the next wait needs one more
}

void Window::flush() {
  check_registered("flush");
  check_live("flush");
  drain("flush");
  do_flush();
  rethrow_async_error("flush");
}

void Window::fence() {
  check_registered("fence");
  check_live("fence");
  drain("fence");
  do_flush();
  barrier("fence");
  rethrow_async_error("fence");  // after the barrier: the other ranks are not left in it
}

// ---- asynchronous ops --------------------------------------------------------------------

WorkPtr Window::submit(const char* op, std::vector<Tensor> keep, std::function<void()> run) {
  auto work = std::make_shared<Work>(fmt::format("{}:window_{}", backend_name_, op),
                                     std::move(keep), timeout_);
  std::lock_guard lock(async_mutex_);
  if (!async_thread_.joinable()) async_thread_ = std::thread([this] { async_loop(); });
  async_queue_.push_back({op, std::move(run), work});
  async_outstanding_.fetch_add(1, std::memory_order_relaxed);
  async_cv_.notify_all();
  return work;
}

void Window::async_loop() {
  std::unique_lock lock(async_mutex_);
  for (;;) {
    async_cv_.wait(lock, [&] { return async_stop_ || !async_queue_.empty(); });
    if (async_queue_.empty()) return;  // stopping, and everything queued has run
    Pending p = std::move(async_queue_.front());
    async_queue_.pop_front();
    lock.unlock();
    p.work->mark_started();
    std::exception_ptr error;
    try {
      check_live(p.op);  // a reconfigure since the call: the old ranks are other processes now
      p.run();
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      p.work->mark_failed(WorkStatus::ERROR, error);
    } else {
      p.work->mark_completed();
    }
    lock.lock();
    if (error && !async_error_) {
      async_error_ = error;
      async_failed_.store(true, std::memory_order_release);
    }
    async_outstanding_.fetch_sub(1, std::memory_order_release);  // after its bytes and error
    async_cv_.notify_all();
  }
}

void Window::drain(const char* op) {
  if (async_outstanding_.load(std::memory_order_acquire) == 0) return;  // no lock on the hot path
  std::unique_lock lock(async_mutex_);
  TS_CHECK(
      async_cv_.wait_for(lock, timeout_,
                         [&] { return async_outstanding_.load(std::memory_order_acquire) == 0; }),
      distributed::DistTimeoutError,
      "{}(): window (rank {} of {}, backend '{}'): the asynchronous operations issued before "
      "it did not finish within the timeout ({} ms)",
      op, rank_, size_, backend_name_, timeout_.count());
}

void Window::rethrow_async_error(const char* op) {
  // Without the lock when nothing failed: every blocking flush passes here, and a mutex's
  // lock and unlock were a third of an 8-byte get + flush.
  if (!async_failed_.load(std::memory_order_acquire)) return;
  std::exception_ptr error;
  {
    std::lock_guard lock(async_mutex_);
    error = std::exchange(async_error_, nullptr);
    async_failed_.store(false, std::memory_order_relaxed);
  }
  if (error)
    TS_THROW(distributed::DistBackendError,
             "{}(): window (rank {} of {}, backend '{}'): an asynchronous operation failed: {}", op,
             rank_, size_, backend_name_, exception_message(error));
}

void Window::stop_async() {
  {
    std::lock_guard lock(async_mutex_);
    async_stop_ = true;
  }
  async_cv_.notify_all();
  if (async_thread_.joinable()) async_thread_.join();
}

void Window::barrier(const char* op) {
  BarrierOptions opts;
  opts.timeout = timeout_;
  try {
    backend_->barrier(opts)->wait();
  } catch (const DistError& e) {
    TS_THROW(distributed::DistBackendError, "{}(): the window's barrier failed on rank {}: {}", op,
             rank_, e.what());
  }
}

void Window::check_registered(const char* op) const {
  TS_CHECK(registered_, ValueError,
           "{}(): window (rank {} of {}, backend '{}') has no tensor registered (call "
           "tensor_register first; a deregistered window has none)",
           op, rank_, size_, backend_name_);
}

bool Window::communicator_ended() const {
  return backend_->error() != nullptr;
}

void Window::check_live(const char* op) const {
  if (!communicator_ended()) return;
  const std::exception_ptr error = backend_->error();
  TS_THROW(distributed::DistBackendError,
           "{}(): window (rank {} of {}, backend '{}') belongs to a communicator that has ended "
           "({}); an abort, destroy_process_group or a reconfigure ends every window made on "
           "it, since its ranks no longer name the same processes: make a new window with "
           "new_window() and register a tensor on it",
           op, rank_, size_, backend_name_,
           error ? exception_message(error) : std::string("it was shut down"));
}

void Window::check_rank(const char* op, const char* arg, int r) const {
  TS_CHECK(r >= 0 && r < size_, ValueError,
           "{}(): argument '{}' must be a group rank in [0, {}), but got {}", op, arg, size_, r);
}

void Window::check_range(const char* op, const char* tensor_arg, const Tensor& t, int r,
                         const char* offset_arg, int64_t offset) const {
  TS_CHECK(t.defined(), ValueError, "{}(): argument '{}' is undefined", op, tensor_arg);
  TS_CHECK(t.dtype() == dtype_, TypeError,
           "{}(): argument '{}' must have the window's dtype {}, but got {}", op, tensor_arg,
           dtype_, t.dtype());
  TS_CHECK(t.is_contiguous(), ValueError,
           "{}(): argument '{}' must be contiguous, but got strides {}", op, tensor_arg,
           fmt::join(t.strides(), ", "));
  const int64_t limit = numels_[static_cast<size_t>(r)];
  TS_CHECK(offset >= 0 && offset <= limit && t.numel() <= limit - offset, IndexError,
           "{}(): elements [{}, {}) are out of bounds of rank {}'s window tensor of {} elements "
           "(argument '{}' = {}, '{}' has {} elements)",
           op, offset, offset + t.numel(), r, limit, offset_arg, offset, tensor_arg, t.numel());
}

}  // namespace tessera::distributed
