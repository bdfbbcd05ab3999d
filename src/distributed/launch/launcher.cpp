// `tessera launch`: the agent that runs one node's workers. See launch.h for the contract.
//
// Shape: launch() runs attempts; an attempt serves the store (node 0), starts a WorkerGroup
// and monitors it until every worker succeeded, one failed or the launcher was signalled.
// What happens after a failure is decided in one place: launch()'s loop tears the whole group
// down and restarts it while restarts are left; with --ft, run_ft() restarts only the dead
// worker and the others go on (WorkerGroup starts, watches and stops workers one by one).
//
// Signals: SIGINT, SIGTERM and SIGCHLD are caught by a handler that only writes the signal
// number to a pipe (async-signal-safe); the monitor loop polls that pipe with a timeout, so
// it never blocks without a deadline and whichever thread the kernel picks for a signal, the
// main loop sees it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "tessera/distributed/ft.h"
#include "tessera/distributed/launch.h"
#include "tessera/distributed/store.h"

extern char** environ;

namespace tessera::distributed {

namespace {

using std::chrono::milliseconds;

template <class... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  const std::string line =
      fmt::format("tessera launch: {}\n", fmt::format(format, std::forward<Args>(args)...));
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

// ---- signal relay ----------------------------------------------------------------------------

int g_relay_write_fd = -1;  // written by the handler only

extern "C" void relay_signal(int sig) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(sig);
  if (g_relay_write_fd >= 0) {
    [[maybe_unused]] const ssize_t n = ::write(g_relay_write_fd, &byte, 1);
  }
  errno = saved;
}

// Installs the handlers for its lifetime and restores the previous ones afterwards.
class SignalRelay {
 public:
  SignalRelay() {
    int fds[2];
    TS_CHECK(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, RuntimeError,
             "launch: could not create the signal pipe: {}", std::strerror(errno));
    read_fd_ = fds[0];
    write_fd_ = fds[1];
    g_relay_write_fd = write_fd_;
    struct sigaction sa {};
    sa.sa_handler = relay_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (int sig : kSignals) ::sigaction(sig, &sa, &previous_[sig]);
  }
  ~SignalRelay() {
    for (int sig : kSignals) ::sigaction(sig, &previous_[sig], nullptr);
    g_relay_write_fd = -1;
    ::close(read_fd_);
    ::close(write_fd_);
  }
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  // Waits until a signal arrives or `timeout` passes; returns the first SIGINT/SIGTERM seen
  // (0 when none: a timeout or only SIGCHLD).
  int wait(milliseconds timeout) {
    pollfd p{read_fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::max<int64_t>(timeout.count(), 0)));
    int stop = 0;
    unsigned char buf[64];
    ssize_t n;
    while ((n = ::read(read_fd_, buf, sizeof(buf))) > 0) {
      for (ssize_t i = 0; i < n; ++i)
        if (buf[i] != SIGCHLD && stop == 0) stop = buf[i];
    }
    return stop;
  }

  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGCHLD};

 private:
  int read_fd_ = -1, write_fd_ = -1;
  std::map<int, struct sigaction> previous_;
};

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// "exited with code 3" / "was killed by signal 9 (SIGKILL)", and the launcher's exit code
// for it (the shell's 128 + N for signal N).
std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, signal_name(sig));
  }
  return fmt::format("ended with wait status {:#x}", status);
}
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string random_hex(size_t bytes) {
  std::random_device rd;  // the kernel's random source
  std::string out;
  for (size_t i = 0; i < bytes; ++i) out += fmt::format("{:02x}", rd() & 0xff);
  return out;
}

// ---- workers ---------------------------------------------------------------------------------

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // the wait status once it ended
};

struct Failure {
  Worker worker;
  std::string why;  // "exited with code 3"
};

// The environment every worker of one attempt shares, minus the per-rank variables.
using Env = std::map<std::string, std::string>;

// One node's workers of one attempt. Workers are started, reaped and stopped one by one.
class WorkerGroup {
 public:
  WorkerGroup(const LaunchOptions& options, Env env) : options_(options), env_(std::move(env)) {}
  ~WorkerGroup() { stop(SIGKILL, milliseconds(1000)); }

  // Starts every worker; a program that cannot be executed throws (after stopping the
  // workers already started).
  void start_all() {
    for (int local = 0; local < options_.nproc_per_node; ++local) {
      Worker w;
      w.local_rank = local;
      w.rank = options_.node_rank * options_.nproc_per_node + local;
      workers_.push_back(w);
      start(workers_.back());
    }
  }

  // Reaps the workers that ended; returns the first failure among them, in the order the
  // kernel reported them.
  std::optional<Failure> reap() {
    std::optional<Failure> failure;
    for (auto& w : workers_) {
      if (!w.running) continue;
      int status = 0;
      const pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r != w.pid) continue;
      w.running = false;
      w.status = status;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && !failure) failure = Failure{w, describe_status(status)};
    }
    return failure;
  }

  // Reaps the workers that ended and returns them all (ft mode handles each).
  std::vector<Worker> reap_each() {
    std::vector<Worker> ended;
    for (auto& w : workers_) {
      if (!w.running) continue;
      int status = 0;
      if (::waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
      w.running = false;
      w.status = status;
      ended.push_back(w);
    }
    return ended;
  }

  // Starts rank's worker again with `extra` added to its environment.
  void restart(int rank, const Env& extra) {
    for (auto& w : workers_) {
      if (w.rank != rank || w.running) continue;
      start(w, extra);
      return;
    }
  }

  // Whether rank's worker is this group's and runs.
  bool runs(int rank) const {
    return std::any_of(workers_.begin(), workers_.end(),
                       [&](const Worker& w) { return w.rank == rank && w.running; });
  }

  // Sends `sig` to rank's worker (its process group) when it runs.
  void signal_rank(int rank, int sig) {
    for (const auto& w : workers_)
      if (w.rank == rank && w.running) ::kill(-w.pid, sig);
  }

  bool all_done() const {
    for (const auto& w : workers_)
      if (w.running) return false;
    return true;
  }

  // Sends `sig` to every running worker's process group.
  void signal_all(int sig) {
    for (const auto& w : workers_)
      if (w.running) ::kill(-w.pid, sig);
  }

  // Sends `sig`, waits up to `grace` for the workers to end, then SIGKILLs the rest and
  // reaps them.
  void stop(int sig, milliseconds grace, SignalRelay* relay = nullptr) {
    if (all_done()) return;
    signal_all(sig);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!all_done() && std::chrono::steady_clock::now() < deadline) {
      reap();
      if (all_done()) break;
      if (relay) {
        relay->wait(milliseconds(20));  // SIGCHLD wakes it early
      } else {
        ::usleep(10'000);
      }
    }
    if (all_done()) return;
    std::vector<int> stuck;
    for (const auto& w : workers_)
      if (w.running) stuck.push_back(w.rank);
    say("ranks {} did not stop within {} ms of {}; sending SIGKILL", fmt::join(stuck, ", "),
        grace.count(), signal_name(sig));
    signal_all(SIGKILL);
    for (auto& w : workers_) {
      if (!w.running) continue;
      ::waitpid(w.pid, &w.status, 0);  // SIGKILL cannot be caught: this returns promptly
      w.running = false;
    }
  }

 private:
  void start(Worker& w, const Env& extra = {}) {
    Env env = env_;
    for (const auto& [k, v] : extra) env[k] = v;
    env["RANK"] = std::to_string(w.rank);
    env["LOCAL_RANK"] = std::to_string(w.local_rank);
    env["GROUP_RANK"] = std::to_string(options_.node_rank);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      const std::string kv(*e);
      const auto eq = kv.find('=');
      if (eq != std::string::npos && env.count(kv.substr(0, eq))) continue;  // replaced below
      env_strings.push_back(kv);
    }
    for (const auto& [k, v] : env) env_strings.push_back(fmt::format("{}={}", k, v));
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = options_.command;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    // The child reports a failed exec through this pipe; a successful exec closes it.
    int report[2];
    TS_CHECK(::pipe2(report, O_CLOEXEC) == 0, RuntimeError,
             "launch: could not create a pipe for rank {}: {}", w.rank, std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ::close(report[0]);
      ::close(report[1]);
      TS_THROW(RuntimeError, "launch: could not fork rank {}: {}", w.rank, std::strerror(err));
    }
    if (pid == 0) {  // only async-signal-safe calls from here to exec
      ::setpgid(0, 0);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig : SignalRelay::kSignals) ::sigaction(sig, &dfl, nullptr);
      ::sigaction(SIGPIPE, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execvpe(argv[0], argv.data(), envp.data());
      const int err = errno;
      [[maybe_unused]] auto n = ::write(report[1], &err, sizeof(err));
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here, so a kill(-pid) right after fork reaches the child
    ::close(report[1]);
    int err = 0;
    ssize_t n;
    do {
      n = ::read(report[0], &err, sizeof(err));
    } while (n < 0 && errno == EINTR);
    ::close(report[0]);
    w.pid = pid;
    w.running = true;
    if (n == static_cast<ssize_t>(sizeof(err))) {
      ::waitpid(pid, &w.status, 0);
      w.running = false;
      stop(SIGKILL, milliseconds(1000));
      TS_THROW(ValueError, "launch: cannot run '{}' for rank {}: {}", options_.command[0], w.rank,
               std::strerror(err));
    }
  }

  const LaunchOptions& options_;
  const Env env_;
  std::vector<Worker> workers_;
};

void check_options(const LaunchOptions& o) {
  TS_CHECK(o.nproc_per_node >= 1, ValueError,
           "launch: --nproc-per-node must be at least 1, but got {}", o.nproc_per_node);
  TS_CHECK(o.nnodes >= 1, ValueError, "launch: --nnodes must be at least 1, but got {}", o.nnodes);
  TS_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, ValueError,
           "launch: --node-rank must be in [0, {}) for --nnodes {}, but got {}", o.nnodes, o.nnodes,
           o.node_rank);
  TS_CHECK(o.master_port >= 0 && o.master_port <= 65535, ValueError,
           "launch: --master-port must be in [0, 65535], but got {}", o.master_port);
  TS_CHECK(o.master_port != 0 || o.nnodes == 1, ValueError,
           "launch: --master-port 0 (any free port) works only with --nnodes 1, but got --nnodes "
           "{}: every node must know the port",
           o.nnodes);
  TS_CHECK(!o.master_addr.empty(), ValueError, "launch: --master-addr must not be empty");
  TS_CHECK(o.max_restarts >= 0, ValueError,
           "launch: --max-restarts must not be negative, but got {}", o.max_restarts);
  TS_CHECK(o.term_timeout.count() > 0, ValueError,
           "launch: the termination timeout must be positive, but got {} ms",
           o.term_timeout.count());
  TS_CHECK(!o.command.empty() && !o.command[0].empty(), ValueError,
           "launch: no program given (usage: tessera launch [options] -- PROGRAM ARGS)");
  TS_CHECK(!o.ft || (o.ft_min_replicas >= 1 && o.ft_heartbeat_timeout.count() > 0), ValueError,
           "launch: --ft needs --min-replicas >= 1 and a positive --heartbeat-timeout, but got {} "
           "and {} ms",
           o.ft_min_replicas, o.ft_heartbeat_timeout.count());
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

// Where this launcher reaches (or serves) the store.
std::string store_host(const LaunchOptions& options) {
  return is_loopback(options.master_addr) ? "127.0.0.1" : options.master_addr;
}

// --ft: no teardown. A worker that dies is declared dead to the Lighthouse at once (its peers
// abort their collectives on their next heartbeat and re-form the quorum without it) and is
// started again alone while its restarts last; a hung one (a stale heartbeat) is killed first.
// The Lighthouse is reached through the store, so this runs alike on every node, for the
// node's own workers. Returns the launcher's exit code: 0 when every rank's last process
// exited with 0.
// `tick` runs once per loop (through the store: a launcher's heartbeat).
int run_ft(const LaunchOptions& options, WorkerGroup& group, ft::LighthouseClient& lighthouse,
           const std::function<void()>& tick, SignalRelay& relay) {
  std::map<int, int> restarts;       // per rank
  std::map<int, int> final_failure;  // rank -> exit code, for ranks out of restarts
  std::set<int> killed_as_hung;
  // Ranks declared dead (or restarted) since the Lighthouse last published its stale list:
  // until a list without them arrives, the list still names their earlier life, and a rank
  // restarted meanwhile would be killed again at once (seen under load: a rank killed three
  // times in a row as "hung" before its new process had started). A new life can turn stale
  // only after it joined and then kept silent for the heartbeat timeout, far longer than one
  // turn of this loop, so it cannot hide behind this.
  std::set<int> awaiting_fresh_list;
  // The store is node 0's: once it is gone, say so and go on without it (the workers notice
  // on their own), rather than wait for it at every turn.
  bool store_gone = false;
  const auto tell = [&](const auto& what) {
    if (store_gone) return;
    try {
      what();
    } catch (const Error& e) {
      say("cannot reach the lighthouse through the store; going on without it: {}", e.what());
      store_gone = true;
    }
  };
  for (;;) {
    tell(tick);
    for (const Worker& w : group.reap_each()) {
      const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
      if (ok) continue;  // finished (its Manager told the lighthouse it leaves)
      int& n = restarts[w.rank];
      tell([&] { lighthouse.mark_dead(w.rank, /*restarting=*/n < options.max_restarts); });
      awaiting_fresh_list.insert(w.rank);
      const std::string why = killed_as_hung.erase(w.rank) ? "stopped heartbeating and was killed"
                                                           : describe_status(w.status);
      if (n < options.max_restarts) {
        ++n;
        say("rank {} (pid {}) {}; restarting it ({} of {} restarts), the others go on", w.rank,
            w.pid, why, n, options.max_restarts);
        group.restart(w.rank, {{"TESSERA_RESTART_COUNT", std::to_string(n)}});
      } else {
        say("rank {} (pid {}) {}; no restarts left, the others go on without it", w.rank, w.pid,
            why);
        final_failure[w.rank] = exit_code_of(w.status);
      }
    }
    if (group.all_done()) break;
    std::vector<int> stale;
    tell([&] { stale = lighthouse.stale(); });
    std::erase_if(awaiting_fresh_list, [&](int rank) {
      return std::find(stale.begin(), stale.end(), rank) == stale.end();
    });
    for (int rank : stale) {
      if (awaiting_fresh_list.count(rank)) continue;  // the list still shows its earlier life
      if (group.runs(rank) && killed_as_hung.insert(rank).second) {
        say("rank {} stopped heartbeating (hung?); killing it", rank);
        tell([&] { lighthouse.mark_dead(rank, restarts[rank] < options.max_restarts); });
        group.signal_rank(rank, SIGKILL);
      }
    }
    if (const int sig = relay.wait(milliseconds(20))) {
      say("received {}; forwarding it to the workers", signal_name(sig));
      group.stop(sig, options.term_timeout, &relay);
      return 128 + sig;
    }
  }
  if (final_failure.empty()) return 0;
  const auto& [rank, code] = *final_failure.begin();
  say("job finished; rank {} had failed for good; exiting with code {}", rank, code);
  return code;
}

// The job's TCPStore, served by this launcher (node 0).
std::unique_ptr<TCPStore> serve_store(const LaunchOptions& options, const std::string& secret) {
  TCPStoreOptions so;
  so.port = static_cast<uint16_t>(options.master_port);
  so.is_server = true;
  so.num_workers = options.nnodes * options.nproc_per_node;
  so.multi_host = !is_loopback(options.master_addr);
  so.secret = secret;
  return std::make_unique<TCPStore>(store_host(options), so);
}

// The environment every worker of one attempt (round) shares.
Env worker_env(const LaunchOptions& options, int port, const std::string& secret,
               const std::string& job_id, int attempt) {
  Env env{{"WORLD_SIZE", std::to_string(options.nnodes * options.nproc_per_node)},
          {"LOCAL_WORLD_SIZE", std::to_string(options.nproc_per_node)},
          {"MASTER_ADDR", options.master_addr},
          {"MASTER_PORT", std::to_string(port)},
          {kJobSecretEnv, secret},
          {"TESSERA_STORE_EXTERNAL", "1"},
          {"TESSERA_JOB_ID", job_id},
          // With --ft each rank counts its own restarts (run_ft).
          {"TESSERA_RESTART_COUNT", std::to_string(options.ft ? 0 : attempt)}};
  if (options.ft) env.emplace("TESSERA_FT", std::string("1"));
  return env;
}

// ---- multi-node jobs -------------------------------------------------------------------------
//
// The launchers of a multi-node job agree through the store node 0 serves for the whole job.
// Round k's workers see it under the prefix "round<k>" (TESSERA_STORE_PREFIX), so nothing of
// an earlier round's rendezvous survives. The launchers' own keys, under "launch/round<k>":
//   node<r>   node r joined round k; its workers start once every node has joined
//   failed    the round's first failure, "CODE|restart|what" or "CODE|close|what" (a launcher
//             that was signalled closes the job: no restart); compare_set, so the first wins
//   done<r>   every worker of node r exited with 0
//   left<r>   node r's launcher is about to exit: node 0 waits (a bounded time) for every
//             node's before it stops serving the store, so each can read the outcome
class NodeAgreement {
 public:
  NodeAgreement(const LaunchOptions& options, StorePtr store)
      : options_(options), store_(std::move(store)) {}

  // Joins round k and waits for every node; returns a stop signal that came first (0: all
  // joined). Says who it waits for every 10 s; throws DistTimeoutError after join_timeout.
  int join(int round, SignalRelay& relay) {
    set(key(round, fmt::format("node{}", options_.node_rank)), "1");
    const auto start = std::chrono::steady_clock::now();
    auto next_note = start + std::chrono::seconds(10);
    for (;;) {
      std::vector<int> missing;
      for (int r = 0; r < options_.nnodes; ++r)
        if (!store_->check({key(round, fmt::format("node{}", r))})) missing.push_back(r);
      if (missing.empty()) return 0;
      const auto now = std::chrono::steady_clock::now();
      TS_CHECK(now - start < kJoinTimeout, distributed::DistTimeoutError,
               "launch: nodes {} did not join round {} within {} s", fmt::join(missing, ", "),
               round, std::chrono::duration_cast<std::chrono::seconds>(kJoinTimeout).count());
      if (now >= next_note) {
        say("waiting for nodes {} to join round {}", fmt::join(missing, ", "), round);
        next_note = now + std::chrono::seconds(10);
      }
      if (const int sig = relay.wait(milliseconds(50))) return sig;
    }
  }

  // Records a failure of round k unless one is recorded already; returns the one of record.
  std::string fail(int round, int code, bool close, const std::string& what) {
    const std::string mine = fmt::format("{}|{}|{}", code, close ? "close" : "restart", what);
    const Bytes b =
        store_->compare_set(key(round, "failed"), Bytes{}, Bytes(mine.begin(), mine.end()));
    return std::string(b.begin(), b.end());
  }
  std::optional<std::string> failure(int round) {
    if (!store_->check({key(round, "failed")})) return std::nullopt;
    const Bytes b = store_->get(key(round, "failed"));
    return std::string(b.begin(), b.end());
  }

  void done(int round) { set(key(round, fmt::format("done{}", options_.node_rank)), "1"); }
  bool all_done(int round) {
    for (int r = 0; r < options_.nnodes; ++r)
      if (!store_->check({key(round, fmt::format("done{}", r))})) return false;
    return true;
  }

  // This launcher is about to exit; node 0 first waits (at most kLeaveGrace) for the others.
  void leave(int round) {
    set(key(round, fmt::format("left{}", options_.node_rank)), "1");
    if (options_.node_rank != 0) return;
    std::vector<std::string> keys;
    for (int r = 1; r < options_.nnodes; ++r) keys.push_back(key(round, fmt::format("left{}", r)));
    try {
      store_->wait(keys, kLeaveGrace);
    } catch (const Error&) {
      say("not every node's launcher confirmed the job's end within {} s; stopping the store",
          std::chrono::duration_cast<std::chrono::seconds>(kLeaveGrace).count());
    }
  }

 private:
  static constexpr auto kJoinTimeout = std::chrono::minutes(5);
  static constexpr auto kLeaveGrace = std::chrono::seconds(30);
  static std::string key(int round, const std::string& k) {
    return fmt::format("launch/round{}/{}", round, k);
  }
  void set(const std::string& k, const std::string& v) {
    store_->set(k, Bytes(v.begin(), v.end()));
  }
  const LaunchOptions& options_;
  StorePtr store_;
};

// "CODE|restart|what" -> (CODE, restart?, what).
struct RecordedFailure {
  int code = 1;
  bool restart = true;
  std::string what;
};
RecordedFailure parse_failure(const std::string& s) {
  RecordedFailure f;
  const auto a = s.find('|'), b = a == std::string::npos ? a : s.find('|', a + 1);
  if (b == std::string::npos) return {1, false, s};
  f.code = std::atoi(s.substr(0, a).c_str());
  f.restart = s.substr(a + 1, b - a - 1) == "restart";
  f.what = s.substr(b + 1);
  return f;
}

int run_rounds(const LaunchOptions& options, NodeAgreement& nodes, int port,
               const std::string& secret, const std::string& job_id, SignalRelay& relay);

// --ft on this node, with the job's store served at `port` (by node 0): node 0 runs the
// Lighthouse beside the store; every node starts its workers once and keeps them going
// (run_ft). The other nodes' launchers beat into the store and say when their workers are
// done; node 0 serves the store until each has, or has been silent for kLauncherSilence.
int launch_ft(const LaunchOptions& options, int port, const std::string& secret,
              const std::string& job_id, SignalRelay& relay) {
  constexpr auto kLauncherSilence = std::chrono::seconds(30);
  TCPStoreOptions co;
  co.port = static_cast<uint16_t>(port);
  co.secret = secret;
  co.timeout = std::chrono::seconds(10);  // a store that is gone is noticed within this
  std::unique_ptr<ft::Lighthouse> lighthouse;
  if (options.node_rank == 0) {  // beside the store, through a client of its own
    ft::LighthouseOptions lo;
    lo.min_replicas = options.ft_min_replicas;
    lo.heartbeat_timeout = options.ft_heartbeat_timeout;
    lo.expected_replicas = options.nnodes * options.nproc_per_node;
    // The first round waits until every replica asked (or died), for at most start_window:
    // replicas that start late would otherwise begin the job over on their own, under the same
    // step numbers. Launchers on several nodes start apart; on one node the workers start
    // together, but a loaded or sanitized machine takes over a second to start them (seen: 4
    // ASan workers on 2 cores started 0.3 s apart, 1.2 s after the Lighthouse, past the 1 s
    // default: two pairs trained steps 1-10 apart). Half the Managers' quorum timeout.
    lo.start_window = options.nnodes > 1 ? std::chrono::milliseconds(std::chrono::minutes(5))
                                         : std::chrono::milliseconds(std::chrono::seconds(30));
    lighthouse =
        std::make_unique<ft::Lighthouse>(std::make_shared<TCPStore>(store_host(options), co), lo);
  }
  const auto store = std::make_shared<TCPStore>(store_host(options), co);
  ft::LighthouseClient client(store);
  const auto key = [](int node, const char* what) {
    return fmt::format("launch/ft/node{}/{}", node, what);
  };
  auto last_beat = Clock::time_point{};
  const auto beat = [&] {
    if (options.node_rank == 0 || Clock::now() - last_beat < std::chrono::seconds(1)) return;
    store->add(key(options.node_rank, "beat"), 1);
    last_beat = Clock::now();
  };
  WorkerGroup group(options, worker_env(options, port, secret, job_id, 0));
  const int first = options.node_rank * options.nproc_per_node;
  say("starting {} worker(s) (ranks {}..{} of {})", options.nproc_per_node, first,
      first + options.nproc_per_node - 1, options.nnodes * options.nproc_per_node);
  group.start_all();
  const int code = run_ft(options, group, client, beat, relay);
  if (options.nnodes == 1 || code >= 128) return code;
  if (options.node_rank != 0) {
    try {
      store->set(key(options.node_rank, "done"), "1");
    } catch (const Error&) {  // node 0 is gone already: nobody waits for this
    }
    return code;
  }
  say("this node's workers are done; serving the store until the other nodes' are too");
  std::map<int, std::pair<int64_t, Clock::time_point>> beats;  // node -> last count, when seen
  for (int r = 1; r < options.nnodes; ++r) beats[r] = {-1, Clock::now()};
  auto last_said = Clock::now();
  while (!beats.empty()) {
    for (auto it = beats.begin(); it != beats.end();) {
      const int64_t n = store->add(key(it->first, "beat"), 0);
      if (n != it->second.first) it->second = {n, Clock::now()};
      const bool done = store->check({key(it->first, "done")});
      const bool silent = Clock::now() - it->second.second >= kLauncherSilence;
      if (silent && !done)
        say("node {}'s launcher has been silent for {} s; not waiting for it", it->first,
            kLauncherSilence.count());
      it = done || silent ? beats.erase(it) : std::next(it);
    }
    if (const int sig = relay.wait(milliseconds(50))) {
      say("received {}; the other nodes' workers lose the store", signal_name(sig));
      return 128 + sig;
    }
    if (!beats.empty() && Clock::now() - last_said >= std::chrono::seconds(10)) {
      say("still serving the store: {} other node(s) not done yet", beats.size());
      last_said = Clock::now();
    }
  }
  return code;
}

// A multi-node job: rounds of every node's workers, agreed through the store (NodeAgreement).
// A failure anywhere stops every node's workers; the job restarts as a whole while restarts
// are left, and every launcher returns the same exit code.
int launch_nodes(const LaunchOptions& options, const std::string& secret, const std::string& job_id,
                 SignalRelay& relay) {
  std::unique_ptr<TCPStore> server;
  int port = options.master_port;
  if (options.node_rank == 0) {
    server = serve_store(options, secret);
    port = server->port();
  }
  TCPStoreOptions co;
  co.port = static_cast<uint16_t>(port);
  co.secret = secret;
  try {
    if (options.ft) return launch_ft(options, port, secret, job_id, relay);
    NodeAgreement nodes(options, std::make_shared<TCPStore>(store_host(options), co));
    return run_rounds(options, nodes, port, secret, job_id, relay);
  } catch (const Error& e) {  // the store is gone (node 0's launcher ended?) or a join timed out
    say("job failed: {}; this node's workers were stopped; exiting with code 1", e.what());
    return 1;
  }
}

int run_rounds(const LaunchOptions& options, NodeAgreement& nodes, int port,
               const std::string& secret, const std::string& job_id, SignalRelay& relay) {
  const int first = options.node_rank * options.nproc_per_node;
  for (int round = 0;; ++round) {
    if (const int sig = nodes.join(round, relay)) {
      nodes.fail(
          round, 128 + sig, true,
          fmt::format("node {}'s launcher received {}", options.node_rank, signal_name(sig)));
      nodes.leave(round);
      return 128 + sig;
    }
    Env env = worker_env(options, port, secret, job_id, round);
    env.emplace("TESSERA_STORE_PREFIX", fmt::format("round{}", round));
    WorkerGroup group(options, std::move(env));
    say("starting {} worker(s) (ranks {}..{} of {}){}", options.nproc_per_node, first,
        first + options.nproc_per_node - 1, options.nnodes * options.nproc_per_node,
        round > 0 ? fmt::format(", restart {} of {}", round, options.max_restarts) : "");
    group.start_all();
    std::optional<Failure> local;
    std::optional<std::string> recorded;
    int stop_signal = 0;
    bool done = false;
    for (;;) {
      local = group.reap();
      if (local) break;
      if (group.all_done() && !done) {
        nodes.done(round);
        done = true;
      }
      if (done && nodes.all_done(round)) {
        nodes.leave(round);
        return 0;
      }
      if ((recorded = nodes.failure(round))) break;
      if ((stop_signal = relay.wait(milliseconds(100)))) break;
    }
    if (stop_signal) {
      say("received {}; forwarding it to the workers", signal_name(stop_signal));
      nodes.fail(round, 128 + stop_signal, true,
                 fmt::format("node {}'s launcher received {}", options.node_rank,
                             signal_name(stop_signal)));
      group.stop(stop_signal, options.term_timeout, &relay);
      nodes.leave(round);
      return 128 + stop_signal;
    }
    if (local) {
      const std::string what =
          fmt::format("rank {} (node {}, local rank {}, pid {}) {}", local->worker.rank,
                      options.node_rank, local->worker.local_rank, local->worker.pid, local->why);
      say("{}; stopping this node's workers", what);
      recorded = nodes.fail(round, exit_code_of(local->worker.status), false, what);
    } else {
      say("{} on another node; stopping this node's workers", parse_failure(*recorded).what);
    }
    group.stop(SIGTERM, options.term_timeout, &relay);
    const RecordedFailure f = parse_failure(*recorded);
    if (f.restart && round < options.max_restarts) {
      say("restarting the job on every node ({} of {} restarts left)", options.max_restarts - round,
          options.max_restarts);
      continue;
    }
    say("job failed: {}{}; exiting with code {}", f.what,
        options.max_restarts > 0 && f.restart
            ? fmt::format(" (after {} restarts)", options.max_restarts)
            : "",
        f.code);
    nodes.leave(round);
    return f.code;
  }
}

}  // namespace

int launch(const LaunchOptions& options) {
  check_options(options);
  std::string secret;
  if (options.nnodes > 1) {
    const char* s = std::getenv(kJobSecretEnv);
    TS_CHECK(s && *s, ValueError,
             "launch: --nnodes {} needs the job's secret in {} on every node (the same value; "
             "e.g. from `openssl rand -hex 32`), but it is not set",
             options.nnodes, kJobSecretEnv);
    secret = s;
  } else {
    secret = random_hex(32);
  }
  const std::string job_id = options.run_id.empty() ? random_hex(8) : options.run_id;

  SignalRelay relay;
  if (options.nnodes > 1) return launch_nodes(options, secret, job_id, relay);
  if (options.ft) {
    const std::unique_ptr<TCPStore> store = serve_store(options, secret);
    return launch_ft(options, store->port(), secret, job_id, relay);
  }
  for (int attempt = 0;; ++attempt) {
    // A fresh store per attempt: nothing of a failed attempt's rendezvous survives.
    const std::unique_ptr<TCPStore> store = serve_store(options, secret);
    const int port = store->port();
    WorkerGroup group(options, worker_env(options, port, secret, job_id, attempt));
    say("starting {} worker(s) (ranks 0..{} of {}){}", options.nproc_per_node,
        options.nproc_per_node - 1, options.nproc_per_node,
        attempt > 0 ? fmt::format(", restart {} of {}", attempt, options.max_restarts) : "");
    group.start_all();

    std::optional<Failure> failure;
    int stop_signal = 0;
    while (!failure && !stop_signal && !group.all_done()) {
      failure = group.reap();
      if (failure || group.all_done()) break;
      stop_signal = relay.wait(milliseconds(100));
    }
    if (stop_signal) {
      say("received {}; forwarding it to the workers", signal_name(stop_signal));
      group.stop(stop_signal, options.term_timeout, &relay);
      return 128 + stop_signal;
    }
    if (!failure) return 0;  // every worker exited with 0

    say("rank {} (local rank {}, pid {}) {}; stopping the other workers", failure->worker.rank,
        failure->worker.local_rank, failure->worker.pid, failure->why);
    group.stop(SIGTERM, options.term_timeout, &relay);
    if (attempt < options.max_restarts) {
      say("restarting the group ({} of {} restarts left)", options.max_restarts - attempt,
          options.max_restarts);
      continue;
    }
    const int code = exit_code_of(failure->worker.status);
    say("job failed: rank {} {}{}; exiting with code {}", failure->worker.rank, failure->why,
        options.max_restarts > 0 ? fmt::format(" (after {} restarts)", options.max_restarts) : "",
        code);
    return code;
  }
}

}  // namespace tessera::distributed
