// The shm communicator's lifecycle and health checks.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "distributed/backends/shm/communicator.h"

namespace tessera::distributed::shm {

namespace {
constexpr int64_t kPidCheckNs = 20'000'000;

std::string reason_of(const RankControl& c) {
  return std::string(c.reason, strnlen(c.reason, sizeof(c.reason)));
}
}  // namespace

void Communicator::sleep(uint32_t seen, int64_t max_ns) {
  RankControl& me = segment_->control(rank_);
  // Spin first, as wait_for does: the next op of a loop of small collectives usually comes
  // within microseconds, and waking a sleeping thread costs far more than that.
  const int64_t spin_end = now_ns() + std::min(kSpinNs, max_ns);
  for (int i = 1;; ++i) {
    if (me.doorbell.load(std::memory_order_acquire) != seen) return;
    cpu_relax(i);
    if ((i & 7) == 0 && now_ns() > spin_end) break;
  }
  me.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (me.doorbell.load(std::memory_order_seq_cst) == seen) sleep_on(me, seen, max_ns);
  me.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void Communicator::check_peers(const Op* op, int peer) {
  check_peers(op, [&](int r) { return peer < 0 || r == peer; });
}

void Communicator::check_peers(const Op* op, FunctionRef<bool(int)> needed) {
  const auto where = [&] {
    return op ? fmt::format("shm {} (op #{} of group '{}', rank {})", op_kind_name(op->kind),
                            op->seq, group_name_, rank_)
              : fmt::format("shm group '{}' (rank {})", group_name_, rank_);
  };
  const RankControl& me = segment_->control(rank_);
  TS_CHECK(me.state.load(std::memory_order_acquire) != kAborted, distributed::DistBackendError,
           "{}: the communicator was aborted: {}", where(), reason_of(me));
  const bool check_pids = now_ns() - last_pid_check_ns_ > kPidCheckNs;
  if (check_pids) last_pid_check_ns_ = now_ns();
  for (int r = 0; r < world_; ++r) {
    if (r == rank_ || !needed(r)) continue;
    const RankControl& c = segment_->control(r);
    const uint32_t state = c.state.load(std::memory_order_acquire);
    TS_CHECK(state != kAborted, distributed::DistBackendError,
             "{}: rank {} aborted the communicator: {}", where(), r, reason_of(c));
    TS_CHECK(state != kDetached, distributed::DistBackendError,
             "{}: rank {} left the communicator (shut down) while this rank still needs it",
             where(), r);
    TS_CHECK(!watch_->gone(r), distributed::DistBackendError, "{}: rank {} (process {}) has died",
             where(), r, c.pid);
    if (check_pids && c.pid != pid_) {
      const bool dead = process_gone(c.pid);
      TS_CHECK(!dead, distributed::DistBackendError, "{}: rank {} (process {}) has died", where(),
               r, c.pid);
    }
  }
}

void Communicator::abort(const std::string& reason) {
  RankControl& me = segment_->control(rank_);
  uint32_t state = me.state.load();
  if (state == kAborted) return;
  const size_t n = std::min(reason.size(), sizeof(me.reason) - 1);
  std::memcpy(me.reason, reason.data(), n);
  me.reason[n] = '\0';
  me.state.store(kAborted, std::memory_order_seq_cst);
  for (int r = 0; r < world_; ++r) ring(segment_->control(r));
}

void Communicator::detach() {
  RankControl& me = segment_->control(rank_);
  uint32_t expected = kAttached;
  me.state.compare_exchange_strong(expected, kDetached, std::memory_order_seq_cst);
  for (int r = 0; r < world_; ++r) ring(segment_->control(r));
}

}  // namespace tessera::distributed::shm
