// Fault tolerance for data-parallel training loops, after torchft: a Lighthouse that forms a
// quorum of replicas per step, and a Manager per replica that joins it, reconfigures the
// replicas' process group in place when the membership changes, heals a replica that is
// behind from a healthy peer, and gates the optimizer step (should_commit) so that every
// survivor takes the same steps. The pattern, in docs/fault-tolerance.md:
//
//   ft::Manager manager(options);                  // options.state: the model's tensors
//   while (manager.current_step() < steps) {
//     manager.start_quorum();                      // joins (or re-forms) the quorum; heals
//     if (manager.current_step() >= steps) break;  // healed to the end by finished replicas
//     compute the gradients;
//     for (auto& g : grads) manager.allreduce(g);  // averaged over the quorum's replicas
//     if (manager.should_commit()) optimizer.step();
//   }
//   manager.finish();                              // heals stragglers until all finished
//
// Everything goes through one Store that every replica and the Lighthouse reach (the
// launcher's TCPStore under `tessera launch --ft`), under the keys "ft/...":
//   ft/registered, ft/reg/<slot>  registrations: a slot each, holding "<id> <first request
//                          number>" (a restarted replica registers again: a new life)
//   ft/hb/<id>             a replica's heartbeat counter (its Manager adds 1 every interval)
//   ft/req/<id>            a replica's quorum request: "<seq> <step> <state> <handle>"
//                          (state 0: fine, 1: its last step failed, 2: it leaves, 3: it
//                          finished the job and waits for the others, see finish())
//   ft/ans/<id>/<seq>      the Lighthouse's answer: the round the request was placed in
//   ft/quorum/<round>      the round's quorum: "<quorum id> <max step> <n> <final>" then per
//                          member "<id> <step> <handle>" lines, members by replica id; final
//                          is 1 when every live replica asked as finished (the job is over)
//   ft/dead                the replicas the Lighthouse declared dead, "1,3" (may be empty)
//   ft/stale               those of them whose heartbeat stopped (their launcher kills them)
//   ft/marks, ft/mark/<slot>  launchers' marks (LighthouseClient::mark_dead): a slot each,
//                          holding "<id> <restarting 0|1>"
//
// Quorum rules (torchft's): a round forms when every live replica has asked, or, after a
// join window once some asked, with the askers alone when they are at least `min_replicas`
// and a majority of the live replicas (no split brain: two disjoint halves can never both form
// one). Live means: its heartbeat moved within `heartbeat_timeout` (or it asks now), it was
// not declared dead (a replica whose process the launcher saw exit is dead at once), and it
// has asked at least once or registered less than join_window ago (a replica still starting
// holds a round up for at most that long; one that starts later joins and heals at a later
// round). Nor does a round form without a live replica that may be ahead of every asker (one
// past the max step of the last round it was in): after a vote that ended differently on two
// members, the one that failed heals from the one that committed instead of training the step
// again on its own. The quorum id bumps whenever the members (or a member's handle: a
// restarted process) change, or when a member reports that its last step failed to commit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/distributed/process_group.h"
#include "tessera/distributed/store.h"

namespace tessera::distributed::ft {

struct Quorum;  // one round's members (src/distributed/ft/protocol.h)

struct LighthouseOptions {
  int min_replicas = 1;
  // A replica whose heartbeat counter has not moved for this long is dead.
  Milliseconds heartbeat_timeout{2000};
  // How long a round waits for the live replicas that have not asked yet, once one asked,
  // before forming with the askers alone (when they are a majority of the live ones).
  Milliseconds join_window{1000};
  // While a member of the last quorum reports a failed step, the round waits only this long.
  Milliseconds failure_join_window{30};
  // How often the Lighthouse looks at the store.
  Milliseconds poll_interval{2};
  // The replicas the job starts with (0: not known). The first round does not form until that
  // many have asked (or died), or start_window after the Lighthouse started: it then holds them
  // all. Otherwise the replicas that start first may train, even finish, before the others
  // ask (which would then start the job over on their own, under the same step numbers).
  int expected_replicas = 0;
  // How long the first round waits for expected_replicas; zero: join_window. (Launchers on
  // several nodes start at different times: `tessera launch --ft --nnodes` waits 5 minutes, on
  // one node 30 seconds.)
  Milliseconds start_window{0};
};

// Forms the quorums. Runs a thread of its own until destroyed; `tessera launch --ft` runs one
// beside the job's TCPStore. One per job.
class Lighthouse {
 public:
  Lighthouse(StorePtr store, LighthouseOptions options = {});
  ~Lighthouse();
  Lighthouse(const Lighthouse&) = delete;
  Lighthouse& operator=(const Lighthouse&) = delete;

  // Declares replica `id` dead now (the launcher saw its process exit): it no longer counts
  // as live, and the members of the current quorum abort their group at their next
  // heartbeat. A later request from `id` (a restarted process) makes it live again.
  // `restarting`: a new process for `id` is on its way. The job's end then waits for it (to
  // register and ask, or to be marked dead again without a restart): replicas that finish
  // meanwhile stay to heal it, rather than leave it to start the job over on its own.
  void mark_dead(int id, bool restarting = false);
  // The replicas declared dead because their heartbeat stopped (not those that left or were
  // marked dead); a replica leaves this list when it asks for a quorum again.
  std::vector<int> stale() const;
  // Rounds formed so far, and the current quorum id.
  int64_t rounds() const;
  int64_t quorum_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A launcher's hold on the Lighthouse from any node, through the job's store (the Lighthouse
// runs beside the store, on node 0): what Lighthouse::mark_dead and stale() do in the
// Lighthouse's own process. A mark takes effect at the Lighthouse's next poll.
class LighthouseClient {
 public:
  explicit LighthouseClient(StorePtr store);
  void mark_dead(int id, bool restarting = false);
  std::vector<int> stale() const;

 private:
  StorePtr store_;
};

// What a replica's state is for healing: named tensors, the same names, sizes and dtypes on
// every replica, written in place when the replica heals.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

struct ManagerOptions {
  StorePtr store;                       // the job's store (the Lighthouse's)
  int replica_id = -1;                  // stable across restarts (RANK under `tessera launch`)
  std::string backend = "gloo";         // the replicas' group: "gloo" or "shm"
  Milliseconds timeout{30'000};         // each collective, reconfigure and healing transfer
  Milliseconds quorum_timeout{60'000};  // waiting for a round to form
  Milliseconds heartbeat_interval{100};
  // The model's (and optimizer's) state, for healing; null: nothing to heal.
  std::function<StateDict()> state_dict;
};

class Manager {
 public:
  // Starts the heartbeat. Joins nothing yet: the first start_quorum() does.
  explicit Manager(ManagerOptions options);
  // Tells the Lighthouse that this replica leaves (the quorum re-forms without it at once),
  // stops the heartbeat and shuts the group down.
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Joins the next round. When the quorum changed it reconfigures the group (its ranks
  // follow the replica ids); when this replica is behind (a fresh or restarted one, or one
  // whose last commit failed while others succeeded) it receives the state and the step
  // from the lowest-id member at the highest step, and members ahead send it. Retries on
  // failure within quorum_timeout; DistTimeoutError after it. RuntimeError when the job has
  // ended already (every other replica finished and left before this one first asked).
  void start_quorum();
  // Averages `tensor` in place over the quorum's replicas. Never throws for a failure of the
  // group: it records it, returns false, and should_commit() then says no everywhere.
  bool allreduce(const Tensor& tensor);
  // True when every member's step succeeded (a vote over the group; false when the vote
  // itself fails). On true the step counts; on false the next round re-forms the quorum.
  bool should_commit();
  // Call once after the last step. Stays in the quorum until every live replica has finished
  // too. Meanwhile it joins the rounds of replicas still training: they are behind this one,
  // so they heal to its step (a training loop must check current_step() after start_quorum(),
  // as below). Without it, a replica left out of the last rounds (a slow one) would be
  // stranded once the others left: too few replicas for a quorum. Returns when the Lighthouse
  // sees every live replica finished. After quorum_timeout without such a round it says so
  // on stderr and returns.
  void finish();

  int64_t current_step() const { return step_; }
  int64_t quorum_id() const { return quorum_id_; }
  int num_participants() const;
  int replica_id() const { return options_.replica_id; }
  // Whether the last start_quorum() healed this replica, and how long it spent in it.
  bool healed() const { return healed_; }
  Milliseconds last_quorum_time() const { return last_quorum_time_; }
  const ProcessGroupPtr& group() const { return group_; }

 private:
  Quorum request_round(bool failed, bool finishing);
  void join(const Quorum& q);  // reconfigures when the quorum changed, then heals
  void heal(const Quorum& q);
  void heartbeat_loop();

  ManagerOptions options_;
  ProcessGroupPtr group_;
  int64_t step_ = 0;
  int64_t quorum_id_ = -1;
  std::string quorum_handles_;  // the members' handles of the configured quorum
  std::vector<int> members_;    // their replica ids
  int64_t request_seq_ = 0;
  bool step_failed_ = false;    // an allreduce failed in this step
  bool commit_failed_ = false;  // the last should_commit() said no
  bool healed_ = false;
  Milliseconds last_quorum_time_{0};
  struct Heartbeat;
  std::unique_ptr<Heartbeat> heartbeat_;
};

}  // namespace tessera::distributed::ft
