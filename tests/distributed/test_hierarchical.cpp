// The hierarchical backend with ranks as threads that claim different hosts: every collective
// through the host leaders (all_to_all flat over gloo), one host and uneven hosts.
#include "dist_test_util.h"
#include "tessera/ops/shape.h"

namespace tessera::testing {
namespace {

// Runs fn(rank, backend) on hosts.size() threads; rank r says it runs on hosts[r].
void run_hosts(const std::vector<std::string>& hosts,
               const std::function<void(int, dist::Backend&)>& fn) {
  const int n = static_cast<int>(hosts.size());
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  run_threads(n, [&](int r) {
    dist::HierarchicalOptions o;
    o.host = hosts[r];
    auto b = dist::make_hierarchical_backend(store, r, n, kTestTimeout, o);
    EXPECT_EQ(b->name(), "hierarchical");
    fn(r, *b);
    b->shutdown();
  });
}

void check_reductions(int r, dist::Backend& b, int n) {
  Tensor t = filled(kFloat64, 1000, [&](int64_t i) { return r + i; });
  EXPECT_TRUE(b.allreduce(t, {})->wait());
  const double rank_sum = n * (n - 1) / 2.0;
  EXPECT_EQ(as_doubles(t)[0], rank_sum);
  EXPECT_EQ(as_doubles(t)[999], rank_sum + 999.0 * n);
  dist::AllreduceOptions avg;
  avg.reduce_op = dist::ReduceOp::AVG;
  Tensor a = filled(kFloat32, 5, [&](int64_t) { return 2.0 * r; });
  EXPECT_TRUE(b.allreduce(a, avg)->wait());
  EXPECT_EQ(as_doubles(a)[4], n - 1.0);
  dist::AllreduceOptions mx;
  mx.reduce_op = dist::ReduceOp::MAX;
  Tensor m = filled(kInt32, 3, [&](int64_t i) { return r * 10 + i; });
  EXPECT_TRUE(b.allreduce(m, mx)->wait());
  EXPECT_EQ(as_doubles(m),
            (std::vector<double>{10.0 * (n - 1), 10.0 * (n - 1) + 1, 10.0 * (n - 1) + 2}));
  EXPECT_TRUE(b.barrier({})->wait());
  // broadcast and reduce from every root (a leader or not), through the leaders.
  for (int root = 0; root < n; ++root) {
    Tensor x = filled(kFloat32, 7, [&](int64_t i) { return r == root ? 100.0 + i : -1.0; });
    dist::BroadcastOptions bo;
    bo.root_rank = root;
    EXPECT_TRUE(b.broadcast(x, bo)->wait());
    EXPECT_EQ(as_doubles(x)[6], 106.0) << "broadcast from " << root;
    dist::ReduceOptions ro;
    ro.root_rank = root;
    Tensor y = filled(kFloat64, 4, [&](int64_t i) { return r + i; });
    EXPECT_TRUE(b.reduce(y, ro)->wait());
    if (r == root) {
      EXPECT_EQ(as_doubles(y)[3], rank_sum + 3.0 * n) << "reduce to " << root;
    }
    ro.reduce_op = dist::ReduceOp::AVG;
    Tensor z = filled(kFloat32, 2, [&](int64_t) { return 2.0 * r; });
    EXPECT_TRUE(b.reduce(z, ro)->wait());
    if (r == root) {
      EXPECT_EQ(as_doubles(z)[1], n - 1.0) << "reduce AVG to " << root;
    }
  }
  dist::BroadcastOptions bad;
  bad.root_rank = n;
  expect_error_mentions([&] { b.broadcast(t, bad); },
                        {"broadcast", "root_rank", std::to_string(n)});
  // all_gather_into_tensor, two values per rank.
  Tensor out = empty({n * 2}, TensorOptions(kFloat32));
  EXPECT_TRUE(
      b.allgather_into_tensor(out, full({2}, static_cast<double>(r), kFloat32), {})->wait());
  for (int k = 0; k < n; ++k) EXPECT_EQ(as_doubles(out)[2 * k], k);
}

// Rank r's value i of a block it sends towards rank d: distinct for every (r, d, i).
double value(int r, int d, int64_t i) {
  return 1000.0 * r + 100.0 * d + static_cast<double>(i);
}

void check_movement(int r, dist::Backend& b, int n) {
  constexpr int64_t k = 3;
  const Tensor mine = filled(kFloat32, k, [&](int64_t i) { return value(r, 0, i); });
  // all_gather, both forms.
  std::vector<Tensor> list;
  for (int s = 0; s < n; ++s) list.push_back(full({k}, -1.0, kFloat32));
  EXPECT_TRUE(b.allgather(list, mine, {})->wait());
  Tensor flat = full({n * k}, -1.0, kFloat32);
  EXPECT_TRUE(b.allgather_into_tensor(flat, mine, {})->wait());
  for (int s = 0; s < n; ++s)
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_EQ(as_doubles(list[s])[i], value(s, 0, i)) << "all_gather from " << s;
      EXPECT_EQ(as_doubles(flat)[s * k + i], value(s, 0, i)) << "all_gather_into_tensor";
    }
  for (int root = 0; root < n; ++root) {
    // gather to every root (a leader or not).
    std::vector<Tensor> got;
    if (r == root)
      for (int s = 0; s < n; ++s) got.push_back(full({k}, -1.0, kFloat32));
    dist::GatherOptions go;
    go.root_rank = root;
    EXPECT_TRUE(b.gather(got, mine, go)->wait());
    for (size_t s = 0; s < got.size(); ++s)
      EXPECT_EQ(as_doubles(got[s])[k - 1], value(static_cast<int>(s), 0, k - 1))
          << "gather to " << root << " from " << s;
    // scatter from every root: rank d gets value(root, d, .).
    std::vector<Tensor> parts;
    if (r == root)
      for (int d = 0; d < n; ++d)
        parts.push_back(filled(kInt64, k, [&](int64_t i) { return value(root, d, i); }));
    Tensor part = full({k}, -1.0, kInt64);
    dist::ScatterOptions so;
    so.root_rank = root;
    EXPECT_TRUE(b.scatter(part, parts, so)->wait());
    EXPECT_EQ(as_doubles(part),
              (std::vector<double>{value(root, r, 0), value(root, r, 1), value(root, r, 2)}))
        << "scatter from " << root;
    // reduce leaves every tensor but the root's as it was.
    Tensor x = filled(kFloat64, 2, [&](int64_t i) { return r + i; });
    dist::ReduceOptions ro;
    ro.root_rank = root;
    EXPECT_TRUE(b.reduce(x, ro)->wait());
    if (r != root) {
      EXPECT_EQ(as_doubles(x), (std::vector<double>{1.0 * r, r + 1.0})) << "reduce to " << root;
    }
  }
  // reduce_scatter, both forms: rank d gets the sum (or max) over r of value(r, d, .).
  std::vector<Tensor> ins;
  for (int d = 0; d < n; ++d)
    ins.push_back(filled(kFloat64, k, [&](int64_t i) { return value(r, d, i); }));
  const auto sum_to = [&](int64_t i) {
    double s = 0;
    for (int q = 0; q < n; ++q) s += value(q, r, i);
    return s;
  };
  Tensor out = full({k}, -1.0, kFloat64);
  EXPECT_TRUE(b.reduce_scatter(out, ins, {})->wait());
  EXPECT_EQ(as_doubles(out)[2], sum_to(2));
  dist::ReduceScatterOptions mx;
  mx.reduce_op = dist::ReduceOp::MAX;
  EXPECT_TRUE(b.reduce_scatter_tensor(out, cat(ins), mx)->wait());
  EXPECT_EQ(as_doubles(out)[1], value(n - 1, r, 1));
  dist::ReduceScatterOptions avg;
  avg.reduce_op = dist::ReduceOp::AVG;
  EXPECT_TRUE(b.reduce_scatter_tensor(out, cat(ins), avg)->wait());
  EXPECT_DOUBLE_EQ(as_doubles(out)[0], sum_to(0) / n);
  // all_to_all_single with uneven splits: rank r sends d + extra rows to rank d (with extra 0,
  // nothing to rank 0, and rank 0 receives nothing).
  std::vector<int64_t> in_splits, out_splits;
  Tensor a2a_in, a2a_out;
  for (int extra : {0, 1}) {
    in_splits.clear();
    out_splits.clear();
    std::vector<double> send, expect;
    for (int d = 0; d < n; ++d) {
      in_splits.push_back(d + extra);
      out_splits.push_back(r + extra);
      for (int i = 0; i < d + extra; ++i) send.push_back(value(r, d, i));
      for (int i = 0; i < r + extra; ++i) expect.push_back(value(d, r, i));
    }
    a2a_in = filled(kFloat32, static_cast<int64_t>(send.size()),
                    [&](int64_t i) { return send[static_cast<size_t>(i)]; });
    a2a_out = full({static_cast<int64_t>(expect.size())}, -1.0, kFloat32);
    EXPECT_TRUE(b.alltoall_base(a2a_out, a2a_in, out_splits, in_splits, {})->wait());
    EXPECT_EQ(as_doubles(a2a_out), expect) << "all_to_all with " << extra << " extra rows";
  }
  // Rank 0 expects 2 rows from itself and none from rank 1: every rank's op fails alike, and
  // the group stays usable.
  if (r == 0) out_splits[0] = 2, out_splits[1] = 0;
  auto work = b.alltoall_base(a2a_out, a2a_in, out_splits, in_splits, {});
  expect_error_mentions([&] { work->wait(); }, {"all_to_all", "rank 0 sends 1 elements to rank 0",
                                                "rank 0 expects 2 elements from rank 0"});
  EXPECT_TRUE(b.barrier({})->wait());
  // Bad arguments throw at the call, as on the other backends.
  expect_error_mentions([&] { b.allgather_into_tensor(full({k}, 0.0, kFloat32), mine, {}); },
                        {"all_gather_into_tensor", "output_tensor", std::to_string(n * k)});
  dist::GatherOptions bad;
  bad.root_rank = n;
  expect_error_mentions([&] { b.gather({}, mine, bad); }, {"gather", "dst", std::to_string(n)});
}

void check_all(int r, dist::Backend& b, int n) {
  check_reductions(r, b, n);
  check_movement(r, b, n);
}

TEST(Hierarchical, TwoHostsOfTwo) {
  run_hosts({"a", "a", "b", "b"}, [](int r, dist::Backend& b) { check_all(r, b, 4); });
}

TEST(Hierarchical, UnevenHostsAndInterleavedRanks) {
  run_hosts({"b", "a", "b", "c", "a"}, [](int r, dist::Backend& b) { check_all(r, b, 5); });
}

TEST(Hierarchical, OneHost) {
  run_hosts({"a", "a", "a"}, [](int r, dist::Backend& b) { check_all(r, b, 3); });
}

// Suspend across hosts: the leaders' gloo group goes too (leaders hold one connection more),
// and every collective path works after the resume.
TEST(Hierarchical, SuspendAndResumeAcrossHosts) {
  run_hosts({"b", "a", "b", "c", "a"}, [](int r, dist::Backend& b) {
    const dist::MemoryStats active = b.memory_stats();
    const bool leader = r <= 1 || r == 3;  // the lowest rank of hosts b, a and c
    // Flat gloo: one connection per other rank; leaders: one per other leader too.
    EXPECT_EQ(active.connections, leader ? 4u + 2u : 4u) << "rank " << r;
    EXPECT_GT(active.total_bytes, 0u);  // the host's shm segment
    for (int round = 1; round <= 2; ++round) {
      b.suspend();
      expect_released(b.memory_stats(), round, active);
      expect_error_mentions([&] { b.allreduce(zeros({2}, kFloat32), {}); },
                            {"all_reduce", "hierarchical", "is suspended; call resume() first"});
      expect_error_mentions([&] { b.send(zeros({2}, kFloat32), (r + 1) % 5, {}); },
                            {"send", "hierarchical", "is suspended"});
      b.resume();
      EXPECT_EQ(b.memory_stats().connections, active.connections);
      check_all(r, b, 5);
    }
  });
}

TEST(Hierarchical, AvgOnIntegersIsRefused) {
  run_hosts({"a", "b"}, [](int, dist::Backend& b) {
    dist::AllreduceOptions avg;
    avg.reduce_op = dist::ReduceOp::AVG;
    expect_error_mentions([&] { b.allreduce(zeros({2}, kInt64), avg); },
                          {"all_reduce", "AVG", "int64"});
  });
}

}  // namespace
}  // namespace tessera::testing
