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
struct AllreduceOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  std::optional<Milliseconds> timeout;
};
struct BroadcastOptions {
  int64_t root_rank = 0;
  std::optional<Milliseconds> timeout;
};
struct ReduceOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  int64_t root_rank = 0;
  std::optional<Milliseconds> timeout;
};
struct AllgatherOptions {
  std::optional<Milliseconds> timeout;
};
struct GatherOptions {
  int64_t root_rank = 0;
  std::optional<Milliseconds> timeout;
};
struct ScatterOptions {
  int64_t root_rank = 0;
  std::optional<Milliseconds> timeout;
};
struct ReduceScatterOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  std::optional<Milliseconds> timeout;
};
struct AllToAllOptions {
  std::optional<Milliseconds> timeout;
};
struct BarrierOptions {
  std::optional<Milliseconds> timeout;
};
struct SendRecvOptions {
  int64_t tag = 0;
  std::optional<Milliseconds> timeout;
};

}  // namespace tessera::distributed
