// Futex wake and wait on a RankControl's doorbell: see doorbell.h.
#include "distributed/backends/shm/doorbell.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <signal.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace tessera::distributed::shm {

namespace {
// A doorbell's word lives in memory shared between processes (no FUTEX_PRIVATE_FLAG); a
// LocalBell's does not.
long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, timeout, nullptr, 0);
}

timespec span(int64_t ns) {
  return timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}
}  // namespace

namespace {
std::atomic<int> g_pause_spins{kPauseSpins};
std::atomic<int64_t> g_wait_slice_ns{kSliceNs};
}  // namespace

int64_t wait_slice_ns() {
  return g_wait_slice_ns.load(std::memory_order_relaxed);
}

void set_wait_slice_ns_for_testing(int64_t ns) {
  g_wait_slice_ns.store(ns, std::memory_order_relaxed);
}

int pause_spins() {
  return g_pause_spins.load(std::memory_order_relaxed);
}

void note_local_ranks(int ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = ::sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  if (ranks > cores) g_pause_spins.store(0, std::memory_order_relaxed);
}

bool process_gone(int pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  const char* close = std::strrchr(buf, ')');  // "pid (comm) S ...": comm may hold spaces
  return n > 0 && close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

void ring(RankControl& c) {
  c.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (c.sleepers.load(std::memory_order_seq_cst) > 0)
    futex(&c.doorbell, FUTEX_WAKE, INT_MAX, nullptr);
}

void sleep_on(RankControl& c, uint32_t seen, int64_t max_ns) {
  const timespec ts = span(max_ns);
  // EAGAIN (the doorbell moved), EINTR and ETIMEDOUT all mean: look again.
  futex(&c.doorbell, FUTEX_WAIT, seen, &ts);
}

namespace {
long membarrier(int cmd) {
  return ::syscall(SYS_membarrier, cmd, 0u, 0);
}
}  // namespace

bool light_publish_supported() {
  static const bool supported = [] {
    const char* env = std::getenv("TESSERA_SHM_MEMBARRIER");
    if (env && std::string_view(env) == "0") return false;
    const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0 &&
           membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
  }();
  return supported;
}

bool barrier_registered_processes() {
  return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
}

void LocalBell::ring() {
  count_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0)
    futex(&count_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

void LocalBell::sleep(uint32_t seen, int64_t max_ns) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (count_.load(std::memory_order_seq_cst) == seen) {
    const timespec ts = span(max_ns);
    futex(&count_, FUTEX_WAIT_PRIVATE, seen, &ts);
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace tessera::distributed::shm
