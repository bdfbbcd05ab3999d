// Point-to-point messages over the rings of the shm segment.
//
// ring(src, dst) is a single-producer, single-consumer byte ring: src advances `head` after
// writing, dst advances `tail` after reading, and each rings the other's doorbell. A message
// is a 32-byte frame header (magic, dtype, tag, byte count, sender's op number) followed by
// the payload, streamed through the ring in as many passes as its size needs, so messages of
// any size pass through a ring of fixed size.
//
// Matching. Sends to one destination go out in the order they were posted. A receiver drains
// ring(src, me) only while it has a recv posted for src: each incoming frame goes to the
// oldest posted recv for src with the frame's tag, or, when none matches, into a stash that
// later recvs look in first. So recvs with different tags may be posted in any order, and a
// send never waits for a recv with another tag.
//
// A frame whose size or dtype differs from the matching recv's fails that recv (the payload is
// consumed and dropped, so the stream stays in step) and the communicator stays usable.
#include <fmt/chrono.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "distributed/backends/shm/communicator.h"

namespace tessera::distributed::shm {

namespace {

constexpr uint32_t kFrameMagic = 0x50325354u;  // "TS2P"

struct FrameHeader {
  uint32_t magic;
  int32_t dtype;
  int64_t tag;
  uint64_t nbytes;
  uint64_t seq;
};
static_assert(sizeof(FrameHeader) == 32);

// Copies n bytes at stream position pos of a ring of `cap` bytes.
void ring_read(const uint8_t* ring, uint64_t cap, uint64_t pos, uint8_t* dst, uint64_t n) {
  const uint64_t at = pos % cap, first = std::min(n, cap - at);
  std::memcpy(dst, ring + at, first);
  std::memcpy(dst + first, ring, n - first);
}
void ring_write(uint8_t* ring, uint64_t cap, uint64_t pos, const uint8_t* src, uint64_t n) {
  const uint64_t at = pos % cap, first = std::min(n, cap - at);
  std::memcpy(ring + at, src, first);
  std::memcpy(ring, src + first, n - first);
}

}  // namespace

struct Communicator::SendState {
  uint64_t seq;
  int dst;
  FrameHeader header;
  const uint8_t* data;
  uint64_t sent = 0;  // of sizeof(header) + header.nbytes
  Clock::time_point deadline;
  Milliseconds timeout;
};

struct Communicator::RecvState {
  uint64_t seq;
  int src;
  int64_t tag;
  ScalarType dtype;
  uint8_t* data;
  uint64_t nbytes;
  bool matched = false;
  Clock::time_point deadline;
  Milliseconds timeout;
};

// The frame being read from one source (or a complete stashed one).
struct Communicator::Incoming {
  FrameHeader header{};
  uint64_t header_got = 0;
  uint64_t payload_got = 0;
  RecvState* target = nullptr;  // null: stashed
  std::exception_ptr error;     // the target's size or dtype does not match
  Bytes stash;
};

// The constructor and destructor live here, where the p2p states are complete types.
Communicator::Communicator(std::unique_ptr<Segment> segment, int rank, std::string group_name,
                           bool single_copy)
    : segment_(std::move(segment)),
      rank_(rank),
      world_(segment_->world()),
      group_name_(std::move(group_name)),
      half_bytes_(segment_->half_bytes()),
      pid_(static_cast<int>(::getpid())),
      light_(segment_->light_publish()),
      direct_reads_(single_copy),
      sends_(static_cast<size_t>(world_)),
      recvs_(static_cast<size_t>(world_)),
      incoming_(static_cast<size_t>(world_)),
      srcs_(static_cast<size_t>(world_)) {
  note_local_ranks(world_);  // every rank of a segment runs on this machine
  watch_ = std::make_unique<PeerWatch>(*segment_, rank_);
}

Communicator::~Communicator() = default;

void Communicator::post(const Op& op) {
  if (op.kind == OpKind::SEND) {
    auto s = std::make_unique<SendState>();
    s->seq = op.seq;
    s->dst = op.peer;
    s->header = FrameHeader{kFrameMagic, static_cast<int32_t>(op.dtype), op.tag,
                            static_cast<uint64_t>(op.count * element_size(op.dtype)), op.seq};
    s->data = op.in;
    s->deadline = op.deadline;
    s->timeout = op.timeout;
    sends_[op.peer].push_back(std::move(s));
    return;
  }
  TS_INTERNAL_ASSERT(op.kind == OpKind::RECV);
  auto r = std::make_unique<RecvState>();
  r->seq = op.seq;
  r->src = op.peer;
  r->tag = op.tag;
  r->dtype = op.dtype;
  r->data = op.out;
  r->nbytes = static_cast<uint64_t>(op.count * element_size(op.dtype));
  r->deadline = op.deadline;
  r->timeout = op.timeout;
  if (match_stash(*r, deferred_done_)) return;
  recvs_[op.peer].push_back(std::move(r));
  ++pending_recvs_;
}

namespace {
std::exception_ptr mismatch(const FrameHeader& h, int src, ScalarType dtype, uint64_t nbytes,
                            const std::string& group) {
  if (h.nbytes == nbytes && h.dtype == static_cast<int32_t>(dtype)) return nullptr;
  return std::make_exception_ptr(DistBackendError(fmt::format(
      "shm recv (group '{}'): rank {} sent {} bytes of {} with tag {}, but the recv expects {} "
      "bytes of {}",
      group, src, h.nbytes, dtype_name(static_cast<ScalarType>(h.dtype)), h.tag, nbytes, dtype)));
}
}  // namespace

bool Communicator::match_stash(RecvState& r, std::vector<P2PDone>& done) {
  auto it = stash_.find({r.src, r.tag});
  if (it == stash_.end() || it->second.empty()) return false;
  std::unique_ptr<Incoming> msg = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) stash_.erase(it);
  auto error = mismatch(msg->header, r.src, r.dtype, r.nbytes, group_name_);
  if (!error) std::memcpy(r.data, msg->stash.data(), r.nbytes);
  done.push_back({r.seq, error});
  return true;
}

std::vector<Communicator::P2PDone> Communicator::pump() {
  std::vector<P2PDone> done;
  done.swap(deferred_done_);
  for (bool progress = true; progress;) {
    progress = false;
    for (int peer = 0; peer < world_; ++peer) {
      if (!sends_[peer].empty()) progress |= pump_sends(peer, done);
      if (!recvs_[peer].empty() || incoming_[peer]) progress |= pump_recvs(peer, done);
    }
  }
  return done;
}

bool Communicator::pump_sends(int dst, std::vector<P2PDone>& done) {
  RingHeader& ring_h = segment_->ring(rank_, dst);
  uint8_t* data = segment_->ring_data(rank_, dst);
  const uint64_t cap = segment_->ring_bytes();
  uint64_t head = ring_h.head.load(std::memory_order_relaxed);
  const uint64_t tail = ring_h.tail.load(std::memory_order_acquire);
  bool progress = false;
  while (!sends_[dst].empty()) {
    SendState& s = *sends_[dst].front();
    const uint64_t total = sizeof(FrameHeader) + s.header.nbytes;
    const uint64_t space = cap - (head - tail);
    if (space == 0) break;
    uint64_t n = std::min(space, total - s.sent);
    if (s.sent < sizeof(FrameHeader)) {  // the header goes out whole
      if (space < sizeof(FrameHeader)) break;
      ring_write(data, cap, head, reinterpret_cast<const uint8_t*>(&s.header), sizeof(FrameHeader));
      head += sizeof(FrameHeader);
      s.sent = sizeof(FrameHeader);
      n = std::min(cap - (head - tail), total - s.sent);
    }
    const uint64_t payload_at = s.sent - sizeof(FrameHeader);
    ring_write(data, cap, head, s.data + payload_at, n);
    head += n;
    s.sent += n;
    progress = true;
    if (s.sent < total) break;
    done.push_back({s.seq, nullptr});
    sends_[dst].pop_front();
  }
  if (progress) {
    ring_h.head.store(head, std::memory_order_release);
    ring(segment_->control(dst));
  }
  return progress;
}

bool Communicator::pump_recvs(int src, std::vector<P2PDone>& done) {
  RingHeader& ring_h = segment_->ring(src, rank_);
  const uint8_t* data = segment_->ring_data(src, rank_);
  const uint64_t cap = segment_->ring_bytes();
  const uint64_t head = ring_h.head.load(std::memory_order_acquire);
  uint64_t tail = ring_h.tail.load(std::memory_order_relaxed);
  bool progress = false;
  while (head > tail && (incoming_[src] || !recvs_[src].empty())) {
    if (!incoming_[src]) {
      if (head - tail < sizeof(FrameHeader)) break;
      auto in = std::make_unique<Incoming>();
      ring_read(data, cap, tail, reinterpret_cast<uint8_t*>(&in->header), sizeof(FrameHeader));
      tail += sizeof(FrameHeader);
      const FrameHeader& h = in->header;
      TS_CHECK(h.magic == kFrameMagic, distributed::DistBackendError,
               "shm recv (group '{}'): the stream from rank {} is corrupt (frame magic 0x{:08x})",
               group_name_, src, h.magic);
      auto& queue = recvs_[src];
      auto it = std::find_if(queue.begin(), queue.end(),
                             [&](const auto& r) { return !r->matched && r->tag == h.tag; });
      if (it != queue.end()) {
        in->target = it->get();
        in->target->matched = true;
        in->error = mismatch(h, src, in->target->dtype, in->target->nbytes, group_name_);
      } else {
        in->stash.resize(h.nbytes);
      }
      incoming_[src] = std::move(in);
      progress = true;
    }
    Incoming& in = *incoming_[src];
    const uint64_t n = std::min(head - tail, in.header.nbytes - in.payload_got);
    if (n > 0) {
      uint8_t* dst = in.target ? (in.error ? nullptr : in.target->data) : in.stash.data();
      if (dst) ring_read(data, cap, tail, dst + in.payload_got, n);
      tail += n;
      in.payload_got += n;
      progress = true;
    }
    if (in.payload_got < in.header.nbytes) break;
    std::unique_ptr<Incoming> finished = std::move(incoming_[src]);
    if (finished->target) {
      auto& queue = recvs_[src];
      auto it = std::find_if(queue.begin(), queue.end(),
                             [&](const auto& r) { return r.get() == finished->target; });
      done.push_back({(*it)->seq, finished->error});
      queue.erase(it);
      --pending_recvs_;
    } else {
      stash_[{src, finished->header.tag}].push_back(std::move(finished));
    }
  }
  if (progress) {
    ring_h.tail.store(tail, std::memory_order_release);
    ring(segment_->control(src));
  }
  return progress;
}

void Communicator::check_p2p() {
  const auto now = Clock::now();
  for (int peer = 0; peer < world_; ++peer) {
    for (const auto& s : sends_[peer]) {
      TS_CHECK(
          now<s->deadline, distributed::DistTimeoutError,
              "shm send (op #{} of group '{}', rank {} to rank {}): timed out after {} with {} "
              "of {} bytes sent (is rank {} receiving?)",
              s->seq, group_name_, rank_, peer, s->timeout, s->sent> sizeof(FrameHeader)
              ? s->sent - sizeof(FrameHeader)
              : 0,
          s->header.nbytes, peer);
    }
    for (const auto& r : recvs_[peer]) {
      TS_CHECK(now < r->deadline, distributed::DistTimeoutError,
               "shm recv (op #{} of group '{}', rank {} from rank {}, tag {}): timed out after {} "
               "(is rank {} sending?)",
               r->seq, group_name_, rank_, peer, r->tag, r->timeout, peer);
    }
    if (sends_[peer].empty() && recvs_[peer].empty()) continue;
    try {
      check_peers(nullptr, peer);
    } catch (const DistError&) {
      // What the peer wrote before it left is visible now: drain it, then decide.
      auto more = pump();
      deferred_done_.insert(deferred_done_.end(), more.begin(), more.end());
      if (!sends_[peer].empty() || !recvs_[peer].empty()) throw;
    }
  }
}

}  // namespace tessera::distributed::shm
