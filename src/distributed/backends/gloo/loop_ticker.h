// Short turns for Gloo's TCP event loop while connections open or close (gloo_backend.cpp).
//
// Gloo's TCP device runs one event loop that waits in epoll for at most 10 ms and, when a
// socket is unregistered (each pair's listener, a connect's descriptor, a closed pair) from
// another thread, blocks the caller until the loop's next turn. With no traffic that is a full
// 10 ms each time: a 3-rank connect took 11-30 ms, most of it such waits, and an abort's close
// of two pairs 20 ms. While a LoopTicker lives, an eventfd of its own in the loop is signalled
// every kTick, so every turn, and every such wait, ends within that. Its own descriptor is
// unregistered by the loop thread itself (no wait there): unregistered from here, the ticks
// could no longer wake the loop, and the last wait was the full 10 ms again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <gloo/transport/tcp/device.h>

namespace tessera::distributed::gloo_impl {

class LoopTicker final : public ::gloo::transport::tcp::Handler {
 public:
  static constexpr auto kTick = std::chrono::microseconds(200);

  // Ticks `device`'s loop (nothing when it is not Gloo's TCP transport, or no eventfd can be
  // had). `give_up`: how long stop() waits for the loop to unregister the eventfd itself.
  explicit LoopTicker(const std::shared_ptr<::gloo::transport::Device>& device,
                      std::chrono::milliseconds give_up = std::chrono::seconds(1));
  ~LoopTicker() override;
  LoopTicker(const LoopTicker&) = delete;
  LoopTicker& operator=(const LoopTicker&) = delete;

  // Stops ticking; the loop thread unregisters the eventfd at its next turn. Should the loop
  // not turn within give_up (stuck in another handler), the eventfd is unregistered from the
  // caller's thread after all, which is Gloo's own wait for a turn of the loop. Returns
  // whether it came to that. Idempotent; the destructor calls it.
  bool stop();

  // On the loop thread.
  void handleEvents(int events) override;

 private:
  enum class State { kTicking, kLeaving, kUnregistered, kGivenUp, kStopped };
  std::shared_ptr<::gloo::transport::tcp::Device> device_;
  const std::chrono::milliseconds give_up_;
  int fd_ = -1;
  std::mutex mutex_;
  std::condition_variable cv_;
  State state_ = State::kTicking;
  bool stop_ = false;  // the ticking thread's signal to end
  bool gave_up_ = false;
  std::thread thread_;
};

}  // namespace tessera::distributed::gloo_impl
