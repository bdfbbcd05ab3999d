// Op: one validated operation of an OpBackend, as raw contiguous buffers (what a backend's
// engine needs of it; the tensors stay alive in the backend's queue entry).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tessera/core/dtype.h"
#include "tessera/distributed/types.h"

namespace tessera::distributed {

enum class OpKind : uint32_t {
  ALLREDUCE = 1,
  BROADCAST,
  REDUCE,
  ALLGATHER,
  GATHER,
  SCATTER,
  REDUCE_SCATTER,
  ALLTOALL,
  BARRIER,
  SEND,
  RECV,
};
std::string_view op_kind_name(OpKind kind);

// One operation as the communicator sees it: raw contiguous buffers, already validated by the
// front end (OpBackend). The Work and the tensors stay alive in the backend's queue entry.
struct Op {
  OpKind kind = OpKind::BARRIER;
  ScalarType dtype = ScalarType::Float32;
  ReduceOp reduce_op = ReduceOp::SUM;
  int root = 0;
  // Elements per rank that every rank must agree on.
  int64_t count = 0;
  // ALLREDUCE/BROADCAST/REDUCE: `out` is the tensor (read and written). ALLGATHER/GATHER:
  // `in` (count elements) and `outs` (one per rank; empty on non-roots for GATHER). SCATTER:
  // `ins` (one per rank, root only) and `out`. REDUCE_SCATTER: `ins` (one per rank), `out`.
  // ALLTOALL: `in`, `out`, split sizes in bytes. SEND: `in`. RECV: `out`.
  const uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  std::vector<const uint8_t*> ins;
  std::vector<uint8_t*> outs;
  std::vector<int64_t> in_split_bytes, out_split_bytes;
  int peer = -1;
  int64_t tag = 0;
  uint64_t seq = 0;  // the op's number in this communicator (errors and descriptors)
  Clock::time_point deadline;
  Milliseconds timeout{0};
  // The caller waits for this collective at once (async_op = false): an engine may leave it
  // for the caller's Work::wait to run rather than hand it to another thread.
  bool caller_waits = false;
};

}  // namespace tessera::distributed
