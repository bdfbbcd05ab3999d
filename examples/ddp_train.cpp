// Data-parallel training of a small MLP, one process per rank:
//
//   tessera launch --nproc-per-node 2 -- ./build/examples/example_ddp_train
//
// What DistributedDataParallel does, written out: every rank starts from rank 0's weights
// (broadcast), trains on its own shard of the data, and after each backward averages the
// gradients over the ranks (all_reduce with AVG over the shm backend, one async op per
// parameter, then one wait each), so every rank takes the same optimizer step. At the end each
// rank checks that its weights equal rank 0's bit for bit and that the loss went down; the
// exit code says whether both hold.
//
// Task: y = sin(x0) + 0.5 * x1 * x2 - 0.3 * x3 on 4 features of N(0, 1), 1024 samples.
#include <cstdio>

#include <tessera/distributed/distributed.h>
#include <tessera/tessera.h>

namespace dist = tessera::distributed;
namespace nn = tessera::nn;

namespace {

ts::Tensor target_of(const ts::Tensor& x) {
  const auto col = [&](int64_t j) { return x.narrow(1, j, 1); };
  return ts::sin(col(0)).add(col(1).mul(col(2)).mul(0.5)).sub(col(3).mul(0.3));
}

// Sends rank 0's value of every parameter to the others (DDP's start-up broadcast).
void broadcast_parameters(const std::vector<ts::Tensor>& params) {
  ts::autograd::NoGradGuard no_grad;
  for (const auto& p : params) dist::broadcast(p, 0);
}

// Averages the gradients across ranks: all ops are issued first, then waited for.
void average_gradients(const std::vector<ts::Tensor>& params) {
  std::vector<dist::WorkPtr> works;
  for (const auto& p : params)
    works.push_back(dist::all_reduce(p.grad(), dist::ReduceOp::AVG, nullptr, /*async_op=*/true));
  for (const auto& w : works) w->wait();
}

// Whether every parameter equals rank 0's exactly.
bool same_as_rank0(const std::vector<ts::Tensor>& params) {
  bool same = true;
  for (const auto& p : params) {
    ts::Tensor theirs = p.detach().clone();
    dist::broadcast(theirs, 0);
    same = same && ts::equal(p.detach(), theirs);
  }
  return same;
}

}  // namespace

int main() {
  dist::init_process_group("shm");  // RANK, WORLD_SIZE, MASTER_ADDR/PORT from tessera launch
  const int rank = dist::get_rank(), world = dist::get_world_size();

  // The same data on every rank (same seed); each rank trains on rows rank, rank + world, ...
  ts::manual_seed(1234);
  const auto x = ts::randn({1024, 4});
  const auto y = target_of(x);
  const int64_t shard_rows = x.size(0) / world;
  const auto shard = x.slice(0, rank, shard_rows * world, world).contiguous();
  const auto shard_y = y.slice(0, rank, shard_rows * world, world).contiguous();

  ts::manual_seed(100 + rank);  // different initial weights: the broadcast must fix them
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 64), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(64, 64), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(64, 1)});
  const auto params = model->parameters();
  broadcast_parameters(params);
  ts::optim::Adam optimizer(params, {.lr = 3e-3});

  const auto full_loss = [&] {
    ts::autograd::NoGradGuard no_grad;
    return nn::functional::mse_loss(model->forward(x), y).item<double>();
  };
  const double initial = full_loss();
  const int64_t batch = 32, steps = 300;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t start = (step * batch) % (shard_rows - batch + 1);
    const auto loss = nn::functional::mse_loss(model->forward(shard.narrow(0, start, batch)),
                                               shard_y.narrow(0, start, batch));
    optimizer.zero_grad();
    loss.backward();
    average_gradients(params);
    optimizer.step();
    if (rank == 0 && step % 100 == 0)
      std::printf("step %3lld  loss on rank 0's batch %.4f\n", static_cast<long long>(step),
                  loss.item<double>());
  }
  const double final_loss = full_loss();
  const bool same = same_as_rank0(params);
  const bool learned = final_loss < initial * 0.5;
  std::printf("rank %d of %d: loss %.4f -> %.4f (%s), weights equal rank 0's: %s\n", rank, world,
              initial, final_loss, learned ? "learned" : "did NOT learn", same ? "yes" : "NO");
  dist::destroy_process_group();
  return same && learned ? 0 : 1;
}
