// ForwardingBackend: a Backend that hands every op to another backend (forward_to()); the
// lazy, hierarchical and reconfigurable backends derive from it and override the ops they run
// their own way. forward_to() hands out a shared pointer, so the backend it names stays alive
// for the call even when another thread replaces it meanwhile (a reconfigure).
#pragma once

#include "tessera/distributed/backend.h"

namespace tessera::distributed {

class ForwardingBackend : public Backend {
 public:
  using Backend::Backend;

  WorkPtr allreduce(const Tensor& t, const AllreduceOptions& o) override {
    return forward_to()->allreduce(t, o);
  }
  WorkPtr broadcast(const Tensor& t, const BroadcastOptions& o) override {
    return forward_to()->broadcast(t, o);
  }
  WorkPtr reduce(const Tensor& t, const ReduceOptions& o) override {
    return forward_to()->reduce(t, o);
  }
  WorkPtr allgather(const std::vector<Tensor>& out, const Tensor& in,
                    const AllgatherOptions& o) override {
    return forward_to()->allgather(out, in, o);
  }
  WorkPtr allgather_into_tensor(const Tensor& out, const Tensor& in,
                                const AllgatherOptions& o) override {
    return forward_to()->allgather_into_tensor(out, in, o);
  }
  WorkPtr gather(const std::vector<Tensor>& out, const Tensor& in,
                 const GatherOptions& o) override {
    return forward_to()->gather(out, in, o);
  }
  WorkPtr scatter(const Tensor& out, const std::vector<Tensor>& in,
                  const ScatterOptions& o) override {
    return forward_to()->scatter(out, in, o);
  }
  WorkPtr reduce_scatter(const Tensor& out, const std::vector<Tensor>& in,
                         const ReduceScatterOptions& o) override {
    return forward_to()->reduce_scatter(out, in, o);
  }
  WorkPtr reduce_scatter_tensor(const Tensor& out, const Tensor& in,
                                const ReduceScatterOptions& o) override {
    return forward_to()->reduce_scatter_tensor(out, in, o);
  }
  WorkPtr alltoall_base(const Tensor& out, const Tensor& in, const std::vector<int64_t>& out_splits,
                        const std::vector<int64_t>& in_splits, const AllToAllOptions& o) override {
    return forward_to()->alltoall_base(out, in, out_splits, in_splits, o);
  }
  WorkPtr barrier(const BarrierOptions& o) override { return forward_to()->barrier(o); }
  WorkPtr send(const Tensor& t, int dst, const SendRecvOptions& o) override {
    return forward_to()->send(t, dst, o);
  }
  WorkPtr recv(const Tensor& t, int src, const SendRecvOptions& o) override {
    return forward_to()->recv(t, src, o);
  }

 protected:
  virtual BackendPtr forward_to() = 0;
};

}  // namespace tessera::distributed
