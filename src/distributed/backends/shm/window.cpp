// The shm backend's RMA window: direct loads and stores into the peers' memory.
//
// Memory. A window tensor lives in a memfd (window_empty()), so a peer on the same host can
// map it: at registration every rank publishes its process id and the descriptor number, and
// each peer opens /proc/<pid>/fd/<fd> and maps it. Nothing has a name in /dev/shm, so
// nothing leaks when a process dies: the memory goes when its last mapping does.
//
// Control. Each registration also makes a small memfd per rank, its Control block: the
// signals it received (one 64-bit counter per source rank, on its own cache line, written by
// that source only with fetch_add), a doorbell to sleep on (the backend's futex event count,
// see doorbell.h) and the accumulate lock of its tensor.
//
// put   = memcpy into the peer's mapping, then fetch_add on the peer's counter for this rank
//         (seq_cst: the data is visible to whoever sees the count) and ring its doorbell.
// wait  = wait until counter[peer] > consumed (spin briefly, then futex sleeps in slices
//         between which the deadline and the peer's liveness are checked).
// accumulate = take the target's lock (compare-and-swap of holder rank + 1; a holder that
//         died or a deadline that passed ends the wait with an error), add, release.
#include <emmintrin.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "distributed/backends/shm/doorbell.h"
#include "distributed/backends/shm/shm_backend.h"
#include "tessera/core/parallel.h"
#include "tessera/distributed/window.h"
#include "tessera/ops/factory.h"

namespace tessera::distributed {

namespace {

// ---- window memory: memfds and the registry that finds them again ------------------------

struct Mapping {
  int fd;
  size_t bytes;
};

std::mutex g_mappings_mutex;
std::map<const void*, Mapping>& mappings() {
  static auto* m = new std::map<const void*, Mapping>();  // outlives static tensors
  return *m;
}

size_t page_round(size_t n) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return std::max<size_t>(page, (n + page - 1) / page * page);
}

// A shared, zeroed mapping of a new memfd of at least `bytes`; its fd stays open until unmap.
void* map_new_memfd(const char* what, size_t bytes, int& fd_out, size_t& bytes_out) {
  bytes_out = page_round(bytes);
  const int fd = ::memfd_create(what, MFD_CLOEXEC);
  TS_CHECK(fd >= 0, distributed::DistBackendError, "{}: memfd_create failed: {}", what,
           std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes_out)) != 0) {
    const int err = errno;
    ::close(fd);
    TS_THROW(distributed::DistBackendError, "{}: cannot size a memfd to {} bytes: {}", what,
             bytes_out, std::strerror(err));
  }
  void* p = ::mmap(nullptr, bytes_out, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    TS_THROW(distributed::DistBackendError, "{}: cannot map {} bytes: {}", what, bytes_out,
             std::strerror(err));
  }
  fd_out = fd;
  return p;
}

// Maps a peer's memfd through /proc (the peer keeps the descriptor open while registered).
uint8_t* map_peer(int pid, int fd, size_t bytes, int peer, const char* what) {
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
  const int mine = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  TS_CHECK(mine >= 0, distributed::DistBackendError,
           "tensor_register(): shm window cannot open rank {}'s {} at {}: {} (are all ranks on "
           "one host, run by one user?)",
           peer, what, path, std::strerror(errno));
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  const int err = errno;
  ::close(mine);
  TS_CHECK(p != MAP_FAILED, distributed::DistBackendError,
           "tensor_register(): shm window cannot map rank {}'s {} ({} bytes): {}", peer, what,
           bytes, std::strerror(err));
  return static_cast<uint8_t*>(p);
}

// ---- copies ------------------------------------------------------------------------------

// Copies from this size on are split over the thread pool (one core's stream does not
// saturate memory), and written with non-temporal stores: the destination is not read for
// ownership first (a third less memory traffic) and the copy does not evict the caches.
// Below it a copy likely stays in the caches, where memcpy is best. Measured with
// `tessera bench window`.
constexpr size_t kLargeCopyBytes = size_t{2} << 20;

// dst := src for n bytes with SSE2 streaming stores (baseline x86-64: no dispatch needed).
void stream_copy(uint8_t* dst, const uint8_t* src, size_t n) {
  const size_t head = std::min(n, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  const size_t body = n / 64 * 64;
  for (size_t i = 0; i < body; i += 64) {
    const auto* s = reinterpret_cast<const __m128i*>(src + i);
    auto* d = reinterpret_cast<__m128i*>(dst + i);
    const __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
    const __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
    _mm_stream_si128(d, a);
    _mm_stream_si128(d + 1, b);
    _mm_stream_si128(d + 2, c);
    _mm_stream_si128(d + 3, e);
  }
  std::memcpy(dst + body, src + body, n - body);
  _mm_sfence();  // streaming stores are weakly ordered: order them before the signal
}

// dst := src; the two ranges do not overlap unless they are the same rank's (then memmove).
void window_copy(uint8_t* dst, const uint8_t* src, size_t n) {
  const bool overlap = dst < src + n && src < dst + n;
  if (overlap || n < kLargeCopyBytes) {
    std::memmove(dst, src, n);
    return;
  }
  constexpr int64_t kPiece = int64_t{1} << 20;
  const auto pieces = static_cast<int64_t>((n + kPiece - 1) / kPiece);
  parallel_for(0, pieces, 1, [&](int64_t lo, int64_t hi) {
    const size_t begin = size_t(lo * kPiece), end = std::min(n, size_t(hi * kPiece));
    stream_copy(dst + begin, src + begin, end - begin);
  });
}

// ---- the window -------------------------------------------------------------------------

struct alignas(64) SignalCounter {
  std::atomic<uint64_t> count;
  char pad[56];
};

// One rank's control block (see the top of the file); `signals` has one counter per rank.
struct Control {
  shm::RankControl wake;                   // doorbell and sleepers only
  alignas(64) std::atomic<uint32_t> lock;  // 0: free; else holder's group rank + 1
  alignas(64) SignalCounter signals[1];    // [world], allocated past the struct

  static size_t bytes(int world) {
    return sizeof(Control) + sizeof(SignalCounter) * static_cast<size_t>(world - 1);
  }
};

// The handle words a rank publishes (Window::Handle).
enum HandleWord : size_t { kPid, kDataFd, kDataBytes, kDataOffset, kControlFd, kControlBytes };

class ShmWindow : public Window {
 public:
  ShmWindow(std::shared_ptr<shm::ShmBackend> backend, Milliseconds timeout, std::string group)
      : Window(backend, timeout), shm_(std::move(backend)), group_(std::move(group)) {}
  ~ShmWindow() override {
    stop_async();  // queued puts still write through the mappings detach() releases
    if (is_registered()) detach();
  }

 protected:
  Handle prepare(const Tensor& tensor) override {
    const void* base = tensor.storage()->data();
    Mapping data{};
    {
      std::lock_guard lock(g_mappings_mutex);
      auto it = mappings().find(base);
      TS_CHECK(it != mappings().end(), ValueError,
               "tensor_register(): the shm backend maps window tensors into its peers, so "
               "argument 'tensor' must come from window_empty() (or be a view of one), but got "
               "a tensor in ordinary memory (sizes {}, dtype {})",
               fmt::join(tensor.sizes(), ", "), tensor.dtype());
      data = it->second;
    }
    esize_ = static_cast<size_t>(tensor.element_size());
    const auto offset =
        static_cast<const uint8_t*>(tensor.data_ptr()) - static_cast<const uint8_t*>(base);
    void* c = map_new_memfd("tessera-window-control", Control::bytes(size()), control_fd_,
                            control_bytes_);
    control_ = static_cast<Control*>(c);
    new (&control_->wake) shm::RankControl();
    control_->lock.store(0);
    for (int r = 0; r < size(); ++r) new (&control_->signals[r]) SignalCounter();
    return {::getpid(), data.fd,     static_cast<int64_t>(data.bytes),
            offset,     control_fd_, static_cast<int64_t>(control_bytes_)};
  }

  void attach(const std::vector<Handle>& handles) override {
    peers_.assign(handles.size(), Peer{});
    try {
      for (int r = 0; r < size(); ++r) {
        const Handle& h = handles[size_t(r)];
        Peer& p = peers_[size_t(r)];
        p.pid = static_cast<int>(h[kPid]);
        p.data_bytes = static_cast<size_t>(h[kDataBytes]);
        p.data_base = map_peer(p.pid, int(h[kDataFd]), p.data_bytes, r, "window tensor");
        p.data = p.data_base + h[kDataOffset];
        p.control_bytes = static_cast<size_t>(h[kControlBytes]);
        p.control = reinterpret_cast<Control*>(
            map_peer(p.pid, int(h[kControlFd]), p.control_bytes, r, "window control block"));
      }
    } catch (...) {
      detach();
      throw;
    }
  }

  void detach() override {
    for (Peer& p : peers_) {
      if (p.data_base) ::munmap(p.data_base, p.data_bytes);
      if (p.control) ::munmap(p.control, p.control_bytes);
    }
    peers_.clear();
    if (control_) ::munmap(control_, control_bytes_);
    if (control_fd_ >= 0) ::close(control_fd_);
    control_ = nullptr;
    control_fd_ = -1;
  }

  void do_put(const void* src, int dst, int64_t dst_offset, int64_t count) override {
    window_copy(peers_[size_t(dst)].data + size_t(dst_offset) * esize_,
                static_cast<const uint8_t*>(src), size_t(count) * esize_);
  }

  void do_get(void* dst, int src_rank, int64_t src_offset, int64_t count) override {
    window_copy(static_cast<uint8_t*>(dst),
                peers_[size_t(src_rank)].data + size_t(src_offset) * esize_,
                size_t(count) * esize_);
  }

  void do_accumulate(const Tensor& src, int dst, int64_t dst_offset) override {
    Peer& p = peers_[size_t(dst)];
    lock(p, dst);
    try {
      const Tensor target = from_blob(p.data + size_t(dst_offset) * esize_, {src.numel()},
                                      TensorOptions(src.dtype()));
      const Tensor add = src.reshape({src.numel()});
      if (is_float8(src.dtype())) {  // a storage format: summed in float32, rounded once
        target.copy_(target.to(kFloat32).add_(add.to(kFloat32)));
      } else {
        target.add_(add);
      }
    } catch (...) {
      p.control->lock.store(0, std::memory_order_release);
      throw;
    }
    p.control->lock.store(0, std::memory_order_release);
  }

  void do_signal(int peer) override {
    Control& c = *peers_[size_t(peer)].control;
    c.signals[rank()].count.fetch_add(1, std::memory_order_seq_cst);
    shm::ring_if_sleeping(c.wake);  // after the seq_cst count, as collectives publish
  }

  void do_wait_signal(int peer, uint64_t consumed, Clock::time_point deadline,
                      Milliseconds timeout) override {
    const std::atomic<uint64_t>& count = control_->signals[peer].count;
    const int peer_pid = peers_[size_t(peer)].pid;
    shm::wait_for(
        control_->wake, [&] { return count.load(std::memory_order_acquire) > consumed; },
        [&] {
          check_live("wait_signal");
          TS_CHECK(Clock::now() < deadline, distributed::DistTimeoutError,
                   "wait_signal(): shm window of group '{}' (rank {}): no signal from rank {} "
                   "within {} ms ({} received, {} consumed)",
                   group_, rank(), peer, timeout.count(), count.load(), consumed);
          TS_CHECK(!shm::process_gone(peer_pid), distributed::DistBackendError,
                   "wait_signal(): shm window of group '{}' (rank {}): rank {} (pid {}) died "
                   "before it signalled",
                   group_, rank(), peer, peer_pid);
        });
  }

  void do_flush() override {
    // Puts and gets completed in their calls; this orders them before what follows.
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  bool communicator_ended() const override { return shm_->ended(); }
  // Loads and stores into mapped memory, any thread.
  bool async_capable() const override { return true; }

 private:
  struct Peer {
    int pid = 0;
    uint8_t* data_base = nullptr;  // the whole mapping
    uint8_t* data = nullptr;       // the registered tensor's first byte
    size_t data_bytes = 0;
    Control* control = nullptr;
    size_t control_bytes = 0;
  };

  // Takes dst's accumulate lock; the wait is bounded by the window's timeout and ends early
  // when the holder died (its partial sum cannot be undone, so the error says so).
  void lock(Peer& p, int dst) {
    std::atomic<uint32_t>& word = p.control->lock;
    const auto deadline = Clock::now() + timeout();
    for (int spins = 0;; ++spins) {
      uint32_t expected = 0;
      if (word.compare_exchange_weak(expected, static_cast<uint32_t>(rank() + 1),
                                     std::memory_order_acquire, std::memory_order_relaxed))
        return;
      if (spins < 64) {
        shm::cpu_relax(spins + 1);
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      if ((spins & 255) != 0) continue;
      const uint32_t holder = word.load();
      if (holder == 0) continue;
      const int holder_rank = static_cast<int>(holder) - 1;
      TS_CHECK(holder_rank >= size() || !shm::process_gone(peers_[size_t(holder_rank)].pid),
               distributed::DistBackendError,
               "accumulate(): shm window of group '{}': rank {} died holding rank {}'s "
               "accumulate lock (its tensor may hold a partial sum)",
               group_, holder_rank, dst);
      TS_CHECK(Clock::now() < deadline, distributed::DistTimeoutError,
               "accumulate(): shm window of group '{}' (rank {}): rank {}'s accumulate lock was "
               "held by rank {} for longer than the timeout ({} ms)",
               group_, rank(), dst, holder_rank, timeout().count());
    }
  }

  const std::shared_ptr<shm::ShmBackend> shm_;
  const std::string group_;
  Control* control_ = nullptr;
  int control_fd_ = -1;
  size_t control_bytes_ = 0;
  std::vector<Peer> peers_;
  size_t esize_ = 1;
};

}  // namespace

Tensor window_empty(const std::vector<int64_t>& sizes, ScalarType dtype) {
  const int64_t numel = checked_numel(sizes, "window_empty");
  const size_t bytes = static_cast<size_t>(numel * element_size(dtype));
  int fd = -1;
  size_t mapped = 0;
  void* p = map_new_memfd("tessera-window", bytes, fd, mapped);
  {
    std::lock_guard lock(g_mappings_mutex);
    mappings()[p] = {fd, mapped};
  }
  return from_blob(p, sizes, TensorOptions(dtype), [fd, mapped](void* q) {
    {
      std::lock_guard lock(g_mappings_mutex);
      mappings().erase(q);
    }
    ::munmap(q, mapped);
    ::close(fd);
  });
}

namespace shm {

std::shared_ptr<Window> ShmBackend::new_window() {
  TS_CHECK(!error(), distributed::DistBackendError, "new_window(): shm group '{}' was aborted: {}",
           group_name_, exception_message(error()));
  return std::make_shared<ShmWindow>(std::static_pointer_cast<ShmBackend>(shared_from_this()),
                                     timeout_, group_name_);
}

}  // namespace shm

}  // namespace tessera::distributed
