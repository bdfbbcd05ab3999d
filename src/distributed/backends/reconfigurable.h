// ReconfigurableBackend: what init_process_group(..., enable_reconfigure = true) makes for
// the shm and gloo backends. It forwards every op to the communicator of the current
// generation (an ordinary shm or gloo backend) and replaces that communicator in place on
// reconfigure(): the process, its threads' state and its tensors stay; only the membership
// changes.
//
// A reconfigure, in order (c10d's nccl2 contract):
//   1. checks the options in the caller's thread (a bad uuid or handle throws at once);
//   2. revokes this rank's pending work: the old communicator aborts, so queued and running
//      ops fail with ERROR naming the reconfigure, and the abort hooks run;
//   3. releases the old communicator: a reaper thread shuts it down (after the abort its
//      queued ops fail at once; a gloo collective blocked on a silent peer ends at its own
//      deadline, on private copies of its outputs, and the new generation does not wait);
//   4. bootstraps the new membership through the store, under "reconfigure/<uuid>/": the
//      rank follows the handles' order (or a store counter when unordered), every member
//      publishes its global rank, and the new communicator sets itself up there.
// Steps 3-4 run on a thread of their own; the returned Work completes when the new
// communicator is ready, or fails with the reason (then the backend has no communicator
// until the next successful reconfigure, and ops say so).
//
// abort() is graceful here: it fails the current generation's work and tells its peers, but
// the backend stays usable for a reconfigure. Ops issued while a reconfigure runs, or before
// the first one of a backend made without an initial membership, throw DistBackendError.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "distributed/backends/forwarding.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

class ReconfigurableBackend : public ForwardingBackend {
 public:
  // Makes one generation's communicator: (store namespace, rank, size, set-up timeout).
  using Factory =
      std::function<BackendPtr(const StorePtr& store, int rank, int size, Milliseconds connect)>;

  // `global_rank` names this process in handles (it stays fixed across generations).
  // With `initial_size` > 0 the first generation (0) is set up at once with rank
  // `initial_rank`; with 0 there is no communicator until the first reconfigure.
  ReconfigurableBackend(std::string backend, std::string group, StorePtr store,
                        Milliseconds timeout, Factory make, int global_rank, int initial_rank,
                        int initial_size);
  ~ReconfigurableBackend() override;

  std::string name() const override { return backend_; }
  int rank() const override { return rank_now_.load(); }
  int size() const override { return size_now_.load(); }

  bool supports_reconfigure() const override { return true; }
  std::string reconfigure_handle() const override;
  WorkPtr reconfigure(const ReconfigureOptions& options) override;
  uint64_t generation() const override { return generation_.load(); }
  std::vector<int> member_global_ranks() const override;
  std::string generation_id() const override;

  // A window of the current generation's communicator: a reconfigure ends it (its ops then fail
  // with the old communicator's error); make a new one in the new generation.
  bool supports_window() const override;
  std::shared_ptr<Window> new_window() override { return forward_to()->new_window(); }

  // The current generation's (none: nothing is held).
  void suspend() override { forward_to()->suspend(); }
  void resume() override { forward_to()->resume(); }
  MemoryStats memory_stats() const override;

  void abort(const std::string& reason) override;
  void shutdown() override;
  std::exception_ptr error() const override;

 protected:
  BackendPtr forward_to() override;

 private:
  // The handle's parts.
  struct Handle {
    std::string backend;
    int global_rank = 0;
    std::string instance;
    std::string store;
  };
  static Handle parse_handle(const std::string& text);
  // Sets up a generation's communicator and makes it current (steps 3-4; throws on failure),
  // rendezvousing in the store at address `meet`.
  void bootstrap(const ReconfigureOptions& options, const std::string& meet, BackendPtr old,
                 Clock::time_point deadline);
  void install(BackendPtr comm, int rank, int size, std::vector<int> members);

  const std::string backend_;
  const std::string group_;
  const StorePtr store_;
  const Milliseconds timeout_;
  const Factory make_;
  const int global_rank_;
  const std::string instance_;  // random, per process and backend

  std::atomic<int> rank_now_{0}, size_now_{0};
  std::atomic<uint64_t> generation_{0};

  mutable std::mutex mutex_;
  BackendPtr current_;         // null: none (before the first reconfigure, or after one failed)
  std::vector<int> members_;   // global ranks of the current generation, in rank order
  std::string reconfiguring_;  // the uuid of the running reconfigure; empty: none
  std::string generation_id_;  // the uuid of the reconfigure that made the current generation
  std::exception_ptr last_failure_;  // why the last reconfigure failed
  std::set<std::string> used_uuids_;
  std::vector<HookHandle> hooks_;     // the current communicator's abort hook
  std::thread worker_;                // the last reconfigure's steps 3-4
  std::vector<std::thread> reapers_;  // shut old generations down (joined at shutdown)
  bool stopping_ = false;
};

}  // namespace tessera::distributed
