// An out-of-tree backend as a plugin (tessera/distributed/plugin.h): "counting" runs every
// op on a shm communicator and counts the ops it forwarded, which it reports in its name.
// Build it as a shared library linked against libtessera (examples/CMakeLists.txt) and run
// any program with
//   TESSERA_BACKEND_PLUGINS=/path/to/libtessera_counting_backend.so
// (or a directory holding a manifest {"name": "counting", "library": "..."}); then
// init_process_group("counting", ...) finds it.
#include <atomic>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "tessera/distributed/distributed.h"
#include "tessera/distributed/plugin.h"

namespace {

namespace dist = tessera::distributed;
using tessera::Tensor;

class CountingBackend : public dist::Backend {
 public:
  CountingBackend(dist::BackendPtr inner, int rank, int size)
      : Backend(rank, size), inner_(std::move(inner)) {}

  std::string name() const override { return fmt::format("counting({} ops)", ops_.load()); }

  dist::WorkPtr allreduce(const Tensor& t, const dist::AllreduceOptions& o) override {
    return count(inner_->allreduce(t, o));
  }
  dist::WorkPtr broadcast(const Tensor& t, const dist::BroadcastOptions& o) override {
    return count(inner_->broadcast(t, o));
  }
  dist::WorkPtr reduce(const Tensor& t, const dist::ReduceOptions& o) override {
    return count(inner_->reduce(t, o));
  }
  dist::WorkPtr allgather(const std::vector<Tensor>& out, const Tensor& in,
                          const dist::AllgatherOptions& o) override {
    return count(inner_->allgather(out, in, o));
  }
  dist::WorkPtr allgather_into_tensor(const Tensor& out, const Tensor& in,
                                      const dist::AllgatherOptions& o) override {
    return count(inner_->allgather_into_tensor(out, in, o));
  }
  dist::WorkPtr gather(const std::vector<Tensor>& out, const Tensor& in,
                       const dist::GatherOptions& o) override {
    return count(inner_->gather(out, in, o));
  }
  dist::WorkPtr scatter(const Tensor& out, const std::vector<Tensor>& in,
                        const dist::ScatterOptions& o) override {
    return count(inner_->scatter(out, in, o));
  }
  dist::WorkPtr reduce_scatter(const Tensor& out, const std::vector<Tensor>& in,
                               const dist::ReduceScatterOptions& o) override {
    return count(inner_->reduce_scatter(out, in, o));
  }
  dist::WorkPtr reduce_scatter_tensor(const Tensor& out, const Tensor& in,
                                      const dist::ReduceScatterOptions& o) override {
    return count(inner_->reduce_scatter_tensor(out, in, o));
  }
  dist::WorkPtr alltoall_base(const Tensor& out, const Tensor& in,
                              const std::vector<int64_t>& out_splits,
                              const std::vector<int64_t>& in_splits,
                              const dist::AllToAllOptions& o) override {
    return count(inner_->alltoall_base(out, in, out_splits, in_splits, o));
  }
  dist::WorkPtr barrier(const dist::BarrierOptions& o) override {
    return count(inner_->barrier(o));
  }
  dist::WorkPtr send(const Tensor& t, int dst, const dist::SendRecvOptions& o) override {
    return count(inner_->send(t, dst, o));
  }
  dist::WorkPtr recv(const Tensor& t, int src, const dist::SendRecvOptions& o) override {
    return count(inner_->recv(t, src, o));
  }
  void abort(const std::string& reason) override {
    inner_->abort(reason);
    run_abort_hooks(reason);
  }
  void shutdown() override { inner_->shutdown(); }
  std::exception_ptr error() const override { return inner_->error(); }

 private:
  dist::WorkPtr count(dist::WorkPtr w) {
    ++ops_;
    return w;
  }
  dist::BackendPtr inner_;
  std::atomic<int64_t> ops_{0};
};

}  // namespace

TESSERA_BACKEND_PLUGIN() {
  dist::register_backend("counting", [](const dist::StorePtr& store, int rank, int size,
                                        dist::Milliseconds timeout, const std::string& group) {
    dist::ShmOptions options;
    options.group_name = group;
    return std::make_shared<CountingBackend>(
        dist::make_shm_backend(store, rank, size, timeout, options), rank, size);
  });
}
