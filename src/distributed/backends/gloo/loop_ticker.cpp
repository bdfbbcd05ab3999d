#include "distributed/backends/gloo/loop_ticker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace tessera::distributed::gloo_impl {

LoopTicker::LoopTicker(const std::shared_ptr<::gloo::transport::Device>& device,
                       std::chrono::milliseconds give_up)
    : device_(std::dynamic_pointer_cast<::gloo::transport::tcp::Device>(device)),
      give_up_(give_up) {
  if (!device_) return;  // not the TCP transport: nothing to speed up
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) return;
  device_->registerDescriptor(fd_, EPOLLIN, this);
  thread_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof(one));
      cv_.wait_for(lock, kTick, [&] { return stop_; });
    }
  });
}

LoopTicker::~LoopTicker() {
  stop();
}

bool LoopTicker::stop() {
  if (fd_ < 0) return false;
  bool unregister_here = false;
  {
    std::unique_lock lock(mutex_);
    if (state_ == State::kStopped) return gave_up_;
    state_ = State::kLeaving;  // the loop's next turn (within a tick) unregisters fd_
    if (!cv_.wait_for(lock, give_up_, [&] { return state_ == State::kUnregistered; })) {
      state_ = State::kGivenUp;  // from now on the loop thread leaves fd_ alone
      unregister_here = gave_up_ = true;
    }
  }
  if (unregister_here) device_->unregisterDescriptor(fd_, this);
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ::close(fd_);
  std::lock_guard lock(mutex_);
  state_ = State::kStopped;
  return gave_up_;
}

void LoopTicker::handleEvents(int /*events*/) {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = ::read(fd_, &count, sizeof(count));
  std::lock_guard lock(mutex_);
  if (state_ != State::kLeaving) return;
  device_->unregisterDescriptor(fd_, this);  // from the loop thread: returns at once
  state_ = State::kUnregistered;
  cv_.notify_all();  // under the lock: stop() proceeds only once this returns
}

}  // namespace tessera::distributed::gloo_impl
