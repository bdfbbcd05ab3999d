// The shared-memory segment of one shm communicator, and its layout.
//
// One POSIX shared-memory object per communicator, mapped by every rank:
//
//   SegmentHeader                                    magic, version, world, sizes
//   RankControl[world]                               one per rank, 6 cache lines each
//   Slot[world][2]   = SlotHeader + half_bytes       each rank's two halves of buffer
//   Ring[world][world] = RingHeader + ring_bytes     point-to-point, ring(src, dst)
//
// Ownership rules (what makes it race-free, see collectives.h for the step protocol):
//   - a rank writes only its own RankControl.flag/state/reason, its own slots, and the rings
//     it produces (ring(me, *): data and head) or consumes (ring(*, me): tail);
//   - anybody may ring anybody's doorbell (an event count used for futex waits).
// Rank 0 creates the object, the others open it by the name it publishes in the store; once
// everyone has mapped it, rank 0 unlinks the name, so nothing leaks if a process dies.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/distributed/store.h"

namespace tessera::distributed::shm {

inline constexpr uint64_t kSegmentMagic = 0x3130'4D48'5353'4554ull;  // "TESSHM01"
inline constexpr uint32_t kSegmentVersion = 4;

enum RankState : uint32_t { kUnattached = 0, kAttached = 1, kAborted = 2, kDetached = 3 };

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t world;
  uint64_t half_bytes;
  uint64_t ring_bytes;
  uint64_t total_bytes;
};

struct alignas(64) RankControl {
  // Line 0, written by the owner only: the last step it published (see collectives.h), and
  // whether its part of the last direct (single-copy) collective failed, read by the peers
  // after that collective's last step.
  std::atomic<uint32_t> flag;
  uint32_t direct_failed;
  char pad0[56];
  // Line 1: an event count. Anyone who publishes something the owner may wait for increments
  // it and, when the owner sleeps (sleepers > 0), wakes it with a futex.
  std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleepers;
  char pad1[56];
  // Line 2 on: liveness. state is a RankState; reason says why a rank aborted. light_publish:
  // whether the owner's process publishes lightly (doorbell.h), written before it attaches.
  std::atomic<uint32_t> state;
  int32_t pid;
  uint32_t light_publish;
  char reason[244];
};

// What a rank is doing in a collective, written at its first step so that every rank can
// check that all agree (see collectives.h).
struct alignas(64) SlotHeader {
  uint32_t kind;
  int32_t dtype;
  uint32_t reduce_op;
  int32_t root;
  int64_t count;
  // Written last (after the descriptor and payload) by an all-reduce whose data travels in
  // this line: the step it is about to publish. Peers wait on this line instead of the
  // owner's flag, so one cache-line transfer brings them the step, descriptor and data.
  std::atomic<uint32_t> step;
  // all_to_all: where the split sizes (and a tiny input) are (kAllToAll* in collectives.cpp).
  uint32_t layout;
  // The rest of the line: an all-reduce of at most this many bytes travels here, beside its
  // descriptor, so a peer reads one line for both.
  static constexpr size_t kPayloadBytes = 32;
  alignas(8) uint8_t payload[kPayloadBytes];
};
static_assert(sizeof(SlotHeader) == 64);

struct alignas(64) RingHeader {
  std::atomic<uint64_t> head;  // bytes written in total (producer)
  char pad0[56];
  std::atomic<uint64_t> tail;  // bytes consumed in total (consumer)
  char pad1[56];
};

// A mapped segment. Not thread-safe by itself: the ownership rules above make concurrent use
// by the ranks safe, and within a rank only its progress thread touches the data.
class Segment {
 public:
  // Collective over the store: rank 0 creates and initialises, everyone maps, rank 0 unlinks.
  // `light_publish`: this rank may publish lightly (light_publish_supported(); a test may say
  // no for one rank); the segment does when every rank may.
  static std::unique_ptr<Segment> rendezvous(Store& store, int rank, int world, uint64_t half_bytes,
                                             uint64_t ring_bytes, Clock::time_point deadline,
                                             bool light_publish);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int world() const { return world_; }
  size_t bytes() const { return bytes_; }  // the whole mapping
  uint64_t half_bytes() const { return half_bytes_; }
  uint64_t ring_bytes() const { return ring_bytes_; }
  // Every rank publishes its collectives' steps lightly, and its waits pay the barrier
  // (doorbell.h). Known once rendezvous() returns.
  bool light_publish() const { return light_publish_; }

  // Inline: the collectives' steps look these up in their innermost waits.
  RankControl& control(int rank) const {
    return reinterpret_cast<RankControl*>(base_ + control_offset_)[rank];
  }
  SlotHeader& slot_header(int rank, int half) const {
    return *reinterpret_cast<SlotHeader*>(base_ + slot_offset_ +
                                          (2 * size_t(rank) + size_t(half)) * slot_stride_);
  }
  uint8_t* slot_data(int rank, int half) const {
    return reinterpret_cast<uint8_t*>(&slot_header(rank, half)) + sizeof(SlotHeader);
  }
  RingHeader& ring(int src, int dst) const {
    return *reinterpret_cast<RingHeader*>(
        base_ + ring_offset_ + (size_t(src) * size_t(world_) + size_t(dst)) * ring_stride_);
  }
  uint8_t* ring_data(int src, int dst) const {
    return reinterpret_cast<uint8_t*>(&ring(src, dst)) + sizeof(RingHeader);
  }

 private:
  Segment(uint8_t* base, size_t bytes, int world, uint64_t half_bytes, uint64_t ring_bytes);
  uint8_t* base_;
  size_t bytes_;
  int world_;
  uint64_t half_bytes_;
  uint64_t ring_bytes_;
  size_t control_offset_, slot_offset_, slot_stride_, ring_offset_, ring_stride_;
  bool light_publish_ = false;
};

}  // namespace tessera::distributed::shm
