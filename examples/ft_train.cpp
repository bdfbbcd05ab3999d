// Fault-tolerant data-parallel training with ft::Manager (docs/fault-tolerance.md):
//
//   tessera launch --ft --nproc-per-node 4 --max-restarts 1 -- example_ft_train --die-at 20
//
// Every replica fits the same linear model to data of its own; the gradients are averaged
// over the replicas of each step's quorum. With --die-at N, replica 1 kills itself (SIGKILL)
// at step N in its first life: the others notice, re-form the quorum without it and go on
// with their weights in memory; `tessera launch --ft` starts it again, and it heals from a
// healthy replica at the next quorum and trains on in step. At the end every replica prints
// its loss and whether its weights equal the others' (a min and a max over the group agree);
// it exits 1 unless the loss went down and they do.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tessera/distributed/distributed.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace dist = tessera::distributed;

int main(int argc, char** argv) {
  int die_at = -1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--die-at") == 0) die_at = std::atoi(argv[i + 1]);
  const char* rank = std::getenv("RANK");
  const char* port = std::getenv("MASTER_PORT");
  if (rank == nullptr || port == nullptr) {
    std::fprintf(stderr, "run me through `tessera launch --ft` (RANK, MASTER_PORT are unset)\n");
    return 2;
  }
  const int replica = std::atoi(rank);
  const char* restarts = std::getenv("TESSERA_RESTART_COUNT");
  const bool first_life = restarts == nullptr || std::atoi(restarts) == 0;
  constexpr int64_t kSteps = 40, kDim = 64, kBatch = 32;

  // The job's store (served by tessera launch) is where the Lighthouse forms the quorums.
  dist::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(std::atoi(port));
  auto store = std::make_shared<dist::TCPStore>(std::getenv("MASTER_ADDR"), so);

  ts::Tensor w = ts::zeros({kDim, 1}, ts::TensorOptions(ts::kFloat32));
  const ts::Tensor w_true =
      ts::arange(kDim, ts::TensorOptions(ts::kFloat32)).mul(0.1).cos().unsqueeze(1);
  auto batch = [&](int64_t step) {  // this replica's data for a step
    return ts::arange(kBatch * kDim, ts::TensorOptions(ts::kFloat32))
        .reshape({kBatch, kDim})
        .mul(0.61)
        .add(static_cast<double>(step) + replica * 0.37)
        .sin();
  };
  auto loss = [&] {
    const ts::Tensor x = batch(-1), r = x.mm(w.sub(w_true));
    return r.mul(r).mean().item<double>();
  };
  const double initial_loss = loss();

  dist::ft::ManagerOptions options;
  options.store = store;
  options.replica_id = replica;
  options.backend = "gloo";
  options.state_dict = [&] { return dist::ft::StateDict{{"w", w}}; };  // what healing copies
  dist::ft::Manager manager(options);

  while (manager.current_step() < kSteps) {
    manager.start_quorum();
    if (manager.healed())
      std::printf("replica %d: healed to step %lld\n", replica,
                  static_cast<long long>(manager.current_step()));
    if (manager.current_step() >= kSteps) break;  // healed to the end by finished replicas
    if (replica == 1 && first_life && manager.current_step() == die_at) ::raise(SIGKILL);
    const ts::Tensor x = batch(manager.current_step());
    ts::Tensor grad = x.t().mm(x.mm(w.sub(w_true))).mul(2.0 / kBatch);
    manager.allreduce(grad);  // averaged over this step's replicas; a failure is recorded
    if (manager.should_commit()) w.sub_(grad.mul(0.005));  // every survivor commits alike
  }

  manager.finish();  // waits for every replica to finish (a slow one heals from this one)

  // Do all replicas hold the same weights? Their min and max over the group must agree.
  ts::Tensor lo = w.clone(), hi = w.clone();
  dist::AllreduceOptions min_op, max_op;
  min_op.reduce_op = dist::ReduceOp::MIN;
  max_op.reduce_op = dist::ReduceOp::MAX;
  manager.group()->allreduce(lo, min_op)->wait();
  manager.group()->allreduce(hi, max_op)->wait();
  const bool equal = ts::equal(lo, hi) && ts::equal(lo, w);
  const double final_loss = loss();
  std::printf("replica %d of %d: loss %.4g -> %.4g (%s), weights equal the others': %s\n", replica,
              manager.num_participants(), initial_loss, final_loss,
              final_loss < initial_loss ? "learned" : "NOT learned", equal ? "yes" : "NO");
  return final_loss < initial_loss && equal ? 0 : 1;
}
