// ShmBackend: Work creation, the op queue and the progress thread that drives a Communicator
// (the argument checks are OpBackend's).
//
// Life of an op: the caller's thread checks the arguments (errors are thrown at once, as
// PyTorch does), creates the Work and queues the op; the progress thread runs collectives one
// at a time in queue order and keeps every posted send/recv moving (also while a collective
// waits), then publishes each Work's status. A collective issued with async_op = false while
// the progress thread is idle and nothing is queued runs at once in the caller's thread, with
// no queue entry: a small op then costs no thread hand-off, only the exchange with the peers.
// One that finds work ahead of it does not wake the progress thread either; its wait runs it
// when it reaches the front (run_inline), or rings when it cannot. A caller that waits on an
// asynchronous collective while the progress thread is idle runs it itself the same way. The
// progress thread sleeps on a process-private bell while it has no send or recv posted, so the
// peers' publishes (which ring the shared doorbell for whoever waits in a collective) leave it be.
//
// Failure: a failed collective or send/recv publishes its error on its Work first, then
// aborts: the error is recorded, every queued and in-flight Work fails with it, and the
// segment tells the peers. A mismatch between ranks (MismatchError) fails only its Work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "distributed/backends/op_backend.h"
#include "distributed/backends/shm/communicator.h"
#include "tessera/distributed/shm.h"

namespace tessera::distributed::shm {

class ShmBackend : public OpBackend {
 public:
  ShmBackend(const StorePtr& store, int rank, int size, Milliseconds timeout,
             const ShmOptions& options);
  ~ShmBackend() override;

  std::string name() const override { return "shm"; }
  // RMA windows over direct loads and stores (window.cpp).
  bool supports_window() const override { return true; }
  std::shared_ptr<Window> new_window() override;

  void abort(const std::string& reason) override;
  void shutdown() override;
  std::exception_ptr error() const override;
  // Aborted or shut down (a lock-free error() != nullptr || stopping, for windows' fast path).
  bool ended() const { return ended_.load(std::memory_order_acquire); }

  // Suspend unmaps the segment and stops the progress thread; resume makes a new segment
  // through the store (under "resume/<n>/") and starts the thread again.
  void suspend() override;
  void resume() override;
  MemoryStats memory_stats() const override;

 private:
  struct Entry {
    Op op;
    WorkPtr work;
  };
  WorkPtr enqueue(Op&& op, std::vector<Tensor>&& outputs,
                  std::optional<Milliseconds> timeout) override;
  void progress_loop();
  // Wakes the progress thread wherever it sleeps (the bell, or the shared doorbell while
  // sends or recvs are posted).
  void wake_progress();
  // Runs `work` in the calling thread (Work::wait) when it is the next op, a collective, and
  // the progress thread is idle (nothing taken, no send/recv posted); else returns.
  void run_inline(const Work* work);
  // Runs `op`, taken by the calling thread (driver_ = kCaller, current_ = `work`), then
  // hands the communicator back and rings for anything queued meanwhile.
  void run_taken(const Op& op, const WorkPtr& work);
  // Runs a taken collective and publishes its Work's status (never throws); the caller made
  // it current_.
  void run_front(const Op& op, const WorkPtr& work);
  void finish_p2p(const std::vector<Communicator::P2PDone>& done);
  // Publishes `error` on `failed` (when given) first, then aborts everything else.
  void fail_and_abort(const WorkPtr& failed, WorkStatus status, std::exception_ptr error);

  const Milliseconds timeout_;
  const std::string group_name_;
  const StorePtr store_;
  const uint64_t buffer_bytes_, ring_bytes_;
  const bool single_copy_;
  const bool light_publish_;            // ShmOptions::light_publish, resolved
  std::unique_ptr<Communicator> comm_;  // null while suspended
  LocalBell bell_;
  uint64_t segment_bytes_ = 0;

  mutable std::mutex mutex_;
  std::deque<Entry> queue_;        // submitted, not yet taken by the progress thread
  std::deque<Entry> collectives_;  // progress thread only
  std::map<uint64_t, Entry> p2p_;  // progress thread only: posted sends/recvs by op number
  WorkPtr current_;                // the running collective (guarded by mutex_)
  // Who drives the communicator (guarded by mutex_): nobody, the progress thread (it holds
  // taken ops or posted sends/recvs), or a caller running its op inline.
  enum class Driver { kNone, kProgress, kCaller } driver_ = Driver::kNone;
  std::exception_ptr error_;  // set once, by the first abort
  bool stopping_ = false;
  std::atomic<bool> ended_{false};  // error_ or stopping_ set
  bool suspended_ = false;
  uint64_t suspend_count_ = 0;
  uint64_t next_seq_ = 0;
  std::thread progress_;
};

}  // namespace tessera::distributed::shm
