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

std::vector<int> ProcessGroup::global_ranks() const {
  if (is_member() && backend_->generation() > 0) return backend_->member_global_ranks();
  return global_ranks_;
}

template <class F>
decltype(auto) ProcessGroup::with_ranks(F&& f) const {
  // The list the group was made with needs no copy; a reconfigured backend's does.
  if (is_member() && backend_->generation() > 0) return f(backend_->member_global_ranks());
  return f(global_ranks_);
}

int ProcessGroup::group_rank(int global_rank) const {
  return with_ranks([&](const std::vector<int>& ranks) {
    const auto it = std::find(ranks.begin(), ranks.end(), global_rank);
    TS_CHECK(it != ranks.end(), ValueError,
             "process group '{}': global rank {} is not in the group (its ranks are {})", name_,
             global_rank, fmt::join(ranks, ", "));
    return static_cast<int>(it - ranks.begin());
  });
}

int ProcessGroup::global_rank(int group_rank) const {
  return with_ranks([&](const std::vector<int>& ranks) {
    TS_CHECK(group_rank >= 0 && group_rank < static_cast<int>(ranks.size()), ValueError,
             "process group '{}': group rank must be in [0, {}), but got {}", name_, ranks.size(),
             group_rank);
    return ranks[static_cast<size_t>(group_rank)];
  });
}

WorkPtr ProcessGroup::reconfigure(const ReconfigureOptions& options) {
  WorkPtr work = backend().reconfigure(options);
  // The new generation's ops are numbered afresh, so that the members' Flight Recorder entries
  // match up again whatever each of them issued before the failure.
  collective_seq_ = 0;
  p2p_seq_ = 0;
  return work;
}

// ---- ops and their hooks ----------------------------------------------------------------------

namespace {

std::atomic<uint64_t> g_next_op_id{0};

// Undefined tensors (which the backend will refuse) show as dtype Undefined, no sizes.
TensorMeta meta(const Tensor& t) {
  if (!t.defined()) return {{}, ScalarType::Undefined};
  return {t.sizes().vec(), t.dtype()};
}
std::vector<TensorMeta> metas(std::initializer_list<const Tensor*> ts) {
  std::vector<TensorMeta> out;
  for (const Tensor* t : ts) out.push_back(meta(*t));
  return out;
}
std::vector<TensorMeta> metas(const std::vector<Tensor>& ts) {
  std::vector<TensorMeta> out;
  for (const Tensor& t : ts) out.push_back(meta(t));
  return out;
}

}  // namespace

template <class Describe, class Issue>
WorkPtr ProcessGroup::run_op(const char* op_name, bool is_p2p,
                             const std::optional<Milliseconds>& timeout, bool async_op,
                             const Describe& describe, const Issue& issue) {
  Backend& b = backend();  // non-members throw here, before anything is counted
  const uint64_t coll = is_p2p ? collective_seq_.load() : ++collective_seq_;
  const uint64_t p2p = is_p2p ? ++p2p_seq_ : p2p_seq_.load();
  if (pre_hooks_->empty() && post_hooks_->empty()) return issue(b);
  const auto pre = pre_hooks_->snapshot();
  const auto post = post_hooks_->snapshot();
  PreHookArgs args;
  args.op_id = ++g_next_op_id;
  args.op_name = op_name;
  args.group_name = name_;
  args.generation = b.generation();
  args.is_p2p = is_p2p;
  args.collective_seq_id = coll;
  args.p2p_seq_id = p2p;
  args.async_op = async_op;
  args.timeout = timeout.value_or(timeout_);
  describe(args);
  WorkPtr work;
  try {
    for (const auto& [id, hook] : *pre) hook(args);
    work = issue(b);
  } catch (...) {  // a pre hook or the backend refused the op: the post hooks still see it
    const PostHookArgs failed{args, nullptr, std::current_exception()};
    for (const auto& [id, hook] : *post) hook(failed);
    throw;
  }
  const PostHookArgs done{args, work, nullptr};
  for (const auto& [id, hook] : *post) hook(done);
  return work;
}

HookHandle ProcessGroup::register_pre_hook(PreHook hook) {
  TS_CHECK(hook != nullptr, ValueError, "register_pre_hook(): argument 'hook' must not be empty");
  return HookHandle(detail::remover(pre_hooks_, pre_hooks_->add(std::move(hook))));
}

HookHandle ProcessGroup::register_post_hook(PostHook hook) {
  TS_CHECK(hook != nullptr, ValueError, "register_post_hook(): argument 'hook' must not be empty");
  return HookHandle(detail::remover(post_hooks_, post_hooks_->add(std::move(hook))));
}

WorkPtr ProcessGroup::allreduce(const Tensor& t, const AllreduceOptions& o) {
  return run_op(
      "all_reduce", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = a.outputs = metas({&t});
        a.reduce_op = o.reduce_op;
      },
      [&](Backend& b) { return b.allreduce(t, o); });
}
WorkPtr ProcessGroup::broadcast(const Tensor& t, const BroadcastOptions& o) {
  return run_op(
      "broadcast", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = a.outputs = metas({&t});
        a.root = o.root_rank;
      },
      [&](Backend& b) { return b.broadcast(t, o); });
}
WorkPtr ProcessGroup::reduce(const Tensor& t, const ReduceOptions& o) {
  return run_op(
      "reduce", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = a.outputs = metas({&t});
        a.root = o.root_rank;
        a.reduce_op = o.reduce_op;
      },
      [&](Backend& b) { return b.reduce(t, o); });
}
WorkPtr ProcessGroup::allgather(const std::vector<Tensor>& outs, const Tensor& in,
                                const AllgatherOptions& o) {
  return run_op(
      "all_gather", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = metas({&in});
        a.outputs = metas(outs);
      },
      [&](Backend& b) { return b.allgather(outs, in, o); });
}
WorkPtr ProcessGroup::allgather_into_tensor(const Tensor& out, const Tensor& in,
                                            const AllgatherOptions& o) {
  return run_op(
      "all_gather_into_tensor", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = metas({&in});
        a.outputs = metas({&out});
      },
      [&](Backend& b) { return b.allgather_into_tensor(out, in, o); });
}
WorkPtr ProcessGroup::gather(const std::vector<Tensor>& outs, const Tensor& in,
                             const GatherOptions& o) {
  return run_op(
      "gather", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = metas({&in});
        a.outputs = metas(outs);
        a.root = o.root_rank;
      },
      [&](Backend& b) { return b.gather(outs, in, o); });
}
WorkPtr ProcessGroup::scatter(const Tensor& out, const std::vector<Tensor>& ins,
                              const ScatterOptions& o) {
  return run_op(
      "scatter", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = metas(ins);
        a.outputs = metas({&out});
        a.root = o.root_rank;
      },
      [&](Backend& b) { return b.scatter(out, ins, o); });
}
WorkPtr ProcessGroup::reduce_scatter(const Tensor& out, const std::vector<Tensor>& ins,
                                     const ReduceScatterOptions& o) {
  return run_op(
      "reduce_scatter", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = metas(ins);
        a.outputs = metas({&out});
        a.reduce_op = o.reduce_op;
      },
      [&](Backend& b) { return b.reduce_scatter(out, ins, o); });
}
WorkPtr ProcessGroup::reduce_scatter_tensor(const Tensor& out, const Tensor& in,
                                            const ReduceScatterOptions& o) {
  return run_op(
      "reduce_scatter_tensor", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = metas({&in});
        a.outputs = metas({&out});
        a.reduce_op = o.reduce_op;
      },
      [&](Backend& b) { return b.reduce_scatter_tensor(out, in, o); });
}
WorkPtr ProcessGroup::alltoall_base(const Tensor& out, const Tensor& in,
                                    const std::vector<int64_t>& out_splits,
                                    const std::vector<int64_t>& in_splits,
                                    const AllToAllOptions& o) {
  return run_op(
      "all_to_all_single", false, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = metas({&in});
        a.outputs = metas({&out});
      },
      [&](Backend& b) { return b.alltoall_base(out, in, out_splits, in_splits, o); });
}
WorkPtr ProcessGroup::barrier(const BarrierOptions& o) {
  return run_op(
      "barrier", false, o.timeout, o.async_op, [](PreHookArgs&) {},
      [&](Backend& b) { return b.barrier(o); });
}
WorkPtr ProcessGroup::send(const Tensor& t, int dst, const SendRecvOptions& o) {
  return run_op(
      "send", true, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.inputs = metas({&t});
        a.root = dst;
        a.tag = o.tag;
      },
      [&](Backend& b) { return b.send(t, dst, o); });
}
WorkPtr ProcessGroup::recv(const Tensor& t, int src, const SendRecvOptions& o) {
  return run_op(
      "recv", true, o.timeout, o.async_op,
      [&](PreHookArgs& a) {
        a.outputs = metas({&t});
        a.root = src;
        a.tag = o.tag;
      },
      [&](Backend& b) { return b.recv(t, src, o); });
}

std::shared_ptr<Window> ProcessGroup::new_window() {
  return backend().new_window();
}

void ProcessGroup::abort(const std::string& reason) {
  if (backend_) backend_->abort(reason);
}
void ProcessGroup::shutdown() {
  if (backend_) backend_->shutdown();
}

}  // namespace tessera::distributed
