// Collective hooks (on ProcessGroup) and abort hooks (on Backend), as c10d's Hooks.hpp.
//
// A pre hook runs on the calling thread just before a ProcessGroup hands an op to its
// backend; the post hook runs right after, with the Work the backend returned (or, when the
// backend refused the op by throwing, with no Work and that error, which then propagates to
// the caller). The two calls of one op share its op_id. Hooks see every op of every backend,
// because they fire in ProcessGroup, not in the backends.
//
// Sequence numbers: a group numbers its collectives 1, 2, 3, ... and, separately, its
// point-to-point ops; an op's args carry both counters as they stand after the op was counted
// (a collective's p2p_seq_id is the number of p2p ops issued before it, and vice versa).
// Every rank counts the same collectives, so equal collective_seq_ids on two ranks name the
// same collective. Ops that fail argument checks are counted too.
//
// A hook that throws: the exception propagates to the caller of the op. From a pre hook, the
// op is not issued and the post hooks run with that error and no Work (so every op whose pre
// hooks ran gets its post hooks exactly once). Hooks must not call ops of the same group.
//
// Registration returns a HookHandle; handle.remove() unregisters the hook (idempotent; also
// after the group is gone). Dropping a handle does not remove its hook.
//
// Thread-safety: hooks may be registered and removed from any thread while ops run; an op
// runs the hooks that were registered when it started. Hooks run on the thread that issues
// the op, so hooks that share state must synchronise it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/distributed/types.h"
#include "tessera/distributed/work.h"

namespace tessera::distributed {

// A tensor's shape and dtype, as the hooks and the Flight Recorder see it (an undefined
// tensor: no sizes, dtype Undefined).
struct TensorMeta {
  std::vector<int64_t> sizes;
  ScalarType dtype = kFloat32;
};

struct PreHookArgs {
  uint64_t op_id = 0;       // unique in this process; the post hook gets the same
  std::string op_name;      // torch.distributed's name: "all_reduce", "send", ...
  std::string group_name;   // the ProcessGroup's name ("default", "group1", ...)
  uint64_t generation = 0;  // the group's reconfigure generation (0: never reconfigured)
  bool is_p2p = false;
  uint64_t collective_seq_id = 0;
  uint64_t p2p_seq_id = 0;
  std::vector<TensorMeta> inputs, outputs;
  bool async_op = true;
  int64_t root = -1;                  // root (or peer, for send/recv) as a group rank; -1: none
  int64_t tag = 0;                    // send/recv's tag
  std::optional<ReduceOp> reduce_op;  // for reducing ops
  Milliseconds timeout{0};            // the op's timeout (its own or the group's)
  // The sequence number of this op within its kind (collective or p2p).
  uint64_t seq_id() const { return is_p2p ? p2p_seq_id : collective_seq_id; }
};

struct PostHookArgs {
  const PreHookArgs& pre;
  WorkPtr work;              // null when the backend threw
  std::exception_ptr error;  // what the backend threw (null when it returned a Work)
};

using PreHook = std::function<void(const PreHookArgs&)>;
using PostHook = std::function<void(const PostHookArgs&)>;
// Runs once, on the thread that aborts the communicator, with the abort's reason, after the
// pending Works have been failed.
using AbortHook = std::function<void(const std::string& reason)>;

namespace detail {
// A list of hooks, copied on write: an op takes a snapshot (a shared_ptr copy under the mutex)
// and runs it without holding a lock.
template <class Fn>
class HookList {
 public:
  using Entries = std::vector<std::pair<uint64_t, Fn>>;
  using Snapshot = std::shared_ptr<const Entries>;

  uint64_t add(Fn fn) {
    std::lock_guard lock(mutex_);
    auto next = std::make_shared<Entries>(*hooks_);
    next->emplace_back(++next_id_, std::move(fn));
    hooks_ = std::move(next);
    size_.store(hooks_->size(), std::memory_order_release);
    return next_id_;
  }
  bool remove(uint64_t id) {
    std::lock_guard lock(mutex_);
    auto next = std::make_shared<Entries>(*hooks_);
    const auto before = next->size();
    std::erase_if(*next, [&](const auto& e) { return e.first == id; });
    if (next->size() == before) return false;
    hooks_ = std::move(next);
    size_.store(hooks_->size(), std::memory_order_release);
    return true;
  }
  Snapshot snapshot() const {
    std::lock_guard lock(mutex_);
    return hooks_;
  }
  // Without a lock: ops check it first, so a group without hooks pays one atomic load.
  bool empty() const { return size_.load(std::memory_order_acquire) == 0; }

 private:
  mutable std::mutex mutex_;
  Snapshot hooks_ = std::make_shared<const Entries>();
  std::atomic<size_t> size_{0};
  uint64_t next_id_ = 0;
};

// A handle whose remove() unregisters hook `id` from `list` while the list lives.
template <class Fn>
std::function<bool()> remover(const std::shared_ptr<HookList<Fn>>& list, uint64_t id) {
  return [weak = std::weak_ptr<HookList<Fn>>(list), id] {
    auto l = weak.lock();
    return l && l->remove(id);
  };
}
}  // namespace detail

class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<bool()> remover) : remover_(std::move(remover)) {}
  // Unregisters the hook; true when this call removed it.
  bool remove() { return remover_ && remover_(); }

 private:
  std::function<bool()> remover_;
};

}  // namespace tessera::distributed
