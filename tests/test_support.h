// Helpers shared by every test binary.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tessera/core/error.h"

namespace tessera::testing {

// Runs fn, which must throw a tessera::Error whose message contains every word (the op, the
// argument, what was expected and what was given).
inline void expect_error_mentions(const std::function<void()>& fn,
                                  const std::vector<std::string>& words) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const auto& word : words)
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos)
          << "'" << word << "' missing from: " << e.what();
  }
}

}  // namespace tessera::testing
