// The sends and recvs a backend issued, for suspend()'s check that none is still pending.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "tessera/distributed/work.h"

namespace tessera::distributed {

class PendingP2P {
 public:
  // Records a send's or recv's Work (dropping the completed ones) and returns it.
  WorkPtr track(WorkPtr work) {
    std::lock_guard lock(mutex_);
    std::erase_if(works_, [](const std::weak_ptr<Work>& w) {
      const auto p = w.lock();
      return !p || p->is_completed();
    });
    works_.push_back(work);
    return work;
  }

  // Throws DistBackendError naming the backend, group and rank while one has not completed.
  void check_none(std::string_view backend, std::string_view group, int rank) const {
    std::lock_guard lock(mutex_);
    const auto pending = std::count_if(works_.begin(), works_.end(), [](const auto& w) {
      const auto p = w.lock();
      return p && !p->is_completed();
    });
    TS_CHECK(pending == 0, distributed::DistBackendError,
             "suspend(): {} group '{}' (rank {}) has {} sends/recvs pending; wait for them first",
             backend, group, rank, pending);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<Work>> works_;
};

}  // namespace tessera::distributed
