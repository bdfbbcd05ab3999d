// Storage: a block of memory shared (reference-counted) by a tensor and all of its views.
// Memory comes from Tessera's allocator (64-byte aligned) or from the caller (`from_blob`,
// with an optional deleter run when the last view goes away).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tessera/core/device.h"

namespace tessera {

class StorageImpl {
 public:
  using Deleter = std::function<void(void*)>;
  // Allocates `nbytes` (64-byte aligned). Contents are uninitialised.
  explicit StorageImpl(size_t nbytes);
  // Wraps caller memory; `deleter` (may be empty) runs on destruction.
  StorageImpl(void* data, size_t nbytes, Deleter deleter);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return Device(kCPU); }
  bool owns_memory() const { return owned_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  bool owned_ = true;
  Deleter deleter_;
};

using Storage = std::shared_ptr<StorageImpl>;

// The allocator behind every Tessera-owned storage: 64-byte aligned, large blocks on
// transparent huge pages where the kernel offers them. cpu_free must get the same nbytes
// that cpu_allocate was given.
//
// Blocks of 64 KiB and more (rounded to whole pages; 2 MiB pages from 4 MiB) are cached when
// freed and handed out again for a request of the same rounded size, as PyTorch's CUDA
// caching allocator does: a fresh 256 MiB output, or the many mid-sized temporaries of a
// training step, would otherwise be new memory whose page faults cost more than the kernels
// that fill it. The
// cache holds at most TESSERA_CPU_CACHE_MB mebibytes (default: a quarter of physical memory,
// at most 8 GiB; 0 turns caching off) and is thread-safe. Sanitizer builds never cache, so
// use-after-free stays visible.
void* cpu_allocate(size_t nbytes);
void cpu_free(void* p, size_t nbytes);

struct CpuCacheStats {
  size_t cached_bytes = 0;  // held by the cache, free for reuse
  size_t cached_blocks = 0;
  size_t limit_bytes = 0;
  size_t hits = 0;    // allocations served from the cache
  size_t misses = 0;  // large allocations that went to the system
};
CpuCacheStats cpu_cache_stats();
// Returns every cached block to the system (torch.cuda.empty_cache's counterpart).
void empty_cpu_cache();

}  // namespace tessera
