#include "tessera/core/storage.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <string>

#include "core/dtype_dispatch.h"
#include "tessera/core/device.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {
constexpr size_t kAlignment = 64;
constexpr size_t kHugePageThreshold = size_t{4} << 20;
}  // namespace

void* cpu_allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  TS_CHECK(rounded >= nbytes, RuntimeError, "allocate(): size {} bytes overflows", nbytes);
  const size_t align = rounded >= kHugePageThreshold ? size_t{2} << 20 : kAlignment;
  const size_t total = (rounded + align - 1) / align * align;
  void* p = std::aligned_alloc(align, total);
  TS_CHECK(p != nullptr, RuntimeError,
           "allocate(): out of memory: tried to allocate {} bytes ({:.2f} GiB)", nbytes,
           static_cast<double>(nbytes) / (1ull << 30));
  if (align > kAlignment) madvise(p, total, MADV_HUGEPAGE);  // advisory; failure is harmless
  return p;
}

void cpu_free(void* p) {
  std::free(p);
}

StorageImpl::StorageImpl(size_t nbytes) : data_(cpu_allocate(nbytes)), nbytes_(nbytes) {}

StorageImpl::StorageImpl(void* data, size_t nbytes, Deleter deleter)
    : data_(data), nbytes_(nbytes), owned_(false), deleter_(std::move(deleter)) {}

StorageImpl::~StorageImpl() {
  if (owned_) {
    cpu_free(data_);
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
