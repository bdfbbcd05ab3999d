// torch.distributed for Tessera: init_process_group, groups, and the collective free
// functions. Ranks given to these functions (src, dst, the ranks of new_group) are global
// ranks, as in PyTorch; a null `group` means the default group (WORLD).
//
// With async_op = false a function waits for its op (throwing its error) and returns the
// completed Work; with async_op = true it returns the Work at once.
//
// State: init_process_group sets up the process's default World. A WorldScope gives the
// calling thread a World of its own instead, so tests (and tools) can run several ranks as
// threads of one process, as PyTorch's threaded tests do.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/distributed/backend.h"
#include "tessera/distributed/errors.h"
#include "tessera/distributed/flight_recorder.h"
#include "tessera/distributed/ft.h"
#include "tessera/distributed/gloo.h"
#include "tessera/distributed/hierarchical.h"
#include "tessera/distributed/hooks.h"
#include "tessera/distributed/launch.h"
#include "tessera/distributed/lazy.h"
#include "tessera/distributed/plugin.h"
#include "tessera/distributed/process_group.h"
#include "tessera/distributed/shm.h"
#include "tessera/distributed/store.h"
#include "tessera/distributed/types.h"
#include "tessera/distributed/window.h"
#include "tessera/distributed/work.h"

namespace tessera::distributed {

// PyTorch's default_pg_timeout.
inline constexpr Milliseconds kDefaultPgTimeout{30 * 60 * 1000};

// ---- backends ------------------------------------------------------------------------------
// Makes a member's backend. `store` is the group's own namespace.
using BackendFactory = std::function<BackendPtr(const StorePtr& store, int rank, int size,
                                                Milliseconds timeout, const std::string& group)>;
// Registers (or replaces) a backend under `name`. "shm", "gloo", "lazy" and "hierarchical" are
// built in; others come from plugins (plugin.h), loaded the first time their name is asked for.
void register_backend(const std::string& name, BackendFactory factory);
bool is_backend_available(const std::string& name);

// ---- initialisation ------------------------------------------------------------------------
// Every rank calls it once with the same backend and world size, and its own rank.
// enable_reconfigure: the default group can later be given a new membership in place
// (reconfigure() below); backends that cannot (all but shm and gloo) refuse the flag.
void init_process_group(const std::string& backend, StorePtr store, int rank, int world_size,
                        Milliseconds timeout = kDefaultPgTimeout, bool enable_reconfigure = false);
// init_method: "env://" (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; or OMPI_COMM_WORLD_RANK/
// SIZE or SLURM_PROCID/NTASKS for rank and size), "tcp://HOST:PORT", or "file:///PATH".
// rank and world_size of -1 come from the environment. With tcp:// and env://, rank 0 runs
// the TCPStore server unless TESSERA_STORE_EXTERNAL=1 (the launcher runs it).
void init_process_group(const std::string& backend, const std::string& init_method = "env://",
                        int rank = -1, int world_size = -1,
                        Milliseconds timeout = kDefaultPgTimeout, bool enable_reconfigure = false);
bool is_initialized();
// Shuts down `group`'s backend (waiting for its queued ops, each bounded by its timeout);
// with no group, every group and the default one, after which is_initialized() is false.
void destroy_process_group(const ProcessGroupPtr& group = nullptr);

ProcessGroupPtr group_world();  // the default group; throws when not initialised
int get_rank(const ProcessGroupPtr& group = nullptr);
int get_world_size(const ProcessGroupPtr& group = nullptr);
std::string get_backend(const ProcessGroupPtr& group = nullptr);
// A group of the given global ranks (all ranks when empty), ordered by rank. Every rank of
// the default group must call it, in the same order, members or not (non-members get a group
// whose is_member() is false). After the default group was reconfigured, the ranks are the
// global ranks of its current members (all of them when empty), and the groups are counted
// and named per generation (docs/fault-tolerance.md); split_group likewise.
ProcessGroupPtr new_group(std::vector<int> ranks = {},
                          std::optional<Milliseconds> timeout = std::nullopt,
                          const std::string& backend = "");
// torch.distributed.split_group: every member of `parent` (the default group when null)
// calls it with the same disjoint lists of global ranks (members of the parent). Each list
// becomes a group whose communicator is set up at once (eagerly, as ncclCommSplit does); a
// rank gets the group it is in, or null when it is in none (the matching no-color call, so
// every parent rank splits exactly once). Backend and timeout are the parent's unless given.
ProcessGroupPtr split_group(const ProcessGroupPtr& parent,
                            std::vector<std::vector<int>> split_ranks,
                            std::optional<Milliseconds> timeout = std::nullopt);
// A group of its own over a reconfigurable `backend` ("shm" or "gloo") that has no members
// until its first reconfigure (ft::Manager's replica group). `global_rank` names this process
// in its reconfigure handles; the group's rendezvous goes through `store`. Needs no default
// group.
ProcessGroupPtr new_reconfigurable_group(const std::string& backend, StorePtr store,
                                         int global_rank, Milliseconds timeout,
                                         const std::string& name);
int get_group_rank(const ProcessGroupPtr& group, int global_rank);
int get_global_rank(const ProcessGroupPtr& group, int group_rank);

// A World of this thread's own while the scope lives (see above). Not nestable.
class WorldScope {
 public:
  WorldScope();
  ~WorldScope();
  WorldScope(const WorldScope&) = delete;
  WorldScope& operator=(const WorldScope&) = delete;
};

using GroupRef = const ProcessGroupPtr&;

// ---- reconfiguration (torch.distributed._reconfigure; docs/fault-tolerance.md) -------------
// The flow: every member of the new membership gets a fresh uuid and every member's handle out
// of band (a store, a quorum), calls reconfigure() and waits on the Work. The group's rank,
// size and global ranks are then the new membership's; its collective and point-to-point
// sequence numbers restart from 0 in the new generation.
bool supports_reconfigure(GroupRef group = nullptr);
std::string get_reconfigure_handle(GroupRef group = nullptr);
WorkPtr reconfigure(const ReconfigureOptions& options, GroupRef group = nullptr);

// ---- collectives ---------------------------------------------------------------------------
WorkPtr all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM, GroupRef group = nullptr,
                   bool async_op = false);
WorkPtr broadcast(const Tensor& tensor, int src, GroupRef group = nullptr, bool async_op = false);
WorkPtr reduce(const Tensor& tensor, int dst, ReduceOp op = ReduceOp::SUM, GroupRef group = nullptr,
               bool async_op = false);
WorkPtr all_gather(const std::vector<Tensor>& tensor_list, const Tensor& tensor,
                   GroupRef group = nullptr, bool async_op = false);
WorkPtr all_gather_into_tensor(const Tensor& output_tensor, const Tensor& input_tensor,
                               GroupRef group = nullptr, bool async_op = false);
// gather_list: one tensor per rank on dst, empty elsewhere.
WorkPtr gather(const Tensor& tensor, const std::vector<Tensor>& gather_list = {}, int dst = 0,
               GroupRef group = nullptr, bool async_op = false);
// scatter_list: one tensor per rank on src, empty elsewhere.
WorkPtr scatter(const Tensor& tensor, const std::vector<Tensor>& scatter_list = {}, int src = 0,
                GroupRef group = nullptr, bool async_op = false);
WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& input_list,
                       ReduceOp op = ReduceOp::SUM, GroupRef group = nullptr,
                       bool async_op = false);
WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                              ReduceOp op = ReduceOp::SUM, GroupRef group = nullptr,
                              bool async_op = false);
WorkPtr all_to_all_single(const Tensor& output, const Tensor& input,
                          const std::vector<int64_t>& output_split_sizes = {},
                          const std::vector<int64_t>& input_split_sizes = {},
                          GroupRef group = nullptr, bool async_op = false);
WorkPtr barrier(GroupRef group = nullptr, bool async_op = false);
// Point to point. recv needs its source (no wildcard yet).
void send(const Tensor& tensor, int dst, GroupRef group = nullptr, int64_t tag = 0);
void recv(const Tensor& tensor, int src, GroupRef group = nullptr, int64_t tag = 0);
WorkPtr isend(const Tensor& tensor, int dst, GroupRef group = nullptr, int64_t tag = 0);
WorkPtr irecv(const Tensor& tensor, int src, GroupRef group = nullptr, int64_t tag = 0);

// torch.distributed.P2POp and batch_isend_irecv: the sends and receives of one batch are
// issued in list order, nonblocking, and their Works returned in the same order. Every op
// must use the same group (null: the default group); every op's peer is checked before any
// op is issued, so a bad list issues nothing.
struct P2POp {
  enum class Kind { kIsend, kIrecv };
  P2POp(Kind op_, Tensor tensor_, int peer_, ProcessGroupPtr group_ = nullptr, int64_t tag_ = 0)
      : op(op_), tensor(std::move(tensor_)), peer(peer_), group(std::move(group_)), tag(tag_) {}
  Kind op;
  Tensor tensor;
  int peer;  // global rank
  ProcessGroupPtr group;
  int64_t tag;
};
std::vector<WorkPtr> batch_isend_irecv(const std::vector<P2POp>& p2p_op_list);

// all_reduce of several tensors of one dtype as one collective (c10d's allreduce_coalesced):
// they are packed into one flat buffer, reduced together, and copied back; the Work
// completes (or fails with the collective's error) after the copy back.
WorkPtr all_reduce_coalesced(const std::vector<Tensor>& tensors, ReduceOp op = ReduceOp::SUM,
                             GroupRef group = nullptr, bool async_op = false);

// all_gather_into_tensor of several (output, input) pairs of one dtype as one collective
// (c10d's allgather_into_tensor_coalesced): outputs[i] has world_size * inputs[i].numel()
// elements and receives rank r's inputs[i] at [r * n_i, (r + 1) * n_i) of its flat order.
WorkPtr all_gather_into_tensor_coalesced(const std::vector<Tensor>& outputs,
                                         const std::vector<Tensor>& inputs,
                                         GroupRef group = nullptr, bool async_op = false);

// reduce_scatter_tensor of several pairs as one collective (c10d's
// reduce_scatter_tensor_coalesced): inputs[i] has world_size * outputs[i].numel() elements;
// rank r's outputs[i] is the reduction over ranks of chunk r of inputs[i].
WorkPtr reduce_scatter_tensor_coalesced(const std::vector<Tensor>& outputs,
                                        const std::vector<Tensor>& inputs,
                                        ReduceOp op = ReduceOp::SUM, GroupRef group = nullptr,
                                        bool async_op = false);

// An RMA window over `group` (window.h): every member calls it, in the same order. The shm
// and mpi backends have windows; others throw DistBackendError.
WindowPtr new_window(GroupRef group = nullptr);

}  // namespace tessera::distributed
