// Store addresses (address.h) and connect_store.
#include "distributed/store/address.h"

#include <unistd.h>

#include <charconv>
#include <optional>
#include <string_view>

#include "tessera/distributed/store.h"

namespace tessera::distributed {

namespace detail {

namespace {

bool plain_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("-._~/:@+=[]").find(static_cast<char>(c)) != std::string_view::npos;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

[[noreturn]] void malformed(const std::string& address, const std::string& why) {
  TS_THROW(ValueError,
           "store address '{}' is malformed: {} (expected 'tcp://HOST:PORT', 'file:///PATH' or "
           "'hash://PID/ID', then '#PREFIX' per prefix, as Store::address() writes them)",
           printable(address), why);
}

std::string unescape(const std::string& address, std::string_view part) {
  std::string out;
  out.reserve(part.size());
  for (size_t i = 0; i < part.size(); ++i) {
    const char c = part[i];
    if (c == '%') {
      const bool two = i + 2 < part.size();
      const int hi = two ? hex_value(part[i + 1]) : -1;
      const int lo = two ? hex_value(part[i + 2]) : -1;
      if (hi < 0 || lo < 0) malformed(address, "a '%' not followed by two hex digits");
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (plain_byte(static_cast<unsigned char>(c))) {
      out.push_back(c);
    } else {
      malformed(address,
                fmt::format("byte 0x{:02x} must be written as %XX", static_cast<unsigned char>(c)));
    }
  }
  return out;
}

template <class Int>
bool parse_decimal(std::string_view text, Int& out) {
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && p == text.data() + text.size();
}

}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f && c != '\\') {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", b);
    }
  }
  return out;
}

std::string escape_address_part(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (plain_byte(b)) {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", b);
    }
  }
  return out;
}

StoreAddress parse_store_address(const std::string& address) {
  StoreAddress a;
  const std::string_view text(address);
  const size_t hash = text.find('#');
  const std::string_view base = text.substr(0, hash);
  for (size_t at = hash; at != std::string_view::npos;) {
    const size_t next = text.find('#', at + 1);
    const std::string_view part = text.substr(at + 1, next == text.npos ? next : next - at - 1);
    if (part.empty()) malformed(address, "an empty prefix");
    a.prefixes.push_back(unescape(address, part));
    at = next;
  }
  const auto rest = [&](std::string_view scheme) -> std::optional<std::string_view> {
    if (!base.starts_with(scheme)) return std::nullopt;
    return base.substr(scheme.size());
  };
  if (auto tcp = rest("tcp://")) {
    a.kind = StoreAddress::Kind::Tcp;
    const size_t colon = tcp->rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      malformed(address, "a tcp address needs HOST:PORT");
    a.host = unescape(address, tcp->substr(0, colon));
    if (!parse_decimal(tcp->substr(colon + 1), a.port) || a.port == 0)
      malformed(address, "the port must be a number in [1, 65535]");
  } else if (auto file = rest("file://")) {
    a.kind = StoreAddress::Kind::File;
    a.path = unescape(address, *file);
    if (a.path.empty() || a.path.front() != '/') malformed(address, "a file path must be absolute");
  } else if (auto h = rest("hash://")) {
    a.kind = StoreAddress::Kind::Hash;
    const size_t slash = h->find('/');
    if (slash == std::string_view::npos || !parse_decimal(h->substr(0, slash), a.pid) ||
        !parse_decimal(h->substr(slash + 1), a.id))
      malformed(address, "a hash address is hash://PID/ID, both decimal");
  } else {
    malformed(address, "unknown scheme");
  }
  return a;
}

}  // namespace detail

namespace {

// The address parsed, with the checks that need no connection (check_store_address).
detail::StoreAddress checked_address(const std::string& address, const std::string& what) {
  detail::StoreAddress a;
  try {
    a = detail::parse_store_address(address);
  } catch (const ValueError& e) {
    TS_THROW(ValueError, "{}: {}", what, e.what());
  }
  TS_CHECK(a.kind != detail::StoreAddress::Kind::Hash || a.pid == ::getpid(), ValueError,
           "{}: store '{}' is an in-process HashStore of process {}, which this process ({}) "
           "cannot reach; give every member a store it can reach (a TCPStore or a FileStore)",
           what, address, a.pid, ::getpid());
  return a;
}

}  // namespace

void check_store_address(const std::string& address, const std::string& what) {
  checked_address(address, what);
}

StorePtr connect_store(const std::string& address, Milliseconds timeout) {
  const detail::StoreAddress a = checked_address(address, "connect_store()");
  StorePtr store;
  switch (a.kind) {
    case detail::StoreAddress::Kind::Tcp: {
      TCPStoreOptions options;
      options.port = a.port;
      options.timeout = timeout;
      store = std::make_shared<TCPStore>(a.host, options);
      break;
    }
    case detail::StoreAddress::Kind::File:
      store = std::make_shared<FileStore>(a.path, timeout);
      break;
    case detail::StoreAddress::Kind::Hash:
      store = detail::attach_hash_store(a.id, timeout);
      TS_CHECK(store != nullptr, distributed::DistStoreError,
               "connect_store(): the HashStore of '{}' no longer exists (every HashStore on its "
               "map was destroyed)",
               address);
      break;
  }
  for (const std::string& prefix : a.prefixes) store = std::make_shared<PrefixStore>(prefix, store);
  return store;
}

}  // namespace tessera::distributed
