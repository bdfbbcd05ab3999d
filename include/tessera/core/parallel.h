// Tessera's one intra-op thread pool. Every parallel kernel runs on it; nothing else in the
// process should spin. Idle workers spin briefly (so back-to-back ops stay cheap), then
// sleep on a condition variable. OpenBLAS, when called, runs single-threaded inside it.
//
// parallel_for splits [begin, end) into at most num_threads() contiguous chunks of at least
// `grain_size` iterations; fn(chunk_begin, chunk_end) runs once per chunk. A call from inside
// a parallel region runs serially. An exception in any chunk is rethrown to the caller after
// every chunk has finished.
#pragma once

#include <cstdint>
#include <functional>

namespace tessera {

// Number of threads parallel_for may use (default: the cores this process may run on, or
// TESSERA_NUM_THREADS / OMP_NUM_THREADS when set).
int get_num_threads();
void set_num_threads(int n);
bool in_parallel_region();

void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& fn);

// Runs fn(task) for task in [0, num_tasks) spread over the pool; tasks are claimed
// dynamically, so uneven tasks balance. Each task runs exactly once.
void parallel_tasks(int64_t num_tasks, const std::function<void(int64_t)>& fn);

// Default grain for elementwise loops: below this many elements a loop stays on one thread.
inline constexpr int64_t kGrainSize = 32768;

}  // namespace tessera
