// ProcessGroup: a group of ranks and the backend that talks among them (c10d's ProcessGroup).
// Its ops take ranks within the group; torch.distributed-style free functions
// (distributed.h) take global ranks and translate. The group's pre/post collective hooks
// (hooks.h) attach here, so they see every op whatever the backend; the group also numbers
// its collectives and its point-to-point ops (separate counters).
//
// A rank that is not a member of a group created by new_group() holds a ProcessGroup whose
// is_member() is false; any op on it throws ValueError naming the group and the rank.
//
// Thread-safety: as the backend's (ops may come from any thread; collectives run in the order
// a rank issues them).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "tessera/distributed/backend.h"
#include "tessera/distributed/hooks.h"

namespace tessera::distributed {

class ProcessGroup {
 public:
  // `global_ranks[i]` is the global rank of group rank i. `backend` is null on non-members.
  ProcessGroup(std::string name, std::vector<int> global_ranks, int my_global_rank,
               BackendPtr backend, Milliseconds timeout);

  const std::string& name() const { return name_; }
  bool is_member() const { return backend_ != nullptr; }
  // This process's rank in the group, and the group's size (the backend's: a reconfigure
  // changes them).
  int rank() const;
  int size() const;
  // The members' global ranks in group-rank order: the list the group was made with, or,
  // after a reconfigure, the new membership's (from the members' handles).
  std::vector<int> global_ranks() const;
  // ValueError when the rank is not in the group.
  int group_rank(int global_rank) const;
  int global_rank(int group_rank) const;
  Milliseconds timeout() const { return timeout_; }
  Backend& backend() const;
  std::string backend_name() const { return is_member() ? backend_->name() : "none"; }

  WorkPtr allreduce(const Tensor& tensor, const AllreduceOptions& opts = {});
  WorkPtr broadcast(const Tensor& tensor, const BroadcastOptions& opts = {});
  WorkPtr reduce(const Tensor& tensor, const ReduceOptions& opts = {});
  WorkPtr allgather(const std::vector<Tensor>& outputs, const Tensor& input,
                    const AllgatherOptions& opts = {});
  WorkPtr allgather_into_tensor(const Tensor& output, const Tensor& input,
                                const AllgatherOptions& opts = {});
  WorkPtr gather(const std::vector<Tensor>& outputs, const Tensor& input,
                 const GatherOptions& opts = {});
  WorkPtr scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                  const ScatterOptions& opts = {});
  WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                         const ReduceScatterOptions& opts = {});
  WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                const ReduceScatterOptions& opts = {});
  WorkPtr alltoall_base(const Tensor& output, const Tensor& input,
                        const std::vector<int64_t>& output_splits,
                        const std::vector<int64_t>& input_splits, const AllToAllOptions& opts = {});
  WorkPtr barrier(const BarrierOptions& opts = {});
  WorkPtr send(const Tensor& tensor, int dst, const SendRecvOptions& opts = {});
  WorkPtr recv(const Tensor& tensor, int src, const SendRecvOptions& opts = {});

  // An RMA window over the group (window.h); every member calls it in the same order.
  std::shared_ptr<Window> new_window();

  // See Backend::abort / shutdown. No-ops on non-members.
  void abort(const std::string& reason);
  void shutdown();

  // Reconfiguration (Backend's, see backend.h): a reconfigure restarts the sequence numbers
  // below, and hooks see the generation in PreHookArgs.
  bool supports_reconfigure() const { return is_member() && backend_->supports_reconfigure(); }
  std::string reconfigure_handle() const { return backend().reconfigure_handle(); }
  WorkPtr reconfigure(const ReconfigureOptions& options);
  uint64_t generation() const { return is_member() ? backend_->generation() : 0; }

  // Collective hooks (hooks.h): they see every op issued on this group from now on.
  HookHandle register_pre_hook(PreHook hook);
  HookHandle register_post_hook(PostHook hook);
  // How many collectives and point-to-point ops this group has issued.
  uint64_t collective_seq_id() const { return collective_seq_.load(); }
  uint64_t p2p_seq_id() const { return p2p_seq_.load(); }

 private:
  // f(the members' global ranks), without copying the list the group was made with.
  template <class F>
  decltype(auto) with_ranks(F&& f) const;
  // Counts the op, runs the pre hooks, issues it with issue(backend), runs the post hooks.
  // describe(args) fills in the op's tensors, root and reduce op (called only when hooks
  // are registered).
  template <class Describe, class Issue>
  WorkPtr run_op(const char* op_name, bool is_p2p, const std::optional<Milliseconds>& timeout,
                 bool async_op, const Describe& describe, const Issue& issue);

  std::string name_;
  std::vector<int> global_ranks_;
  int my_global_rank_;
  BackendPtr backend_;
  Milliseconds timeout_;
  std::atomic<uint64_t> collective_seq_{0}, p2p_seq_{0};
  std::shared_ptr<detail::HookList<PreHook>> pre_hooks_ =
      std::make_shared<detail::HookList<PreHook>>();
  std::shared_ptr<detail::HookList<PostHook>> post_hooks_ =
      std::make_shared<detail::HookList<PostHook>>();
};

using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

}  // namespace tessera::distributed
