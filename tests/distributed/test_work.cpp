// The Work and Future contract.
#include <atomic>
#include <chrono>
#include <thread>

#include "dist_test_util.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

std::exception_ptr some_error(const char* what) {
  return std::make_exception_ptr(dist::DistBackendError(what));
}

TEST(Work, StatusIsPublishedExactlyOnce) {
  dist::Work w("test:op", {}, 10s, 7);
  EXPECT_EQ(w.status(), dist::WorkStatus::NOT_STARTED);
  EXPECT_FALSE(w.is_completed());
  EXPECT_TRUE(w.mark_started());
  EXPECT_EQ(w.status(), dist::WorkStatus::IN_PROGRESS);
  EXPECT_TRUE(w.mark_failed(dist::WorkStatus::ERROR, some_error("peer died")));
  // Cancelled work can never race to success afterwards.
  EXPECT_FALSE(w.mark_completed());
  EXPECT_FALSE(w.mark_failed(dist::WorkStatus::TIMED_OUT, some_error("late")));
  EXPECT_FALSE(w.mark_started());
  EXPECT_EQ(w.status(), dist::WorkStatus::ERROR);
  EXPECT_TRUE(w.is_completed());
  EXPECT_FALSE(w.is_success());
  expect_error_mentions([&] { w.wait(); }, {"peer died"});
  expect_error_mentions([&] { w.get_future()->wait(); }, {"peer died"});
}

TEST(Work, WaitWithTimeoutThrowsWhileTheOpRuns) {
  dist::Work w("test:slow", {}, 10s, 3);
  w.mark_started();
  expect_error_mentions([&] { w.wait(20ms); }, {"test:slow", "op #3", "wait timeout", "20ms"});
  EXPECT_EQ(w.status(), dist::WorkStatus::IN_PROGRESS);
  std::thread t([&] { w.mark_completed(); });
  EXPECT_TRUE(w.wait(10s));
  t.join();
  EXPECT_TRUE(w.is_success());
}

TEST(Work, WaitWithoutTimeoutEndsAfterTheOpDeadline) {
  dist::Work w("test:stuck", {}, 50ms, 1);
  std::atomic<int> stuck_calls{0};
  w.set_on_stuck([&](const std::exception_ptr&) { ++stuck_calls; });
  w.mark_started();
  // Nobody reports the op: wait() gives up after the deadline plus its grace period.
  expect_error_mentions([&] { w.wait(); }, {"test:stuck", "timed out"});
  EXPECT_EQ(w.status(), dist::WorkStatus::TIMED_OUT);
  EXPECT_EQ(stuck_calls.load(), 1);
  EXPECT_FALSE(w.mark_completed());
}

TEST(Work, FutureCallbacksRunExactlyOnce) {
  auto w = std::make_shared<dist::Work>("test:op", std::vector<Tensor>{empty({2})}, 10s);
  std::atomic<int> before{0}, after{0};
  auto chained = w->get_future()->then([&](dist::Future& f) {
    ++before;
    EXPECT_FALSE(f.has_error());
    return f.value();
  });
  w->mark_started();
  w->mark_completed();
  w->mark_completed();
  w->get_future()->then([&](dist::Future&) {
    ++after;  // already complete: runs now, on this thread
    return std::vector<Tensor>{};
  });
  EXPECT_EQ(before.load(), 1);
  EXPECT_EQ(after.load(), 1);
  EXPECT_EQ(chained->value().size(), 1u);
}

// The Future is made on first use: asked for after the op finished, it is complete already
// and holds the outputs; asked for while the op finishes, its callbacks still run once.
TEST(Work, AFutureAskedForLateIsCompleteAndRunsCallbacksOnce) {
  const Tensor out = empty({3});
  dist::Work done("test:op", {out}, 10s);
  done.mark_started();
  done.mark_completed();
  const auto f = done.get_future();
  EXPECT_TRUE(f->completed());
  ASSERT_EQ(f->value(1s).size(), 1u);
  EXPECT_TRUE(f->value(1s)[0].is_same(out));
  EXPECT_EQ(done.get_future(), f);  // one Future per Work
  for (int k = 0; k < 200; ++k) {
    auto w = std::make_shared<dist::Work>("test:race", std::vector<Tensor>{}, 10s);
    w->mark_started();
    std::atomic<int> calls{0};
    std::thread t([&] { w->mark_completed(); });
    w->get_future()->then([&](dist::Future&) {
      ++calls;
      return std::vector<Tensor>{};
    });
    t.join();
    EXPECT_TRUE(w->wait());
    EXPECT_EQ(calls.load(), 1) << "round " << k;
  }
}

// publish() takes no lock: a waiter that is about to sleep while the status is published is
// still woken, and of two racing publishers exactly one wins, with its own status and error.
TEST(Work, RacingPublishersAndWaitersAgree) {
  for (int k = 0; k < 300; ++k) {
    auto w = std::make_shared<dist::Work>("test:race", std::vector<Tensor>{}, 10s);
    w->mark_started();
    std::atomic<bool> go{false};
    std::atomic<int> wins{0};
    // Start together, then wait a little: spinning (publishes racing the waiter's own spin)
    // or sleeping (past the waiter's spin, into its condition variable).
    const auto start = [&](int n) {
      while (!go.load()) {
      }
      if (k % 2) {
        for (int i = 0; i < n * 100; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);
      } else if (n > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(n * 10));
      }
    };
    std::thread ok([&] {
      start(k % 7);
      if (w->mark_completed()) ++wins;
    });
    std::thread failed([&] {
      start(k % 5);
      if (w->mark_failed(dist::WorkStatus::ERROR, some_error("peer died"))) ++wins;
    });
    bool waited = false;
    std::thread waiter([&] {
      start(k % 3);
      try {
        w->wait(5s);  // a lost wake-up would throw the wait timeout here
        waited = true;
      } catch (const dist::DistTimeoutError& e) {
        ADD_FAILURE() << "round " << k << ": " << e.what();
      } catch (const dist::DistBackendError&) {
        waited = true;  // the failure won
      }
    });
    go = true;
    ok.join();
    failed.join();
    waiter.join();
    EXPECT_TRUE(waited) << "round " << k;
    EXPECT_EQ(wins.load(), 1) << "round " << k;
    EXPECT_EQ(w->exception() != nullptr, w->status() == dist::WorkStatus::ERROR) << "round " << k;
    EXPECT_TRUE(w->status() == dist::WorkStatus::COMPLETED ||
                w->status() == dist::WorkStatus::ERROR);
  }
}

TEST(Work, ThenCarriesErrorsAndCallbackExceptions) {
  auto f = std::make_shared<dist::Future>();
  auto g = f->then([](dist::Future& prev) -> std::vector<Tensor> {
    if (prev.has_error()) std::rethrow_exception(prev.exception());
    return {};
  });
  auto h = f->then(
      [](dist::Future&) -> std::vector<Tensor> { throw dist::DistError("callback failed"); });
  f->set_error(some_error("first"));
  EXPECT_FALSE(f->mark_completed({}));
  expect_error_mentions([&] { g->wait(1s); }, {"first"});
  expect_error_mentions([&] { h->wait(1s); }, {"callback failed"});
}

TEST(Work, BackendWorkCompletesAndItsFutureHoldsTheOutput) {
  run_ranks(2, [&](int r, dist::Backend& b) {
    Tensor t = filled(kFloat32, 3, [&](int64_t i) { return r + i; });
    auto w = b.allreduce(t, {});
    std::atomic<int> calls{0};
    auto f = w->get_future()->then([&](dist::Future& prev) {
      ++calls;
      return prev.value();
    });
    EXPECT_TRUE(w->wait());
    EXPECT_TRUE(w->is_success());
    EXPECT_EQ(w->exception(), nullptr);
    const auto v = f->value(10s);
    EXPECT_EQ(calls.load(), 1);
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(v[0].is_same(t));
    EXPECT_EQ(as_doubles(t), (std::vector<double>{1, 3, 5}));
  });
}

}  // namespace
}  // namespace tessera::testing
