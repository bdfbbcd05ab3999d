// The mpi backend's own cases (the shared Reduce and Movement suites run on it too): the world
// group from MPI_COMM_WORLD, rank and size checks, subgroups, p2p beside collectives, timeouts
// and bad arguments. Every process runs every test: collectives are matched across the job.
#include <atomic>

#include "dist_test_util.h"

namespace tessera::testing {
namespace {

int job_size() {
  return mpi_job_size();
}

TEST(Mpi, WorldGroupIsMpiCommWorld) {
  EXPECT_TRUE(dist::is_backend_available("mpi"));
  EXPECT_EQ(dist::get_backend(), "mpi");
  EXPECT_EQ(dist::get_world_size(), job_size());
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  ASSERT_NE(rank, nullptr);
  EXPECT_EQ(dist::get_rank(), std::atoi(rank));
  // Every rank contributes its rank + 1.
  Tensor t = filled(kInt64, 3, [&](int64_t i) { return (dist::get_rank() + 1) * (i + 1); });
  dist::all_reduce(t);
  const int n = job_size();
  EXPECT_EQ(as_doubles(t),
            (std::vector<double>{n * (n + 1) / 2.0, n * (n + 1.0), n * (n + 1) * 1.5}));
}

TEST(Mpi, RankOrSizeThatDisagreesWithMpiCommWorldNamesBoth) {
  const int n = job_size(), r = dist::get_rank();
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  {
    dist::WorldScope scope;
    expect_error_mentions(
        [&] { dist::init_process_group("mpi", store, r, n + 1, kTestTimeout); },
        {"mpi", "world_size " + std::to_string(n + 1), fmt::format("rank {} of {}", r, n)});
    EXPECT_FALSE(dist::is_initialized());
  }
  if (n > 1) {
    dist::WorldScope scope;
    const int wrong = (r + 1) % n;
    expect_error_mentions(
        [&] { dist::init_process_group("mpi", store, wrong, n, kTestTimeout); },
        {"mpi", fmt::format("rank {}", wrong), fmt::format("rank {} of {}", r, n)});
  }
}

TEST(Mpi, SubgroupsFromNewGroup) {
  const int n = job_size(), r = dist::get_rank();
  std::vector<int> evens, odds;
  for (int k = 0; k < n; ++k) (k % 2 ? odds : evens).push_back(k);
  auto even = dist::new_group(evens);
  auto odd = dist::new_group(odds);
  auto last = dist::new_group({n - 1});
  auto all = dist::new_group();
  for (const auto& [g, members] :
       {std::pair{even, evens}, std::pair{odd, odds}, std::pair{last, std::vector<int>{n - 1}},
        std::pair{all, std::vector<int>{}}}) {
    std::vector<int> m = members;
    if (m.empty())
      for (int k = 0; k < n; ++k) m.push_back(k);
    const bool member = std::find(m.begin(), m.end(), r) != m.end();
    ASSERT_EQ(g->is_member(), member);
    if (!member) continue;
    EXPECT_EQ(dist::get_world_size(g), static_cast<int>(m.size()));
    Tensor t = filled(kFloat32, 5, [&](int64_t i) { return r * 10 + i; });
    dist::all_reduce(t, dist::ReduceOp::SUM, g);
    double ranks = 0;
    for (int k : m) ranks += k;
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_EQ(as_doubles(t)[i], ranks * 10 + static_cast<double>(m.size()) * i);
    // Group ranks in broadcast: the last member's tensor reaches all.
    Tensor b = filled(kInt32, 4, [&](int64_t i) { return r * 100 + i; });
    dist::broadcast(b, m.back(), g);
    EXPECT_EQ(as_doubles(b), (std::vector<double>{m.back() * 100.0, m.back() * 100.0 + 1,
                                                  m.back() * 100.0 + 2, m.back() * 100.0 + 3}));
  }
  for (auto& g : {even, odd, last, all}) dist::destroy_process_group(g);
  dist::barrier();
}

TEST(Mpi, PendingRecvDoesNotHoldUpCollectives) {
  const int n = job_size(), r = dist::get_rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  Tensor got = empty({6}, TensorOptions(kFloat64));
  auto recv = dist::irecv(got, prev, nullptr, 7);
  // Collectives complete while the recv waits for a send that comes after them.
  for (int k = 0; k < 3; ++k) {
    Tensor t = filled(kInt32, 2, [&](int64_t) { return 1; });
    dist::all_reduce(t);
    EXPECT_EQ(as_doubles(t), (std::vector<double>{double(n), double(n)}));
  }
  // No rank sends before every rank entered this barrier.
  EXPECT_FALSE(recv->is_completed());
  dist::barrier();
  Tensor mine = filled(kFloat64, 6, [&](int64_t i) { return r + i / 8.0; });
  auto send = dist::isend(mine, next, nullptr, 7);
  EXPECT_TRUE(send->wait());
  EXPECT_TRUE(recv->wait());
  EXPECT_EQ(as_doubles(got),
            as_doubles(filled(kFloat64, 6, [&](int64_t i) { return prev + i / 8.0; })));
}

TEST(Mpi, SkippedCollectiveTimesOutAndAbortsTheGroup) {
  const int n = job_size(), r = dist::get_rank();
  auto g = dist::new_group();
  dist::Backend& b = g->backend();
  std::atomic<int> hooks{0};
  auto handle = b.register_abort_hook([&](const std::string&) { ++hooks; });
  if (r == 0) {
    // Rank 0 all-reduces alone (or, on one rank, waits for a recv nobody sends).
    Tensor t = filled(kFloat32, 4, [](int64_t) { return 1; });
    dist::WorkPtr w;
    std::string op;
    if (n > 1) {
      dist::AllreduceOptions o;
      o.timeout = dist::Milliseconds(300);
      w = b.allreduce(t, o);
      op = "all_reduce";
    } else {
      dist::SendRecvOptions o;
      o.tag = 3;
      o.timeout = dist::Milliseconds(300);
      w = b.recv(t, 0, o);
      op = "recv";
    }
    expect_error_mentions([&] { w->wait(); }, {"mpi", op, "op #1", "timed out after 300ms"});
    EXPECT_EQ(w->status(), dist::WorkStatus::TIMED_OUT);
    // The group aborts right after the Work's error is published: error() and the hooks
    // (on the worker thread) follow.
    for (int k = 0; k < 500 && hooks.load() == 0; ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_NE(b.error(), nullptr);
    EXPECT_EQ(hooks.load(), 1);
    // Later ops fail at once with the first error.
    auto later = b.barrier({});
    EXPECT_EQ(later->status(), dist::WorkStatus::ERROR);
    expect_error_mentions([&] { later->wait(); }, {"timed out", op});
  }
  dist::barrier();  // the others never touch the group: its comm stays abandoned
  dist::destroy_process_group(g);
}

TEST(Mpi, BadArgumentsNameOpArgumentExpectedAndGiven) {
  const int n = job_size();
  dist::Backend& b = dist::group_world()->backend();
  Tensor t = empty({4}, TensorOptions(kFloat32));
  dist::BroadcastOptions bo;
  bo.root_rank = n;
  expect_error_mentions([&] { b.broadcast(t, bo); },
                        {"broadcast", "root_rank", fmt::format("[0, {})", n), std::to_string(n)});
  dist::SendRecvOptions so;
  so.tag = -1;
  expect_error_mentions([&] { b.send(t, 0, so); }, {"send", "tags in [0, ", "got -1"});
  expect_error_mentions([&] { b.recv(t, n, {}); }, {"recv", "src", "got " + std::to_string(n)});
  dist::AllreduceOptions ao;
  ao.reduce_op = dist::ReduceOp::BAND;
  expect_error_mentions([&] { b.allreduce(t, ao); }, {"all_reduce", "BAND", "float32"});
  ao.reduce_op = dist::ReduceOp::SUM;
  ao.timeout = dist::Milliseconds(0);
  expect_error_mentions([&] { b.allreduce(t, ao); }, {"all_reduce", "timeout", "positive", "0ms"});
  expect_error_mentions([&] { b.allgather(std::vector<Tensor>(n + 1, t), t, {}); },
                        {"all_gather", "tensor_list", fmt::format("one tensor per rank ({})", n),
                         fmt::format("got {}", n + 1)});
  // The group still works after the rejected calls.
  EXPECT_TRUE(b.barrier({})->wait());
}

TEST(Mpi, RecvOfTheWrongSizeFailsNamingBothSizes) {
  // On a group of its own: the failed recv aborts it.
  const int n = job_size(), r = dist::get_rank();
  auto g = dist::new_group();
  dist::Backend& b = g->backend();
  const int receiver = n > 1 ? 1 : 0;
  if (r == 0) {
    Tensor four = filled(kFloat32, 4, [](int64_t i) { return i; });
    auto send = b.send(four, receiver, {});
    if (receiver != 0) {
      EXPECT_TRUE(send->wait());
    }
  }
  if (r == receiver) {
    Tensor eight = empty({8}, TensorOptions(kFloat32));
    auto recv = b.recv(eight, 0, {});
    expect_error_mentions([&] { recv->wait(); }, {"mpi recv", "16 bytes", "expects 32"});
    EXPECT_EQ(recv->status(), dist::WorkStatus::ERROR);
  }
  dist::barrier();
  dist::destroy_process_group(g);
}

TEST(Mpi, AbortFailsLaterOpsAndRunsTheHooksOnce) {
  auto g = dist::new_group();
  dist::Backend& b = g->backend();
  std::atomic<int> hooks{0};
  auto handle = b.register_abort_hook([&](const std::string& reason) {
    EXPECT_NE(reason.find("stop here"), std::string::npos) << reason;
    ++hooks;
  });
  b.abort("stop here");
  b.abort("again");
  EXPECT_EQ(hooks.load(), 1);
  auto w = b.barrier({});
  expect_error_mentions([&] { w->wait(); }, {"aborted", "stop here"});
  dist::destroy_process_group(g);
}

TEST(Mpi, ShutdownFailsAnUnmatchedRecv) {
  const int r = dist::get_rank();
  auto g = dist::new_group();
  Tensor t = empty({3}, TensorOptions(kInt32));
  auto recv = g->backend().recv(t, r, {});  // from itself, never sent
  dist::destroy_process_group(g);
  expect_error_mentions([&] { recv->wait(); }, {"shut down", "unmatched"});
}

TEST(Mpi, ShutDownGroupRefusesOps) {
  auto g = dist::new_group();
  dist::destroy_process_group(g);
  expect_error_mentions([&] { g->backend().barrier({}); }, {"barrier", "shut down"});
}

// Suspend frees the communicator and resume makes a new one, on the world group and on a
// subgroup made by MPI_Comm_create_group; ops in between are refused.
TEST(Mpi, SuspendFreesTheCommunicatorAndResumeMakesANewOne) {
  const int n = job_size(), r = dist::get_rank();
  std::vector<int> evens;
  for (int k = 0; k < n; k += 2) evens.push_back(k);
  auto sub = dist::new_group(evens);  // every rank calls it, members or not
  std::vector<dist::Backend*> groups{&dist::group_world()->backend()};
  if (sub->is_member()) groups.push_back(&sub->backend());
  // A window made before the suspend works after the resume (MPI holds the window's own
  // communicator; its fence barriers through the group, so not while suspended).
  // (OpenMPI has no one-sided component for one process: tests/distributed/mpi windows.)
  dist::WindowPtr w, later;  // `later` registers only after the suspends
  if (n > 1) {
    w = dist::group_world()->backend().new_window();
    w->tensor_register(dist::window_empty({4}, kFloat32));
    later = dist::group_world()->backend().new_window();
  }
  for (dist::Backend* b : groups) {
    const int members = b->size();
    for (int round = 1; round <= 2; ++round) {
      EXPECT_FALSE(b->memory_stats().suspended);
      b->suspend();
      const dist::MemoryStats s = b->memory_stats();
      EXPECT_TRUE(s.suspended);
      EXPECT_EQ(s.suspend_count, static_cast<uint64_t>(round));
      EXPECT_EQ(s.held_bytes, 0u);  // MPI's memory is not visible here
      Tensor x = ones({2}, TensorOptions(kFloat32));
      expect_error_mentions([&] { b->allreduce(x, {}); },
                            {"all_reduce", "is suspended; call resume() first"});
      expect_error_mentions([&] { b->suspend(); }, {"suspend", "suspended already"});
      expect_error_mentions([&] { b->new_window(); }, {"new_window", "suspended"});
      b->resume();
      if (w && b == groups.front()) {
        const int next = (r + 1) % n;
        w->put(full({2}, 10.0 * round + r, TensorOptions(kFloat32)), next, 1);
        w->fence();
        Tensor back = empty({2}, TensorOptions(kFloat32));
        w->get(back, next, 1);
        EXPECT_EQ(as_doubles(back), (std::vector<double>(2, 10.0 * round + r)));
        w->fence();
      }
      EXPECT_FALSE(b->memory_stats().suspended);
      Tensor t = filled(kInt64, 3, [&](int64_t i) { return (r + 1) * (i + 1); });
      EXPECT_TRUE(b->allreduce(t, {})->wait());
      double expected = 0;
      for (int k = 0; k < n; ++k)
        if (members == n || k % 2 == 0) expected += k + 1;
      EXPECT_EQ(as_doubles(t)[2], 3 * expected);
    }
    expect_error_mentions([&] { b->resume(); }, {"resume", "not suspended"});
  }
  if (w) {
    w->tensor_deregister();
    // On the communicator the last resume made, not the one its backend had when it was made.
    later->tensor_register(dist::window_empty({3}, kInt32));
    later->put(full({3}, static_cast<double>(r), TensorOptions(kInt32)), (r + 1) % n, 0);
    later->fence();
    EXPECT_EQ(as_doubles(later->get_tensor()), std::vector<double>(3, (r + n - 1) % n));
    later->tensor_deregister();
  }
  dist::destroy_process_group(sub);
  dist::barrier();
}

TEST(Mpi, SuspendIsRefusedWhileARecvIsPending) {
  const int r = dist::get_rank();
  auto& b = dist::group_world()->backend();
  Tensor t = empty({3}, TensorOptions(kInt32));
  auto recv = b.recv(t, r, {});  // from itself: matched by the send below
  expect_error_mentions([&] { b.suspend(); }, {"suspend", "1 sends/recvs pending"});
  EXPECT_FALSE(b.memory_stats().suspended);
  EXPECT_TRUE(b.send(full({3}, 4.0, TensorOptions(kInt32)), r, {})->wait());
  EXPECT_TRUE(recv->wait());
  b.suspend();  // now it may
  b.resume();
  dist::barrier();
}

}  // namespace
}  // namespace tessera::testing
