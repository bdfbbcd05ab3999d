// Backend::suspend / resume / memory_stats on the shm, gloo, lazy and hierarchical backends,
// with ranks as threads (the mpi backend's run under mpirun: tests/distributed/mpi).
#include "dist_test_util.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

double all_reduce_sum(double value) {
  Tensor x = full({3}, value, TensorOptions(kFloat64));
  dist::all_reduce(x);
  return x[2].item<double>();
}

class Suspend : public ::testing::TestWithParam<std::string> {};

TEST_P(Suspend, ReleasesTheBuffersAndResumeRestoresThem) {
  // An shm segment is held by shm, by lazy's full communicator (made by the first collective)
  // and by hierarchical's host communicator; gloo connections by gloo and hierarchical's flat
  // group (one host: no leaders' group).
  const bool segment = GetParam() != "gloo";
  const uint64_t connections = GetParam() == "gloo" || GetParam() == "hierarchical" ? 2 : 0;
  run_world(
      3,
      [&](int r) {
        dist::Backend& b = dist::group_world()->backend();
        EXPECT_EQ(all_reduce_sum(r), 3.0);
        const dist::MemoryStats active = b.memory_stats();
        EXPECT_FALSE(active.suspended);
        if (segment) {
          EXPECT_GT(active.total_bytes, 1u << 20);  // two 1 MiB halves per rank at least
          EXPECT_EQ(active.held_bytes, active.total_bytes);
        } else {
          EXPECT_EQ(active.total_bytes, 0u);
        }
        EXPECT_EQ(active.connections, connections);
        for (int round = 1; round <= 2; ++round) {
          b.suspend();
          expect_released(b.memory_stats(), round, active);
          Tensor x = ones({2}, TensorOptions(kFloat32));
          try {
            dist::all_reduce(x);
            ADD_FAILURE() << "an op on a suspended backend ran";
          } catch (const dist::DistBackendError& e) {
            EXPECT_NE(std::string(e.what()).find("is suspended; call resume() first"),
                      std::string::npos)
                << e.what();
          }
          EXPECT_THROW(b.suspend(), dist::DistBackendError);
          b.resume();
          EXPECT_FALSE(b.memory_stats().suspended);
          EXPECT_EQ(b.memory_stats().held_bytes, active.total_bytes);
          EXPECT_EQ(all_reduce_sum(r * round), 3.0 * round);
        }
        EXPECT_THROW(b.resume(), dist::DistBackendError);  // not suspended
        // Point to point works again too.
        Tensor msg = full({4}, static_cast<double>(r), TensorOptions(kInt32));
        if (r == 0) dist::send(msg, 1, nullptr, 3);
        if (r == 1) {
          dist::recv(msg, 0, nullptr, 3);
          EXPECT_EQ(msg[3].item<int64_t>(), 0);
        }
      },
      GetParam());
}

TEST_P(Suspend, IsRefusedWhileASendOrRecvIsPending) {
  run_world(
      2,
      [&](int r) {
        dist::Backend& b = dist::group_world()->backend();
        Tensor t = empty({4}, TensorOptions(kFloat32));
        dist::WorkPtr pending;
        if (r == 0) pending = dist::irecv(t, 1, nullptr, 5);
        if (r == 0) {
          try {
            b.suspend();
            ADD_FAILURE() << "suspended with a recv pending";
          } catch (const dist::DistBackendError& e) {
            EXPECT_NE(std::string(e.what()).find("1 sends/recvs pending"), std::string::npos)
                << e.what();
          }
        }
        dist::barrier();
        if (r == 1) dist::send(full({4}, 2.0, TensorOptions(kFloat32)), 0, nullptr, 5);
        if (r == 0) pending->wait();
        b.suspend();  // now it may
        b.resume();
        EXPECT_EQ(all_reduce_sum(1.0), 2.0);
      },
      GetParam());
}

class SuspendReconfigurable : public ::testing::TestWithParam<std::string> {};

TEST_P(SuspendReconfigurable, SuspendsTheCurrentCommunicator) {
  run_world(
      2,
      [&](int r) {
        dist::Backend& b = dist::group_world()->backend();
        b.suspend();
        EXPECT_TRUE(b.memory_stats().suspended);
        b.resume();
        EXPECT_EQ(all_reduce_sum(r), 1.0);
      },
      GetParam(), kTestTimeout, /*enable_reconfigure=*/true);
}

TEST_P(Suspend, AResumeWithoutThePeersTimesOutAndStaysSuspended) {
  run_world(
      2,
      [&](int r) {
        dist::Backend& b = dist::group_world()->backend();
        EXPECT_EQ(all_reduce_sum(r), 1.0);  // (lazy: makes its communicator)
        b.suspend();
        if (r == 1) return;  // never resumes
        EXPECT_THROW(b.resume(), Error);
        EXPECT_TRUE(b.memory_stats().suspended);
      },
      GetParam(), 1500ms);
}

INSTANTIATE_TEST_SUITE_P(Backends, Suspend,
                         ::testing::Values("shm", "gloo", "lazy", "hierarchical"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Backends, SuspendReconfigurable, ::testing::Values("shm", "gloo"),
                         [](const auto& info) { return info.param; });

// The lazy backend suspends the pair channels it made and its full communicator; one made
// after the resume starts active, and one never made holds nothing.
TEST(SuspendLazy, SuspendsEveryChannelMadeAndMakesNewOnesAfterResume) {
  run_world(
      3,
      [](int r) {
        dist::Backend& b = dist::group_world()->backend();
        EXPECT_EQ(b.memory_stats().total_bytes, 0u);  // nothing made yet
        Tensor msg = full({4}, static_cast<double>(r), TensorOptions(kInt32));
        // Channels 0-1 and 1-2; 0-2 is never used before the suspend.
        if (r == 0) dist::send(msg, 1, nullptr, 1);
        if (r == 1) {
          dist::recv(msg, 0, nullptr, 1);
          dist::send(msg, 2, nullptr, 2);
        }
        if (r == 2) dist::recv(msg, 1, nullptr, 2);
        EXPECT_EQ(msg[0].item<int64_t>(), 0);
        const dist::MemoryStats channels = b.memory_stats();
        EXPECT_GT(channels.total_bytes, 0u);
        EXPECT_EQ(all_reduce_sum(r), 3.0);  // makes the full communicator
        const dist::MemoryStats active = b.memory_stats();
        EXPECT_GT(active.total_bytes, channels.total_bytes);
        b.suspend();
        const dist::MemoryStats s = b.memory_stats();
        EXPECT_TRUE(s.suspended);
        EXPECT_EQ(s.held_bytes, 0u);
        EXPECT_EQ(s.released_bytes, active.total_bytes);
        expect_error_mentions([&] { dist::send(msg, (r + 1) % 3, nullptr, 3); },
                              {"send", "lazy", "is suspended; call resume() first"});
        b.resume();
        EXPECT_EQ(b.memory_stats().held_bytes, active.total_bytes);
        // The old channels carry again, and 0-2 is made now.
        Tensor got = empty({4}, TensorOptions(kInt32));
        if (r == 0) {
          dist::send(full({4}, 7.0, TensorOptions(kInt32)), 2, nullptr, 4);
          dist::recv(got, 1, nullptr, 5);
          EXPECT_EQ(got[3].item<int64_t>(), 8);
        }
        if (r == 1) dist::send(full({4}, 8.0, TensorOptions(kInt32)), 0, nullptr, 5);
        if (r == 2) {
          dist::recv(got, 0, nullptr, 4);
          EXPECT_EQ(got[3].item<int64_t>(), 7);
        }
        EXPECT_FALSE(b.memory_stats().suspended);
        EXPECT_EQ(all_reduce_sum(r), 3.0);
      },
      "lazy");
}

// A recv whose own timeout ended while its channel was still being set up (the peer never
// came): the channel is half made, and the suspend says so instead of leaving it behind.
TEST(SuspendLazy, IsRefusedWhileAChannelIsStillBeingSetUp) {
  run_world(
      2,
      [](int r) {
        if (r == 1) return;  // never talks to rank 0
        dist::Backend& b = dist::group_world()->backend();
        Tensor t = empty({2}, TensorOptions(kFloat32));
        dist::SendRecvOptions o;
        o.timeout = 100ms;  // the channel's set-up has the group's 4 s
        dist::WorkPtr w = b.recv(t, 1, o);
        EXPECT_THROW(w->wait(), dist::DistTimeoutError);  // after the timeout and a grace
        expect_error_mentions([&] { b.suspend(); },
                              {"suspend", "still setting up its channel to rank 1"});
        EXPECT_FALSE(b.memory_stats().suspended);
      },
      "lazy", 4000ms);
}

// A backend from outside (a plugin) that does not override them says so.
TEST(SuspendRefused, BackendsWithoutItSaySo) {
  class Bare : public dist::Backend {
   public:
    Bare() : dist::Backend(0, 1) {}
    std::string name() const override { return "bare"; }
    void abort(const std::string&) override {}
    void shutdown() override {}
    std::exception_ptr error() const override { return nullptr; }
  };
  Bare b;
  expect_error_mentions([&] { b.suspend(); }, {"suspend", "'bare'", "cannot suspend"});
  EXPECT_THROW(b.resume(), NotImplementedError);
  EXPECT_THROW(b.memory_stats(), NotImplementedError);
}

}  // namespace
}  // namespace tessera::testing
