// Faults: ranks that disagree, a rank that never comes (timeout), a rank that aborts, a
// process that is killed. Every case must end in an error on every rank, never a hang.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "dist_test_util.h"
#include "distributed/backends/shm/peer_watch.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

TEST(ShmFaults, MismatchedSizesFailOnEveryRankAndTheGroupStaysUsable) {
  run_ranks(3, [&](int r, dist::Backend& b) {
    Tensor t = filled(kFloat32, r == 1 ? 20 : 10, [](int64_t) { return 1; });
    auto w = b.allreduce(t, {});
    expect_error_mentions([&] { w->wait(); },
                          {"all_reduce", "different arguments", "rank 0: all_reduce(float32, 10",
                           "rank 1: all_reduce(float32, 20"});
    EXPECT_EQ(w->status(), dist::WorkStatus::ERROR);
    Tensor ok = filled(kFloat32, 4, [](int64_t) { return 1; });
    EXPECT_TRUE(b.allreduce(ok, {})->wait());
    EXPECT_EQ(as_doubles(ok), (std::vector<double>{3, 3, 3, 3}));
  });
}

// Sizes that send one rank down the single-copy form (large) and its peers down the segment
// form (small), or through the descriptor line (tiny): the first step is the same in all
// three, so every rank reports the mismatch and the group stays usable.
TEST(ShmFaults, MismatchesAcrossTheLargeAndSmallFormsAreReported) {
  dist::ShmOptions o = small_buffers();
  o.buffer_bytes = 1 << 20;
  run_ranks(
      3,
      [&](int r, dist::Backend& b) {
        const int64_t sizes[] = {60000, 2000, 3};  // float32: 240 KB, 8 KB, 12 B
        Tensor in = empty({sizes[r]}, TensorOptions(kFloat32));
        std::vector<Tensor> outs;
        for (int k = 0; k < 3; ++k) outs.push_back(empty({sizes[r]}, TensorOptions(kFloat32)));
        auto w = b.allgather(outs, in, {});
        expect_error_mentions([&] { w->wait(); }, {"all_gather", "different arguments",
                                                   "rank 0: all_gather(float32, 60000",
                                                   "rank 2: all_gather(float32, 3"});
        Tensor t = empty({r == 0 ? 400000 : 5}, TensorOptions(kFloat32));
        auto ar = b.allreduce(t, {});
        expect_error_mentions([&] { ar->wait(); }, {"all_reduce", "different arguments"});
        Tensor ok = filled(kFloat32, 300000, [](int64_t i) { return i % 5; });
        EXPECT_TRUE(b.allreduce(ok, {})->wait());
        EXPECT_EQ(ok.data_ptr<float>()[7], 6.f);
      },
      o);
}

TEST(ShmFaults, DifferentCollectivesAndDtypesAreReported) {
  run_ranks(2, [&](int r, dist::Backend& b) {
    Tensor t = empty({8}, TensorOptions(r == 0 ? kFloat32 : kInt32));
    auto w = r == 0 ? b.allreduce(t, {}) : b.broadcast(t, {});
    expect_error_mentions([&] { w->wait(); }, {"all_reduce(float32", "broadcast(int32"});
    std::vector<int64_t> in = {1, 1},
                         out = r == 0 ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{2, 0};
    Tensor src = empty({2}, TensorOptions(kFloat32)), dst = empty({2}, TensorOptions(kFloat32));
    auto a2a = b.alltoall_base(dst, src, out, in, {});
    expect_error_mentions([&] { a2a->wait(); },
                          {"all_to_all", "rank 0 sends 1 elements to rank 1", "rank 1 expects 2"});
    EXPECT_TRUE(b.barrier({})->wait());
  });
}

TEST(ShmFaults, AMissingRankTimesOutAndLaterOpsFail) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  dist::BackendPtr b0, b1;
  std::thread t([&] { b1 = dist::make_shm_backend(store, 1, 2, kTestTimeout, small_buffers()); });
  b0 = dist::make_shm_backend(store, 0, 2, kTestTimeout, small_buffers());
  t.join();
  // Rank 1 never joins this all_reduce.
  dist::AllreduceOptions o;
  o.timeout = 200ms;
  Tensor x = empty({4}, TensorOptions(kFloat32));
  auto w = b0->allreduce(x, o);
  expect_error_mentions([&] { w->wait(); }, {"all_reduce", "timed out after 200ms", "rank(s) 1"});
  EXPECT_EQ(w->status(), dist::WorkStatus::TIMED_OUT);
  // The communicator is aborted: later ops fail at once, here and on the peer.
  expect_error_mentions([&] { b0->barrier({})->wait(); }, {"aborted", "timed out"});
  // Rank 1 may still complete the op rank 0 gave up on (rank 0 had written its share before it
  // aborted), but the next one fails with rank 0's error instead of waiting for its timeout.
  const auto start = std::chrono::steady_clock::now();
  try {
    b1->allreduce(x, {})->wait();
  } catch (const dist::DistBackendError&) {
  }
  expect_error_mentions([&] { b1->barrier({})->wait(); }, {"rank 0 aborted"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);  // the peer's error, not a timeout
  EXPECT_NE(b0->error(), nullptr);
}

TEST(ShmFaults, AbortFailsPendingWorkOnEveryRank) {
  run_ranks(3, [&](int r, dist::Backend& b) {
    Tensor x = empty({1000}, TensorOptions(kFloat64));
    if (r == 2) {
      std::this_thread::sleep_for(50ms);
      b.abort("the test aborts rank 2");
      expect_error_mentions([&] { b.allreduce(x, {})->wait(); }, {"aborted", "rank 2"});
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    auto w = b.allreduce(x, {});
    expect_error_mentions([&] { w->wait(); }, {"rank 2 aborted", "the test aborts rank 2"});
    EXPECT_EQ(w->status(), dist::WorkStatus::ERROR);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  });
}

TEST(ShmFaults, PendingSendFailsWhenItsPeerAborts) {
  run_ranks(2, [&](int r, dist::Backend& b) {
    if (r == 1) {
      b.abort("rank 1 is going away");
      return;
    }
    // Larger than the ring: it can only complete if rank 1 receives.
    auto w = b.send(empty({100000}, TensorOptions(kUInt8)), 1, {});
    expect_error_mentions([&] { w->wait(); }, {"rank 1 aborted", "going away"});
  });
}

// A FileStore path of this test process's own (the forked rank and this one share it), not
// there yet.
std::string fresh_store_path(const std::string& prefix) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))).string();
  std::filesystem::remove(path);
  return path;
}

// A real process is killed between two collectives: the survivor's op fails with an error
// naming the dead rank, well before the op's own timeout.
TEST(ShmFaults, KilledProcessTurnsTheOpIntoAnError) {
  const std::string path = fresh_store_path("tessera-killed-");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int rc = 1;
    try {
      auto store = std::make_shared<dist::FileStore>(path, kTestTimeout);
      auto b = dist::make_shm_backend(store, 1, 2, kTestTimeout, small_buffers());
      Tensor x = empty({16}, TensorOptions(kFloat32));
      b->allreduce(x, {})->wait();
      ::raise(SIGKILL);
    } catch (...) {
    }
    ::_exit(rc);
  }
  auto store = std::make_shared<dist::FileStore>(path, kTestTimeout);
  auto b = dist::make_shm_backend(store, 0, 2, kTestTimeout, small_buffers());
  Tensor x = empty({16}, TensorOptions(kFloat32));
  EXPECT_TRUE(b->allreduce(x, {})->wait());
  const auto start = std::chrono::steady_clock::now();
  auto w = b->allreduce(x, {});  // rank 1 dies instead of joining
  expect_error_mentions([&] { w->wait(); }, {"rank 1", "has died"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  std::filesystem::remove(path);
}

// The watch alone: a peer's process that ends (here still a zombie, not reaped) is marked
// gone and this rank's doorbell rings, with no liveness poll involved.
TEST(ShmFaults, PeerWatchMarksAnEndedProcessAndRingsTheWaiter) {
  const std::string path = fresh_store_path("tessera-watch-");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      dist::FileStore store(path, kTestTimeout);
      auto segment = dist::shm::Segment::rendezvous(store, 1, 2, 4096, 4096,
                                                    std::chrono::steady_clock::now() + 30s, false);
      store.wait({"go"}, kTestTimeout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "PeerWatch test child: %s\n", e.what());
      ::_exit(2);
    }
    ::_exit(0);
  }
  dist::FileStore store(path, kTestTimeout);
  auto segment = dist::shm::Segment::rendezvous(store, 0, 2, 4096, 4096,
                                                std::chrono::steady_clock::now() + 30s, false);
  {
    dist::shm::PeerWatch watch(*segment, 0);
    const uint32_t rung = segment->control(0).doorbell.load();
    EXPECT_FALSE(watch.gone(0));
    EXPECT_FALSE(watch.gone(1)) << "the child ended early (its exit status follows)";
    store.set("go", dist::Bytes{1});
    // The watcher marks the peer, then rings: a waiter woken by the ring must find the mark.
    // So the ring may come just after the mark is seen here; wait for both.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while ((!watch.gone(1) || segment->control(0).doorbell.load() == rung) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    EXPECT_TRUE(watch.gone(1));
    EXPECT_NE(segment->control(0).doorbell.load(), rung);
    EXPECT_FALSE(watch.gone(0));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera::testing
