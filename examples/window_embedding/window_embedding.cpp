// An embedding table sharded over ranks and looked up with one-sided gets (window.h).
//
// The table has kRows rows of kDim floats; row i holds i + j / 100 in column j, so any rank can
// check a row it fetched. Rank r owns a contiguous, uneven block of rows in its window tensor.
// Each rank looks up a batch of random ids: one get per id from the owner's shard, no call on
// the owner's side. Then every rank adds a gradient-like update into rows it does not own with
// accumulate, and a fence makes all updates visible before each rank checks its own shard.
//
//   tessera launch --nproc-per-node 2 --master-port 0 -- ./example_window_embedding
//   (or: mpirun -np 2 ./example_window_embedding mpi)
// Exits 0 when every looked-up row and every updated row is right, 1 otherwise.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tessera/distributed/distributed.h"
#include "tessera/tessera.h"

namespace dist = tessera::distributed;
namespace ts = tessera;

constexpr int64_t kRows = 1000, kDim = 16, kBatch = 256;

int main(int argc, char** argv) {
  const std::string backend = argc > 1 ? argv[1] : "shm";
  dist::init_process_group(backend);
  const int rank = dist::get_rank(), world = dist::get_world_size();

  // Uneven shards: rank k owns rows [first[k], first[k + 1]), the last rank the most.
  std::vector<int64_t> first(static_cast<size_t>(world) + 1, 0);
  const int64_t weights = int64_t{world} * (world + 1) / 2;
  for (int k = 0; k < world; ++k)
    first[size_t(k) + 1] = kRows * ((k + 1) * int64_t{k + 2} / 2) / weights;
  const auto owner_of = [&](int64_t id) {
    int k = 0;
    while (id >= first[size_t(k) + 1]) ++k;
    return k;
  };
  const auto value = [](int64_t row, int64_t j) { return float(row) + float(j) / 100.0f; };

  const int64_t mine = first[size_t(rank) + 1] - first[size_t(rank)];
  ts::Tensor shard = dist::window_empty({mine, kDim}, ts::kFloat32);  // memory peers can map
  float* s = shard.data_ptr<float>();
  for (int64_t i = 0; i < mine; ++i)
    for (int64_t j = 0; j < kDim; ++j) s[i * kDim + j] = value(first[size_t(rank)] + i, j);

  auto window = dist::new_window();
  window->tensor_register(shard);  // collective: every rank's sizes are known from here on

  // Lookup: one get per id, straight from the owner's shard.
  std::mt19937 rng(7 + static_cast<unsigned>(rank));
  std::uniform_int_distribution<int64_t> pick(0, kRows - 1);
  std::vector<int64_t> ids(kBatch);
  for (auto& id : ids) id = pick(rng);
  ts::Tensor rows = ts::empty({kBatch, kDim}, ts::TensorOptions(ts::kFloat32));
  for (int64_t q = 0; q < kBatch; ++q) {
    const int64_t id = ids[size_t(q)];
    const int owner = owner_of(id);
    window->get(rows.select(0, q), owner, (id - first[size_t(owner)]) * kDim);
  }
  int64_t wrong = 0;
  const float* r = rows.data_ptr<float>();
  for (int64_t q = 0; q < kBatch; ++q)
    for (int64_t j = 0; j < kDim; ++j) wrong += r[q * kDim + j] != value(ids[size_t(q)], j);

  // Update: every rank adds 1 to the first column of row (first[k]) of every rank k.
  window->fence();
  ts::Tensor one = ts::ones({1}, ts::TensorOptions(ts::kFloat32));
  for (int k = 0; k < world; ++k)
    if (first[size_t(k) + 1] > first[size_t(k)]) window->accumulate(one, k, 0);
  window->fence();
  if (mine > 0) wrong += s[0] != value(first[size_t(rank)], 0) + float(world);

  window->tensor_deregister();
  std::printf("rank %d of %d: %lld rows looked up, %lld wrong values\n", rank, world,
              static_cast<long long>(kBatch), static_cast<long long>(wrong));
  dist::destroy_process_group();
  return wrong == 0 ? 0 : 1;
}
