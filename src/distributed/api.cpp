// The torch.distributed-style free functions: resolve the group, translate global ranks,
// call the ProcessGroup, and wait unless async_op.
#include "tessera/distributed/distributed.h"

#include <algorithm>
#include <functional>
#include <string>

#include "tessera/ops/factory.h"
#include "tessera/ops/shape.h"

namespace tessera::distributed {

namespace {

ProcessGroupPtr group_or_world(GroupRef group) {
  return group ? group : group_world();
}

WorkPtr finish(WorkPtr work, bool async_op) {
  if (!async_op) work->wait();
  return work;
}

}  // namespace

WorkPtr all_reduce(const Tensor& tensor, ReduceOp op, GroupRef group, bool async_op) {
  AllreduceOptions o;
  o.reduce_op = op;
  o.async_op = async_op;
  return finish(group_or_world(group)->allreduce(tensor, o), async_op);
}

WorkPtr broadcast(const Tensor& tensor, int src, GroupRef group, bool async_op) {
  auto g = group_or_world(group);
  BroadcastOptions o;
  o.root_rank = g->group_rank(src);
  o.async_op = async_op;
  return finish(g->broadcast(tensor, o), async_op);
}

WorkPtr reduce(const Tensor& tensor, int dst, ReduceOp op, GroupRef group, bool async_op) {
  auto g = group_or_world(group);
  ReduceOptions o;
  o.reduce_op = op;
  o.root_rank = g->group_rank(dst);
  o.async_op = async_op;
  return finish(g->reduce(tensor, o), async_op);
}

WorkPtr all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor, GroupRef group,
                   bool async_op) {
  AllgatherOptions o;
  o.async_op = async_op;
  return finish(group_or_world(group)->allgather(tensor_list, tensor, o), async_op);
}

WorkPtr all_gather_into_tensor(const Tensor& output_tensor, const Tensor& input_tensor,
                               GroupRef group, bool async_op) {
  AllgatherOptions o;
  o.async_op = async_op;
  return finish(group_or_world(group)->allgather_into_tensor(output_tensor, input_tensor, o),
                async_op);
}

WorkPtr gather(const Tensor& tensor, const std::vector<Tensor>& gather_list, int dst,
               GroupRef group, bool async_op) {
  auto g = group_or_world(group);
  GatherOptions o;
  o.root_rank = g->group_rank(dst);
  o.async_op = async_op;
  return finish(g->gather(gather_list, tensor, o), async_op);
}

WorkPtr scatter(const Tensor& tensor, const std::vector<Tensor>& scatter_list, int src,
                GroupRef group, bool async_op) {
  auto g = group_or_world(group);
  ScatterOptions o;
  o.root_rank = g->group_rank(src);
  o.async_op = async_op;
  return finish(g->scatter(tensor, scatter_list, o), async_op);
}

WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& input_list, ReduceOp op,
                       GroupRef group, bool async_op) {
  ReduceScatterOptions o;
  o.reduce_op = op;
  o.async_op = async_op;
  return finish(group_or_world(group)->reduce_scatter(output, input_list, o), async_op);
}

WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op,
                              GroupRef group, bool async_op) {
  ReduceScatterOptions o;
  o.reduce_op = op;
  o.async_op = async_op;
  return finish(group_or_world(group)->reduce_scatter_tensor(output, input, o), async_op);
}

WorkPtr all_to_all_single(const Tensor& output, const Tensor& input,
                          const std::vector<int64_t>& output_split_sizes,
                          const std::vector<int64_t>& input_split_sizes, GroupRef group,
                          bool async_op) {
  AllToAllOptions o;
  o.async_op = async_op;
  return finish(
      group_or_world(group)->alltoall_base(output, input, output_split_sizes, input_split_sizes, o),
      async_op);
}

WorkPtr barrier(GroupRef group, bool async_op) {
  BarrierOptions o;
  o.async_op = async_op;
  return finish(group_or_world(group)->barrier(o), async_op);
}

namespace {
SendRecvOptions p2p_options(int64_t tag, bool async_op) {
  SendRecvOptions o;
  o.tag = tag;
  o.async_op = async_op;
  return o;
}
WorkPtr send_op(const Tensor& tensor, int dst, GroupRef group, int64_t tag, bool async_op) {
  auto g = group_or_world(group);
  return g->send(tensor, g->group_rank(dst), p2p_options(tag, async_op));
}
WorkPtr recv_op(const Tensor& tensor, int src, GroupRef group, int64_t tag, bool async_op) {
  auto g = group_or_world(group);
  return g->recv(tensor, g->group_rank(src), p2p_options(tag, async_op));
}
}  // namespace

WorkPtr isend(const Tensor& tensor, int dst, GroupRef group, int64_t tag) {
  return send_op(tensor, dst, group, tag, true);
}

WorkPtr irecv(const Tensor& tensor, int src, GroupRef group, int64_t tag) {
  return recv_op(tensor, src, group, tag, true);
}

void send(const Tensor& tensor, int dst, GroupRef group, int64_t tag) {
  send_op(tensor, dst, group, tag, false)->wait();
}

void recv(const Tensor& tensor, int src, GroupRef group, int64_t tag) {
  recv_op(tensor, src, group, tag, false)->wait();
}

std::vector<WorkPtr> batch_isend_irecv(const std::vector<P2POp>& p2p_op_list) {
  TS_CHECK(!p2p_op_list.empty(), ValueError,
           "batch_isend_irecv(): argument 'p2p_op_list' must hold at least one P2POp");
  const ProcessGroupPtr group = group_or_world(p2p_op_list.front().group);
  std::vector<int> peers;
  for (size_t i = 0; i < p2p_op_list.size(); ++i) {
    const P2POp& p = p2p_op_list[i];
    TS_CHECK(group_or_world(p.group) == group, ValueError,
             "batch_isend_irecv(): every op must use the same group, but op {} uses '{}' and op 0 "
             "'{}'",
             i, group_or_world(p.group)->name(), group->name());
    TS_CHECK(p.tensor.defined(), ValueError, "batch_isend_irecv(): op {} has no tensor", i);
    peers.push_back(group->group_rank(p.peer));
  }
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < p2p_op_list.size(); ++i) {
    const P2POp& p = p2p_op_list[i];
    const SendRecvOptions o = p2p_options(p.tag, true);
    works.push_back(p.op == P2POp::Kind::kIsend ? group->send(p.tensor, peers[i], o)
                                                : group->recv(p.tensor, peers[i], o));
  }
  return works;
}

namespace {

// Every tensor of `list` (argument `arg` of `op`) defined and of `dtype`.
void check_one_dtype(std::string_view op, std::string_view arg, const std::vector<Tensor>& list,
                     ScalarType dtype) {
  for (size_t i = 0; i < list.size(); ++i) {
    TS_CHECK(list[i].defined(), ValueError, "{}(): {}[{}] is an undefined tensor", op, arg, i);
    TS_CHECK(list[i].dtype() == dtype, TypeError,
             "{}(): every tensor must have one dtype, but the first is {} and {}[{}] is {}", op,
             dtype, arg, i, list[i].dtype());
  }
}

// A coalesced call's Work over `tensors`: it completes (or fails with the collective's
// error) after `unpack` has copied the packed result back.
WorkPtr coalesced_work(std::string name, const std::vector<Tensor>& tensors, const WorkPtr& inner,
                       std::function<void()> unpack, bool async_op) {
  auto outer =
      std::make_shared<Work>(std::move(name), tensors, inner->timeout(), inner->sequence_number());
  outer->mark_started();
  complete_after(outer, inner, std::move(unpack));
  if (!async_op) inner->wait();  // runs it on this thread when the backend allows
  return finish(outer, async_op);
}

// The tensors one after another in one flat buffer, and back: the packing of every coalesced
// collective.
Tensor pack_flat(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> flat;
  for (const Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return cat(flat);
}

void unpack_flat(const Tensor& buffer, const std::vector<Tensor>& tensors) {
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    t.copy_(buffer.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

// The outputs/inputs pair lists of a coalesced collective: as many of each, at least one.
void check_pairs(std::string_view op, const std::vector<Tensor>& outputs,
                 const std::vector<Tensor>& inputs) {
  TS_CHECK(!inputs.empty() && outputs.size() == inputs.size(), ValueError,
           "{}(): expected as many outputs as inputs (at least one), but got {} and {}", op,
           outputs.size(), inputs.size());
  check_one_dtype(op, "inputs", inputs, inputs[0].dtype());
  check_one_dtype(op, "outputs", outputs, inputs[0].dtype());
}

}  // namespace

WorkPtr all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op, GroupRef group,
                             bool async_op) {
  TS_CHECK(!tensors.empty(), ValueError,
           "all_reduce_coalesced(): argument 'tensors' must hold at least one tensor");
  check_one_dtype("all_reduce_coalesced", "tensors", tensors, tensors[0].dtype());
  const Tensor buffer = pack_flat(tensors);
  AllreduceOptions o;
  o.reduce_op = op;
  o.async_op = async_op;
  WorkPtr inner = group_or_world(group)->allreduce(buffer, o);
  return coalesced_work(
      "all_reduce_coalesced", tensors, inner, [buffer, tensors] { unpack_flat(buffer, tensors); },
      async_op);
}

WorkPtr all_gather_into_tensor_coalesced(const std::vector<Tensor>& outputs,
                                         const std::vector<Tensor>& inputs, GroupRef group,
                                         bool async_op) {
  constexpr std::string_view op = "all_gather_into_tensor_coalesced";
  check_pairs(op, outputs, inputs);
  const ProcessGroupPtr g = group_or_world(group);
  const int64_t world = g->size();
  for (size_t i = 0; i < inputs.size(); ++i)
    TS_CHECK(outputs[i].numel() == world * inputs[i].numel(), ValueError,
             "{}(): outputs[{}] expected {} elements (world size {} x the {} of inputs[{}]), but "
             "got {}",
             op, i, world * inputs[i].numel(), world, inputs[i].numel(), i, outputs[i].numel());
  const Tensor in = pack_flat(inputs);
  const int64_t total = in.numel();
  const Tensor out = empty({world * total}, TensorOptions(in.dtype()));
  AllgatherOptions o;
  o.async_op = async_op;
  WorkPtr inner = g->allgather_into_tensor(out, in, o);
  // Rank r's block of `out` holds its inputs one after another; outputs[i] takes the i-th
  // piece of every block, in rank order.
  return coalesced_work(
      std::string(op), outputs, inner,
      [out, outputs, inputs, world, total] {
        int64_t offset = 0;
        for (size_t i = 0; i < outputs.size(); ++i) {
          const int64_t n = inputs[i].numel();
          std::vector<Tensor> pieces;
          for (int64_t r = 0; r < world; ++r)
            pieces.push_back(out.narrow(0, r * total + offset, n));
          outputs[i].copy_(cat(pieces).view(outputs[i].sizes()));
          offset += n;
        }
      },
      async_op);
}

WorkPtr reduce_scatter_tensor_coalesced(const std::vector<Tensor>& outputs,
                                        const std::vector<Tensor>& inputs, ReduceOp op,
                                        GroupRef group, bool async_op) {
  constexpr std::string_view name = "reduce_scatter_tensor_coalesced";
  check_pairs(name, outputs, inputs);
  const ProcessGroupPtr g = group_or_world(group);
  const int64_t world = g->size();
  for (size_t i = 0; i < inputs.size(); ++i)
    TS_CHECK(inputs[i].numel() == world * outputs[i].numel(), ValueError,
             "{}(): inputs[{}] expected {} elements (world size {} x the {} of outputs[{}]), but "
             "got {}",
             name, i, world * outputs[i].numel(), world, outputs[i].numel(), i, inputs[i].numel());
  // Block r of the packed input holds chunk r of every input, so block r reduces onto rank r.
  std::vector<Tensor> pieces;
  for (int64_t r = 0; r < world; ++r)
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t n = outputs[i].numel();
      pieces.push_back(inputs[i].reshape({-1}).narrow(0, r * n, n));
    }
  const Tensor in = cat(pieces);
  const Tensor out = empty({in.numel() / std::max<int64_t>(world, 1)}, TensorOptions(in.dtype()));
  ReduceScatterOptions o;
  o.reduce_op = op;
  o.async_op = async_op;
  WorkPtr inner = g->reduce_scatter_tensor(out, in, o);
  return coalesced_work(
      std::string(name), outputs, inner, [out, outputs] { unpack_flat(out, outputs); }, async_op);
}

WindowPtr new_window(GroupRef group) {
  return group_or_world(group)->new_window();
}

}  // namespace tessera::distributed
