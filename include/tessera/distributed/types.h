// Reduction operators and the per-op options structs of the Backend interface (c10d's
// AllreduceOptions, BroadcastOptions, ...). Roots are ranks within the group.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tessera/distributed/work.h"

namespace tessera::distributed {

// SUM, PRODUCT, MIN, MAX for every real dtype; AVG for floating and complex dtypes; SUM,
// PRODUCT and AVG for complex; BAND, BOR, BXOR for integers and bool. On bool, SUM and MAX
// are logical or, PRODUCT and MIN logical and. Integer SUM and PRODUCT wrap around.
enum class ReduceOp : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR };
std::string_view reduce_op_name(ReduceOp op);

// Unset timeouts take the group's default (the one given to init_process_group / new_group).
// async_op tells hooks (and the Flight Recorder) whether the caller waits for the op at once;
// the torch.distributed free functions set it, and wait at once when it is false. A caller
// that sets it false promises that wait: the shm backend then runs the op in the waiting
// thread instead of waking its progress thread (an op nobody waits for still starts, after
// up to 100 ms).
struct AllreduceOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct BroadcastOptions {
  int64_t root_rank = 0;
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct ReduceOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  int64_t root_rank = 0;
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct AllgatherOptions {
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct GatherOptions {
  int64_t root_rank = 0;
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct ScatterOptions {
  int64_t root_rank = 0;
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct ReduceScatterOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct AllToAllOptions {
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct BarrierOptions {
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};
struct SendRecvOptions {
  int64_t tag = 0;
  std::optional<Milliseconds> timeout;
  bool async_op = true;
};

}  // namespace tessera::distributed
