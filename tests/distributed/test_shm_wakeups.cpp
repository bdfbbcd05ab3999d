// Sleeping waiters and the publishes that wake them, with the collectives' steps published
// lightly (membarrier(2): the waiter pays the barrier before it sleeps) and with a fence on
// every publish. A publish that missed a sleeper would leave it asleep until the end of its
// slice, which the test lengthens to a second: every wait sleeps, and their total is bounded
// far below one slice, far above what a busy machine adds (a woken thread that waits for a
// core: ~5 ms a wake-up with two busy loops beside the test).
#include <chrono>
#include <cmath>
#include <thread>

#include "dist_test_util.h"
#include "distributed/backends/shm/doorbell.h"
#include "distributed/backends/shm/segment.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Both ranks' segments: light only when both may publish lightly.
void expect_agreement(bool light0, bool light1, bool expected) {
  dist::HashStore store(kTestTimeout);
  bool seen[2] = {!expected, !expected};
  run_threads(2, [&](int r) {
    auto segment = dist::shm::Segment::rendezvous(store, r, 2, 4096, 4096, Clock::now() + 30s,
                                                  r == 0 ? light0 : light1);
    seen[r] = segment->light_publish();
  });
  EXPECT_EQ(seen[0], expected) << "ranks said " << light0 << ", " << light1;
  EXPECT_EQ(seen[1], expected) << "ranks said " << light0 << ", " << light1;
}

TEST(ShmLightPublish, ASegmentPublishesLightlyOnlyWhenEveryRankMay) {
  expect_agreement(false, false, false);
  expect_agreement(true, false, false);
  expect_agreement(false, true, false);
  if (!dist::shm::light_publish_supported())
    GTEST_SKIP() << "this kernel lacks MEMBARRIER_CMD_GLOBAL_EXPEDITED (or "
                    "TESSERA_SHM_MEMBARRIER=0)";
  expect_agreement(true, true, true);
}

class ShmWakeups : public ::testing::TestWithParam<bool> {};

// Each round one rank arrives 100 us late, past the waiter's ~20 us of spinning, so the
// other sleeps on its doorbell and must be woken by the late rank's publish: a header step
// (8 B all_reduce), steps on the flags (4 KiB all_reduce, pieces of a 4 KiB buffer) and a
// barrier, with the late rank alternating. A rank's 15 waits take about 15 x 0.2 ms when
// every wake-up comes (15 x 5 ms on a busy machine), over a second when one does not.
TEST_P(ShmWakeups, EveryPublishWakesASleepingPeer) {
  dist::ShmOptions options = small_buffers();
  options.light_publish = GetParam();
  struct Slice {
    Slice() { dist::shm::set_wait_slice_ns_for_testing(1'000'000'000); }
    ~Slice() { dist::shm::set_wait_slice_ns_for_testing(dist::shm::kSliceNs); }
  } slice;
  constexpr int kRounds = 30, kEach = kRounds / 3;
  double waited_ms[2] = {0, 0};
  bool light[2] = {false, false};
  run_ranks(
      2,
      [&](int r, dist::Backend& b) {
        Tensor tiny = filled(kFloat32, 2, [&](int64_t i) { return r + i; });
        Tensor big = filled(kFloat32, 1024, [&](int64_t i) { return r * i; });
        for (int round = 0; round < kRounds; ++round) {
          const bool late = round % 2 == r;
          if (late) std::this_thread::sleep_for(100us);
          const auto t0 = Clock::now();
          switch (round % 3) {
            case 0:
              b.allreduce(tiny, {})->wait();
              break;
            case 1:
              b.allreduce(big, {})->wait();
              break;
            default:
              b.barrier({})->wait();
          }
          if (!late)
            waited_ms[r] += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        }
        // Sums of rank 0's and rank 1's values, doubled each time the op ran.
        const double doubled = std::pow(2, kEach - 1);
        EXPECT_EQ(as_doubles(tiny), (std::vector<double>{doubled, 3 * doubled}));
        EXPECT_EQ(as_doubles(big)[5], 5 * doubled);
        light[r] = options.light_publish.value_or(false) && dist::shm::light_publish_supported();
      },
      options);
  for (int r = 0; r < 2; ++r)
    EXPECT_LT(waited_ms[r], 750.0)
        << "rank " << r << " (light publishes: " << light[r]
        << ") waited in all that long for its late peer: some publishes did not wake it";
}

INSTANTIATE_TEST_SUITE_P(Publishes, ShmWakeups, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Light" : "Fenced");
                         });

}  // namespace
}  // namespace tessera::testing
