// One-sided RMA windows (window.h): put, get and accumulate against a plain reference at
// irregular offsets, counted signals, fence visibility, concurrent accumulates, every error
// with nothing written, and a sharded embedding table looked up with one-sided gets. The
// shm binary runs them on shm at world sizes 1-4; the mpi binary on the mpi backend at
// mpirun's size. Rank r's window holds 100 + 17 r elements: sizes differ per rank on purpose.
#include <atomic>
#include <cstring>
#include <random>

#include "dist_test_util.h"
#include "tessera/distributed/window.h"

namespace tessera::testing {
namespace {

std::vector<BackendCase> window_cases() {
#ifdef TESSERA_TEST_MPI
  // A one-process MPI job has no one-sided component (see WindowMpi.OneProcessJobSaysWhy).
  if (mpi_job_size() == 1) return {};
  return backend_cases();
#else
  return {{"shm", 1}, {"shm", 2}, {"shm", 3}, {"shm", 4}};
#endif
}

int64_t window_numel(int r) {
  return 100 + 17 * r;
}

// Runs fn(rank, size, window) with a float32 window of window_numel(rank) zeros registered.
void run_window(const BackendCase& c, ScalarType dtype,
                const std::function<void(int, int, dist::Window&)>& fn) {
  run_ranks(c, [&](int r, dist::Backend& b) {
    dist::WindowPtr w = b.new_window();
    Tensor mine = dist::window_empty({window_numel(r)}, dtype);
    w->tensor_register(mine);
    fn(r, b.size(), *w);
    if (w->is_registered()) w->tensor_deregister();
  });
}

std::vector<double> values(const Tensor& t) {
  return as_doubles(t);
}

class Window : public ::testing::TestWithParam<BackendCase> {};

TEST_P(Window, RegistrationExchangesSizesAndDtype) {
  run_window(GetParam(), kFloat32, [&](int r, int n, dist::Window& w) {
    EXPECT_TRUE(w.is_registered());
    EXPECT_EQ(w.dtype(), kFloat32);
    EXPECT_EQ(w.get_tensor().numel(), window_numel(r));
    for (int k = 0; k < n; ++k) {
      EXPECT_EQ(w.get_size(k), window_numel(k));
      EXPECT_EQ(w.get_sizes(k), std::vector<int64_t>{window_numel(k)});
    }
  });
}

// Rank r puts 5 + r values at offset 3 r of rank r+1, which waits for the signal; then every
// rank reads every rank's tensor back in irregular pieces and compares with the reference.
TEST_P(Window, PutThenGetMatchReference) {
  run_window(GetParam(), kFloat32, [&](int r, int n, dist::Window& w) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    auto put_values = [](int from, int64_t i) { return from * 1000.0 + static_cast<double>(i); };
    Tensor src = filled(kFloat32, 5 + r, [&](int64_t i) { return put_values(r, i); });
    w.put(src, next, 3 * r);
    w.wait_signal(prev);
    std::vector<double> want(static_cast<size_t>(window_numel(r)), 0.0);
    for (int64_t i = 0; i < 5 + prev; ++i) want[size_t(3 * prev + i)] = put_values(prev, i);
    EXPECT_EQ(values(w.get_tensor()), want) << "rank " << r;
    w.fence();  // every put landed everywhere: now read them back with gets
    for (int k = 0; k < n; ++k) {
      const int from = (k + n - 1) % n;
      std::vector<double> ref(static_cast<size_t>(window_numel(k)), 0.0);
      for (int64_t i = 0; i < 5 + from; ++i) ref[size_t(3 * from + i)] = put_values(from, i);
      for (int64_t off : {int64_t{0}, int64_t{1}, int64_t{7}, window_numel(k) - 13}) {
        Tensor got = empty({13}, TensorOptions(kFloat32));
        w.get(got, k, off);
        EXPECT_EQ(values(got), std::vector<double>(ref.begin() + off, ref.begin() + off + 13))
            << "get of 13 at " << off << " from rank " << k;
      }
      Tensor whole = empty({window_numel(k)}, TensorOptions(kFloat32));
      w.get(whole, k, 0);
      EXPECT_EQ(values(whole), ref);
    }
    w.fence();
  });
}

// Large transfers (the shm window splits them over threads with streaming stores) at an odd
// offset and length, checked element by element.
TEST_P(Window, LargePutAndGetAtOddOffsets) {
  constexpr int64_t kLen = (int64_t{1} << 20) + 3;  // 4 MiB + 12 bytes of float32
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    const int n = b.size(), next = (r + 1) % n;
    auto w = b.new_window();
    w->tensor_register(dist::window_empty({kLen + 8}, kFloat32));
    Tensor src = filled(kFloat32, kLen, [&](int64_t i) { return double(i % 4093) + r; });
    w->put(src, next, 5);
    w->wait_signal((r + n - 1) % n);
    w->fence();
    Tensor back = empty({kLen}, TensorOptions(kFloat32));
    w->get(back, next, 5);
    EXPECT_EQ(values(back), values(src)) << "rank " << r;
    const auto mine = values(w->get_tensor());
    EXPECT_EQ(mine[4], 0.0);
    EXPECT_EQ(mine[size_t(kLen + 5)], 0.0);
    w->tensor_deregister();
  });
}

// Every rank adds (r + 1) into every rank's int64 tensor, kRounds times, all at once.
TEST_P(Window, ConcurrentAccumulateFromAllRanks) {
  constexpr int kRounds = 20;
  run_window(GetParam(), kInt64, [&](int r, int n, dist::Window& w) {
    for (int round = 0; round < kRounds; ++round)
      for (int k = 0; k < n; ++k) {
        const int64_t len = window_numel(k) - round;
        Tensor add = filled(kInt64, len, [&](int64_t) { return r + 1.0; });
        w.accumulate(add, k, round);
      }
    w.fence();
    const double per_round = n * (n + 1) / 2.0;
    const auto got = values(w.get_tensor());
    for (int64_t i = 0; i < window_numel(r); ++i) {
      // Element i received round's add for every round <= i.
      const double rounds = static_cast<double>(std::min<int64_t>(i + 1, kRounds));
      ASSERT_EQ(got[size_t(i)], rounds * per_round) << "element " << i << " on rank " << r;
    }
    w.fence();
  });
}

// float16, bfloat16 and float8 (which MPI cannot add: its windows swap each element's bits),
// every rank adding into every rank at once. The adds are small integers, so every partial
// sum is exact in the dtype and any order gives the same result: a lost add shows.
TEST_P(Window, ConcurrentAccumulateNarrowFloats) {
  for (const ScalarType dtype : {kBFloat16, kFloat16, kFloat8_e4m3fn}) {
    const bool fp8 = dtype == kFloat8_e4m3fn;  // integers exact up to 16
    const int rounds = fp8 ? 2 : 8;
    run_window(GetParam(), dtype, [&](int r, int n, dist::Window& w) {
      const double add = fp8 ? 1.0 : r + 1.0;
      for (int round = 0; round < rounds; ++round)
        for (int k = 0; k < n; ++k)
          w.accumulate(filled(dtype, window_numel(k) - 3, [&](int64_t) { return add; }), k, 3);
      w.fence();
      const double total = rounds * (fp8 ? n : n * (n + 1) / 2.0);
      const auto got = values(w.get_tensor());
      for (int64_t i = 0; i < window_numel(r); ++i)
        ASSERT_EQ(got[size_t(i)], i < 3 ? 0.0 : total)
            << dtype_name(dtype) << " element " << i << " on rank " << r;
      w.fence();
    });
  }
}

TEST_P(Window, AccumulateSumsFloats) {
  run_window(GetParam(), kFloat64, [&](int r, int n, dist::Window& w) {
    Tensor add = filled(kFloat64, 10, [&](int64_t i) { return 0.5 * static_cast<double>(i + r); });
    w.accumulate(add, 0, 4);
    w.fence();
    if (r == 0) {
      const auto got = values(w.get_tensor());
      for (int64_t i = 0; i < 10; ++i) {
        double want = 0;
        for (int k = 0; k < n; ++k) want += 0.5 * static_cast<double>(i + k);
        EXPECT_EQ(got[size_t(4 + i)], want);
      }
      EXPECT_EQ(got[3], 0.0);
      EXPECT_EQ(got[14], 0.0);
    }
    w.fence();
  });
}

// Each rank puts its own slice into every rank; after fence (no waits) all are visible.
TEST_P(Window, FenceMakesPutsVisible) {
  run_window(GetParam(), kFloat32, [&](int r, int n, dist::Window& w) {
    for (int k = 0; k < n; ++k)
      w.put(filled(kFloat32, 4, [&](int64_t i) { return r + 0.25 * i; }), k, 4 * r);
    w.fence();
    const auto got = values(w.get_tensor());
    for (int k = 0; k < n; ++k)
      for (int64_t i = 0; i < 4; ++i)
        EXPECT_EQ(got[size_t(4 * k + i)], k + 0.25 * static_cast<double>(i));
    EXPECT_EQ(got[size_t(4 * n)], 0.0);
    w.fence();
  });
}

// Two signals take two waits; a third wait finds none and times out within its deadline.
TEST_P(Window, SignalsAreCountedAndWaitsTimeOut) {
  run_window(GetParam(), kFloat32, [&](int r, int n, dist::Window& w) {
    const int to = (r + 1) % n, from = (r + n - 1) % n;
    w.signal(to);
    w.signal(to);
    w.wait_signal(from);
    w.wait_signal(from);
    const auto start = dist::Clock::now();
    EXPECT_THROW(w.wait_signal(from, dist::Milliseconds(100)), dist::DistTimeoutError);
    const auto took = dist::Clock::now() - start;
    EXPECT_GE(took, dist::Milliseconds(100));
    EXPECT_LT(took, dist::Milliseconds(10'000));
    w.fence();
    // A put signals too, and a signal sent before the wait is not lost.
    w.put(filled(kFloat32, 1, [](int64_t) { return 1.0; }), to, 0);
    w.fence();
    w.wait_signal(from, dist::Milliseconds(0));
    w.fence();
  });
}

// Every error is thrown before anything is written: the sentinels stay everywhere.
TEST_P(Window, ErrorsWriteNothing) {
  run_window(GetParam(), kFloat32, [&](int r, int n, dist::Window& w) {
    const int64_t mine = window_numel(r);
    w.get_tensor().copy_(filled(kFloat32, mine, [&](int64_t i) { return -1.0 - i; }));
    w.fence();
    const int peer = (r + 1) % n;
    const int64_t len = window_numel(peer);
    Tensor five = filled(kFloat32, 5, [](int64_t) { return 7.0; });
    EXPECT_THROW(w.put(five, peer, len - 4), IndexError);
    EXPECT_THROW(w.put(five, peer, -1), IndexError);
    EXPECT_THROW(w.put(five, peer, len + 1), IndexError);
    EXPECT_THROW(w.accumulate(five, peer, len - 2), IndexError);
    EXPECT_THROW(w.put(filled(kFloat64, 5, [](int64_t) { return 7.0; }), peer, 0), TypeError);
    EXPECT_THROW(w.accumulate(filled(kInt32, 5, [](int64_t) { return 7.0; }), peer, 0), TypeError);
    EXPECT_THROW(w.put(five, n, 0), ValueError);
    EXPECT_THROW(w.put(five, -1, 0), ValueError);
    EXPECT_THROW(w.signal(n), ValueError);
    EXPECT_THROW(w.wait_signal(-1), ValueError);
    Tensor out = filled(kFloat32, 5, [](int64_t) { return 3.0; });
    EXPECT_THROW(w.get(out, peer, len - 3), IndexError);
    EXPECT_THROW(w.get(out, n + 2, 0), ValueError);
    EXPECT_THROW(w.get(empty({5}, TensorOptions(kInt64)), peer, 0), TypeError);
    EXPECT_EQ(values(out), std::vector<double>(5, 3.0));
    try {
      w.put(five, peer, len - 4);
    } catch (const IndexError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("put()"), std::string::npos) << m;
      EXPECT_NE(m.find(fmt::format("[{}, {})", len - 4, len + 1)), std::string::npos) << m;
      EXPECT_NE(m.find(fmt::format("{} elements", len)), std::string::npos) << m;
    }
    w.fence();
    std::vector<double> want(static_cast<size_t>(mine));
    for (int64_t i = 0; i < mine; ++i) want[size_t(i)] = -1.0 - static_cast<double>(i);
    EXPECT_EQ(values(w.get_tensor()), want) << "rank " << r;
    // No signal was sent by a failed put.
    EXPECT_THROW(w.wait_signal((r + n - 1) % n, dist::Milliseconds(20)), dist::DistTimeoutError);
    w.fence();

    Tensor before = w.get_tensor();
    w.tensor_deregister();
    EXPECT_FALSE(w.is_registered());
    EXPECT_THROW(w.put(five, peer, 0), ValueError);
    EXPECT_THROW(w.get(out, peer, 0), ValueError);
    EXPECT_THROW(w.signal(peer), ValueError);
    EXPECT_THROW(w.wait_signal(peer), ValueError);
    EXPECT_THROW(w.get_tensor(), ValueError);
    EXPECT_THROW(w.tensor_deregister(), ValueError);
    EXPECT_EQ(values(before), want);
    // A window registers again after deregistering.
    w.tensor_register(dist::window_empty({3}, kFloat32));
    EXPECT_EQ(w.get_size(peer), 3);
    EXPECT_THROW(w.tensor_register(dist::window_empty({3}, kFloat32)), ValueError);
  });
}

// async_op = true: the ops run on the window's own thread in issue order (a put's signal
// follows its data), flush() completes them, and their Works say so. (On mpi they complete in
// the call; the same checks hold.) Bad arguments still throw in the call, with nothing queued.
TEST_P(Window, AsyncPutsLandInIssueOrderAndFlushCompletesThem) {
  run_window(GetParam(), kFloat32, [&](int r, int n, dist::Window& w) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    auto value = [](int from, int64_t i) {
      return i < 5 ? -1.0 - from : from * 1000.0 + static_cast<double>(i / 10 * 100 + i % 10);
    };
    std::vector<dist::WorkPtr> works;
    for (int k = 0; k < 4; ++k) {
      Tensor src = filled(kFloat32, 10, [&](int64_t i) { return r * 1000.0 + k * 100.0 + i; });
      works.push_back(w.put(src, next, 10 * k, /*async_op=*/true));
    }
    // Over the first put's elements: issued later, lands later.
    works.push_back(w.put(filled(kFloat32, 5, [&](int64_t) { return -1.0 - r; }), next, 0, true));
    EXPECT_THROW(w.put(empty({2}, TensorOptions(kFloat32)), next, window_numel(next) - 1, true),
                 IndexError);
    w.flush();
    for (const auto& work : works) {
      EXPECT_TRUE(work->is_success());
#ifndef TESSERA_TEST_MPI
      EXPECT_EQ(work->result().size(), 1u);  // it ran on the window's thread, holding its source
#endif
    }
    for (int k = 0; k < 5; ++k) w.wait_signal(prev);  // five puts, five signals
    const std::vector<double> got = values(w.get_tensor());
    for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(got[size_t(i)], value(prev, i)) << "element " << i;
    w.fence();
  });
}

TEST_P(Window, AsyncGetAndAccumulateCompleteThroughTheirWork) {
  run_window(GetParam(), kFloat32, [&](int r, int n, dist::Window& w) {
    const int next = (r + 1) % n;
    float* mine = w.get_tensor().data_ptr<float>();
    for (int64_t i = 0; i < window_numel(r); ++i) mine[i] = static_cast<float>(r * 1000 + i);
    w.fence();
    Tensor got = empty({7}, TensorOptions(kFloat32));
    dist::WorkPtr g = w.get(got, next, 3, /*async_op=*/true);
    g->wait();
    EXPECT_TRUE(g->is_success());
    for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(values(got)[size_t(i)], next * 1000.0 + 3 + i);
    w.fence();  // every get has read before anyone accumulates
    dist::WorkPtr a = w.accumulate(ones({10}, TensorOptions(kFloat32)), 0, 50, /*async_op=*/true);
    a->wait();
    EXPECT_TRUE(a->is_success());
    w.fence();
    if (r == 0) {
      for (int64_t i = 50; i < 60; ++i) EXPECT_EQ(mine[i], static_cast<float>(i + n)) << i;
    }
  });
}

TEST_P(Window, RegisterNeedsOneDtype) {
  if (GetParam().world < 2) GTEST_SKIP() << "needs two ranks";
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    auto w = b.new_window();
    Tensor t = dist::window_empty({8}, r == 0 ? kFloat32 : kFloat64);
    EXPECT_THROW(w->tensor_register(t), TypeError);
    EXPECT_FALSE(w->is_registered());
  });
}

// An embedding table of kRows rows of kDim sharded unevenly over the ranks (rank r holds
// rows [first(r), first(r + 1))); every rank looks up a random batch of ids with one get per
// row from the owner's shard and checks it against the table's formula.
TEST_P(Window, ShardedEmbeddingLookup) {
  constexpr int64_t kRows = 97, kDim = 12;
  run_ranks(GetParam(), [&](int r, dist::Backend& b) {
    const int n = b.size();
    // Uneven shards: rank k's share grows with k.
    std::vector<int64_t> first(static_cast<size_t>(n + 1), 0);
    int64_t weight_total = n * (n + 1) / 2;
    for (int k = 0; k < n; ++k)
      first[size_t(k + 1)] = kRows * ((k + 1) * (k + 2) / 2) / weight_total;
    auto row_value = [](int64_t row, int64_t j) { return static_cast<double>(row) + 0.125 * j; };
    const int64_t my_rows = first[size_t(r + 1)] - first[size_t(r)];
    auto w = b.new_window();
    Tensor shard = dist::window_empty({std::max<int64_t>(my_rows, 0), kDim}, kFloat32);
    shard.copy_(filled(kFloat32, my_rows * kDim, [&](int64_t i) {
                  return row_value(first[size_t(r)] + i / kDim, i % kDim);
                }).reshape({my_rows, kDim}));
    w->tensor_register(shard);
    w->fence();
    std::mt19937 rng(1234 + static_cast<unsigned>(r));
    std::uniform_int_distribution<int64_t> pick(0, kRows - 1);
    Tensor out = empty({64, kDim}, TensorOptions(kFloat32));
    std::vector<int64_t> ids(64);
    for (auto& id : ids) id = pick(rng);
    for (size_t q = 0; q < ids.size(); ++q) {
      const int64_t id = ids[q];
      int owner = 0;
      while (id >= first[size_t(owner + 1)]) ++owner;
      w->get(out.select(0, static_cast<int64_t>(q)), owner, (id - first[size_t(owner)]) * kDim);
    }
    const auto got = values(out);
    for (size_t q = 0; q < ids.size(); ++q)
      for (int64_t j = 0; j < kDim; ++j)
        ASSERT_EQ(got[q * kDim + size_t(j)], row_value(ids[q], j)) << "id " << ids[q];
    w->tensor_deregister();
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, Window, ::testing::ValuesIn(window_cases()), backend_case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Window);

#ifdef TESSERA_TEST_MPI
TEST(WindowMpi, OneProcessJobSaysWhy) {
  if (mpi_job_size() != 1) GTEST_SKIP() << "one-process jobs only";
  auto w = dist::new_window();
  try {
    w->tensor_register(dist::window_empty({4}, kFloat32));
    ADD_FAILURE() << "a one-process MPI window registered";
  } catch (const dist::DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("one-process group"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(w->is_registered());
}
#endif

#ifndef TESSERA_TEST_MPI
TEST(WindowBackends, OthersRefuse) {
  run_ranks(BackendCase{"gloo", 1}, [&](int, dist::Backend& b) {
    EXPECT_FALSE(b.supports_window());
    try {
      b.new_window();
      ADD_FAILURE() << "gloo made a window";
    } catch (const dist::DistBackendError& e) {
      EXPECT_NE(std::string(e.what()).find("backend 'gloo' does not support RMA windows"),
                std::string::npos)
          << e.what();
    }
  });
}

// A transport whose next put fails on the window's thread (a peer lost mid-operation, say):
// nothing else in the tests can make a queued operation fail.
class FailingWindow : public dist::Window {
 public:
  explicit FailingWindow(std::shared_ptr<dist::Backend> b) : Window(std::move(b), kTestTimeout) {}
  ~FailingWindow() override { stop_async(); }
  std::atomic<bool> fail_next_put{false};

 protected:
  Handle prepare(const Tensor&) override { return Handle(kHandleWords, 0); }
  void attach(const std::vector<Handle>&) override {}
  void detach() override {}
  void do_put(const void* src, int, int64_t offset, int64_t count) override {
    if (fail_next_put.exchange(false))
      TS_THROW(distributed::DistBackendError, "injected: peer lost");
    std::memcpy(get_tensor().data_ptr<float>() + offset, src, sizeof(float) * size_t(count));
  }
  void do_get(void*, int, int64_t, int64_t) override {}
  void do_accumulate(const Tensor&, int, int64_t) override {}
  void do_signal(int) override {}
  void do_wait_signal(int, uint64_t, dist::Clock::time_point, dist::Milliseconds) override {}
  void do_flush() override {}
  bool async_capable() const override { return true; }
};

// An asynchronous put that fails on the window's thread fails its own Work, and the next
// flush reports it, naming the operation and the cause, once; later operations run as usual.
TEST(WindowBackends, AsyncFailureReachesTheWorkAndTheNextFlushOnce) {
  run_ranks(BackendCase{"shm", 1}, [&](int, dist::Backend& b) {
    FailingWindow w(b.shared_from_this());
    w.tensor_register(zeros({8}, TensorOptions(kFloat32)));
    w.fail_next_put = true;
    dist::WorkPtr failed = w.put(ones({4}, TensorOptions(kFloat32)), 0, 0, /*async_op=*/true);
    try {
      w.flush();
      ADD_FAILURE() << "flush passed over a failed put";
    } catch (const dist::DistBackendError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("flush(): window (rank 0 of 1, backend 'shm')"), std::string::npos)
          << what;
      EXPECT_NE(what.find("an asynchronous operation failed: injected: peer lost"),
                std::string::npos)
          << what;
    }
    EXPECT_TRUE(failed->is_completed());
    EXPECT_FALSE(failed->is_success());
    EXPECT_TRUE(failed->exception() != nullptr);
    EXPECT_NO_THROW(w.flush());  // reported once
    dist::WorkPtr ok = w.put(full({2}, 5.0, TensorOptions(kFloat32)), 0, 6, /*async_op=*/true);
    w.flush();
    EXPECT_TRUE(ok->is_success());
    EXPECT_EQ(values(w.get_tensor()), (std::vector<double>{0, 0, 0, 0, 0, 0, 5, 5}));
    // fence reports one too (after its barrier), and nothing of the failed put was written.
    w.fail_next_put = true;
    w.put(ones({4}, TensorOptions(kFloat32)), 0, 0, /*async_op=*/true);
    EXPECT_THROW(w.fence(), dist::DistBackendError);
    EXPECT_EQ(values(w.get_tensor()), (std::vector<double>{0, 0, 0, 0, 0, 0, 5, 5}));
    w.tensor_deregister();
  });
}

TEST(WindowBackends, ShmNeedsWindowMemory) {
  run_ranks(BackendCase{"shm", 2}, [&](int, dist::Backend& b) {
    EXPECT_TRUE(b.supports_window());
    auto w = b.new_window();
    try {
      w->tensor_register(zeros({4}, TensorOptions(kFloat32)));
      ADD_FAILURE() << "registered ordinary memory";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("window_empty()"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(w->is_registered());
  });
}

TEST(WindowBackends, FreeFunctionUsesTheDefaultGroup) {
  run_world(2, [](int r) {
    auto w = dist::new_window();
    w->tensor_register(dist::window_empty({2, 3}, kInt32));
    w->put(filled(kInt32, 2, [&](int64_t i) { return 10.0 * r + static_cast<double>(i); }), 1 - r,
           4);
    w->wait_signal(1 - r);
    EXPECT_EQ(values(w->get_tensor().reshape({6})),
              (std::vector<double>{0, 0, 0, 0, 10.0 * (1 - r), 10.0 * (1 - r) + 1}));
    w->tensor_deregister();
  });
}
#endif

}  // namespace
}  // namespace tessera::testing
