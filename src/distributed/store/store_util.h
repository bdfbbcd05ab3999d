// Helpers shared by the stores: the decimal counters of add(), c10d's compare_set rule, and
// argument checks.
#pragma once

#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include "tessera/distributed/store.h"

namespace tessera::distributed::detail {

// The integer an add() key holds; DistStoreError when the value is not a decimal integer.
inline int64_t parse_counter(const std::string& key, const Bytes& value) {
  int64_t out = 0;
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  const auto [ptr, ec] = std::from_chars(begin, end, out);
  TS_CHECK(ec == std::errc() && ptr == end && !value.empty(), distributed::DistStoreError,
           "Store.add(): key '{}' holds {} bytes that are not a decimal integer", key,
           value.size());
  return out;
}

inline Bytes format_counter(int64_t v) {
  const std::string s = std::to_string(v);
  return Bytes(s.begin(), s.end());
}

inline void check_key(const std::string& op, const std::string& key) {
  TS_CHECK(!key.empty(), ValueError, "Store.{}(): argument 'key' must not be empty", op);
}

// The counter add(key, amount) leaves: amount plus the counter the key holds (`current`;
// null when the key is absent).
inline int64_t counter_after_add(const std::string& key, const Bytes* current, int64_t amount) {
  return current ? amount + parse_counter(key, *current) : amount;
}

// c10d's compare_set rule on the key's current value (null when absent): an absent key is
// created only when `expected` is empty; a present one takes `desired` only when it holds
// `expected`. `result` is what the call returns (the value after it, or `expected` for an
// absent key that stays absent); `writes` says whether the stored value changes to `desired`.
struct CompareSetOutcome {
  Bytes result;
  bool writes = false;
};

inline CompareSetOutcome compare_set_outcome(const Bytes* current, const Bytes& expected,
                                             const Bytes& desired) {
  if (!current)
    return expected.empty() ? CompareSetOutcome{desired, true} : CompareSetOutcome{expected};
  if (*current == expected) return {desired, *current != desired};
  return {*current};
}

// Both rules applied to a map-like store (HashStore, the TCPStore server).
template <class Map>
int64_t add_in(Map& map, const std::string& key, int64_t amount) {
  auto it = map.find(key);
  const int64_t v = counter_after_add(key, it == map.end() ? nullptr : &it->second, amount);
  map[key] = format_counter(v);
  return v;
}

template <class Map>
Bytes compare_set_in(Map& map, const std::string& key, const Bytes& expected,
                     const Bytes& desired) {
  auto it = map.find(key);
  CompareSetOutcome o =
      compare_set_outcome(it == map.end() ? nullptr : &it->second, expected, desired);
  if (o.writes) map[key] = desired;
  return std::move(o.result);
}

inline std::string describe_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 8) out += fmt::format(" and {} more", keys.size() - 8);
  return out;
}

}  // namespace tessera::distributed::detail
