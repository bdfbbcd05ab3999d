// init_process_group, new_group, destroy_process_group and the free functions, with ranks as
// threads (each in its own WorldScope).
#include <thread>

#include "dist_test_util.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

TEST(ProcessGroup, FreeFunctionsOnTheDefaultGroup) {
  run_world(3, [](int r) {
    EXPECT_TRUE(dist::is_initialized());
    EXPECT_EQ(dist::get_rank(), r);
    EXPECT_EQ(dist::get_world_size(), 3);
    EXPECT_EQ(dist::get_backend(), "shm");
    Tensor t = filled(kFloat32, 4, [&](int64_t i) { return r + i; });
    dist::all_reduce(t, dist::ReduceOp::MAX);
    EXPECT_EQ(as_doubles(t), (std::vector<double>{2, 3, 4, 5}));
    Tensor x = filled(kInt64, 2, [&](int64_t) { return r; });
    auto w = dist::broadcast(x, 2, nullptr, /*async_op=*/true);
    EXPECT_TRUE(w->wait());
    EXPECT_EQ(as_doubles(x), (std::vector<double>{2, 2}));
    // A ring of send/recv by global rank.
    Tensor out = filled(kInt32, 3, [&](int64_t) { return r * 10; });
    Tensor in = empty({3}, TensorOptions(kInt32));
    auto s = dist::isend(out, (r + 1) % 3, nullptr, 5);
    dist::recv(in, (r + 2) % 3, nullptr, 5);
    s->wait();
    EXPECT_EQ(as_doubles(in)[0], ((r + 2) % 3) * 10);
    dist::barrier();
  });
}

TEST(ProcessGroup, NewGroupTranslatesRanksAndNonMembersCannotUseIt) {
  run_world(5, [](int r) {
    auto odd = dist::new_group({3, 1});
    auto all = dist::new_group();
    EXPECT_EQ(odd->global_ranks(), (std::vector<int>{1, 3}));
    EXPECT_EQ(dist::get_world_size(odd), 2);
    if (r == 1 || r == 3) {
      EXPECT_EQ(dist::get_rank(odd), r == 1 ? 0 : 1);
      EXPECT_EQ(dist::get_group_rank(odd, 3), 1);
      EXPECT_EQ(dist::get_global_rank(odd, 0), 1);
      Tensor t = filled(kFloat64, 2, [&](int64_t) { return r; });
      dist::all_reduce(t, dist::ReduceOp::SUM, odd);
      EXPECT_EQ(as_doubles(t), (std::vector<double>{4, 4}));
      Tensor b = filled(kFloat64, 1, [&](int64_t) { return r; });
      dist::broadcast(b, 3, odd);  // src is a global rank
      EXPECT_EQ(as_doubles(b)[0], 3);
      expect_error_mentions([&] { dist::broadcast(b, 2, odd); },
                            {"global rank 2 is not in the group", "1, 3"});
    } else {
      EXPECT_FALSE(odd->is_member());
      expect_error_mentions([&] { dist::all_reduce(empty({1}), dist::ReduceOp::SUM, odd); },
                            {"not a member", std::to_string(r)});
    }
    Tensor t = filled(kInt32, 1, [&](int64_t) { return 1; });
    dist::all_reduce(t, dist::ReduceOp::SUM, all);
    EXPECT_EQ(as_doubles(t)[0], 5);
    dist::destroy_process_group(odd);
  });
}

TEST(ProcessGroup, InitErrorsAreClear) {
  dist::WorldScope scope;
  auto store = std::make_shared<dist::HashStore>(1s);
  expect_error_mentions([&] { dist::init_process_group("nccl", store, 0, 1); },
                        {"unknown backend 'nccl'", "shm"});
  expect_error_mentions([&] { dist::init_process_group("shm", store, 3, 2); },
                        {"rank", "[0, 2)", "3"});
  expect_error_mentions([&] { dist::all_reduce(empty({1})); }, {"not initialised"});
  expect_error_mentions([&] { dist::init_process_group("shm", "udp://x", 0, 1); },
                        {"env://, tcp:// or file://", "udp://x"});
  dist::init_process_group("shm", store, 0, 1, 10s);
  expect_error_mentions([&] { dist::init_process_group("shm", store, 0, 1); },
                        {"already initialised"});
  expect_error_mentions([&] { dist::new_group({0, 0}); }, {"new_group", "twice"});
  dist::destroy_process_group();
  EXPECT_FALSE(dist::is_initialized());
}

TEST(ProcessGroup, MpiBackendSaysWhenTesseraWasBuiltWithoutMpi) {
  if (dist::is_backend_available("mpi"))
    GTEST_SKIP() << "this Tessera has the mpi backend (tessera_tests_mpi tests it under mpirun)";
  dist::WorldScope scope;
  auto store = std::make_shared<dist::HashStore>(1s);
  expect_error_mentions([&] { dist::init_process_group("mpi", store, 0, 1); },
                        {"'mpi'", "built without MPI"});
  expect_error_mentions([&] { dist::init_process_group("mpi", "env://", 0, 1); },
                        {"'mpi'", "built without MPI"});
  EXPECT_FALSE(dist::is_initialized());
}

TEST(ProcessGroup, TcpInitMethodWithRankZeroServing) {
  // Rank 0 serves the store on a port it picks: find a free one first.
  uint16_t port = 0;
  {
    dist::TCPStore probe("127.0.0.1", [] {
      dist::TCPStoreOptions o;
      o.is_server = true;
      return o;
    }());
    port = probe.port();
  }
  const std::string method = "tcp://127.0.0.1:" + std::to_string(port);
  run_threads(2, [&](int r) {
    dist::WorldScope scope;
    dist::init_process_group("shm", method, r, 2, kTestTimeout);
    Tensor t = filled(kFloat32, 1, [&](int64_t) { return r + 1; });
    dist::all_reduce(t);
    EXPECT_EQ(as_doubles(t)[0], 3);
  });
}

}  // namespace
}  // namespace tessera::testing
