// ReconfigurableBackend: see reconfigurable.h.
#include "distributed/backends/reconfigurable.h"

#include <fmt/chrono.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <random>

#include "distributed/store/address.h"

namespace tessera::distributed {

namespace {

std::string random_instance_id() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

Milliseconds time_left(Clock::time_point deadline) {
  return std::max(Milliseconds(1),
                  std::chrono::duration_cast<Milliseconds>(deadline - Clock::now()));
}

std::string as_text(const Bytes& b) {
  return std::string(b.begin(), b.end());
}

}  // namespace

ReconfigurableBackend::ReconfigurableBackend(std::string backend, std::string group, StorePtr store,
                                             Milliseconds timeout, Factory make, int global_rank,
                                             int initial_rank, int initial_size)
    : ForwardingBackend(0, 1),
      backend_(std::move(backend)),
      group_(std::move(group)),
      store_(std::move(store)),
      timeout_(timeout),
      make_(std::move(make)),
      global_rank_(global_rank),
      instance_(random_instance_id()) {
  TS_CHECK(store_ != nullptr && make_ != nullptr, ValueError,
           "reconfigurable '{}' backend: needs a store and a factory", backend_);
  TS_CHECK(global_rank >= 0, ValueError,
           "reconfigurable '{}' backend: the global rank must be non-negative, but got {}",
           backend_, global_rank);
  if (initial_size > 0) {
    // Generation 0 rendezvouses where a plain backend of this group would.
    install(make_(store_, initial_rank, initial_size, timeout_), initial_rank, initial_size, {});
  }
}

ReconfigurableBackend::~ReconfigurableBackend() {
  try {
    shutdown();
  } catch (...) {  // a destructor must not throw; shutdown's errors are on the Works
  }
}

std::string ReconfigurableBackend::reconfigure_handle() const {
  return fmt::format("{}:{}:{}:{}", backend_, global_rank_, instance_, store_->address());
}

ReconfigurableBackend::Handle ReconfigurableBackend::parse_handle(const std::string& text) {
  Handle h;
  const size_t a = text.find(':');
  const size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  const size_t c = b == std::string::npos ? b : text.find(':', b + 1);
  bool ok = c != std::string::npos && a > 0 && c + 1 < text.size() && c > b + 1;
  if (ok) {
    h.backend = text.substr(0, a);
    h.instance = text.substr(b + 1, c - b - 1);
    h.store = text.substr(c + 1);
    const auto [p, ec] = std::from_chars(text.data() + a + 1, text.data() + b, h.global_rank);
    ok = ec == std::errc() && p == text.data() + b && h.global_rank >= 0;
  }
  TS_CHECK(ok, ValueError,
           "reconfigure(): handle '{}' is malformed: expected '<backend>:<global rank>:"
           "<instance>:<store address>' as reconfigure_handle() returns it",
           detail::printable(text));
  return h;
}

WorkPtr ReconfigurableBackend::reconfigure(const ReconfigureOptions& options) {
  // 1. The options, in the caller's thread.
  TS_CHECK(!options.uuid.empty() && options.uuid.find('/') == std::string::npos, ValueError,
           "reconfigure(): option 'uuid' must be a non-empty string without '/', but got '{}'",
           options.uuid);
  TS_CHECK(!options.handles.empty(), ValueError,
           "reconfigure(): option 'handles' must name at least this rank");
  const Milliseconds timeout = options.timeout.value_or(timeout_);
  TS_CHECK(timeout.count() > 0, ValueError,
           "reconfigure(): option 'timeout' must be positive, but got {}", timeout);
  const std::string mine = reconfigure_handle();
  std::vector<int> seen;
  bool found = false;
  // Members made on different stores (each replica its own, as torchft's replica groups) meet
  // in one every member names the same way: the smallest of the handles' store addresses.
  std::string meet;
  for (size_t i = 0; i < options.handles.size(); ++i) {
    const Handle h = parse_handle(options.handles[i]);
    TS_CHECK(h.backend == backend_, ValueError,
             "reconfigure(): handles[{}] ('{}') is a '{}' backend's, but group '{}' runs '{}'", i,
             detail::printable(options.handles[i]), h.backend, group_, backend_);
    check_store_address(h.store, fmt::format("reconfigure(): handles[{}] ('{}')", i,
                                             detail::printable(options.handles[i])));
    TS_CHECK(std::find(seen.begin(), seen.end(), h.global_rank) == seen.end(), ValueError,
             "reconfigure(): two handles name global rank {} (the second is handles[{}] '{}')",
             h.global_rank, i, detail::printable(options.handles[i]));
    seen.push_back(h.global_rank);
    found = found || options.handles[i] == mine;
    if (meet.empty() || h.store < meet) meet = h.store;
  }
  TS_CHECK(found, ValueError,
           "reconfigure(): this rank's handle '{}' is not among the {} handles given (every new "
           "member passes its own)",
           mine, options.handles.size());

  BackendPtr old;
  std::thread previous;
  {
    std::lock_guard lock(mutex_);
    TS_CHECK(!stopping_, distributed::DistBackendError,
             "reconfigure(): group '{}' was shut down (destroy_process_group)", group_);
    TS_CHECK(reconfiguring_.empty(), distributed::DistBackendError,
             "reconfigure(): group '{}' is still reconfiguring (uuid '{}'); wait for that "
             "reconfigure's Work first",
             group_, reconfiguring_);
    TS_CHECK(used_uuids_.insert(options.uuid).second, ValueError,
             "reconfigure(): uuid '{}' was used by an earlier reconfigure of group '{}'; every "
             "reconfigure needs a fresh one",
             options.uuid, group_);
    reconfiguring_ = options.uuid;
    old = std::move(current_);
    previous = std::move(worker_);
  }
  if (previous.joinable()) previous.join();  // finished: reconfiguring_ was clear

  // 2. Revoke: the old communicator's pending work fails with this reason, its peers are
  // told, and the abort hooks run.
  auto work = std::make_shared<Work>("reconfigure", std::vector<Tensor>{}, timeout);
  work->mark_started();
  if (old)
    old->abort(
        fmt::format("group '{}' is reconfiguring to a new membership (uuid '{}', {} members)",
                    group_, options.uuid, options.handles.size()));

  // 3-4 on a thread of their own.
  const Clock::time_point deadline = work->deadline();
  std::lock_guard lock(mutex_);
  worker_ = std::thread([this, options, meet, old = std::move(old), work, deadline]() mutable {
    try {
      bootstrap(options, meet, std::move(old), deadline);
      work->mark_completed();
      return;
    } catch (...) {
      std::exception_ptr e = std::current_exception();
      {
        std::lock_guard l(mutex_);
        reconfiguring_.clear();
        last_failure_ = e;
      }
      bool timed_out = Clock::now() >= deadline;
      try {
        std::rethrow_exception(e);
      } catch (const DistTimeoutError&) {
        timed_out = true;
      } catch (...) {
      }
      work->mark_failed(timed_out ? WorkStatus::TIMED_OUT : WorkStatus::ERROR, e);
    }
  });
  return work;
}

void ReconfigurableBackend::bootstrap(const ReconfigureOptions& options, const std::string& meet,
                                      BackendPtr old, Clock::time_point deadline) {
  // 3. Drain: after the abort every queued op has failed. The old communicator's threads are
  // joined by a reaper of their own: one may stay blocked until its op's deadline (a gloo
  // collective on a silent peer cannot be cancelled; it runs on private copies of its outputs),
  // and the new membership does not wait for it.
  if (old) {
    std::lock_guard lock(mutex_);
    hooks_.clear();
    reapers_.emplace_back([old = std::move(old)] {
      try {
        old->shutdown();
      } catch (...) {  // its errors are on its Works
      }
    });
  }

  // 4. The new membership, under its own namespace of the store `meet` (this rank's own, or
  // reached by its address).
  StorePtr rendezvous = store_;
  if (meet != store_->address()) {
    try {
      rendezvous = connect_store(meet, time_left(deadline));
    } catch (const Error& e) {
      TS_THROW(distributed::DistBackendError,
               "reconfigure(uuid '{}') of group '{}': cannot reach the rendezvous store '{}' "
               "(the smallest of the members' store addresses): {}",
               options.uuid, group_, meet, e.what());
    }
  }
  auto ns = std::make_shared<PrefixStore>("reconfigure/" + options.uuid, rendezvous);
  const int n = static_cast<int>(options.handles.size());
  // Every member must have been given the same handles (in the same order, when ordered).
  std::vector<std::string> handles = options.handles;
  if (!options.ordered) std::sort(handles.begin(), handles.end());
  const std::string joined =
      fmt::format("{}{}", options.ordered ? "ordered:" : "unordered:", fmt::join(handles, ","));
  const std::string agreed =
      as_text(ns->compare_set("handles", Bytes{}, Bytes(joined.begin(), joined.end())));
  TS_CHECK(agreed == joined, distributed::DistBackendError,
           "reconfigure(uuid '{}'): the members disagree on the handles: this rank (global {}) "
           "has [{}], another member [{}]",
           options.uuid, global_rank_, joined, agreed);
  int rank = 0;
  if (options.ordered) {
    const std::string mine = reconfigure_handle();
    rank = static_cast<int>(std::find(options.handles.begin(), options.handles.end(), mine) -
                            options.handles.begin());
  } else {
    rank = static_cast<int>(ns->add("rank_counter", 1) - 1);  // first come, first served
    TS_CHECK(rank < n, distributed::DistBackendError,
             "reconfigure(uuid '{}'): more members joined than the {} handles name", options.uuid,
             n);
  }
  const std::string key = fmt::format("member/{}", rank);
  const std::string me = std::to_string(global_rank_);
  ns->set(key, Bytes(me.begin(), me.end()));
  std::vector<std::string> keys;
  for (int r = 0; r < n; ++r) keys.push_back(fmt::format("member/{}", r));
  try {
    ns->wait(keys, time_left(deadline));
  } catch (const Error& e) {
    std::vector<int> missing;
    for (int r = 0; r < n; ++r)
      if (!ns->check({keys[static_cast<size_t>(r)]})) missing.push_back(r);
    TS_THROW(distributed::DistTimeoutError,
             "reconfigure(uuid '{}') of group '{}': new ranks {} never joined the rendezvous ({} "
             "of {} did): {}",
             options.uuid, group_, fmt::join(missing, ", "), n - static_cast<int>(missing.size()),
             n, e.what());
  }
  std::vector<int> members;
  for (const auto& k : keys) members.push_back(std::stoi(as_text(ns->get(k))));
  BackendPtr comm = make_(std::make_shared<PrefixStore>("comm", ns), rank, n, time_left(deadline));
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      comm->shutdown();
      TS_THROW(distributed::DistBackendError,
               "reconfigure(uuid '{}'): group '{}' was shut down while it reconfigured",
               options.uuid, group_);
    }
  }
  install(std::move(comm), rank, n, std::move(members));
}

void ReconfigurableBackend::install(BackendPtr comm, int rank, int size, std::vector<int> members) {
  // The abort hooks registered here see every generation's aborts.
  HookHandle hook = comm->register_abort_hook([this](const std::string& r) { run_abort_hooks(r); });
  std::lock_guard lock(mutex_);
  current_ = std::move(comm);
  hooks_.clear();
  hooks_.push_back(std::move(hook));
  const bool reconfigured = !reconfiguring_.empty();
  members_ = std::move(members);
  rank_now_ = rank;
  size_now_ = size;
  if (reconfigured) {
    ++generation_;
    generation_id_ = reconfiguring_;
  }
  reconfiguring_.clear();
  last_failure_ = nullptr;
}

std::string ReconfigurableBackend::generation_id() const {
  std::lock_guard lock(mutex_);
  return generation_id_;
}

std::vector<int> ReconfigurableBackend::member_global_ranks() const {
  std::lock_guard lock(mutex_);
  return members_;
}

BackendPtr ReconfigurableBackend::forward_to() {
  std::lock_guard lock(mutex_);
  if (current_) return current_;
  TS_CHECK(reconfiguring_.empty(), distributed::DistBackendError,
           "group '{}' is reconfiguring (uuid '{}'): wait for the reconfigure's Work before "
           "issuing ops",
           group_, reconfiguring_);
  TS_CHECK(!stopping_, distributed::DistBackendError,
           "group '{}' was shut down (destroy_process_group)", group_);
  if (last_failure_) {
    TS_THROW(distributed::DistBackendError,
             "group '{}' has no communicator: its last reconfigure failed ({}); reconfigure again",
             group_, exception_message(last_failure_));
  }
  TS_THROW(distributed::DistBackendError,
           "group '{}' has no communicator yet: it was made without a membership, so call "
           "reconfigure() first",
           group_);
}

void ReconfigurableBackend::abort(const std::string& reason) {
  BackendPtr comm;
  {
    std::lock_guard lock(mutex_);
    comm = current_;
  }
  if (comm) comm->abort(reason);  // graceful: a reconfigure can follow
}

void ReconfigurableBackend::shutdown() {
  std::thread worker;
  BackendPtr comm;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    worker = std::move(worker_);
  }
  if (worker.joinable()) worker.join();  // bounded by the reconfigure's deadline
  std::vector<std::thread> reapers;
  {
    std::lock_guard lock(mutex_);
    comm = current_;
    reapers.swap(reapers_);
  }
  if (comm) comm->shutdown();
  for (auto& r : reapers) r.join();  // each bounded by its old ops' deadlines
}

bool ReconfigurableBackend::supports_window() const {
  std::lock_guard lock(mutex_);
  return current_ && current_->supports_window();
}

MemoryStats ReconfigurableBackend::memory_stats() const {
  BackendPtr comm;
  {
    std::lock_guard lock(mutex_);
    comm = current_;
  }
  return comm ? comm->memory_stats() : MemoryStats{};
}

std::exception_ptr ReconfigurableBackend::error() const {
  std::lock_guard lock(mutex_);
  return current_ ? current_->error() : nullptr;
}

}  // namespace tessera::distributed
