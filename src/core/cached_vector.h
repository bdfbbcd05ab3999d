// std::vector on Tessera's caching CPU allocator (tessera/core/storage.h), for large scratch
// buffers that kernels allocate on every call. From std::allocator, every call's 4 MiB
// workspace was fresh memory from the system: on a VM its first touch costs a page fault of
// ~10 us per 4 KiB page, 10 ms per 4 MiB, more than the work done in it for n up to ~1000.
#pragma once

#include <cstddef>
#include <vector>

#include "tessera/core/storage.h"

namespace tessera {

template <class T>
struct CachedAllocator {
  using value_type = T;
  CachedAllocator() = default;
  template <class U>
  CachedAllocator(const CachedAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(cpu_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { cpu_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const CachedAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using cached_vector = std::vector<T, CachedAllocator<T>>;

}  // namespace tessera
