// The shm backend: Tessera's own intra-node communicator over one POSIX shared-memory
// segment per communicator, eager (the segment is set up when the backend is created) and
// nonblocking (a progress thread per communicator runs the ops; every call returns a Work at
// once). Small messages pass through the segment in one step; large ones are chunked and
// pipelined (reduce-scatter + all-gather for reductions), so every rank's core does a share
// of the work. Waiting spins for a few microseconds and then sleeps on a futex.
// The algorithms are described in src/distributed/backends/shm/collectives.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tessera/distributed/backend.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed {

struct ShmOptions {
  // Bytes of each of a rank's two buffer halves (the largest piece of one step). 0: the
  // value of TESSERA_SHM_BUFFER_BYTES, or 1 MiB. At least 4096 and 64 * world size.
  uint64_t buffer_bytes = 0;
  // Bytes of each point-to-point ring (one per ordered pair of ranks).
  uint64_t ring_bytes = 256 << 10;
  // Names the group in errors.
  std::string group_name = "default";
  // Bounds the set-up (the segment's rendezvous); unset: the backend's timeout.
  std::optional<Milliseconds> connect_timeout;
  // Large all_gather/gather (and others with a single-copy form) read the peers' tensors
  // directly (process_vm_readv) instead of copying through the segment. Unset: on, unless
  // TESSERA_SHM_SINGLE_COPY is 0. When any rank has it off, or cannot read its peers (no
  // permission), every rank of the group uses the segment from the first such op on.
  std::optional<bool> single_copy;
  // Publish the collectives' steps without a processor barrier; a waiter about to sleep pays
  // one instead (membarrier(2), see docs/distributed.md). Unset: on where the kernel offers
  // MEMBARRIER_CMD_GLOBAL_EXPEDITED, unless TESSERA_SHM_MEMBARRIER is 0; true where it does
  // not counts as false. When any rank has it off, every rank of the group fences.
  std::optional<bool> light_publish;
};

// Collective over `store` (every rank of the communicator calls it with the same store
// namespace): rank 0 creates the segment, the others map it. Bounded by `timeout`.
BackendPtr make_shm_backend(const StorePtr& store, int rank, int size, Milliseconds timeout,
                            ShmOptions options = {});

}  // namespace tessera::distributed
