// ShmBackend: the Backend front end (argument checks, Work creation), the op queue and the
// progress thread that drives a Communicator.
//
// Life of an op: the caller's thread checks the arguments (errors are thrown at once, as
// PyTorch does), creates the Work and queues the op; the progress thread runs collectives one
// at a time in queue order and keeps every posted send/recv moving (also while a collective
// waits), then publishes each Work's status.
//
// Failure: a failed collective or send/recv publishes its error on its Work first, then
// aborts: the error is recorded, every queued and in-flight Work fails with it, and the
// segment tells the peers. A mismatch between ranks (MismatchError) fails only its Work.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "distributed/backends/shm/communicator.h"
#include "tessera/distributed/shm.h"

namespace tessera::distributed::shm {

class ShmBackend : public Backend {
 public:
  ShmBackend(const StorePtr& store, int rank, int size, Milliseconds timeout,
             const ShmOptions& options);
  ~ShmBackend() override;

  std::string name() const override { return "shm"; }

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

  void abort(const std::string& reason) override;
  void shutdown() override;
  std::exception_ptr error() const override;

 private:
  struct Entry {
    Op op;
    WorkPtr work;
  };
  WorkPtr enqueue(Op op, std::vector<Tensor> outputs, std::optional<Milliseconds> timeout);
  void progress_loop();
  void run_front(Entry& e);
  void finish_p2p(const std::vector<Communicator::P2PDone>& done);
  // Publishes `error` on `failed` (when given) first, then aborts everything else.
  void fail_and_abort(const WorkPtr& failed, WorkStatus status, std::exception_ptr error);

  const Milliseconds timeout_;
  const std::string group_name_;
  std::unique_ptr<Communicator> comm_;

  mutable std::mutex mutex_;
  std::deque<Entry> queue_;        // submitted, not yet taken by the progress thread
  std::deque<Entry> collectives_;  // progress thread only
  std::map<uint64_t, Entry> p2p_;  // progress thread only: posted sends/recvs by op number
  WorkPtr current_;                // the running collective (guarded by mutex_)
  std::exception_ptr error_;       // set once, by the first abort
  bool stopping_ = false;
  uint64_t next_seq_ = 0;
  std::thread progress_;
};

}  // namespace tessera::distributed::shm
