// Tessera's exceptions. Every public op validates its arguments and throws one of these with
// a message that names the operation, the argument, what was expected and what was given:
//   "sum(): argument 'dim' expected a value in [-2, 1], but got 5"
// The classes mirror the Python exceptions PyTorch raises, so the same mistakes read the same.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// A value is outside what the argument accepts (sizes, ranges, non-finite input, ...).
class ValueError : public Error {
 public:
  using Error::Error;
};

// A dtype (or other type) is not accepted, or a cast is not allowed.
class TypeError : public Error {
 public:
  using Error::Error;
};

// A dimension or index is out of range.
class IndexError : public Error {
 public:
  using Error::Error;
};

// Anything else that goes wrong at run time (shape mismatches, memory overlap, ...).
class RuntimeError : public Error {
 public:
  using Error::Error;
};

// A path that Tessera does not implement says so instead of guessing.
class NotImplementedError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

namespace detail {
template <class E, class... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> f, Args&&... args) {
  throw E(fmt::format(f, std::forward<Args>(args)...));
}
}  // namespace detail

}  // namespace tessera

// TS_CHECK(cond, ErrorType, "fmt", args...): throws ErrorType with the formatted message when
// cond is false. The message is only formatted on failure.
#define TS_CHECK(cond, ErrorType, ...)                                   \
  do {                                                                   \
    if (!(cond)) [[unlikely]] {                                          \
      ::tessera::detail::throw_error<::tessera::ErrorType>(__VA_ARGS__); \
    }                                                                    \
  } while (0)

#define TS_THROW(ErrorType, ...) ::tessera::detail::throw_error<::tessera::ErrorType>(__VA_ARGS__)

// Internal invariants: a failure here is a Tessera bug, not a user error.
#define TS_INTERNAL_ASSERT(cond)                                                                   \
  do {                                                                                             \
    if (!(cond)) [[unlikely]] {                                                                    \
      ::tessera::detail::throw_error<::tessera::RuntimeError>(                                     \
          "internal assertion failed: {} at {}:{} (please report a Tessera bug)", #cond, __FILE__, \
          __LINE__);                                                                               \
    }                                                                                              \
  } while (0)
