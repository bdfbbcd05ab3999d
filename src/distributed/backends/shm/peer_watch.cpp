// PeerWatch: see peer_watch.h.
#include "distributed/backends/shm/peer_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "distributed/backends/shm/doorbell.h"

namespace tessera::distributed::shm {

namespace {
int pidfd_open(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}
}  // namespace

PeerWatch::PeerWatch(const Segment& segment, int rank)
    : segment_(segment), rank_(rank), gone_(new std::atomic<bool>[segment.world()]) {
  const int self = static_cast<int>(::getpid());
  for (int r = 0; r < segment.world(); ++r) {
    gone_[static_cast<size_t>(r)].store(false, std::memory_order_relaxed);
    const int pid = segment.control(r).pid;
    if (r == rank || pid <= 0 || pid == self) continue;
    const int fd = pidfd_open(pid);
    // ESRCH: the peer is gone already; the periodic check reports it.
    if (fd >= 0) fds_.emplace_back(r, fd);
  }
  if (fds_.empty()) return;
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    for (const auto& [r, fd] : fds_) ::close(fd);
    fds_.clear();
    return;
  }
  thread_ = std::thread([this] { loop(); });
}

PeerWatch::~PeerWatch() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  for (const auto& [r, fd] : fds_) ::close(fd);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void PeerWatch::loop() {
  std::vector<pollfd> polled;
  while (!fds_.empty()) {
    polled.clear();
    polled.push_back({stop_fd_, POLLIN, 0});
    for (const auto& [r, fd] : fds_) polled.push_back({fd, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;  // cannot watch: the periodic check remains
    }
    if (polled[0].revents != 0) return;
    bool ended = false;
    for (size_t i = polled.size() - 1; i >= 1; --i) {
      if (polled[i].revents == 0) continue;
      const auto [r, fd] = fds_[i - 1];
      gone_[static_cast<size_t>(r)].store(true, std::memory_order_release);
      ::close(fd);
      fds_.erase(fds_.begin() + static_cast<std::ptrdiff_t>(i - 1));
      ended = true;
    }
    if (ended) ring(segment_.control(rank_));  // a waiter of this rank looks at once
  }
}

}  // namespace tessera::distributed::shm
