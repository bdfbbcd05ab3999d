// The hierarchical backend with ranks as threads that claim different hosts: all_reduce,
// broadcast, reduce and barrier through the host leaders, flat ops over gloo, one host and
// uneven hosts.
#include "dist_test_util.h"

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
  // A flat op over gloo.
  Tensor out = empty({n * 2}, TensorOptions(kFloat32));
  EXPECT_TRUE(
      b.allgather_into_tensor(out, full({2}, static_cast<double>(r), kFloat32), {})->wait());
  for (int k = 0; k < n; ++k) EXPECT_EQ(as_doubles(out)[2 * k], k);
}

TEST(Hierarchical, TwoHostsOfTwo) {
  run_hosts({"a", "a", "b", "b"}, [](int r, dist::Backend& b) { check_reductions(r, b, 4); });
}

TEST(Hierarchical, UnevenHostsAndInterleavedRanks) {
  run_hosts({"b", "a", "b", "c", "a"}, [](int r, dist::Backend& b) { check_reductions(r, b, 5); });
}

TEST(Hierarchical, OneHost) {
  run_hosts({"a", "a", "a"}, [](int r, dist::Backend& b) { check_reductions(r, b, 3); });
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
