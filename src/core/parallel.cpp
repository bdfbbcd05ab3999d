// The intra-op thread pool.
//
// One job runs at a time: the caller publishes it (a generation number bump), workers join it
// and, with the caller, claim task indices from the job's own atomic counter until none are
// left; the caller then withdraws the job (no one joins it any more) and waits until every
// claimed task has finished and every worker that joined has left. Each job has its own
// counters, so a worker that was preempted between two claims can never take an index of
// the next job (with one shared counter it could, running a task twice and leaving the
// pending count below zero: the caller then waited forever). Workers that find no new job spin for
// about 50 us (cheap back-to-back ops), then sleep on a condition variable, so an idle Tessera
// process never competes with another pool for the cores. A parallel_for from inside a task, or
// from a second user thread while a job is running, runs serially on the calling thread.
#include "tessera/core/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tessera/core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TS_CPU_RELAX() _mm_pause()
#else
#define TS_CPU_RELAX() ((void)0)
#endif

namespace tessera {

namespace {

thread_local bool t_in_parallel = false;

int default_num_threads() {
  for (const char* var : {"TESSERA_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* env = std::getenv(var)) {
      const int n = std::atoi(env);
      if (n > 0) return n;
    }
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads) : num_threads_(num_threads) { start_workers(); }
  ~ThreadPool() { stop_workers(); }

  int num_threads() const { return num_threads_; }

  void resize(int n) {
    std::lock_guard<std::mutex> submit(submit_mu_);
    stop_workers();
    num_threads_ = n;
    start_workers();
  }

  // Runs task(i) for i in [0, num_tasks). Returns false (running nothing) when the pool is
  // busy with another caller's job; the caller then runs the work itself.
  bool run(int64_t num_tasks, const std::function<void(int64_t)>& task) {
    std::unique_lock<std::mutex> submit(submit_mu_, std::try_to_lock);
    if (!submit.owns_lock()) return false;
    Job job(task, num_tasks);
    {
      std::lock_guard<std::mutex> lk(mu_);
      job_ = &job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    work(job);  // the caller works too
    {
      std::lock_guard<std::mutex> lk(mu_);
      job_ = nullptr;  // from here on no worker joins; `job` lives until the joined ones leave
    }
    // Wait for tasks claimed by workers and for the workers to leave: spin briefly, then sleep.
    const auto finished = [&] {
      return job.pending.load(std::memory_order_acquire) == 0 &&
             job.joined.load(std::memory_order_acquire) == 0;
    };
    for (int spin = 0; !finished() && spin < 20000; ++spin) TS_CPU_RELAX();
    if (!finished()) {
      std::unique_lock<std::mutex> lk(mu_);
      done_cv_.wait(lk, finished);
    }
    if (job.error) std::rethrow_exception(job.error);
    return true;
  }

 private:
  // One parallel_tasks call. It lives on the caller's stack; workers touch it only between
  // joining (under mu_, while it is published) and leaving (joined - 1).
  struct Job {
    Job(const std::function<void(int64_t)>& t, int64_t n) : task(t), num_tasks(n), pending(n) {}
    const std::function<void(int64_t)>& task;
    const int64_t num_tasks;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> pending;  // tasks not yet finished
    std::atomic<int> joined{0};    // workers inside the job
    std::mutex error_mu;
    std::exception_ptr error;  // the first exception of any task
  };

  void start_workers() {
    stop_ = false;
    // Each worker starts from the generation current now, so a stop published before it
    // first runs is still seen as new.
    const uint64_t start = generation_.load(std::memory_order_acquire);
    for (int i = 1; i < num_threads_; ++i)
      workers_.emplace_back([this, start] { worker_loop(start); });
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  // Claims and runs the job's tasks until none are left.
  void work(Job& job) {
    const bool was_parallel = t_in_parallel;
    t_in_parallel = true;
    for (;;) {
      const int64_t i = job.next.fetch_add(1, std::memory_order_acq_rel);
      if (i >= job.num_tasks) break;
      try {
        job.task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(job.error_mu);
        if (!job.error) job.error = std::current_exception();
      }
      if (job.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lk(mu_);
        done_cv_.notify_all();
      }
    }
    t_in_parallel = was_parallel;
  }

  void worker_loop(uint64_t seen) {
    for (;;) {
      // Spin briefly for the next job, then sleep.
      bool got = false;
      for (int spin = 0; spin < 20000; ++spin) {
        if (generation_.load(std::memory_order_acquire) != seen) {
          got = true;
          break;
        }
        TS_CPU_RELAX();
      }
      if (!got) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      }
      Job* job = nullptr;
      {
        std::lock_guard<std::mutex> lk(mu_);
        seen = generation_.load(std::memory_order_acquire);
        if (stop_) return;
        job = job_;
        if (job) job->joined.fetch_add(1, std::memory_order_acq_rel);
      }
      if (!job) continue;
      work(*job);
      std::lock_guard<std::mutex> lk(mu_);  // the caller may be waiting for the last to leave
      job->joined.fetch_sub(1, std::memory_order_acq_rel);
      done_cv_.notify_all();
    }
  }

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex submit_mu_;  // one job at a time
  std::mutex mu_;         // guards job_, stop_ and the generation's publication
  std::condition_variable cv_, done_cv_;
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
  Job* job_ = nullptr;  // the published job, while workers may join it
};

ThreadPool& pool() {
  static ThreadPool p(default_num_threads());
  return p;
}

}  // namespace

int get_num_threads() {
  return pool().num_threads();
}

void set_num_threads(int n) {
  TS_CHECK(n >= 1, ValueError, "set_num_threads(): expected a positive number, but got {}", n);
  TS_CHECK(!t_in_parallel, RuntimeError,
           "set_num_threads(): cannot change the thread count from inside a parallel region");
  if (n != pool().num_threads()) pool().resize(n);
}

bool in_parallel_region() {
  return t_in_parallel;
}

void parallel_tasks(int64_t num_tasks, const std::function<void(int64_t)>& fn) {
  if (num_tasks <= 0) return;
  if (num_tasks == 1 || t_in_parallel || get_num_threads() == 1 || !pool().run(num_tasks, fn)) {
    for (int64_t i = 0; i < num_tasks; ++i) fn(i);
  }
}

void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (begin >= end) return;
  const int64_t range = end - begin;
  const int64_t grain = std::max<int64_t>(grain_size, 1);
  const int64_t chunks = std::min<int64_t>(get_num_threads(), (range + grain - 1) / grain);
  if (chunks <= 1 || t_in_parallel) {
    fn(begin, end);
    return;
  }
  const int64_t chunk = (range + chunks - 1) / chunks;
  parallel_tasks(chunks, [&](int64_t c) {
    const int64_t b = begin + c * chunk;
    const int64_t e = std::min(end, b + chunk);
    if (b < e) fn(b, e);
  });
}

}  // namespace tessera
