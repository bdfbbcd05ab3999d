// The TCPStore server loop.
//
// One thread polls the listening socket, a wake-up pipe (for shutdown) and every client.
// Each client has an input buffer, from which complete frames are parsed and served in order,
// and an output buffer, flushed when the socket is writable. A client must say HELLO with the
// job secret first. WAIT requests whose keys are missing are parked and answered when a write
// creates the last missing key; a client that disconnects takes its parked waits with it.
// Errors in a client's messages are answered with ERROR and close that client only: the
// server keeps serving everyone else.
#include "distributed/store/tcp_store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <thread>
#include <unordered_map>

#include "distributed/store/protocol.h"
#include "distributed/store/socket.h"
#include "distributed/store/store_util.h"

namespace tessera::distributed {

using detail::Fd;
using detail::MsgType;

namespace {

struct Connection {
  Fd fd;
  Bytes in;
  Bytes out;
  bool authenticated = false;
  bool closing = false;  // close once `out` is flushed
};

struct ParkedWait {
  Connection* client;
  uint32_t request_id;
  std::vector<std::string> keys;
};

}  // namespace

struct TCPStore::Server::Impl {
  TCPStoreOptions options;
  Fd listen_fd;
  uint16_t port = 0;
  int wake_pipe[2] = {-1, -1};
  std::thread thread;
  std::list<Connection> clients;
  std::list<ParkedWait> waits;
  std::unordered_map<std::string, Bytes> map;

  void run();
  void serve(Connection& c);
  void handle(Connection& c, const detail::FrameHeader& h, const uint8_t* payload);
  void respond(Connection& c, MsgType type, uint32_t id, const Bytes& payload = {}) {
    const Bytes frame = detail::encode_frame(type, id, payload);
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }
  void fail(Connection& c, uint32_t id, const std::string& message) {
    respond(c, MsgType::ERROR, id, detail::PayloadWriter().str(message).take());
    c.closing = true;
  }
  bool has_all(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
      if (!map.count(k)) return false;
    return true;
  }
  void wake_waiters() {
    for (auto it = waits.begin(); it != waits.end();) {
      if (has_all(it->keys)) {
        respond(*it->client, MsgType::OK, it->request_id);
        it = waits.erase(it);
      } else {
        ++it;
      }
    }
  }
};

TCPStore::Server::Server(const TCPStoreOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->listen_fd = detail::listen_tcp(options.multi_host, options.port, &impl_->port);
  TS_CHECK(::pipe2(impl_->wake_pipe, O_CLOEXEC | O_NONBLOCK) == 0, distributed::DistNetworkError,
           "TCPStore server: cannot create its wake-up pipe: {}", std::strerror(errno));
  impl_->thread = std::thread([this] { impl_->run(); });
}

TCPStore::Server::~Server() {
  const char b = 1;
  [[maybe_unused]] const ssize_t w = ::write(impl_->wake_pipe[1], &b, 1);
  impl_->thread.join();
  ::close(impl_->wake_pipe[0]);
  ::close(impl_->wake_pipe[1]);
}

uint16_t TCPStore::Server::port() const {
  return impl_->port;
}

void TCPStore::Server::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<Connection*> owners;
  for (;;) {
    fds.clear();
    owners.clear();
    fds.push_back({wake_pipe[0], POLLIN, 0});
    fds.push_back({listen_fd.get(), POLLIN, 0});
    for (auto& c : clients) {
      fds.push_back({c.fd.get(), static_cast<short>(c.out.empty() ? POLLIN : POLLIN | POLLOUT), 0});
      owners.push_back(&c);
    }
    // A bounded wait, so a lost wake-up can never keep the thread alive forever.
    const int r = ::poll(fds.data(), fds.size(), 1000);
    if (r < 0 && errno != EINTR) return;  // the process is in trouble; clients will see EOF
    if (fds[0].revents) return;           // shutdown
    if (fds[1].revents & POLLIN) {
      for (;;) {
        const int cfd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) break;
        clients.emplace_back().fd = Fd(cfd);
      }
    }
    for (size_t i = 0; i < owners.size(); ++i) {
      Connection& c = *owners[i];
      const short ev = fds[i + 2].revents;
      if (ev & (POLLIN | POLLHUP | POLLERR)) {
        uint8_t buf[65536];
        for (;;) {
          const ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
          if (n > 0) {
            c.in.insert(c.in.end(), buf, buf + n);
            if (c.in.size() > detail::kFrameHeaderBytes + options.max_message_bytes) break;
            continue;
          }
          if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            c.closing = true;
            c.out.clear();  // the peer is gone: nothing to flush
          }
          break;
        }
        if (!c.closing) serve(c);
      }
      if (!c.out.empty()) {
        const ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (n > 0) {
          c.out.erase(c.out.begin(), c.out.begin() + n);
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          c.out.clear();
          c.closing = true;
        }
      }
    }
    for (auto it = clients.begin(); it != clients.end();) {
      if (it->closing && it->out.empty()) {
        waits.remove_if([&](const ParkedWait& w) { return w.client == &*it; });
        it = clients.erase(it);
      } else {
        ++it;
      }
    }
  }
}

// Serves every complete frame in the client's input buffer.
void TCPStore::Server::Impl::serve(Connection& c) {
  size_t pos = 0;
  while (!c.closing) {
    const auto f =
        detail::parse_frame(c.in.data() + pos, c.in.size() - pos, options.max_message_bytes);
    if (f.status == detail::ParsedFrame::kNeedMore) break;
    if (f.status == detail::ParsedFrame::kError) {
      fail(c, f.header.request_id, "TCPStore server: " + f.error);
      break;
    }
    try {
      handle(c, f.header, c.in.data() + pos + detail::kFrameHeaderBytes);
    } catch (const Error& e) {
      fail(c, f.header.request_id, std::string("TCPStore server: ") + e.what());
    }
    pos += f.frame_bytes;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(pos));
}

void TCPStore::Server::Impl::handle(Connection& c, const detail::FrameHeader& h,
                                    const uint8_t* payload) {
  TS_CHECK(c.authenticated || h.type == static_cast<uint16_t>(MsgType::HELLO),
           distributed::DistStoreError,
           "the first message must be HELLO with the job secret, but got {}",
           detail::msg_type_name(h.type));
  const detail::StoreRequest req = detail::decode_request(h, payload);
  if (!c.authenticated) {
    const std::string_view given(reinterpret_cast<const char*>(req.value.data()), req.value.size());
    TS_CHECK(detail::constant_time_equal(given, options.secret), distributed::DistStoreError,
             "authentication failed: the client's job secret does not match this job's "
             "(set {} to the launcher's value)",
             kJobSecretEnv);
    c.authenticated = true;
    respond(c, MsgType::OK, h.request_id);
    return;
  }
  const uint32_t id = h.request_id;
  switch (req.type) {
    case MsgType::HELLO:
      respond(c, MsgType::OK, id);
      break;
    case MsgType::SET:
      map[req.keys[0]] = req.value;
      respond(c, MsgType::OK, id);
      wake_waiters();
      break;
    case MsgType::GET: {
      auto it = map.find(req.keys[0]);
      if (it == map.end()) {
        respond(c, MsgType::NOT_FOUND, id);
      } else {
        respond(c, MsgType::VALUE, id, detail::PayloadWriter().bytes(it->second).take());
      }
      break;
    }
    case MsgType::ADD: {
      const int64_t v = detail::add_in(map, req.keys[0], req.amount);
      respond(c, MsgType::INT, id, detail::PayloadWriter().i64(v).take());
      wake_waiters();
      break;
    }
    case MsgType::COMPARE_SET: {
      const Bytes v = detail::compare_set_in(map, req.keys[0], req.value, req.desired);
      respond(c, MsgType::VALUE, id, detail::PayloadWriter().bytes(v).take());
      wake_waiters();
      break;
    }
    case MsgType::WAIT:
      if (has_all(req.keys)) {
        respond(c, MsgType::OK, id);
      } else {
        waits.push_back({&c, id, req.keys});
      }
      break;
    case MsgType::CHECK:
      respond(c, MsgType::INT, id, detail::PayloadWriter().i64(has_all(req.keys) ? 1 : 0).take());
      break;
    case MsgType::DELETE:
      respond(c, MsgType::INT, id, detail::PayloadWriter().i64(map.erase(req.keys[0])).take());
      break;
    case MsgType::NUM_KEYS:
      respond(c, MsgType::INT, id,
              detail::PayloadWriter().i64(static_cast<int64_t>(map.size())).take());
      break;
    default:
      TS_THROW(distributed::DistStoreError, "{} is a response, not a request",
               detail::msg_type_name(h.type));
  }
}

}  // namespace tessera::distributed
