// HashStore: a map under a mutex; waiters sleep on a condition variable until a write.
#include <fmt/chrono.h>

#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "distributed/store/store_util.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

namespace {

// Every live HashStore map of this process by id, so that connect_store reaches one by its
// address without trusting a pointer written in text.
struct Registry {
  std::mutex mutex;
  uint64_t next_id = 1;
  std::unordered_map<uint64_t, std::weak_ptr<void>> maps;
  static Registry& get() {
    static Registry* r = new Registry;  // never destroyed: stores may outlive static teardown
    return *r;
  }
};

}  // namespace

struct HashStore::State {
  ~State() {
    Registry& r = Registry::get();
    std::lock_guard lock(r.mutex);
    r.maps.erase(id);
  }
  uint64_t id = 0;  // its key in the Registry
  std::mutex mutex;
  std::condition_variable cv;  // notified on every write
  std::unordered_map<std::string, Bytes> map;

  bool has_all(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
      if (!map.count(k)) return false;
    return true;
  }
};

HashStore::HashStore(Milliseconds timeout) : Store(timeout), state_(std::make_shared<State>()) {
  Registry& r = Registry::get();
  std::lock_guard lock(r.mutex);
  state_->id = r.next_id++;
  r.maps[state_->id] = state_;
}
HashStore::HashStore(std::shared_ptr<State> state, Milliseconds timeout)
    : Store(timeout), state_(std::move(state)) {}
HashStore::~HashStore() = default;

StorePtr detail::attach_hash_store(uint64_t id, Milliseconds timeout) {
  std::shared_ptr<HashStore::State> state;
  {
    Registry& r = Registry::get();
    std::lock_guard lock(r.mutex);
    const auto it = r.maps.find(id);
    if (it != r.maps.end()) state = std::static_pointer_cast<HashStore::State>(it->second.lock());
  }
  if (!state) return nullptr;
  return StorePtr(new HashStore(std::move(state), timeout));
}

void HashStore::set(const std::string& key, const Bytes& value) {
  detail::check_key("set", key);
  {
    std::lock_guard lock(state_->mutex);
    state_->map[key] = value;
  }
  state_->cv.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  detail::check_key("get", key);
  wait({key}, timeout());
  std::lock_guard lock(state_->mutex);
  auto it = state_->map.find(key);
  TS_CHECK(it != state_->map.end(), distributed::DistStoreError,
           "HashStore.get(): key '{}' was deleted while the get waited for it", key);
  return it->second;
}

int64_t HashStore::add(const std::string& key, int64_t amount) {
  detail::check_key("add", key);
  int64_t value = 0;
  {
    std::lock_guard lock(state_->mutex);
    value = detail::add_in(state_->map, key, amount);
  }
  state_->cv.notify_all();
  return value;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  detail::check_key("compare_set", key);
  Bytes out;
  {
    std::lock_guard lock(state_->mutex);
    out = detail::compare_set_in(state_->map, key, expected, desired);
  }
  state_->cv.notify_all();
  return out;
}

void HashStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  std::unique_lock lock(state_->mutex);
  TS_CHECK(state_->cv.wait_for(lock, timeout, [&] { return state_->has_all(keys); }),
           distributed::DistTimeoutError,
           "HashStore.wait(): keys {} did not all appear within the timeout of {}",
           detail::describe_keys(keys), timeout);
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(state_->mutex);
  return state_->has_all(keys);
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard lock(state_->mutex);
  return state_->map.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard lock(state_->mutex);
  return static_cast<int64_t>(state_->map.size());
}

std::string HashStore::address() const {
  return fmt::format("hash://{}/{}", ::getpid(), state_->id);
}

}  // namespace tessera::distributed
