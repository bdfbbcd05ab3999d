// ShmBackend: front end, queue and progress thread. See shm_backend.h.
#include "distributed/backends/shm/shm_backend.h"

#include <fmt/chrono.h>

#include <algorithm>
#include <cstdlib>

#include "distributed/backends/reduce.h"

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

bool single_copy_from(std::optional<bool> given) {
  if (given) return *given;
  const char* env = std::getenv("TESSERA_SHM_SINGLE_COPY");
  if (!env || !*env) return true;
  const std::string v = env;
  TS_CHECK(v == "0" || v == "1", ValueError,
           "shm backend: TESSERA_SHM_SINGLE_COPY must be 0 or 1, but got '{}'", v);
  return v == "1";
}

}  // namespace

ShmBackend::ShmBackend(const StorePtr& store, int rank, int size, Milliseconds timeout,
                       const ShmOptions& options)
    : OpBackend(rank, size),
      timeout_(timeout),
      group_name_(options.group_name),
      store_(store),
      buffer_bytes_(buffer_bytes_from(options.buffer_bytes, size)),
      ring_bytes_(options.ring_bytes),
      single_copy_(single_copy_from(options.single_copy)),
      light_publish_(options.light_publish.value_or(true) && light_publish_supported()) {
  TS_CHECK(store != nullptr, ValueError, "shm backend: argument 'store' must not be null");
  TS_CHECK(timeout.count() > 0, ValueError,
           "shm backend: argument 'timeout' must be positive, but got {}", timeout);
  TS_CHECK(options.ring_bytes >= 4096 && options.ring_bytes <= (1ull << 30), ValueError,
           "shm backend: option 'ring_bytes' must be in [4096, 1073741824], but got {}",
           options.ring_bytes);
  auto segment =
      Segment::rendezvous(*store, rank, size, buffer_bytes_, ring_bytes_,
                          Clock::now() + options.connect_timeout.value_or(timeout), light_publish_);
  segment_bytes_ = segment->bytes();
  comm_ = std::make_unique<Communicator>(std::move(segment), rank, group_name_, single_copy_);
  progress_ = std::thread([this] { progress_loop(); });
}

ShmBackend::~ShmBackend() {
  try {
    shutdown();
  } catch (...) {  // a destructor must not throw; shutdown's errors are on the Works
  }
}

// ---- front end -------------------------------------------------------------------------------

WorkPtr ShmBackend::enqueue(Op&& op, std::vector<Tensor>&& outputs,
                            std::optional<Milliseconds> timeout) {
  const bool collective = op.kind != OpKind::SEND && op.kind != OpKind::RECV;
  bool direct = false;
  WorkPtr work;
  {
    std::lock_guard lock(mutex_);
    work = new_work(op, std::move(outputs), timeout, timeout_, group_name_, next_seq_, stopping_,
                    error_, suspended_);
    if (error_) return work;
    // A collective its caller waits for at once, issued while nothing is ahead of it, runs
    // here and now: the caller would only wait for it anyway. No queue entry, no hand-off.
    direct = collective && op.caller_waits && driver_ == Driver::kNone && queue_.empty();
    if (direct) {
      driver_ = Driver::kCaller;
      current_ = work;
    } else {
      queue_.push_back({std::move(op), work});
    }
  }
  if (direct) {
    work->mark_started(work->created());  // issued and started in this call
    run_taken(op, work);
    return work;
  }
  // A Work whose wait() gives up on a stuck progress thread aborts the communicator.
  work->set_on_stuck([this](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      abort(ex.what());
    }
  });
  if (collective) work->set_run_inline([this, w = work.get()] { run_inline(w); });
  // A collective its caller waits for at once is left for that wait (run_inline), which
  // rings when it cannot take the op: waking the progress thread would cost more than a
  // small op and would make it race the caller for the queue.
  if (!(collective && op.caller_waits)) wake_progress();
  return work;
}

void ShmBackend::wake_progress() {
  bell_.ring();
  std::lock_guard lock(mutex_);
  if (comm_) comm_->wake_self();  // null only while suspended (or a suspend() raced an op)
}

// ---- progress thread -------------------------------------------------------------------------

void ShmBackend::run_inline(const Work* work) {
  Entry e;
  {
    std::unique_lock lock(mutex_);
    if (driver_ != Driver::kNone || error_ || stopping_ || queue_.empty() ||
        queue_.front().work.get() != work) {
      lock.unlock();
      // The progress thread runs it (an op its caller waits for did not ring). It may be
      // asleep on either bell: on the shared doorbell while sends or recvs are posted.
      wake_progress();
      return;
    }
    e = std::move(queue_.front());
    queue_.pop_front();
    driver_ = Driver::kCaller;
    current_ = e.work;
  }
  run_taken(e.op, e.work);
}

void ShmBackend::run_taken(const Op& op, const WorkPtr& work) {
  run_front(op, work);  // publishes the Work's status; never throws
  bool queued = false;
  {
    std::lock_guard lock(mutex_);
    driver_ = Driver::kNone;
    current_.reset();
    queued = !queue_.empty();
  }
  if (queued) bell_.ring();  // for ops queued meanwhile (the progress thread left them to us)
}

void ShmBackend::progress_loop() {
  for (;;) {
    // Read before looking at the queue, so a ring after the look is never lost.
    const uint32_t seen = comm_->doorbell();
    const uint32_t bell_seen = bell_.value();
    std::exception_ptr error;
    {
      std::unique_lock lock(mutex_);
      if (driver_ == Driver::kCaller) {  // it rings when done, if anything is queued
        lock.unlock();
        bell_.sleep(bell_seen, kSliceNs);
        continue;
      }
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
      // suspend() checked that no send or recv was pending and ran a barrier: nothing is left.
      if (suspended_ && collectives_.empty() && p2p_.empty()) return;
      driver_ = collectives_.empty() && p2p_.empty() ? Driver::kNone : Driver::kProgress;
    }
    if (error) {
      bell_.sleep(bell_seen, 100'000'000);
      continue;
    }
    try {
      if (!collectives_.empty()) {
        Entry e = std::move(collectives_.front());
        collectives_.pop_front();
        {
          std::lock_guard lock(mutex_);
          current_ = e.work;
        }
        run_front(e.op, e.work);
        {
          std::lock_guard lock(mutex_);
          current_.reset();
        }
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
    // Posted sends and recvs move when a peer rings the shared doorbell, and their deadlines
    // are checked every slice. With none, only this rank's callers (and aborts) ring.
    if (p2p_.empty()) {
      bell_.sleep(bell_seen, 100'000'000);
    } else {
      comm_->sleep(seen, kSliceNs);
    }
  }
}

void ShmBackend::run_front(const Op& op, const WorkPtr& work) {
  // Started already when the caller took the op in enqueue(); else now. One clock read at
  // most (value_or(Clock::now()) read it every time): ~20 ns each on a VM, beside ~700 ns for
  // an 8-byte all_reduce on 2 ranks.
  std::optional<Clock::time_point> started = work->started_at();
  if (!started) {
    started = Clock::now();
    work->mark_started(*started);
  }
  try {
    TS_CHECK(*started < op.deadline, distributed::DistTimeoutError,
             "shm {} (op #{} of group '{}'): timed out after {} before it could start (earlier "
             "ops took the time)",
             op_kind_name(op.kind), op.seq, group_name_, op.timeout);
    comm_->run_collective(op);
    work->mark_completed();
  } catch (const MismatchError&) {
    work->mark_failed(WorkStatus::ERROR, std::current_exception());
  } catch (const DistTimeoutError&) {
    fail_and_abort(work, WorkStatus::TIMED_OUT, std::current_exception());
  } catch (...) {
    fail_and_abort(work, WorkStatus::ERROR, std::current_exception());
  }
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
  abort(exception_message(error));
}

void ShmBackend::abort(const std::string& reason) {
  std::vector<WorkPtr> works;
  {
    std::lock_guard lock(mutex_);
    if (error_) return;
    error_ = std::make_exception_ptr(DistBackendError(
        fmt::format("shm group '{}' (rank {}) was aborted: {}", group_name_, rank_, reason)));
    ended_.store(true, std::memory_order_release);
    if (current_) works.push_back(current_);
    for (auto& e : queue_) works.push_back(e.work);
  }
  // In-flight and queued work fails before the communicator is torn down, so none of it can
  // complete successfully afterwards. (The progress thread fails what it holds itself.)
  for (auto& w : works) w->mark_failed(WorkStatus::ERROR, error_);
  if (comm_) comm_->abort(reason);  // null while suspended: there is nobody to tell
  wake_progress();
  run_abort_hooks(reason);
}

void ShmBackend::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !progress_.joinable()) return;
    stopping_ = true;
    ended_.store(true, std::memory_order_release);
  }
  wake_progress();
  if (progress_.joinable()) progress_.join();  // every queued op is bounded by its deadline
  std::lock_guard lock(mutex_);
  if (!error_ && comm_) comm_->detach();
}

void ShmBackend::suspend() {
  check_no_pending_p2p(group_name_);
  // Every rank's earlier ops finish before anyone lets go of the segment.
  barrier(BarrierOptions{})->wait();
  {
    std::lock_guard lock(mutex_);
    TS_CHECK(!suspended_, distributed::DistBackendError,
             "suspend(): shm group '{}' (rank {}) is suspended already", group_name_, rank_);
    if (error_) std::rethrow_exception(error_);
    suspended_ = true;  // from now on ops are refused
  }
  wake_progress();
  if (progress_.joinable()) progress_.join();
  std::lock_guard lock(mutex_);
  comm_.reset();  // unmaps: the memory goes once every rank has let go
  ++suspend_count_;
}

void ShmBackend::resume() {
  uint64_t round = 0;
  {
    std::lock_guard lock(mutex_);
    TS_CHECK(suspended_, distributed::DistBackendError,
             "resume(): shm group '{}' (rank {}) is not suspended", group_name_, rank_);
    TS_CHECK(!stopping_, distributed::DistBackendError,
             "resume(): shm group '{}' (rank {}) was shut down", group_name_, rank_);
    round = suspend_count_;
  }
  auto store = std::make_shared<PrefixStore>(fmt::format("resume/{}", round), store_);
  auto segment = Segment::rendezvous(*store, rank_, size_, buffer_bytes_, ring_bytes_,
                                     Clock::now() + timeout_, light_publish_);
  comm_ = std::make_unique<Communicator>(std::move(segment), rank_, group_name_, single_copy_);
  {
    std::lock_guard lock(mutex_);
    suspended_ = false;
  }
  progress_ = std::thread([this] { progress_loop(); });
}

MemoryStats ShmBackend::memory_stats() const {
  std::lock_guard lock(mutex_);
  MemoryStats s;
  s.total_bytes = segment_bytes_;
  s.held_bytes = suspended_ ? 0 : segment_bytes_;
  s.released_bytes = suspended_ ? segment_bytes_ : 0;
  s.suspended = suspended_;
  s.suspend_count = suspend_count_;
  return s;
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
