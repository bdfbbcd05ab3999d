// One-sided RMA windows (torchcomms' TorchCommWindow, c10d's Window): every rank of a group
// registers one tensor, and then any rank reads and writes any peer's registered tensor
// without the peer posting a matching call.
//
//   auto win = distributed::new_window(group);        // every rank, same order
//   Tensor mine = distributed::window_empty({rows, dim}, kFloat32);
//   win->tensor_register(mine);                        // collective
//   win->put(src, /*dst=*/1, /*dst_offset=*/128);      // writes rank 1's tensor, signals it
//   win->wait_signal(/*peer=*/0);                      // on rank 1: one put from rank 0 landed
//   win->get(out, /*src_rank=*/2, /*src_offset=*/64);  // reads rank 2's tensor
//   win->tensor_deregister();                          // collective
//
// Semantics:
//   - Ranks are group ranks; offsets and counts are in elements of the registered tensors,
//     viewed flat (row-major). Each rank's numel, dtype and sizes are exchanged once, at
//     registration, so ranks may register tensors of different sizes (not dtypes: every
//     rank registers the same dtype).
//   - put(src, dst, off) writes src's elements to dst's tensor at [off, off + src.numel()) and
//     then signals dst (as ncclPutSignal does, a put always signals): once dst's wait_signal
//     for this rank returns, the data is there. get(dst, src_rank, off) reads the other way.
//     accumulate(src, dst, off) adds src element-wise into dst's tensor; concurrent
//     accumulates into one rank's tensor from any ranks are atomic with respect to each
//     other (not to plain puts). By default put, get and accumulate complete before they
//     return, and the returned Work is completed and holds no tensors.
//   - async_op = true (shm): the op is checked at once (every error below is still thrown by
//     the call, with nothing queued), then runs on the window's own thread, in issue order
//     with the other asynchronous ops; the returned Work completes when its bytes have moved
//     (a put's signal follows its data) and keeps its tensor alive until then: do not write a
//     put's source, or read a get's destination, before it completes. Every other op of the
//     window (a blocking put, get or accumulate, signal, flush, fence, tensor_deregister) first
//     waits for the asynchronous ops issued before it, so program order holds; flush() then
//     throws the first asynchronous failure since the last flush (its Work holds it too).
//     On mpi, MPI_Put/MPI_Get already return before the transfer; there async_op completes
//     in the call, as the blocking form does.
//   - signal(peer) increments the count of signals peer holds from this rank;
//     wait_signal(peer) waits until this rank holds one from `peer` and consumes it: two
//     signals take two waits, extras stay counted. Its wait ends at its timeout (the group's
//     when not given) with DistTimeoutError.
//   - flush() completes this rank's outstanding operations (they are complete already on shm;
//     MPI_Win_flush_all on mpi). fence() is collective: every rank's operations issued before
//     it are visible everywhere after it.
//   - Errors (ValueError, TypeError, IndexError naming the op, the argument, what was expected
//     and what was given) are thrown before anything is written: a range past the peer's
//     tensor, a dtype other than the window's, a rank outside the group, a window with no
//     tensor registered (or deregistered).
//   - A window belongs to the communicator it was made on. When that communicator ends (an
//     abort, destroy_process_group, or a reconfigure, which starts a new generation with new
//     ranks), every op but the local queries throws DistBackendError saying so, before
//     anything is written: the old ranks no longer name the same processes. A wait_signal in
//     progress ends the same way. tensor_deregister() then releases the memory locally (there
//     is no one to fence with). Make a new window with new_window() in the new generation.
//
// Backends: shm (direct loads and stores into the peer's mapped memory; the registered tensor
// must come from window_empty()) and mpi (MPI windows, passive target; any contiguous
// tensor). Every other backend refuses new_window() with DistBackendError.
//
// Thread-safety: one thread per rank drives a window; windows of one group are independent.
// A window must not outlive its group (it keeps the backend alive, but the backend's
// shutdown ends it).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/distributed/work.h"

namespace tessera::distributed {

class Backend;

class Window {
 public:
  virtual ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The backend's name ("shm", "mpi").
  const std::string& backend_name() const { return backend_name_; }

  // Collective: every rank registers one contiguous tensor of the same dtype (any numel).
  // ValueError when a tensor is registered already; the backend's error when it cannot use
  // the tensor (shm: not from window_empty()).
  void tensor_register(const Tensor& tensor);
  // Collective: completes every rank's operations (as fence()), then releases the peers'
  // memory. Later operations throw until a tensor is registered again.
  void tensor_deregister();
  bool is_registered() const { return registered_; }
  // This rank's registered tensor.
  const Tensor& get_tensor() const;
  // The numel, and the sizes, of rank's registered tensor.
  int64_t get_size(int rank) const;
  const std::vector<int64_t>& get_sizes(int rank) const;
  ScalarType dtype() const;

  WorkPtr put(const Tensor& src, int dst, int64_t dst_offset, bool async_op = false);
  WorkPtr get(const Tensor& dst, int src_rank, int64_t src_offset, bool async_op = false);
  WorkPtr accumulate(const Tensor& src, int dst, int64_t dst_offset, bool async_op = false);
  void signal(int peer);
  void wait_signal(int peer, std::optional<Milliseconds> timeout = std::nullopt);
  void flush();
  void fence();

 protected:
  Window(std::shared_ptr<Backend> backend, Milliseconds timeout);

  // What a rank publishes at registration beyond numel, dtype and sizes: the transport's
  // handle of its memory (shm: process id and descriptors; mpi: nothing).
  using Handle = std::vector<int64_t>;
  static constexpr size_t kHandleWords = 8;

  // ---- transport (called after the checks above; ranks are valid, ranges in bounds) ------
  // Prepares `tensor` for registration and returns this rank's handle (at most kHandleWords).
  virtual Handle prepare(const Tensor& tensor) = 0;
  // Maps every rank's memory given their handles; collective for transports that need it.
  // On failure it releases what it took and throws.
  virtual void attach(const std::vector<Handle>& handles) = 0;
  // Releases the peers' memory (every rank's operations completed before).
  virtual void detach() = 0;
  // dst_offset and count in elements, bytes of the window's dtype.
  virtual void do_put(const void* src, int dst, int64_t dst_offset, int64_t count) = 0;
  virtual void do_get(void* dst, int src_rank, int64_t src_offset, int64_t count) = 0;
  virtual void do_accumulate(const Tensor& src, int dst, int64_t dst_offset) = 0;
  virtual void do_signal(int peer) = 0;
  // Waits for one more signal from `peer` than `consumed`, until `deadline`.
  virtual void do_wait_signal(int peer, uint64_t consumed, Clock::time_point deadline,
                              Milliseconds timeout) = 0;
  virtual void do_flush() = 0;

  Backend& backend() const { return *backend_; }
  Milliseconds timeout() const { return timeout_; }

  // Whether the communicator this window was made on has ended (aborted, shut down, or
  // replaced by a reconfigure). The default asks the backend for its error; a transport on
  // the fast path of small puts answers from a flag.
  virtual bool communicator_ended() const;
  // Throws DistBackendError naming `op` when the communicator has ended.
  void check_live(const char* op) const;

  // Whether do_put, do_get, do_accumulate and do_signal may run on the window's own thread
  // (async_op = true); otherwise those ops complete in the call.
  virtual bool async_capable() const { return false; }
  // Runs the queued asynchronous ops and joins the window's thread. A transport's destructor
  // calls it before it releases anything those ops use.
  void stop_async();

 private:
  struct Pending {
    const char* op;
    std::function<void()> run;
    WorkPtr work;
  };
  // put, get and accumulate once checked: `run` queued for the window's thread (async_op on a
  // transport that can; its Work keeps `keep` alive), or run here after the asynchronous ops
  // issued before it, returning `done`.
  template <class Run>
  WorkPtr issue(const char* op, bool async_op, const Tensor& keep, Run&& run, const WorkPtr& done);
  // Queues `run` for the window's thread; its Work keeps `keep` alive.
  WorkPtr submit(const char* op, std::vector<Tensor> keep, std::function<void()> run);
  // Waits (at most the window's timeout) until every asynchronous op issued so far has run.
  void drain(const char* op);
  void async_loop();
  // The first asynchronous failure since the last flush, as DistBackendError naming `op`.
  void rethrow_async_error(const char* op);

  void check_registered(const char* op) const;
  void check_rank(const char* op, const char* arg, int r) const;
  // `t` is a contiguous tensor of the window's dtype, [offset, offset + t.numel()) lies within
  // rank r's tensor.
  void check_range(const char* op, const char* tensor_arg, const Tensor& t, int r,
                   const char* offset_arg, int64_t offset) const;
  void barrier(const char* op);

  std::shared_ptr<Backend> backend_;
  const int rank_, size_;
  const std::string backend_name_;
  const Milliseconds timeout_;
  const WorkPtr done_put_, done_get_, done_accumulate_;
  bool registered_ = false;
  Tensor tensor_;
  ScalarType dtype_ = ScalarType::Float32;
  std::vector<int64_t> numels_;
  std::vector<std::vector<int64_t>> sizes_;
  std::vector<uint64_t> consumed_;  // signals taken from each peer

  std::mutex async_mutex_;
  std::condition_variable async_cv_;
  std::deque<Pending> async_queue_;
  // Asynchronous ops issued and not yet run (queued or running): a blocking op that finds 0
  // goes on without taking the mutex (the 8-byte put is a hot path).
  std::atomic<int64_t> async_outstanding_{0};
  bool async_stop_ = false;
  std::exception_ptr async_error_;         // the first failure since the last flush
  std::atomic<bool> async_failed_{false};  // async_error_ is set: flush's lock-free look
  std::thread async_thread_;               // started by the first asynchronous op
};

using WindowPtr = std::shared_ptr<Window>;

// A tensor in memory that peers can map (a memfd): what the shm backend's windows need.
// Contents are zero. Usable with every backend and everywhere else as any tensor.
Tensor window_empty(const std::vector<int64_t>& sizes, ScalarType dtype);

}  // namespace tessera::distributed
