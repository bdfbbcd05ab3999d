// A caller that waits on a collective while the shm progress thread is idle runs it on its
// own thread (ShmBackend::run_inline); one issued with async_op = false does not even wake
// the progress thread. Whichever thread runs an op, ops run in issue order
// and a posted send/recv keeps the progress thread in charge: these cases mix the two paths.
#include <chrono>
#include <thread>

#include "dist_test_util.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

// Queued collectives waited on last-first: only the front op may run inline, so the others
// must still run, in order, and every result is right.
TEST(ShmInline, WaitsInAnyOrderKeepTheIssueOrder) {
  run_ranks(3, [&](int r, dist::Backend& b) {
    std::vector<Tensor> ts;
    std::vector<dist::WorkPtr> ws;
    for (int k = 0; k < 4; ++k) {
      ts.push_back(filled(kFloat32, 5 + k, [&](int64_t i) { return r * 10 + k + i; }));
      ws.push_back(b.allreduce(ts.back(), {}));
    }
    for (int k = 3; k >= 0; --k) EXPECT_TRUE(ws[k]->wait());
    for (int k = 0; k < 4; ++k) {
      std::vector<double> want;
      for (int64_t i = 0; i < 5 + k; ++i) want.push_back(30 + 3.0 * (k + i));
      EXPECT_EQ(as_doubles(ts[k]), want) << "op " << k;
    }
  });
}

// A recv posted before a collective keeps the progress thread driving (the collective then
// runs there, not inline); the send that completes the recv comes after the collective.
TEST(ShmInline, APendingRecvAndASynchronousCollective) {
  run_ranks(2, [&](int r, dist::Backend& b) {
    Tensor got = zeros({3});
    dist::WorkPtr recv;
    if (r == 0) recv = b.recv(got, 1, {});
    Tensor t = filled(kFloat64, 4, [&](int64_t i) { return r + i; });
    EXPECT_TRUE(b.allreduce(t, {})->wait());
    EXPECT_EQ(as_doubles(t), (std::vector<double>{1, 3, 5, 7}));
    if (r == 1) {
      std::this_thread::sleep_for(20ms);  // rank 0's recv stays posted meanwhile
      EXPECT_TRUE(b.send(ones({3}), 0, {})->wait());
    } else {
      EXPECT_TRUE(recv->wait());
      EXPECT_EQ(as_doubles(got), (std::vector<double>{1, 1, 1}));
    }
    // And back to inline-eligible collectives once the recv is done.
    for (int k = 0; k < 50; ++k) {
      Tensor s = full({2}, static_cast<double>(r + k), kFloat32);
      EXPECT_TRUE(b.allreduce(s, {})->wait());
      EXPECT_EQ(as_doubles(s), (std::vector<double>{1.0 + 2 * k, 1.0 + 2 * k}));
    }
  });
}

// async_op = false promises a wait at once, so the op does not wake the progress thread. An
// op issued so and never waited for must still run (the progress thread's idle slice).
TEST(ShmInline, ASynchronousCollectiveNobodyWaitsForStillRuns) {
  run_ranks(2, [&](int r, dist::Backend& b) {
    Tensor t = filled(kFloat32, 3, [&](int64_t i) { return r + i; });
    dist::AllreduceOptions o;
    o.async_op = false;
    auto w = b.allreduce(t, o);
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!w->is_completed() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(w->is_completed());
    EXPECT_TRUE(w->is_success());
    EXPECT_EQ(as_doubles(t), (std::vector<double>{1, 3, 5}));
  });
}

// A recv posted first keeps the progress thread in charge, asleep on the shared doorbell:
// synchronous collectives (which do not ring it when issued) must still reach it.
TEST(ShmInline, SynchronousCollectivesWhileARecvIsPosted) {
  run_ranks(2, [&](int r, dist::Backend& b) {
    Tensor got = zeros({2});
    dist::WorkPtr recv;
    if (r == 0) recv = b.recv(got, 1, {});
    dist::AllreduceOptions sync;
    sync.async_op = false;
    for (int k = 0; k < 20; ++k) {
      Tensor t = full({3}, static_cast<double>(r + k), kFloat32);
      EXPECT_TRUE(b.allreduce(t, sync)->wait());
      EXPECT_EQ(as_doubles(t), (std::vector<double>(3, 1.0 + 2 * k))) << k;
    }
    if (r == 1) {
      EXPECT_TRUE(b.send(ones({2}), 0, {})->wait());
    } else {
      EXPECT_TRUE(recv->wait());
      EXPECT_EQ(as_doubles(got), (std::vector<double>{1, 1}));
    }
  });
}

// Synchronous ops queued behind an asynchronous one cannot run inline (only the front op
// may): their waits ring the progress thread, which runs all of them in issue order.
TEST(ShmInline, SynchronousOpsBehindAnAsynchronousOneRunOnTheProgressThread) {
  run_ranks(2, [&](int r, dist::Backend& b) {
    Tensor big = full({1 << 20}, static_cast<double>(r + 1), kFloat32);
    auto first = b.allreduce(big, {});
    dist::AllreduceOptions sync;
    sync.async_op = false;
    std::vector<Tensor> ts;
    std::vector<dist::WorkPtr> ws;
    for (int k = 0; k < 3; ++k) {
      ts.push_back(full({2}, static_cast<double>(r * 10 + k), kFloat64));
      ws.push_back(b.allreduce(ts.back(), sync));
    }
    for (int k = 2; k >= 0; --k) EXPECT_TRUE(ws[k]->wait());
    EXPECT_TRUE(first->wait());
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(as_doubles(ts[k]), (std::vector<double>{10.0 + 2 * k, 10.0 + 2 * k})) << k;
    EXPECT_EQ(big[12345].item<float>(), 3.0f);
  });
}

}  // namespace
}  // namespace tessera::testing
