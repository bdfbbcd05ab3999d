// PeerWatch: notices at once when another rank's process ends.
//
// A rank that waits for its peers sleeps on its doorbell and looks at their health between
// sleep slices, and a process that was killed never rings anybody. Without help a waiter
// learns of the death only at its next liveness check (kill(pid, 0) every few ms). PeerWatch
// holds a pidfd for each peer's process (readable once the process has ended, zombie or
// reaped, and never confused with a later process of the same pid) and a thread that polls
// them: when one ends it marks that rank gone and rings this rank's doorbell, so the waiter
// checks its peers right away. Where pidfds are not available (pidfd_open fails), gone() stays
// false and the periodic check remains the only one.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "distributed/backends/shm/segment.h"

namespace tessera::distributed::shm {

class PeerWatch {
 public:
  // Watches every rank of `segment` whose pid differs from this process's; rings `rank`'s
  // doorbell when one ends. `segment` must outlive the watch.
  PeerWatch(const Segment& segment, int rank);
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Rank r's process has ended (as seen by its pidfd).
  bool gone(int r) const { return gone_[static_cast<size_t>(r)].load(std::memory_order_acquire); }

 private:
  void loop();

  const Segment& segment_;
  const int rank_;
  std::unique_ptr<std::atomic<bool>[]> gone_;
  std::vector<std::pair<int, int>> fds_;  // (rank, pidfd) still watched
  int stop_fd_ = -1;                      // an eventfd that ends the thread
  std::thread thread_;
};

}  // namespace tessera::distributed::shm
