// Stores: the key-value rendezvous that ranks use to find each other (torch.distributed's
// Store, HashStore, FileStore, PrefixStore, TCPStore).
//
// Semantics shared by every store (those of c10d):
//   set(k, v)              stores v under k (replacing any value)
//   get(k)                 waits until k exists (at most timeout()), then returns its value
//   add(k, n)              k holds a decimal integer (0 when missing); adds n, returns the sum
//   compare_set(k, e, d)   when k holds e, or k is missing and e is empty: sets d, returns d;
//                          otherwise returns the current value (e itself when k is missing)
//   wait(keys[, timeout])  waits until every key exists; DistTimeoutError after the deadline
//   check(keys)            whether every key exists now (never waits)
//   delete_key(k)          removes k; whether it existed
//   num_keys()             how many keys exist
// Every blocking call has a deadline: the store's timeout unless one is given.
//
// Thread-safety: every store may be used from several threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/distributed/work.h"

namespace tessera::distributed {

using Bytes = std::vector<uint8_t>;

inline constexpr Milliseconds kDefaultStoreTimeout{300'000};

class Store {
 public:
  explicit Store(Milliseconds timeout = kDefaultStoreTimeout);
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  virtual Bytes get(const std::string& key) = 0;
  virtual int64_t add(const std::string& key, int64_t amount) = 0;
  virtual Bytes compare_set(const std::string& key, const Bytes& expected,
                            const Bytes& desired) = 0;
  virtual void wait(const std::vector<std::string>& keys, Milliseconds timeout) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;
  // Where the store lives: "tcp://HOST:PORT", "file:///PATH" or "hash://PID/ID" (an
  // in-process store), with "#PREFIX" appended per PrefixStore (paths and prefixes escaped as
  // %XX outside [A-Za-z0-9-._~/:@+=[]], so an address is unambiguous and has no commas or
  // spaces). Two stores with one address see the same keys; connect_store reaches the store an
  // address names, and reconfigure handles carry it.
  virtual std::string address() const = 0;

  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  // Text conveniences.
  void set(const std::string& key, const std::string& value);
  std::string get_string(const std::string& key);

  Milliseconds timeout() const { return timeout_.load(); }
  void set_timeout(Milliseconds timeout);

 private:
  std::atomic<Milliseconds> timeout_;
};

using StorePtr = std::shared_ptr<Store>;

// The store `address` names (as Store::address() returns it), seen through its prefixes: a
// TCPStore client (presenting the job's secret, TESSERA_JOB_SECRET), a FileStore on the path,
// or this process's HashStore of that id. Its calls and the TCP connect wait at most `timeout`.
// ValueError for a malformed address or another process's HashStore (only threads of the
// process that made one can reach it); DistStoreError when that HashStore no longer exists or
// the server cannot be reached or refuses the secret.
StorePtr connect_store(const std::string& address, Milliseconds timeout = kDefaultStoreTimeout);

// The checks of connect_store that need no connection (the grammar; a HashStore of this
// process): ValueError saying what is wrong, naming `what` (e.g. "reconfigure(): handles[2]").
void check_store_address(const std::string& address, const std::string& what);

namespace detail {
// This process's HashStore map `id` (null when none lives), for connect_store.
StorePtr attach_hash_store(uint64_t id, Milliseconds timeout);
}  // namespace detail

// In-process map; waits use a condition variable. connect_store(address()) from any thread of
// the process gives another HashStore on the same map, for as long as one of them lives.
class HashStore : public Store {
 public:
  explicit HashStore(Milliseconds timeout = kDefaultStoreTimeout);
  ~HashStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::string address() const override;
  using Store::set;
  using Store::wait;

 private:
  struct State;
  HashStore(std::shared_ptr<State> state, Milliseconds timeout);
  friend StorePtr detail::attach_hash_store(uint64_t id, Milliseconds timeout);
  std::shared_ptr<State> state_;
};

// A file shared by processes on one host (or a shared file system): an append-only log of
// records, each appended under an exclusive fcntl lock and replayed under a shared one.
// Waits poll the file. The file must be new or written by a FileStore of the same version;
// anything else is rejected with an error naming the path and the offset of the bad record.
class FileStore : public Store {
 public:
  explicit FileStore(std::string path, Milliseconds timeout = kDefaultStoreTimeout);
  ~FileStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::string address() const override;
  using Store::set;
  using Store::wait;
  const std::string& path() const { return path_; }

 private:
  struct State;
  std::string path_;
  std::string address_;  // of the absolute path, made at construction
  std::unique_ptr<State> state_;
};

// Every key of `store` seen through "<prefix>/" (groups share one store this way).
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, StorePtr store);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  // The number of keys of the whole underlying store (as c10d's PrefixStore).
  int64_t num_keys() override;
  std::string address() const override;
  using Store::set;
  using Store::wait;
  const StorePtr& underlying_store() const { return store_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  std::vector<std::string> keys(const std::vector<std::string>& ks) const;
  std::string prefix_;
  StorePtr store_;
};

// The environment variable that carries the job's secret (the launcher makes one per job).
inline constexpr const char* kJobSecretEnv = "TESSERA_JOB_SECRET";

struct TCPStoreOptions {
  // 0 picks a free port when this process runs the server (see TCPStore::port()).
  uint16_t port = 0;
  // Whether this process runs the server (in a thread of its own).
  bool is_server = false;
  // Expected number of ranks; informational (c10d's world_size), -1 when unknown.
  int64_t num_workers = -1;
  // The server listens on 127.0.0.1 unless the job spans hosts, then on every interface.
  bool multi_host = false;
  // The job's secret; when empty, read from TESSERA_JOB_SECRET (empty if unset). The server
  // serves only clients that present the same secret (compared in constant time).
  std::string secret;
  Milliseconds timeout = kDefaultStoreTimeout;
  // Requests whose payload exceeds this are rejected (and the connection closed).
  uint32_t max_message_bytes = 64u << 20;
};

// A store served over TCP by a thread of the rank that is the server (or of the launcher).
// Each TCPStore keeps a pool of connections, so a thread blocked in wait() or get() does not
// hold up the others.
// The wire format is in src/distributed/store/protocol.h.
class TCPStore : public Store {
 public:
  TCPStore(std::string host, TCPStoreOptions options = {});
  ~TCPStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::string address() const override;
  using Store::set;
  using Store::wait;

  const std::string& host() const { return host_; }
  // The server's port (the one it picked when options.port was 0).
  uint16_t port() const { return port_; }

 private:
  class Server;
  class Client;
  std::string host_;
  uint16_t port_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

}  // namespace tessera::distributed
