// Stores: the c10d semantics on every store, TCPStore's many clients, secret, deadlines, and
// its answers to malformed or oversized messages.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "dist_test_util.h"
#include "distributed/store/protocol.h"
#include "distributed/store/socket.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using dist::Bytes;

Bytes b(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tessera-" + name + "-" + std::to_string(::getpid())))
      .string();
}

// The same checks on every kind of store.
void check_semantics(dist::Store& s) {
  s.set("a", std::string("1"));
  EXPECT_EQ(s.get_string("a"), "1");
  s.set("a", b("two"));
  EXPECT_EQ(s.get("a"), b("two"));
  EXPECT_EQ(s.add("n", 5), 5);
  EXPECT_EQ(s.add("n", -2), 3);
  EXPECT_EQ(s.get_string("n"), "3");
  expect_error_mentions([&] { s.add("a", 1); }, {"add", "a'", "not a decimal integer"});
  // compare_set: c10d's rules.
  EXPECT_EQ(s.compare_set("c", b(""), b("x")), b("x"));         // missing + empty expected: set
  EXPECT_EQ(s.compare_set("c", b("y"), b("z")), b("x"));        // mismatch: current value
  EXPECT_EQ(s.compare_set("c", b("x"), b("z")), b("z"));        // match: set
  EXPECT_EQ(s.compare_set("missing", b("e"), b("d")), b("e"));  // missing + expected: expected
  EXPECT_FALSE(s.check({"missing"}));
  EXPECT_TRUE(s.check({"a", "n", "c"}));
  EXPECT_EQ(s.num_keys(), 3);
  EXPECT_TRUE(s.delete_key("c"));
  EXPECT_FALSE(s.delete_key("c"));
  EXPECT_EQ(s.num_keys(), 2);
  s.set("empty", Bytes{});
  EXPECT_EQ(s.get("empty"), Bytes{});
  const auto start = std::chrono::steady_clock::now();
  expect_error_mentions([&] { s.wait({"a", "never"}, 100ms); }, {"never'", "100ms"});
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  // A get waits for a key another thread sets later.
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    s.set("late", std::string("here"));
  });
  EXPECT_EQ(s.get_string("late"), "here");
  setter.join();
  expect_error_mentions([&] { s.set("", std::string("v")); }, {"set", "key", "empty"});
}

TEST(Store, HashStore) {
  dist::HashStore s(10s);
  check_semantics(s);
}

TEST(Store, FileStoreAcrossInstances) {
  const std::string path = temp_path("filestore");
  std::filesystem::remove(path);
  {
    dist::FileStore s(path, 10s);
    check_semantics(s);
    dist::FileStore other(path, 10s);  // a second user of the file sees everything
    EXPECT_EQ(other.get_string("late"), "here");
    EXPECT_EQ(other.add("n", 10), 13);
    EXPECT_EQ(s.get_string("n"), "13");
  }
  std::filesystem::remove(path);
}

TEST(Store, FileStoreRejectsForeignAndTruncatedFiles) {
  const std::string path = temp_path("filestore-bad");
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fputs("this is not a store", f);
    std::fclose(f);
  }
  expect_error_mentions([&] { dist::FileStore s(path, 1s); }, {path, "not a FileStore file"});
  std::filesystem::remove(path);
  {
    dist::FileStore s(path, 1s);
    s.set("k", std::string("value"));
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 2);
  expect_error_mentions([&] { dist::FileStore s(path, 1s); }, {path, "truncated record"});
  std::filesystem::remove(path);
}

TEST(Store, PrefixStoreScopesKeys) {
  auto base = std::make_shared<dist::HashStore>(10s);
  dist::PrefixStore p("job", base);
  check_semantics(p);
  EXPECT_EQ(base->get_string("job/a"), "two");
  EXPECT_FALSE(base->check({"a"}));
}

dist::TCPStoreOptions server_options(const std::string& secret) {
  dist::TCPStoreOptions o;
  o.is_server = true;
  o.secret = secret;
  o.timeout = 10s;
  return o;
}

dist::TCPStoreOptions client_options(uint16_t port, const std::string& secret) {
  dist::TCPStoreOptions o;
  o.port = port;
  o.secret = secret;
  o.timeout = 10s;
  return o;
}

// connect_store(s.address()) is the same store: a key set through either is seen by the other,
// and the address reads back unchanged.
void expect_reached(dist::Store& s, const std::string& tag) {
  SCOPED_TRACE(s.address());
  const dist::StorePtr twin = dist::connect_store(s.address(), 10s);
  EXPECT_EQ(twin->address(), s.address());
  s.set("from-origin-" + tag, std::string("o"));
  twin->set("from-twin-" + tag, std::string("t"));
  EXPECT_EQ(twin->get_string("from-origin-" + tag), "o");
  EXPECT_EQ(s.get_string("from-twin-" + tag), "t");
}

TEST(StoreAddress, ConnectStoreReachesEveryKindOfStore) {
  auto hash = std::make_shared<dist::HashStore>(10s);
  expect_reached(*hash, "hash");
  // Paths and prefixes with the separator, the escape byte, commas and spaces in them.
  const std::string dir = temp_path("addr #1,%");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/store file#2";
  auto file = std::make_shared<dist::FileStore>(path, 10s);
  EXPECT_EQ(file->address().find_first_of(", "), std::string::npos) << file->address();
  expect_reached(*file, "file");
  dist::PrefixStore nested("b#/%2,", std::make_shared<dist::PrefixStore>("a b", file));
  expect_reached(nested, "nested");
  EXPECT_EQ(file->get_string("a b/b#/%2,/from-twin-nested"), "t");
  {
    // A relative path names the file under the working directory, which the address holds.
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir);
    dist::FileStore relative("store file#2", 10s);
    std::filesystem::current_path(cwd);
    EXPECT_EQ(relative.address(), file->address());
  }
  ::setenv(dist::kJobSecretEnv, "addr-secret", 1);
  {
    dist::TCPStore server("127.0.0.1", server_options("addr-secret"));
    dist::PrefixStore scoped(
        "group/0", std::make_shared<dist::TCPStore>("127.0.0.1",
                                                    client_options(server.port(), "addr-secret")));
    expect_reached(scoped, "tcp");
    EXPECT_EQ(server.get_string("group/0/from-twin-tcp"), "t");
    ::setenv(dist::kJobSecretEnv, "another-job", 1);
    expect_error_mentions([&] { dist::connect_store(server.address(), 10s); },
                          {"authentication failed"});
  }
  ::unsetenv(dist::kJobSecretEnv);
  file.reset();
  std::filesystem::remove_all(dir);
}

TEST(StoreAddress, BadAddressesAreRefusedWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"elsewhere", "unknown scheme"},
      {"tcp://127.0.0.1", "HOST:PORT"},
      {"tcp://127.0.0.1:0", "port"},
      {"tcp://127.0.0.1:70000", "port"},
      {"file://relative/path", "absolute"},
      {"file:///tmp/a%2", "two hex digits"},
      {"file:///tmp/a b", "0x20"},
      {"hash://12", "PID/ID"},
      {"hash://12/x", "PID/ID"},
      {"file:///tmp/a##p", "empty prefix"},
  };
  for (const auto& [address, why] : bad) {
    SCOPED_TRACE(address);
    expect_error_mentions([&] { dist::connect_store(address, 1s); },
                          {"connect_store()", "'" + address + "'", "malformed", why});
    EXPECT_THROW(dist::connect_store(address, 1s), ValueError);
  }
  // Another process's in-memory store cannot be reached; one that is gone is said to be gone.
  const std::string foreign = fmt::format("hash://{}/1", ::getpid() + 1);
  expect_error_mentions([&] { dist::check_store_address(foreign, "here"); },
                        {"here", foreign, "in-process HashStore of process", "cannot reach"});
  std::string gone;
  {
    dist::HashStore h(1s);
    gone = h.address();
  }
  expect_error_mentions([&] { dist::connect_store(gone, 1s); }, {gone, "no longer exists"});
  EXPECT_THROW(dist::connect_store(gone, 1s), dist::DistStoreError);
}

TEST(Store, TCPStoreSemanticsAndManyClients) {
  dist::TCPStore server("127.0.0.1", server_options("s3cret"));
  check_semantics(server);
  constexpr int kClients = 8;
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      dist::TCPStore client("127.0.0.1", client_options(server.port(), "s3cret"));
      for (int i = 0; i < 50; ++i) client.add("counter", 1);
      client.set("client/" + std::to_string(c), std::string("done"));
      // Every client waits for every other one.
      std::vector<std::string> keys;
      for (int k = 0; k < kClients; ++k) keys.push_back("client/" + std::to_string(k));
      client.wait(keys, 10s);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(server.add("counter", 0), kClients * 50);
}

TEST(Store, TCPStoreRejectsAWrongSecret) {
  dist::TCPStore server("127.0.0.1", server_options("right"));
  expect_error_mentions(
      [&] { dist::TCPStore client("127.0.0.1", client_options(server.port(), "wrong")); },
      {"authentication failed", "TESSERA_JOB_SECRET"});
  dist::TCPStore ok("127.0.0.1", client_options(server.port(), "right"));
  ok.set("k", std::string("v"));
  EXPECT_EQ(server.get_string("k"), "v");
}

// Raw bytes to the server: it answers ERROR, closes that connection, and serves others.
std::string send_raw(uint16_t port, const Bytes& bytes) {
  const auto deadline = dist::Clock::now() + 10s;
  auto fd = dist::detail::connect_tcp("127.0.0.1", port, deadline);
  const std::string peer = "test server";
  dist::detail::send_all(fd.get(), bytes.data(), bytes.size(), deadline, peer);
  uint8_t header[dist::detail::kFrameHeaderBytes];
  dist::detail::recv_exact(fd.get(), header, sizeof(header), deadline, peer);
  const auto f = dist::detail::parse_frame(header, sizeof(header), 1 << 20);
  EXPECT_NE(f.status, dist::detail::ParsedFrame::kError) << f.error;
  Bytes payload(f.header.payload_bytes);
  dist::detail::recv_exact(fd.get(), payload.data(), payload.size(), deadline, peer);
  EXPECT_EQ(f.header.type, static_cast<uint16_t>(dist::detail::MsgType::ERROR));
  dist::detail::PayloadReader r(payload.data(), payload.size(), "ERROR");
  const std::string message = r.str();
  // The server closed the connection after its answer.
  uint8_t byte;
  EXPECT_THROW(dist::detail::recv_exact(fd.get(), &byte, 1, deadline, peer),
               dist::DistNetworkError);
  return message;
}

TEST(Store, TCPStoreAnswersMalformedMessagesWithClearErrors) {
  auto o = server_options("");
  o.max_message_bytes = 4096;
  dist::TCPStore server("127.0.0.1", o);
  using dist::detail::MsgType;
  EXPECT_NE(
      send_raw(server.port(), b("GET / HTTP/1.1\r\n\r\n")).find("not a Tessera store message"),
      std::string::npos);
  Bytes v2 =
      dist::detail::encode_frame(MsgType::HELLO, 1, dist::detail::PayloadWriter().str("").take());
  v2[4] = 2;
  EXPECT_NE(send_raw(server.port(), v2).find("version 2 is not supported"), std::string::npos);
  Bytes big = dist::detail::encode_frame(MsgType::SET, 1, Bytes(5000, 'x'));
  EXPECT_NE(send_raw(server.port(), big).find("5000 bytes exceeds the limit of 4096"),
            std::string::npos);
  EXPECT_NE(send_raw(server.port(), dist::detail::encode_frame(MsgType::SET, 1, Bytes{1, 2}))
                .find("first message must be HELLO"),
            std::string::npos);
  Bytes hello =
      dist::detail::encode_frame(MsgType::HELLO, 1, dist::detail::PayloadWriter().str("").take());
  Bytes bad_set = dist::detail::encode_frame(MsgType::SET, 2, Bytes{200, 0, 0, 0, 'k'});
  hello.insert(hello.end(), bad_set.begin(), bad_set.end());
  // The OK to HELLO comes first; read past it by asking for the ERROR's text directly.
  {
    const auto deadline = dist::Clock::now() + 10s;
    auto fd = dist::detail::connect_tcp("127.0.0.1", server.port(), deadline);
    dist::detail::send_all(fd.get(), hello.data(), hello.size(), deadline, "t");
    uint8_t header[16];
    dist::detail::recv_exact(fd.get(), header, 16, deadline, "t");  // OK
    dist::detail::recv_exact(fd.get(), header, 16, deadline, "t");  // ERROR
    const auto f = dist::detail::parse_frame(header, 16, 1 << 20);
    Bytes payload(f.header.payload_bytes);
    dist::detail::recv_exact(fd.get(), payload.data(), payload.size(), deadline, "t");
    dist::detail::PayloadReader r(payload.data(), payload.size(), "ERROR");
    EXPECT_NE(r.str().find("malformed SET message"), std::string::npos);
  }
  // Still serving.
  server.set("alive", std::string("yes"));
  EXPECT_EQ(server.get_string("alive"), "yes");
}

TEST(Store, TCPStoreClientSeesTheServerGoAway) {
  auto server = std::make_unique<dist::TCPStore>("127.0.0.1", server_options("x"));
  dist::TCPStore client("127.0.0.1", client_options(server->port(), "x"));
  client.set("k", std::string("v"));
  server.reset();
  expect_error_mentions([&] { client.get("k"); }, {"TCPStore at 127.0.0.1"});
  client.set_timeout(200ms);
  expect_error_mentions([&] { client.set("k", std::string("v")); },
                        {"TCPStore at 127.0.0.1", "could not connect"});
}

TEST(Store, TCPStoreClientTimesOutWithoutAServer) {
  dist::TCPStoreOptions o = client_options(1, "x");  // nothing listens on port 1
  o.timeout = 200ms;
  expect_error_mentions([&] { dist::TCPStore client("127.0.0.1", o); }, {"could not connect"});
}

TEST(Store, ConstantTimeEqual) {
  using dist::detail::constant_time_equal;
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("", "a"));
}

}  // namespace
}  // namespace tessera::testing
