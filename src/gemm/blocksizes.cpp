#include "gemm/blocksizes.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <fmt/format.h>

namespace tessera::gemm {

namespace {

// "48K", "1024K", "32M" as sysfs writes them; 0 when unreadable.
int64_t read_sysfs_size(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s.empty()) return 0;
  char* end = nullptr;
  int64_t v = std::strtoll(s.c_str(), &end, 10);
  if (end && (*end == 'K' || *end == 'k')) v <<= 10;
  if (end && (*end == 'M' || *end == 'm')) v <<= 20;
  return v > 0 ? v : 0;
}

std::string read_word(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  f >> s;
  return s;
}

CacheSizes detect() {
  CacheSizes c;
  CacheSizes found{0, 0, 0};
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 8; ++i) {
    const std::string dir = base + std::to_string(i) + "/";
    const std::string level = read_word(dir + "level"), type = read_word(dir + "type");
    const int64_t size = read_sysfs_size(dir + "size");
    if (level.empty() || size == 0) continue;
    if (level == "1" && (type == "Data" || type == "Unified")) found.l1d = size;
    if (level == "2") found.l2 = size;
    if (level == "3") found.l3 = size;
  }
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  if (found.l1d == 0) found.l1d = std::max<long>(0, sysconf(_SC_LEVEL1_DCACHE_SIZE));
  if (found.l2 == 0) found.l2 = std::max<long>(0, sysconf(_SC_LEVEL2_CACHE_SIZE));
  if (found.l3 == 0) found.l3 = std::max<long>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
  // Virtual machines sometimes report nonsense (an L3 of half a gigabyte, an L1 of 0): keep
  // each level within a plausible range, else fall back to the default.
  auto sane = [](int64_t v, int64_t lo, int64_t hi, int64_t dflt) {
    return (v >= lo && v <= hi) ? v : dflt;
  };
  c.l1d = sane(found.l1d, 16 << 10, 256 << 10, c.l1d);
  c.l2 = sane(found.l2, 128 << 10, 8 << 20, c.l2);
  c.l3 = sane(found.l3, 1 << 20, 256 << 20, c.l3);
  return c;
}

int64_t round_down(int64_t v, int64_t m) {
  return std::max(m, v / m * m);
}

// TESSERA_GEMM_BLOCKS, parsed (zeros: unset or malformed). Read once, not on every call:
// getenv scans the whole environment, a tenth of an 8x8x8 product's time.
struct BlockOverride {
  std::atomic<int64_t> mc{0}, kc{0}, nc{0};
  BlockOverride() { read_environment(); }
  void read_environment() {
    long m = 0, k = 0, n = 0;
    const char* env = std::getenv("TESSERA_GEMM_BLOCKS");
    const bool ok =
        env && std::sscanf(env, "%ld,%ld,%ld", &m, &k, &n) == 3 && m > 0 && k > 0 && n > 0;
    mc.store(ok ? m : 0, std::memory_order_relaxed);
    nc.store(ok ? n : 0, std::memory_order_relaxed);
    kc.store(ok ? k : 0, std::memory_order_relaxed);
  }
};

BlockOverride& block_override() {
  static BlockOverride o;
  return o;
}

}  // namespace

const CacheSizes& cache_sizes() {
  static const CacheSizes c = detect();
  return c;
}

BlockSizes block_sizes(int64_t mr, int64_t nr, int64_t elem_size, const CacheSizes& caches,
                       int64_t kc) {
  const BlockOverride& o = block_override();
  const int64_t o_mc = o.mc.load(std::memory_order_relaxed),
                o_kc = o.kc.load(std::memory_order_relaxed),
                o_nc = o.nc.load(std::memory_order_relaxed);
  // What the blocking is derived from (L2 and L3; L1d no longer enters it).
  const std::array<int64_t, 9> key = {mr,   nr,   elem_size, caches.l2, caches.l3,
                                      o_mc, o_kc, o_nc,      kc};
  // This thread's last answer: a run of small products asks the same question every call, and
  // the divisions below were a sixth of an 8x8x8 product's time.
  thread_local std::array<int64_t, 9> last_key{};
  thread_local BlockSizes last;
  bool same = true;  // not ==: std::array's calls memcmp, itself a sixth of an 8x8x8 product
  for (size_t i = 0; i < key.size(); ++i) same &= key[i] == last_key[i];
  if (same) return last;
  BlockSizes b;
  b.mr = mr;
  b.nr = nr;
  b.kc = kc > 0
             ? kc
             : std::clamp<int64_t>(round_down(caches.l2 / 8 / (nr * elem_size), 8), kMinKc, kMaxKc);
  // Every bound is a multiple of the register tile: the drivers step MC blocks in whole MR
  // tiles (a block of 1024 rows with MR = 14 would end in a tile that overlaps the next block).
  b.mc = std::clamp<int64_t>(round_down(caches.l2 * 2 / 3 / (b.kc * elem_size), mr), mr,
                             round_down(1024, mr));
  b.nc = std::clamp<int64_t>(round_down(caches.l3 / 2 / (b.kc * elem_size), nr), nr,
                             round_down(4096, nr));
  if (o_kc > 0) {  // TESSERA_GEMM_BLOCKS
    b.mc = round_down(o_mc, mr);
    b.kc = o_kc;
    b.nc = round_down(o_nc, nr);
  }
  last_key = key;
  last = b;
  return b;
}

bool within_min_kc(int64_t k) {
  const int64_t kc = block_override().kc.load(std::memory_order_relaxed);
  return k <= kMinKc && (kc == 0 || k <= kc);
}

bool block_sizes_overridden() {
  return block_override().kc.load(std::memory_order_relaxed) > 0;
}

void reload_block_override() {
  block_override().read_environment();
}

std::string to_string(const BlockSizes& b) {
  return fmt::format("MR={} NR={} MC={} KC={} NC={}", b.mr, b.nr, b.mc, b.kc, b.nc);
}

}  // namespace tessera::gemm
