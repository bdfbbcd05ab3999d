// Creating, opening and laying out the shm segment: see segment.h.
#include "distributed/backends/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/chrono.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <thread>

namespace tessera::distributed::shm {

namespace {

constexpr size_t round_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

struct Layout {
  size_t control_offset, slot_offset, slot_stride, ring_offset, ring_stride, total;
};

Layout layout(int world, uint64_t half_bytes, uint64_t ring_bytes) {
  Layout l{};
  const size_t w = static_cast<size_t>(world);
  l.control_offset = round_up(sizeof(SegmentHeader), 4096);
  l.slot_offset = round_up(l.control_offset + w * sizeof(RankControl), 4096);
  l.slot_stride = round_up(sizeof(SlotHeader) + half_bytes, 4096);
  l.ring_offset = l.slot_offset + 2 * w * l.slot_stride;
  l.ring_stride = round_up(sizeof(RingHeader) + ring_bytes, 4096);
  l.total = l.ring_offset + w * w * l.ring_stride;
  return l;
}

std::string random_name() {
  std::random_device rd;
  const uint64_t r = (uint64_t(rd()) << 32) ^ rd();
  return fmt::format("/tessera-shm-{}-{:016x}", ::getpid(), r);
}

uint8_t* map_fd(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  TS_CHECK(p != MAP_FAILED, distributed::DistBackendError,
           "shm backend: cannot map the segment '{}' ({} bytes): {}", name, bytes,
           std::strerror(errno));
  return static_cast<uint8_t*>(p);
}

}  // namespace

Segment::Segment(uint8_t* base, size_t bytes, int world, uint64_t half_bytes, uint64_t ring_bytes)
    : base_(base), bytes_(bytes), world_(world), half_bytes_(half_bytes), ring_bytes_(ring_bytes) {
  const Layout l = layout(world, half_bytes, ring_bytes);
  control_offset_ = l.control_offset;
  slot_offset_ = l.slot_offset;
  slot_stride_ = l.slot_stride;
  ring_offset_ = l.ring_offset;
  ring_stride_ = l.ring_stride;
}

Segment::~Segment() {
  ::munmap(base_, bytes_);
}

std::unique_ptr<Segment> Segment::rendezvous(Store& store, int rank, int world, uint64_t half_bytes,
                                             uint64_t ring_bytes, Clock::time_point deadline,
                                             bool light_publish) {
  const Layout l = layout(world, half_bytes, ring_bytes);
  const auto left = [&] {
    return std::max(Milliseconds(1),
                    std::chrono::duration_cast<Milliseconds>(deadline - Clock::now()));
  };
  std::string name;
  int fd = -1;
  if (rank == 0) {
    name = random_name();
    fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    TS_CHECK(fd >= 0, distributed::DistBackendError,
             "shm backend: cannot create the shared-memory segment '{}': {}", name,
             std::strerror(errno));
    if (::ftruncate(fd, static_cast<off_t>(l.total)) != 0) {
      const int err = errno;
      ::close(fd);
      ::shm_unlink(name.c_str());
      TS_THROW(distributed::DistBackendError,
               "shm backend: cannot size the segment '{}' to {} bytes: {} (is /dev/shm big "
               "enough? lower TESSERA_SHM_BUFFER_BYTES)",
               name, l.total, std::strerror(err));
    }
  } else {
    store.wait({"shm/name"}, left());
    const Bytes v = store.get("shm/name");
    name.assign(v.begin(), v.end());
    fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    TS_CHECK(fd >= 0, distributed::DistBackendError,
             "shm backend: rank {} cannot open the segment '{}' that rank 0 created: {} (are all "
             "ranks on one host?)",
             rank, name, std::strerror(errno));
    struct stat st {};
    const bool sized = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == l.total;
    if (!sized) ::close(fd);
    TS_CHECK(sized, distributed::DistBackendError,
             "shm backend: segment '{}' has {} bytes, but rank {} expects {} (do all ranks use "
             "the same TESSERA_SHM_BUFFER_BYTES and world size?)",
             name, st.st_size, rank, l.total);
  }
  uint8_t* base = nullptr;
  try {
    base = map_fd(fd, l.total, name);
  } catch (...) {
    ::close(fd);
    if (rank == 0) ::shm_unlink(name.c_str());
    throw;
  }
  ::close(fd);
  std::unique_ptr<Segment> seg(new Segment(base, l.total, world, half_bytes, ring_bytes));
  auto* header = reinterpret_cast<SegmentHeader*>(base);
  if (rank == 0) {
    new (header) SegmentHeader{kSegmentMagic, kSegmentVersion, static_cast<uint32_t>(world),
                               half_bytes,    ring_bytes,      l.total};
    for (int r = 0; r < world; ++r) new (&seg->control(r)) RankControl();
    for (int s = 0; s < world; ++s)
      for (int d = 0; d < world; ++d) new (&seg->ring(s, d)) RingHeader();
    try {
      store.set("shm/name", name);
    } catch (...) {
      ::shm_unlink(name.c_str());
      throw;
    }
  } else {
    TS_CHECK(header->magic == kSegmentMagic && header->version == kSegmentVersion &&
                 header->world == static_cast<uint32_t>(world) &&
                 header->half_bytes == half_bytes && header->ring_bytes == ring_bytes,
             distributed::DistBackendError,
             "shm backend: segment '{}' does not match rank {}'s settings (version {} vs {}, "
             "world {} vs {}, buffer {} vs {} bytes)",
             name, rank, header->version, kSegmentVersion, header->world, world, header->half_bytes,
             half_bytes);
  }
  RankControl& me = seg->control(rank);
  me.pid = static_cast<int32_t>(::getpid());
  me.light_publish = light_publish ? 1 : 0;
  me.state.store(kAttached, std::memory_order_seq_cst);
  // Everyone has mapped the segment once the counter reaches world; then the name can go.
  store.add("shm/attached", 1);
  if (rank == 0) {
    try {
      while (store.add("shm/attached", 0) < world) {
        TS_CHECK(Clock::now() < deadline, distributed::DistTimeoutError,
                 "shm backend: only {} of {} ranks attached to the segment before the deadline",
                 store.add("shm/attached", 0), world);
        std::this_thread::sleep_for(Milliseconds(1));
      }
    } catch (...) {
      ::shm_unlink(name.c_str());
      throw;
    }
    ::shm_unlink(name.c_str());
    store.set("shm/ready", std::string("1"));
  } else {
    store.wait({"shm/ready"}, left());
  }
  // Every rank wrote its choice before it counted itself attached, and "shm/ready" came after
  // the last count: every rank reads the same choices.
  seg->light_publish_ = true;
  for (int r = 0; r < world; ++r)
    seg->light_publish_ = seg->light_publish_ && seg->control(r).light_publish;
  return seg;
}

}  // namespace tessera::distributed::shm
