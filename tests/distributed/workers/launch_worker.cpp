// The program the launcher tests run under `tessera launch`: one scenario per first argument.
//
//   allreduce               all_reduce(SUM) of rank+1 over every rank; checks the closed form
//   exit RANK CODE DIR      every rank writes DIR/pid<rank>; rank RANK exits with CODE, the
//                           others sleep (at most 60 s) until the launcher stops them
//   signal RANK SIG DIR     as exit, but rank RANK raises signal SIG
//   fail-first RANK CODE    on the first attempt rank RANK exits with CODE; later attempts
//                           run the allreduce scenario
// Flight Recorder scenarios (2 ranks; TESSERA_FR_BUFFER_SIZE and TESSERA_FR_DUMP_DIR set):
//   fr-mismatch             collective #2 is an all_reduce of 10 elements on rank 0 and 20 on
//                           rank 1: both fail, and dump on the error
//   fr-skip                 rank 1 skips collective #2: rank 0 times out and dumps; rank 1
//                           dumps on request
//
// Exit code 0 on success; 1 with a message on stderr when a check fails.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "tessera/distributed/distributed.h"
#include "tessera/distributed/flight_recorder.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/shape.h"

namespace dist = tessera::distributed;
using namespace std::chrono_literals;

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) throw std::runtime_error(std::string("launch_worker: ") + name + " is not set");
  return std::atoi(v);
}

int run_allreduce() {
  dist::init_process_group("shm", "env://", -1, -1, dist::Milliseconds(60'000));
  const int rank = dist::get_rank(), n = dist::get_world_size();
  tessera::Tensor t = tessera::full({1000}, static_cast<double>(rank + 1));
  dist::all_reduce(t);
  const double expected = n * (n + 1) / 2.0;
  const float* p = t.data_ptr<float>();
  for (int i = 0; i < 1000; ++i) {
    if (p[i] != expected) {
      std::fprintf(stderr, "rank %d: element %d is %g, expected %g\n", rank, i, p[i], expected);
      return 1;
    }
  }
  // Large moves across real processes: shm reads its peers' tensors directly (single copy).
  const int64_t m = 70000;  // float32 per rank: 280 KiB
  const auto value = [](int r, int64_t i) { return static_cast<float>((r * 7919 + i) % 65521); };
  tessera::Tensor mine = tessera::empty({m});
  for (int64_t i = 0; i < m; ++i) mine.data_ptr<float>()[i] = value(rank, i);
  tessera::Tensor gathered = tessera::empty({m * n});
  dist::all_gather_into_tensor(gathered, mine);
  tessera::Tensor from_last = mine.clone();
  dist::broadcast(from_last, n - 1);
  tessera::Tensor exchanged = tessera::empty({m * n});
  dist::all_to_all_single(exchanged, tessera::cat(std::vector<tessera::Tensor>(n, mine)));
  tessera::Tensor summed = tessera::empty({8 * m});  // 2.2 MB: the single-copy all_reduce
  for (int64_t i = 0; i < 8 * m; ++i) summed.data_ptr<float>()[i] = value(rank, i);
  dist::all_reduce(summed);
  for (int64_t i = 0; i < 8 * m; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += value(r, i);
    if (summed.data_ptr<float>()[i] != want) {
      std::fprintf(stderr, "rank %d: the large all_reduce differs at element %lld\n", rank,
                   static_cast<long long>(i));
      return 1;
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < m; ++i) {
      const float want = value(r, i);
      const float g = gathered.data_ptr<float>()[r * m + i],
                  x = exchanged.data_ptr<float>()[r * m + i];
      const float b = from_last.data_ptr<float>()[i];
      if (g != want || x != want || b != value(n - 1, i)) {
        std::fprintf(stderr, "rank %d: moves differ at rank %d element %lld\n", rank, r,
                     static_cast<long long>(i));
        return 1;
      }
    }
  }
  std::printf("rank %d local %d world %d local_world %d restart %d: all_reduce ok (%g)\n", rank,
              env_int("LOCAL_RANK"), n, env_int("LOCAL_WORLD_SIZE"),
              env_int("TESSERA_RESTART_COUNT"), expected);
  std::fflush(stdout);
  dist::destroy_process_group();
  return 0;
}

// Every rank records its pid; `victim` fails with `fail()` once every pid file is there (a
// fixed pause was not enough on a loaded machine under ASan), the others wait to be stopped.
int run_one_fails(int victim, const std::string& dir, const std::function<int()>& fail) {
  const int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  const auto pid_file = [&](int r) {
    return std::filesystem::path(dir) / ("pid" + std::to_string(r));
  };
  {
    // Written aside and renamed, so a reader never sees a file without its pid.
    const auto partial = pid_file(rank).string() + ".partial";
    std::ofstream(partial) << ::getpid() << "\n";
    std::filesystem::rename(partial, pid_file(rank));
  }
  if (rank == victim) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (int r = 0; r < world; ++r) {
      while (!std::filesystem::exists(pid_file(r))) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::fprintf(stderr, "rank %d: rank %d wrote no pid file within 30 s\n", rank, r);
          return 1;
        }
        std::this_thread::sleep_for(10ms);
      }
    }
    return fail();
  }
  std::this_thread::sleep_for(60s);
  std::fprintf(stderr, "rank %d: the launcher did not stop me within 60 s\n", rank);
  return 1;
}

// Both Flight Recorder scenarios: collective #1 agrees, #2 does not.
int run_flight_recorder(const std::string& mode) {
  dist::init_process_group("shm", "env://", -1, -1, dist::Milliseconds(60'000));
  const int rank = dist::get_rank();
  auto recorder = dist::global_flight_recorder();
  if (!recorder) throw std::runtime_error("TESSERA_FR_BUFFER_SIZE is not set");
  tessera::Tensor ok = tessera::full({4}, 1.0);
  dist::all_reduce(ok);
  if (mode == "fr-mismatch") {
    tessera::Tensor t = tessera::full({rank == 0 ? 10 : 20}, 1.0);
    try {
      dist::all_reduce(t);
      std::fprintf(stderr, "rank %d: the mismatched all_reduce succeeded\n", rank);
      return 1;
    } catch (const dist::DistError&) {
      std::printf("rank %d: collective #2 failed as expected\n", rank);
    }
  } else if (rank == 0) {
    dist::AllreduceOptions o;
    o.timeout = dist::Milliseconds(1500);
    tessera::Tensor t = tessera::full({8}, 1.0);
    try {
      dist::group_world()->allreduce(t, o)->wait();
      std::fprintf(stderr, "rank 0: the all_reduce rank 1 skipped succeeded\n");
      return 1;
    } catch (const dist::DistTimeoutError&) {
      std::printf("rank 0: collective #2 timed out as expected\n");
    }
  } else {
    std::this_thread::sleep_for(3s);  // past rank 0's timeout
    recorder->dump("rank 1 skipped collective #2");
  }
  std::fflush(stdout);
  if (!recorder->flush(dist::Milliseconds(30'000))) {
    std::fprintf(stderr, "rank %d: the dump was not written within 30 s\n", rank);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "allreduce") return run_allreduce();
    if (mode == "fr-mismatch" || mode == "fr-skip") return run_flight_recorder(mode);
    if ((mode == "exit" || mode == "signal") && argc == 5) {
      const int victim = std::atoi(argv[2]), value = std::atoi(argv[3]);
      return run_one_fails(victim, argv[4], [&] {
        if (mode == "signal") ::raise(value);
        return value;
      });
    }
    if (mode == "fail-first" && argc == 4) {
      if (env_int("TESSERA_RESTART_COUNT") == 0 && env_int("RANK") == std::atoi(argv[2]))
        return std::atoi(argv[3]);
      return run_allreduce();
    }
    std::fprintf(stderr, "launch_worker: unknown scenario (see the file's header)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_worker: %s\n", e.what());
    return 1;
  }
}
