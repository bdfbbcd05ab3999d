// The lazy backend ("lazy"): nothing is set up when the group is made. The first send or recv
// between two ranks creates a 2-rank shm communicator for that pair (in the background: the
// op's Work is returned at once and the op is issued when the channel is up, so a ring of
// first sends cannot deadlock on set-up), and the first collective creates the full
// communicator. For pipeline-style jobs where each rank talks to few peers (the seed's
// nccl-lazy): pairs that never talk never set anything up, and sends to different peers run
// on different communicators, so they overlap.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "distributed/backends/forwarding.h"
#include "distributed/backends/pending_p2p.h"
#include "tessera/distributed/distributed.h"
#include "tessera/distributed/lazy.h"

namespace tessera::distributed {
namespace {

class LazyBackend : public ForwardingBackend {
 public:
  LazyBackend(StorePtr store, int rank, int size, Milliseconds timeout, std::string group)
      : ForwardingBackend(rank, size),
        store_(std::move(store)),
        timeout_(timeout),
        group_(std::move(group)) {}

  ~LazyBackend() override {
    try {
      shutdown();
    } catch (...) {  // errors are on the Works
    }
  }

  std::string name() const override { return "lazy"; }

  WorkPtr send(const Tensor& t, int dst, const SendRecvOptions& o) override {
    check_peer("send", "dst", dst);
    return issued_p2p_.track(on_channel(
        "send", t, dst, [t, o](Backend& b, int peer) { return b.send(t, peer, o); }, o.timeout));
  }
  WorkPtr recv(const Tensor& t, int src, const SendRecvOptions& o) override {
    check_peer("recv", "src", src);
    return issued_p2p_.track(on_channel(
        "recv", t, src, [t, o](Backend& b, int peer) { return b.recv(t, peer, o); }, o.timeout));
  }

  // Suspend suspends every communicator made so far (each releases its segment): the pair
  // channels by peer, then the full one. A channel is made by both of its ranks together, and
  // on every rank the pairs come in the same order ((lo, hi) ascending), so each pair's
  // suspend meets its peer's. Resume walks them again; channels and the full communicator
  // not made yet are still made on first use.
  void suspend() override {
    issued_p2p_.check_none(name(), group_, rank_);
    std::vector<BackendPtr> made;
    {
      std::lock_guard lock(mutex_);
      check_active_locked("suspend");
      for (const auto& [peer, c] : channels_)
        TS_CHECK(c->backend || c->failed, distributed::DistBackendError,
                 "suspend(): lazy group '{}' (rank {}) is still setting up its channel to rank "
                 "{}; wait for the ops on it first",
                 group_, rank_, peer);
      made = made_locked();
      suspended_ = true;  // from now on ops are refused
      ++suspend_count_;
    }
    for (const BackendPtr& b : made) b->suspend();
  }

  // A resume that fails (a peer that never resumes: the communicator's timeout) leaves this
  // group suspended; calling it again resumes the communicators that are still suspended.
  void resume() override {
    std::vector<BackendPtr> made;
    {
      std::lock_guard lock(mutex_);
      TS_CHECK(suspended_ && !stopping_, distributed::DistBackendError,
               "resume(): lazy group '{}' (rank {}) is not suspended", group_, rank_);
      made = made_locked();
    }
    for (const BackendPtr& b : made)
      if (b->memory_stats().suspended) b->resume();
    std::lock_guard lock(mutex_);
    suspended_ = false;
  }

  // The sums over the communicators made so far.
  MemoryStats memory_stats() const override {
    std::vector<BackendPtr> made;
    MemoryStats s;
    {
      std::lock_guard lock(mutex_);
      made = made_locked();
      s.suspended = suspended_;
      s.suspend_count = suspend_count_;
    }
    for (const BackendPtr& b : made) s.add_counts(b->memory_stats());
    return s;
  }

  void abort(const std::string& reason) override {
    std::vector<BackendPtr> made;
    {
      std::lock_guard lock(mutex_);
      if (error_) return;
      error_ = std::make_exception_ptr(DistBackendError(
          fmt::format("lazy group '{}' (rank {}) was aborted: {}", group_, rank_, reason)));
      made = made_locked();
      for (auto& [peer, c] : channels_) fail_pending_locked(*c, error_);
    }
    for (auto& b : made) b->abort(reason);
    run_abort_hooks(reason);
  }

  void shutdown() override {
    std::vector<std::thread> creators;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      for (auto& [peer, c] : channels_)
        if (c->creator.joinable()) creators.push_back(std::move(c->creator));
    }
    for (auto& t : creators) t.join();  // each is bounded by the set-up timeout
    std::vector<BackendPtr> made;
    {
      std::lock_guard lock(mutex_);
      made = made_locked();
    }
    for (auto& b : made) b->shutdown();
  }

  std::exception_ptr error() const override {
    std::lock_guard lock(mutex_);
    if (error_) return error_;
    for (const auto& b : made_locked())
      if (auto e = b->error()) return e;
    return nullptr;
  }

 private:
  using Issue = std::function<WorkPtr(Backend&, int peer)>;
  struct Pending {
    Issue issue;
    WorkPtr outer;
  };
  // The 2-rank communicator with one peer: set up by a thread of its own on first use; ops
  // that arrive meanwhile wait in `pending`, in issue order.
  struct Channel {
    BackendPtr backend;
    std::exception_ptr failed;
    std::vector<Pending> pending;
    std::thread creator;
  };

  void check_peer(const char* op, const char* arg, int peer) const {
    TS_CHECK(peer >= 0 && peer < size_, ValueError,
             "{}(): argument '{}' must be a rank in [0, {}), but got {}", op, arg, size_, peer);
    TS_CHECK(peer != rank_, ValueError,
             "{}(): argument '{}' must not be this rank ({}): the lazy backend has no channel to "
             "itself",
             op, arg, rank_);
  }

  // The pair's communicator ranks: the lower global rank is 0.
  int peer_index(int peer) const { return peer < rank_ ? 0 : 1; }

  // The communicators made so far: the channels by peer, then the full one (the order
  // suspend and resume walk them in).
  std::vector<BackendPtr> made_locked() const {
    std::vector<BackendPtr> made;
    for (const auto& [peer, c] : channels_)
      if (c->backend) made.push_back(c->backend);
    if (full_) made.push_back(full_);
    return made;
  }

  // Throws unless ops may run: not aborted, shut down or suspended.
  void check_active_locked(const char* op) const {
    if (error_) std::rethrow_exception(error_);
    TS_CHECK(!stopping_, distributed::DistBackendError, "{}(): the lazy group '{}' was shut down",
             op, group_);
    TS_CHECK(!suspended_, distributed::DistBackendError,
             "{}(): the lazy group '{}' (rank {}) is suspended; call resume() first", op, group_,
             rank_);
  }

  static void fail_pending_locked(Channel& c, const std::exception_ptr& e) {
    for (auto& p : c.pending) p.outer->mark_failed(WorkStatus::ERROR, e);
    c.pending.clear();
  }

  // Collectives go to the full communicator, made on the first one.
  BackendPtr forward_to() override {
    std::lock_guard lock(full_mutex_);  // collectives come in the same order on every rank
    {
      std::lock_guard l(mutex_);
      if (error_) std::rethrow_exception(error_);
      if (full_) return full_;  // it refuses ops itself while suspended, naming the op
      TS_CHECK(!suspended_, distributed::DistBackendError,
               "the lazy group '{}' (rank {}) is suspended; call resume() first (a collective "
               "was issued)",
               group_, rank_);
    }
    ShmOptions options;
    options.group_name = group_;
    BackendPtr b = make_shm_backend(std::make_shared<PrefixStore>("lazy/full", store_), rank_,
                                    size_, timeout_, options);
    std::lock_guard l(mutex_);
    full_ = std::move(b);
    return full_;
  }

  WorkPtr on_channel(const char* op, const Tensor& t, int peer, Issue issue,
                     std::optional<Milliseconds> timeout) {
    std::unique_lock lock(mutex_);
    check_active_locked(op);
    auto& slot = channels_[peer];
    if (!slot) slot = std::make_unique<Channel>();
    Channel& c = *slot;
    if (c.backend) {
      BackendPtr b = c.backend;
      lock.unlock();
      return issue(*b, 1 - peer_index(peer));
    }
    if (c.failed) std::rethrow_exception(c.failed);
    auto outer = std::make_shared<Work>(fmt::format("lazy:{}", op), std::vector<Tensor>{t},
                                        timeout.value_or(timeout_));
    c.pending.push_back({std::move(issue), outer});
    if (!c.creator.joinable()) c.creator = std::thread([this, peer] { create_channel(peer); });
    return outer;
  }

  void create_channel(int peer) {
    const int lo = std::min(rank_, peer), hi = std::max(rank_, peer);
    BackendPtr b;
    std::exception_ptr failed;
    try {
      ShmOptions options;
      options.group_name = fmt::format("{}/p2p{}-{}", group_, lo, hi);
      b = make_shm_backend(
          std::make_shared<PrefixStore>(fmt::format("lazy/p2p/{}-{}", lo, hi), store_),
          peer_index(peer), 2, timeout_, options);
    } catch (...) {
      failed = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    Channel& c = *channels_[peer];
    if (error_ && b) {  // aborted meanwhile: the new channel must not carry anything
      b->abort("the lazy group was aborted while this channel was set up");
      failed = error_;
    }
    if (failed) {
      c.failed = failed;
      fail_pending_locked(c, failed);
      return;
    }
    // The waiting ops go first, in issue order (issuing only queues them on the channel);
    // later ops find the channel and go straight to it.
    for (auto& p : c.pending) {
      try {
        complete_after(p.outer, p.issue(*b, 1 - peer_index(peer)));
      } catch (...) {
        p.outer->mark_failed(WorkStatus::ERROR, std::current_exception());
      }
    }
    c.pending.clear();
    c.backend = std::move(b);
  }

  const StorePtr store_;
  const Milliseconds timeout_;
  const std::string group_;
  std::mutex full_mutex_;
  mutable std::mutex mutex_;
  BackendPtr full_;
  std::map<int, std::unique_ptr<Channel>> channels_;
  std::exception_ptr error_;
  bool stopping_ = false;
  bool suspended_ = false;
  uint64_t suspend_count_ = 0;
  PendingP2P issued_p2p_;  // for suspend()'s check
};

}  // namespace

BackendPtr make_lazy_backend(const StorePtr& store, int rank, int size, Milliseconds timeout,
                             const std::string& group_name) {
  TS_CHECK(store != nullptr, ValueError, "lazy backend: argument 'store' must not be null");
  TS_CHECK(size >= 1 && rank >= 0 && rank < size, ValueError,
           "lazy backend: rank must be in [0, {}), but got {}", size, rank);
  return std::make_shared<LazyBackend>(store, rank, size, timeout, group_name);
}

}  // namespace tessera::distributed
