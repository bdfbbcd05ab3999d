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
//
// Where threads wake. The kernel may wake a sleeping thread on the core of the thread that woke
// it: a worker woken by a caller who is about to work too, or a caller woken by the last
// worker, then shares one core with it while another core idles, until the scheduler balances
// them milliseconds later. On the 2-vCPU VM large ops called after an idle gap ran at one
// thread's speed on two, warm-up and timed call alike. So, when the pool has at most one
// thread per core it may use, a thread binds itself to its current core while it sleeps (and
// is free again once awake), and a caller publishing a job first moves any sleeping worker
// bound to the caller's own core to a core nobody sleeps on (docs/architecture.md, Threads,
// has the measurements).
#include "tessera/core/parallel.h"

#include <sched.h>
#include <unistd.h>

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

// The cores this process may run on, in order (empty when the kernel does not say).
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

cpu_set_t only(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return set;
}

// Binds thread `tid` (0: the calling thread) to `set`. A failure leaves the thread where it
// may run: slower at worst, never wrong.
bool bind_thread(pid_t tid, const cpu_set_t& set) {
  return sched_setaffinity(tid, sizeof(set), &set) == 0;
}

// The calling thread bound to its current core until the end of the scope (spread: else
// nothing), then given its own affinity back.
class SleepHere {
 public:
  explicit SleepHere(bool spread) {
    const int cpu = spread ? sched_getcpu() : -1;
    bound_ =
        cpu >= 0 && sched_getaffinity(0, sizeof(mine_), &mine_) == 0 && bind_thread(0, only(cpu));
    cpu_ = bound_ ? cpu : -1;
  }
  ~SleepHere() {
    if (bound_) bind_thread(0, mine_);
  }
  SleepHere(const SleepHere&) = delete;
  SleepHere& operator=(const SleepHere&) = delete;
  int cpu() const { return cpu_; }

 private:
  cpu_set_t mine_;
  bool bound_ = false;
  int cpu_ = -1;
};

int default_num_threads() {
  for (const char* var : {"TESSERA_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* env = std::getenv(var)) {
      const int n = std::atoi(env);
      if (n > 0) return n;
    }
  }
  if (const auto cpus = allowed_cpus(); !cpus.empty()) return static_cast<int>(cpus.size());
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
      if (spread_) keep_off(sched_getcpu());
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
      const SleepHere here(spread_);
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

  // A worker's thread and, while it sleeps bound to a core, that core (else -1). Under mu_.
  struct Sleeper {
    pid_t tid = 0;
    int cpu = -1;
  };

  void start_workers() {
    stop_ = false;
    cpus_ = allowed_cpus();
    spread_ = num_threads_ > 1 && num_threads_ <= static_cast<int>(cpus_.size());
    sleepers_.assign(static_cast<size_t>(std::max(0, num_threads_ - 1)), Sleeper{});
    // Each worker starts from the generation current now, so a stop published before it
    // first runs is still seen as new.
    const uint64_t start = generation_.load(std::memory_order_acquire);
    for (int i = 1; i < num_threads_; ++i)
      workers_.emplace_back([this, start, i] { worker_loop(start, sleepers_[i - 1]); });
  }

  // Moves the workers asleep on core `cpu` (the caller's) to cores no one sleeps on. Under mu_.
  void keep_off(int cpu) {
    if (cpu < 0) return;
    for (Sleeper& s : sleepers_) {
      if (s.cpu != cpu) continue;
      for (int c : cpus_) {
        const bool taken = c == cpu || std::any_of(sleepers_.begin(), sleepers_.end(),
                                                   [c](const Sleeper& o) { return o.cpu == c; });
        if (!taken && bind_thread(s.tid, only(c))) {
          s.cpu = c;
          break;
        }
      }
    }
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

  void worker_loop(uint64_t seen, Sleeper& me) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      me.tid = gettid();
    }
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
        const SleepHere here(spread_);
        std::unique_lock<std::mutex> lk(mu_);
        me.cpu = here.cpu();  // a caller may move it (keep_off)
        cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        me.cpu = -1;
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
  std::vector<int> cpus_;          // allowed_cpus() when the workers started
  bool spread_ = false;            // whether sleeping threads bind to cores (file comment)
  std::vector<Sleeper> sleepers_;  // one per worker
  std::vector<std::thread> workers_;
  std::mutex submit_mu_;  // one job at a time
  std::mutex mu_;         // guards job_, stop_, sleepers_ and the generation's publication
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
