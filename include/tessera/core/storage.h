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
// transparent huge pages where the kernel offers them.
void* cpu_allocate(size_t nbytes);
void cpu_free(void* p);

}  // namespace tessera
