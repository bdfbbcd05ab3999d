// The hierarchical backend ("hierarchical"): shm among the ranks of one host, gloo across
// hosts. See tessera/distributed/hierarchical.h.
#include <fmt/format.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "distributed/backends/op_backend.h"
#include "tessera/distributed/distributed.h"
#include "tessera/distributed/hierarchical.h"
#include "tessera/ops/factory.h"

namespace tessera::distributed {
namespace {

std::string this_host() {
  if (const char* h = std::getenv("TESSERA_HOST"); h && *h) return h;
  char buf[256] = {};
  TS_CHECK(::gethostname(buf, sizeof(buf) - 1) == 0, RuntimeError,
           "hierarchical backend: gethostname failed");
  return buf;
}

class HierBackend : public OpBackend {
 public:
  HierBackend(const StorePtr& store, int rank, int size, Milliseconds timeout,
              const HierarchicalOptions& o)
      : OpBackend(rank, size), timeout_(timeout), group_(o.group_name) {
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
    for (const auto& [h, ranks] : by_host) {
      leaders.push_back(ranks.front());
      max_host_size_ = std::max(max_host_size_, static_cast<int64_t>(ranks.size()));
    }
    std::sort(leaders.begin(), leaders.end());
    host_of_.resize(static_cast<size_t>(size));
    local_of_.resize(static_cast<size_t>(size));
    ranks_of_host_.resize(leaders.size());
    for (const auto& [h, ranks] : by_host) {
      const int index = static_cast<int>(std::find(leaders.begin(), leaders.end(), ranks.front()) -
                                         leaders.begin());
      ranks_of_host_[static_cast<size_t>(index)] = ranks;
      for (size_t i = 0; i < ranks.size(); ++i) {
        host_of_[static_cast<size_t>(ranks[i])] = index;
        local_of_[static_cast<size_t>(ranks[i])] = static_cast<int>(i);
      }
    }
    const std::vector<int>& mine = by_host[host];
    hosts_ = static_cast<int>(leaders.size());
    host_size_ = static_cast<int>(mine.size());
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

  // Point-to-point runs flat, over gloo among all ranks.
  WorkPtr send(const Tensor& t, int dst, const SendRecvOptions& o) override {
    check_not_suspended("send");
    return track_p2p(flat_->send(t, dst, o));
  }
  WorkPtr recv(const Tensor& t, int src, const SendRecvOptions& o) override {
    check_not_suspended("recv");
    return track_p2p(flat_->recv(t, src, o));
  }

  // Suspend releases what the three communicators hold (the host's shm segment, the gloo
  // connections of the leaders and of the flat group); resume sets them up again. Every rank
  // walks them in the same order (flat, host, leaders), so the communicators' own collective
  // suspends and resumes meet. Point-to-point ops went to the flat group, but are tracked
  // here, so a pending one refuses the suspend before any barrier.
  void suspend() override {
    check_no_pending_p2p(group_);
    {
      std::lock_guard lock(mutex_);
      TS_CHECK(!suspended_, distributed::DistBackendError,
               "suspend(): hierarchical group '{}' (rank {}) is suspended already", group_, rank_);
      if (error_) std::rethrow_exception(error_);
    }
    barrier(BarrierOptions{})->wait();  // every rank's earlier ops are done
    {
      std::lock_guard lock(mutex_);
      suspended_ = true;  // from now on ops are refused
      ++suspend_count_;
    }
    flat_->suspend();
    local_->suspend();
    if (cross_) cross_->suspend();
  }

  // A resume that fails (a peer that never resumes: each communicator's timeout) leaves this
  // group suspended; calling it again resumes the communicators that are still suspended.
  void resume() override {
    {
      std::lock_guard lock(mutex_);
      TS_CHECK(suspended_ && !stopping_, distributed::DistBackendError,
               "resume(): hierarchical group '{}' (rank {}) is not suspended", group_, rank_);
    }
    for (const BackendPtr& b : {flat_, local_, cross_})
      if (b && b->memory_stats().suspended) b->resume();
    std::lock_guard lock(mutex_);
    suspended_ = false;
  }

  // The sums over the three communicators.
  MemoryStats memory_stats() const override {
    MemoryStats s;
    for (const BackendPtr& b : {flat_, local_, cross_})
      if (b) s.add_counts(b->memory_stats());
    std::lock_guard lock(mutex_);
    s.suspended = suspended_;
    s.suspend_count = suspend_count_;
    return s;
  }

  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(mutex_);
      if (error_) return;
      error_ = std::make_exception_ptr(DistBackendError(
          fmt::format("hierarchical group '{}' (rank {}) was aborted: {}", group_, rank_, reason)));
      for (auto& entry : queue_) entry.work->mark_failed(WorkStatus::ERROR, error_);
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

 protected:
  // The op was checked by OpBackend in the caller's thread; its steps run in issue order on
  // the worker.
  WorkPtr enqueue(Op&& op, std::vector<Tensor>&& keep,
                  std::optional<Milliseconds> timeout) override {
    std::lock_guard lock(mutex_);
    auto work = new_work(op, std::move(keep), timeout, timeout_, group_, next_seq_, stopping_,
                         error_, suspended_);
    if (error_) return work;
    queue_.push_back({std::move(op), work});
    cv_.notify_all();
    return work;
  }

 private:
  struct Entry {
    Op op;
    WorkPtr work;
  };

  void check_not_suspended(const char* op) const {
    std::lock_guard lock(mutex_);
    TS_CHECK(!suspended_, distributed::DistBackendError,
             "{}(): the hierarchical group '{}' (rank {}) is suspended; call resume() first", op,
             group_, rank_);
  }

  void work_loop() {
    for (;;) {
      Entry entry;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return !queue_.empty() || stopping_ || error_; });
        if (queue_.empty()) return;
        entry = std::move(queue_.front());
        queue_.pop_front();
      }
      entry.work->mark_started();
      try {
        run(entry.op);  // every step is bounded by its own backend's timeout
        entry.work->mark_completed();
      } catch (const DistTimeoutError&) {
        entry.work->mark_failed(WorkStatus::TIMED_OUT, std::current_exception());
      } catch (...) {
        entry.work->mark_failed(WorkStatus::ERROR, std::current_exception());
      }
    }
  }

  void run(const Op& op) {
    // One host: its shm communicator is the whole group, ranks in the same order.
    if (hosts_ == 1) return run_on(*local_, op);
    switch (op.kind) {
      case OpKind::ALLREDUCE:
        return all_reduce(op);
      case OpKind::BROADCAST:
        return broadcast(op);
      case OpKind::REDUCE:
        return reduce(op);
      case OpKind::ALLGATHER:
        return all_gather(op);
      case OpKind::GATHER:
        return gather(op);
      case OpKind::SCATTER:
        return scatter(op);
      case OpKind::REDUCE_SCATTER:
        return reduce_scatter(op);
      case OpKind::ALLTOALL:
        return all_to_all(op);
      case OpKind::BARRIER:
        local_->barrier({})->wait();
        if (cross_) cross_->barrier({})->wait();
        local_->barrier({})->wait();
        return;
      default:
        TS_INTERNAL_ASSERT(false);
    }
  }

  // ---- views of the op's buffers and the staging layout -----------------------------------

  static Tensor view(const void* p, int64_t count, ScalarType dtype) {
    return from_blob(const_cast<void*>(p), {count}, TensorOptions(dtype));
  }
  static std::vector<Tensor> views(const auto& ptrs, int64_t count, ScalarType dtype) {
    std::vector<Tensor> out;
    for (const auto* p : ptrs) out.push_back(view(p, count, dtype));
    return out;
  }

  // Staging buffers hold one block of op.count elements per slot. The slots of host h are
  // [h * M, h * M + its size), M the largest host's size; hosts with fewer ranks leave the
  // rest of theirs unused, so that the leaders exchange equal blocks of M slots.
  int64_t slot_of(int r) const {
    return host_of_[static_cast<size_t>(r)] * max_host_size_ + local_of_[static_cast<size_t>(r)];
  }
  // Staging buffers of `n` slots of `count` elements.
  static Tensor slots(int64_t count, ScalarType dtype, int64_t n) {
    return empty({n * count}, TensorOptions(dtype));
  }
  static Tensor block(const Tensor& buf, int64_t count, int64_t slot, int64_t n = 1) {
    return buf.narrow(0, slot * count, n * count);
  }
  // This host's slots of a host buffer (M slots), for the local gather or scatter at the
  // leader; the other ranks pass none.
  std::vector<Tensor> local_blocks(const Tensor& host, int64_t count) const {
    std::vector<Tensor> out;
    if (local_rank_ == 0)
      for (int i = 0; i < host_size_; ++i) out.push_back(block(host, count, i));
    return out;
  }
  // The H host blocks of M slots of a buffer of every slot, for the leaders' gather/scatter.
  std::vector<Tensor> host_blocks(const Tensor& all, int64_t count) const {
    std::vector<Tensor> out;
    for (int h = 0; h < hosts_; ++h)
      out.push_back(block(all, count, h * max_host_size_, max_host_size_));
    return out;
  }
  static void copy_bytes(uint8_t* dst, const uint8_t* src, int64_t n) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n));  // (src may be null when n is 0)
  }
  // A buffer of every slot of op.count elements.
  Tensor every_slot(const Op& op) const {
    return slots(op.count, op.dtype, hosts_ * max_host_size_);
  }
  // Every rank's input at its host's leader, in a host buffer (the others get none).
  Tensor gather_at_leader(const Op& op) const {
    const Tensor host = local_rank_ == 0 ? slots(op.count, op.dtype, max_host_size_) : Tensor();
    local_->gather(local_blocks(host, op.count), view(op.in, op.count, op.dtype), {})->wait();
    return host;
  }
  // op.outs[r] := rank r's slot of `all`.
  void unpack(const Op& op, const Tensor& all) const {
    for (int r = 0; r < size_; ++r)
      view(op.outs[static_cast<size_t>(r)], op.count, op.dtype)
          .copy_(block(all, op.count, slot_of(r)));
  }
  static int64_t total(const std::vector<int64_t>& v) {
    return std::accumulate(v.begin(), v.end(), int64_t{0});
  }
  static ReduceOp summed(ReduceOp op) { return op == ReduceOp::AVG ? ReduceOp::SUM : op; }

  // ---- the ops, through the host leaders ------------------------------------------------

  // all_reduce: reduce to the host leader over shm, all_reduce among the leaders over gloo,
  // broadcast from the leader over shm. AVG sums at every level and divides at the end.
  void all_reduce(const Op& op) {
    const Tensor t = view(op.out, op.count, op.dtype);
    ReduceOptions ro;
    ro.reduce_op = summed(op.reduce_op);
    local_->reduce(t, ro)->wait();
    AllreduceOptions ao;
    ao.reduce_op = ro.reduce_op;
    if (cross_) cross_->allreduce(t, ao)->wait();
    local_->broadcast(t, {})->wait();
    if (op.reduce_op == ReduceOp::AVG) t.div_(static_cast<double>(size_));
  }

  // broadcast: from the root over shm on its host, among the leaders over gloo from the root
  // host's leader, then over shm from each other host's leader.
  void broadcast(const Op& op) {
    const Tensor t = view(op.out, op.count, op.dtype);
    const int root_host = host_of_[static_cast<size_t>(op.root)];
    BroadcastOptions step;
    if (host_index_ == root_host) {
      step.root_rank = local_of_[static_cast<size_t>(op.root)];
      local_->broadcast(t, step)->wait();
    }
    step.root_rank = root_host;
    if (cross_) cross_->broadcast(t, step)->wait();
    if (host_index_ != root_host) local_->broadcast(t, {})->wait();
  }

  // reduce: to each host's leader over shm, among the leaders over gloo to the root host's
  // leader, then from that leader to the root over shm. It works on a copy, so that only the
  // root's tensor changes. AVG as all_reduce.
  void reduce(const Op& op) {
    const Tensor t = view(op.out, op.count, op.dtype);
    const Tensor s = t.clone();
    const int root_host = host_of_[static_cast<size_t>(op.root)];
    ReduceOptions step;
    step.reduce_op = summed(op.reduce_op);
    local_->reduce(s, step)->wait();
    step.root_rank = root_host;
    if (cross_) cross_->reduce(s, step)->wait();
    if (host_index_ == root_host && local_of_[static_cast<size_t>(op.root)] != 0)
      local_->broadcast(s, {})->wait();
    if (rank_ != op.root) return;
    t.copy_(s);
    if (op.reduce_op == ReduceOp::AVG) t.div_(static_cast<double>(size_));
  }

  // all_gather: gather to the host leader over shm, all_gather of the hosts' slots among the
  // leaders over gloo, broadcast of every slot over shm; each rank then copies its outputs.
  void all_gather(const Op& op) {
    const Tensor host = gather_at_leader(op);
    const Tensor all = every_slot(op);
    if (cross_) cross_->allgather_into_tensor(all, host, {})->wait();
    local_->broadcast(all, {})->wait();
    unpack(op, all);
  }

  // gather: to the host leader over shm, the hosts' slots to the root host's leader over gloo,
  // from there to the root over shm (when the root is not the leader).
  void gather(const Op& op) {
    const int root_host = host_of_[static_cast<size_t>(op.root)];
    const int root_local = local_of_[static_cast<size_t>(op.root)];
    const Tensor host = gather_at_leader(op);
    const bool here = host_index_ == root_host;
    const Tensor all =
        here && (local_rank_ == 0 || local_rank_ == root_local) ? every_slot(op) : Tensor();
    if (cross_) {
      GatherOptions go;
      go.root_rank = root_host;
      cross_->gather(here ? host_blocks(all, op.count) : std::vector<Tensor>{}, host, go)->wait();
    }
    if (here && root_local != 0) {
      if (local_rank_ == 0) local_->send(all, root_local, {})->wait();
      if (local_rank_ == root_local) local_->recv(all, 0, {})->wait();
    }
    if (rank_ != op.root) return;
    unpack(op, all);
  }

  // scatter: from the root to its host's leader over shm (when the root is not the leader),
  // the hosts' slots from that leader to the other leaders over gloo, then from each leader to
  // its host's ranks over shm.
  void scatter(const Op& op) {
    const int root_host = host_of_[static_cast<size_t>(op.root)];
    const int root_local = local_of_[static_cast<size_t>(op.root)];
    const bool here = host_index_ == root_host;
    const Tensor all =
        here && (local_rank_ == 0 || local_rank_ == root_local) ? every_slot(op) : Tensor();
    if (rank_ == op.root)
      for (int r = 0; r < size_; ++r)
        block(all, op.count, slot_of(r))
            .copy_(view(op.ins[static_cast<size_t>(r)], op.count, op.dtype));
    if (here && root_local != 0) {
      if (local_rank_ == root_local) local_->send(all, 0, {})->wait();
      if (local_rank_ == 0) local_->recv(all, root_local, {})->wait();
    }
    const Tensor host = local_rank_ == 0 ? slots(op.count, op.dtype, max_host_size_) : Tensor();
    if (cross_) {
      ScatterOptions so;
      so.root_rank = root_host;
      cross_->scatter(host, here ? host_blocks(all, op.count) : std::vector<Tensor>{}, so)->wait();
    }
    local_->scatter(view(op.out, op.count, op.dtype), local_blocks(host, op.count), {})->wait();
  }

  // reduce_scatter: every rank lays its inputs out by slot, the layouts are reduced to the
  // host leader over shm, reduce-scattered among the leaders over gloo (each leader gets its
  // host's slots), then scattered to the host's ranks over shm. AVG as all_reduce.
  void reduce_scatter(const Op& op) {
    const Tensor all = zeros({hosts_ * max_host_size_ * op.count}, op.dtype);
    for (int r = 0; r < size_; ++r)
      block(all, op.count, slot_of(r))
          .copy_(view(op.ins[static_cast<size_t>(r)], op.count, op.dtype));
    ReduceOptions ro;
    ro.reduce_op = summed(op.reduce_op);
    local_->reduce(all, ro)->wait();
    const Tensor host = local_rank_ == 0 ? slots(op.count, op.dtype, max_host_size_) : Tensor();
    ReduceScatterOptions rs;
    rs.reduce_op = ro.reduce_op;
    if (cross_) cross_->reduce_scatter_tensor(host, all, rs)->wait();
    const Tensor out = view(op.out, op.count, op.dtype);
    local_->scatter(out, local_blocks(host, op.count), {})->wait();
    if (op.reduce_op == ReduceOp::AVG) out.div_(static_cast<double>(size_));
  }

  // all_to_all: each rank's whole input goes to its leader (shm all_to_all in which only the
  // leader receives), the leaders exchange one bundle per pair of hosts (gloo all_to_all), and
  // each leader hands every rank of its host its whole output (shm all_to_all in which only
  // the leader sends). First the leaders share every rank's split sizes, to cut and order the
  // bundles, and check them: each decides the same, so a mismatch fails the op on every rank
  // with the same error.
  void all_to_all(const Op& op) {
    const int n = size_;
    const bool leader = local_rank_ == 0;
    // The split tables, by slot: sends (bytes to each rank), then expects (bytes from each).
    const Tensor mine = empty({2 * n}, TensorOptions(kInt64));
    auto* m = mine.data_ptr<int64_t>();
    std::copy(op.in_split_bytes.begin(), op.in_split_bytes.end(), m);
    std::copy(op.out_split_bytes.begin(), op.out_split_bytes.end(), m + n);
    const Tensor host = leader ? slots(2 * n, kInt64, max_host_size_) : Tensor();
    local_->gather(local_blocks(host, 2 * n), mine, {})->wait();
    const Tensor table = leader ? slots(2 * n, kInt64, hosts_ * max_host_size_) : Tensor();
    if (leader) cross_->allgather_into_tensor(table, host, {})->wait();
    const auto sends = [&](int i, int j) {
      return table.data_ptr<int64_t>()[slot_of(i) * 2 * n + j];
    };
    const auto expects = [&](int j, int i) {
      return table.data_ptr<int64_t>()[slot_of(j) * 2 * n + n + i];
    };
    // The verdict: the first pair that disagrees, (-1, ...) when none.
    const Tensor verdict = full({4}, -1.0, TensorOptions(kInt64));
    auto* v = verdict.data_ptr<int64_t>();
    for (int i = 0; leader && i < n && v[0] < 0; ++i)
      for (int j = 0; j < n; ++j)
        if (sends(i, j) != expects(j, i)) {
          v[0] = i, v[1] = j, v[2] = sends(i, j), v[3] = expects(j, i);
          break;
        }
    local_->broadcast(verdict, {})->wait();
    const int64_t es = element_size(op.dtype);
    TS_CHECK(v[0] < 0, distributed::DistBackendError,
             "hierarchical all_to_all (group '{}'): rank {} sends {} elements to rank {}, but rank "
             "{} expects {} elements from rank {} (output_split_sizes must match the senders' "
             "input_split_sizes)",
             group_, v[0], v[2] / es, v[1], v[1], v[3] / es, v[0]);

    const std::vector<int>& here = ranks_of_host_[static_cast<size_t>(host_index_)];
    const auto bytes = [](int64_t n_bytes) { return empty({n_bytes}, TensorOptions(kUInt8)); };
    // Every input to the leader.
    std::vector<int64_t> to_leader(static_cast<size_t>(host_size_), 0);
    std::vector<int64_t> from_locals(static_cast<size_t>(host_size_), 0);
    to_leader[0] = total(op.in_split_bytes);
    for (int i = 0; leader && i < host_size_; ++i)
      for (int j = 0; j < n; ++j) from_locals[static_cast<size_t>(i)] += sends(here[i], j);
    const Tensor inputs = bytes(total(from_locals));
    local_->alltoall_base(inputs, view(op.in, to_leader[0], kUInt8), from_locals, to_leader, {})
        ->wait();
    std::vector<int64_t> from_leader(static_cast<size_t>(host_size_), 0);
    from_leader[0] = total(op.out_split_bytes);
    std::vector<int64_t> to_locals(static_cast<size_t>(host_size_), 0);
    Tensor outputs = bytes(0);
    if (leader) {
      // Where the piece i -> j starts in `inputs` (i of this host).
      std::vector<int64_t> in_at(static_cast<size_t>(n) * n);
      int64_t at = 0;
      for (int i : here)
        for (int j = 0; j < n; ++j) in_at[static_cast<size_t>(i) * n + j] = at, at += sends(i, j);
      // One bundle per host g: the pieces i -> j, i of this host and j of g, i-major.
      std::vector<int64_t> send_sizes(static_cast<size_t>(hosts_)), recv_sizes(send_sizes);
      for (int g = 0; g < hosts_; ++g)
        for (int j : ranks_of_host_[static_cast<size_t>(g)])
          for (int i : here) {
            send_sizes[static_cast<size_t>(g)] += sends(i, j);
            recv_sizes[static_cast<size_t>(g)] += sends(j, i);
          }
      const Tensor bundles = bytes(total(send_sizes));
      auto* out = bundles.data_ptr<uint8_t>();
      const auto* in = inputs.data_ptr<uint8_t>();
      for (int g = 0; g < hosts_; ++g)
        for (int i : here)
          for (int j : ranks_of_host_[static_cast<size_t>(g)]) {
            copy_bytes(out, in + in_at[static_cast<size_t>(i) * n + j], sends(i, j));
            out += sends(i, j);
          }
      const Tensor received = bytes(total(recv_sizes));
      cross_->alltoall_base(received, bundles, recv_sizes, send_sizes, {})->wait();
      // Where the piece i -> j starts in `received` (j of this host), as the bundles are laid.
      std::vector<int64_t> got_at(static_cast<size_t>(n) * n);
      at = 0;
      for (int g = 0; g < hosts_; ++g)
        for (int i : ranks_of_host_[static_cast<size_t>(g)])
          for (int j : here) got_at[static_cast<size_t>(i) * n + j] = at, at += sends(i, j);
      // Each rank's whole output, by source rank.
      for (int jl = 0; jl < host_size_; ++jl)
        for (int i = 0; i < n; ++i) to_locals[static_cast<size_t>(jl)] += sends(i, here[jl]);
      outputs = bytes(total(to_locals));
      out = outputs.data_ptr<uint8_t>();
      const auto* got = received.data_ptr<uint8_t>();
      for (int j : here)
        for (int i = 0; i < n; ++i) {
          copy_bytes(out, got + got_at[static_cast<size_t>(i) * n + j], sends(i, j));
          out += sends(i, j);
        }
    }
    local_->alltoall_base(view(op.out, from_leader[0], kUInt8), outputs, from_leader, to_locals, {})
        ->wait();
  }

  // The op as a call on one backend: a one-host group's shm communicator.
  static void run_on(Backend& b, const Op& op) {
    const auto out = [&] { return view(op.out, op.count, op.dtype); };
    switch (op.kind) {
      case OpKind::ALLREDUCE: {
        AllreduceOptions o;
        o.reduce_op = op.reduce_op;
        return void(b.allreduce(out(), o)->wait());
      }
      case OpKind::BROADCAST: {
        BroadcastOptions o;
        o.root_rank = op.root;
        return void(b.broadcast(out(), o)->wait());
      }
      case OpKind::REDUCE: {
        ReduceOptions o;
        o.reduce_op = op.reduce_op;
        o.root_rank = op.root;
        return void(b.reduce(out(), o)->wait());
      }
      case OpKind::ALLGATHER:
        return void(
            b.allgather(views(op.outs, op.count, op.dtype), view(op.in, op.count, op.dtype), {})
                ->wait());
      case OpKind::GATHER: {
        GatherOptions o;
        o.root_rank = op.root;
        return void(b.gather(views(op.outs, op.count, op.dtype), view(op.in, op.count, op.dtype), o)
                        ->wait());
      }
      case OpKind::SCATTER: {
        ScatterOptions o;
        o.root_rank = op.root;
        return void(b.scatter(out(), views(op.ins, op.count, op.dtype), o)->wait());
      }
      case OpKind::REDUCE_SCATTER: {
        ReduceScatterOptions o;
        o.reduce_op = op.reduce_op;
        return void(b.reduce_scatter(out(), views(op.ins, op.count, op.dtype), o)->wait());
      }
      case OpKind::ALLTOALL: {  // as 1-d tensors: the splits count elements
        const int64_t es = element_size(op.dtype);
        const auto elements = [&](const std::vector<int64_t>& split_bytes) {
          std::vector<int64_t> out;
          for (const int64_t s : split_bytes) out.push_back(s / es);
          return out;
        };
        const auto out_splits = elements(op.out_split_bytes),
                   in_splits = elements(op.in_split_bytes);
        return void(b.alltoall_base(view(op.out, total(out_splits), op.dtype),
                                    view(op.in, total(in_splits), op.dtype), out_splits, in_splits,
                                    {})
                        ->wait());
      }
      case OpKind::BARRIER:
        return void(b.barrier({})->wait());
      default:
        TS_INTERNAL_ASSERT(false);
    }
  }

  const Milliseconds timeout_;
  const std::string group_;
  int hosts_ = 1, host_size_ = 1, local_rank_ = 0, host_index_ = 0;
  int64_t max_host_size_ = 0;
  std::vector<int> host_of_, local_of_;  // per global rank: its host's index, its place there
  std::vector<std::vector<int>> ranks_of_host_;  // per host index: its ranks, ascending
  BackendPtr local_, cross_, flat_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  std::exception_ptr error_;
  bool stopping_ = false;
  bool suspended_ = false;
  uint64_t suspend_count_ = 0;
  uint64_t next_seq_ = 0;
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
