// Single-copy collectives: a rank reads its peers' tensors directly with process_vm_readv
// (Linux cross-memory attach) instead of having them copied into the segment and copied out
// again. One copy instead of two, and no pieces through the two halves.
//
// Steps (n ranks, all of them run the same ones):
//   A  acquire a half, write the descriptor and (in the header's payload) this process's pid
//      and the address its peers read from; publish; wait for everyone; validate. This is the
//      segment forms' first step too, so a mismatch between a direct and a segment call is
//      reported the same way on every rank.
//   -  read what this rank needs from every peer (in chunks, so the kernel's page pinning
//      stays small), copy its own part locally. all_reduce also writes: each rank reduces its
//      block and writes it into every peer's tensor (process_vm_writev) chunk by chunk.
//   B  record whether every read succeeded (RankControl::direct_failed), publish, wait for
//      everyone (after B nobody reads this rank's tensor any more, so it may return), and
//      release the half.
// When any rank's reads failed (no permission: another user, a ptrace policy; a seccomp
// filter), every rank sees it after B and runs the segment form of the same op; no later op
// tries the direct form again. A rank that cannot take the direct form of one op (a
// reduce_scatter given separate input tensors) declines in B instead: every rank runs that
// op's segment form, and later ops may go direct. all_reduce and reduce_scatter write before
// they finish, so they agree (B) before they read and write, and end with one more step.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "distributed/backends/reduce.h"
#include "distributed/backends/shm/communicator.h"

namespace tessera::distributed::shm {

namespace {

// Bytes per process_vm_readv/writev call: the kernel pins and copies a call's pages as a
// batch, so calls should be large, and the reductions work on half a call per peer, which
// should stay in L2. One 16 MiB call ran at 5.7 GB/s, 64 KiB calls at 11.5 (an earlier VM);
// on a Zen 5 VM (1 MiB L2) 512 KiB calls beat 256 KiB in four alternations of `bench comm
// --threads 2 --quick` (all_reduce 16 MiB 1.56-2.06 -> 1.17-1.86 ms, reduce_scatter 16 MiB
// 1.89-2.86 -> 1.57-2.22 ms, all_gather and all_to_all within noise); 64 KiB calls were
// slower than both (all_reduce 16 MiB 3.1 ms), 1 MiB calls no better than 512 KiB.
constexpr int64_t kChunk = 512 << 10;

// Where a peer's data is, in the header's payload of step A.
struct DirectSource {
  uint64_t addr;
  int32_t pid;
  int32_t reserved;
};
static_assert(sizeof(DirectSource) <= SlotHeader::kPayloadBytes);

// Moves `bytes` between `local` and `remote` in process `pid` (into `local` unless `write`).
// False when the kernel refuses (no permission, the process is gone, a bad address).
bool peer_copy(int pid, uint8_t* local, uint64_t remote, int64_t bytes, bool write) {
  int64_t done = 0;
  while (done < bytes) {
    const auto len = static_cast<size_t>(std::min(kChunk, bytes - done));
    iovec here{local + done, len};
    iovec there{reinterpret_cast<void*>(remote + static_cast<uint64_t>(done)), len};
    const ssize_t moved = write ? ::process_vm_writev(pid, &here, 1, &there, 1, 0)
                                : ::process_vm_readv(pid, &here, 1, &there, 1, 0);
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) return false;
    done += moved;
  }
  return true;
}

bool read_peer(int pid, uint64_t src, uint8_t* dst, int64_t bytes) {
  return peer_copy(pid, dst, src, bytes, false);
}

bool write_peer(int pid, const uint8_t* src, uint64_t dst, int64_t bytes) {
  return peer_copy(pid, const_cast<uint8_t*>(src), dst, bytes, true);  // only read from
}

}  // namespace

void Communicator::write_direct_source(int half, const uint8_t* addr) {
  const DirectSource mine{reinterpret_cast<uint64_t>(addr), pid_, 0};
  std::memcpy(segment_->slot_header(rank_, half).payload, &mine, sizeof(mine));
}

int Communicator::direct_descriptor(const Op& op, const uint8_t* addr) {
  const int h = acquire(op);
  write_descriptor(op, h);
  write_direct_source(h, addr);
  wait_all(op, publish());
  validate(op, h);
  return h;
}

bool Communicator::direct_agree(const Op& op, int half, bool ok, bool declined) {
  constexpr uint32_t kOk = 0, kFailed = 1, kDeclined = 2;
  segment_->control(rank_).direct_failed = !ok ? kFailed : declined ? kDeclined : kOk;
  const uint32_t step = publish();
  wait_all(op, step);
  if (half >= 0) release(half, step);
  bool all = true;
  for (int r = 0; r < world_; ++r) {
    const uint32_t said = segment_->control(r).direct_failed;
    if (said == kFailed) direct_ = false;
    all = all && said == kOk;
  }
  return direct_ && all;
}

std::pair<int, uint64_t> Communicator::direct_source(int r, int half) const {
  DirectSource src;
  std::memcpy(&src, segment_->slot_header(r, half).payload, sizeof(src));
  return {src.pid, src.addr};
}

bool Communicator::broadcast_direct(const Op& op) {
  const int64_t bytes = op.count * element_size(op.dtype);
  const int h = direct_descriptor(op, op.out);
  bool ok = direct_reads_;
  if (ok && rank_ != op.root) {
    const auto [pid, addr] = direct_source(op.root, h);
    ok = read_peer(pid, addr, op.out, bytes);
  }
  return direct_agree(op, h, ok);
}

bool Communicator::alltoall_direct(const Op& op, const std::vector<int64_t>& sends,
                                   const std::vector<std::pair<int, uint64_t>>& sources) {
  const auto n = static_cast<size_t>(world_);
  const auto me = static_cast<size_t>(rank_);
  bool ok = direct_reads_;
  if (ok)
    for_each_block_to(sends, n, me, [&](size_t k, int64_t in_off, int64_t out_off, int64_t bytes) {
      if (!ok) return;
      if (k == me) {
        std::memcpy(op.out + out_off, op.in + in_off, static_cast<size_t>(bytes));
      } else {
        ok = read_peer(sources[k].first, sources[k].second + static_cast<uint64_t>(in_off),
                       op.out + out_off, bytes);
      }
    });
  return direct_agree(op, -1, ok);
}

bool Communicator::direct_reachable(const Op& op, const uint8_t* addr, bool declined,
                                    std::vector<std::pair<int, uint64_t>>& sources) {
  const int h = direct_descriptor(op, addr);
  sources.assign(static_cast<size_t>(world_), {});
  bool ok = direct_reads_;
  for (int r = 0; r < world_; ++r) {
    sources[static_cast<size_t>(r)] = direct_source(r, h);
    uint8_t probe = 0;
    if (ok && r != rank_) ok = read_peer(sources[r].first, sources[r].second, &probe, 1);
  }
  return direct_agree(op, h, ok, declined);
}

void Communicator::peer_or_throw(const Op& op, bool succeeded, const char* what, int r) const {
  if (succeeded) return;
  TS_THROW(distributed::DistBackendError,
           "shm {} (op #{} of group '{}', rank {}): {} rank {}'s tensor failed: {}",
           op_kind_name(op.kind), op.seq, group_name_, rank_, what, r, std::strerror(errno));
}

void Communicator::fold_peers(const Op& op, const std::vector<std::pair<int, uint64_t>>& sources,
                              int64_t peer_first, const uint8_t* own, uint8_t* dst, int64_t count,
                              FunctionRef<void(int64_t, int64_t)> each_chunk) {
  const int64_t es = element_size(op.dtype);
  const int64_t chunk = std::max<int64_t>(1, (kChunk / 2) / es);
  direct_scratch_.resize(static_cast<size_t>(world_ * chunk * es));
  for (int64_t off = 0; off < count; off += chunk) {
    const int64_t len = std::min(chunk, count - off);
    for (int r = 0; r < world_; ++r) {
      if (r == rank_) {
        srcs_[r] = own + off * es;
        continue;
      }
      uint8_t* tmp = direct_scratch_.data() + r * chunk * es;
      const auto& [pid, addr] = sources[static_cast<size_t>(r)];
      const uint64_t from = addr + static_cast<uint64_t>((peer_first + off) * es);
      peer_or_throw(op, read_peer(pid, from, tmp, len * es), "reading", r);
      srcs_[r] = tmp;
    }
    reduce_into(op.dtype, op.reduce_op, dst + off * es, srcs_.data(), world_, len);
    each_chunk(off, len);
  }
}

bool Communicator::allreduce_direct(const Op& op) {
  const int64_t es = element_size(op.dtype);
  const int64_t total = op.count;
  const int64_t align = std::max<int64_t>(1, 64 / es);
  // The blocks of the segment form, so that each element is reduced by the same rank.
  const auto bound = [&](int r) {
    return r == world_ ? total : (total * r / world_) / align * align;
  };
  std::vector<std::pair<int, uint64_t>> sources;
  if (!direct_reachable(op, op.out, false, sources)) return false;  // nothing was written yet
  // This rank's block, folded in place, each reduced chunk written straight into every
  // peer's tensor while it is still in cache. Only this rank reads or writes block rank_ of
  // any tensor, so nobody waits in between; the peers' blocks arrive here the same way.
  const int64_t b0 = bound(rank_);
  uint8_t* block = op.out + b0 * es;
  fold_peers(op, sources, b0, block, block, bound(rank_ + 1) - b0, [&](int64_t off, int64_t len) {
    for (int r = 0; r < world_; ++r) {
      if (r == rank_) continue;
      const auto& [pid, addr] = sources[static_cast<size_t>(r)];
      const uint64_t to = addr + static_cast<uint64_t>((b0 + off) * es);
      peer_or_throw(op, write_peer(pid, block + off * es, to, len * es), "writing", r);
    }
  });
  wait_all(op, publish());  // every block is reduced and written everywhere
  return true;
}

bool Communicator::reduce_scatter_direct(const Op& op) {
  const int64_t bytes = op.count * element_size(op.dtype);  // one block
  bool flat = true;
  for (int j = 0; j < world_; ++j) flat = flat && op.ins[j] == op.ins[0] + j * bytes;
  std::vector<std::pair<int, uint64_t>> sources;
  if (!direct_reachable(op, op.ins[0], !flat, sources)) return false;
  // Block rank_ of every input, folded in rank order into the output.
  fold_peers(op, sources, rank_ * op.count, op.ins[rank_], op.out, op.count,
             [](int64_t, int64_t) {});
  wait_all(op, publish());  // nobody reads this rank's input any more
  return true;
}

bool Communicator::allgather_direct(const Op& op) {
  const int64_t bytes = op.count * element_size(op.dtype);
  const int h = direct_descriptor(op, op.in);
  bool ok = direct_reads_;
  if (ok && (op.kind == OpKind::ALLGATHER || rank_ == op.root)) {
    for (int r = 0; r < world_ && ok; ++r) {
      if (r == rank_) {
        std::memcpy(op.outs[r], op.in, static_cast<size_t>(bytes));
        continue;
      }
      const auto [pid, addr] = direct_source(r, h);
      ok = read_peer(pid, addr, op.outs[r], bytes);
    }
  }
  return direct_agree(op, h, ok);
}

}  // namespace tessera::distributed::shm
