// Blocking TCP helpers with deadlines (IPv4). Every call that can wait takes a deadline and
// throws DistTimeoutError after it; socket failures throw DistNetworkError naming the peer.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/distributed/work.h"

namespace tessera::distributed::detail {

// Owns a file descriptor (closed on destruction).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// Connects to host:port, retrying refused connections (the server may not be up yet) until
// the deadline.
Fd connect_tcp(const std::string& host, uint16_t port, Clock::time_point deadline);
// A listening socket on 127.0.0.1 (or every interface) and `port` (0: any free port); the
// port it got is written to *bound_port.
Fd listen_tcp(bool all_interfaces, uint16_t port, uint16_t* bound_port);

// `peer` names the other side in errors ("TCPStore at 127.0.0.1:29500").
void send_all(int fd, const uint8_t* data, size_t n, Clock::time_point deadline,
              const std::string& peer);
void recv_exact(int fd, uint8_t* data, size_t n, Clock::time_point deadline,
                const std::string& peer);

}  // namespace tessera::distributed::detail
