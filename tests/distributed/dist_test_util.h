// Helpers for the distributed tests: ranks as threads, tensors filled with closed-form values.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tessera/distributed/distributed.h"
#include "tessera/ops/factory.h"
#include "test_support.h"

namespace tessera::testing {

namespace dist = tessera::distributed;

// Generous for a loaded 2-core machine; every wait in the tests is bounded by it.
inline constexpr dist::Milliseconds kTestTimeout{60'000};

// Small buffers, so modest tensors already take many pipelined pieces.
inline dist::ShmOptions small_buffers() {
  dist::ShmOptions o;
  o.buffer_bytes = 4096;
  o.ring_bytes = 4096;
  return o;
}

// Runs fn(rank) on n threads; an exception on any rank fails the test with its message.
inline void run_threads(int n, const std::function<void(int)>& fn) {
  std::mutex mutex;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// Runs fn(rank, backend) on n threads, each rank with its own shm backend over one HashStore.
inline void run_ranks(int n, const std::function<void(int, dist::Backend&)>& fn,
                      dist::ShmOptions options = small_buffers(),
                      dist::Milliseconds timeout = kTestTimeout) {
  auto store = std::make_shared<dist::HashStore>(timeout);
  run_threads(n, [&](int r) {
    auto backend = dist::make_shm_backend(store, r, n, timeout, options);
    fn(r, *backend);
    backend->shutdown();
  });
}

// Runs fn(rank) on n threads, each with its own World (WorldScope) initialised with
// `backend` over one HashStore; destroys the World after fn and checks it is gone.
inline void run_world(int n, const std::function<void(int)>& fn, const std::string& backend = "shm",
                      dist::Milliseconds timeout = kTestTimeout, bool enable_reconfigure = false) {
  auto store = std::make_shared<dist::HashStore>(timeout);
  run_threads(n, [&](int r) {
    dist::WorldScope scope;
    dist::init_process_group(backend, store, r, n, timeout, enable_reconfigure);
    fn(r);
    dist::destroy_process_group();
    EXPECT_FALSE(dist::is_initialized());
  });
}

// A tensor of `dtype` whose element i on rank r is value(r, i), converted from double.
inline Tensor filled(ScalarType dtype, int64_t numel, const std::function<double(int64_t)>& value) {
  Tensor t = empty({numel}, TensorOptions(kFloat64));
  auto* p = t.data_ptr<double>();
  for (int64_t i = 0; i < numel; ++i) p[i] = value(i);
  return t.to(dtype);
}

// A tensor of `dtype` whose raw bytes are pattern(i) (any dtype, float4 included).
inline Tensor with_bytes(ScalarType dtype, int64_t numel,
                         const std::function<uint8_t(int64_t)>& pattern) {
  Tensor t = empty({numel}, TensorOptions(dtype));
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < t.nbytes(); ++i) p[i] = pattern(i);
  return t;
}

inline std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

// After the round-th suspend of a backend whose stats were `active`: everything it held is
// released (no bytes, no connections).
inline void expect_released(const dist::MemoryStats& s, int round,
                            const dist::MemoryStats& active) {
  EXPECT_TRUE(s.suspended);
  EXPECT_EQ(s.suspend_count, static_cast<uint64_t>(round));
  EXPECT_EQ(s.held_bytes, 0u);
  EXPECT_EQ(s.released_bytes, active.total_bytes);
  EXPECT_EQ(s.connections, 0u);
}

// Values as doubles (the real part of complex tensors).
inline std::vector<double> as_doubles(const Tensor& t) {
  Tensor d = (t.is_complex() ? t.real() : t).to(kFloat64).contiguous();
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

// Names parameterised tests by world size ("n3"). (fmt, not string +: GCC 12 -Wrestrict.)
inline std::string world_size_name(const ::testing::TestParamInfo<int>& info) {
  return fmt::format("n{}", info.param);
}

// A backend and a world size: the collective suites run on every backend.
struct BackendCase {
  const char* backend;
  int world;
};
inline std::string backend_case_name(const ::testing::TestParamInfo<BackendCase>& info) {
  return fmt::format("{}_n{}", info.param.backend, info.param.world);
}
#ifdef TESSERA_TEST_MPI
// The mpi binary (tests/distributed/mpi) runs the suites as one MPI job under mpirun: every
// process is one rank of the world group its main() initialised, at mpirun's world size.
inline int mpi_job_size() {
  const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
  return n ? std::atoi(n) : 1;
}
inline std::vector<BackendCase> backend_cases() {
  return {{"mpi", mpi_job_size()}};
}
#else
// shm at world sizes 1-7; gloo (TCP over loopback, slower per op) at 1, 2, 3 and 5.
inline std::vector<BackendCase> backend_cases() {
  std::vector<BackendCase> v;
  for (int n : {1, 2, 3, 4, 5, 7}) v.push_back({"shm", n});
  for (int n : {1, 2, 3, 5}) v.push_back({"gloo", n});
  return v;
}
#endif

// Runs fn(rank, backend) on c.world threads over one HashStore, on backend c.backend; for
// "mpi", fn(this process's rank, the world group's backend) in this thread.
inline void run_ranks(const BackendCase& c, const std::function<void(int, dist::Backend&)>& fn,
                      dist::ShmOptions options = small_buffers()) {
  const std::string name = c.backend;
  if (name == "mpi") {
    fn(dist::get_rank(), dist::group_world()->backend());
    return;
  }
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  run_threads(c.world, [&](int r) {
    dist::BackendPtr backend =
        name == "gloo" ? dist::make_gloo_backend(store, r, c.world, kTestTimeout)
                       : dist::make_shm_backend(store, r, c.world, kTestTimeout, options);
    fn(r, *backend);
    backend->shutdown();
  });
}

inline const std::vector<ScalarType>& all_dtypes() {
  static const std::vector<ScalarType> v = {
      kBool,      kUInt8,      kInt8,          kInt16,       kInt32,
      kInt64,     kFloat16,    kBFloat16,      kFloat32,     kFloat64,
      kComplex64, kComplex128, kFloat8_e4m3fn, kFloat8_e5m2, kFloat4_e2m1fn_x2};
  return v;
}

}  // namespace tessera::testing
