// Blocking TCP helpers with deadlines: see socket.h.
#include "distributed/store/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace tessera::distributed::detail {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

int ms_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1000));
}

// Waits until fd is ready for `events`; throws after the deadline.
void poll_until(int fd, short events, Clock::time_point deadline, const std::string& peer,
                const char* what) {
  for (;;) {
    TS_CHECK(Clock::now() < deadline, distributed::DistTimeoutError,
             "{}: timed out while {} (the deadline passed)", peer, what);
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, std::max(1, ms_until(deadline)));
    if (r > 0) return;
    TS_CHECK(r == 0 || errno == EINTR, distributed::DistNetworkError,
             "{}: poll failed while {}: {}", peer, what, std::strerror(errno));
  }
}

sockaddr_in resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  TS_CHECK(rc == 0 && res != nullptr, distributed::DistNetworkError,
           "cannot resolve the store host '{}': {}", host, ::gai_strerror(rc));
  sockaddr_in addr{};
  std::memcpy(&addr, res->ai_addr, sizeof(addr));
  ::freeaddrinfo(res);
  addr.sin_port = htons(port);
  return addr;
}

}  // namespace

Fd connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline) {
  const sockaddr_in addr = resolve(host, port);
  const std::string peer = fmt::format("TCPStore at {}:{}", host, port);
  std::string last_error = "no attempt";
  auto backoff = Milliseconds(1);
  while (Clock::now() < deadline) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    TS_CHECK(fd.valid(), distributed::DistNetworkError, "{}: cannot create a socket: {}", peer,
             std::strerror(errno));
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      rc = ::poll(&p, 1, std::max(1, ms_until(deadline)));
      int err = 0;
      socklen_t len = sizeof(err);
      if (rc > 0 && ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        rc = 0;
      } else {
        errno = rc == 0 ? ETIMEDOUT : (err ? err : errno);
        rc = -1;
      }
    }
    if (rc == 0) {
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    last_error = std::strerror(errno);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, Milliseconds(100));
  }
  TS_THROW(distributed::DistTimeoutError,
           "{}: could not connect before the deadline (last error: {})", peer, last_error);
}

Fd listen_tcp(bool all_interfaces, uint16_t port, uint16_t* bound_port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  TS_CHECK(fd.valid(), distributed::DistNetworkError, "TCPStore server: cannot create a socket: {}",
           std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(all_interfaces ? INADDR_ANY : INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  TS_CHECK(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0,
           distributed::DistNetworkError, "TCPStore server: cannot bind {}:{}: {}",
           all_interfaces ? "0.0.0.0" : "127.0.0.1", port, std::strerror(errno));
  TS_CHECK(::listen(fd.get(), 512) == 0, distributed::DistNetworkError,
           "TCPStore server: cannot listen on port {}: {}", port, std::strerror(errno));
  socklen_t len = sizeof(addr);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

void send_all(int fd, const uint8_t* data, size_t n, Clock::time_point deadline,
              const std::string& peer) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      poll_until(fd, POLLOUT, deadline, peer, "sending a request");
      continue;
    }
    TS_THROW(distributed::DistNetworkError, "{}: sending failed: {}", peer, std::strerror(errno));
  }
}

void recv_exact(int fd, uint8_t* data, size_t n, Clock::time_point deadline,
                const std::string& peer) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, data, n, 0);
    if (r > 0) {
      data += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    TS_CHECK(r != 0, distributed::DistNetworkError,
             "{}: the connection was closed (is the store's server still running?)", peer);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      poll_until(fd, POLLIN, deadline, peer, "waiting for a reply");
      continue;
    }
    TS_THROW(distributed::DistNetworkError, "{}: receiving failed: {}", peer, std::strerror(errno));
  }
}

}  // namespace tessera::distributed::detail
