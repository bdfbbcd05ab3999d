// The torch.distributed-style free functions: resolve the group, translate global ranks,
// call the ProcessGroup, and wait unless async_op.
#include "tessera/distributed/distributed.h"

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

}  // namespace tessera::distributed
