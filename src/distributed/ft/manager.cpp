// ft::Manager: a replica's side of the quorum (see ft.h).
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "distributed/ft/protocol.h"
#include "tessera/distributed/distributed.h"
#include "tessera/ops/factory.h"

namespace tessera::distributed::ft {

// Heartbeats into the store and, on every beat, aborts the group when the Lighthouse declared
// a member of the current quorum dead: a collective blocked on a stopped replica then fails
// at once instead of at its timeout (torchft's proactive recovery).
struct Manager::Heartbeat {
  Heartbeat(StorePtr s, int id, Milliseconds interval, ProcessGroupPtr g)
      : store(std::move(s)), id(id), interval(interval), group(std::move(g)) {
    thread = std::thread([this] { loop(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    cv.notify_all();
    thread.join();
  }

  void set_members(std::vector<int> ids) {
    std::lock_guard lock(mutex);
    members = std::move(ids);
  }

  void loop() {
    const std::string key = heartbeat_key(id);
    for (;;) {
      std::vector<int> current;
      {
        std::unique_lock lock(mutex);
        if (cv.wait_for(lock, interval, [&] { return stopping; })) return;
        current = members;
      }
      try {
        store->add(key, 1);
        if (current.empty() || !store->check({kDeadKey})) continue;
        const std::vector<int> dead = parse_ids(get_text(*store, kDeadKey));
        for (int d : dead) {
          if (std::find(current.begin(), current.end(), d) == current.end()) continue;
          group->abort(fmt::format("the lighthouse declared replica {} dead", d));
          set_members({});  // once per quorum
          break;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tessera ft: replica %d: heartbeat failed: %s\n", id, e.what());
      }
    }
  }

  StorePtr store;
  int id;
  Milliseconds interval;
  ProcessGroupPtr group;
  std::mutex mutex;
  std::condition_variable cv;
  bool stopping = false;
  std::vector<int> members;
  std::thread thread;
};

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {
  TS_CHECK(options_.store != nullptr, ValueError, "ft::Manager(): option 'store' must be set");
  TS_CHECK(options_.replica_id >= 0, ValueError,
           "ft::Manager(): option 'replica_id' must be non-negative, but got {}",
           options_.replica_id);
  TS_CHECK(options_.timeout.count() > 0 && options_.quorum_timeout.count() > 0 &&
               options_.heartbeat_interval.count() > 0,
           ValueError, "ft::Manager(): timeouts and the heartbeat interval must be positive");
  group_ = new_reconfigurable_group(options_.backend,
                                    std::make_shared<PrefixStore>("ft/group", options_.store),
                                    options_.replica_id, options_.timeout, "ft");
  // Request numbers go on from the wall clock, so that a restarted replica's never repeat its
  // earlier life's (the Lighthouse ignores old numbers, and answers are keyed by them).
  request_seq_ = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  // Registers with the Lighthouse (a slot, then "<id> <first request number>" in it: requests
  // of an earlier life, read late, are then ignored) and starts beating.
  append_slot(*options_.store, kRegisteredKey, kRegisterPrefix,
              fmt::format("{} {}", options_.replica_id, request_seq_));
  heartbeat_ = std::make_unique<Heartbeat>(options_.store, options_.replica_id,
                                           options_.heartbeat_interval, group_);
}

Manager::~Manager() {
  heartbeat_.reset();
  try {  // tells the Lighthouse at once, so that nobody waits for this replica
    Request req{++request_seq_, step_, false, true, false, group_->reconfigure_handle()};
    set_text(*options_.store, request_key(options_.replica_id), format_request(req));
    options_.store->add(kRequestCountKey, 1);
  } catch (...) {  // the store is gone (the job ends): the heartbeat's silence says the same
  }
  try {
    group_->shutdown();
  } catch (...) {  // a destructor must not throw; the errors are on the Works
  }
}

int Manager::num_participants() const {
  return static_cast<int>(members_.size());
}

Quorum Manager::request_round(bool failed, bool finishing) {
  Store& store = *options_.store;
  Request req{++request_seq_, step_, failed, false, finishing, group_->reconfigure_handle()};
  set_text(store, request_key(options_.replica_id), format_request(req));
  store.add(kRequestCountKey, 1);
  const std::string answer = answer_key(options_.replica_id, req.seq);
  try {
    store.wait({answer}, options_.quorum_timeout);
  } catch (const Error& e) {
    TS_THROW(distributed::DistTimeoutError,
             "ft::Manager: replica {} found no quorum within {} (too few live replicas ask, or "
             "no lighthouse runs): {}",
             options_.replica_id, options_.quorum_timeout, e.what());
  }
  const int64_t round = std::stoll(get_text(store, answer));
  return parse_quorum(get_text(store, quorum_key(round)), round);
}

void Manager::start_quorum() {
  const auto start = Clock::now();
  const auto deadline = start + options_.quorum_timeout;
  healed_ = false;
  bool failed = commit_failed_ || step_failed_;
  for (;;) {
    try {
      const Quorum q = request_round(failed, /*finishing=*/false);
      TS_CHECK(!q.final, RuntimeError,
               "ft::Manager: replica {} asked for a quorum after the job ended: the other replicas "
               "finished at step {} and left, so there is nothing to heal from or train with",
               options_.replica_id, q.max_step);
      join(q);
      commit_failed_ = step_failed_ = false;
      last_quorum_time_ = std::chrono::duration_cast<Milliseconds>(Clock::now() - start);
      return;
    } catch (const DistError& e) {
      failed = true;  // the next round re-forms the quorum
      quorum_id_ = -1;
      TS_CHECK(Clock::now() < deadline, distributed::DistTimeoutError,
               "ft::Manager: replica {} could not join a working quorum within {}: {}",
               options_.replica_id, options_.quorum_timeout, e.what());
    }
  }
}

void Manager::join(const Quorum& q) {
  std::vector<int> ids;
  std::vector<std::string> handles;
  for (const auto& m : q.members) {
    ids.push_back(m.id);
    handles.push_back(m.handle);
  }
  TS_CHECK(std::find(ids.begin(), ids.end(), options_.replica_id) != ids.end(),
           distributed::DistBackendError, "ft::Manager: round {} does not include replica {}",
           q.round, options_.replica_id);
  const std::string identity = fmt::format("{}", fmt::join(handles, ","));
  if (q.quorum_id != quorum_id_ || identity != quorum_handles_) {
    heartbeat_->set_members({});  // no proactive aborts while the group changes
    ReconfigureOptions o;
    o.uuid = fmt::format("ft-q{}-r{}", q.quorum_id, q.round);
    o.handles = handles;
    o.timeout = options_.timeout;
    quorum_id_ = -1;  // unless this reconfigure succeeds
    group_->reconfigure(o)->wait();
    quorum_id_ = q.quorum_id;
    quorum_handles_ = identity;
    members_ = ids;
    heartbeat_->set_members(ids);
  }
  heal(q);
}

void Manager::finish() {
  const auto deadline = Clock::now() + options_.quorum_timeout;
  for (;;) {
    try {
      const Quorum q = request_round(/*failed=*/false, /*finishing=*/true);
      if (q.final) return;
      // A replica still training asked too: it is behind (this one has finished), so it heals
      // from the round's source; then this one asks again.
      join(q);
      const bool nobody_behind = std::all_of(q.members.begin(), q.members.end(),
                                             [&](const Member& m) { return m.step == q.max_step; });
      // Only finished replicas: the others are still starting or training. Ask again a beat
      // later rather than spin through rounds.
      if (nobody_behind) std::this_thread::sleep_for(options_.heartbeat_interval);
    } catch (const DistError& e) {
      quorum_id_ = -1;  // the next round re-forms the group
      if (Clock::now() >= deadline) {
        std::fprintf(stderr,
                     "tessera ft: replica %d leaves at step %lld without waiting longer for the "
                     "others to finish: %s\n",
                     options_.replica_id, static_cast<long long>(step_), e.what());
        return;
      }
    }
  }
}

void Manager::heal(const Quorum& q) {
  // Every member sees the same plan: the lowest-id member at the highest step sends its state
  // to each member behind it.
  std::vector<int> behind;
  int source = -1;
  for (size_t i = 0; i < q.members.size(); ++i) {
    if (q.members[i].step < q.max_step) behind.push_back(static_cast<int>(i));
    if (source < 0 && q.members[i].step == q.max_step) source = static_cast<int>(i);
  }
  if (behind.empty()) return;
  const int me = group_->rank();
  const bool receiving = std::find(behind.begin(), behind.end(), me) != behind.end();
  if (me != source && !receiving) return;
  TS_CHECK(options_.state_dict != nullptr, ValueError,
           "ft::Manager: replica {} must {} state for healing, but option 'state_dict' is not "
           "set",
           options_.replica_id, receiving ? "receive" : "send");
  const StateDict state = options_.state_dict();
  std::vector<WorkPtr> works;
  for (size_t t = 0; t < state.size(); ++t) {
    SendRecvOptions o;
    o.tag = static_cast<int64_t>(t);
    o.timeout = options_.timeout;
    const Tensor& tensor = state[t].second;
    TS_CHECK(tensor.is_contiguous(), ValueError,
             "ft::Manager: state '{}' must be contiguous to heal in place", state[t].first);
    if (receiving) {
      works.push_back(group_->recv(tensor, source, o));
    } else {
      for (int b : behind) works.push_back(group_->send(tensor, b, o));
    }
  }
  for (auto& w : works) w->wait();
  if (receiving) {
    step_ = q.max_step;
    healed_ = true;
  }
}

bool Manager::allreduce(const Tensor& tensor) {
  if (step_failed_ || quorum_id_ < 0) {  // the group is broken already: do not wait on it
    step_failed_ = true;
    return false;
  }
  try {
    AllreduceOptions o;
    o.reduce_op = ReduceOp::AVG;
    group_->allreduce(tensor, o)->wait();
    return true;
  } catch (const DistError&) {
    step_failed_ = true;
    return false;
  }
}

bool Manager::should_commit() {
  bool ok = !step_failed_ && quorum_id_ >= 0;
  if (quorum_id_ >= 0) {
    try {  // every member votes, also one whose step failed (its vote is 0)
      Tensor vote = full({1}, ok ? 1.0 : 0.0, TensorOptions(kInt32));
      AllreduceOptions o;
      o.reduce_op = ReduceOp::MIN;
      group_->allreduce(vote, o)->wait();
      ok = vote.item<int64_t>() == 1;
    } catch (const DistError&) {
      ok = false;
    }
  }
  if (ok) {
    ++step_;
  } else {
    commit_failed_ = true;
  }
  step_failed_ = false;
  return ok;
}

}  // namespace tessera::distributed::ft
