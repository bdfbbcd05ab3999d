// The errors of tessera::distributed, named as in torch.distributed. Each message names the
// operation, the group or store involved, what was expected and what happened.
//
//   DistError          base of everything below
//   DistBackendError   a communicator failed: a peer died or aborted, the shared segment is
//                      unusable, the ranks disagree on an op (mismatched sizes or dtypes)
//   DistStoreError     a store refused or could not serve a request (malformed message,
//                      wrong secret, missing key after its deadline)
//   DistNetworkError   a socket failed: refused connection, closed by the peer
//   DistTimeoutError   a deadline passed (an op's timeout, a store wait, a Work::wait)
#pragma once

#include <exception>
#include <string>

#include "tessera/core/error.h"

namespace tessera::distributed {

class DistError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

class DistBackendError : public DistError {
 public:
  using DistError::DistError;
};

class DistStoreError : public DistError {
 public:
  using DistError::DistError;
};

class DistNetworkError : public DistError {
 public:
  using DistError::DistError;
};

class DistTimeoutError : public DistError {
 public:
  using DistError::DistError;
};

// The message of the exception `error` holds ("unknown error" when it is not a
// std::exception).
std::string exception_message(const std::exception_ptr& error);

}  // namespace tessera::distributed
