// Backend::suspend / resume / memory_stats on the shm and gloo backends, with ranks as threads.
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
  const bool shm = GetParam() == "shm";
  run_world(
      3,
      [&](int r) {
        dist::Backend& b = dist::group_world()->backend();
        EXPECT_EQ(all_reduce_sum(r), 3.0);
        const dist::MemoryStats active = b.memory_stats();
        EXPECT_FALSE(active.suspended);
        if (shm) {
          EXPECT_GT(active.total_bytes, 1u << 20);  // two 1 MiB halves per rank at least
          EXPECT_EQ(active.held_bytes, active.total_bytes);
        } else {
          EXPECT_EQ(active.connections, 2u);
        }
        for (int round = 1; round <= 2; ++round) {
          b.suspend();
          const dist::MemoryStats s = b.memory_stats();
          EXPECT_TRUE(s.suspended);
          EXPECT_EQ(s.suspend_count, static_cast<uint64_t>(round));
          EXPECT_EQ(s.held_bytes, 0u);
          EXPECT_EQ(s.released_bytes, active.total_bytes);
          EXPECT_EQ(s.connections, 0u);
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

TEST_P(Suspend, AReconfigurableGroupSuspendsItsCurrentCommunicator) {
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
        b.suspend();
        if (r == 1) return;  // never resumes
        EXPECT_THROW(b.resume(), Error);
        EXPECT_TRUE(b.memory_stats().suspended);
      },
      GetParam(), 1500ms);
}

INSTANTIATE_TEST_SUITE_P(Backends, Suspend, ::testing::Values("shm", "gloo"),
                         [](const auto& info) { return info.param; });

TEST(SuspendRefused, BackendsWithoutItSaySo) {
  run_world(
      1,
      [](int) {
        dist::Backend& b = dist::group_world()->backend();
        EXPECT_THROW(b.suspend(), NotImplementedError);
        EXPECT_THROW(b.resume(), NotImplementedError);
        EXPECT_THROW(b.memory_stats(), NotImplementedError);
      },
      "lazy");
}

}  // namespace
}  // namespace tessera::testing
