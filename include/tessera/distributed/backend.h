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
// abort hooks run once (hooks.h), after the error was recorded. Issue 7's
// reconfigure() will give an aborted communicator a new membership in place.
//
// Thread-safety: ops may be issued from any thread, but the order in which a rank issues
// collectives is the order they run in, so concurrent callers must agree on an order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/distributed/hooks.h"
#include "tessera/distributed/types.h"
#include "tessera/distributed/work.h"

namespace tessera::distributed {

class Window;  // window.h

// Shared ownership (enable_shared_from_this): a window keeps its backend alive.
class Backend : public std::enable_shared_from_this<Backend> {
 public:
  Backend(int rank, int size);
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
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

 protected:
  [[noreturn]] void not_implemented(const char* op) const;
  // Backends call it exactly once per abort, after recording the error. A hook that
  // throws is reported on stderr (there is no caller to give the error to); the others run.
  void run_abort_hooks(const std::string& reason);
  // Rank and size are mutable so that reconfigure (issue 7) can change the membership.
  int rank_;
  int size_;

 private:
  std::shared_ptr<detail::HookList<AbortHook>> abort_hooks_ =
      std::make_shared<detail::HookList<AbortHook>>();
};

using BackendPtr = std::shared_ptr<Backend>;

}  // namespace tessera::distributed
