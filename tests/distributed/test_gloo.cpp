// The gloo backend beyond the collective suites (test_movement.cpp and test_reduce.cpp run
// every op and dtype on it): the process-group front end, a rank that never comes, abort,
// a peer that goes away, and bad arguments; and the LoopTicker that keeps Gloo's event loop
// turning while connections open and close.
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "dist_test_util.h"
#include "distributed/backends/gloo/loop_ticker.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

// Two gloo ranks of one group, made concurrently (their set-up is collective).
std::pair<dist::BackendPtr, dist::BackendPtr> two_ranks(dist::Milliseconds timeout = kTestTimeout) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  dist::BackendPtr b0, b1;
  std::thread t([&] { b1 = dist::make_gloo_backend(store, 1, 2, timeout); });
  b0 = dist::make_gloo_backend(store, 0, 2, timeout);
  t.join();
  return {b0, b1};
}

TEST(Gloo, InitProcessGroupByName) {
  EXPECT_TRUE(dist::is_backend_available("gloo"));
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  run_threads(3, [&](int r) {
    dist::WorldScope scope;
    dist::init_process_group("gloo", store, r, 3, kTestTimeout);
    EXPECT_EQ(dist::get_backend(), "gloo");
    Tensor t = filled(kBFloat16, 5, [&](int64_t i) { return r + i; });
    dist::all_reduce(t, dist::ReduceOp::AVG);
    EXPECT_EQ(as_doubles(t), (std::vector<double>{1, 2, 3, 4, 5}));
    Tensor in = empty({2}, TensorOptions(kInt64));
    auto s = dist::isend(filled(kInt64, 2, [&](int64_t) { return r; }), (r + 1) % 3, nullptr, 7);
    dist::recv(in, (r + 2) % 3, nullptr, 7);
    EXPECT_TRUE(s->wait());
    EXPECT_EQ(as_doubles(in), (std::vector<double>(2, (r + 2) % 3)));
    dist::barrier();
    dist::destroy_process_group();
  });
}

// Sends and receives between some ranks only must not shift the collectives' tags apart.
TEST(Gloo, CollectivesMatchAfterSendsAmongSomeRanks) {
  run_world(
      3,
      [](int r) {
        Tensor t = full({2}, 7.0, TensorOptions(kFloat32));
        if (r == 0) dist::send(t, 1);
        if (r == 1) dist::recv(t, 0);
        Tensor x = full({2}, static_cast<double>(r), TensorOptions(kFloat32));
        dist::all_reduce(x);
        EXPECT_EQ(x[1].item<double>(), 3.0);
        dist::barrier();
      },
      "gloo", 5000ms);
}

TEST(Gloo, AMissingRankTimesOutAndLaterOpsFail) {
  auto [b0, b1] = two_ranks();
  dist::AllreduceOptions o;
  o.timeout = 300ms;
  Tensor x = empty({4}, TensorOptions(kFloat32));
  auto w = b0->allreduce(x, o);  // rank 1 never joins
  expect_error_mentions([&] { w->wait(); }, {"gloo all_reduce", "rank 0", "timed out after 300ms"});
  EXPECT_EQ(w->status(), dist::WorkStatus::TIMED_OUT);
  // A Gloo context that failed is unusable: later ops fail at once with the first error.
  const auto start = std::chrono::steady_clock::now();
  expect_error_mentions([&] { b0->barrier({})->wait(); }, {"timed out after 300ms"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(b0->error(), nullptr);
  // Rank 0 goes away: rank 1's next collective fails (a closed connection), before its timeout.
  b0.reset();
  dist::BarrierOptions bo;
  bo.timeout = 20s;
  const auto t1 = std::chrono::steady_clock::now();
  auto wb = b1->barrier(bo);
  EXPECT_THROW(wb->wait(), dist::DistError);
  EXPECT_EQ(wb->status(), dist::WorkStatus::ERROR);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 15s);
}

TEST(Gloo, AbortFailsRunningAndQueuedWork) {
  auto [b0, b1] = two_ranks();
  dist::AllreduceOptions o;
  o.timeout = 2s;  // bounds how long the running Gloo call holds the worker after the abort
  Tensor x = empty({64}, TensorOptions(kFloat64));
  std::vector<std::string> reasons;
  auto hook = b0->register_abort_hook([&](const std::string& why) { reasons.push_back(why); });
  auto running = b0->allreduce(x, o);  // rank 1 never joins
  auto queued = b0->barrier({});
  std::this_thread::sleep_for(50ms);
  const auto start = std::chrono::steady_clock::now();
  b0->abort("the test aborts rank 0");
  for (const auto& w : {running, queued}) {
    expect_error_mentions([&] { w->wait(); }, {"aborted", "the test aborts rank 0"});
    EXPECT_EQ(w->status(), dist::WorkStatus::ERROR);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  expect_error_mentions([&] { b0->allreduce(x, {})->wait(); }, {"the test aborts rank 0"});
  b0->abort("again");  // the hooks ran once, for the first abort
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("the test aborts rank 0"), std::string::npos) << reasons[0];
}

TEST(Gloo, PendingRecvFailsWhenTheGroupShutsDown) {
  auto [b0, b1] = two_ranks();
  Tensor in = empty({8}, TensorOptions(kFloat32));
  auto w = b0->recv(in, 1, {});     // rank 1 never sends
  auto self = b0->recv(in, 0, {});  // nor does rank 0 to itself
  b1->shutdown();
  b0->shutdown();
  expect_error_mentions([&] { w->wait(); }, {"gloo recv", "shut down"});
  expect_error_mentions([&] { self->wait(); }, {"shut down", "itself"});
}

// Gloo writes to its peers with plain write calls; a write to a peer that is gone raises
// SIGPIPE, whose default action would end the survivor. The backend ignores SIGPIPE (unless
// the program handles it), so the survivor's send fails as a Work instead.
TEST(Gloo, SendsToAPeerThatIsGoneFailWithoutKillingTheSurvivor) {
  auto [b0, b1] = two_ranks(1000ms);
  struct sigaction current {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &current), 0);
  EXPECT_EQ(current.sa_handler, SIG_IGN);
  b1->shutdown();
  b1.reset();
  const Tensor t = zeros({1 << 20}, TensorOptions(kFloat32));  // 4 MiB: more than a socket buffer
  bool failed = false;
  for (int i = 0; i < 3 && !failed; ++i) {
    try {
      b0->send(t, 1, {})->wait();
    } catch (const std::exception&) {
      failed = true;
    }
  }
  EXPECT_TRUE(failed);
}

TEST(Gloo, BadArgumentsAreClearErrors) {
  run_ranks(BackendCase{"gloo", 1}, [&](int, dist::Backend& b) {
    dist::SendRecvOptions o;
    o.tag = int64_t{1} << 60;
    expect_error_mentions([&] { b.send(empty({2}, TensorOptions(kFloat32)), 0, o); },
                          {"send", "tags in [0, 2^56)", "1152921504606846976"});
    o.tag = 3;
    auto s = b.send(empty({2}, TensorOptions(kFloat32)), 0, o);
    auto r = b.recv(empty({3}, TensorOptions(kFloat32)), 0, o);
    expect_error_mentions([&] { r->wait(); }, {"tag 3", "8 bytes", "12 bytes"});
    EXPECT_EQ(s->status(), dist::WorkStatus::ERROR);
  });
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  dist::GlooOptions bad;
  bad.iface = "no-such-if0";
  expect_error_mentions([&] { dist::make_gloo_backend(store, 0, 1, kTestTimeout, bad); },
                        {"gloo backend", "no network interface named 'no-such-if0'"});
  // A rank that never arrives: the set-up times out through the store, naming the key.
  expect_error_mentions([&] { dist::make_gloo_backend(store, 0, 2, 300ms); }, {"gloo/default"});
}

std::shared_ptr<::gloo::transport::Device> loopback_device() {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return ::gloo::transport::tcp::CreateDevice(attr);
}

// A descriptor whose handler holds Gloo's loop thread from block() until release() (or a
// deadline, so that a broken test cannot hang).
class LoopBlocker final : public ::gloo::transport::tcp::Handler {
 public:
  explicit LoopBlocker(const std::shared_ptr<::gloo::transport::Device>& device)
      : device_(std::dynamic_pointer_cast<::gloo::transport::tcp::Device>(device)),
        fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    EXPECT_GE(fd_, 0);
    device_->registerDescriptor(fd_, EPOLLIN, this);
  }
  ~LoopBlocker() override {
    release();
    device_->unregisterDescriptor(fd_, this);
    ::close(fd_);
  }
  // Returns once the loop thread is inside handleEvents.
  void block() {
    const uint64_t one = 1;
    EXPECT_EQ(::write(fd_, &one, sizeof(one)), ssize_t(sizeof(one)));
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(cv_.wait_for(lock, kTestTimeout, [&] { return entered_; }));
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }
  void handleEvents(int /*events*/) override {
    uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd_, &count, sizeof(count));
    std::unique_lock lock(mutex_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, kTestTimeout, [&] { return released_; });
  }

 private:
  std::shared_ptr<::gloo::transport::tcp::Device> device_;
  int fd_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool entered_ = false, released_ = false;
};

TEST(GlooLoopTicker, TheLoopUnregistersItsDescriptorWhenItTurns) {
  const auto device = loopback_device();
  dist::gloo_impl::LoopTicker ticker(device, kTestTimeout);
  EXPECT_FALSE(ticker.stop());  // the loop turned and unregistered the eventfd itself
  EXPECT_FALSE(ticker.stop());  // idempotent
}

TEST(GlooLoopTicker, AStuckLoopIsGivenUpOnAndTheDescriptorUnregisteredFromTheCaller) {
  const auto device = loopback_device();
  LoopBlocker blocker(device);
  dist::gloo_impl::LoopTicker ticker(device, 20ms);
  blocker.block();
  auto stopped = std::async(std::launch::async, [&] { return ticker.stop(); });
  // Given up after 20 ms, stop() unregisters from its own thread: Gloo's wait for a turn of the
  // loop, which cannot come while the blocker holds it.
  EXPECT_EQ(stopped.wait_for(300ms), std::future_status::timeout);
  blocker.release();
  ASSERT_EQ(stopped.wait_for(kTestTimeout), std::future_status::ready);
  EXPECT_TRUE(stopped.get());
  EXPECT_TRUE(ticker.stop());  // idempotent: the first call's answer
  // The loop runs on: a new ticker on the same device is unregistered by the loop again.
  dist::gloo_impl::LoopTicker again(device, kTestTimeout);
  EXPECT_FALSE(again.stop());
}

}  // namespace
}  // namespace tessera::testing
