// OpBackend: a Backend whose ops are checked in the caller's thread (errors are thrown at once,
// as PyTorch does) and handed to the engine as validated Ops (op.h): the shm and gloo backends.
#pragma once

#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/backends/op.h"
#include "distributed/backends/pending_p2p.h"
#include "tessera/distributed/backend.h"

namespace tessera::distributed {

class OpBackend : public Backend {
 public:
  using Backend::Backend;

  WorkPtr allreduce(const Tensor& tensor, const AllreduceOptions& opts) override;
  WorkPtr broadcast(const Tensor& tensor, const BroadcastOptions& opts) override;
  WorkPtr reduce(const Tensor& tensor, const ReduceOptions& opts) override;
  WorkPtr allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                    const AllgatherOptions& opts) override;
  WorkPtr allgather_into_tensor(const Tensor& output, const Tensor& input,
                                const AllgatherOptions& opts) override;
  WorkPtr gather(const std::vector<Tensor>& outputs, const Tensor& input,
                 const GatherOptions& opts) override;
  WorkPtr scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                  const ScatterOptions& opts) override;
  WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                         const ReduceScatterOptions& opts) override;
  WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                const ReduceScatterOptions& opts) override;
  WorkPtr alltoall_base(const Tensor& output, const Tensor& input,
                        const std::vector<int64_t>& output_splits,
                        const std::vector<int64_t>& input_splits,
                        const AllToAllOptions& opts) override;
  WorkPtr barrier(const BarrierOptions& opts) override;
  WorkPtr send(const Tensor& tensor, int dst, const SendRecvOptions& opts) override;
  WorkPtr recv(const Tensor& tensor, int src, const SendRecvOptions& opts) override;

 protected:
  // The engines' common first step of enqueue, called with the engine's lock held: numbers
  // `op` (`counter` is the engine's op count), gives it the timeout (`timeout`, else
  // `fallback`; must be positive) and the deadline, and returns its Work named
  // "<backend>:<op>". Throws DistBackendError naming `group` when `stopping` (it was shut down);
  // the
  // Work is failed at once with `error` when the communicator already failed.
  // Throws DistBackendError when `suspended` (Backend::suspend) too.
  WorkPtr new_work(Op& op, std::vector<Tensor> keep, std::optional<Milliseconds> timeout,
                   Milliseconds fallback, std::string_view group, uint64_t& counter, bool stopping,
                   const std::exception_ptr& error, bool suspended = false) const;
  // Queues a validated op and returns its Work; `keep` are the tensors the Work holds until it
  // completes (the op's outputs first). An unset timeout takes the backend's default.
  virtual WorkPtr enqueue(Op&& op, std::vector<Tensor>&& keep,
                          std::optional<Milliseconds> timeout) = 0;
  // A collective's enqueue with its options: the timeout, and whether the caller waits at once
  // (async_op = false: Op::caller_waits).
  template <class Options>
  WorkPtr submit(Op&& op, std::vector<Tensor>&& keep, const Options& opts) {
    op.caller_waits = !opts.async_op;
    return enqueue(std::move(op), std::move(keep), opts.timeout);
  }
  // suspend()'s first check: throws DistBackendError naming `group` while a send or recv this
  // rank issued has not completed.
  void check_no_pending_p2p(std::string_view group) const;
  // For backends that override send/recv: records the Work for that check.
  WorkPtr track_p2p(WorkPtr work) { return issued_p2p_.track(std::move(work)); }

 private:
  // gather's and scatter's list: on the root one tensor per rank like `like`; elsewhere empty.
  void check_root_list(std::string_view op, std::string_view arg, const std::vector<Tensor>& list,
                       const Tensor& like, int root, std::string_view role,
                       std::string_view root_arg) const;
  PendingP2P issued_p2p_;  // for check_no_pending_p2p
  // The Works' names, "<backend>:<op>" by OpKind, made at the first op (name() is virtual).
  mutable std::once_flag work_names_once_;
  mutable std::vector<std::string> work_names_;
};

}  // namespace tessera::distributed
