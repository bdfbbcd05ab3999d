// Software prefetch helpers, and when streamed (non-temporal) stores pay.
//
// ahead(p, bytes): the address `bytes` past p, formed as an integer: the lines ahead may lie
// past the end of a buffer, where pointer arithmetic would be undefined (a prefetch never
// faults). Helpers that issue prefetches are always_inline: GCC otherwise finds a void function
// of prefetches "const" and deletes its calls before it would inline them (seen with GCC 12).
//
// stream_prefetch_pays(): whether loops that stream a buffer from memory (reductions, pointwise
// rows, GEMV weight rows) issue software prefetches ahead of their loads. On Intel (Xeon,
// Sapphire Rapids class VM) they did: the hardware prefetchers alone left one core short of its
// read bandwidth once a loop did more than add (argmax, var and gelu over 64M float32 gained
// 15-40%). On AMD they cost, because its prefetchers keep up alone and the extra
// instructions take load slots: on a Zen 5 VM, amax and var over 64M float32 ran 7-28% slower
// with them (one and two threads); on a Zen 4 VM, the float32 and bfloat16 GEMV rows read an
// 8192x8192 weight at 13-15 GB/s with them and 18-20 GB/s without (one thread). So they run
// everywhere but on AMD.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessera {

[[gnu::always_inline]] inline const void* ahead(const void* p, int64_t bytes) {
  return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) +
                                       static_cast<uintptr_t>(bytes));
}

inline bool stream_prefetch_pays() {
  static const bool pays = !cpu_features().amd;
  return pays;
}

// streamed_stores_overlap_compute(): whether a loop with a long computation per element (gelu)
// still gains from writing a large output with non-temporal stores, as the cheap ops do. On the
// Xeon VM it did (gelu over 64M float32 at 108% of the read bandwidth, one thread). On a Zen 5
// VM the same loop ran 1.3-1.5x slower with them than with plain stores, also when each 1-16 KiB
// block was computed into an L1 buffer first and then streamed out in a burst, while a plain
// copy ran as fast either way (one thread, eight runs). So there such loops store plainly.
inline bool streamed_stores_overlap_compute() {
  static const bool overlap = !cpu_features().amd;
  return overlap;
}

// Orders a loop's non-temporal stores before its results are handed to another thread (they
// are weakly ordered).
inline void stream_fence() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
#endif
}

}  // namespace tessera
