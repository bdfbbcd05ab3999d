// Backend: one communicator over a fixed set of ranks (c10d's Backend). Every op returns a
// Work at once and runs asynchronously; the tensors must stay alive until the Work completes
// (the Work holds them). Tensors must be contiguous CPU tensors; ops that take several tensors
// need them to share the dtype.
//
// Collective ops must be called by every rank of the communicator in the same order with
// matching arguments (sizes, dtypes, roots, reduce ops). Backends detect disagreement where
// they can and fail the op on every rank instead of reducing garbage.
//
// Failure model: an op that fails (timeout, dead or aborted peer, mismatch) publishes its
// error on its Work first, then aborts the communicator: every pending and later op fails
// with an error naming the first failure. abort() does the same on request; either way the
// abort hooks run once (hooks.h), after the error was recorded.
//
// Reconfiguration: a backend made with enable_reconfigure (the shm and gloo backends; see
// docs/fault-tolerance.md) can be given a new membership in place, after a failure or to
// grow: every new member calls reconfigure() with a fresh uuid and the new members' handles,
// and each reconfigure starts a new generation of the communicator. Its rank and size are
// then those of the new membership. Other backends refuse reconfigure() with an error.
//
// Thread-safety: ops may be issued from any thread, but the order in which a rank issues
// collectives is the order they run in, so concurrent callers must agree on an order.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/distributed/hooks.h"
#include "tessera/distributed/types.h"
#include "tessera/distributed/work.h"

namespace tessera::distributed {

// c10d's ReconfigureOptions.
struct ReconfigureOptions {
  // Fresh for every reconfigure and the same on every new member: it names the rendezvous.
  std::string uuid;
  // reconfigure_handle() of every member of the new membership, this rank's included; their
  // global ranks must differ. The members meet in the store of the smallest store address
  // among the handles (connect_store): members made on different stores (a replica's own
  // TCPStore or FileStore) join as long as each can reach that one.
  std::vector<std::string> handles;
  // True: the new ranks follow the order of `handles`. False: ranks are handed out first
  // come, first served (atomically, through the store).
  bool ordered = true;
  // Bounds the whole reconfigure (tear-down and rendezvous); unset: the backend's timeout.
  std::optional<Milliseconds> timeout;
};

// What a backend's communication buffers take (c10d's getMemoryStats), in bytes.
struct MemoryStats {
  uint64_t total_bytes = 0;     // held while active (shm: the segment)
  uint64_t held_bytes = 0;      // held now: total_bytes, or 0 while suspended
  uint64_t released_bytes = 0;  // released by the current suspension (0 while active)
  uint64_t connections = 0;     // open connections to peers now (gloo: one per peer)
  bool suspended = false;
  uint64_t suspend_count = 0;  // suspends so far

  // Adds `part`'s bytes and connections (a backend made of others reports their sums).
  void add_counts(const MemoryStats& part) {
    total_bytes += part.total_bytes;
    held_bytes += part.held_bytes;
    released_bytes += part.released_bytes;
    connections += part.connections;
  }
};

class Window;  // window.h

// Shared ownership (enable_shared_from_this): a window keeps its backend alive.
class Backend : public std::enable_shared_from_this<Backend> {
 public:
  Backend(int rank, int size);
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // Virtual so that a reconfigurable backend can change them (the others never do).
  virtual int rank() const { return rank_; }
  virtual int size() const { return size_; }
  virtual std::string name() const = 0;

  // tensor := reduce_op over ranks of tensor.
  virtual WorkPtr allreduce(const Tensor& tensor, const AllreduceOptions& opts);
  // tensor := root's tensor.
  virtual WorkPtr broadcast(const Tensor& tensor, const BroadcastOptions& opts);
  // root's tensor := reduce_op over ranks of tensor (other ranks' tensors are unchanged).
  virtual WorkPtr reduce(const Tensor& tensor, const ReduceOptions& opts);
  // outputs[r] := rank r's input; outputs.size() == size(), each like input.
  virtual WorkPtr allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                            const AllgatherOptions& opts);
  // output (size() * input.numel() elements) := the inputs of ranks 0..size()-1 in order.
  virtual WorkPtr allgather_into_tensor(const Tensor& output, const Tensor& input,
                                        const AllgatherOptions& opts);
  // On the root, outputs[r] := rank r's input; other ranks pass no outputs.
  virtual WorkPtr gather(const std::vector<Tensor>& outputs, const Tensor& input,
                         const GatherOptions& opts);
  // output := the root's inputs[rank()]; other ranks pass no inputs.
  virtual WorkPtr scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                          const ScatterOptions& opts);
  // output := reduce_op over ranks r of r's inputs[rank()].
  virtual WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                 const ReduceScatterOptions& opts);
  // output := reduce_op over ranks of the rank()-th of size() equal blocks of input.
  virtual WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                        const ReduceScatterOptions& opts);
  // Splits are element counts along dim 0 (empty: equal splits). Rank r sends rows
  // [sum(input_splits[:j]), +input_splits[j]) to rank j, which stores them at its
  // output offset sum(output_splits[:r]). Rank j's output_splits[r] must equal rank r's
  // input_splits[j]: a mismatch fails the op on every rank.
  virtual WorkPtr alltoall_base(const Tensor& output, const Tensor& input,
                                const std::vector<int64_t>& output_splits,
                                const std::vector<int64_t>& input_splits,
                                const AllToAllOptions& opts);
  virtual WorkPtr barrier(const BarrierOptions& opts);
  // Messages between two ranks with the same tag arrive in the order they were sent; a recv
  // takes the oldest message from src with its tag. Size and dtype must match the send's.
  virtual WorkPtr send(const Tensor& tensor, int dst, const SendRecvOptions& opts);
  virtual WorkPtr recv(const Tensor& tensor, int src, const SendRecvOptions& opts);

  // Fails every pending and later op with `reason` and tells the peers (they fail too).
  // Idempotent; never blocks on a peer.
  virtual void abort(const std::string& reason) = 0;
  // Waits (bounded by the default timeout) for queued ops, then releases the communicator.
  virtual void shutdown() = 0;
  // The error that aborted the communicator, or null.
  virtual std::exception_ptr error() const = 0;

  // One-sided RMA windows (window.h). new_window() is called by every rank of the
  // communicator in the same order; backends that have none throw DistBackendError.
  virtual bool supports_window() const { return false; }
  virtual std::shared_ptr<Window> new_window();

  // c10d's registerAbortHook: `hook` runs when this communicator aborts (see hooks.h).
  HookHandle register_abort_hook(AbortHook hook);

  // ---- reconfiguration (see above) ------------------------------------------------------
  virtual bool supports_reconfigure() const { return false; }
  // "<backend>:<global rank>:<instance uuid>:<store address>": what the other members pass to
  // reconfigure() to name this one. Throws unless supports_reconfigure().
  virtual std::string reconfigure_handle() const;
  // Revokes this rank's pending work (it fails with ERROR naming the reconfigure), tears down
  // the current communicator and sets up the new membership's; the Work completes when it is
  // ready. Throws at once on bad options, or unless supports_reconfigure().
  virtual WorkPtr reconfigure(const ReconfigureOptions& options);
  // How many reconfigures set up a communicator (0 for a backend that never reconfigured).
  virtual uint64_t generation() const { return 0; }
  // The members' global ranks in rank order as the last reconfigure learned them; empty
  // while generation() is 0 (the group's own list holds then).
  virtual std::vector<int> member_global_ranks() const { return {}; }
  // The uuid of the reconfigure that set up the current generation (empty for generation 0):
  // the same on every member, whichever generation count each has (a joiner counts fewer).
  virtual std::string generation_id() const { return {}; }

  // ---- suspend / resume (c10d's, for co-located training and serving) --------------------
  // suspend() releases the communication buffers (the shm segment; gloo's connections) and
  // resume() sets them up again. Both are collective: every rank calls them, at the same
  // point of its sequence of collectives. suspend() first completes a barrier, so every
  // earlier op has finished on every rank; it refuses while this rank has a send or recv
  // pending. Ops on a suspended backend throw DistBackendError; resume() is bounded by the
  // backend's timeout (on failure the backend stays suspended). Every built-in backend
  // implements them (mpi frees its communicator; lazy and hierarchical suspend the
  // communicators they are made of); a plugin that does not override them throws
  // NotImplementedError.
  virtual void suspend();
  virtual void resume();
  virtual MemoryStats memory_stats() const;

 protected:
  [[noreturn]] void not_implemented(const char* op) const;
  // Backends call it exactly once per abort, after recording the error. A hook that
  // throws is reported on stderr (there is no caller to give the error to); the others run.
  void run_abort_hooks(const std::string& reason);
  int rank_;
  int size_;

 private:
  std::shared_ptr<detail::HookList<AbortHook>> abort_hooks_ =
      std::make_shared<detail::HookList<AbortHook>>();
};

using BackendPtr = std::shared_ptr<Backend>;

}  // namespace tessera::distributed
