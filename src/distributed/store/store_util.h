// Helpers shared by the stores: the decimal counters of add(), c10d's compare_set rule, and
// argument checks.
#pragma once

#include <charconv>
#include <string>
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

// c10d's compare_set on a map-like `find` result: returns the value after the call.
template <class Map>
Bytes compare_set_in(Map& map, const std::string& key, const Bytes& expected,
                     const Bytes& desired) {
  auto it = map.find(key);
  if (it == map.end()) {
    if (!expected.empty()) return expected;
    map.emplace(key, desired);
    return desired;
  }
  if (it->second == expected) it->second = desired;
  return it->second;
}

inline std::string describe_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 8) out += fmt::format(" and {} more", keys.size() - 8);
  return out;
}

}  // namespace tessera::distributed::detail
