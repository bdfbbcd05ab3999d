// ProcessGroup: rank translation and forwarding to the backend.
#include "tessera/distributed/process_group.h"

#include <algorithm>

namespace tessera::distributed {

ProcessGroup::ProcessGroup(std::string name, std::vector<int> global_ranks, int my_global_rank,
                           BackendPtr backend, Milliseconds timeout)
    : name_(std::move(name)),
      global_ranks_(std::move(global_ranks)),
      my_global_rank_(my_global_rank),
      backend_(std::move(backend)),
      timeout_(timeout) {}

Backend& ProcessGroup::backend() const {
  TS_CHECK(backend_ != nullptr, ValueError,
           "process group '{}' (ranks {}): global rank {} is not a member, so it cannot use the "
           "group",
           name_, fmt::join(global_ranks_, ", "), my_global_rank_);
  return *backend_;
}

int ProcessGroup::rank() const {
  return backend().rank();
}
int ProcessGroup::size() const {
  return is_member() ? backend_->size() : static_cast<int>(global_ranks_.size());
}

int ProcessGroup::group_rank(int global_rank) const {
  const auto it = std::find(global_ranks_.begin(), global_ranks_.end(), global_rank);
  TS_CHECK(it != global_ranks_.end(), ValueError,
           "process group '{}': global rank {} is not in the group (its ranks are {})", name_,
           global_rank, fmt::join(global_ranks_, ", "));
  return static_cast<int>(it - global_ranks_.begin());
}

int ProcessGroup::global_rank(int group_rank) const {
  TS_CHECK(group_rank >= 0 && group_rank < static_cast<int>(global_ranks_.size()), ValueError,
           "process group '{}': group rank must be in [0, {}), but got {}", name_,
           global_ranks_.size(), group_rank);
  return global_ranks_[static_cast<size_t>(group_rank)];
}

WorkPtr ProcessGroup::allreduce(const Tensor& t, const AllreduceOptions& o) {
  return backend().allreduce(t, o);
}
WorkPtr ProcessGroup::broadcast(const Tensor& t, const BroadcastOptions& o) {
  return backend().broadcast(t, o);
}
WorkPtr ProcessGroup::reduce(const Tensor& t, const ReduceOptions& o) {
  return backend().reduce(t, o);
}
WorkPtr ProcessGroup::allgather(const std::vector<Tensor>& outs, const Tensor& in,
                                const AllgatherOptions& o) {
  return backend().allgather(outs, in, o);
}
WorkPtr ProcessGroup::allgather_into_tensor(const Tensor& out, const Tensor& in,
                                            const AllgatherOptions& o) {
  return backend().allgather_into_tensor(out, in, o);
}
WorkPtr ProcessGroup::gather(const std::vector<Tensor>& outs, const Tensor& in,
                             const GatherOptions& o) {
  return backend().gather(outs, in, o);
}
WorkPtr ProcessGroup::scatter(const Tensor& out, const std::vector<Tensor>& ins,
                              const ScatterOptions& o) {
  return backend().scatter(out, ins, o);
}
WorkPtr ProcessGroup::reduce_scatter(const Tensor& out, const std::vector<Tensor>& ins,
                                     const ReduceScatterOptions& o) {
  return backend().reduce_scatter(out, ins, o);
}
WorkPtr ProcessGroup::reduce_scatter_tensor(const Tensor& out, const Tensor& in,
                                            const ReduceScatterOptions& o) {
  return backend().reduce_scatter_tensor(out, in, o);
}
WorkPtr ProcessGroup::alltoall_base(const Tensor& out, const Tensor& in,
                                    const std::vector<int64_t>& out_splits,
                                    const std::vector<int64_t>& in_splits,
                                    const AllToAllOptions& o) {
  return backend().alltoall_base(out, in, out_splits, in_splits, o);
}
WorkPtr ProcessGroup::barrier(const BarrierOptions& o) {
  return backend().barrier(o);
}
WorkPtr ProcessGroup::send(const Tensor& t, int dst, const SendRecvOptions& o) {
  return backend().send(t, dst, o);
}
WorkPtr ProcessGroup::recv(const Tensor& t, int src, const SendRecvOptions& o) {
  return backend().recv(t, src, o);
}

void ProcessGroup::abort(const std::string& reason) {
  if (backend_) backend_->abort(reason);
}
void ProcessGroup::shutdown() {
  if (backend_) backend_->shutdown();
}

}  // namespace tessera::distributed
