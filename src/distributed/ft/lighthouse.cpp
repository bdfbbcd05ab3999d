// The Lighthouse: forms quorums from the replicas' requests in the store (see ft.h for the
// keys and the rules).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "distributed/ft/protocol.h"
#include "tessera/distributed/ft.h"

namespace tessera::distributed::ft {

struct Lighthouse::Impl {
  struct Replica {
    int64_t heartbeat = -1;
    Clock::time_point heartbeat_moved;
    int64_t last_seq = 0;  // the last request seen
    std::optional<Request> pending;
    bool dead = false;
    bool stale = false;       // dead because its heartbeat stopped
    bool restarting = false;  // dead, and a new process is on its way
    bool joined = false;      // it asked for a quorum at least once
    // The highest step it can have reached: one past the max step of the last round it was
    // placed in (it heals to that step, then may commit the next).
    int64_t step_bound = 0;
    Clock::time_point registered;
  };

  Impl(StorePtr s, LighthouseOptions o) : store(std::move(s)), options(o) {
    TS_CHECK(store != nullptr, ValueError, "Lighthouse(): argument 'store' must not be null");
    TS_CHECK(options.min_replicas >= 1, ValueError,
             "Lighthouse(): option 'min_replicas' must be at least 1, but got {}",
             options.min_replicas);
    TS_CHECK(options.heartbeat_timeout.count() > 0 && options.poll_interval.count() > 0, ValueError,
             "Lighthouse(): heartbeat_timeout and poll_interval must be positive");
    TS_CHECK(options.expected_replicas >= 0, ValueError,
             "Lighthouse(): option 'expected_replicas' must not be negative, but got {}",
             options.expected_replicas);
    set_text(*store, kDeadKey, "");
    thread = std::thread([this] { loop(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    cv.notify_all();
    thread.join();
  }

  void loop() {
    Clock::time_point last_heartbeat_scan{};
    for (;;) {
      {
        std::unique_lock lock(mutex);
        cv.wait_for(lock, options.poll_interval, [&] { return stopping; });
        if (stopping) return;
      }
      try {
        const auto now = Clock::now();
        read_marks();  // before registrations: a restarted process registers after its mark
        discover();
        // A stopped replica is declared dead between heartbeat_timeout and that plus two scan
        // intervals: scan often (each scan is one store add per replica).
        if (now - last_heartbeat_scan >=
            std::min<Clock::duration>(options.heartbeat_timeout / 10, Milliseconds(20))) {
          scan_heartbeats(now);
          last_heartbeat_scan = now;
        }
        read_requests();
        maybe_form(now);
      } catch (const std::exception& e) {
        // The store went away (the job is ending) or held garbage: say it, keep trying.
        std::fprintf(stderr, "tessera lighthouse: %s\n", e.what());
      }
    }
  }

  // New replicas register a slot in the store. A replica that registers again is a new process
  // (restarted after its death): alive, starting, not joined yet.
  void discover() {
    bool dead_changed = false;
    for (const std::string& text :
         read_new_slots(*store, kRegisteredKey, kRegisterPrefix, registered)) {
      const Registration reg = parse_registration(text);
      std::lock_guard lock(mutex);
      Replica& r = replicas[reg.id];
      dead_changed = dead_changed || r.dead;
      r = Replica{};
      r.last_seq = reg.first_seq;  // an earlier life's requests are older
      r.heartbeat_moved = r.registered = Clock::now();
    }
    if (dead_changed) publish_dead();
  }

  // Launchers on any node declare replicas dead through the store (LighthouseClient), a slot
  // per mark, as replicas register.
  void read_marks() {
    for (const std::string& text : read_new_slots(*store, kMarkCountKey, kMarkPrefix, marks_seen)) {
      const Mark m = parse_mark(text);
      mark_dead(m.id, m.restarting);
    }
  }

  void mark_dead(int id, bool restarting) {
    {
      std::lock_guard lock(mutex);
      Replica& r = replicas[id];
      r.dead = true;
      r.stale = false;
      r.restarting = restarting;
      r.pending.reset();
    }
    publish_dead();
  }

  void scan_heartbeats(Clock::time_point now) {
    std::vector<int> ids;
    {
      std::lock_guard lock(mutex);
      for (const auto& [id, r] : replicas) ids.push_back(id);
    }
    bool changed = false;
    for (int id : ids) {
      const int64_t hb = store->add(heartbeat_key(id), 0);
      std::lock_guard lock(mutex);
      Replica& r = replicas[id];
      if (hb != r.heartbeat) {
        r.heartbeat = hb;
        r.heartbeat_moved = now;
      } else if (r.joined && !r.dead && !r.pending &&
                 now - r.heartbeat_moved > options.heartbeat_timeout) {
        r.dead = true;
        r.stale = true;
        changed = true;
      }
    }
    if (changed) publish_dead();
  }

  void read_requests() {
    const int64_t n = store->add(kRequestCountKey, 0);
    if (n == requests_seen) return;
    requests_seen = n;
    discover();  // a replica registers before it asks: whoever asked is known now
    std::vector<int> ids;
    {
      std::lock_guard lock(mutex);
      for (const auto& [id, r] : replicas) ids.push_back(id);
    }
    bool dead_changed = false;
    for (int id : ids) {
      const std::string key = request_key(id);
      if (!store->check({key})) continue;
      Request req = parse_request(get_text(*store, key));
      std::lock_guard lock(mutex);
      Replica& r = replicas[id];
      if (req.seq <= r.last_seq) continue;
      r.last_seq = req.seq;
      if (req.leaving) {  // gone now: nobody waits for it, and its quorum re-forms
        r.pending.reset();
        dead_changed = dead_changed || !r.dead;  // (publishes the dead list)
        r.dead = true;
        r.stale = false;
        continue;
      }
      if (!r.pending) first_pending = std::min(first_pending, Clock::now());
      r.joined = true;
      r.pending = std::move(req);
      r.heartbeat_moved = Clock::now();  // asking is a sign of life
      if (r.dead) {
        r.dead = false;
        r.stale = false;
        r.restarting = false;
        dead_changed = true;
      }
    }
    if (dead_changed) publish_dead();
  }

  void maybe_form(Clock::time_point now) {
    std::unique_lock lock(mutex);
    std::vector<int> live, asking;
    bool failure = false, all_finishing = true, starting = false;
    int ready = 0;  // replicas that asked at least once or died
    for (const auto& [id, r] : replicas) {
      ready += r.joined || r.dead;
      // A replica still starting (registered, not asked yet) holds a round up for at most
      // join_window after it registered; it holds the job's end up until it asks (or dies),
      // as does one being restarted.
      if (r.dead) {
        failure = failure || std::count(last_members.begin(), last_members.end(), id) > 0;
        starting = starting || r.restarting;
        continue;
      }
      starting = starting || !r.joined;
      if (!r.joined && now - r.registered >= options.join_window) continue;
      live.push_back(id);
      if (r.pending) {
        asking.push_back(id);
        failure = failure || r.pending->failed;
        all_finishing = all_finishing && r.pending->finishing;
      }
    }
    if (asking.empty()) return;
    // After the job's end (a final round), whoever asks started too late: it is told so at
    // once, in a final round of its own, rather than left to time out.
    const bool late = ended_step >= 0;
    bool final = late;
    if (!late) {
      const auto start_window =
          options.start_window.count() > 0 ? options.start_window : options.join_window;
      if (round == 0 && ready < options.expected_replicas && now - started < start_window)
        return;  // the job starts: some of its replicas have not asked yet
      const bool everyone = asking.size() == live.size();
      const auto window = failure ? options.failure_join_window : options.join_window;
      if (!everyone && now - first_pending < window) return;
      // Never without a live replica that may be ahead of every asker. A vote can end
      // differently on two members (one saw every vote, the other's group was aborted first):
      // the one that committed is a step ahead of the one that failed. Were the failed one to
      // train that step again without it, both would hold different states under one step
      // number. With it in the round, the failed one heals from it instead.
      int64_t asked_step = 0;
      for (int id : asking) asked_step = std::max(asked_step, replicas[id].pending->step);
      for (int id : live)
        if (!replicas[id].pending && replicas[id].step_bound > asked_step) return;
      // The job's end: every live replica finished. That round trains nothing, so it needs no
      // min_replicas (the survivors of a job that lost replicas must be able to end it).
      final = everyone && all_finishing && !starting;
      if (!final && (static_cast<int>(asking.size()) < options.min_replicas ||
                     2 * asking.size() <= live.size()))
        return;  // too few: wait for more (the askers time out on their own)
    }

    Quorum q;
    q.round = ++round;
    q.final = final;
    std::string identity;
    for (int id : asking) {
      const Request& req = *replicas[id].pending;
      q.members.push_back({id, req.step, req.handle});
      q.max_step = std::max(q.max_step, req.step);
      identity += fmt::format("{}={};", id, req.handle);
    }
    if (late) q.max_step = ended_step;
    if (final && !late) ended_step = q.max_step;
    if (identity != last_identity || failure) ++quorum;
    q.quorum_id = quorum;
    last_identity = identity;
    last_members = asking;
    std::vector<std::pair<int, int64_t>> answers;
    for (int id : asking) {
      Replica& r = replicas[id];
      answers.emplace_back(id, r.pending->seq);
      r.step_bound = q.max_step + (r.pending->finishing ? 0 : 1);  // a finished one trains no more
      r.pending.reset();
    }
    first_pending = Clock::time_point::max();
    lock.unlock();
    // The quorum first, then the answers that point to it.
    set_text(*store, quorum_key(q.round), format_quorum(q));
    for (const auto& [id, seq] : answers)
      set_text(*store, answer_key(id, seq), std::to_string(q.round));
  }

  // The dead replicas (the Managers abort collectives with them), and the stale ones among
  // them (their launchers kill them).
  void publish_dead() {
    std::vector<int> dead, stale;
    {
      std::lock_guard lock(mutex);
      for (const auto& [id, r] : replicas) {
        if (r.dead) dead.push_back(id);
        if (r.stale) stale.push_back(id);
      }
    }
    set_text(*store, kDeadKey, fmt::format("{}", fmt::join(dead, ",")));
    set_text(*store, kStaleKey, fmt::format("{}", fmt::join(stale, ",")));
  }

  StorePtr store;
  LighthouseOptions options;
  std::thread thread;
  mutable std::mutex mutex;  // guards everything below
  std::condition_variable cv;
  bool stopping = false;
  std::map<int, Replica> replicas;
  const Clock::time_point started = Clock::now();
  int64_t registered = 0;  // loop thread only
  int64_t marks_seen = 0;  // loop thread only
  int64_t requests_seen = 0;
  Clock::time_point first_pending = Clock::time_point::max();
  int64_t round = 0;
  int64_t quorum = 0;
  int64_t ended_step = -1;  // the final round's step, once the job ended
  std::string last_identity;
  std::vector<int> last_members;
};

Lighthouse::Lighthouse(StorePtr store, LighthouseOptions options)
    : impl_(std::make_unique<Impl>(std::move(store), options)) {}

Lighthouse::~Lighthouse() = default;

void Lighthouse::mark_dead(int id, bool restarting) {
  impl_->mark_dead(id, restarting);
}

LighthouseClient::LighthouseClient(StorePtr store) : store_(std::move(store)) {
  TS_CHECK(store_ != nullptr, ValueError, "LighthouseClient(): argument 'store' must not be null");
}

void LighthouseClient::mark_dead(int id, bool restarting) {
  append_slot(*store_, kMarkCountKey, kMarkPrefix, format_mark({id, restarting}));
}

std::vector<int> LighthouseClient::stale() const {
  if (!store_->check({kStaleKey})) return {};
  return parse_ids(get_text(*store_, kStaleKey));
}

std::vector<int> Lighthouse::stale() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<int> ids;
  for (const auto& [id, r] : impl_->replicas)
    if (r.stale) ids.push_back(id);
  return ids;
}

int64_t Lighthouse::rounds() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->round;
}

int64_t Lighthouse::quorum_id() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->quorum;
}

}  // namespace tessera::distributed::ft
