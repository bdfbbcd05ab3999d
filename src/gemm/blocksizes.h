// Cache blocking for the five GEMM loops (docs/gemm.md has the table for this machine).
//
//   KC: depth of one rank-kc update. The B micro-panel (KC x NR) is re-read by every A
//       micro-panel of the block; a deeper KC amortises each C-tile update (load, scale,
//       store: from memory where C is larger than the caches) over more FMAs. The panel
//       streams from L2 beside the A block, so KC * NR * size ~= L2 / 8, capped at 1024
//       (docs/gemm.md has the measurements: on Zen 5, 1 MiB of L2, 1024 against 512 and 768).
//   MC: rows of the packed A block, which every B micro-panel of the block streams through:
//       MC * KC * size <= ~2/3 L2 (a multiple of MR).
//   NC: columns of the packed B block, reused by every A block: KC * NC * size within half
//       of L3, and at most 4096 (a multiple of NR). A is packed again for every NC block.
//
// MR and NR come from the ISA's microkernel; cache sizes from sysfs, then sysconf, then
// defaults (32 KiB, 1 MiB, 8 MiB). TESSERA_GEMM_BLOCKS=MC,KC,NC overrides the derived values
// (rounded to MR and NR multiples) for tuning experiments; it is read at the first GEMM, and
// again by reload_block_override().
#pragma once

#include <cstdint>
#include <string>

namespace tessera::gemm {

struct CacheSizes {
  int64_t l1d = 32 << 10;
  int64_t l2 = 1 << 20;
  int64_t l3 = 8 << 20;  // the share of one core's cluster, as the OS reports it
};

// Read once per process.
const CacheSizes& cache_sizes();

struct BlockSizes {
  int64_t mr = 0, nr = 0;
  int64_t mc = 0, kc = 0, nc = 0;
};

// Blocking for a microkernel of mr x nr elements of `elem_size` bytes. KC sizes the kernel's B
// micro-panel to L2, unless `kc` > 0 asks for that KC instead; MC and NC follow from KC.
// TESSERA_GEMM_BLOCKS, when set, wins over both.
BlockSizes block_sizes(int64_t mr, int64_t nr, int64_t elem_size, const CacheSizes& caches,
                       int64_t kc = 0);

// The derived KC is never below this; only TESSERA_GEMM_BLOCKS sets a smaller one.
inline constexpr int64_t kMinKc = 64;
// Nor above this (except a `kc` the caller asks for).
inline constexpr int64_t kMaxKc = 1024;

// Whether a depth of k <= kMinKc lies within one KC block whatever the kernel, answered from
// the override alone (block_sizes(), even memoised, was a tenth of an 8x8x8 product).
bool within_min_kc(int64_t k);

std::string to_string(const BlockSizes& b);

// Whether TESSERA_GEMM_BLOCKS sets the block sizes.
bool block_sizes_overridden();

// Reads TESSERA_GEMM_BLOCKS again (for a process that changes it, such as a test).
void reload_block_override();

}  // namespace tessera::gemm
