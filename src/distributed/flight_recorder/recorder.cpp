// FlightRecorder: the ring buffer behind a group's pre/post hooks, and the thread that
// writes dumps. See flight_recorder.h.
//
// An op's entry is made by the pre hook (state scheduled), gets its Work in the post hook,
// and is finished by a callback on the Work's Future (completed, error or timed out; a
// failure requests a dump). Started is read from the Work when a dump is taken. Everything
// the hooks and callbacks touch lives in Impl, which they hold by shared_ptr, so a late
// callback never reaches a destroyed recorder.
//
// Dumps are written by one thread, woken through a pipe: by request_dump() and by the
// SIGUSR1 handler, which only writes a byte to that pipe (async-signal-safe). Several
// requests that arrive together become one dump naming every reason.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unordered_map>

#include "distributed/flight_recorder/trace.h"
#include "tessera/distributed/flight_recorder.h"

namespace tessera::distributed {

namespace {

int64_t system_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::vector<int64_t>> sizes_of(const std::vector<TensorMeta>& ts) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& t : ts) out.push_back(t.sizes);
  return out;
}
std::vector<std::string> dtypes_of(const std::vector<TensorMeta>& ts) {
  std::vector<std::string> out;
  for (const auto& t : ts)
    out.emplace_back(t.dtype == ScalarType::Undefined ? "undefined" : dtype_name(t.dtype));
  return out;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// The write end of the pipe of the recorder that owns SIGUSR1 (-1: none).
std::atomic<int> g_signal_fd{-1};
constexpr char kSignalByte = 'S', kRequestByte = 'R', kQuitByte = 'Q';

extern "C" void flight_recorder_signal(int) {
  const int saved = errno;
  const int fd = g_signal_fd.load();
  if (fd >= 0) {
    [[maybe_unused]] const ssize_t n = ::write(fd, &kSignalByte, 1);
  }
  errno = saved;
}

}  // namespace

struct FlightRecorder::Impl : std::enable_shared_from_this<Impl> {
  struct Slot {
    bool used = false;
    fr::TraceEntry entry;
    std::weak_ptr<Work> work;
  };

  explicit Impl(FlightRecorderOptions o) : options(std::move(o)), ring(options.buffer_size) {
    // Steady-clock times of Works become wall-clock times in the dump.
    steady_to_system_ns = system_now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                Clock::now().time_since_epoch())
                                                .count();
    TS_CHECK(::pipe2(wake, O_CLOEXEC | O_NONBLOCK) == 0, distributed::DistError,
             "FlightRecorder: could not create its pipe: {}", std::strerror(errno));
  }
  ~Impl() {
    ::close(wake[0]);
    ::close(wake[1]);
  }

  int64_t system_ns(std::optional<Clock::time_point> t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t->time_since_epoch()).count() +
           steady_to_system_ns;
  }

  bool knows_members(const std::string& key) {
    std::lock_guard lock(mutex);
    const auto it = groups.find(key);
    return it != groups.end() && !it->second.ranks.empty();
  }

  // The members and backend of the attached group `name` as they are now.
  std::optional<fr::TraceGroup> current_members(const std::string& name) {
    std::lock_guard lock(control_mutex);
    for (const auto& weak : attached) {
      const auto group = weak.lock();
      if (!group || group->name() != name) continue;
      fr::TraceGroup g;
      g.ranks = group->global_ranks();
      g.backend = group->backend_name();
      return g;
    }
    return std::nullopt;
  }

  Slot* find(int64_t record_id) {
    Slot& s = ring[static_cast<size_t>(record_id) % ring.size()];
    return s.used && s.entry.record_id == record_id ? &s : nullptr;
  }

  void on_pre(const PreHookArgs& a) {
    fr::TraceEntry e;
    e.group = a.generation == 0 ? a.group_name : fmt::format("{}@g{}", a.group_name, a.generation);
    e.generation = static_cast<int64_t>(a.generation);
    // A new generation's members, from the group (known to be attached: its hooks call this),
    // looked up once per generation, outside this recorder's lock.
    std::optional<fr::TraceGroup> generation_group;
    if (a.generation > 0 && !knows_members(e.group))
      generation_group = current_members(a.group_name);
    e.op_id = static_cast<int64_t>(a.op_id);
    e.collective_seq_id = static_cast<int64_t>(a.collective_seq_id);
    e.p2p_seq_id = static_cast<int64_t>(a.p2p_seq_id);
    e.is_p2p = a.is_p2p;
    e.op = a.op_name;
    e.input_sizes = sizes_of(a.inputs);
    e.input_dtypes = dtypes_of(a.inputs);
    e.output_sizes = sizes_of(a.outputs);
    e.output_dtypes = dtypes_of(a.outputs);
    e.root = a.root;
    e.tag = a.tag;
    if (a.reduce_op) e.reduce_op = reduce_op_name(*a.reduce_op);
    e.async_op = a.async_op;
    e.state = "scheduled";
    e.time_created_ns = system_now_ns();
    e.timeout_ms = a.timeout.count();
    std::lock_guard lock(mutex);
    e.record_id = next_record_id++;
    Slot& slot = ring[static_cast<size_t>(e.record_id) % ring.size()];
    if (slot.used) {  // overwritten: its group can no longer show it
      const auto& old = slot.entry;
      groups[old.group].last_dropped =
          fr::DroppedRecord{old.record_id, old.collective_seq_id, old.p2p_seq_id};
    }
    auto& g = groups[e.group];
    if (generation_group && g.ranks.empty()) {
      g.ranks = std::move(generation_group->ranks);
      g.backend = std::move(generation_group->backend);
    }
    if (e.is_p2p) {
      g.last_enqueued_p2p = e.p2p_seq_id;
    } else {
      g.last_enqueued_collective = e.collective_seq_id;
    }
    pending[a.op_id] = e.record_id;
    slot = Slot{true, std::move(e), {}};
  }

  void on_post(const PostHookArgs& a) {
    int64_t id = -1;
    {
      std::lock_guard lock(mutex);
      const auto it = pending.find(a.pre.op_id);
      if (it == pending.end()) return;  // attached between the op's pre and post hooks
      id = it->second;
      pending.erase(it);
      if (Slot* s = find(id)) {
        if (a.work) {
          s->work = a.work;
        } else {
          s->entry.state = "error";
          s->entry.error = exception_message(a.error);
          s->entry.time_completed_ns = system_now_ns();
        }
      }
    }
    if (!a.work) return;  // refused by the backend: the caller has the error at once
    std::weak_ptr<Work> weak = a.work;
    a.work->get_future()->then([self = shared_from_this(), id, weak](Future& f) {
      self->on_done(id, weak, f);
      return std::vector<Tensor>{};
    });
  }

  // Sets e's state, times and error from the Work as it stands now.
  void refresh(fr::TraceEntry& e, const Work& w) const {
    if (const auto t = w.started_at()) e.time_started_ns = system_ns(t);
    switch (w.status()) {
      case WorkStatus::NOT_STARTED:
        return;
      case WorkStatus::IN_PROGRESS:
        e.state = "started";
        return;
      case WorkStatus::COMPLETED:
        e.state = "completed";
        break;
      case WorkStatus::TIMED_OUT:
        e.state = "timed out";
        break;
      case WorkStatus::ERROR:
        e.state = "error";
        break;
    }
    if (const auto t = w.finished_at()) e.time_completed_ns = system_ns(t);
    if (const auto error = w.exception()) e.error = exception_message(error);
  }

  static void count_completion(const fr::TraceEntry& e, fr::TraceGroup& g) {
    if (e.state == "completed" && !e.is_p2p)
      g.last_completed_collective = std::max(g.last_completed_collective, e.collective_seq_id);
  }

  // The dump a failure asks for is requested before the lock that made the entry terminal is
  // released: flush() takes an entry that is no longer scheduled or started as recorded, and
  // then waits only for the dumps requested so far. (Requested after the unlock, a flush() in
  // between returned without it, and the process could end undumped; seen under ASan.)
  void on_done(int64_t id, const std::weak_ptr<Work>& weak, Future& f) {
    const WorkPtr work = weak.lock();
    std::lock_guard lock(mutex);
    Slot* s = find(id);
    if (!s) return;  // overwritten meanwhile
    auto& e = s->entry;
    s->work.reset();  // terminal now: the entry holds all it needs
    if (work) {
      refresh(e, *work);
    } else {  // only the Future is left: its error tells what happened
      e.time_completed_ns = system_now_ns();
      e.state = "completed";
      if (const auto error = f.exception()) {
        e.error = exception_message(error);
        try {
          std::rethrow_exception(error);
        } catch (const DistTimeoutError&) {
          e.state = "timed out";
        } catch (...) {
          e.state = "error";
        }
      }
    }
    count_completion(e, groups[e.group]);
    // The reason is formatted only for a dump: most ops complete and ask for none.
    const bool timed_out = e.state == "timed out";
    if ((timed_out && options.dump_on_timeout) || (e.state == "error" && options.dump_on_error)) {
      // request() takes dump_mutex, which is never held while taking `mutex`.
      request(fmt::format("{} {} #{} of group '{}'", timed_out ? "timeout of" : "error in", e.op,
                          e.seq_id(), e.group));
    }
  }

  // Whether a finished Work's entry still waits for its completion callback.
  bool has_unrecorded_completions() {
    std::lock_guard lock(mutex);
    for (auto& slot : ring) {
      if (!slot.used || (slot.entry.state != "scheduled" && slot.entry.state != "started"))
        continue;
      if (const WorkPtr w = slot.work.lock(); w && w->is_completed()) return true;
    }
    return false;
  }

  fr::TraceDump snapshot(const std::string& reason) {
    fr::TraceDump d;
    d.host = host_name();
    d.pid = ::getpid();
    d.job_id = options.job_id;
    d.reason = reason;
    d.dump_time_ns = system_now_ns();
    d.buffer_size = static_cast<int64_t>(ring.size());
    std::lock_guard lock(mutex);
    d.rank = std::max(rank, 0);
    d.groups = groups;
    const int64_t n = static_cast<int64_t>(ring.size());
    for (int64_t id = std::max<int64_t>(0, next_record_id - n); id < next_record_id; ++id) {
      Slot* s = find(id);
      if (!s) continue;
      fr::TraceEntry e = s->entry;
      // The Work may have moved on since the hooks saw it (its completion callback may not
      // have run yet either).
      if (e.state == "scheduled" || e.state == "started") {
        if (const WorkPtr w = s->work.lock()) {
          refresh(e, *w);
          count_completion(e, d.groups[e.group]);
        }
      }
      d.entries.push_back(std::move(e));
    }
    return d;
  }

  std::string path() const {
    std::lock_guard lock(mutex);
    return (std::filesystem::path(options.dump_dir) /
            fmt::format("fr_rank{}.json", std::max(rank, 0)))
        .string();
  }

  std::string write_dump(const std::string& reason) {
    TS_CHECK(!options.dump_dir.empty(), distributed::DistError,
             "FlightRecorder.dump(): no dump directory (set TESSERA_FR_DUMP_DIR or "
             "FlightRecorderOptions::dump_dir)");
    const std::string text = fr::to_json_text(snapshot(reason));
    const std::string target = path();
    const std::string tmp = fmt::format("{}.tmp{}", target, ::getpid());
    std::error_code ec;
    std::filesystem::create_directories(options.dump_dir, ec);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << text;
      out.flush();
      TS_CHECK(out.good(), distributed::DistError, "FlightRecorder.dump(): cannot write '{}': {}",
               tmp, std::strerror(errno));
    }
    TS_CHECK(::rename(tmp.c_str(), target.c_str()) == 0, distributed::DistError,
             "FlightRecorder.dump(): cannot rename '{}' to '{}': {}", tmp, target,
             std::strerror(errno));
    ++dumps_written;
    return target;
  }

  void request(const std::string& reason) {
    {
      std::lock_guard lock(dump_mutex);
      reasons.push_back(reason);
      ++requested;
    }
    [[maybe_unused]] const ssize_t n = ::write(wake[1], &kRequestByte, 1);
  }

  // The dump thread: waits (in slices of a second) for bytes on the pipe and writes one dump
  // for everything requested since the last.
  void dump_loop() {
    for (;;) {
      pollfd p{wake[0], POLLIN, 0};
      ::poll(&p, 1, 1000);
      bool quit = false, signalled = false;
      char buf[64];
      ssize_t n;
      while ((n = ::read(wake[0], buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; ++i) {
          quit |= buf[i] == kQuitByte;
          signalled |= buf[i] == kSignalByte;
        }
      }
      std::vector<std::string> why;
      uint64_t target = 0;
      {
        std::lock_guard lock(dump_mutex);
        if (signalled) {
          reasons.emplace_back("SIGUSR1");
          ++requested;
        }
        why.swap(reasons);
        target = requested;
      }
      if (!why.empty()) {
        try {
          write_dump(fmt::format("{}", fmt::join(why, "; ")));
        } catch (const std::exception& e) {
          const std::string msg =
              fmt::format("tessera: Flight Recorder dump failed: {}\n", e.what());
          std::fputs(msg.c_str(), stderr);
        }
        {
          std::lock_guard lock(dump_mutex);
          completed = target;
        }
        dump_cv.notify_all();
      }
      if (quit) return;
    }
  }

  const FlightRecorderOptions options;
  int64_t steady_to_system_ns = 0;

  mutable std::mutex mutex;  // guards the ring, groups, pending, rank
  std::vector<Slot> ring;
  int64_t next_record_id = 0;
  std::map<std::string, fr::TraceGroup> groups;
  std::unordered_map<uint64_t, int64_t> pending;  // op id -> record id, between pre and post
  int rank = -1;

  int wake[2] = {-1, -1};
  std::mutex dump_mutex;  // guards reasons, requested, completed
  std::condition_variable dump_cv;
  std::vector<std::string> reasons;
  uint64_t requested = 0, completed = 0;
  std::atomic<uint64_t> dumps_written{0};

  std::mutex control_mutex;  // guards the members below (the recorder's own)
  std::vector<HookHandle> handles;
  std::vector<std::weak_ptr<ProcessGroup>> attached;
  std::thread dumper;
  bool owns_signal = false;
  struct sigaction previous_sigusr1 {};
};

// ---- FlightRecorder ------------------------------------------------------------------------

FlightRecorder::FlightRecorder(FlightRecorderOptions options) {
  TS_CHECK(options.buffer_size >= 1 && options.buffer_size <= (1u << 24), ValueError,
           "FlightRecorder(): option 'buffer_size' must be in [1, 16777216], but got {}",
           options.buffer_size);
  impl_ = std::make_shared<Impl>(std::move(options));
  impl_->rank = impl_->options.rank;
  // The thread ends (joined below) before this recorder lets go of impl_.
  impl_->dumper = std::thread([impl = impl_.get()] { impl->dump_loop(); });
}

FlightRecorder::~FlightRecorder() {
  std::vector<HookHandle> handles;
  {
    std::lock_guard lock(impl_->control_mutex);
    handles.swap(impl_->handles);
    if (impl_->owns_signal) {
      ::sigaction(SIGUSR1, &impl_->previous_sigusr1, nullptr);
      g_signal_fd.store(-1);
      impl_->owns_signal = false;
    }
  }
  for (auto& h : handles) h.remove();
  [[maybe_unused]] const ssize_t n = ::write(impl_->wake[1], &kQuitByte, 1);
  impl_->dumper.join();  // writes what is still requested first
}

void FlightRecorder::attach(const ProcessGroupPtr& group) {
  TS_CHECK(group != nullptr, ValueError,
           "FlightRecorder.attach(): argument 'group' must not be null");
  if (!group->is_member()) return;
  {
    std::lock_guard lock(impl_->control_mutex);
    for (const auto& g : impl_->attached)
      if (g.lock() == group) return;  // attached already: its ops are recorded once
    impl_->attached.push_back(group);
  }
  {
    std::lock_guard lock(impl_->mutex);
    fr::TraceGroup& g = impl_->groups[group->name()];
    g.ranks = group->global_ranks();
    g.backend = group->backend_name();
    // (A reconfigurable group made without members has no ranks until its first reconfigure.)
    if (impl_->rank < 0 && !g.ranks.empty()) impl_->rank = group->global_rank(group->rank());
  }
  auto pre = group->register_pre_hook([impl = impl_](const PreHookArgs& a) { impl->on_pre(a); });
  auto post =
      group->register_post_hook([impl = impl_](const PostHookArgs& a) { impl->on_post(a); });
  std::lock_guard lock(impl_->control_mutex);
  impl_->handles.push_back(std::move(pre));
  impl_->handles.push_back(std::move(post));
}

std::string FlightRecorder::dump_json(const std::string& reason) const {
  return fr::to_json_text(impl_->snapshot(reason));
}

std::string FlightRecorder::dump(const std::string& reason) {
  return impl_->write_dump(reason);
}

void FlightRecorder::request_dump(const std::string& reason) {
  impl_->request(reason);
}

bool FlightRecorder::flush(Milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  // A waiter may see an op fail before the Future callback that records the failure (and
  // requests its dump) has run on the completing thread; wait for those callbacks first.
  while (impl_->has_unrecorded_completions()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::unique_lock lock(impl_->dump_mutex);
  const uint64_t target = impl_->requested;
  return impl_->dump_cv.wait_until(lock, deadline, [&] { return impl_->completed >= target; });
}

uint64_t FlightRecorder::dumps_written() const {
  return impl_->dumps_written.load();
}

void FlightRecorder::install_signal_handler() {
  std::lock_guard lock(impl_->control_mutex);
  if (impl_->owns_signal) return;
  int expected = -1;
  TS_CHECK(g_signal_fd.compare_exchange_strong(expected, impl_->wake[1]), distributed::DistError,
           "FlightRecorder.install_signal_handler(): another Flight Recorder handles SIGUSR1 "
           "already");
  struct sigaction sa {};
  sa.sa_handler = flight_recorder_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &sa, &impl_->previous_sigusr1);
  impl_->owns_signal = true;
}

const FlightRecorderOptions& FlightRecorder::options() const {
  return impl_->options;
}

std::string FlightRecorder::dump_path() const {
  return impl_->path();
}

std::optional<FlightRecorderOptions> flight_recorder_options_from_env() {
  const char* size = std::getenv("TESSERA_FR_BUFFER_SIZE");
  if (!size || !*size) return std::nullopt;
  uint64_t n = 0;
  const auto [p, ec] = std::from_chars(size, size + std::strlen(size), n);
  TS_CHECK(ec == std::errc() && *p == '\0' && n <= (1u << 24), ValueError,
           "Flight Recorder: TESSERA_FR_BUFFER_SIZE must be an integer in [0, 16777216], but got "
           "'{}'",
           size);
  if (n == 0) return std::nullopt;
  FlightRecorderOptions o;
  o.buffer_size = n;
  if (const char* dir = std::getenv("TESSERA_FR_DUMP_DIR")) o.dump_dir = dir;
  if (const char* job = std::getenv("TESSERA_JOB_ID")) o.job_id = job;
  return o;
}

std::shared_ptr<FlightRecorder> global_flight_recorder() {
  static std::mutex mutex;
  static bool made = false;
  static std::shared_ptr<FlightRecorder> recorder;
  std::lock_guard lock(mutex);
  if (made) return recorder;
  made = true;  // a malformed environment is reported once, by the first caller
  if (auto options = flight_recorder_options_from_env()) {
    recorder = std::make_shared<FlightRecorder>(std::move(*options));
    if (!recorder->options().dump_dir.empty()) recorder->install_signal_handler();
  }
  return recorder;
}

}  // namespace tessera::distributed
