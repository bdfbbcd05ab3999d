// Work and Future: status published exactly once, callbacks run exactly once.
#include "tessera/distributed/work.h"

#include <thread>

#include <fmt/chrono.h>

#include <algorithm>

namespace tessera::distributed {

std::string_view work_status_name(WorkStatus s) {
  switch (s) {
    case WorkStatus::NOT_STARTED:
      return "NOT_STARTED";
    case WorkStatus::IN_PROGRESS:
      return "IN_PROGRESS";
    case WorkStatus::COMPLETED:
      return "COMPLETED";
    case WorkStatus::TIMED_OUT:
      return "TIMED_OUT";
    case WorkStatus::ERROR:
      return "ERROR";
  }
  return "?";
}

// ---- Future ----------------------------------------------------------------------------------

bool Future::completed() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

std::exception_ptr Future::exception() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Future::wait(std::optional<Milliseconds> timeout) {
  std::unique_lock lock(mutex_);
  if (timeout) {
    TS_CHECK(cv_.wait_for(lock, *timeout, [&] { return completed_; }),
             distributed::DistTimeoutError, "Future.wait(): not completed within the timeout of {}",
             *timeout);
  } else {
    cv_.wait(lock, [&] { return completed_; });
  }
  if (error_) std::rethrow_exception(error_);
}

std::vector<Tensor> Future::value(std::optional<Milliseconds> timeout) {
  wait(timeout);
  std::lock_guard lock(mutex_);
  return value_;
}

bool Future::mark_completed(std::vector<Tensor> value) {
  return complete(std::move(value), nullptr);
}

bool Future::set_error(std::exception_ptr error) {
  TS_CHECK(error != nullptr, ValueError, "Future.set_error(): argument 'error' must not be null");
  return complete({}, std::move(error));
}

bool Future::complete(std::vector<Tensor> value, std::exception_ptr error) {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard lock(mutex_);
    if (completed_) return false;
    completed_ = true;
    value_ = std::move(value);
    error_ = std::move(error);
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& cb : callbacks) cb();  // outside the lock: a callback may use this Future
  return true;
}

std::shared_ptr<Future> Future::then(Callback callback) {
  TS_CHECK(callback != nullptr, ValueError, "Future.then(): argument 'callback' must not be empty");
  auto child = std::make_shared<Future>();
  auto self = shared_from_this();
  auto run = [self, child, cb = std::move(callback)] {
    try {
      child->mark_completed(cb(*self));
    } catch (...) {
      child->set_error(std::current_exception());
    }
  };
  {
    std::lock_guard lock(mutex_);
    if (!completed_) {
      callbacks_.push_back(std::move(run));
      return child;
    }
  }
  run();
  return child;
}

// ---- Work ------------------------------------------------------------------------------------

Work::Work(std::string op_name, std::vector<Tensor> outputs, Milliseconds timeout,
           uint64_t sequence_number)
    : op_name_(std::move(op_name)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      sequence_number_(sequence_number),
      created_(Clock::now()) {
  TS_CHECK(timeout.count() > 0, ValueError, "{}: argument 'timeout' must be positive, but got {}",
           op_name_, timeout);
}

namespace {
bool terminal(WorkStatus s) {
  return s == WorkStatus::COMPLETED || s == WorkStatus::TIMED_OUT || s == WorkStatus::ERROR;
}
}  // namespace

bool Work::is_completed() const {
  return terminal(status());
}

std::exception_ptr Work::exception() const {
  return is_completed() ? error_ : nullptr;  // error_ is written before the status
}

std::optional<Clock::time_point> Work::load_time(const std::atomic<int64_t>& ns) {
  const int64_t v = ns.load(std::memory_order_acquire);
  if (v == 0) return std::nullopt;
  return Clock::time_point(Clock::duration(v));
}

void Work::store_now(std::atomic<int64_t>& ns) {
  ns.store(std::max<int64_t>(1, Clock::now().time_since_epoch().count()),
           std::memory_order_release);
}

bool Work::mark_started() {
  return mark_started(Clock::now());
}

bool Work::mark_started(Clock::time_point at) {
  WorkStatus expected = WorkStatus::NOT_STARTED;
  if (!status_.compare_exchange_strong(expected, WorkStatus::IN_PROGRESS,
                                       std::memory_order_acq_rel))
    return false;
  started_ns_.store(std::max<int64_t>(1, at.time_since_epoch().count()), std::memory_order_release);
  return true;
}

bool Work::mark_completed() {
  return publish(WorkStatus::COMPLETED, nullptr);
}

bool Work::mark_failed(WorkStatus status, std::exception_ptr error) {
  TS_INTERNAL_ASSERT((status == WorkStatus::TIMED_OUT || status == WorkStatus::ERROR) && error);
  return publish(status, std::move(error));
}

void Work::set_on_stuck(std::function<void(const std::exception_ptr&)> fn) {
  std::lock_guard lock(mutex_);
  on_stuck_ = std::move(fn);
}

void Work::set_run_inline(std::function<void()> fn) {
  std::lock_guard lock(mutex_);
  run_inline_ = std::move(fn);
}

namespace {

// Completes `future` with the Work's outcome; a second call (publish() and get_future() may
// both get here) changes nothing, so callbacks still run once.
void complete_future(Future& future, const std::exception_ptr& error,
                     const std::vector<Tensor>& outputs) {
  if (error) {
    future.set_error(error);
  } else {
    future.mark_completed(outputs);
  }
}

}  // namespace

std::shared_ptr<Future> Work::get_future() const {
  std::lock_guard lock(mutex_);
  if (!future_) {
    future_ = std::make_shared<Future>();
    has_future_.store(true, std::memory_order_seq_cst);
    // A publish() that stored its status before has_future_ did not see the Future.
    if (terminal(status_.load(std::memory_order_seq_cst)))
      complete_future(*future_, error_, outputs_);
  }
  return future_;
}

bool Work::publish(WorkStatus status, std::exception_ptr error) {
  if (claimed_.exchange(true, std::memory_order_acq_rel)) return false;  // the first one stays
  store_now(finished_ns_);
  error_ = std::move(error);
  status_.store(status, std::memory_order_seq_cst);
  // Of this store and a waiter's or get_future()'s announcement, each side sees the other's
  // (both sequentially consistent): whoever is announced is told here.
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard lock(mutex_); }  // a waiter between its check and its sleep holds it
    cv_.notify_all();
  }
  if (has_future_.load(std::memory_order_seq_cst)) {
    std::shared_ptr<Future> future;
    {
      std::lock_guard lock(mutex_);
      future = future_;
    }
    complete_future(*future, error_, outputs_);
  }
  return true;
}

bool Work::wait(std::optional<Milliseconds> timeout) {
  if (!is_completed()) {
    std::function<void()> run_inline;
    {
      std::lock_guard lock(mutex_);
      run_inline.swap(run_inline_);
    }
    if (run_inline) run_inline();
  }
  if (is_completed()) {  // error_ is written before the status is published, never after
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  // Spin a few microseconds first: small ops finish within that, and a thread woken from the
  // condition variable takes longer to run again (tens of microseconds on a busy VM).
  const auto spin_end = Clock::now() + std::chrono::microseconds(20);
  for (int i = 1; !is_completed(); ++i) {
    std::this_thread::yield();
    if ((i & 7) == 0 && Clock::now() > spin_end) break;
  }
  // Announced before the check under the lock, so publish() either sees this waiter and
  // notifies it (taking the lock first) or this check sees the status.
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    std::atomic<int>& n;
    ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
  } leave{waiters_};
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::unique_lock lock(mutex_);
  const auto done = [&] { return is_completed(); };
  if (timeout) {
    TS_CHECK(cv_.wait_for(lock, *timeout, done), distributed::DistTimeoutError,
             "Work.wait(): {} (op #{}) did not finish within the wait timeout of {} (status {}); "
             "the op keeps running until its own timeout of {}",
             op_name_, sequence_number_, *timeout, work_status_name(status()), timeout_);
  } else {
    // The backend reports the op's timeout itself; the grace covers a progress thread that
    // is busy with a long copy when the deadline passes.
    const auto grace = std::chrono::seconds(2) + timeout_ / 10;
    if (!cv_.wait_until(lock, deadline() + grace, done)) {
      auto error = std::make_exception_ptr(DistTimeoutError(fmt::format(
          "{} (op #{}) timed out: not finished {} after its creation (timeout {}), and the "
          "backend did not report it",
          op_name_, sequence_number_,
          std::chrono::duration_cast<Milliseconds>(Clock::now() - created_), timeout_)));
      auto on_stuck = on_stuck_;
      lock.unlock();
      publish(WorkStatus::TIMED_OUT, error);  // published before the abort it triggers
      if (on_stuck) on_stuck(error);
      lock.lock();
    }
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

WorkPtr completed_work(std::string op_name, std::vector<Tensor> outputs) {
  auto work = std::make_shared<Work>(std::move(op_name), std::move(outputs), Milliseconds(1));
  work->mark_started();
  work->mark_completed();
  return work;
}

void complete_after(const WorkPtr& outer, const WorkPtr& inner, std::function<void()> then) {
  inner->get_future()->then([outer, inner, then = std::move(then)](Future& f) {
    if (f.has_error()) {
      outer->mark_failed(
          inner->status() == WorkStatus::TIMED_OUT ? WorkStatus::TIMED_OUT : WorkStatus::ERROR,
          f.exception());
      return std::vector<Tensor>{};
    }
    try {
      if (then) then();
      outer->mark_completed();
    } catch (...) {
      outer->mark_failed(WorkStatus::ERROR, std::current_exception());
    }
    return std::vector<Tensor>{};
  });
}

std::string exception_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace tessera::distributed
