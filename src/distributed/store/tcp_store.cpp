// TCPStore: the client side, and the constructor that starts the server when asked.
//
// A client keeps a small pool of connections: a request takes an idle one (or connects and
// says HELLO), and gives it back when the reply has arrived. A request that fails or times
// out part-way leaves its stream in an unknown state, so that connection is closed instead.
#include <fmt/chrono.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "distributed/store/protocol.h"
#include "distributed/store/socket.h"
#include "distributed/store/store_util.h"
#include "distributed/store/tcp_store_server.h"

namespace tessera::distributed {

using detail::MsgType;

class TCPStore::Client {
 public:
  Client(std::string host, uint16_t port, std::string secret, uint32_t max_message_bytes)
      : host_(std::move(host)),
        port_(port),
        secret_(std::move(secret)),
        max_message_bytes_(max_message_bytes),
        peer_(fmt::format("TCPStore at {}:{}", host_, port_)) {}

  struct Reply {
    MsgType type;
    Bytes payload;
  };

  // Sends one request and returns its reply; DistStoreError when the server answers ERROR.
  Reply request(MsgType type, const Bytes& payload, Clock::time_point deadline) {
    detail::Fd fd = take(deadline);
    Reply r = exchange(fd, type, payload, deadline);  // on failure, fd closes here
    give_back(std::move(fd));
    return r;
  }

  // Connects (and authenticates) one connection now, so a bad secret fails early.
  void ensure_connected(Clock::time_point deadline) { give_back(take(deadline)); }

  // Typed requests: the reply must have the expected type and shape.
  void call_ok(MsgType type, const Bytes& payload, Clock::time_point deadline, const char* op) {
    expect(request(type, payload, deadline).type, MsgType::OK, op);
  }
  int64_t call_int(MsgType type, const Bytes& payload, Clock::time_point deadline, const char* op) {
    const Reply r = request(type, payload, deadline);
    expect(r.type, MsgType::INT, op);
    detail::PayloadReader reader(r.payload.data(), r.payload.size(), "INT");
    const int64_t v = reader.i64();
    reader.finish();
    return v;
  }
  // nullopt for NOT_FOUND.
  std::optional<Bytes> call_value(MsgType type, const Bytes& payload, Clock::time_point deadline,
                                  const char* op) {
    const Reply r = request(type, payload, deadline);
    if (r.type == MsgType::NOT_FOUND) return std::nullopt;
    expect(r.type, MsgType::VALUE, op);
    detail::PayloadReader reader(r.payload.data(), r.payload.size(), "VALUE");
    Bytes v = reader.bytes();
    reader.finish();
    return v;
  }

 private:
  // An idle connection, or a new one. A thread blocked in WAIT holds its connection, so the
  // other threads' requests go through others (the pool grows to the peak concurrency).
  detail::Fd take(Clock::time_point deadline) {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        detail::Fd fd = std::move(idle_.back());
        idle_.pop_back();
        return fd;
      }
    }
    detail::Fd fd = detail::connect_tcp(host_, port_, deadline);
    const Reply r =
        exchange(fd, MsgType::HELLO, detail::PayloadWriter().str(secret_).take(), deadline);
    expect(r.type, MsgType::OK, "HELLO");
    return fd;
  }

  void give_back(detail::Fd fd) {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(fd));
  }

  void expect(MsgType got, MsgType want, const char* op) const {
    TS_CHECK(got == want, distributed::DistStoreError, "{}: {} expected a {} reply, but got {}",
             peer_, op, detail::msg_type_name(static_cast<uint16_t>(want)),
             detail::msg_type_name(static_cast<uint16_t>(got)));
  }

  Reply exchange(const detail::Fd& fd, MsgType type, const Bytes& payload,
                 Clock::time_point deadline) {
    const uint32_t id = ++next_id_;
    const Bytes frame = detail::encode_frame(type, id, payload);
    detail::send_all(fd.get(), frame.data(), frame.size(), deadline, peer_);
    uint8_t header[detail::kFrameHeaderBytes];
    detail::recv_exact(fd.get(), header, sizeof(header), deadline, peer_);
    const auto f = detail::parse_frame(header, sizeof(header), max_message_bytes_);
    TS_CHECK(f.status != detail::ParsedFrame::kError, distributed::DistStoreError,
             "{}: bad reply: {}", peer_, f.error);
    Reply r{static_cast<MsgType>(f.header.type), Bytes(f.header.payload_bytes)};
    detail::recv_exact(fd.get(), r.payload.data(), r.payload.size(), deadline, peer_);
    TS_CHECK(f.header.request_id == id, distributed::DistStoreError,
             "{}: reply for request {} arrived while waiting for request {}", peer_,
             f.header.request_id, id);
    if (r.type == MsgType::ERROR) {
      detail::PayloadReader reader(r.payload.data(), r.payload.size(), "ERROR");
      TS_THROW(distributed::DistStoreError, "{} refused {}: {}", peer_,
               detail::msg_type_name(static_cast<uint16_t>(type)), reader.str());
    }
    return r;
  }

  std::mutex mutex_;  // guards idle_
  std::vector<detail::Fd> idle_;
  std::atomic<uint32_t> next_id_{0};
  std::string host_;
  uint16_t port_;
  std::string secret_;
  uint32_t max_message_bytes_;
  std::string peer_;
};

TCPStore::TCPStore(std::string host, TCPStoreOptions options)
    : Store(options.timeout), host_(std::move(host)), port_(options.port) {
  if (options.secret.empty()) {
    const char* env = std::getenv(kJobSecretEnv);
    if (env) options.secret = env;
  }
  TS_CHECK(options.max_message_bytes >= 1024, ValueError,
           "TCPStore(): option 'max_message_bytes' must be at least 1024, but got {}",
           options.max_message_bytes);
  if (options.is_server) {
    server_ = std::make_unique<Server>(options);
    port_ = server_->port();
  } else {
    TS_CHECK(port_ != 0, ValueError,
             "TCPStore(): a client needs the server's port, but option 'port' is 0");
  }
  client_ = std::make_unique<Client>(host_, port_, options.secret, options.max_message_bytes);
  client_->ensure_connected(Clock::now() + options.timeout);  // fails early on a bad secret
}

TCPStore::~TCPStore() {
  client_.reset();
  server_.reset();
}

void TCPStore::set(const std::string& key, const Bytes& value) {
  detail::check_key("set", key);
  client_->call_ok(MsgType::SET, detail::PayloadWriter().str(key).bytes(value).take(),
                   Clock::now() + timeout(), "set");
}

Bytes TCPStore::get(const std::string& key) {
  detail::check_key("get", key);
  wait({key}, timeout());
  auto v = client_->call_value(MsgType::GET, detail::PayloadWriter().str(key).take(),
                               Clock::now() + timeout(), "get");
  TS_CHECK(v.has_value(), distributed::DistStoreError,
           "TCPStore.get(): key '{}' was deleted while the get waited for it", key);
  return std::move(*v);
}

int64_t TCPStore::add(const std::string& key, int64_t amount) {
  detail::check_key("add", key);
  return client_->call_int(MsgType::ADD, detail::PayloadWriter().str(key).i64(amount).take(),
                           Clock::now() + timeout(), "add");
}

Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  detail::check_key("compare_set", key);
  auto v = client_->call_value(
      MsgType::COMPARE_SET, detail::PayloadWriter().str(key).bytes(expected).bytes(desired).take(),
      Clock::now() + timeout(), "compare_set");
  TS_CHECK(v.has_value(), distributed::DistStoreError,
           "TCPStore.compare_set(): the server answered NOT_FOUND for key '{}'", key);
  return std::move(*v);
}

namespace {
Bytes keys_payload(const std::vector<std::string>& keys) {
  TS_CHECK(keys.size() <= detail::kMaxKeysPerRequest, ValueError,
           "TCPStore: at most {} keys per request, but got {}", detail::kMaxKeysPerRequest,
           keys.size());
  detail::PayloadWriter w;
  w.i64(static_cast<int64_t>(keys.size()));
  for (const auto& k : keys) {
    detail::check_key("wait", k);
    w.str(k);
  }
  return w.take();
}
}  // namespace

void TCPStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  try {
    client_->call_ok(MsgType::WAIT, keys_payload(keys), Clock::now() + timeout, "wait");
  } catch (const DistTimeoutError&) {
    TS_THROW(distributed::DistTimeoutError,
             "TCPStore.wait(): keys {} did not all appear within the timeout of {}",
             detail::describe_keys(keys), timeout);
  }
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  return client_->call_int(MsgType::CHECK, keys_payload(keys), Clock::now() + timeout(), "check") !=
         0;
}

bool TCPStore::delete_key(const std::string& key) {
  detail::check_key("delete_key", key);
  return client_->call_int(MsgType::DELETE, detail::PayloadWriter().str(key).take(),
                           Clock::now() + timeout(), "delete_key") != 0;
}

int64_t TCPStore::num_keys() {
  return client_->call_int(MsgType::NUM_KEYS, {}, Clock::now() + timeout(), "num_keys");
}

std::string TCPStore::address() const {
  return fmt::format("tcp://{}:{}", host_, port_);
}

}  // namespace tessera::distributed
