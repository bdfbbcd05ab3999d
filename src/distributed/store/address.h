// Store addresses (Store::address()): their grammar, escaping and parsing, shared by the stores
// that make them and by connect_store, which reaches the store one names.
//
//   address  := base ("#" part)*          each part a PrefixStore's prefix, innermost first
//   base     := "tcp://" HOST ":" PORT    a TCPStore's server
//             | "file://" part            a FileStore's absolute path
//             | "hash://" PID "/" ID      a HashStore of process PID (only it can reach it)
//   part     := bytes, escaped: every byte outside [A-Za-z0-9-._~/:@+=[]] as "%XX" (hex)
//
// So "#" separates prefixes whatever a path or prefix holds, and an address never contains a
// comma or white space (reconfigure joins handles with commas).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::distributed::detail {

std::string escape_address_part(const std::string& text);

// Text from outside (an address, a handle) for an error message: bytes outside printable ASCII,
// and the backslash, as \xNN, so that a NUL or a control byte neither cuts nor garbles it.
std::string printable(const std::string& text);

struct StoreAddress {
  enum class Kind { Tcp, File, Hash };
  Kind kind = Kind::Tcp;
  std::string host;  // Tcp
  uint16_t port = 0;
  std::string path;  // File
  int64_t pid = 0;   // Hash
  uint64_t id = 0;
  std::vector<std::string> prefixes;  // innermost first
};

// ValueError naming `address` and what was wrong when it does not follow the grammar.
StoreAddress parse_store_address(const std::string& address);

}  // namespace tessera::distributed::detail
