// ft::Lighthouse and ft::Manager with replicas as threads: quorums, a replica that leaves,
// one that joins late and heals, proactive aborts, and the majority rule.
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

#include "dist_test_util.h"
#include "distributed/ft/protocol.h"
#include "tessera/distributed/ft.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
namespace ft = dist::ft;

ft::LighthouseOptions quick_lighthouse(int min_replicas = 1,
                                       std::chrono::milliseconds join_window = 5s) {
  ft::LighthouseOptions o;
  o.min_replicas = min_replicas;
  o.heartbeat_timeout = 3s;  // no false deaths on a loaded machine (or under ASan)
  // By default long enough that no live replica is ever left out of a round on a loaded
  // machine: the tests' replicas leave only by dying or being marked dead (failure windows are
  // short). Tests of the join window itself pass a short one.
  o.join_window = join_window;
  return o;
}

// One replica of a tiny data-parallel job: weights w (float32 [8]); the gradient of step s on
// replica i is (i + 1) * (s + 1) * 0.01 per element, averaged over the quorum.
struct Replica {
  Replica(const dist::StorePtr& store, int id, const std::string& backend)
      : w(zeros({8}, TensorOptions(kFloat32))) {
    ft::ManagerOptions o;
    o.store = store;
    o.replica_id = id;
    o.backend = backend;
    o.timeout = 5s;  // also how long a gloo collective left on a dead peer lingers
    o.quorum_timeout = 20s;
    o.heartbeat_interval = 20ms;
    o.state_dict = [this] { return ft::StateDict{{"w", w}}; };
    manager = std::make_unique<ft::Manager>(o);
  }
  // One training step; true when it committed.
  bool step() {
    manager->start_quorum();
    return train();
  }
  // The step after start_quorum(): gradient, all-reduce, vote, update.
  bool train() {
    const double g = (manager->replica_id() + 1) * (manager->current_step() + 1) * 0.01;
    Tensor grad = full({8}, g, TensorOptions(kFloat32));
    manager->allreduce(grad);
    if (!manager->should_commit()) return false;
    w.sub_(grad.mul(0.5));
    return true;
  }
  std::vector<uint8_t> bytes() const { return bytes_of(w); }

  Tensor w;
  std::unique_ptr<ft::Manager> manager;
};

class Ft : public ::testing::TestWithParam<std::string> {};

// The threads of a test job meet here (a std::barrier with a deadline).
class AllHere {
 public:
  explicit AllHere(int n) : left_(n) {}
  // Returns once all n threads have arrived, or fails the test after 30 s (a thread that threw
  // never arrives; nobody hangs on it).
  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    if (--left_ == 0) arrived_.notify_all();
    if (!arrived_.wait_for(lock, 30s, [&] { return left_ <= 0; }))
      ADD_FAILURE() << left_ << " thread(s) never reached the end of the job";
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  int left_;
};

// The end of a test job: every replica's collectives are done (the group barrier), then every
// thread is past that barrier before any replica leaves. A replica that leaves tells the
// Lighthouse at once, which aborts the others' group; one still finishing its side of the
// barrier (gloo's completes on one rank before another) failed with "the lighthouse declared
// replica 0 dead".
void leave_together(Replica& r, AllHere& everyone) {
  r.manager->group()->barrier()->wait();
  everyone.arrive_and_wait();
}

TEST_P(Ft, ReplicasTrainInStepWithOneQuorum) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(4));
  std::vector<std::vector<uint8_t>> final(4);
  AllHere end(4);
  run_threads(4, [&](int id) {
    Replica r(store, id, GetParam());
    for (int s = 0; s < 5; ++s) EXPECT_TRUE(r.step());
    EXPECT_EQ(r.manager->current_step(), 5);
    EXPECT_EQ(r.manager->num_participants(), 4);
    EXPECT_EQ(r.manager->quorum_id(), 1);  // the same members every round: no reconfigure
    EXPECT_FALSE(r.manager->healed());
    final[static_cast<size_t>(id)] = r.bytes();
    leave_together(r, end);  // nobody leaves while others still vote
  });
  for (int i = 1; i < 4; ++i) EXPECT_EQ(final[static_cast<size_t>(i)], final[0]) << i;
  EXPECT_EQ(lighthouse.quorum_id(), 1);
  EXPECT_GE(lighthouse.rounds(), 5);
}

TEST_P(Ft, SurvivorsGoOnWhenAReplicaLeavesMidJob) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  // One replica may go on alone at the end, when a slow one was left out of the last round and
  // the others have left.
  ft::Lighthouse lighthouse(store, quick_lighthouse(1));
  std::vector<std::vector<uint8_t>> final(4);
  std::atomic<int> failed_steps{0};
  std::barrier registered(4);
  AllHere end(3);  // the three survivors
  run_threads(4, [&](int id) {
    Replica r(store, id, GetParam());
    // Every replica registered before anyone asks: with min_replicas 1 a round may otherwise
    // form before a slow (sanitized) replica exists, and its late join fails a step.
    registered.arrive_and_wait();
    for (int s = 0; s < 3; ++s) EXPECT_TRUE(r.step());
    if (id == 3) {
      // Leaves in the middle of step 4: it joins the quorum, then its process "dies" (its
      // group and heartbeat go away without a vote).
      r.manager->start_quorum();
      lighthouse.mark_dead(3);
      return;
    }
    while (r.manager->current_step() < 8) {
      if (!r.step()) ++failed_steps;
    }
    EXPECT_LE(r.manager->num_participants(), 3);
    final[static_cast<size_t>(id)] = r.bytes();  // after the same 8 committed steps
    leave_together(r, end);  // a survivor that left first could abort another's last vote
  });
  for (int i = 1; i < 3; ++i) EXPECT_EQ(final[static_cast<size_t>(i)], final[0]) << i;
  EXPECT_GE(failed_steps.load(), 1);  // the step replica 3 left in failed everywhere
  EXPECT_GE(lighthouse.quorum_id(), 2);
}

TEST_P(Ft, ALateReplicaHealsFromAHealthyPeer) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(2));
  std::vector<std::vector<uint8_t>> final(3);
  std::atomic<bool> late_started{false};
  AllHere end(3);
  run_threads(3, [&](int id) {
    if (id == 2) std::this_thread::sleep_for(200ms);  // the others are steps ahead by now
    Replica r(store, id, GetParam());
    if (id == 2) late_started = true;  // registered and beating: it counts as live
    int committed = 0;
    while (r.manager->current_step() < 12) {
      while (id != 2 && r.manager->current_step() >= 6 && !late_started) {
        std::this_thread::sleep_for(5ms);  // wait for the late one before the last steps
      }
      if (r.step()) ++committed;
      if (id == 2 && committed == 1) {
        EXPECT_TRUE(r.manager->healed() || r.manager->current_step() <= 1);
      }
    }
    final[static_cast<size_t>(id)] = r.bytes();
    EXPECT_EQ(r.manager->num_participants(), 3);
    leave_together(r, end);
  });
  EXPECT_EQ(final[1], final[0]);
  EXPECT_EQ(final[2], final[0]);  // healed: the same weights, bit for bit
}

TEST_P(Ft, TheLighthouseAbortsACollectiveBlockedOnADeadReplica) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(2));
  std::barrier registered(3);
  AllHere end(2);  // the two survivors
  run_threads(3, [&](int id) {
    Replica r(store, id, GetParam());
    registered.arrive_and_wait();  // all three in the first round (see above)
    EXPECT_TRUE(r.step());
    if (id == 2) {
      r.manager->start_quorum();
      // Hangs: never reaches the all_reduce, until the lighthouse is told it is dead.
      std::this_thread::sleep_for(300ms);
      lighthouse.mark_dead(2);
      std::this_thread::sleep_for(300ms);
      return;
    }
    r.manager->start_quorum();
    const auto t0 = std::chrono::steady_clock::now();
    Tensor g = ones({8}, TensorOptions(kFloat32));
    EXPECT_FALSE(r.manager->allreduce(g));  // aborted by the heartbeat, not by the timeout
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    EXPECT_FALSE(r.manager->should_commit());
    EXPECT_TRUE(r.step());
    EXPECT_EQ(r.manager->num_participants(), 2);
    leave_together(r, end);
  });
}

// The job's end: a replica that stalled is left out of the last rounds (the others form
// quorums without it after the join window). When it asks again, the others have finished; with
// min_replicas 2 it could not form a quorum alone, so finish() keeps them in the rounds and it
// heals to the last step from them.
TEST_P(Ft, FinishedReplicasHealAStragglerLeftOutOfTheLastRounds) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::LighthouseOptions lo = quick_lighthouse(2);
  lo.join_window = 100ms;  // two of three go on without the stalled one
  ft::Lighthouse lighthouse(store, lo);
  constexpr int64_t kSteps = 6;
  std::vector<std::vector<uint8_t>> final(3);
  std::vector<int64_t> last_step(3, -1);
  std::atomic<bool> straggler_healed{false};
  std::barrier registered(3);
  run_threads(3, [&](int id) {
    Replica r(store, id, GetParam());
    registered.arrive_and_wait();
    while (r.manager->current_step() < kSteps) {
      if (id == 2 && r.manager->current_step() == 2) std::this_thread::sleep_for(1500ms);
      r.manager->start_quorum();
      if (r.manager->current_step() >= kSteps) {  // healed to the end
        if (id == 2 && r.manager->healed()) straggler_healed = true;
        break;
      }
      r.train();
    }
    r.manager->finish();
    last_step[static_cast<size_t>(id)] = r.manager->current_step();
    final[static_cast<size_t>(id)] = r.bytes();
  });
  EXPECT_TRUE(straggler_healed.load());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(last_step[static_cast<size_t>(i)], kSteps) << i;
    EXPECT_EQ(final[static_cast<size_t>(i)], final[0]) << i;
  }
}

// A replica restarted near the job's end: its new process registers, then takes long to ask.
// The finished replicas must not end the job without it (they would strand it alone, below
// min_replicas): the final round waits for a replica marked as restarting, and then until
// every registered, living replica has asked.
TEST_P(Ft, TheJobsEndWaitsForARestartedReplica) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(2, 100ms));
  constexpr int64_t kSteps = 4;
  std::vector<std::vector<uint8_t>> final(3);
  std::barrier registered(3);
  run_threads(3, [&](int id) {
    auto replica = std::make_unique<Replica>(store, id, GetParam());
    registered.arrive_and_wait();
    EXPECT_TRUE(replica->step());
    if (id == 2) {  // dies, and its restarted process starts slowly
      replica->manager->start_quorum();
      // As the launcher does: it will restart the replica. (A gloo Manager's shutdown below
      // waits up to 5 s for its abandoned collective; the others may finish meanwhile.)
      lighthouse.mark_dead(2, /*restarting=*/true);
      replica.reset();
      replica = std::make_unique<Replica>(store, 2, GetParam());
      std::this_thread::sleep_for(1500ms);
    }
    while (replica->manager->current_step() < kSteps) {
      replica->manager->start_quorum();
      if (replica->manager->current_step() >= kSteps) break;
      replica->train();
    }
    replica->manager->finish();
    EXPECT_EQ(replica->manager->current_step(), kSteps) << id;
    final[static_cast<size_t>(id)] = replica->bytes();
  });
  EXPECT_EQ(final[1], final[0]);
  EXPECT_EQ(final[2], final[0]);  // healed from the finished replicas
}

INSTANTIATE_TEST_SUITE_P(Backends, Ft, ::testing::Values("gloo", "shm"),
                         [](const auto& info) { return info.param; });

TEST(FtQuorum, AMinorityNeverFormsAQuorum) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(1));
  // Three replicas heartbeat; only one asks: 1 of 3 live is no majority.
  ft::ManagerOptions o;
  o.store = store;
  o.timeout = 5s;
  o.quorum_timeout = 800ms;
  o.heartbeat_interval = 20ms;
  std::vector<std::unique_ptr<ft::Manager>> managers;
  for (int id = 0; id < 3; ++id) {
    o.replica_id = id;
    managers.push_back(std::make_unique<ft::Manager>(o));
  }
  // All three join once (now they count as live) ...
  run_threads(3, [&](int id) { managers[static_cast<size_t>(id)]->start_quorum(); });
  EXPECT_EQ(lighthouse.rounds(), 1);
  // ... then only one asks again.
  try {
    managers[0]->start_quorum();
    ADD_FAILURE() << "a minority formed a quorum";
  } catch (const dist::DistTimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("found no quorum"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lighthouse.rounds(), 1);
}

// A replica that speaks the protocol by hand (registration, heartbeat, requests), so that a
// test can play out an interleaving that Managers produce only by chance.
struct ScriptedReplica {
  // `first_seq`: a restarted replica's requests must number above its earlier life's.
  ScriptedReplica(dist::StorePtr s, int id, int64_t first_seq = 1000)
      : store(std::move(s)), id(id), seq(first_seq) {
    ft::append_slot(*store, ft::kRegisteredKey, ft::kRegisterPrefix, fmt::format("{} {}", id, seq));
    beat = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested()) {
        store->add(ft::heartbeat_key(this->id), 1);
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  void ask(int64_t step, bool failed, bool finishing = false) {
    const ft::Request r{++seq, step, failed, false, finishing, fmt::format("h{}-{}", id, life)};
    ft::set_text(*store, ft::request_key(id), ft::format_request(r));
    store->add(ft::kRequestCountKey, 1);
  }
  // The round the last request was placed in.
  ft::Quorum answer() {
    const std::string key = ft::answer_key(id, seq);
    store->wait({key}, 10s);
    const int64_t round = std::stoll(ft::get_text(*store, key));
    return ft::parse_quorum(ft::get_text(*store, ft::quorum_key(round)), round);
  }

  dist::StorePtr store;
  int id;
  int64_t seq;
  int64_t life = seq;
  std::jthread beat;
};

std::vector<int> member_ids(const ft::Quorum& q) {
  std::vector<int> ids;
  for (const auto& m : q.members) ids.push_back(m.id);
  return ids;
}

// Replicas 0..n-1 register and ask at step 0; the first round holds them all.
std::vector<std::unique_ptr<ScriptedReplica>> first_round(const dist::StorePtr& store, int n) {
  std::vector<std::unique_ptr<ScriptedReplica>> r;
  std::vector<int> ids;
  for (int id = 0; id < n; ++id) {
    r.push_back(std::make_unique<ScriptedReplica>(store, id));
    ids.push_back(id);
  }
  for (auto& x : r) x->ask(0, false);
  for (auto& x : r) EXPECT_EQ(member_ids(x->answer()), ids);
  return r;
}

// A vote can end differently on two members: one saw every vote and committed, the other's
// group was aborted first. Here replica 0 committed step 1 and replicas 1 and 2 failed it. They
// must not train step 1 again without replica 0 (alive, only slow to ask): both sides would
// then hold different weights under one step number. The round waits for it, and they heal.
TEST(FtQuorum, AFailedVoteNeverTrainsWithoutAMemberThatMayHaveCommitted) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(2, 200ms));
  auto r = first_round(store, 3);

  r[1]->ask(0, true);
  r[2]->ask(0, true);
  std::this_thread::sleep_for(300ms);  // 10x the failure window: {1, 2} is a majority of 3
  EXPECT_EQ(lighthouse.rounds(), 1) << "replicas 1 and 2 formed a round without replica 0";
  r[0]->ask(1, false);
  const ft::Quorum q = r[1]->answer();
  EXPECT_EQ(member_ids(q), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(q.max_step, 1);  // 1 and 2 heal from 0

  // A straggler that cannot be ahead (it was in that round too) holds nobody up: after the
  // join window the others go on without it.
  r[0]->ask(2, false);
  r[1]->ask(2, false);
  EXPECT_EQ(member_ids(r[0]->answer()), (std::vector<int>{0, 1}));
}

// The replicas that start first must not train (or even finish the job) before the others
// have registered: the first round waits for every replica the job starts with.
TEST(FtQuorum, TheFirstRoundWaitsForTheReplicasTheJobStartsWith) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::LighthouseOptions lo = quick_lighthouse(2);
  lo.expected_replicas = 3;
  ft::Lighthouse lighthouse(store, lo);
  std::vector<std::unique_ptr<ScriptedReplica>> r;
  for (int id = 0; id < 2; ++id) {
    r.push_back(std::make_unique<ScriptedReplica>(store, id));
    r.back()->ask(0, false);
  }
  std::this_thread::sleep_for(300ms);  // 0 and 1 are every replica registered so far
  EXPECT_EQ(lighthouse.rounds(), 0) << "the first round formed before replica 2 registered";
  r.push_back(std::make_unique<ScriptedReplica>(store, 2));
  r.back()->ask(0, false);
  for (auto& x : r) EXPECT_EQ(member_ids(x->answer()), (std::vector<int>{0, 1, 2}));
}

// Registered is not enough: a replica slow to ask (a sanitized worker building its model)
// still holds the first round, past the join window, until it asks; otherwise the two that
// asked first would train steps the third then trains again on its own under the same numbers
// (seen in `tessera launch --ft` under ASan). Later rounds do not wait for it (see above).
TEST(FtQuorum, TheFirstRoundWaitsForEveryReplicaToAsk) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::LighthouseOptions lo = quick_lighthouse(2, 100ms);
  lo.expected_replicas = 3;
  lo.start_window = 10s;
  ft::Lighthouse lighthouse(store, lo);
  std::vector<std::unique_ptr<ScriptedReplica>> r;
  for (int id = 0; id < 3; ++id) r.push_back(std::make_unique<ScriptedReplica>(store, id));
  r[0]->ask(0, false);
  r[1]->ask(0, false);
  std::this_thread::sleep_for(400ms);  // four join windows
  EXPECT_EQ(lighthouse.rounds(), 0) << "the first round formed before replica 2 asked";
  r[2]->ask(0, false);
  for (auto& x : r) EXPECT_EQ(member_ids(x->answer()), (std::vector<int>{0, 1, 2}));
}

// The launcher saw replica 2 die and restarts it. Replicas 0 and 1 finish before the new
// process registers: the job's end waits for it (they would otherwise leave it to train the
// job again on its own), and it heals from them.
TEST(FtEnd, TheJobsEndWaitsForAReplicaBeingRestarted) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(2, 100ms));
  auto r = first_round(store, 3);
  r[2].reset();
  lighthouse.mark_dead(2, /*restarting=*/true);
  r[0]->ask(5, false, /*finishing=*/true);
  r[1]->ask(5, false, /*finishing=*/true);
  EXPECT_FALSE(r[0]->answer().final) << "the job ended while replica 2 was being restarted";
  std::this_thread::sleep_for(200ms);  // the restarted process starts slowly
  r[2] = std::make_unique<ScriptedReplica>(store, 2, 2000);
  r[0]->ask(5, false, true);
  r[1]->ask(5, false, true);
  r[2]->ask(0, false);
  const ft::Quorum q = r[2]->answer();
  EXPECT_FALSE(q.final);
  EXPECT_EQ(member_ids(q), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(q.max_step, 5);  // it heals from the finished replicas
  for (auto& x : r) x->ask(5, false, true);
  for (auto& x : r) EXPECT_TRUE(x->answer().final);
}

// Launchers on other nodes reach the Lighthouse through the store: their marks declare
// replicas dead (the Managers read the dead list).
TEST(FtQuorum, LaunchersMarkReplicasDeadThroughTheStore) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(1));
  ft::LighthouseClient client(store);
  auto r = first_round(store, 2);
  const auto dead_list = [&] { return ft::parse_ids(ft::get_text(*store, ft::kDeadKey)); };
  const auto within = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(2ms);
    return done();
  };
  client.mark_dead(1, /*restarting=*/true);
  EXPECT_TRUE(within([&] { return dead_list() == std::vector<int>{1}; }));
  client.mark_dead(0);
  EXPECT_TRUE(within([&] { return dead_list() == std::vector<int>{0, 1}; }));
  EXPECT_TRUE(client.stale().empty());
  // A restarted replica 1 asks again: alive, off the list.
  r[1] = std::make_unique<ScriptedReplica>(store, 1, 2000);
  r[1]->ask(0, false);
  EXPECT_TRUE(within([&] { return dead_list() == std::vector<int>{0}; }));
}

// A replica that starts after the job's end (every other one finished) is told so at once,
// not left to time out: its Manager's start_quorum() throws, naming the final step.
TEST(FtEnd, AReplicaThatStartsAfterTheJobsEndIsToldSo) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::Lighthouse lighthouse(store, quick_lighthouse(2, 100ms));
  auto r = first_round(store, 2);
  for (auto& x : r) x->ask(3, false, /*finishing=*/true);
  for (auto& x : r) EXPECT_TRUE(x->answer().final);
  r.push_back(std::make_unique<ScriptedReplica>(store, 2));
  r.back()->ask(0, false);
  const ft::Quorum q = r.back()->answer();
  EXPECT_TRUE(q.final);
  EXPECT_EQ(q.max_step, 3);
  ft::ManagerOptions o;
  o.store = store;
  o.replica_id = 3;
  o.backend = "shm";
  o.quorum_timeout = 20s;
  o.heartbeat_interval = 20ms;
  ft::Manager late(o);  // (a timeout would say "found no quorum" instead)
  expect_error_mentions([&] { late.start_quorum(); },
                        {"replica 3", "after the job ended", "step 3"});
}

TEST(FtProtocol, TextsRoundTripAndMalformedOnesAreRefused) {
  ft::Request req{7, 12, false, false, true, "gloo:1:abc:s"};
  const ft::Request back = ft::parse_request(ft::format_request(req));
  EXPECT_EQ(back.seq, 7);
  EXPECT_EQ(back.step, 12);
  EXPECT_TRUE(back.finishing);
  EXPECT_FALSE(back.failed || back.leaving);
  ft::Quorum q;
  q.quorum_id = 3;
  q.max_step = 12;
  q.final = true;
  q.members = {{0, 12, "h0"}, {2, 9, "h2"}};
  const ft::Quorum qb = ft::parse_quorum(ft::format_quorum(q), 5);
  EXPECT_EQ(qb.round, 5);
  EXPECT_TRUE(qb.final);
  ASSERT_EQ(qb.members.size(), 2u);
  EXPECT_EQ(qb.members[1].step, 9);
  EXPECT_EQ(qb.members[1].handle, "h2");
  EXPECT_EQ(ft::parse_registration("3 1700000000000000").first_seq, 1700000000000000);
  for (const char* bad : {"3", "-1 5", "3 5 6", "x 5"})
    EXPECT_THROW(ft::parse_registration(bad), dist::DistStoreError) << bad;
  const ft::Mark mark = ft::parse_mark(ft::format_mark({5, true}));
  EXPECT_EQ(mark.id, 5);
  EXPECT_TRUE(mark.restarting);
  for (const char* bad : {"5", "5 2", "-5 1", "5 1 1", "x 0"})
    EXPECT_THROW(ft::parse_mark(bad), dist::DistStoreError) << bad;
  for (const char* bad : {"1 2 4 h", "1 2 33 h", "1 x 0 h", "1 2 0"})
    EXPECT_THROW(ft::parse_request(bad), dist::DistStoreError) << bad;
  for (const char* bad :
       {"3 12 1 2\n0 12 h0\n", "3 12 1\n0 12 h0\n", "3 12 2 0\n0 12 h0\n", "3 12 0 0\n"})
    EXPECT_THROW(ft::parse_quorum(bad, 1), dist::DistStoreError) << bad;
}

TEST(FtQuorum, BadOptionsAreRefused) {
  auto store = std::make_shared<dist::HashStore>(kTestTimeout);
  ft::ManagerOptions o;
  EXPECT_THROW(ft::Manager{o}, ValueError);  // no store
  o.store = store;
  EXPECT_THROW(ft::Manager{o}, ValueError);  // no replica id
  o.replica_id = 0;
  o.backend = "lazy";
  EXPECT_THROW(ft::Manager{o}, ValueError);
  ft::LighthouseOptions l;
  l.min_replicas = 0;
  EXPECT_THROW(ft::Lighthouse(store, l), ValueError);
  l.min_replicas = 1;
  l.expected_replicas = -1;
  EXPECT_THROW(ft::Lighthouse(store, l), ValueError);
}

}  // namespace
}  // namespace tessera::testing
