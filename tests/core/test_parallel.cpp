// The thread pool: every task of every job runs exactly once, jobs of different sizes back to
// back (a worker preempted between two claims must not take an index of the next job), an
// exception reaches the caller, nested calls run serially, and the threads that slept bound to
// a core (parallel.cpp's file comment) get their own affinity back.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
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

std::vector<int> cpus_of(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> my_cpus() {
  cpu_set_t set;
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  return cpus_of(set);
}

// Jobs after idle gaps (the workers sleep) whose worker task outlasts the caller's (the caller
// sleeps too): every task runs with the process's affinity, and the caller ends with its own,
// also when the caller itself was bound to one core.
TEST(ThreadPool, ThreadsThatSleptGetTheirAffinityBack) {
  const std::vector<int> all = my_cpus();
  if (all.size() < 2) GTEST_SKIP() << "needs two cores, has " << all.size();
  const ThreadCount threads(2);
  for (const bool caller_bound : {false, true}) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(all[1], &one);
    if (caller_bound) {
      ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    }
    const std::vector<int> caller = caller_bound ? std::vector<int>{all[1]} : all;
    const std::thread::id me = std::this_thread::get_id();
    for (int round = 0; round < 3; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      std::atomic<bool> worker_in{false};
      std::vector<int> worker_mask;
      parallel_tasks(2, [&](int64_t) {
        if (std::this_thread::get_id() == me) {  // leave the other task to the worker
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          while (!worker_in.load() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::yield();
          return;
        }
        worker_in.store(true);
        worker_mask = my_cpus();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the caller sleeps
      });
      ASSERT_TRUE(worker_in.load()) << "no worker joined within 5 s in round " << round;
      EXPECT_EQ(worker_mask, all) << "the worker's affinity in round " << round;
      EXPECT_EQ(my_cpus(), caller) << "the caller's affinity in round " << round
                                   << (caller_bound ? " (bound to one core)" : "");
    }
    if (caller_bound) {
      cpu_set_t every;
      CPU_ZERO(&every);
      for (int c : all) CPU_SET(c, &every);
      ASSERT_EQ(sched_setaffinity(0, sizeof(every), &every), 0);
    }
  }
}

}  // namespace
}  // namespace tessera
