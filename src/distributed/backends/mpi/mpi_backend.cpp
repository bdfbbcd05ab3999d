// The mpi backend: OpBackend's validated Ops as nonblocking MPI calls. One worker thread per
// communicator posts the collectives in issue order, one at a time, and polls them with
// MPI_Test until they complete or reach their deadline; a send or recv is posted at once
// (MPI_Isend/MPI_Irecv in the caller's thread) and completed by the same poll loop, so a pending
// recv never holds up a collective.
//
// Failure: an op past its deadline gets TIMED_OUT, an MPI error gets ERROR; then the backend
// aborts: every queued, running and later op fails with the first error. MPI cannot cancel a
// collective, so the requests of an aborted communicator are never completed: they and the
// buffers they may still write are kept until the process exits (see "orphans" below).
#include "distributed/backends/mpi/mpi_backend.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "distributed/backends/mpi/mpi_window.h"
#include "distributed/backends/op_backend.h"
#include "tessera/ops/factory.h"

namespace tessera::distributed {

namespace mpi_impl {

namespace {

class MpiBackend;

// Process-wide MPI state. Never destroyed: the at-exit handler and late destructors use it.
struct MpiState {
  std::mutex mutex;  // guards the fields below
  bool we_initialised = false;
  bool level_known = false;
  int level = MPI_THREAD_SINGLE;
  int tag_ub = 32767;  // MPI's guaranteed minimum until MPI_TAG_UB is read
  std::vector<MpiBackend*> live;
  // With less than MPI_THREAD_MULTIPLE every MPI call of Tessera holds call_mutex.
  std::atomic<bool> serialize_calls{false};
  std::mutex call_mutex;
  // What an aborted communicator leaves behind: requests MPI cannot cancel and the buffers
  // (tensors, staging) they may still write. Kept until the process exits.
  std::mutex orphan_mutex;
  std::vector<std::shared_ptr<void>> orphans;
};

MpiState& state() {
  static auto* s = new MpiState();
  return *s;
}

std::unique_lock<std::mutex> call_lock() {
  MpiState& s = state();
  if (s.serialize_calls) return std::unique_lock<std::mutex>(s.call_mutex);
  return {};
}

void orphan(std::shared_ptr<void> p) {
  MpiState& s = state();
  std::lock_guard lock(s.orphan_mutex);
  s.orphans.push_back(std::move(p));
}

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(text, static_cast<size_t>(len));
}

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

bool is_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

void finalize_at_exit();

// Called with state().mutex held.
void ensure_initialised_locked() {
  MpiState& s = state();
  TS_CHECK(!is_finalized(), distributed::DistBackendError,
           "mpi backend: MPI was already finalised (MPI_Finalize) in this process");
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = MPI_THREAD_SINGLE;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    TS_CHECK(rc == MPI_SUCCESS, distributed::DistBackendError,
             "mpi backend: MPI_Init_thread failed: {}", mpi_error_string(rc));
    s.we_initialised = true;
    s.level = provided;
    s.level_known = true;
    // Errors on the world communicator (creating sub-communicators) come back as codes.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit(finalize_at_exit);
  } else if (!s.level_known) {
    MPI_Query_thread(&s.level);
    s.level_known = true;
  }
  TS_CHECK(s.level >= MPI_THREAD_SERIALIZED, distributed::DistBackendError,
           "mpi backend: MPI runs at thread level {}, but the backend calls MPI from its worker "
           "thread and needs at least MPI_THREAD_SERIALIZED (initialise MPI with "
           "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), or let Tessera initialise it)",
           level_name(s.level));
  s.serialize_calls = s.level < MPI_THREAD_MULTIPLE;
  int flag = 0;
  int* ub = nullptr;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag && ub)
    s.tag_ub = *ub;
}

// Checks an MPI return code; `where` names the op.
void check_mpi(int rc, const std::string& where, const char* call) {
  if (rc != MPI_SUCCESS)
    TS_THROW(distributed::DistBackendError, "{}: {} failed: {}", where, call, mpi_error_string(rc));
}

// MPI's counts are ints: every count and displacement of an op must fit one.
int as_count(int64_t n, std::string_view op, std::string_view what) {
  TS_CHECK(n >= 0 && n <= INT_MAX, ValueError,
           "{}(): the mpi backend takes at most {} {} per rank in one op (MPI's int counts), "
           "but got {}",
           op, INT_MAX, what, n);
  return static_cast<int>(n);
}

struct ReduceSpec {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  bool widen = false;  // float16, bfloat16, float8: reduced as float32, rounded once
};

// The MPI type and op that reduce `dtype` with `op` (AVG reduces as SUM and divides after).
ReduceSpec reduce_spec(ScalarType dtype, ReduceOp op) {
  const ReduceOp r = op == ReduceOp::AVG ? ReduceOp::SUM : op;
  ReduceSpec s;
  switch (r) {
    case ReduceOp::SUM:
      s.op = MPI_SUM;
      break;
    case ReduceOp::PRODUCT:
      s.op = MPI_PROD;
      break;
    case ReduceOp::MIN:
      s.op = MPI_MIN;
      break;
    case ReduceOp::MAX:
      s.op = MPI_MAX;
      break;
    case ReduceOp::BAND:
      s.op = MPI_BAND;
      break;
    case ReduceOp::BOR:
      s.op = MPI_BOR;
      break;
    case ReduceOp::BXOR:
      s.op = MPI_BXOR;
      break;
    case ReduceOp::AVG:
      break;
  }
  // Signed SUM and PRODUCT run on the unsigned type of the same width: the same bits, and
  // wrap-around is defined there.
  const bool wrap = r == ReduceOp::SUM || r == ReduceOp::PRODUCT;
  switch (dtype) {
    case ScalarType::Bool:  // bytes 0 or 1: SUM and MAX are OR, PRODUCT and MIN are AND
      s.type = MPI_UINT8_T;
      if (r == ReduceOp::SUM || r == ReduceOp::MAX) s.op = MPI_BOR;
      if (r == ReduceOp::PRODUCT || r == ReduceOp::MIN) s.op = MPI_BAND;
      return s;
    case ScalarType::UInt8:
      s.type = MPI_UINT8_T;
      return s;
    case ScalarType::Int8:
      s.type = wrap ? MPI_UINT8_T : MPI_INT8_T;
      return s;
    case ScalarType::Int16:
      s.type = wrap ? MPI_UINT16_T : MPI_INT16_T;
      return s;
    case ScalarType::Int32:
      s.type = wrap ? MPI_UINT32_T : MPI_INT32_T;
      return s;
    case ScalarType::Int64:
      s.type = wrap ? MPI_UINT64_T : MPI_INT64_T;
      return s;
    case ScalarType::Float32:
      s.type = MPI_FLOAT;
      return s;
    case ScalarType::Float64:
      s.type = MPI_DOUBLE;
      return s;
    case ScalarType::Complex64:
      s.type = MPI_C_FLOAT_COMPLEX;
      return s;
    case ScalarType::Complex128:
      s.type = MPI_C_DOUBLE_COMPLEX;
      return s;
    case ScalarType::Float16:
    case ScalarType::BFloat16:
    case ScalarType::Float8_e4m3fn:
    case ScalarType::Float8_e5m2:
      s.type = MPI_FLOAT;
      s.widen = true;
      return s;
    default:
      break;
  }
  TS_THROW(TypeError, "mpi backend: dtype {} cannot be reduced", dtype);
}

void* mut(const void* p) {
  return const_cast<void*>(p);  // MPI's send buffers are const; from_blob's are not
}

class MpiBackend : public OpBackend {
 public:
  MpiBackend(int rank, int size, Milliseconds timeout, const std::vector<int>& global_ranks,
             std::string group_name, bool world)
      : OpBackend(rank, size),
        timeout_(timeout),
        group_name_(std::move(group_name)),
        global_ranks_(global_ranks) {
    TS_CHECK(timeout.count() > 0, ValueError,
             "mpi backend: argument 'timeout' must be positive, but got {}", timeout);
    TS_CHECK(static_cast<int>(global_ranks.size()) == size && rank >= 0 && rank < size, ValueError,
             "mpi backend: rank {} of size {} does not fit the {} ranks of group '{}'", rank, size,
             global_ranks.size(), group_name_);
    const auto [world_rank, world_size] = mpi_world_rank_size();
    TS_CHECK(!world || (rank == world_rank && size == world_size), distributed::DistBackendError,
             "init_process_group(): the mpi backend was given rank {} and world_size {}, but "
             "MPI_COMM_WORLD has this process at rank {} of {} (pass -1 for both to take MPI's)",
             rank, size, world_rank, world_size);
    TS_CHECK(
        global_ranks[static_cast<size_t>(rank)] == world_rank && global_ranks.back() < world_size,
        distributed::DistBackendError,
        "mpi backend: group '{}' puts this process at global rank {} (ranks up to {}), but "
        "it is rank {} of MPI_COMM_WORLD's {}",
        group_name_, global_ranks[static_cast<size_t>(rank)], global_ranks.back(), world_rank,
        world_size);
    where_ = fmt::format("mpi group '{}' (rank {})", group_name_, rank_);
    spans_world_ = size == world_size;
    comm_ = new_communicator();
    {
      std::lock_guard lock(state().mutex);
      tag_ub_ = state().tag_ub;
      state().live.push_back(this);
    }
    worker_ = std::thread([this] { worker_loop(); });
  }

  ~MpiBackend() override {
    try {
      shutdown();
    } catch (...) {  // a destructor must not throw; shutdown's errors are on the Works
    }
    std::lock_guard lock(state().mutex);
    auto& live = state().live;
    live.erase(std::remove(live.begin(), live.end(), this), live.end());
  }

  std::string name() const override { return "mpi"; }

  // RMA windows as MPI windows on this communicator (mpi_window.cpp).
  bool supports_window() const override { return true; }
  std::shared_ptr<Window> new_window() override {
    {
      std::lock_guard lock(mutex_);
      TS_CHECK(!error_ && !closed_, distributed::DistBackendError, "new_window(): {} was {}",
               where_, error_ ? "aborted" : "shut down");
      TS_CHECK(!suspended_, distributed::DistBackendError,
               "new_window(): {} is suspended; call resume() first", where_);
    }
    // The window holds this backend (shared_from_this), so `this` outlives the getter.
    return make_mpi_window(
        shared_from_this(),
        [this] {
          std::lock_guard lock(mutex_);
          return comm_;
        },
        timeout_, where_);
  }

  void abort(const std::string& reason) override {
    fail_and_abort(nullptr, WorkStatus::ERROR,
                   std::make_exception_ptr(
                       DistBackendError(fmt::format("{} was aborted: {}", where_, reason))));
  }

  void shutdown() override {
    std::lock_guard once(shutdown_mutex_);
    {
      std::lock_guard lock(mutex_);
      if (closed_) return;
      stopping_ = true;  // queued collectives still run, each bounded by its deadline
      cv_.notify_all();
    }
    if (worker_.joinable()) worker_.join();
    std::lock_guard lock(mutex_);
    closed_ = true;
    // An aborted communicator may still have requests in flight: it is never freed.
    if (!error_ && comm_ != MPI_COMM_NULL && !is_finalized()) {
      auto call = call_lock();
      MPI_Comm_free(&comm_);
    }
  }

  std::exception_ptr error() const override {
    std::lock_guard lock(mutex_);
    return error_;
  }

  // Suspend frees the communicator (MPI_Comm_free: MPI releases what it keeps for it, such as
  // a shared-memory collective module's segment); resume makes a new one as the constructor
  // did. The memory is MPI's and not visible here, so memory_stats() reports no bytes. Windows
  // made before work again after the resume (MPI holds their communicators; their fence
  // barriers through this group, so it is refused meanwhile).
  void suspend() override {
    check_no_pending_p2p(group_name_);
    {
      std::lock_guard lock(mutex_);
      TS_CHECK(!suspended_, distributed::DistBackendError, "suspend(): {} is suspended already",
               where_);
    }
    barrier(BarrierOptions{})->wait();  // every rank's earlier ops are done
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    TS_CHECK(!closed_ && !stopping_, distributed::DistBackendError, "suspend(): {} was shut down",
             where_);
    suspended_ = true;  // from now on ops are refused; the worker is idle (the barrier ended)
    {
      auto call = call_lock();
      MPI_Comm_free(&comm_);
    }
    ++suspend_count_;
  }

  void resume() override {
    {
      std::lock_guard lock(mutex_);
      TS_CHECK(suspended_, distributed::DistBackendError, "resume(): {} is not suspended", where_);
      TS_CHECK(!stopping_ && !closed_, distributed::DistBackendError, "resume(): {} was shut down",
               where_);
    }
    // A world dup is bounded by the timeout; a subgroup's MPI_Comm_create_group blocks until
    // every member resumes, as it did when the group was made.
    MPI_Comm comm = new_communicator();
    std::lock_guard lock(mutex_);
    comm_ = comm;
    suspended_ = false;
  }

  MemoryStats memory_stats() const override {
    std::lock_guard lock(mutex_);
    MemoryStats s;
    s.suspended = suspended_;
    s.suspend_count = suspend_count_;
    return s;
  }

  // At process exit, before MPI_Finalize: fails what is still pending and releases the
  // communicator.
  void close_at_exit() {
    bool busy = false;
    {
      std::lock_guard lock(mutex_);
      busy = !closed_ && (current_ || !queue_.empty() || !p2p_.empty());
    }
    if (busy) abort("the process is exiting (MPI is being finalised)");
    shutdown();
  }

 protected:
  WorkPtr enqueue(Op&& op, std::vector<Tensor>&& keep,
                  std::optional<Milliseconds> timeout) override {
    const std::string_view name = op_kind_name(op.kind);
    const bool p2p = op.kind == OpKind::SEND || op.kind == OpKind::RECV;
    if (p2p)
      TS_CHECK(op.tag >= 0 && op.tag <= tag_ub_, ValueError,
               "{}(): the mpi backend takes tags in [0, {}] (MPI_TAG_UB), but got {}", name,
               tag_ub_, op.tag);
    as_count(op.count * element_size(op.dtype), name, "bytes");
    if (op.kind == OpKind::ALLTOALL) {
      int64_t in_total = 0, out_total = 0;
      for (int64_t b : op.in_split_bytes) in_total += b;
      for (int64_t b : op.out_split_bytes) out_total += b;
      as_count(std::max(in_total, out_total), name, "bytes");
    }
    std::lock_guard lock(mutex_);
    auto work = new_work(op, std::move(keep), timeout, timeout_, group_name_, next_seq_, stopping_,
                         error_, suspended_);
    if (error_) return work;
    if (p2p) {
      post_p2p(std::move(op), work);
    } else {
      queue_.push_back({std::move(op), work});
    }
    cv_.notify_all();
    return work;
  }

 private:
  struct Entry {
    Op op;
    WorkPtr work;
  };
  // A posted op: its request and what it needs until the request completes.
  struct Pending {
    Entry entry;
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<uint8_t> staging;                  // a list argument or result, contiguous
    Tensor wide, wide_out;                         // float32 copies of narrow-float reductions
    std::vector<int> counts[2], displacements[2];  // all_to_all's (send, recv)
    std::function<void()> finish;                  // after completion: copy out, divide, round
  };
  using PendingPtr = std::shared_ptr<Pending>;

  std::string where(const Op& op) const {
    return fmt::format("mpi {} (op #{} of group '{}', rank {})", op_kind_name(op.kind), op.seq,
                       group_name_, rank_);
  }

  // Waits for `request` until `deadline`, polling (construction only).
  void wait_request(MPI_Request& request, Clock::time_point deadline, const char* what,
                    Milliseconds timeout) {
    for (int polls = 0;; ++polls) {
      int done = 0;
      {
        auto lock = call_lock();
        check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), where_, what);
      }
      if (done) return;
      if (Clock::now() >= deadline)
        TS_THROW(distributed::DistTimeoutError,
                 "{}: {} timed out after {} (not every rank created the group)", where_, what,
                 timeout);
      backoff(polls);
    }
  }

  // The group's communicator: a dup of MPI_COMM_WORLD when the group spans it, else one made
  // from the group's ranks; errors on it come back as codes.
  MPI_Comm new_communicator() {
    MPI_Comm comm = spans_world_ ? dup_world(timeout_) : create_group(global_ranks_);
    auto lock = call_lock();
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    return comm;
  }

  MPI_Comm dup_world(Milliseconds timeout) {
    // MPI_Comm_idup writes the handle when it completes: on a timeout that is after this
    // constructor threw, so the handle lives on the heap and is orphaned.
    auto handle =
        std::make_shared<std::pair<MPI_Comm, MPI_Request>>(MPI_COMM_NULL, MPI_REQUEST_NULL);
    {
      auto lock = call_lock();
      check_mpi(MPI_Comm_idup(MPI_COMM_WORLD, &handle->first, &handle->second), where_,
                "MPI_Comm_idup");
    }
    try {
      wait_request(handle->second, Clock::now() + timeout, "MPI_Comm_idup", timeout);
    } catch (...) {
      orphan(handle);
      throw;
    }
    return handle->first;
  }

  // MPI_Comm_create_group is collective over the members only (non-members do not call the
  // factory). It blocks: MPI has no nonblocking form, so a member that never calls new_group
  // holds the others here (docs/distributed.md).
  MPI_Comm create_group(const std::vector<int>& global_ranks) {
    auto lock = call_lock();
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group), where_, "MPI_Comm_group");
    int rc = MPI_Group_incl(world_group, static_cast<int>(global_ranks.size()), global_ranks.data(),
                            &group);
    MPI_Group_free(&world_group);
    check_mpi(rc, where_, "MPI_Group_incl");
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, 0, &comm);
    MPI_Group_free(&group);
    check_mpi(rc, where_, "MPI_Comm_create_group");
    return comm;
  }

  static void backoff(int polls) {
    if (polls < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 20 : 200));
    }
  }

  // Called with mutex_ held: posts a send or recv at once.
  void post_p2p(Op op, const WorkPtr& work) {
    auto p = std::make_shared<Pending>();
    p->entry = {std::move(op), work};
    const Op& o = p->entry.op;
    const int bytes = static_cast<int>(o.count * element_size(o.dtype));
    work->mark_started();
    try {
      auto lock = call_lock();
      if (o.kind == OpKind::SEND) {
        check_mpi(
            MPI_Isend(o.in, bytes, MPI_BYTE, o.peer, static_cast<int>(o.tag), comm_, &p->request),
            where(o), "MPI_Isend");
      } else {
        check_mpi(
            MPI_Irecv(o.out, bytes, MPI_BYTE, o.peer, static_cast<int>(o.tag), comm_, &p->request),
            where(o), "MPI_Irecv");
      }
    } catch (const std::exception&) {
      work->mark_failed(WorkStatus::ERROR, std::current_exception());
      return;
    }
    p2p_.push_back(std::move(p));
  }

  // Posts a collective (throws on an MPI error).
  void post(Pending& p) {
    const Op& op = p.entry.op;
    const std::string at = where(op);
    const int64_t esize = element_size(op.dtype);
    const int bytes = static_cast<int>(op.count * esize);
    const int count = static_cast<int>(op.count);
    const int n = size_;
    auto lock = call_lock();
    switch (op.kind) {
      case OpKind::ALLREDUCE:
      case OpKind::REDUCE: {
        const ReduceSpec s = reduce_spec(op.dtype, op.reduce_op);
        void* data = op.out;
        if (s.widen) {
          p.wide = from_blob(op.out, {op.count}, op.dtype).to(kFloat32);
          data = p.wide.data_ptr();
        }
        const bool root = op.kind == OpKind::ALLREDUCE || rank_ == op.root;
        if (op.kind == OpKind::ALLREDUCE) {
          check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, count, s.type, s.op, comm_, &p.request), at,
                    "MPI_Iallreduce");
        } else if (root) {
          check_mpi(
              MPI_Ireduce(MPI_IN_PLACE, data, count, s.type, s.op, op.root, comm_, &p.request), at,
              "MPI_Ireduce");
        } else {  // a non-root's tensor is only read
          check_mpi(MPI_Ireduce(data, nullptr, count, s.type, s.op, op.root, comm_, &p.request), at,
                    "MPI_Ireduce");
        }
        if (root) p.finish = [this, &p, s] { finish_reduction(p, p.entry.op.out, p.wide, s); };
        return;
      }
      case OpKind::REDUCE_SCATTER: {
        // Every rank's blocks side by side, in the type the reduction runs in.
        const ReduceSpec s = reduce_spec(op.dtype, op.reduce_op);
        const ScalarType wtype = s.widen ? kFloat32 : op.dtype;
        p.wide = empty({op.count * n}, TensorOptions(wtype));
        for (int r = 0; r < n; ++r)
          p.wide.narrow(0, r * op.count, op.count)
              .copy_(from_blob(mut(op.ins[static_cast<size_t>(r)]), {op.count}, op.dtype));
        void* out = op.out;
        if (s.widen) {
          p.wide_out = empty({op.count}, TensorOptions(kFloat32));
          out = p.wide_out.data_ptr();
        }
        check_mpi(MPI_Ireduce_scatter_block(p.wide.data_ptr(), out, count, s.type, s.op, comm_,
                                            &p.request),
                  at, "MPI_Ireduce_scatter_block");
        p.finish = [this, &p, s] { finish_reduction(p, p.entry.op.out, p.wide_out, s); };
        return;
      }
      case OpKind::BROADCAST:
        check_mpi(MPI_Ibcast(op.out, bytes, MPI_BYTE, op.root, comm_, &p.request), at,
                  "MPI_Ibcast");
        return;
      case OpKind::ALLGATHER: {
        uint8_t* dst = op.outs[0];
        bool consecutive = true;
        for (int r = 1; r < n; ++r)
          consecutive &= op.outs[static_cast<size_t>(r)] == dst + r * bytes;
        if (!consecutive) {
          p.staging.resize(static_cast<size_t>(bytes) * static_cast<size_t>(n));
          dst = p.staging.data();
          p.finish = [&p, bytes] { scatter_staging(p.staging, p.entry.op.outs, bytes); };
        }
        check_mpi(MPI_Iallgather(op.in, bytes, MPI_BYTE, dst, bytes, MPI_BYTE, comm_, &p.request),
                  at, "MPI_Iallgather");
        return;
      }
      case OpKind::GATHER: {
        if (rank_ == op.root) {
          p.staging.resize(static_cast<size_t>(bytes) * static_cast<size_t>(n));
          p.finish = [&p, bytes] { scatter_staging(p.staging, p.entry.op.outs, bytes); };
        }
        check_mpi(MPI_Igather(op.in, bytes, MPI_BYTE, p.staging.data(), bytes, MPI_BYTE, op.root,
                              comm_, &p.request),
                  at, "MPI_Igather");
        return;
      }
      case OpKind::SCATTER: {
        if (rank_ == op.root) {
          p.staging.resize(static_cast<size_t>(bytes) * static_cast<size_t>(n));
          for (int r = 0; r < n; ++r)
            if (bytes > 0)
              std::memcpy(p.staging.data() + static_cast<size_t>(r) * bytes,
                          op.ins[static_cast<size_t>(r)], static_cast<size_t>(bytes));
        }
        check_mpi(MPI_Iscatter(p.staging.data(), bytes, MPI_BYTE, op.out, bytes, MPI_BYTE, op.root,
                               comm_, &p.request),
                  at, "MPI_Iscatter");
        return;
      }
      case OpKind::ALLTOALL: {
        const std::vector<int64_t>* splits[2] = {&op.in_split_bytes, &op.out_split_bytes};
        for (int side = 0; side < 2; ++side) {
          int64_t offset = 0;
          for (int64_t b : *splits[side]) {
            p.counts[side].push_back(static_cast<int>(b));
            p.displacements[side].push_back(static_cast<int>(offset));
            offset += b;
          }
        }
        check_mpi(MPI_Ialltoallv(op.in, p.counts[0].data(), p.displacements[0].data(), MPI_BYTE,
                                 op.out, p.counts[1].data(), p.displacements[1].data(), MPI_BYTE,
                                 comm_, &p.request),
                  at, "MPI_Ialltoallv");
        return;
      }
      case OpKind::BARRIER:
        check_mpi(MPI_Ibarrier(comm_, &p.request), at, "MPI_Ibarrier");
        return;
      case OpKind::SEND:
      case OpKind::RECV:
        break;
    }
    TS_THROW(RuntimeError, "{}: not a collective", at);
  }

  static void scatter_staging(const std::vector<uint8_t>& staging,
                              const std::vector<uint8_t*>& outs, int bytes) {
    if (bytes == 0) return;
    for (size_t r = 0; r < outs.size(); ++r)
      std::memcpy(outs[r], staging.data() + r * static_cast<size_t>(bytes),
                  static_cast<size_t>(bytes));
  }

  // The result of a reduction is in `wide` (narrow floats) or already at `out`: AVG divides,
  // narrow floats round once into `out`.
  void finish_reduction(const Pending& p, uint8_t* out, const Tensor& wide,
                        const ReduceSpec& s) const {
    const Op& op = p.entry.op;
    Tensor result = s.widen ? wide : from_blob(out, {op.count}, op.dtype);
    if (op.reduce_op == ReduceOp::AVG) result.div_(size_);
    if (s.widen) from_blob(out, {op.count}, op.dtype).copy_(result);
  }

  void worker_loop() {
    int idle_polls = 0;
    for (;;) {
      std::optional<Entry> next;
      {
        std::unique_lock lock(mutex_);
        if (!current_ && p2p_.empty()) {
          cv_.wait(lock, [&] { return !queue_.empty() || !p2p_.empty() || stopping_; });
          if (queue_.empty() && p2p_.empty()) return;  // stopping and drained
        }
        if (!current_ && !queue_.empty()) {
          next = std::move(queue_.front());
          queue_.pop_front();
        } else if (stopping_ && !current_ && queue_.empty()) {
          // Shut down with sends or recvs whose peer never matched them.
          fail_pending_p2p(std::make_exception_ptr(DistBackendError(fmt::format(
              "{}: shut down (destroy_process_group) with a send or recv unmatched", where_))));
          return;
        }
      }
      if (next) start(std::move(*next));
      if (poll()) {
        idle_polls = 0;
      } else {
        backoff(idle_polls++);
      }
    }
  }

  // Called with mutex_ held: fails the posted sends and recvs, keeping their requests.
  void fail_pending_p2p(const std::exception_ptr& e) {
    for (auto& p : p2p_) {
      p->entry.work->mark_failed(WorkStatus::ERROR, e);
      orphan(p);
    }
    p2p_.clear();
  }

  void start(Entry e) {
    if (!e.work->mark_started()) return;  // already failed (abort)
    if (Clock::now() >= e.op.deadline) {
      fail_and_abort(
          e.work, WorkStatus::TIMED_OUT,
          std::make_exception_ptr(DistTimeoutError(fmt::format(
              "{}: timed out after {} before it could start", where(e.op), e.op.timeout))));
      return;
    }
    auto p = std::make_shared<Pending>();
    p->entry = std::move(e);
    try {
      post(*p);
    } catch (const std::exception&) {
      fail_and_abort(p->entry.work, WorkStatus::ERROR, std::current_exception());
      return;
    }
    std::lock_guard lock(mutex_);
    if (error_) {  // aborted while it was being posted
      p->entry.work->mark_failed(WorkStatus::ERROR, error_);
      orphan(p);
      return;
    }
    current_ = std::move(p);
  }

  // Tests the running collective and the posted sends and recvs once; true when one finished.
  bool poll() {
    PendingPtr cur;
    std::vector<PendingPtr> p2p;
    {
      std::lock_guard lock(mutex_);
      cur = current_;
      p2p.assign(p2p_.begin(), p2p_.end());
    }
    bool progressed = false;
    if (cur) progressed |= test(cur, true);
    for (auto& p : p2p) progressed |= test(p, false);
    return progressed;
  }

  // Tests one request: publishes its outcome when it finished or passed its deadline.
  bool test(const PendingPtr& p, bool collective) {
    const Op& op = p->entry.op;
    int done = 0;
    MPI_Status status{};
    int rc = MPI_SUCCESS;
    {
      auto lock = call_lock();
      rc = MPI_Test(&p->request, &done, &status);
    }
    if (rc == MPI_SUCCESS && !done) {
      if (Clock::now() < op.deadline) return false;
      fail_and_abort(
          p->entry.work, WorkStatus::TIMED_OUT,
          std::make_exception_ptr(DistTimeoutError(fmt::format(
              "{}: timed out after {} (a peer never {}; MPI cannot cancel it, so this group "
              "is aborted)",
              where(op), op.timeout, collective ? "joined the collective" : "matched it"))));
      return true;
    }
    {
      std::lock_guard lock(mutex_);
      // Still ours? An abort may have failed and orphaned it meanwhile.
      if (collective) {
        if (current_ != p) return true;
        current_.reset();
      } else {
        auto it = std::find(p2p_.begin(), p2p_.end(), p);
        if (it == p2p_.end()) return true;
        p2p_.erase(it);
      }
    }
    std::exception_ptr error;
    if (rc != MPI_SUCCESS) orphan(p);  // whatever MPI still holds of it stays alive
    try {
      if (rc != MPI_SUCCESS) check_mpi(rc, where(op), "MPI_Test");
      if (op.kind == OpKind::RECV) {
        int got = 0;
        MPI_Get_count(&status, MPI_BYTE, &got);
        const int64_t want = op.count * element_size(op.dtype);
        TS_CHECK(got == want, distributed::DistBackendError,
                 "{}: the send from rank {} with tag {} had {} bytes, but the recv expects {}",
                 where(op), op.peer, op.tag, got, want);
      }
      if (p->finish) p->finish();
    } catch (const std::exception&) {
      error = std::current_exception();
    }
    if (error) {
      fail_and_abort(p->entry.work, WorkStatus::ERROR, error);
    } else {
      p->entry.work->mark_completed();
    }
    return true;
  }

  // Publishes `error` on `failed` (when given) first, then fails everything else with it.
  void fail_and_abort(const WorkPtr& failed, WorkStatus status, std::exception_ptr error) {
    if (failed) failed->mark_failed(status, error);
    std::deque<Entry> queued;
    bool first = false;
    {
      std::lock_guard lock(mutex_);
      first = !error_;
      if (first) error_ = error;
      queued.swap(queue_);
      if (current_) {
        current_->entry.work->mark_failed(WorkStatus::ERROR, error_);
        orphan(std::move(current_));
        current_.reset();
      }
      fail_pending_p2p(error_);
      cv_.notify_all();
    }
    for (auto& e : queued) e.work->mark_failed(WorkStatus::ERROR, error_);
    if (first) run_abort_hooks(exception_message(error));  // once, for the first failure
  }

  const Milliseconds timeout_;
  const std::string group_name_;
  const std::vector<int> global_ranks_;  // MPI_COMM_WORLD ranks of the members, in rank order
  bool spans_world_ = false;             // the group is all of MPI_COMM_WORLD
  std::string where_;
  int tag_ub_ = 32767;
  MPI_Comm comm_ = MPI_COMM_NULL;

  std::mutex shutdown_mutex_;  // one shutdown at a time
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;    // collectives not yet posted
  PendingPtr current_;         // the posted collective
  std::list<PendingPtr> p2p_;  // posted sends and recvs
  std::exception_ptr error_;   // set once, by the first failure or abort
  bool stopping_ = false;
  bool closed_ = false;
  bool suspended_ = false;
  uint64_t suspend_count_ = 0;
  uint64_t next_seq_ = 0;
  std::thread worker_;
};

void finalize_at_exit() {
  MpiState& s = state();
  std::lock_guard lock(s.mutex);
  for (MpiBackend* b : s.live) b->close_at_exit();
  if (s.we_initialised && !is_finalized()) MPI_Finalize();
}

}  // namespace

// For mpi_window.cpp (see mpi_window.h).
std::unique_lock<std::mutex> lock_mpi_calls() {
  return call_lock();
}
void check_mpi_call(int rc, const std::string& where, const char* call) {
  check_mpi(rc, where, call);
}
MPI_Datatype sum_datatype(ScalarType dtype) {
  const ReduceSpec s = reduce_spec(dtype, ReduceOp::SUM);
  return s.widen ? MPI_DATATYPE_NULL : s.type;
}

}  // namespace mpi_impl

std::pair<int, int> mpi_world_rank_size() {
  {
    std::lock_guard lock(mpi_impl::state().mutex);
    mpi_impl::ensure_initialised_locked();
  }
  int rank = 0, size = 0;
  auto lock = mpi_impl::call_lock();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return {rank, size};
}

BackendPtr make_mpi_backend(int rank, int size, Milliseconds timeout,
                            const std::vector<int>& global_ranks, const std::string& group_name,
                            bool world) {
  return std::make_shared<mpi_impl::MpiBackend>(rank, size, timeout, global_ranks, group_name,
                                                world);
}

}  // namespace tessera::distributed
