// Backend's defaults: an op a backend does not implement says so.
#include "tessera/distributed/backend.h"

#include <cstdio>

namespace tessera::distributed {

Backend::Backend(int rank, int size) : rank_(rank), size_(size) {
  TS_CHECK(size >= 1, ValueError, "Backend(): world size must be positive, but got {}", size);
  TS_CHECK(rank >= 0 && rank < size, ValueError, "Backend(): rank must be in [0, {}), but got {}",
           size, rank);
}

void Backend::not_implemented(const char* op) const {
  TS_THROW(NotImplementedError, "{}(): the '{}' backend does not implement this op", op, name());
}

std::string Backend::reconfigure_handle() const {
  TS_THROW(distributed::DistBackendError,
           "reconfigure_handle(): the '{}' backend cannot reconfigure (supports_reconfigure() is "
           "false; shm and gloo can, when made with enable_reconfigure)",
           name());
}

WorkPtr Backend::reconfigure(const ReconfigureOptions&) {
  TS_THROW(distributed::DistBackendError,
           "reconfigure(): the '{}' backend cannot reconfigure (supports_reconfigure() is false; "
           "shm and gloo can, when made with enable_reconfigure)",
           name());
}

void Backend::suspend() {
  TS_THROW(NotImplementedError,
           "suspend(): the '{}' backend cannot suspend (it does not override Backend::suspend; "
           "the built-in backends do)",
           name());
}
void Backend::resume() {
  TS_THROW(NotImplementedError,
           "resume(): the '{}' backend cannot suspend (it does not override Backend::resume; the "
           "built-in backends do)",
           name());
}
MemoryStats Backend::memory_stats() const {
  TS_THROW(NotImplementedError,
           "memory_stats(): the '{}' backend does not report its memory (it does not override "
           "Backend::memory_stats; the built-in backends do)",
           name());
}

std::shared_ptr<Window> Backend::new_window() {
  TS_THROW(distributed::DistBackendError,
           "new_window(): backend '{}' does not support RMA windows (use shm or mpi)", name());
}

HookHandle Backend::register_abort_hook(AbortHook hook) {
  TS_CHECK(hook != nullptr, ValueError, "register_abort_hook(): argument 'hook' must not be empty");
  return HookHandle(detail::remover(abort_hooks_, abort_hooks_->add(std::move(hook))));
}

void Backend::run_abort_hooks(const std::string& reason) {
  for (const auto& [id, hook] : *abort_hooks_->snapshot()) {
    try {
      hook(reason);
    } catch (const std::exception& e) {
      const std::string msg =
          fmt::format("tessera: the abort hook #{} of a '{}' backend (rank {}) threw: {}\n", id,
                      name(), rank(), e.what());
      std::fputs(msg.c_str(), stderr);
    }
  }
}

WorkPtr Backend::allreduce(const Tensor&, const AllreduceOptions&) {
  not_implemented("all_reduce");
}
WorkPtr Backend::broadcast(const Tensor&, const BroadcastOptions&) {
  not_implemented("broadcast");
}
WorkPtr Backend::reduce(const Tensor&, const ReduceOptions&) {
  not_implemented("reduce");
}
WorkPtr Backend::allgather(const std::vector<Tensor>&, const Tensor&, const AllgatherOptions&) {
  not_implemented("all_gather");
}
WorkPtr Backend::allgather_into_tensor(const Tensor&, const Tensor&, const AllgatherOptions&) {
  not_implemented("all_gather_into_tensor");
}
WorkPtr Backend::gather(const std::vector<Tensor>&, const Tensor&, const GatherOptions&) {
  not_implemented("gather");
}
WorkPtr Backend::scatter(const Tensor&, const std::vector<Tensor>&, const ScatterOptions&) {
  not_implemented("scatter");
}
WorkPtr Backend::reduce_scatter(const Tensor&, const std::vector<Tensor>&,
                                const ReduceScatterOptions&) {
  not_implemented("reduce_scatter");
}
WorkPtr Backend::reduce_scatter_tensor(const Tensor&, const Tensor&, const ReduceScatterOptions&) {
  not_implemented("reduce_scatter_tensor");
}
WorkPtr Backend::alltoall_base(const Tensor&, const Tensor&, const std::vector<int64_t>&,
                               const std::vector<int64_t>&, const AllToAllOptions&) {
  not_implemented("all_to_all_single");
}
WorkPtr Backend::barrier(const BarrierOptions&) {
  not_implemented("barrier");
}
WorkPtr Backend::send(const Tensor&, int, const SendRecvOptions&) {
  not_implemented("send");
}
WorkPtr Backend::recv(const Tensor&, int, const SendRecvOptions&) {
  not_implemented("recv");
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return "SUM";
    case ReduceOp::AVG:
      return "AVG";
    case ReduceOp::PRODUCT:
      return "PRODUCT";
    case ReduceOp::MIN:
      return "MIN";
    case ReduceOp::MAX:
      return "MAX";
    case ReduceOp::BAND:
      return "BAND";
    case ReduceOp::BOR:
      return "BOR";
    case ReduceOp::BXOR:
      return "BXOR";
  }
  return "?";
}

}  // namespace tessera::distributed
