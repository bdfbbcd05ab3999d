// The mpi backend's RMA window: two MPI windows per registration, both in passive-target mode
// for their whole life (MPI_Win_lock_all at registration, MPI_Win_unlock_all at
// deregistration), so no rank ever has to call MPI for a peer to reach its memory.
//
//   data window     MPI_Win_create over the registered tensor (any contiguous tensor;
//                   displacement unit 1: offsets are bytes)
//   signal window   one uint64 counter per source rank (MPI_Win_allocate)
//
// put   = MPI_Put + MPI_Win_flush(dst) (the bytes are at the target), then the signal.
// get   = MPI_Get + MPI_Win_flush(src).
// accumulate = MPI_Accumulate(MPI_SUM) + flush: MPI makes concurrent accumulates with the
//         same op element-wise atomic. float16, bfloat16 and float8, which MPI cannot add:
//         MPI_Get of the target's values, the sums in float32 rounded once, then
//         MPI_Compare_and_swap of each element's bits; the elements another rank changed
//         meanwhile are summed again from the value the swap returned. A window has one
//         dtype, so all its accumulates take the same path and stay atomic per element.
// signal = MPI_Accumulate(+1) on counter[me] of the peer + flush.
// wait  = MPI_Fetch_and_op(MPI_NO_OP) on this rank's own counter[peer] + flush, polled with
//         backoff until it exceeds what was consumed or the deadline passes.
//
// Every call holds lock_mpi_calls() (the backend's rule: serialised below
// MPI_THREAD_MULTIPLE). MPI_Win_create, MPI_Win_allocate and MPI_Win_free are blocking
// collectives over the communicator: they run after the registration's all-gather (or the
// deregistration's fence) has brought every rank there, so they do not wait on a straggler.
#include "distributed/backends/mpi/mpi_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>
#include <vector>

#include "tessera/ops/factory.h"

namespace tessera::distributed::mpi_impl {

namespace {

// MPI counts are ints: large transfers go in pieces of at most this many bytes.
constexpr int64_t kMaxPieceBytes = int64_t{1} << 30;

class MpiWindow : public Window {
 public:
  MpiWindow(std::shared_ptr<Backend> backend, std::function<MPI_Comm()> comm, Milliseconds timeout,
            std::string where)
      : Window(std::move(backend), timeout), comm_(std::move(comm)), where_(std::move(where)) {}
  // MPI_Win_free is collective: a window dropped while registered is left to MPI_Finalize.
  ~MpiWindow() override = default;

 protected:
  Handle prepare(const Tensor& tensor) override {
    base_ = tensor.data_ptr();
    bytes_ = tensor.nbytes();
    esize_ = tensor.element_size();
    return {};
  }

  void attach(const std::vector<Handle>&) override {
    const MPI_Comm comm = comm_();
    auto lock = lock_mpi_calls();
    const int rc =
        MPI_Win_create(base_, static_cast<MPI_Aint>(bytes_), 1, MPI_INFO_NULL, comm, &data_);
    // OpenMPI 4.1 has no one-sided component for this case (pt2pt refuses
    // MPI_THREAD_MULTIPLE, rdma needs a peer reached by a put-capable btl).
    TS_CHECK(rc == MPI_SUCCESS || size() > 1, distributed::DistBackendError,
             "tensor_register(): {}: MPI_Win_create failed on a one-process group (OpenMPI "
             "offers no one-sided component for a single process under MPI_THREAD_MULTIPLE; "
             "use the shm backend for one rank)",
             where_);
    check(rc, "MPI_Win_create");
    check(MPI_Win_allocate(static_cast<MPI_Aint>(sizeof(uint64_t)) * size(), sizeof(uint64_t),
                           MPI_INFO_NULL, comm, &counters_, &signals_),
          "MPI_Win_allocate");
    std::fill(counters_, counters_ + size(), uint64_t{0});
    check(MPI_Win_lock_all(MPI_MODE_NOCHECK, data_), "MPI_Win_lock_all");
    check(MPI_Win_lock_all(MPI_MODE_NOCHECK, signals_), "MPI_Win_lock_all");
    // Every rank's counters are zero before anyone can signal it.
    check(MPI_Barrier(comm), "MPI_Barrier");
  }

  void detach() override {
    if (data_ == MPI_WIN_NULL) return;  // a registration that failed before attach
    auto lock = lock_mpi_calls();
    MPI_Win_unlock_all(data_);
    MPI_Win_unlock_all(signals_);
    MPI_Win_free(&data_);
    MPI_Win_free(&signals_);
    data_ = signals_ = MPI_WIN_NULL;
  }

  void do_put(const void* src, int dst, int64_t dst_offset, int64_t count) override {
    transfer(const_cast<void*>(src), dst, dst_offset, count, true);
  }

  void do_get(void* dst, int src_rank, int64_t src_offset, int64_t count) override {
    transfer(dst, src_rank, src_offset, count, false);
  }

  void do_accumulate(const Tensor& src, int dst, int64_t dst_offset) override {
    const MPI_Datatype type = sum_datatype(src.dtype());
    if (type == MPI_DATATYPE_NULL) return accumulate_by_swaps(src, dst, dst_offset);
    const int64_t per_piece = kMaxPieceBytes / esize_;
    auto lock = lock_mpi_calls();
    for (int64_t done = 0; done < src.numel(); done += per_piece) {
      const int n = static_cast<int>(std::min(per_piece, src.numel() - done));
      check(MPI_Accumulate(static_cast<uint8_t*>(src.data_ptr()) + done * esize_, n, type, dst,
                           static_cast<MPI_Aint>((dst_offset + done) * esize_), n, type, MPI_SUM,
                           data_),
            "MPI_Accumulate");
    }
    check(MPI_Win_flush(dst, data_), "MPI_Win_flush");
  }

  void do_signal(int peer) override {
    const uint64_t one = 1;
    auto lock = lock_mpi_calls();
    check(MPI_Accumulate(&one, 1, MPI_UINT64_T, peer, rank(), 1, MPI_UINT64_T, MPI_SUM, signals_),
          "MPI_Accumulate");
    check(MPI_Win_flush(peer, signals_), "MPI_Win_flush");
  }

  void do_wait_signal(int peer, uint64_t consumed, Clock::time_point deadline,
                      Milliseconds timeout) override {
    for (int polls = 0;; ++polls) {
      uint64_t seen = 0;
      {
        auto lock = lock_mpi_calls();
        check(MPI_Fetch_and_op(nullptr, &seen, MPI_UINT64_T, rank(), peer, MPI_NO_OP, signals_),
              "MPI_Fetch_and_op");
        check(MPI_Win_flush(rank(), signals_), "MPI_Win_flush");
      }
      if (seen > consumed) return;
      TS_CHECK(Clock::now() < deadline, distributed::DistTimeoutError,
               "wait_signal(): {}: no signal from rank {} within {} ms ({} received, {} consumed)",
               where_, peer, timeout.count(), seen, consumed);
      if (polls < 200) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 5 : 100));
      }
    }
  }

  void do_flush() override {
    auto lock = lock_mpi_calls();
    check(MPI_Win_flush_all(data_), "MPI_Win_flush_all");
    check(MPI_Win_flush_all(signals_), "MPI_Win_flush_all");
  }

 private:
  void check(int rc, const char* call) const { check_mpi_call(rc, where_ + " window", call); }

  // The accumulate of a dtype MPI cannot add (file comment). Each swap moves one element's
  // bits (MPI_UINT16_T or MPI_UINT8_T, which MPI_Compare_and_swap takes).
  void accumulate_by_swaps(const Tensor& src, int dst, int64_t dst_offset) {
    const int64_t n = src.numel();
    const ScalarType dtype = src.dtype();
    TS_INTERNAL_ASSERT(esize_ == 1 || esize_ == 2);
    const MPI_Datatype bits = esize_ == 2 ? MPI_UINT16_T : MPI_UINT8_T;
    const Tensor addend = src.reshape({n}).to(kFloat32).contiguous();
    Tensor expected = empty({n}, TensorOptions(dtype));  // what each swap expects to find
    Tensor seen = empty({n}, TensorOptions(dtype));      // what it found
    do_get(expected.data_ptr(), dst, dst_offset, n);
    auto* exp = static_cast<uint8_t*>(expected.data_ptr());
    auto* got = static_cast<uint8_t*>(seen.data_ptr());
    std::vector<int64_t> todo(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) todo[static_cast<size_t>(i)] = i;
    while (!todo.empty()) {
      const Tensor desired = expected.to(kFloat32).add(addend).to(dtype);
      const auto* want = static_cast<const uint8_t*>(desired.data_ptr());
      {
        auto lock = lock_mpi_calls();
        for (const int64_t i : todo)
          check(MPI_Compare_and_swap(want + i * esize_, exp + i * esize_, got + i * esize_, bits,
                                     dst, static_cast<MPI_Aint>((dst_offset + i) * esize_), data_),
                "MPI_Compare_and_swap");
        check(MPI_Win_flush(dst, data_), "MPI_Win_flush");
      }
      // A swap that found other bits did not happen: sum again from what it found.
      std::vector<int64_t> again;
      for (const int64_t i : todo)
        if (std::memcmp(got + i * esize_, exp + i * esize_, static_cast<size_t>(esize_)) != 0) {
          std::memcpy(exp + i * esize_, got + i * esize_, static_cast<size_t>(esize_));
          again.push_back(i);
        }
      todo.swap(again);
    }
  }

  // MPI_Put (put) or MPI_Get of count elements at `offset` of `peer`, then a flush.
  void transfer(void* local, int peer, int64_t offset, int64_t count, bool put) {
    const int64_t bytes = count * esize_;
    auto* p = static_cast<uint8_t*>(local);
    auto lock = lock_mpi_calls();
    for (int64_t done = 0; done < bytes; done += kMaxPieceBytes) {
      const int n = static_cast<int>(std::min(kMaxPieceBytes, bytes - done));
      const auto disp = static_cast<MPI_Aint>(offset * esize_ + done);
      if (put) {
        check(MPI_Put(p + done, n, MPI_BYTE, peer, disp, n, MPI_BYTE, data_), "MPI_Put");
      } else {
        check(MPI_Get(p + done, n, MPI_BYTE, peer, disp, n, MPI_BYTE, data_), "MPI_Get");
      }
    }
    check(MPI_Win_flush(peer, data_), "MPI_Win_flush");
  }

  const std::function<MPI_Comm()> comm_;  // the backend's communicator now
  const std::string where_;
  void* base_ = nullptr;
  int64_t bytes_ = 0, esize_ = 1;
  MPI_Win data_ = MPI_WIN_NULL, signals_ = MPI_WIN_NULL;
  uint64_t* counters_ = nullptr;  // this rank's signal counters (MPI_Win_allocate's memory)
};

}  // namespace

std::shared_ptr<Window> make_mpi_window(std::shared_ptr<Backend> backend,
                                        std::function<MPI_Comm()> comm, Milliseconds timeout,
                                        std::string where) {
  return std::make_shared<MpiWindow>(std::move(backend), comm, timeout, std::move(where));
}

}  // namespace tessera::distributed::mpi_impl
