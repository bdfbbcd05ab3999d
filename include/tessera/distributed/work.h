// Work: the handle of one collective or point-to-point operation, and Future, its value.
//
// Contract (PyTorch's c10d Work as completed for nccl2, see docs/distributed.md):
//   - status goes NOT_STARTED -> IN_PROGRESS -> exactly one of COMPLETED, TIMED_OUT, ERROR.
//     The terminal status and its exception are published exactly once: the first publisher
//     wins and every later attempt is ignored, so work that a communicator error cancelled can
//     never turn into a success afterwards.
//   - the op's timeout counts from the Work's creation, not from its start;
//   - wait(timeout) blocks until the status is terminal or `timeout` passes; it returns true
//     on success and throws the op's error otherwise. Without a timeout it waits until the
//     op's own deadline (plus a grace period for the backend to report it), then publishes
//     TIMED_OUT itself: no wait is unbounded;
//   - get_future() returns a Future completed with the op's output tensors (or its error);
//     callbacks given to Future::then run exactly once, on the thread that completes the
//     Future, or at once on the caller's thread when it is already complete.
//
// Thread-safety: every method may be called from any thread, concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/distributed/errors.h"

namespace tessera::distributed {

using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

enum class WorkStatus : uint8_t { NOT_STARTED, IN_PROGRESS, COMPLETED, TIMED_OUT, ERROR };
std::string_view work_status_name(WorkStatus s);

class Future : public std::enable_shared_from_this<Future> {
 public:
  using Callback = std::function<std::vector<Tensor>(Future&)>;

  bool completed() const;
  // Blocks until complete (at most `timeout` when given: DistTimeoutError after it) and
  // rethrows the error the Future holds.
  void wait(std::optional<Milliseconds> timeout = std::nullopt);
  // The value: waits as wait() does, then returns the tensors.
  std::vector<Tensor> value(std::optional<Milliseconds> timeout = std::nullopt);
  // Null while pending or on success.
  std::exception_ptr exception() const;
  bool has_error() const { return exception() != nullptr; }

  // A Future completed with callback(*this)'s result, or with the exception it throws. The
  // callback runs exactly once, after this Future completes (successfully or not).
  std::shared_ptr<Future> then(Callback callback);

  // Producer side: the first call to either completes the Future; later calls are ignored
  // and return false.
  bool mark_completed(std::vector<Tensor> value);
  bool set_error(std::exception_ptr error);

 private:
  bool complete(std::vector<Tensor> value, std::exception_ptr error);

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool completed_ = false;
  std::vector<Tensor> value_;
  std::exception_ptr error_;
  std::vector<std::function<void()>> callbacks_;
};

class Work {
 public:
  // `timeout` counts from now. `outputs` are the tensors the op writes (the Future's value).
  Work(std::string op_name, std::vector<Tensor> outputs, Milliseconds timeout,
       uint64_t sequence_number = 0);
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  virtual ~Work() = default;

  WorkStatus status() const { return status_.load(std::memory_order_acquire); }
  // Terminal (COMPLETED, TIMED_OUT or ERROR).
  bool is_completed() const;
  bool is_success() const { return status() == WorkStatus::COMPLETED; }
  // The error of a TIMED_OUT or ERROR work; null otherwise.
  std::exception_ptr exception() const;

  // See the contract above. Returns true on success; throws the op's error, or
  // DistTimeoutError when `timeout` passes first (the op itself keeps running then).
  bool wait(std::optional<Milliseconds> timeout = std::nullopt);
  // Made on first use (most Works are only waited for), completed at once when the op
  // already finished.
  std::shared_ptr<Future> get_future() const;
  // The output tensors (valid once completed successfully).
  const std::vector<Tensor>& result() const { return outputs_; }

  const std::string& op_name() const { return op_name_; }
  uint64_t sequence_number() const { return sequence_number_; }
  Milliseconds timeout() const { return timeout_; }
  Clock::time_point created() const { return created_; }
  // When the backend started the op and when its terminal status was published; nullopt
  // until then.
  std::optional<Clock::time_point> started_at() const { return load_time(started_ns_); }
  std::optional<Clock::time_point> finished_at() const { return load_time(finished_ns_); }
  Clock::time_point deadline() const { return created_ + timeout_; }

  // ---- producer side (backends) ---------------------------------------------------------
  // NOT_STARTED -> IN_PROGRESS; false when the work is already terminal. `at` is when it
  // started, for a backend that knows it without reading the clock again (now by default).
  bool mark_started();
  bool mark_started(Clock::time_point at);
  // Publishes COMPLETED unless a terminal status was published before (then returns false).
  bool mark_completed();
  // Publishes TIMED_OUT or ERROR with `error` unless a terminal status was published before.
  bool mark_failed(WorkStatus status, std::exception_ptr error);
  // Called once when wait() gives up on the backend after the deadline (it publishes
  // TIMED_OUT first); backends use it to abort the communicator.
  void set_on_stuck(std::function<void(const std::exception_ptr&)> fn);
  // Called (at most once, by the first waiter, in its thread) when wait() finds the work
  // not completed: a backend whose progress thread is idle runs the op there, saving two
  // thread hand-offs on small ops. It must return promptly when it cannot.
  void set_run_inline(std::function<void()> fn);

 private:
  bool publish(WorkStatus status, std::exception_ptr error);
  static std::optional<Clock::time_point> load_time(const std::atomic<int64_t>& ns);
  static void store_now(std::atomic<int64_t>& ns);

  const std::string op_name_;
  const std::vector<Tensor> outputs_;
  const Milliseconds timeout_;
  const uint64_t sequence_number_;
  const Clock::time_point created_;
  std::atomic<WorkStatus> status_{WorkStatus::NOT_STARTED};
  std::atomic<int64_t> started_ns_{0}, finished_ns_{0};  // Clock ticks; 0: not yet
  // publish() runs without the mutex (most Works are published with nobody waiting): the
  // first publisher claims the Work, writes error_ and then the status. Waiters on cv_ and a
  // Future made by get_future() announce themselves first (waiters_, has_future_), so the
  // publisher either sees them and notifies, or they see the status.
  std::atomic<bool> claimed_{false};
  std::atomic<int> waiters_{0};
  mutable std::atomic<bool> has_future_{false};
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::exception_ptr error_;  // written once, before the terminal status
  std::function<void(const std::exception_ptr&)> on_stuck_;
  std::function<void()> run_inline_;
  mutable std::shared_ptr<Future> future_;  // guarded by mutex_; null until get_future()
};

using WorkPtr = std::shared_ptr<Work>;

// A Work that is already COMPLETED (ops with nothing to do, e.g. on non-members).
WorkPtr completed_work(std::string op_name, std::vector<Tensor> outputs = {});
// Finishes `outer` when `inner` finishes: with inner's TIMED_OUT/ERROR and its error, or, on
// success, after `then` ran (an exception from it fails outer with ERROR). For Works that
// stand for a backend op plus some work of their own (a copy back, a deferred start).
void complete_after(const WorkPtr& outer, const WorkPtr& inner, std::function<void()> then = {});

}  // namespace tessera::distributed
