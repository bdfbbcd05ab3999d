// The hierarchical backend ("hierarchical"): shm among the ranks of one host, gloo across
// hosts. See tessera/distributed/hierarchical.h.
#include <fmt/format.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "distributed/backends/forwarding.h"
#include "tessera/distributed/distributed.h"
#include "tessera/distributed/hierarchical.h"

namespace tessera::distributed {
namespace {

std::string this_host() {
  if (const char* h = std::getenv("TESSERA_HOST"); h && *h) return h;
  char buf[256] = {};
  TS_CHECK(::gethostname(buf, sizeof(buf) - 1) == 0, RuntimeError,
           "hierarchical backend: gethostname failed");
  return buf;
}

class HierBackend : public ForwardingBackend {
 public:
  HierBackend(const StorePtr& store, int rank, int size, Milliseconds timeout,
              const HierarchicalOptions& o)
      : ForwardingBackend(rank, size), timeout_(timeout), group_(o.group_name) {
    // Who is on which host: ranks sharing a host name form one shm communicator; the lowest
    // rank of each host is its leader, and the leaders form the gloo communicator across.
    const std::string host = o.host.empty() ? this_host() : o.host;
    store->set(fmt::format("hier/host/{}", rank), host);
    std::vector<std::string> keys, hosts(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) keys.push_back(fmt::format("hier/host/{}", r));
    store->wait(keys, timeout);
    for (int r = 0; r < size; ++r) hosts[r] = store->get_string(keys[r]);
    std::map<std::string, std::vector<int>> by_host;  // host -> its ranks, ascending
    for (int r = 0; r < size; ++r) by_host[hosts[r]].push_back(r);
    std::vector<int> leaders;
    for (const auto& [h, ranks] : by_host) leaders.push_back(ranks.front());
    std::sort(leaders.begin(), leaders.end());
    host_of_.resize(static_cast<size_t>(size));
    local_of_.resize(static_cast<size_t>(size));
    for (const auto& [h, ranks] : by_host) {
      const int index = static_cast<int>(std::find(leaders.begin(), leaders.end(), ranks.front()) -
                                         leaders.begin());
      for (size_t i = 0; i < ranks.size(); ++i) {
        host_of_[static_cast<size_t>(ranks[i])] = index;
        local_of_[static_cast<size_t>(ranks[i])] = static_cast<int>(i);
      }
    }
    const std::vector<int>& mine = by_host[host];
    local_rank_ = local_of_[static_cast<size_t>(rank)];
    host_index_ = host_of_[static_cast<size_t>(rank)];
    const int host_index = host_index_;
    ShmOptions so;
    so.group_name = fmt::format("{}/host{}", group_, host_index);
    local_ = make_shm_backend(
        std::make_shared<PrefixStore>(fmt::format("hier/local/{}", host_index), store), local_rank_,
        static_cast<int>(mine.size()), timeout, so);
    GlooOptions go;
    go.hostname = o.gloo_hostname;
    go.group_name = fmt::format("{}/leaders", group_);
    if (local_rank_ == 0 && leaders.size() > 1)
      cross_ = make_gloo_backend(std::make_shared<PrefixStore>("hier/cross", store), host_index,
                                 static_cast<int>(leaders.size()), timeout, go);
    go.group_name = fmt::format("{}/flat", group_);
    flat_ = make_gloo_backend(std::make_shared<PrefixStore>("hier/flat", store), rank, size,
                              timeout, go);
    worker_ = std::thread([this] { work_loop(); });
  }

  ~HierBackend() override {
    try {
      shutdown();
    } catch (...) {  // errors are on the Works
    }
  }

  std::string name() const override { return "hierarchical"; }

  // all_reduce: reduce to the host leader over shm, all_reduce among the leaders over gloo,
  // broadcast from the leader over shm. AVG sums at every level and divides at the end.
  WorkPtr allreduce(const Tensor& t, const AllreduceOptions& o) override {
    TS_CHECK(o.reduce_op != ReduceOp::AVG || is_floating_point(t.dtype()) || is_complex(t.dtype()),
             TypeError, "all_reduce(): ReduceOp.AVG needs a floating or complex tensor, but got {}",
             t.dtype());
    AllreduceOptions sum = o;
    if (o.reduce_op == ReduceOp::AVG) sum.reduce_op = ReduceOp::SUM;
    return submit("all_reduce", {t}, o.timeout, [this, t, sum, avg = o.reduce_op == ReduceOp::AVG] {
      ReduceOptions ro;
      ro.reduce_op = sum.reduce_op;
      ro.root_rank = 0;
      local_->reduce(t, ro)->wait();
      if (cross_) cross_->allreduce(t, sum)->wait();
      local_->broadcast(t, {})->wait();
      if (avg) t.div_(static_cast<double>(size_));
    });
  }
  // broadcast: from the root over shm on its host, among the leaders over gloo from the root
  // host's leader, then over shm from each other host's leader.
  WorkPtr broadcast(const Tensor& t, const BroadcastOptions& o) override {
    const int root = checked_root("broadcast", o.root_rank);
    return submit("broadcast", {t}, o.timeout, [this, t, root] {
      const int root_host = host_of_[static_cast<size_t>(root)];
      BroadcastOptions step;
      if (host_index_ == root_host) {
        step.root_rank = local_of_[static_cast<size_t>(root)];
        local_->broadcast(t, step)->wait();
      }
      step.root_rank = root_host;
      if (cross_) cross_->broadcast(t, step)->wait();
      if (host_index_ != root_host) local_->broadcast(t, {})->wait();
    });
  }
  // reduce: to each host's leader over shm, among the leaders over gloo to the root host's
  // leader, then from that leader to the root over shm (a broadcast on the root's host: the
  // other ranks' tensors are unspecified after a reduce, as in PyTorch). AVG as all_reduce.
  WorkPtr reduce(const Tensor& t, const ReduceOptions& o) override {
    const int root = checked_root("reduce", o.root_rank);
    TS_CHECK(o.reduce_op != ReduceOp::AVG || is_floating_point(t.dtype()) || is_complex(t.dtype()),
             TypeError, "reduce(): ReduceOp.AVG needs a floating or complex tensor, but got {}",
             t.dtype());
    return submit("reduce", {t}, o.timeout, [this, t, root, op = o.reduce_op] {
      const int root_host = host_of_[static_cast<size_t>(root)];
      ReduceOptions step;
      step.reduce_op = op == ReduceOp::AVG ? ReduceOp::SUM : op;
      step.root_rank = 0;
      local_->reduce(t, step)->wait();
      step.root_rank = root_host;
      if (cross_) cross_->reduce(t, step)->wait();
      if (host_index_ == root_host && local_of_[static_cast<size_t>(root)] != 0)
        local_->broadcast(t, {})->wait();
      if (op == ReduceOp::AVG && rank_ == root) t.div_(static_cast<double>(size_));
    });
  }
  WorkPtr barrier(const BarrierOptions& o) override {
    return submit("barrier", {}, o.timeout, [this] {
      local_->barrier({})->wait();
      if (cross_) cross_->barrier({})->wait();
      local_->barrier({})->wait();
    });
  }
  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(mutex_);
      if (error_) return;
      error_ = std::make_exception_ptr(DistBackendError(
          fmt::format("hierarchical group '{}' (rank {}) was aborted: {}", group_, rank_, reason)));
      for (auto& task : queue_) task.work->mark_failed(WorkStatus::ERROR, error_);
      queue_.clear();
    }
    cv_.notify_all();
    for (const BackendPtr& b : {local_, cross_, flat_})
      if (b) b->abort(reason);
    run_abort_hooks(reason);
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    for (const BackendPtr& b : {local_, cross_, flat_})
      if (b) b->shutdown();
  }

  std::exception_ptr error() const override {
    std::lock_guard lock(mutex_);
    if (error_) return error_;
    for (const BackendPtr& b : {local_, cross_, flat_})
      if (b)
        if (auto e = b->error()) return e;
    return nullptr;
  }

 private:
  // The other ops run flat, over gloo among all ranks.
  BackendPtr forward_to() override { return flat_; }

  int checked_root(const char* op, int64_t root) const {
    TS_CHECK(root >= 0 && root < size_, ValueError,
             "{}(): root_rank must be in [0, {}), but got {}", op, size_, root);
    return static_cast<int>(root);
  }

  struct Task {
    WorkPtr work;
    std::function<void()> run;
  };

  // A composite op: its steps run in issue order on the worker; its Work fails with the
  // first step's error.
  WorkPtr submit(const char* op, std::vector<Tensor> outputs, std::optional<Milliseconds> timeout,
                 std::function<void()> run) {
    auto work = std::make_shared<Work>(fmt::format("hierarchical:{}", op), std::move(outputs),
                                       timeout.value_or(timeout_));
    std::lock_guard lock(mutex_);
    if (error_) {
      work->mark_failed(WorkStatus::ERROR, error_);
      return work;
    }
    TS_CHECK(!stopping_, distributed::DistBackendError,
             "{}(): the hierarchical group '{}' was shut down", op, group_);
    queue_.push_back({work, std::move(run)});
    cv_.notify_all();
    return work;
  }

  void work_loop() {
    for (;;) {
      Task task;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return !queue_.empty() || stopping_ || error_; });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task.work->mark_started();
      try {
        task.run();  // every step is bounded by its own backend's timeout
        task.work->mark_completed();
      } catch (const DistTimeoutError&) {
        task.work->mark_failed(WorkStatus::TIMED_OUT, std::current_exception());
      } catch (...) {
        task.work->mark_failed(WorkStatus::ERROR, std::current_exception());
      }
    }
  }

  const Milliseconds timeout_;
  const std::string group_;
  int local_rank_ = 0, host_index_ = 0;
  std::vector<int> host_of_, local_of_;  // per global rank: its host's index, its place there
  BackendPtr local_, cross_, flat_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace

BackendPtr make_hierarchical_backend(const StorePtr& store, int rank, int size,
                                     Milliseconds timeout, HierarchicalOptions options) {
  TS_CHECK(store != nullptr, ValueError, "hierarchical backend: argument 'store' must not be null");
  TS_CHECK(size >= 1 && rank >= 0 && rank < size, ValueError,
           "hierarchical backend: rank must be in [0, {}), but got {}", size, rank);
  return std::make_shared<HierBackend>(store, rank, size, timeout, options);
}

}  // namespace tessera::distributed
