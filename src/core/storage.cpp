#include "tessera/core/storage.h"

#include <sys/mman.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>

#include "core/dtype_dispatch.h"
#include "tessera/core/device.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePageThreshold = size_t{4} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
// Blocks from this size up are rounded to whole pages and kept in the cache when freed: below
// it malloc recycles them itself; above it glibc maps and unmaps them on every call, and the
// page faults of a fresh mapping cost more than most kernels that fill it (a training step of
// the demo model spent a quarter of its time in them).
constexpr size_t kCacheMin = size_t{64} << 10;
constexpr size_t kPage = size_t{4} << 10;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizer = true;
#else
constexpr bool kSanitizer = false;
#endif

// The bytes actually reserved for a request, and their alignment: a pure function of nbytes,
// so cpu_free can recompute them.
struct BlockSize {
  size_t total;
  size_t align;
};
BlockSize block_size(size_t nbytes) {
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  TS_CHECK(rounded >= nbytes, RuntimeError, "allocate(): size {} bytes overflows", nbytes);
  const size_t align = rounded >= kHugePageThreshold ? kHugePage : kAlignment;
  const size_t unit = rounded >= kHugePageThreshold ? kHugePage
                      : rounded >= kCacheMin        ? kPage
                                                    : kAlignment;
  const size_t total = (rounded + unit - 1) / unit * unit;
  TS_CHECK(total >= rounded, RuntimeError, "allocate(): size {} bytes overflows", nbytes);
  return {total, align};
}

size_t default_cache_limit() {
  if (const char* env = std::getenv("TESSERA_CPU_CACHE_MB")) {
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') return static_cast<size_t>(mb) << 20;
    std::fprintf(stderr, "tessera: ignoring TESSERA_CPU_CACHE_MB='%s' (expected mebibytes)\n", env);
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t phys = pages > 0 && page > 0 ? static_cast<size_t>(pages) * page : 0;
  return std::min(phys / 4, size_t{8} << 30);
}

// Free large blocks by exact size. Never destroyed: tensors in static storage may be freed
// after it would have been, during exit.
class BlockCache {
 public:
  static BlockCache& get() {
    static BlockCache* cache = new BlockCache();
    return *cache;
  }
  void* take(size_t total) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(total);
    if (it == free_.end()) {
      ++misses_;
      return nullptr;
    }
    void* p = it->second;
    free_.erase(it);
    cached_ -= total;
    ++hits_;
    return p;
  }
  bool give(void* p, size_t total) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + total > limit_) return false;
    free_.emplace(total, p);
    cached_ += total;
    return true;
  }
  void clear() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      cached_ = 0;
    }
    for (auto& [size, p] : blocks) std::free(p);
  }
  CpuCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {cached_, free_.size(), limit_, hits_, misses_};
  }
  bool enabled() const { return limit_ > 0; }

 private:
  BlockCache() : limit_(kSanitizer ? 0 : default_cache_limit()) {}
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
  const size_t limit_;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace

void* cpu_allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const BlockSize b = block_size(nbytes);
  const bool cached = b.total >= kCacheMin;
  if (cached && BlockCache::get().enabled()) {
    if (void* p = BlockCache::get().take(b.total)) return p;
  }
  void* p = std::aligned_alloc(b.align, b.total);
  if (p == nullptr && cached) {  // the cache may hold what the system lacks
    BlockCache::get().clear();
    p = std::aligned_alloc(b.align, b.total);
  }
  TS_CHECK(p != nullptr, RuntimeError,
           "allocate(): out of memory: tried to allocate {} bytes ({:.2f} GiB)", nbytes,
           static_cast<double>(nbytes) / (1ull << 30));
  if (b.align == kHugePage) madvise(p, b.total, MADV_HUGEPAGE);  // advisory; failure is harmless
  return p;
}

void cpu_free(void* p, size_t nbytes) {
  if (p == nullptr) return;
  const BlockSize b = block_size(nbytes);
  if (b.total >= kCacheMin && BlockCache::get().give(p, b.total)) return;
  std::free(p);
}

CpuCacheStats cpu_cache_stats() {
  return BlockCache::get().stats();
}

void empty_cpu_cache() {
  BlockCache::get().clear();
}

StorageImpl::StorageImpl(size_t nbytes) : data_(cpu_allocate(nbytes)), nbytes_(nbytes) {}

StorageImpl::StorageImpl(void* data, size_t nbytes, Deleter deleter)
    : data_(data), nbytes_(nbytes), owned_(false), deleter_(std::move(deleter)) {}

StorageImpl::~StorageImpl() {
  if (owned_) {
    cpu_free(data_, nbytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

std::string Device::str() const {
  const char* name = type == DeviceType::CPU ? "cpu" : "cuda";
  return index < 0 ? std::string(name) : fmt::format("{}:{}", name, index);
}

std::string dtype_mask_names(DtypeMask mask) {
  std::string out;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    if (mask & (1u << i)) {
      if (!out.empty()) out += ", ";
      out += dtype_name(static_cast<ScalarType>(i));
    }
  }
  return "one of (" + out + ")";
}

}  // namespace tessera
