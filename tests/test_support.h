// Helpers shared by every test binary.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
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

// Every ISA copy of a kernel table this CPU can run, by name, generic first: tests check each
// against the plain references, whichever one the process dispatches to.
template <class Table>
std::vector<std::pair<std::string, const Table*>> runnable_tables(const Table& (*generic)(),
                                                                  const Table& (*avx2)(),
                                                                  const Table& (*avx512)()) {
  std::vector<std::pair<std::string, const Table*>> out{{"generic", &generic()}};
  const CpuIsa best = best_isa();
  if (best >= CpuIsa::Avx2) out.emplace_back("avx2", &avx2());
  if (best >= CpuIsa::Avx512) out.emplace_back("avx512", &avx512());
  return out;
}

}  // namespace tessera::testing

// runnable_tables for a table declared with TS_DECLARE_ISA_TABLE.
#define TS_RUNNABLE_TABLES(name)                                                                 \
  ::tessera::testing::runnable_tables(::tessera::cpu::generic::name, ::tessera::cpu::avx2::name, \
                                      ::tessera::cpu::avx512::name)
