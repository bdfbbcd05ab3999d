// The address `bytes` past p, formed as an integer, for software prefetches: the lines ahead
// may lie past the end of a buffer, where pointer arithmetic would be undefined (a prefetch
// never faults). always_inline: GCC otherwise finds a void function of prefetches "const" and
// deletes its calls before it would inline them (seen with GCC 12).
#pragma once

#include <cstdint>

namespace tessera {

[[gnu::always_inline]] inline const void* ahead(const void* p, int64_t bytes) {
  return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) +
                                       static_cast<uintptr_t>(bytes));
}

}  // namespace tessera
