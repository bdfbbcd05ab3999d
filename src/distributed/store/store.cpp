// Store's shared members, and PrefixStore.
#include <fmt/chrono.h>

#include "distributed/store/address.h"
#include "distributed/store/store_util.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

Store::Store(Milliseconds timeout) : timeout_(timeout) {
  set_timeout(timeout);
}

void Store::set_timeout(Milliseconds timeout) {
  TS_CHECK(timeout.count() > 0, ValueError,
           "Store.set_timeout(): argument 'timeout' must be positive, but got {}", timeout);
  timeout_.store(timeout);
}

void Store::set(const std::string& key, const std::string& value) {
  set(key, Bytes(value.begin(), value.end()));
}

std::string Store::get_string(const std::string& key) {
  const Bytes v = get(key);
  return std::string(v.begin(), v.end());
}

// ---- PrefixStore -----------------------------------------------------------------------------

PrefixStore::PrefixStore(std::string prefix, StorePtr store)
    : Store(store ? store->timeout() : kDefaultStoreTimeout),
      prefix_(std::move(prefix)),
      store_(std::move(store)) {
  TS_CHECK(store_ != nullptr, ValueError, "PrefixStore(): argument 'store' must not be null");
  TS_CHECK(!prefix_.empty(), ValueError, "PrefixStore(): argument 'prefix' must not be empty");
}

std::vector<std::string> PrefixStore::keys(const std::vector<std::string>& ks) const {
  std::vector<std::string> out;
  out.reserve(ks.size());
  for (const auto& k : ks) out.push_back(key(k));
  return out;
}

void PrefixStore::set(const std::string& k, const Bytes& value) {
  detail::check_key("set", k);
  store_->set(key(k), value);
}
Bytes PrefixStore::get(const std::string& k) {
  detail::check_key("get", k);
  return store_->get(key(k));
}
int64_t PrefixStore::add(const std::string& k, int64_t amount) {
  detail::check_key("add", k);
  return store_->add(key(k), amount);
}
Bytes PrefixStore::compare_set(const std::string& k, const Bytes& expected, const Bytes& desired) {
  detail::check_key("compare_set", k);
  return store_->compare_set(key(k), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& ks, Milliseconds timeout) {
  store_->wait(keys(ks), timeout);
}
bool PrefixStore::check(const std::vector<std::string>& ks) {
  return store_->check(keys(ks));
}
bool PrefixStore::delete_key(const std::string& k) {
  detail::check_key("delete_key", k);
  return store_->delete_key(key(k));
}
int64_t PrefixStore::num_keys() {
  return store_->num_keys();
}

std::string PrefixStore::address() const {
  return store_->address() + "#" + detail::escape_address_part(prefix_);
}

}  // namespace tessera::distributed
