// Fault injection on real jobs: `tessera launch --ft` runs the bench-ft-worker (a 4-rank
// data-parallel loop on ft::Manager, see src/cli/bench_ft.cpp) while ranks kill or stop
// themselves on purpose; the survivors must re-form the quorum and finish, the dead rank is
// restarted and heals, and after every commit the replicas' weights are bitwise equal. The
// store is served by the launcher, so every rank killed here holds only store clients.

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/ft_log.h"
#include "dist_test_util.h"
#include "launch_test_util.h"

namespace tessera::testing {
namespace {

using cli::FtRankLog;

// The first lines of every rank's log (start, heal and commit lines with each commit's
// participants and quorum id): what a failure needs to be understood.
std::string log_heads(const std::filesystem::path& dir, int lines = 12) {
  std::string out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out += "--- " + e.path().filename().string() + "\n";
    std::ifstream f(e.path());
    std::string line;
    for (int i = 0; i < lines && std::getline(f, line); ++i) out += line + "\n";
  }
  return out;
}

// Checks a finished job's logs: every rank finished all `steps`, the weights agree at every step
// two ranks committed, and each victim was restarted and healed. `output`: the launchers'.
void check_job(const std::filesystem::path& dir, const std::string& output,
               const std::vector<int>& victims, int steps) {
  const auto logs = cli::read_ft_logs(dir.string());
  ASSERT_EQ(logs.size(), 4u) << output;
  std::map<int64_t, std::pair<int, std::string>> seen;
  bool disagree = false;
  for (const auto& [rank, l] : logs) {
    EXPECT_TRUE(l.done) << "rank " << rank << " did not finish\n" << output;
    EXPECT_EQ(l.last_step, steps) << "rank " << rank;
    for (const auto& [step, digest] : l.digests) {
      const auto [it, fresh] = seen.emplace(step, std::pair{rank, digest});
      const bool same = fresh || it->second.second == digest;
      EXPECT_TRUE(same) << "step " << step << ": rank " << it->second.first << " has "
                        << it->second.second << ", rank " << rank << " has " << digest;
      disagree = disagree || !same;
    }
  }
  if (disagree) ADD_FAILURE() << "the ranks' logs:\n" << log_heads(dir) << output;
  for (int v : victims) {
    const FtRankLog& l = logs.at(v);
    EXPECT_EQ(l.kills.size(), 1u) << "rank " << v;
    EXPECT_EQ(l.starts, 2) << "rank " << v << " was not restarted\n" << output;
    EXPECT_GE(l.heals, 1) << "rank " << v << " did not heal\n" << output;
  }
}

std::string worker_command(const std::string& backend, const std::vector<std::string>& kills,
                           int steps, const std::filesystem::path& log_dir) {
  std::string kill_args;
  for (const auto& k : kills) kill_args += " --kill " + k;
  return fmt::format("{} bench-ft-worker --backend {} --steps {} --log {} --heartbeat-ms 50{}",
                     kTesseraCli, backend, steps, log_dir.string(), kill_args);
}

// Runs a 4-rank job on one node and checks it (check_job).
void run_job(const std::string& backend, const std::vector<std::string>& kills,
             const std::vector<int>& victims, int steps = 40,
             const std::string& extra_launch = "") {
  TempDir dir("ft-" + backend);
  const auto r = run_launch_command(
      fmt::format("--ft --nproc-per-node 4 --max-restarts 2 --min-replicas 2 --master-port 0 {}",
                  extra_launch),
      worker_command(backend, kills, steps, dir.path), 240);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  check_job(dir.path, r.output, victims, steps);
}

class FtLaunch : public ::testing::TestWithParam<std::string> {};

TEST_P(FtLaunch, KillNineMidStep) {
  run_job(GetParam(), {"3:10:sigkill"}, {3});
}

TEST_P(FtLaunch, KillNineMidCollective) {
  run_job(GetParam(), {"1:10:sigkill-collective"}, {1});
}

TEST_P(FtLaunch, TwoRanksKilledAtOnce) {
  run_job(GetParam(), {"1:12:sigkill", "2:12:sigkill"}, {1, 2});
}

TEST_P(FtLaunch, KilledWhileTheQuorumReforms) {
  // Rank 3 dies; rank 2 dies 1 ms into the round that re-forms the quorum without 3.
  run_job(GetParam(), {"3:10:sigkill", "2:11:sigkill-quorum"}, {2, 3});
}

TEST_P(FtLaunch, AStoppedRankIsNoticedKilledAndRestarted) {
  // SIGSTOP: no error anywhere, only a silent heartbeat; the launcher's lighthouse declares it
  // dead after the heartbeat timeout, the survivors abort their collective and go on, and the
  // launcher kills and restarts the stopped process.
  run_job(GetParam(), {"2:10:sigstop"}, {2}, 40, "--heartbeat-timeout 500");
}

INSTANTIATE_TEST_SUITE_P(Backends, FtLaunch, ::testing::Values("shm", "gloo"),
                         [](const auto& info) { return info.param; });

// Two launchers on this host, as node 0 and node 1 of one --ft job (2 ranks each; gloo, as
// across hosts), checked as run_job's. Returns the launchers' output.
std::string run_two_node_job(const std::vector<std::string>& kills, const std::vector<int>& victims,
                             const std::string& extra_launch = "") {
  const int port = free_port();
  EXPECT_GT(port, 0);
  TempDir dir("ft-nodes");
  const std::string common = fmt::format(
      "--ft --nnodes 2 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port {} "
      "--max-restarts 2 --min-replicas 2 {}",
      port, extra_launch);
  const std::string worker = worker_command("gloo", kills, 40, dir.path);
  const std::string node1 = dir.path.string() + ".node1";
  const auto r = run_shell(
      fmt::format("export TESSERA_JOB_SECRET=ft-multi-node-test-secret; {0} launch {1} "
                  "--node-rank 1 -- {2} > {3} 2>&1 & n1=$!; {0} launch {1} --node-rank 0 -- {2}; "
                  "rc0=$?; wait $n1; rc1=$?; cat {3}; rm -f {3}; echo \"rc $rc0 $rc1\"",
                  kTesseraCli, common, worker, node1),
      240);
  EXPECT_NE(r.output.find("rc 0 0"), std::string::npos) << r.output;
  check_job(dir.path, r.output, victims, 40);
  return r.output;
}

// A rank on node 1 is killed: its launcher restarts it there and tells the Lighthouse on node
// 0 through the store. Node 0 serves the store until node 1's ranks are done.
TEST(FtLaunchNodes, ARankKilledOnTheSecondNodeIsRestartedThere) {
  const std::string out = run_two_node_job({"3:10:sigkill"}, {3});
  EXPECT_NE(out.find("rank 3 (pid"), std::string::npos) << out;
  EXPECT_NE(out.find("restarting it (1 of 2 restarts)"), std::string::npos) << out;
}

// A rank on node 1 stops: the Lighthouse on node 0 publishes it as stale in the store, and
// node 1's launcher kills and restarts it.
TEST(FtLaunchNodes, AStoppedRankOnTheSecondNodeIsKilledThere) {
  const std::string out = run_two_node_job({"2:10:sigstop"}, {2}, "--heartbeat-timeout 500");
  EXPECT_NE(out.find("rank 2 stopped heartbeating (hung?); killing it"), std::string::npos) << out;
}

}  // namespace
}  // namespace tessera::testing
