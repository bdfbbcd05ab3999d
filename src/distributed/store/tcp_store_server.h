// The TCPStore server: one thread that serves every client with poll(). See protocol.h for
// the messages it accepts. It starts listening in the constructor (so clients may connect
// as soon as it returns) and stops in the destructor (open connections are closed).
#pragma once

#include <memory>

#include "tessera/distributed/store.h"

namespace tessera::distributed {

class TCPStore::Server {
 public:
  explicit Server(const TCPStoreOptions& options);
  ~Server();
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::distributed
