// The shm collectives: a lockstep protocol over per-rank buffers in shared memory.
//
// Steps. Every rank owns a monotonic step counter (RankControl.flag). A rank publishes a step
// after it has written what the step promises, and waits for "every rank (or rank r) has
// published at least step s" before it reads what the others promised. All ranks run the
// same schedule for the same collective, so step numbers agree without being exchanged.
//
// Halves. Every rank owns a buffer split into two halves; a collective moves its data in
// pieces, each piece through one half, alternating. The pattern of one piece is
//     acquire a half -> write into my half -> publish A -> wait -> read peers' halves ->
//     publish C -> the half is released at step C
// (large all-reduces and reduces add a step B in the middle, see below). A rank writes into a
// half again only after every rank has published the step that released it, i.e. after every
// reader is done. With two halves, a rank fills piece i+1 while its peers still read piece
// i: copying in, reducing and copying out of consecutive pieces overlap across ranks.
//
// Agreement. The first piece of every collective also writes a descriptor (op kind, dtype,
// element count, reduce op, root) into the half's header; after step A every rank compares
// all descriptors. On any difference every rank sees the same descriptors, publishes C and
// throws the same MismatchError, so the communicator stays usable and nobody reduces garbage.
//
// Algorithms (n ranks, M bytes):
//   all_reduce, M <= kSmallAllreduceBytes: one piece; every rank reduces all n buffers
//     into its output (in rank order, so every rank gets the same bits). Up to 32 bytes go
//     in the descriptor's own cache line (SlotHeader::payload), and step A is written into
//     that line too (SlotHeader::step, before the flag): peers wait on it, so one line
//     transfer brings them step, descriptor and data.
//   all_reduce, larger: pieces of half size; every rank writes the blocks the others reduce
//     into its half; rank r reduces the r-th of n blocks across its own tensor and the
//     others' halves into that block of its half (nobody else reads it), publishes B, then
//     copies every reduced block (reduce-scatter + all-gather): the reduction work is split
//     evenly, and every element is still folded in rank order.
//   reduce: as the large all-reduce, but only the root copies the reduced blocks.
//   broadcast: the root writes each piece; the others copy it.
//   all_gather / gather: every rank writes its piece; every rank (the root) copies all.
//   scatter: the root writes n sub-pieces (one per rank) per piece; rank r copies its own.
//   reduce_scatter: every rank writes n sub-pieces (one per destination); rank r reduces
//     sub-piece r across all buffers into its output.
//   all_to_all: a first piece (a header step) exchanges the split sizes and checks that rank
//     j expects from rank r what rank r sends to j; a rank's sizes and input travel in its
//     header line when they fit (16-bit sizes, 32 bytes in all), else in its half, with an
//     input of at most 16 KiB; when every input travelled, that piece is the whole exchange.
//     Otherwise rounds move up to half/n bytes per pair each.
//   barrier: the descriptor piece alone.
#include <fmt/chrono.h>

#include <cpuid.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "distributed/backends/reduce.h"
#include "distributed/backends/shm/communicator.h"

namespace tessera::distributed::shm {

namespace {

constexpr uint64_t kSmallAllreduceBytes = 32 << 10;
// An all_to_all whose every rank sends at most this many bytes in all is one step: the data
// travels with the split sizes.
constexpr int64_t kSmallAllToAllBytes = 16 << 10;
// From this many bytes per rank, collectives that have a single-copy form use it (direct.cpp).
constexpr int64_t kDirectBytes = 128 << 10;
// The single-copy reductions (all_reduce, reduce_scatter) read n - 1 blocks in chunks and sync
// once more than the moves: they win over the segment from this many bytes per rank's block.
constexpr int64_t kDirectReduceBlockBytes = 4 * kDirectBytes;

// PREFETCHW where the CPU has it (CPUID 0x80000001 ECX bit 8).
void prefetch_for_write(const void* line) {
  static const bool has_prefetchw = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
  }();
  if (has_prefetchw) asm volatile("prefetchw %0" ::"m"(*static_cast<const char*>(line)));
}

bool reached(uint32_t flag, uint32_t step) {
  return static_cast<int32_t>(flag - step) >= 0;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// SlotHeader::layout of an all_to_all's first step: the rank's split sizes (16 bits each) and
// its whole input in the header's payload, or the sizes (and an input of at most
// kSmallAllToAllBytes) in the half's data with the single-copy source in the payload.
constexpr uint32_t kAllToAllInData = 0;
constexpr uint32_t kAllToAllInPayload = 1;

size_t payload_sizes_bytes(size_t n) {
  return 2 * n * sizeof(uint16_t);
}

// `in_total`: the sum of `sends`.
bool alltoall_fits_payload(const std::vector<int64_t>& sends, const std::vector<int64_t>& expects,
                           int64_t in_total) {
  const auto small = [](int64_t b) { return b <= std::numeric_limits<uint16_t>::max(); };
  return std::all_of(sends.begin(), sends.end(), small) &&
         std::all_of(expects.begin(), expects.end(), small) &&
         payload_sizes_bytes(sends.size()) + static_cast<uint64_t>(in_total) <=
             SlotHeader::kPayloadBytes;
}

void pack_sizes(const std::vector<int64_t>& sends, const std::vector<int64_t>& expects,
                uint8_t* payload) {
  const size_t n = sends.size();
  uint16_t sizes[SlotHeader::kPayloadBytes / sizeof(uint16_t)];
  for (size_t j = 0; j < n; ++j) {
    sizes[j] = static_cast<uint16_t>(sends[j]);
    sizes[n + j] = static_cast<uint16_t>(expects[j]);
  }
  std::memcpy(payload, sizes, payload_sizes_bytes(n));
}

void unpack_sizes(const uint8_t* payload, size_t n, int64_t* sends, int64_t* expects) {
  uint16_t sizes[SlotHeader::kPayloadBytes / sizeof(uint16_t)];
  std::memcpy(sizes, payload, payload_sizes_bytes(n));
  for (size_t j = 0; j < n; ++j) {
    sends[j] = sizes[j];
    expects[j] = sizes[n + j];
  }
}

std::string describe(const SlotHeader& d) {
  const auto kind = static_cast<OpKind>(d.kind);
  std::string s = fmt::format("{}({}, {} elements", op_kind_name(kind),
                              dtype_name(static_cast<ScalarType>(d.dtype)), d.count);
  if (kind == OpKind::ALLREDUCE || kind == OpKind::REDUCE || kind == OpKind::REDUCE_SCATTER)
    s += fmt::format(", {}", reduce_op_name(static_cast<ReduceOp>(d.reduce_op)));
  if (kind == OpKind::BROADCAST || kind == OpKind::REDUCE || kind == OpKind::GATHER ||
      kind == OpKind::SCATTER)
    s += fmt::format(", root {}", d.root);
  return s + ")";
}

}  // namespace

void Communicator::run_collective(const Op& op) {
  switch (op.kind) {
    case OpKind::ALLREDUCE:
      return allreduce(op);
    case OpKind::BROADCAST:
      return broadcast(op);
    case OpKind::REDUCE:
      return reduce(op);
    case OpKind::ALLGATHER:
    case OpKind::GATHER:
      return allgather(op);
    case OpKind::SCATTER:
      return scatter(op);
    case OpKind::REDUCE_SCATTER:
      return reduce_scatter(op);
    case OpKind::ALLTOALL:
      return alltoall(op);
    case OpKind::BARRIER:
      return barrier(op);
    default:
      TS_INTERNAL_ASSERT(false);
  }
}

// ---- steps ---------------------------------------------------------------------------------

int Communicator::acquire(const Op& op) {
  const int h = static_cast<int>(half_counter_++ & 1);
  if (!reached(known_reached_, release_[h])) wait_all(op, release_[h]);
  return h;
}

uint32_t Communicator::publish() {
  ++published_;
  publish_store(segment_->control(rank_).flag, published_, light_);
  // Only a sleeping peer needs its doorbell (ring_if_sleeping says why that is enough).
  for (int r = 0; r < world_; ++r)
    if (r != rank_) ring_if_sleeping(segment_->control(r));
  return published_;
}

void Communicator::between_slices(const Op& op, int ranks, uint32_t step) {
  const auto late = [&](int r) {
    return (ranks < 0 || r == ranks) &&
           !reached(segment_->control(r).flag.load(std::memory_order_acquire), step);
  };
  if (Clock::now() >= op.deadline) {
    std::vector<int> waiting;
    for (int r = 0; r < world_; ++r)
      if (late(r)) waiting.push_back(r);
    TS_THROW(distributed::DistTimeoutError,
             "shm {} (op #{} of group '{}', rank {} of {}): timed out after {} waiting for "
             "rank(s) {} to reach step {}",
             op_kind_name(op.kind), op.seq, group_name_, rank_, world_, op.timeout,
             fmt::join(waiting, ", "), step);
  }
  check_peers(&op, late);
  if (has_p2p()) {  // keep peers' messages flowing while this rank waits
    auto done = pump();
    deferred_done_.insert(deferred_done_.end(), done.begin(), done.end());
  }
}

void Communicator::wait_all(const Op& op, uint32_t step) {
  const auto ready = [&] {
    for (int r = 0; r < world_; ++r)
      if (!reached(segment_->control(r).flag.load(std::memory_order_acquire), step)) return false;
    return true;
  };
  wait_for(
      segment_->control(rank_), ready, [&] { between_slices(op, -1, step); }, light_);
  if (reached(step, known_reached_)) known_reached_ = step;
}

int Communicator::header_step(const Op& op, const void* data, size_t bytes) {
  const int h = acquire(op);
  write_descriptor(op, h);
  if (bytes > 0) std::memcpy(segment_->slot_header(rank_, h).payload, data, bytes);
  finish_header_step(op, h);
  return h;
}

void Communicator::finish_header_step(const Op& op, int half) {
  // Ordered like the flag's store in publish() (which follows it), so that a peer going to
  // sleep on this line is seen by publish()'s look at the sleepers, or sees the step.
  const uint32_t step = published_ + 1;
  publish_store(segment_->slot_header(rank_, half).step, step, light_);
  publish();
  wait_headers(op, half, step);
  validate(op, half);
}

void Communicator::end_header_step(int half) {
  release(half, publish());
  // The next small op writes the other half's line, which the peers read in the last one
  // (done: each published this one's step after it). Owning it by then keeps that write's
  // fence from waiting for the line to cross cores.
  prefetch_for_write(&segment_->slot_header(rank_, half ^ 1));
}

void Communicator::wait_headers(const Op& op, int half, uint32_t step) {
  // A peer that called another collective (a mismatch that validate() reports) publishes the
  // step on its flag only.
  const auto ready = [&] {
    for (int r = 0; r < world_; ++r)
      if (!reached(segment_->slot_header(r, half).step.load(std::memory_order_acquire), step) &&
          !reached(segment_->control(r).flag.load(std::memory_order_acquire), step))
        return false;
    return true;
  };
  wait_for(
      segment_->control(rank_), ready, [&] { between_slices(op, -1, step); }, light_);
  // A peer writes the header's step after publishing every earlier step on its flag.
  if (reached(step - 1, known_reached_)) known_reached_ = step - 1;
}

void Communicator::wait_rank(const Op& op, int r, uint32_t step) {
  const auto ready = [&] {
    return reached(segment_->control(r).flag.load(std::memory_order_acquire), step);
  };
  wait_for(
      segment_->control(rank_), ready, [&] { between_slices(op, r, step); }, light_);
}

void Communicator::write_descriptor(const Op& op, int half) {
  SlotHeader& d = segment_->slot_header(rank_, half);
  d.kind = static_cast<uint32_t>(op.kind);
  d.dtype = static_cast<int32_t>(op.dtype);
  const bool reducing = op.kind == OpKind::ALLREDUCE || op.kind == OpKind::REDUCE ||
                        op.kind == OpKind::REDUCE_SCATTER;
  d.reduce_op = reducing ? static_cast<uint32_t>(op.reduce_op) : 0;
  const bool rooted = op.kind == OpKind::BROADCAST || op.kind == OpKind::REDUCE ||
                      op.kind == OpKind::GATHER || op.kind == OpKind::SCATTER;
  d.root = rooted ? op.root : 0;
  d.count = op.count;
}

void Communicator::validate(const Op& op, int half) {
  const SlotHeader& mine = segment_->slot_header(rank_, half);
  bool same = true;
  for (int r = 0; r < world_; ++r) {
    const SlotHeader& d = segment_->slot_header(r, half);
    same = same && d.kind == mine.kind && d.dtype == mine.dtype && d.reduce_op == mine.reduce_op &&
           d.root == mine.root && d.count == mine.count;
  }
  if (same) return;
  std::string calls;
  for (int r = 0; r < world_; ++r)
    calls +=
        fmt::format("{}rank {}: {}", r ? "; " : "", r, describe(segment_->slot_header(r, half)));
  release(half, publish());  // everyone is done reading the descriptors
  TS_THROW(distributed::shm::MismatchError,
           "shm {} (op #{} of group '{}'): the ranks called different collectives or passed "
           "different arguments: {}",
           op_kind_name(op.kind), op.seq, group_name_, calls);
}

// ---- algorithms ----------------------------------------------------------------------------

void Communicator::barrier(const Op& op) {
  const int h = acquire(op);
  write_descriptor(op, h);
  wait_all(op, publish());
  validate(op, h);
  release(h, publish());
}

void Communicator::allreduce(const Op& op) {
  const int64_t es = element_size(op.dtype);
  const int64_t total = op.count;
  const auto bytes = static_cast<uint64_t>(total * es);
  if (bytes <= std::min<uint64_t>(kSmallAllreduceBytes, half_bytes_)) {
    if (bytes <= SlotHeader::kPayloadBytes) {
      const int h = header_step(op, op.out, bytes);
      for (int r = 0; r < world_; ++r) srcs_[r] = segment_->slot_header(r, h).payload;
      reduce_into(op.dtype, op.reduce_op, op.out, srcs_.data(), world_, total);
      end_header_step(h);
      return;
    }
    const int h = acquire(op);
    write_descriptor(op, h);
    std::memcpy(segment_->slot_data(rank_, h), op.out, bytes);
    wait_all(op, publish());
    validate(op, h);
    for (int r = 0; r < world_; ++r) srcs_[r] = segment_->slot_data(r, h);
    reduce_into(op.dtype, op.reduce_op, op.out, srcs_.data(), world_, total);
    release(h, publish());
    return;
  }
  // Its single-copy form reads n - 1 blocks of 1/n in chunks, writes its reduced block into
  // the n - 1 peers and syncs three times: it wins over the segment from about 512 KiB per
  // block (1 MiB on 4 ranks ran slower with an earlier form that read the reduced blocks
  // back; 16 MiB on 2 ranks runs 2.6x faster than that form did).
  if (direct_ && static_cast<int64_t>(bytes) / world_ >= kDirectReduceBlockBytes &&
      allreduce_direct(op))
    return;
  reduce(op);
}

// The large all-reduce (every rank copies the result) and reduce (only the root does).
void Communicator::reduce(const Op& op) {
  const int64_t es = element_size(op.dtype);
  const int64_t total = op.count;
  const int64_t piece = static_cast<int64_t>(half_bytes_) / es;
  const int64_t align = std::max<int64_t>(1, 64 / es);
  const bool everyone_copies = op.kind == OpKind::ALLREDUCE;
  const auto bound = [&](int r, int64_t len) {
    return r == world_ ? len : (len * r / world_) / align * align;
  };
  const int64_t pieces = std::max<int64_t>(1, ceil_div(total, piece));
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t off = p * piece, len = std::min(piece, total - off);
    const int h = acquire(op);
    uint8_t* mine = segment_->slot_data(rank_, h);
    if (p == 0) write_descriptor(op, h);
    // Only the blocks the others reduce go through the half: this rank reads its own block
    // from its tensor (one copy of 1/n of the piece less, in and out of memory).
    const int64_t b0 = bound(rank_, len), b1 = bound(rank_ + 1, len);
    const uint8_t* in = op.out + off * es;
    std::memcpy(mine, in, static_cast<size_t>(b0 * es));
    std::memcpy(mine + b1 * es, in + b1 * es, static_cast<size_t>((len - b1) * es));
    wait_all(op, publish());
    if (p == 0) validate(op, h);
    for (int r = 0; r < world_; ++r)
      srcs_[r] = r == rank_ ? in + b0 * es : segment_->slot_data(r, h) + b0 * es;
    reduce_into(op.dtype, op.reduce_op, mine + b0 * es, srcs_.data(), world_, b1 - b0);
    const uint32_t reduced = publish();
    if (everyone_copies || rank_ == op.root) {
      wait_all(op, reduced);
      for (int r = 0; r < world_; ++r) {
        const int64_t c0 = bound(r, len), c1 = bound(r + 1, len);
        std::memcpy(op.out + (off + c0) * es, segment_->slot_data(r, h) + c0 * es,
                    static_cast<size_t>((c1 - c0) * es));
      }
    }
    release(h, publish());
  }
}

void Communicator::broadcast(const Op& op) {
  const int64_t es = element_size(op.dtype);
  const auto bytes = static_cast<size_t>(op.count * es);
  if (bytes <= SlotHeader::kPayloadBytes) {
    const int h = header_step(op, op.out, rank_ == op.root ? bytes : 0);
    if (rank_ != op.root && bytes > 0)  // (an empty tensor may have no storage)
      std::memcpy(op.out, segment_->slot_header(op.root, h).payload, bytes);
    end_header_step(h);
    return;
  }
  if (direct_ && op.count * es >= kDirectBytes && broadcast_direct(op)) return;
  const int64_t piece = static_cast<int64_t>(half_bytes_) / es;
  const int64_t pieces = std::max<int64_t>(1, ceil_div(op.count, piece));
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t off = p * piece, len = std::min(piece, op.count - off);
    const int h = acquire(op);
    if (p == 0) write_descriptor(op, h);
    if (rank_ == op.root)
      std::memcpy(segment_->slot_data(rank_, h), op.out + off * es, static_cast<size_t>(len * es));
    const uint32_t written = publish();
    if (p == 0) {
      wait_all(op, written);
      validate(op, h);
    } else {
      wait_rank(op, op.root, written);
    }
    if (rank_ != op.root)
      std::memcpy(op.out + off * es, segment_->slot_data(op.root, h),
                  static_cast<size_t>(len * es));
    release(h, publish());
  }
}

void Communicator::allgather(const Op& op) {
  const int64_t es = element_size(op.dtype);
  const auto bytes = static_cast<size_t>(op.count * es);
  if (bytes <= SlotHeader::kPayloadBytes) {
    const int h = header_step(op, op.in, bytes);
    if (bytes > 0 && (op.kind == OpKind::ALLGATHER || rank_ == op.root))
      for (int r = 0; r < world_; ++r)
        std::memcpy(op.outs[r], segment_->slot_header(r, h).payload, bytes);
    end_header_step(h);
    return;
  }
  if (direct_ && op.count * es >= kDirectBytes && allgather_direct(op)) return;
  const int64_t piece = static_cast<int64_t>(half_bytes_) / es;
  const int64_t pieces = std::max<int64_t>(1, ceil_div(op.count, piece));
  const bool copies = op.kind == OpKind::ALLGATHER || rank_ == op.root;
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t off = p * piece, len = std::min(piece, op.count - off);
    const int h = acquire(op);
    if (p == 0) write_descriptor(op, h);
    std::memcpy(segment_->slot_data(rank_, h), op.in + off * es, static_cast<size_t>(len * es));
    const uint32_t written = publish();
    if (p == 0 || copies) wait_all(op, written);
    if (p == 0) validate(op, h);
    if (copies) {
      for (int r = 0; r < world_; ++r)
        std::memcpy(op.outs[r] + off * es, segment_->slot_data(r, h),
                    static_cast<size_t>(len * es));
    }
    release(h, publish());
  }
}

void Communicator::scatter(const Op& op) {
  const int64_t es = element_size(op.dtype);
  const int64_t piece = static_cast<int64_t>(half_bytes_) / (es * world_);
  const int64_t pieces = std::max<int64_t>(1, ceil_div(op.count, piece));
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t off = p * piece, len = std::min(piece, op.count - off);
    const int h = acquire(op);
    if (p == 0) write_descriptor(op, h);
    if (rank_ == op.root) {
      for (int r = 0; r < world_; ++r)
        std::memcpy(segment_->slot_data(rank_, h) + r * piece * es, op.ins[r] + off * es,
                    static_cast<size_t>(len * es));
    }
    const uint32_t written = publish();
    if (p == 0) {
      wait_all(op, written);
      validate(op, h);
    } else {
      wait_rank(op, op.root, written);
    }
    std::memcpy(op.out + off * es, segment_->slot_data(op.root, h) + rank_ * piece * es,
                static_cast<size_t>(len * es));
    release(h, publish());
  }
}

void Communicator::reduce_scatter(const Op& op) {
  const int64_t es = element_size(op.dtype);
  const auto bytes = static_cast<size_t>(op.count * es);  // per rank
  if (bytes * static_cast<size_t>(world_) <= SlotHeader::kPayloadBytes) {
    uint8_t all[SlotHeader::kPayloadBytes];  // every rank's input, in rank order
    if (bytes > 0)
      for (int j = 0; j < world_; ++j) std::memcpy(all + j * bytes, op.ins[j], bytes);
    const int h = header_step(op, all, bytes * static_cast<size_t>(world_));
    for (int r = 0; r < world_; ++r) srcs_[r] = segment_->slot_header(r, h).payload + rank_ * bytes;
    reduce_into(op.dtype, op.reduce_op, op.out, srcs_.data(), world_, op.count);
    end_header_step(h);
    return;
  }
  if (direct_ && static_cast<int64_t>(bytes) >= kDirectReduceBlockBytes &&
      reduce_scatter_direct(op))
    return;
  const int64_t piece = static_cast<int64_t>(half_bytes_) / (es * world_);
  const int64_t pieces = std::max<int64_t>(1, ceil_div(op.count, piece));
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t off = p * piece, len = std::min(piece, op.count - off);
    const int h = acquire(op);
    if (p == 0) write_descriptor(op, h);
    for (int j = 0; j < world_; ++j)
      std::memcpy(segment_->slot_data(rank_, h) + j * piece * es, op.ins[j] + off * es,
                  static_cast<size_t>(len * es));
    wait_all(op, publish());
    if (p == 0) validate(op, h);
    for (int r = 0; r < world_; ++r) srcs_[r] = segment_->slot_data(r, h) + rank_ * piece * es;
    reduce_into(op.dtype, op.reduce_op, op.out + off * es, srcs_.data(), world_, len);
    release(h, publish());
  }
}

void Communicator::alltoall(const Op& op) {
  const auto n = static_cast<size_t>(world_);
  // Piece 0, a header step: the split sizes, sends[r * n + j] = bytes rank r sends to rank j.
  std::vector<int64_t>& sends = a2a_sends_;
  std::vector<int64_t>& expects = a2a_expects_;
  std::vector<std::pair<int, uint64_t>>& sources = a2a_sources_;  // for the single-copy form
  sends.resize(n * n);
  expects.resize(n * n);
  sources.assign(n, {});
  a2a_carried_.assign(n, nullptr);
  const auto total = [&](const int64_t* row) { return std::accumulate(row, row + n, int64_t{0}); };
  // A small input rides along after the sizes: when every rank's does, this piece is the
  // whole exchange.
  const auto carried = [&](const int64_t* row) {
    return total(row) <= kSmallAllToAllBytes &&
           static_cast<uint64_t>(total(row)) + 2 * n * sizeof(int64_t) <= half_bytes_;
  };
  bool any_in_payload = false;
  {
    const int h = acquire(op);
    write_descriptor(op, h);
    SlotHeader& header = segment_->slot_header(rank_, h);
    const int64_t in_total = total(op.in_split_bytes.data());
    if (alltoall_fits_payload(op.in_split_bytes, op.out_split_bytes, in_total)) {
      header.layout = kAllToAllInPayload;
      pack_sizes(op.in_split_bytes, op.out_split_bytes, header.payload);
      if (in_total > 0)
        std::memcpy(header.payload + payload_sizes_bytes(n), op.in, static_cast<size_t>(in_total));
    } else {
      header.layout = kAllToAllInData;
      write_direct_source(h, op.in);
      auto* mine = reinterpret_cast<int64_t*>(segment_->slot_data(rank_, h));
      std::copy(op.in_split_bytes.begin(), op.in_split_bytes.end(), mine);
      std::copy(op.out_split_bytes.begin(), op.out_split_bytes.end(), mine + n);
      if (in_total > 0 && carried(op.in_split_bytes.data()))
        std::memcpy(mine + 2 * n, op.in, static_cast<size_t>(in_total));
    }
    finish_header_step(op, h);
    for (int r = 0; r < world_; ++r) {
      const SlotHeader& theirs = segment_->slot_header(r, h);
      int64_t* row_sends = sends.data() + static_cast<ptrdiff_t>(r * n);
      int64_t* row_expects = expects.data() + static_cast<ptrdiff_t>(r * n);
      if (theirs.layout == kAllToAllInPayload) {
        any_in_payload = true;
        unpack_sizes(theirs.payload, n, row_sends, row_expects);
        a2a_carried_[r] = theirs.payload + payload_sizes_bytes(n);
      } else {
        sources[static_cast<size_t>(r)] = direct_source(r, h);
        const auto* sizes = reinterpret_cast<const int64_t*>(segment_->slot_data(r, h));
        std::copy(sizes, sizes + n, row_sends);
        std::copy(sizes + n, sizes + 2 * n, row_expects);
        if (carried(row_sends))
          a2a_carried_[r] = segment_->slot_data(r, h) + 2 * n * sizeof(int64_t);
      }
    }
    for (size_t r = 0; r < n; ++r) {
      for (size_t j = 0; j < n; ++j) {
        if (sends[r * n + j] == expects[j * n + r]) continue;
        end_header_step(h);
        const int64_t es = element_size(op.dtype);
        TS_THROW(distributed::shm::MismatchError,
                 "shm all_to_all (op #{} of group '{}'): rank {} sends {} elements to rank {}, "
                 "but rank {} expects {} elements from rank {} (output_split_sizes must match "
                 "the senders' input_split_sizes)",
                 op.seq, group_name_, r, sends[r * n + j] / es, j, j, expects[j * n + r] / es, r);
      }
    }
    const bool all_carried = std::all_of(a2a_carried_.begin(), a2a_carried_.end(),
                                         [](const uint8_t* p) { return p != nullptr; });
    if (all_carried)
      for_each_block_to(sends, n, static_cast<size_t>(rank_),
                        [&](size_t k, int64_t in_off, int64_t out_off, int64_t bytes) {
                          std::memcpy(op.out + out_off, a2a_carried_[k] + in_off,
                                      static_cast<size_t>(bytes));
                        });
    end_header_step(h);
    if (all_carried) return;
  }
  // Every rank knows every split now, so all decide alike. A rank whose sizes came in the
  // payload published no source for the single-copy form (it sends at most 32 bytes).
  if (direct_ && !any_in_payload && *std::max_element(sends.begin(), sends.end()) >= kDirectBytes &&
      alltoall_direct(op, sends, sources))
    return;
  const int64_t es = element_size(op.dtype);
  const int64_t q = static_cast<int64_t>(half_bytes_) / world_ / es * es;  // bytes per pair
  const int64_t rounds = ceil_div(*std::max_element(sends.begin(), sends.end()), q);
  std::vector<int64_t> in_off(n + 1, 0), out_off(n + 1, 0);
  for (size_t j = 0; j < n; ++j) {
    in_off[j + 1] = in_off[j] + op.in_split_bytes[j];
    out_off[j + 1] = out_off[j] + op.out_split_bytes[j];
  }
  for (int64_t t = 0; t < rounds; ++t) {
    const int64_t lo = t * q;
    const int h = acquire(op);
    for (size_t j = 0; j < n; ++j) {
      const int64_t s = op.in_split_bytes[j];
      if (lo < s)
        std::memcpy(segment_->slot_data(rank_, h) + j * q, op.in + in_off[j] + lo,
                    static_cast<size_t>(std::min(q, s - lo)));
    }
    wait_all(op, publish());
    for (size_t k = 0; k < n; ++k) {
      const int64_t s = sends[k * n + rank_];
      if (lo < s)
        std::memcpy(op.out + out_off[k] + lo,
                    segment_->slot_data(static_cast<int>(k), h) + rank_ * q,
                    static_cast<size_t>(std::min(q, s - lo)));
    }
    release(h, publish());
  }
}

}  // namespace tessera::distributed::shm
