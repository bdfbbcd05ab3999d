// Waiting on shared memory: spin briefly, then sleep on a futex.
//
// Each rank's RankControl has an event count (`doorbell`) and a count of its sleepers. A
// publisher changes shared state, then calls ring(); a waiter calls wait_for(), which spins on
// its condition for a few microseconds (cheap when the peer is about to publish) and then
// sleeps on the doorbell in bounded slices, so 4 ranks on 2 cores do not steal the cores their
// peers need. Between slices the waiter runs `between_slices` (health checks that throw on a
// deadline, an abort or a dead peer, and the point-to-point pump).
//
// No lost wake-up: the waiter registers as a sleeper, reads the doorbell, re-checks its
// condition and sleeps only while the doorbell still holds what it read; a publisher changes
// the state, increments the doorbell and wakes when it sees a sleeper. All seq_cst, except
// the collectives' publishes in a segment whose ranks use light publishes (below).
//
// Light publishes. A collective's publisher stores its step and then looks at the peers'
// sleeper counts; a waiter counts itself and then looks at the step. Each side needs a
// StoreLoad barrier between its write and its look, or both may miss the other. On the
// publisher's side that barrier (a seq_cst store: xchg) waits until the step's line comes
// back from the peer spinning on it: an exchange of one line each way between two processes
// took 360-400 ns with it and 180-240 ns without (Zen 5 VM). membarrier(2) moves the barrier
// to the rare side: a waiter about to sleep (after ~20 us of spinning) makes every running
// thread of the registered processes execute one (MEMBARRIER_CMD_GLOBAL_EXPEDITED, ~1.4 us
// there), so a publisher needs only the compiler's. Either that barrier ran on the publisher
// after its store (the waiter's look sees the step) or before its look (the look sees the
// count, which the waiter wrote before asking); a thread that is not running passed one when
// it was switched out. Only a segment whose every rank registered uses it (Segment).
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include <chrono>
#include "distributed/backends/shm/segment.h"

#include "core/function_ref.h"

namespace tessera::distributed::shm {

// Wakes the owner of `c` if it sleeps.
void ring(RankControl& c);

// ring(c) only when c's owner counts itself a sleeper, after a publish (a seq_cst store or
// read-modify-write of the state the owner waits on, or publish_store). A waiter counts itself
// as a sleeper before its last look at that state (wait_for), and of that count and the
// publish each side sees the other: either it sees the state, or this sees the sleeper. A bell
// rung for nobody would cost a read-modify-write of the owner's line.
inline void ring_if_sleeping(RankControl& c) {
  if (c.sleepers.load(std::memory_order_seq_cst) > 0) ring(c);
}

// Sleeps while c.doorbell == seen, at most `max_ns` (futex; shared between processes).
void sleep_on(RankControl& c, uint32_t seen, int64_t max_ns);

// Whether this process publishes lightly: registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED,
// and a barrier call succeeded. Decided once per process; TESSERA_SHM_MEMBARRIER=0 turns it
// off (every publish then fences).
bool light_publish_supported();
// The waiter's side: a barrier on every running thread of the registered processes. False
// when the call failed (not expected once light_publish_supported() held).
bool barrier_registered_processes();
// Stores a step that waiters may sleep on, before the look at their sleeper counts: seq_cst
// (on x86 a full barrier), or when `light` a release store and the compiler's barrier.
inline void publish_store(std::atomic<uint32_t>& step, uint32_t value, bool light) {
  if (light) {
    step.store(value, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    step.store(value, std::memory_order_seq_cst);
  }
}

// Whether process `pid` is gone: no such process, or a zombie its parent has not reaped yet.
bool process_gone(int pid);

// A process-private event count with the same protocol (FUTEX_PRIVATE): an shm progress
// thread sleeps on it while it has nothing to drive, so the peers' publishes, which ring the
// shared doorbell, do not wake it for nothing.
class LocalBell {
 public:
  uint32_t value() const { return count_.load(std::memory_order_seq_cst); }
  void ring();
  // Sleeps while the count still is `seen`, at most max_ns.
  void sleep(uint32_t seen, int64_t max_ns);

 private:
  std::atomic<uint32_t> count_{0};
  std::atomic<uint32_t> sleepers_{0};
};

// Step i (from 1) of a spin. The first pause_spins() steps only pause: with a core each, the
// peer's publish is seen within a few dozen nanoseconds (a sched_yield costs a system call).
// Later steps give the core to another runnable thread if there is one (a rank's caller and
// progress thread share cores), else return at once.
inline constexpr int kPauseSpins = 64;
// kPauseSpins, or 0 once note_local_ranks() saw more ranks on this machine than this process
// may use cores: then the rank being waited for needs this core, and every pause keeps it off.
int pause_spins();
void note_local_ranks(int ranks);
inline void cpu_relax(int i) {
  if (i <= pause_spins()) {
    __builtin_ia32_pause();
  } else {
    sched_yield();
  }
}

// How long wait_for spins before it sleeps, and the longest sleep between health checks.
inline constexpr int64_t kSpinNs = 20'000;
inline constexpr int64_t kSliceNs = 5'000'000;

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A sleep's slice when the barrier for light publishers failed: a publish it missed then
// costs at most this long.
inline constexpr int64_t kUnfencedSliceNs = 100'000;

// wait_for's slice: kSliceNs, unless a test lengthened it so that a wake-up a publish missed
// shows as a long wait (the health checks between slices come that much later too).
int64_t wait_slice_ns();
void set_wait_slice_ns_for_testing(int64_t ns);

// Waits until ready() holds. `me` is the waiting rank's control block. between_slices() runs
// at least every kSliceNs while the wait sleeps; an exception from it ends the wait unless
// ready() holds by then (kSliceNs: see wait_slice_ns()). `light_publishers`: the state ready()
// reads is published lightly (see above), so the wait pays the barrier before it sleeps.
template <class Ready>
void wait_for(RankControl& me, Ready&& ready, FunctionRef<void()> between_slices,
              bool light_publishers = false) {
  if (ready()) return;
  // The clock is read from the 8th look on: most waits of a small collective end before it.
  int64_t spin_end = 0;
  for (int i = 1;; ++i) {
    if (ready()) return;
    cpu_relax(i);
    if ((i & 7) == 0) {
      const int64_t now = now_ns();
      if (spin_end == 0) {
        spin_end = now + kSpinNs;
      } else if (now > spin_end) {
        break;
      }
    }
  }
  for (;;) {
    try {
      between_slices();
    } catch (...) {
      // A peer that published and then left (or aborted) published before its state changed:
      // what it published is visible now, so only a wait that still is not ready fails.
      if (ready()) return;
      throw;
    }
    me.sleepers.fetch_add(1, std::memory_order_seq_cst);
    // Orders the count before ready()'s loads: a publisher that stored its flag and then
    // found no sleeper is seen by this look (Communicator::publish rings sleepers only).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const bool fenced = !light_publishers || barrier_registered_processes();
    const uint32_t seen = me.doorbell.load(std::memory_order_seq_cst);
    const bool done = ready();
    if (!done) sleep_on(me, seen, fenced ? wait_slice_ns() : kUnfencedSliceNs);
    me.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (done || ready()) return;
  }
}

}  // namespace tessera::distributed::shm
