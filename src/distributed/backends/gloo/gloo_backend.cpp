// The gloo backend (see tessera/distributed/gloo.h): OpBackend's validated Ops run through the
// Gloo library. One worker thread runs the collectives in issue order, each with the time left
// until its Work's deadline as Gloo's timeout; a send or recv is posted on a Gloo unbound buffer
// in the caller's thread and completed by a waiter thread of its own.
//
// Failure: Gloo reports a timeout, a closed connection or a size disagreement by throwing; the
// op's Work gets that error first, then the backend aborts (a Gloo context that threw is
// unusable): every queued, running and later op fails with the first error.
#include "tessera/distributed/gloo.h"

#include <arpa/inet.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <net/if.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "distributed/backends/gloo/loop_ticker.h"
#include "distributed/backends/op_backend.h"
#include "distributed/backends/reduce.h"
#include "tessera/ops/factory.h"

namespace tessera::distributed {

namespace gloo_impl {

namespace {

// Tessera's store as Gloo's rendezvous store, under "gloo/<group>/".
class StoreAdapter : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(StorePtr store, std::string prefix, Milliseconds timeout)
      : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefix_ + key, Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    const Bytes b = store_->get(prefix_ + key);
    return std::vector<char>(b.begin(), b.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto& k : keys) full.push_back(prefix_ + k);
    store_->wait(full, std::min<Milliseconds>(t, timeout_));
  }

 private:
  StorePtr store_;
  std::string prefix_;
  Milliseconds timeout_;
};

bool is_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Gloo writes to its peers' sockets with plain write/writev calls: once a peer has died, the
// next write raises SIGPIPE, whose default action kills this process, the survivor that
// should report the error and reconfigure. Python ignores SIGPIPE at start-up, so PyTorch's
// Gloo runs with it ignored; Tessera does the same when a Gloo backend is made, unless the
// program installed its own handler (or ignores it already).
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) != 0) return;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) return;
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, nullptr);
  });
}

::gloo::transport::tcp::attr device_attr(const GlooOptions& options) {
  ::gloo::transport::tcp::attr attr;
  std::string host = options.hostname, iface = options.iface;
  if (host.empty() && iface.empty()) {
    host = env_or_empty("TESSERA_GLOO_HOSTNAME");
    if (host.empty()) iface = env_or_empty("TESSERA_GLOO_IFNAME");
  }
  if (host.empty() && iface.empty()) {
    const std::string master = env_or_empty("MASTER_ADDR");
    if (master.empty() || is_loopback(master)) {
      host = "127.0.0.1";
    } else {
      char name[256] = {};
      TS_CHECK(gethostname(name, sizeof(name) - 1) == 0, distributed::DistNetworkError,
               "gloo backend: gethostname() failed: {}", std::strerror(errno));
      host = name;
    }
  }
  // Checked here: Gloo's own failure for a missing interface leaks getifaddrs' list.
  TS_CHECK(iface.empty() || if_nametoindex(iface.c_str()) != 0, distributed::DistNetworkError,
           "gloo backend: there is no network interface named '{}' (GlooOptions::iface or "
           "TESSERA_GLOO_IFNAME)",
           iface);
  attr.hostname = host;
  attr.iface = iface;
  return attr;
}

// A buffer of Gloo's element type for `bytes`-sized elements (only the size matters to Gloo).
template <size_t N>
struct Elem {
  unsigned char b[N];
};

template <class F>
void with_elem(size_t size, F&& f) {
  switch (size) {
    case 1:
      return f.template operator()<Elem<1>>();
    case 2:
      return f.template operator()<Elem<2>>();
    case 4:
      return f.template operator()<Elem<4>>();
    case 8:
      return f.template operator()<Elem<8>>();
    case 16:
      return f.template operator()<Elem<16>>();
  }
  TS_THROW(TypeError, "gloo backend: no reduction for elements of {} bytes", size);
}

uint8_t* mut(const uint8_t* p) {
  return const_cast<uint8_t*>(p);  // Gloo's buffers take non-const pointers; it only reads these
}

using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

bool consecutive(const std::vector<uint8_t*>& outs, int64_t bytes) {
  for (size_t r = 1; r < outs.size(); ++r)
    if (outs[r] != outs[0] + static_cast<int64_t>(r) * bytes) return false;
  return true;
}

class GlooBackend : public OpBackend {
 public:
  GlooBackend(const StorePtr& store, int rank, int size, Milliseconds timeout,
              const GlooOptions& options)
      : OpBackend(rank, size),
        timeout_(timeout),
        group_name_(options.group_name),
        store_(store),
        isolate_outputs_(options.isolate_outputs) {
    TS_CHECK(store != nullptr, ValueError, "gloo backend: argument 'store' must not be null");
    TS_CHECK(timeout.count() > 0, ValueError,
             "gloo backend: argument 'timeout' must be positive, but got {}", timeout);
    const auto attr = device_attr(options);
    ignore_sigpipe();
    try {
      device_ = ::gloo::transport::tcp::CreateDevice(attr);
      context_ = connect("gloo/" + group_name_ + "/", options.connect_timeout.value_or(timeout));
    } catch (const Error&) {
      throw;  // the store's own error (a rank that never published its address)
    } catch (const std::exception& e) {  // Gloo's: no such interface, refused connection
      TS_THROW(distributed::DistNetworkError,
               "gloo backend: rank {} of group '{}' could not connect to its peers (listening on "
               "'{}'{}): {}",
               rank, group_name_, attr.hostname, attr.iface.empty() ? "" : ", iface " + attr.iface,
               e.what());
    }
    worker_ = std::thread([this] { worker_loop(); });
  }

  ~GlooBackend() override {
    try {
      shutdown();
    } catch (...) {  // a destructor must not throw; shutdown's errors are on the Works
    }
  }

  std::string name() const override { return "gloo"; }

  void abort(const std::string& reason) override {
    fail_and_abort(nullptr, WorkStatus::ERROR,
                   std::make_exception_ptr(DistBackendError(fmt::format(
                       "gloo group '{}' (rank {}) was aborted: {}", group_name_, rank_, reason))));
  }

  void shutdown() override {
    {
      std::unique_lock lock(mutex_);
      if (stopping_ && !worker_.joinable()) return;
      stopping_ = true;
      cv_.notify_all();
      // Queued collectives still run (each bounded by its own deadline).
    }
    if (worker_.joinable()) worker_.join();
    // A send or recv whose peer never matched it fails now instead of holding shutdown until
    // its deadline.
    std::list<P2P> waiting;
    {
      std::lock_guard lock(mutex_);
      fail_self_messages(std::make_exception_ptr(distributed::DistBackendError(
          fmt::format("gloo group '{}' (rank {}): shut down (destroy_process_group) with a "
                      "send or recv to itself unmatched",
                      group_name_, rank_))));
      waiting.swap(p2p_);
      for (auto& p : waiting) {
        p.buffer->abortWaitSend();
        p.buffer->abortWaitRecv();
      }
    }
    for (auto& p : waiting)
      if (p.thread.joinable()) p.thread.join();
  }

  std::exception_ptr error() const override {
    std::lock_guard lock(mutex_);
    return error_;
  }

  // Closes every pair of the context. Each close waits for a turn of Gloo's event loop, a full
  // 10 ms when no traffic wakes it, so a LoopTicker keeps the turns short while they close: an
  // abort among 3 ranks spent 20 ms here, and its peers heard of it only as each pair closed.
  void close_connections() {
    const LoopTicker ticker(device_);
    context_->closeConnections();
  }

  // Suspend closes the connections and drops the context; resume connects a new full mesh
  // through the store (under "gloo/<group>/resume<n>/").
  void suspend() override {
    check_no_pending_p2p(group_name_);
    barrier(BarrierOptions{})->wait();  // every rank's earlier ops are done
    std::lock_guard lock(mutex_);
    TS_CHECK(!suspended_, distributed::DistBackendError,
             "suspend(): gloo group '{}' (rank {}) is suspended already", group_name_, rank_);
    if (error_) std::rethrow_exception(error_);
    suspended_ = true;
    for (auto& p : p2p_) p.thread.join();  // their Works completed: the waiters are ending
    p2p_.clear();
    close_connections();
    context_.reset();
    ++suspend_count_;
  }

  void resume() override {
    uint64_t round = 0;
    {
      std::lock_guard lock(mutex_);
      TS_CHECK(suspended_ && !stopping_, distributed::DistBackendError,
               "resume(): gloo group '{}' (rank {}) is not suspended", group_name_, rank_);
      round = suspend_count_;
    }
    std::shared_ptr<::gloo::Context> context;
    try {
      context = connect(fmt::format("gloo/{}/resume{}/", group_name_, round), timeout_);
    } catch (const Error&) {
      throw;                             // the store's: a peer that never resumed
    } catch (const std::exception& e) {  // Gloo's
      TS_THROW(distributed::DistNetworkError,
               "resume(): gloo group '{}' (rank {}) could not reconnect to its peers: {}",
               group_name_, rank_, e.what());
    }
    std::lock_guard lock(mutex_);
    context_ = std::move(context);
    suspended_ = false;
  }

  MemoryStats memory_stats() const override {
    std::lock_guard lock(mutex_);
    MemoryStats s;
    // Gloo allocates its buffers per op: what a communicator holds is its connections.
    s.connections = context_ ? static_cast<uint64_t>(size_ - 1) : 0;
    s.suspended = suspended_;
    s.suspend_count = suspend_count_;
    return s;
  }

 protected:
  WorkPtr enqueue(Op&& op, std::vector<Tensor>&& keep,
                  std::optional<Milliseconds> timeout) override {
    const bool p2p = op.kind == OpKind::SEND || op.kind == OpKind::RECV;
    if (p2p)
      TS_CHECK(op.tag >= 0 && op.tag < (int64_t{1} << 56), ValueError,
               "{}(): the gloo backend takes tags in [0, 2^56), but got {}", op_kind_name(op.kind),
               op.tag);
    std::lock_guard lock(mutex_);
    auto work = new_work(op, std::move(keep), timeout, timeout_, group_name_, next_seq_, stopping_,
                         error_, suspended_);
    if (error_) return work;
    if (p2p) {
      post_p2p(op, work);
    } else {
      queue_.push_back({std::move(op), work});
      cv_.notify_all();
    }
    return work;
  }

 private:
  struct Entry {
    Op op;
    WorkPtr work;
  };
  struct P2P {
    std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;  // set by the waiter as its last step
  };

  // A context connected to every peer through the store under `prefix` within `connect`; the
  // ops' own timeouts apply afterwards.
  // Connects the full mesh through the store under `prefix`. Gloo's listener takes the first
  // connection that reaches its port, with no check of who connects: a stray one (another
  // process's client reaching a reused ephemeral port of this host) takes the peer's place,
  // the real peer's connect is reset, and the "connected" side would hang in its first
  // collective. So every rank reports how its connect went, and unless all succeeded all
  // retry on fresh listeners (kConnectAttempts in all, within `connect`). Gloo's errors are
  // thrown as std::runtime_error, the store's as they are.
  std::shared_ptr<::gloo::Context> connect(const std::string& prefix, Milliseconds connect) {
    constexpr int kConnectAttempts = 3;
    const Clock::time_point deadline = Clock::now() + connect;
    const auto left = [&] {
      return std::max(Milliseconds(1),
                      std::chrono::duration_cast<Milliseconds>(deadline - Clock::now()));
    };
    for (int attempt = 0;; ++attempt) {
      const std::string at = fmt::format("{}attempt{}/", prefix, attempt);
      std::shared_ptr<::gloo::rendezvous::Context> ctx;
      std::string failure;
      try {
        ctx = std::make_shared<::gloo::rendezvous::Context>(rank_, size_);
        ctx->setTimeout(left());
        StoreAdapter adapter(store_, at, left());
        const LoopTicker ticker(device_);
        ctx->connectFullMesh(adapter, device_);
        ctx->setTimeout(timeout_);
      } catch (const Error&) {
        throw;  // the store's own (a rank that never published its address)
      } catch (const std::exception& e) {
        failure = e.what();
        ctx.reset();
      }
      const std::string outcome = failure.empty() ? std::string("ok") : failure;
      store_->set(fmt::format("{}outcome/{}", at, rank_), Bytes(outcome.begin(), outcome.end()));
      std::vector<std::string> keys;
      for (int r = 0; r < size_; ++r) keys.push_back(fmt::format("{}outcome/{}", at, r));
      try {
        store_->wait(keys, left());
      } catch (const Error&) {  // a rank that never got this far: report this rank's own error
        if (failure.empty()) throw;
        throw std::runtime_error(failure);
      }
      std::string first;  // the first failing rank's report
      for (int r = 0; r < size_ && first.empty(); ++r) {
        const Bytes b = store_->get(keys[static_cast<size_t>(r)]);
        const std::string report(b.begin(), b.end());
        if (report != "ok") first = fmt::format("rank {}: {}", r, report);
      }
      if (first.empty()) return ctx;
      if (attempt + 1 == kConnectAttempts || Clock::now() >= deadline)
        throw std::runtime_error(
            fmt::format("{} (after {} attempts to connect)", first, attempt + 1));
    }
  }

  std::string where(const Op& op) const {
    return fmt::format("gloo {} (op #{} of group '{}', rank {})", op_kind_name(op.kind), op.seq,
                       group_name_, rank_);
  }

  // Rounded up: Gloo's own timeout, given this, must not expire before op.deadline, or its
  // error would be taken for a failure rather than the timeout it is (truncated, a 300 ms op
  // reached Gloo as 299 ms and failed as ERROR about once in a few hundred runs).
  Milliseconds time_left(const Op& op) const {
    return std::chrono::ceil<Milliseconds>(op.deadline - Clock::now());
  }

  // Called with mutex_ held. A message to this rank itself never reaches Gloo (it has no pair
  // to itself): sends and recvs meet in a mailbox per tag, in posting order.
  void post_self(const Op& op, const WorkPtr& work) {
    work->mark_started();
    const bool send = op.kind == OpKind::SEND;
    auto& mine = send ? self_sends_[op.tag] : self_recvs_[op.tag];
    auto& other = send ? self_recvs_[op.tag] : self_sends_[op.tag];
    if (other.empty()) {
      mine.push_back({op, work});
      return;
    }
    Entry match = std::move(other.front());
    other.pop_front();
    const Entry& s = send ? Entry{op, work} : match;
    const Entry& r = send ? match : Entry{op, work};
    const int64_t sent = s.op.count * element_size(s.op.dtype);
    const int64_t room = r.op.count * element_size(r.op.dtype);
    if (sent != room) {
      auto e = std::make_exception_ptr(distributed::DistBackendError(
          fmt::format("{}: the send to itself with tag {} has {} bytes, the recv {} bytes",
                      where(r.op), op.tag, sent, room)));
      s.work->mark_failed(WorkStatus::ERROR, e);
      r.work->mark_failed(WorkStatus::ERROR, e);
      return;
    }
    if (sent > 0) std::memcpy(r.op.out, s.op.in, static_cast<size_t>(sent));
    s.work->mark_completed();
    r.work->mark_completed();
  }

  // Called with mutex_ held: fails the self-messages that never met their match.
  void fail_self_messages(const std::exception_ptr& e) {
    for (auto* box : {&self_sends_, &self_recvs_}) {
      for (auto& [tag, entries] : *box)
        for (auto& entry : entries) entry.work->mark_failed(WorkStatus::ERROR, e);
      box->clear();
    }
  }

  // Called with mutex_ held. The buffer is posted now; a waiter thread publishes the outcome.
  void post_p2p(const Op& op, const WorkPtr& work) {
    if (op.peer == rank_) return post_self(op, work);
    const bool send = op.kind == OpKind::SEND;
    uint8_t* data = send ? mut(op.in) : op.out;
    const auto bytes = static_cast<size_t>(op.count * element_size(op.dtype));
    reap_finished_p2p();
    P2P& p = p2p_.emplace_back();
    p.done = std::make_shared<std::atomic<bool>>(false);
    auto* buffer = (p.buffer = context_->createUnboundBuffer(data, bytes)).get();
    work->mark_started();
    if (bytes > 0) {
      if (send) {
        buffer->send(op.peer, static_cast<uint64_t>(op.tag));
      } else {
        buffer->recv(op.peer, static_cast<uint64_t>(op.tag));
      }
    }
    p.thread = std::thread([this, op, work, buffer, send, bytes, done = p.done] {
      try {
        const bool ok =
            bytes == 0 || (send ? buffer->waitSend(std::max(time_left(op), Milliseconds(1)))
                                : buffer->waitRecv(std::max(time_left(op), Milliseconds(1))));
        if (ok) {
          work->mark_completed();
        } else {  // abortWait*: the backend was aborted or shut down
          std::exception_ptr e = error();
          if (!e)
            e = std::make_exception_ptr(DistBackendError(fmt::format(
                "{}: the group was shut down (destroy_process_group) before the peer's matching "
                "{} arrived",
                where(op), send ? "recv" : "send")));
          work->mark_failed(WorkStatus::ERROR, e);
        }
      } catch (const std::exception& e) {
        fail_and_abort(work,
                       Clock::now() >= op.deadline ? WorkStatus::TIMED_OUT : WorkStatus::ERROR,
                       gloo_error(op, e));
      }
      done->store(true, std::memory_order_release);
    });
  }

  // Called with mutex_ held: joins the waiters that have finished and frees their buffers.
  void reap_finished_p2p() {
    for (auto it = p2p_.begin(); it != p2p_.end();) {
      if (it->done->load(std::memory_order_acquire)) {
        it->thread.join();
        it = p2p_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::exception_ptr gloo_error(const Op& op, const std::exception& e) const {
    if (Clock::now() >= op.deadline)
      return std::make_exception_ptr(DistTimeoutError(
          fmt::format("{}: timed out after {}: {}", where(op), op.timeout, e.what())));
    return std::make_exception_ptr(DistBackendError(fmt::format("{}: {}", where(op), e.what())));
  }

  void worker_loop() {
    for (;;) {
      Entry e;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;  // stopping and drained
        e = std::move(queue_.front());
        queue_.pop_front();
        if (error_) {
          e.work->mark_failed(WorkStatus::ERROR, error_);
          continue;
        }
        current_ = e.work;
      }
      if (!e.work->mark_started()) {  // already failed (abort)
        std::lock_guard lock(mutex_);
        current_.reset();
        continue;
      }
      try {
        if (time_left(e.op).count() <= 0)
          TS_THROW(distributed::DistTimeoutError, "{}: timed out after {} before it could start",
                   where(e.op), e.op.timeout);
        if (isolate_outputs_) {
          run_isolated(e);
        } else {
          run(e.op);
        }
        e.work->mark_completed();
      } catch (const DistTimeoutError&) {
        fail_and_abort(e.work, WorkStatus::TIMED_OUT, std::current_exception());
      } catch (const std::exception& ex) {
        fail_and_abort(e.work,
                       Clock::now() >= e.op.deadline ? WorkStatus::TIMED_OUT : WorkStatus::ERROR,
                       gloo_error(e.op, ex));
      }
      std::lock_guard lock(mutex_);
      current_.reset();
    }
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
      if (current_) current_->mark_failed(WorkStatus::ERROR, error_);
      fail_self_messages(error_);
      for (auto& p : p2p_) {  // waiters return false and publish error_
        p.buffer->abortWaitSend();
        p.buffer->abortWaitRecv();
      }
    }
    for (auto& e : queued) e.work->mark_failed(WorkStatus::ERROR, error_);
    if (!first) return;
    // Closing the connections tells the peers at once (their ops fail on the closed
    // connection) instead of at their timeouts, so a failure anywhere reaches every rank
    // promptly. (Gloo offers no way to cancel a collective blocked on a peer that stays
    // silent: it ends at its own timeout; see isolate_outputs.)
    if (context_) close_connections();          // null while suspended
    run_abort_hooks(exception_message(error));  // once, for the first failure
  }

  // `bytes` of scratch from Tessera's allocator, whose large blocks are cached across calls and
  // threads and backed by huge pages. A fresh malloc'ed block was new pages on each
  // communicator's first ops (each has a worker thread of its own, so another malloc arena),
  // and where a page fault costs ~14 us (this VM) the first 4 MiB all-reduce after a
  // reconfigure took 30-50 ms longer than the next.
  static Tensor scratch(int64_t bytes) { return empty({bytes}, TensorOptions(kUInt8)); }

  // run() on private copies of the op's outputs, copied back only while its Work is not failed:
  // a collective left blocked by an abort (on a peer that stays silent) that later completes
  // can then never write into tensors its caller was told are free again.
  void run_isolated(const Entry& e) {
    Op op = e.op;
    const int64_t bytes = op.count * element_size(op.dtype);
    struct Region {
      uint8_t* user;
      size_t offset, size;
    };
    std::vector<Region> regions;
    size_t total = 0;
    const auto add = [&](uint8_t* user, int64_t size) {
      regions.push_back({user, total, static_cast<size_t>(size)});
      total += static_cast<size_t>(size);
    };
    switch (op.kind) {
      case OpKind::ALLREDUCE:
      case OpKind::BROADCAST:
      case OpKind::REDUCE:
      case OpKind::SCATTER:
      case OpKind::REDUCE_SCATTER:
        add(op.out, bytes);
        break;
      case OpKind::ALLGATHER:
      case OpKind::GATHER:
        for (uint8_t* o : op.outs) add(o, bytes);
        break;
      case OpKind::ALLTOALL: {
        int64_t sum = 0;
        for (int64_t b : op.out_split_bytes) sum += b;
        add(op.out, sum);
        break;
      }
      default:
        break;
    }
    const Tensor staging_tensor = scratch(static_cast<int64_t>(total));
    uint8_t* staging = staging_tensor.data_ptr<uint8_t>();
    for (const auto& r : regions) {  // the ops that read their output read these copies
      if (r.size > 0) std::memcpy(staging + r.offset, r.user, r.size);
    }
    if (op.kind == OpKind::ALLGATHER || op.kind == OpKind::GATHER) {
      for (size_t i = 0; i < op.outs.size(); ++i) op.outs[i] = staging + regions[i].offset;
    } else if (!regions.empty()) {
      op.out = staging;
    }
    run(op);
    std::lock_guard lock(mutex_);  // abort() fails the running Work under this lock
    if (e.work->is_completed()) return;
    for (const auto& r : regions) {
      if (r.size > 0) std::memcpy(r.user, staging + r.offset, r.size);
    }
  }

  // Runs one collective to completion (throws on failure).
  void run(const Op& op) {
    // Gloo matches a collective's messages by tag, so every rank must give the k-th collective
    // the same one: the worker's own count, not the op number (which counts sends and recvs,
    // that only some ranks issue).
    const auto tag = static_cast<uint32_t>(++collectives_run_);
    const Milliseconds t = std::max(time_left(op), Milliseconds(1));
    const int64_t esize = element_size(op.dtype);
    const int64_t bytes = op.count * esize;
    switch (op.kind) {
      case OpKind::ALLREDUCE:
        if (op.count == 0) return;
        return allreduce_raw(op.out, op, tag, t);
      case OpKind::BROADCAST: {
        if (bytes == 0) return;
        ::gloo::BroadcastOptions o(context_);
        o.setOutput(op.out, static_cast<size_t>(bytes));
        o.setRoot(op.root);
        o.setTag(tag);
        o.setTimeout(t);
        return ::gloo::broadcast(o);
      }
      case OpKind::REDUCE: {
        // Gloo may use a non-root's buffer as scratch: non-roots reduce from a copy, so their
        // tensors stay unchanged.
        if (op.count == 0) return;
        Tensor copy;
        uint8_t* data = op.out;
        if (rank_ != op.root) {
          copy = scratch(bytes);
          data = copy.data_ptr<uint8_t>();
          std::memcpy(data, op.out, static_cast<size_t>(bytes));
        }
        reduce_in_place(data, op, [&]<class E>(E* p, const ReduceFn& fn) {
          ::gloo::ReduceOptions o(context_);
          o.setOutput(p, static_cast<size_t>(op.count));
          o.setRoot(op.root);
          o.setReduceFunction(fn);
          o.setTag(tag);
          o.setTimeout(t);
          ::gloo::reduce(o);
        });
        return;
      }
      case OpKind::ALLGATHER: {
        if (bytes == 0) return;
        Tensor staging;
        uint8_t* dst = op.outs[0];
        if (!consecutive(op.outs, bytes)) {
          staging = scratch(bytes * size_);
          dst = staging.data_ptr<uint8_t>();
        }
        ::gloo::AllgatherOptions o(context_);
        o.setInput(mut(op.in), static_cast<size_t>(bytes));
        o.setOutput(dst, static_cast<size_t>(bytes * size_));
        o.setTag(tag);
        o.setTimeout(t);
        ::gloo::allgather(o);
        if (staging.defined())
          for (int r = 0; r < size_; ++r)
            std::memcpy(op.outs[r], dst + r * bytes, static_cast<size_t>(bytes));
        return;
      }
      case OpKind::GATHER: {
        if (bytes == 0) return;
        Tensor staging;
        ::gloo::GatherOptions o(context_);
        o.setInput(mut(op.in), static_cast<size_t>(bytes));
        if (rank_ == op.root) {
          staging = scratch(bytes * size_);
          o.setOutput(staging.data_ptr<uint8_t>(), static_cast<size_t>(bytes * size_));
        }
        o.setRoot(op.root);
        o.setTag(tag);
        o.setTimeout(t);
        ::gloo::gather(o);
        if (rank_ == op.root)
          for (int r = 0; r < size_; ++r)
            std::memcpy(op.outs[r], staging.data_ptr<uint8_t>() + r * bytes,
                        static_cast<size_t>(bytes));
        return;
      }
      case OpKind::SCATTER: {
        if (bytes == 0) return;
        ::gloo::ScatterOptions o(context_);
        std::vector<uint8_t*> ins;
        for (const uint8_t* p : op.ins) ins.push_back(mut(p));
        if (rank_ == op.root) o.setInputs(ins.data(), ins.size(), static_cast<size_t>(bytes));
        o.setOutput(op.out, static_cast<size_t>(bytes));
        o.setRoot(op.root);
        o.setTag(tag);
        o.setTimeout(t);
        return ::gloo::scatter(o);
      }
      case OpKind::REDUCE_SCATTER: {
        // All-reduce of every rank's whole input, then this rank's block.
        if (op.count == 0) return;
        const Tensor all_tensor = scratch(bytes * size_);
        uint8_t* all = all_tensor.data_ptr<uint8_t>();
        for (int r = 0; r < size_; ++r)
          std::memcpy(all + r * bytes, op.ins[r], static_cast<size_t>(bytes));
        Op whole = op;
        whole.count = op.count * size_;
        allreduce_raw(all, whole, tag, t);
        std::memcpy(op.out, all + rank_ * bytes, static_cast<size_t>(bytes));
        return;
      }
      case OpKind::ALLTOALL: {
        ::gloo::AlltoallvOptions o(context_);
        o.setInput(mut(op.in), op.in_split_bytes);
        o.setOutput(op.out, op.out_split_bytes);
        o.setTag(tag);
        o.setTimeout(t);
        return ::gloo::alltoallv(o);
      }
      case OpKind::BARRIER: {
        ::gloo::BarrierOptions o(context_);
        o.setTag(tag);
        o.setTimeout(t);
        return ::gloo::barrier(o);
      }
      case OpKind::SEND:
      case OpKind::RECV:
        break;
    }
    TS_THROW(RuntimeError, "{}: not a collective", where(op));
  }

  void allreduce_raw(uint8_t* data, const Op& op, uint32_t tag, Milliseconds t) {
    reduce_in_place(data, op, [&]<class E>(E* p, const ReduceFn& fn) {
      ::gloo::AllreduceOptions o(context_);
      o.setOutput(p, static_cast<size_t>(op.count));
      o.setReduceFunction(fn);
      o.setTag(tag);
      o.setTimeout(t);
      ::gloo::allreduce(o);
    });
  }

  // Runs a Gloo reduction `run(E* data, fn)` over op.count elements at `data`. Narrow floats
  // (float16, bfloat16, float8) travel and fold as float32 and are rounded once at the end, as
  // shm does; AVG folds as SUM and divides at the end.
  template <class Run>
  void reduce_in_place(uint8_t* data, const Op& op, Run run) {
    const ScalarType dtype = op.dtype;
    const bool widen = is_floating_point(dtype) && element_size(dtype) < 4;
    const ReduceOp pairwise = op.reduce_op == ReduceOp::AVG ? ReduceOp::SUM : op.reduce_op;
    Tensor original = from_blob(data, {op.count}, dtype);
    Tensor work = widen ? original.to(kFloat32) : original;
    const ScalarType wdtype = work.dtype();
    ReduceFn fn = [wdtype, pairwise](void* out, const void* a, const void* b, size_t n) {
      const void* srcs[2] = {a, b};
      reduce_into(wdtype, pairwise, out, srcs, 2, static_cast<int64_t>(n));
    };
    with_elem(static_cast<size_t>(element_size(wdtype)),
              [&]<class E>() { run(static_cast<E*>(work.data_ptr()), fn); });
    if (op.reduce_op == ReduceOp::AVG) work.div_(size_);
    if (widen) original.copy_(work);
  }

  const Milliseconds timeout_;
  const std::string group_name_;
  const StorePtr store_;
  const bool isolate_outputs_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::Context> context_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;  // collectives not yet taken by the worker
  WorkPtr current_;          // the running collective
  std::list<P2P> p2p_;       // posted sends/recvs and their waiters (joined at shutdown)
  std::map<int64_t, std::deque<Entry>> self_sends_, self_recvs_;  // unmatched, by tag
  std::exception_ptr error_;  // set once, by the first failure or abort
  bool stopping_ = false;
  bool suspended_ = false;  // context_ is null then
  uint64_t suspend_count_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t collectives_run_ = 0;  // worker only
  std::thread worker_;
};

}  // namespace

}  // namespace gloo_impl

BackendPtr make_gloo_backend(const StorePtr& store, int rank, int size, Milliseconds timeout,
                             GlooOptions options) {
  return std::make_shared<gloo_impl::GlooBackend>(store, rank, size, timeout, options);
}

}  // namespace tessera::distributed
