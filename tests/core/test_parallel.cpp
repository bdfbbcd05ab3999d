// The thread pool: every task of every job runs exactly once, jobs of different sizes back to
// back (a worker preempted between two claims must not take an index of the next job), an
// exception reaches the caller, nested calls run serially.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "tessera/core/parallel.h"

namespace tessera {
namespace {

struct ThreadCount {
  explicit ThreadCount(int n) : saved(get_num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(saved); }
  int saved;
};

TEST(ThreadPool, EveryTaskOfEveryJobRunsOnce) {
  const ThreadCount threads(4);  // more workers than cores: preemption between claims
  std::vector<std::atomic<int>> runs(64);
  for (int job = 0; job < 20000; ++job) {
    const int64_t n = job % 3 == 0 ? 64 : 2 + job % 5;
    for (int64_t i = 0; i < n; ++i) runs[i].store(0);
    parallel_tasks(n, [&](int64_t i) { runs[i].fetch_add(1); });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "job " << job << " task " << i;
  }
}

TEST(ThreadPool, ExceptionReachesTheCallerAfterTheOtherTasks) {
  const ThreadCount threads(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(parallel_tasks(16,
                              [&](int64_t i) {
                                ran.fetch_add(1);
                                if (i == 3) throw std::runtime_error("task 3");
                              }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 16);
}

TEST(ThreadPool, NestedCallsRunSerially) {
  const ThreadCount threads(2);
  std::atomic<int> inner{0};
  parallel_tasks(4, [&](int64_t) {
    EXPECT_TRUE(in_parallel_region());
    parallel_tasks(8, [&](int64_t) { inner.fetch_add(1); });
  });
  EXPECT_EQ(inner.load(), 32);
  EXPECT_FALSE(in_parallel_region());
}

}  // namespace
}  // namespace tessera
