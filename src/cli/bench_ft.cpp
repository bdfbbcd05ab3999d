// `tessera bench ft`: recovery of a data-parallel training job from a killed rank, and the
// hidden `bench-ft-worker` command it (and the fault-injection tests) run.
//
// The worker trains a toy model on 4 ranks: each step every replica computes a gradient with
// noise of its own (a closed form of step and rank, so reruns are identical), averages it over
// the replicas and applies it when the step commits. Each rank appends to <log>/rank<R>.log:
//   start <wall ns> <restart count>
//   commit <step> <wall ns> <weights digest> <participants> <quorum id>
//   kill <wall ns> <mode>            (just before it kills itself on purpose)
//   done <step> <loss>
// With ft (tessera launch --ft) it runs ft::Manager; with --plain it runs an ordinary
// process group and a checkpoint (rank 0 writes it after every commit; a restarted job
// resumes from it): the relaunch anchor.
//
// The bench runs the job with kills and reads the logs: a kill's recovery time is from the
// victim's "kill" line to the first commit after it on every survivor (the next committed
// step). Rows: recovery/kill1of4 for tessera (shm and gloo) and relaunch, and torch-gloo from
// bench/torch_ft.py (destroy + re-create the group among the survivors).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_jobs.h"
#include "cli/bench_util.h"
#include "cli/ft_log.h"
#include "tessera/distributed/distributed.h"
#include "tessera/tessera.h"

namespace tessera::cli {
namespace {

namespace dist = tessera::distributed;
namespace fs = std::filesystem;

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// FNV-1a over the bytes of a contiguous tensor.
// The weights' digest in every commit line (the replicas must agree on it). It runs in the
// training loop, so it must stay small next to a step: 8-byte words in four independent
// multiply chains (~1 ms for the bench's 4 MiB, where a byte at a time took 20-30 ms and
// made up a third of every step).
uint64_t digest(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  const int64_t bytes = t.numel() * t.element_size();
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t lane[4] = {1469598103934665603ull, 1, 2, 3};
  int64_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t word;
      std::memcpy(&word, p + i + 8 * k, 8);
      lane[k] = (lane[k] ^ word) * kMul;
      lane[k] ^= lane[k] >> 29;
    }
  }
  uint64_t h = lane[0] ^ (lane[1] * 3) ^ (lane[2] * 5) ^ (lane[3] * 7);
  for (; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return (h ^ static_cast<uint64_t>(bytes)) * kMul;
}

struct Kill {
  int rank = -1;
  int64_t step = -1;
  std::string mode;  // sigkill, sigkill-collective, sigkill-quorum, sigstop
};

Kill parse_kill(const std::string& text) {
  Kill k;
  const auto a = text.find(':'), b = text.rfind(':');
  TS_CHECK(a != std::string::npos && b > a, ValueError,
           "bench-ft-worker: --kill must look like RANK:STEP:MODE, but got '{}'", text);
  k.rank = std::stoi(text.substr(0, a));
  k.step = std::stoll(text.substr(a + 1, b - a - 1));
  k.mode = text.substr(b + 1);
  TS_CHECK(k.mode == "sigkill" || k.mode == "sigkill-collective" || k.mode == "sigkill-quorum" ||
               k.mode == "sigstop",
           ValueError,
           "bench-ft-worker: --kill mode must be sigkill, sigkill-collective, sigkill-quorum or "
           "sigstop, but got '{}'",
           k.mode);
  return k;
}

// The job's model: w (float32 [dim]) pulled towards w_true on a quadratic loss; each replica's
// gradient carries noise of its own (a closed form of step and rank), so the replicas'
// average matters and reruns are identical. Elementwise, so a large dim (the bench's 4 MiB
// gradients) stays cheap next to the communication.
struct Model {
  explicit Model(int64_t dim)
      : w(zeros({dim}, TensorOptions(kFloat32))),
        w_true(arange(dim, TensorOptions(kFloat32)).mul(0.05).cos()),
        index(arange(dim, TensorOptions(kFloat32)).mul(0.37)) {}

  Tensor gradient(int64_t step, int rank) const {
    const Tensor noise = index.add(static_cast<double>(step) * 1.3 + rank * 0.7).sin().mul(0.01);
    return w.sub(w_true).mul(0.2).add(noise).contiguous();
  }
  double loss() const {
    const Tensor d = w.sub(w_true);
    return d.mul(d).mean().item<double>();
  }
  void apply(const Tensor& grad) { w.sub_(grad.mul(0.5)); }

  Tensor w, w_true, index;
};

class Log {
 public:
  Log(const std::string& dir, int rank) {
    if (dir.empty()) return;
    const std::string path = fmt::format("{}/rank{}.log", dir, rank);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    TS_CHECK(fd_ >= 0, RuntimeError, "bench-ft-worker: cannot open '{}'", path);
  }
  ~Log() {
    if (fd_ >= 0) ::close(fd_);
  }
  template <class... Args>
  void line(fmt::format_string<Args...> format, Args&&... args) {
    if (fd_ < 0) return;
    const std::string s = fmt::format(format, std::forward<Args>(args)...) + "\n";
    [[maybe_unused]] const ssize_t n = ::write(fd_, s.data(), s.size());  // one append each
  }

 private:
  int fd_ = -1;
};

[[noreturn]] void die(Log& log, const char* mode, int sig) {
  log.line("kill {} {}", wall_ns(), mode);
  ::raise(sig);
  for (;;) ::pause();  // SIGSTOP: the launcher kills this process when it sees it hang
}

// The kill planned for this rank in this life, once the job reached its step: a rank's k-th
// kill (by step) happens in its k-th life (TESSERA_RESTART_COUNT == k), so each happens once,
// also when this replica skipped the step itself (it joined late and healed past it).
std::optional<Kill> my_kill(const FtWorkerOptions& o, int rank, int64_t step) {
  const int life = env_int("TESSERA_RESTART_COUNT", 0);
  std::vector<Kill> mine;
  for (const auto& text : o.kills) {
    const Kill k = parse_kill(text);
    if (k.rank == rank) mine.push_back(k);
  }
  std::sort(mine.begin(), mine.end(), [](const Kill& a, const Kill& b) { return a.step < b.step; });
  if (life >= static_cast<int>(mine.size()) || step < mine[static_cast<size_t>(life)].step)
    return std::nullopt;
  return mine[static_cast<size_t>(life)];
}

int run_ft(const FtWorkerOptions& o, int rank, Log& log) {
  const char* port = std::getenv("MASTER_PORT");
  TS_CHECK(port != nullptr, ValueError,
           "bench-ft-worker: run it through `tessera launch --ft` (MASTER_PORT is not set)");
  dist::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(std::atoi(port));
  so.timeout = std::chrono::seconds(60);
  auto store = std::make_shared<dist::TCPStore>(std::getenv("MASTER_ADDR"), so);
  Model model(o.dim);
  dist::ft::ManagerOptions mo;
  mo.store = store;
  mo.replica_id = rank;
  mo.backend = o.backend;
  // Also how long a gloo collective left blocked on a lost peer lingers before it ends (it
  // cannot be cancelled; see GlooOptions::isolate_outputs), which process exit waits for.
  mo.timeout = std::chrono::seconds(5);
  mo.quorum_timeout = std::chrono::seconds(60);
  mo.heartbeat_interval = std::chrono::milliseconds(o.heartbeat_ms);
  mo.state_dict = [&] { return dist::ft::StateDict{{"w", model.w}}; };
  dist::ft::Manager manager(mo);
  while (manager.current_step() < o.steps) {
    auto kill = my_kill(o, rank, manager.current_step());
    if (kill && kill->mode == "sigkill-quorum") {  // dies while the quorum (re)forms
      std::thread([&log] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        die(log, "sigkill-quorum", SIGKILL);
      }).detach();
    }
    manager.start_quorum();
    if (manager.healed()) log.line("heal {}", manager.current_step());
    if (manager.current_step() >= o.steps) break;  // healed to the end by finished replicas
    if (!kill) kill = my_kill(o, rank, manager.current_step());  // (healing moves the step)
    if (manager.last_quorum_time().count() >= 20)                // slow rounds, for the record
      log.line("quorum {} {} ms {}", manager.current_step(), manager.last_quorum_time().count(),
               wall_ns());
    if (kill && kill->mode == "sigkill") die(log, "sigkill", SIGKILL);
    if (kill && kill->mode == "sigstop") die(log, "sigstop", SIGSTOP);
    const Tensor grad = model.gradient(manager.current_step(), rank);
    if (kill && kill->mode == "sigkill-collective") {
      dist::AllreduceOptions ao;
      ao.reduce_op = dist::ReduceOp::AVG;
      manager.group()->allreduce(grad, ao);  // the others are inside it when this rank dies
      die(log, "sigkill-collective", SIGKILL);
    }
    manager.allreduce(grad);
    if (!manager.should_commit()) {
      log.line("fail {} {}", manager.current_step(), wall_ns());
      continue;
    }
    model.apply(grad);
    const int64_t committed = wall_ns();  // before the digest, which is bookkeeping
    log.line("commit {} {} {:016x} {} {}", manager.current_step(), committed, digest(model.w),
             manager.num_participants(), manager.quorum_id());
  }
  manager.finish();  // replicas still training may need this one's state
  log.line("done {} {:.6g}", manager.current_step(), model.loss());
  return 0;
}

// The relaunch anchor: a plain group; rank 0 checkpoints after every commit, and a relaunched
// job resumes from the checkpoint.
int run_plain(const FtWorkerOptions& o, int rank, Log& log) {
  dist::init_process_group(o.backend);
  Model model(o.dim);
  int64_t step = 0;
  const std::string ckpt = o.checkpoint;
  if (!ckpt.empty() && fs::exists(ckpt)) {
    std::ifstream f(ckpt, std::ios::binary);
    f.read(reinterpret_cast<char*>(&step), sizeof(step));
    f.read(static_cast<char*>(model.w.data_ptr()), model.w.numel() * 4);
    TS_CHECK(f.good(), RuntimeError, "bench-ft-worker: checkpoint '{}' is truncated", ckpt);
  }
  while (step < o.steps) {
    const auto kill = my_kill(o, rank, step);
    if (kill) die(log, kill->mode.c_str(), SIGKILL);
    const Tensor grad = model.gradient(step, rank);
    dist::all_reduce(grad, dist::ReduceOp::AVG);
    model.apply(grad);
    ++step;
    if (rank == 0 && !ckpt.empty()) {  // written aside, then renamed: never half a checkpoint
      const std::string tmp = ckpt + ".tmp";
      {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(&step), sizeof(step));
        f.write(static_cast<const char*>(model.w.data_ptr()), model.w.numel() * 4);
      }
      fs::rename(tmp, ckpt);
    }
    dist::barrier();  // the checkpoint of this step exists before anyone goes on
    const int64_t committed = wall_ns();
    log.line("commit {} {} {:016x} {} {}", step, committed, digest(model.w), dist::get_world_size(),
             0);
  }
  log.line("done {} {:.6g}", step, model.loss());
  dist::destroy_process_group();
  return 0;
}

// ---- the bench -------------------------------------------------------------------------------

using RankLog = FtRankLog;

// Per kill: from the kill to the first commit after it on every other rank, in seconds.
std::vector<double> recovery_times(const std::map<int, RankLog>& logs) {
  std::vector<double> out;
  for (const auto& [victim, vl] : logs) {
    for (int64_t k : vl.kills) {
      int64_t latest = 0;
      bool all = true;
      for (const auto& [rank, l] : logs) {
        if (rank == victim) continue;
        int64_t first = 0;
        for (const auto& [step, ns] : l.commits)
          if (ns > k) {
            first = ns;
            break;
          }
        if (first == 0) all = false;
        latest = std::max(latest, first);
      }
      if (all) out.push_back(static_cast<double>(latest - k) / 1e9);
    }
  }
  return out;
}

// Every step that two ranks both committed has one digest.
bool digests_agree(const std::map<int, RankLog>& logs, std::string& why) {
  std::map<int64_t, std::pair<int, std::string>> seen;
  for (const auto& [rank, l] : logs)
    for (const auto& [step, d] : l.digests) {
      auto [it, fresh] = seen.emplace(step, std::pair{rank, d});
      if (!fresh && it->second.second != d) {
        why = fmt::format("step {}: rank {} has weights {}, rank {} has {}", step, it->second.first,
                          it->second.second, rank, d);
        return false;
      }
    }
  return true;
}

struct JobResult {
  int rc = 0;
  std::map<int, RankLog> logs;
  double seconds = 0;
};

JobResult run_job(const std::string& backend, int ranks, int steps,
                  const std::vector<std::string>& kills, bool ft, const std::string& tag,
                  std::chrono::milliseconds heartbeat_timeout = std::chrono::milliseconds(2000)) {
  const std::string dir = fmt::format("/tmp/tessera-bench-ft-{}-{}", ::getpid(), tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  dist::LaunchOptions lo;
  lo.nproc_per_node = ranks;
  lo.master_port = 0;
  lo.ft = ft;
  lo.ft_min_replicas = ranks - 1;
  lo.ft_heartbeat_timeout = heartbeat_timeout;
  lo.max_restarts = ft ? static_cast<int>(kills.size()) : 1;
  lo.command = {self_exe(),       "bench-ft-worker",
                "--backend",      backend,
                "--steps",        std::to_string(steps),
                "--log",          dir,
                "--heartbeat-ms", "50",
                "--dim",          "1048576"};  // 4 MiB all-reduced per step, as torch_ft.py does
  if (!ft) {
    lo.command.push_back("--plain");
    lo.command.push_back("--checkpoint");
    lo.command.push_back(dir + "/checkpoint.bin");
  }
  for (const auto& k : kills) {
    lo.command.push_back("--kill");
    lo.command.push_back(k);
  }
  const auto t0 = std::chrono::steady_clock::now();
  JobResult r;
  r.rc = dist::launch(lo);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.logs = read_ft_logs(dir);
  fs::remove_all(dir);
  return r;
}

BenchRow recovery_row(const std::string& impl, const std::vector<double>& times, int ranks,
                      const std::string& signal = "kill") {
  BenchRow row{"ft", fmt::format("recovery/{}1of{}", signal, ranks), impl, ranks};
  if (times.empty()) {
    row.skipped = "no kill recovered";
    return row;
  }
  std::vector<double> t = times;
  std::sort(t.begin(), t.end());
  row.stats = Stats{t[t.size() / 2], t.front(), t.back(), static_cast<int>(t.size())};
  return row;
}

}  // namespace

int run_bench_ft_worker(const FtWorkerOptions& o) {
  const int rank = env_int("RANK", -1);
  TS_CHECK(rank >= 0, ValueError,
           "bench-ft-worker: RANK is not set (run it through tessera launch)");
  for (const auto& k : o.kills) parse_kill(k);  // bad specs fail at once, on every rank
  Log log(o.log_dir, rank);
  log.line("start {} {}", wall_ns(), env_int("TESSERA_RESTART_COUNT", 0));
  return o.plain ? run_plain(o, rank, log) : run_ft(o, rank, log);
}

int run_bench_ft(const BenchOptions& options) {
  constexpr int kRanks = 4;
  const int kills = options.quick ? 3 : 10;
  const int gap = 12;  // steps between kills: the restarted rank rejoins and heals meanwhile
  std::vector<BenchRow> rows;
  std::vector<std::string> notes;
  // One job per backend with `kills` kills of ranks 1..3 in turn, each restarted by --ft.
  auto kill_plan = [&](int n, int first) {
    std::vector<std::string> plan;
    for (int i = 0; i < n; ++i)
      plan.push_back(fmt::format("{}:{}:sigkill", 1 + i % (kRanks - 1), first + gap * i));
    return plan;
  };
  const int steps = options.soak ? 300 : 10 + gap * kills + 5;
  for (const std::string backend : {"shm", "gloo"}) {
    std::vector<std::string> plan = kill_plan(options.soak ? 10 : kills, options.soak ? 30 : 10);
    if (options.soak) {  // about every 30 steps, at a random step and rank
      plan.clear();
      std::srand(static_cast<unsigned>(wall_ns()));
      for (int i = 0; i < 9; ++i)
        plan.push_back(fmt::format("{}:{}:sigkill", 1 + std::rand() % (kRanks - 1),
                                   20 + 30 * i + std::rand() % 20));
    }
    std::fprintf(stderr, "bench ft: %s, %d ranks, %d steps, %zu kills\n", backend.c_str(), kRanks,
                 steps, plan.size());
    const JobResult r = run_job(backend, kRanks, steps, plan, true, backend);
    std::string why;
    if (r.rc != 0)
      notes.push_back(fmt::format("tessera-{}: the job exited with {}", backend, r.rc));
    if (!digests_agree(r.logs, why))
      notes.push_back(fmt::format("tessera-{}: replicas DISAGREE: {}", backend, why));
    rows.push_back(recovery_row("tessera-" + backend, recovery_times(r.logs), kRanks));
    if (options.soak) {
      const JobResult clean = run_job(backend, kRanks, steps, {}, true, backend + "-clean");
      int64_t lost = 0;  // rank 0 is never killed: its failed steps are the job's
      if (r.logs.count(0)) lost = r.logs.at(0).failed_steps;
      notes.push_back(fmt::format(
          "soak {}: {} kills, {} steps lost (failed to commit), final loss {:.6g} (without "
          "faults {:.6g}), job {:.1f} s (without faults {:.1f} s)",
          backend, plan.size(), lost, r.logs.count(0) ? r.logs.at(0).final_loss : NAN,
          clean.logs.count(0) ? clean.logs.at(0).final_loss : NAN, r.seconds, clean.seconds));
    }
  }
  // A stopped rank: no error anywhere, only a silent heartbeat. The Lighthouse declares it dead
  // after the heartbeat timeout (the launcher's default, 2 s), the survivors abort their
  // collective and re-form; the launcher kills and restarts the stopped process. Goal: the
  // next commit within 200 ms after the timeout.
  const auto heartbeat_timeout = std::chrono::milliseconds(2000);
  for (const std::string backend : {"shm", "gloo"}) {
    std::vector<std::string> plan;
    for (int i = 0; i < (options.quick ? 2 : 5); ++i)
      plan.push_back(fmt::format("{}:{}:sigstop", 1 + i % (kRanks - 1), 10 + gap * i));
    std::fprintf(stderr, "bench ft: %s, %d ranks, %zu SIGSTOPs\n", backend.c_str(), kRanks,
                 plan.size());
    const JobResult r = run_job(backend, kRanks, 10 + gap * static_cast<int>(plan.size()) + 5, plan,
                                true, backend + "-stop", heartbeat_timeout);
    std::string why;
    if (r.rc != 0)
      notes.push_back(fmt::format("tessera-{} (SIGSTOP): the job exited with {}", backend, r.rc));
    if (!digests_agree(r.logs, why))
      notes.push_back(fmt::format("tessera-{} (SIGSTOP): replicas DISAGREE: {}", backend, why));
    const std::vector<double> times = recovery_times(r.logs);
    rows.push_back(recovery_row("tessera-" + backend, times, kRanks, "sigstop"));
    if (rows.back().stats)
      notes.push_back(fmt::format(
          "tessera-{} (SIGSTOP): next commit {:.0f} ms after the {} ms heartbeat timeout "
          "(median of {}; goal <= 200)",
          backend,
          rows.back().stats->median_s * 1e3 - static_cast<double>(heartbeat_timeout.count()),
          heartbeat_timeout.count(), times.size()));
  }
  // The relaunch anchor: the same job without --ft, one kill: the launcher tears the job down
  // and starts it again, which resumes from the last checkpoint.
  {
    std::vector<double> times;
    for (int i = 0; i < (options.quick ? 2 : 5); ++i) {
      const JobResult r =
          run_job("shm", kRanks, 20, {fmt::format("{}:10:sigkill", 1 + i % 3)}, false, "relaunch");
      for (double t : recovery_times(r.logs)) times.push_back(t);
    }
    rows.push_back(recovery_row("relaunch", times, kRanks));
  }
  {
    std::string note;
    for (auto& r : run_python_anchor(std::string(TS_BENCH_SCRIPT_DIR) + "/torch_ft.py",
                                     {"--ranks", std::to_string(kRanks), "--trials",
                                      std::to_string(options.quick ? 3 : 10)},
                                     {{"OMP_NUM_THREADS", "1"}}, &note))
      rows.push_back(std::move(r));
    if (!note.empty()) notes.push_back("torch-gloo: " + note);
  }

  std::printf(
      "\nft: recovery from SIGKILL (kill) or SIGSTOP (sigstop) of 1 of %d ranks to the next "
      "committed step (ms; ratios for the kill rows)\n",
      kRanks);
  std::printf("%-22s %-14s %10s %10s %10s %6s %12s %12s\n", "case", "impl", "median", "min", "max",
              "n", "x relaunch", "x torch");
  const BenchRow* relaunch = find_row(rows, "relaunch", "", kRanks, true);
  const BenchRow* torch = find_row(rows, "torch-gloo", "", kRanks, true);
  for (const BenchRow& r : rows) {
    if (!r.stats) {
      std::printf("%-22s %-14s skipped: %s\n", r.case_name.c_str(), r.impl.c_str(),
                  r.skipped.c_str());
      continue;
    }
    const bool kill = r.case_name.find("/kill") != std::string::npos;
    auto ratio = [&](const BenchRow* a) {
      return a && kill ? fmt::format("{:11.1f}x", a->stats->median_s / r.stats->median_s)
                       : fmt::format("{:>12}", "-");
    };
    std::printf("%-22s %-14s %10.1f %10.1f %10.1f %6d %s %s\n", r.case_name.c_str(), r.impl.c_str(),
                r.stats->median_s * 1e3, r.stats->min_s * 1e3, r.stats->max_s * 1e3, r.stats->reps,
                ratio(relaunch).c_str(), ratio(torch).c_str());
  }
  return finish_bench("ft", notes, options.json_path, rows);
}

}  // namespace tessera::cli
