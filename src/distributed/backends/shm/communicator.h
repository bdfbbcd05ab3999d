// The shm communicator: the state one rank keeps about a segment, the collective algorithms
// (collectives.cpp) and point-to-point messaging (p2p.cpp).
//
// Only the rank's progress thread calls run_collective / post / pump; abort() and is_aborted()
// may be called from any thread.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/function_ref.h"
#include "distributed/backends/op.h"
#include "distributed/backends/shm/doorbell.h"
#include "distributed/backends/shm/peer_watch.h"
#include "distributed/backends/shm/segment.h"
#include "tessera/distributed/types.h"

namespace tessera::distributed::shm {

// Ranks disagree on a collective's arguments. Every rank sees the same descriptors and throws
// the same error, so the communicator stays usable.
class MismatchError : public DistBackendError {
 public:
  using DistBackendError::DistBackendError;
};

// all_to_all's blocks for rank `me`, given sends[r * n + j] = bytes rank r sends to rank j:
// calls fn(k, in_off, out_off, bytes) for each sender k with a non-empty block, where in_off
// is the block's offset in k's input (after k's blocks for lower ranks) and out_off its
// offset in me's output.
template <class Fn>
void for_each_block_to(const std::vector<int64_t>& sends, size_t n, size_t me, Fn&& fn) {
  int64_t out_off = 0;
  for (size_t k = 0; k < n; ++k) {
    int64_t in_off = 0;
    for (size_t j = 0; j < me; ++j) in_off += sends[k * n + j];
    const int64_t bytes = sends[k * n + me];
    if (bytes > 0) fn(k, in_off, out_off, bytes);  // (an empty tensor may have no storage)
    out_off += bytes;
  }
}

class Communicator {
 public:
  // `single_copy`: take part in single-copy collectives (direct.cpp); false makes this rank
  // report failure at the first one, which turns them off for the whole group.
  Communicator(std::unique_ptr<Segment> segment, int rank, std::string group_name,
               bool single_copy = true);
  ~Communicator();

  int rank() const { return rank_; }
  int world() const { return world_; }

  // Runs a collective to completion; throws MismatchError, or a DistError that leaves the
  // communicator unusable (the caller then aborts it).
  void run_collective(const Op& op);

  // Point-to-point: post() registers a send or recv; pump() moves bytes for every posted one
  // without blocking and returns the finished ones (with their error, if any).
  struct P2PDone {
    uint64_t seq;
    std::exception_ptr error;  // null on success
  };
  void post(const Op& op);
  // Also returns the ones finished while a collective waited (it pumps between slices).
  std::vector<P2PDone> pump();
  bool has_p2p() const { return !sends_.empty() || pending_recvs_ > 0; }

  // Health: throws when this communicator was aborted, or when rank `peer` (every other rank
  // when -1) aborted, left or died. `op` names the op in the message (may be null).
  void check_peers(const Op* op, int peer = -1);
  // The same for the peers for which needed(rank) holds (a peer that left after publishing
  // everything this rank waits for is no error).
  void check_peers(const Op* op, FunctionRef<bool(int)> needed);
  // Throws DistTimeoutError for a posted send or recv whose deadline passed, and checks the
  // health of the peers that posted ops wait for.
  void check_p2p();
  // Wakes this rank's progress thread (it sleeps on its own doorbell).
  void wake_self() { ring(segment_->control(rank_)); }
  // Sleeps on this rank's doorbell (at most max_ns) unless it moved since `seen`.
  uint32_t doorbell() const { return segment_->control(rank_).doorbell.load(); }
  void sleep(uint32_t seen, int64_t max_ns);

  // Marks this rank aborted in the segment (first reason wins) and wakes every rank.
  void abort(const std::string& reason);
  // Marks this rank as gone after a clean shutdown.
  void detach();

 private:
  // ---- lockstep steps (collectives.cpp) ----
  int acquire(const Op& op);
  uint32_t publish();
  void release(int half, uint32_t step) { release_[half] = step; }
  void wait_all(const Op& op, uint32_t step);
  void wait_rank(const Op& op, int r, uint32_t step);
  // wait_all for a step whose publisher also wrote it into its half's header (SlotHeader::step).
  void wait_headers(const Op& op, int half, uint32_t step);
  // The one step of a collective whose data fits in the header line: acquire a half, write
  // the descriptor, `bytes` of `data` into the payload and then the step, publish, wait on
  // the peers' lines, validate. Returns the half; the caller reads the peers' payloads, then
  // calls end_header_step (release, and own the other half's line for the next such op).
  int header_step(const Op& op, const void* data, size_t bytes);
  // Its second half, for a caller that acquired `half`, wrote the descriptor and filled the
  // payload itself: the step into the line, publish, wait, validate.
  void finish_header_step(const Op& op, int half);
  void end_header_step(int half);
  void write_descriptor(const Op& op, int half);
  void validate(const Op& op, int half);
  // Health and deadline checks while waiting for every rank in `ranks` (-1: all) to reach
  // `step`.
  void between_slices(const Op& op, int ranks, uint32_t step);

  void allreduce(const Op& op);
  void broadcast(const Op& op);
  void reduce(const Op& op);
  void allgather(const Op& op);
  // The single-copy forms (direct.cpp): every rank reads what it needs straight from its
  // peers' tensors (process_vm_readv) instead of through the segment. They return false,
  // on every rank alike, when some rank could not read; the caller then runs the segment
  // form, and later ops do not try again.
  bool allgather_direct(const Op& op);
  bool broadcast_direct(const Op& op);
  // The large all_reduce: rank r reduces block r of its own tensor with the peers' blocks r
  // (read in chunks) and writes each reduced chunk into every peer's tensor
  // (process_vm_writev). Its tensor is written from the first block on, so whether all ranks
  // can read is agreed first (a one-byte read of each peer); a read or write that fails after
  // that is an error, not a fallback.
  bool allreduce_direct(const Op& op);
  // The large reduce_scatter of one flat input (reduce_scatter_tensor's): rank r reduces
  // block r of every rank's input into its output, reading the peers' blocks in chunks. When
  // some rank's inputs are separate tensors (the list form), every rank declines and the
  // segment form runs; later ops may still go direct.
  bool reduce_scatter_direct(const Op& op);
  // all_to_all's reads, after its first piece exchanged the split sizes (`sends`, n x n) and
  // the peers' input addresses (`sources`).
  bool alltoall_direct(const Op& op, const std::vector<int64_t>& sends,
                       const std::vector<std::pair<int, uint64_t>>& sources);
  // This process and `addr` into the payload of this rank's header of `half`.
  void write_direct_source(int half, const uint8_t* addr);
  // Where rank r's data is, from the header of `half` after a direct_descriptor step.
  std::pair<int, uint64_t> direct_source(int r, int half) const;
  // Step A of a direct op: the descriptor, plus this process and `addr` in the header's
  // payload; returns the half.
  int direct_descriptor(const Op& op, const uint8_t* addr);
  // Step B: tells whether this rank's reads succeeded, waits for every rank's, releases
  // `half` (unless -1); true when all succeeded (else direct ops stay off from now on).
  // `declined`: this rank cannot take the direct form of this op (it succeeded otherwise);
  // every rank then returns false, and later ops may still go direct.
  bool direct_agree(const Op& op, int half, bool ok, bool declined = false);
  // Steps A and B for the ops that write before they finish: `addr` published, a one-byte
  // read of each peer, the agreement; `sources` gets every rank's (pid, address).
  bool direct_reachable(const Op& op, const uint8_t* addr, bool declined,
                        std::vector<std::pair<int, uint64_t>>& sources);
  // After the agreement a failed read or write is an error (this rank may have written).
  void peer_or_throw(const Op& op, bool succeeded, const char* what, int r) const;
  // Folds `count` elements of every rank, in rank order, into `dst`: this rank's from `own`,
  // each peer's read a chunk at a time from its published address plus `peer_first`
  // elements; `each_chunk(offset, length)` runs on every reduced chunk while it is in cache.
  void fold_peers(const Op& op, const std::vector<std::pair<int, uint64_t>>& sources,
                  int64_t peer_first, const uint8_t* own, uint8_t* dst, int64_t count,
                  FunctionRef<void(int64_t, int64_t)> each_chunk);
  void scatter(const Op& op);
  void reduce_scatter(const Op& op);
  void alltoall(const Op& op);
  void barrier(const Op& op);

  // ---- point-to-point (p2p.cpp) ----
  struct SendState;
  struct RecvState;
  struct Incoming;
  bool pump_sends(int dst, std::vector<P2PDone>& done);
  bool pump_recvs(int src, std::vector<P2PDone>& done);
  bool match_stash(RecvState& r, std::vector<P2PDone>& done);

  std::unique_ptr<Segment> segment_;
  const int rank_;
  const int world_;
  const std::string group_name_;
  const uint64_t half_bytes_;
  const int pid_;

  uint32_t published_ = 0;
  uint32_t release_[2] = {0, 0};
  // Every peer is known to have published at least this step (from an earlier wait), so a
  // wait for it need not read their flags again.
  uint32_t known_reached_ = 0;
  const bool light_;         // steps are published lightly (Segment::light_publish, doorbell.h)
  const bool direct_reads_;  // this rank may read its peers (ShmOptions::single_copy)
  std::vector<uint8_t> direct_scratch_;  // allreduce_direct's chunks of the peers' blocks
  bool direct_ = true;                   // single-copy collectives worked (or were not tried yet)
  uint64_t half_counter_ = 0;
  int64_t last_pid_check_ns_ = 0;

  std::vector<std::deque<std::unique_ptr<SendState>>> sends_;  // per destination, FIFO
  std::vector<std::deque<std::unique_ptr<RecvState>>> recvs_;  // per source, FIFO
  std::vector<std::unique_ptr<Incoming>> incoming_;            // per source
  std::map<std::pair<int, int64_t>, std::deque<std::unique_ptr<Incoming>>> stash_;
  size_t pending_recvs_ = 0;
  std::vector<P2PDone> deferred_done_;  // finished by pumps inside collective waits
  std::vector<const void*> srcs_;       // the reductions' source buffers, one per rank
  // all_to_all's split sizes of every rank (n x n), where each rank's carried input is, and
  // the single-copy form's sources: kept, so that a small exchange allocates nothing.
  std::vector<int64_t> a2a_sends_, a2a_expects_;
  std::vector<const uint8_t*> a2a_carried_;
  std::vector<std::pair<int, uint64_t>> a2a_sources_;
  std::unique_ptr<PeerWatch> watch_;  // after segment_: stops before it is unmapped
};

}  // namespace tessera::distributed::shm
