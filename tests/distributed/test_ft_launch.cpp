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

// Runs the job; every rank must finish all `steps`, the weights must agree at every step two
// ranks committed, and each victim must have been restarted and healed.
void run_job(const std::string& backend, const std::vector<std::string>& kills,
             const std::vector<int>& victims, int steps = 40,
             const std::string& extra_launch = "") {
  TempDir dir("ft-" + backend);
  std::string kill_args;
  for (const auto& k : kills) kill_args += " --kill " + k;
  const auto r = run_launch_command(
      fmt::format("--ft --nproc-per-node 4 --max-restarts 2 --min-replicas 2 --master-port 0 {}",
                  extra_launch),
      fmt::format("{} bench-ft-worker --backend {} --steps {} --log {} --heartbeat-ms 50{}",
                  kTesseraCli, backend, steps, dir.path.string(), kill_args),
      240);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto logs = cli::read_ft_logs(dir.path.string());
  ASSERT_EQ(logs.size(), 4u) << r.output;
  std::map<int64_t, std::pair<int, std::string>> seen;
  bool disagree = false;
  for (const auto& [rank, l] : logs) {
    EXPECT_TRUE(l.done) << "rank " << rank << " did not finish\n" << r.output;
    EXPECT_EQ(l.last_step, steps) << "rank " << rank;
    for (const auto& [step, digest] : l.digests) {
      const auto [it, fresh] = seen.emplace(step, std::pair{rank, digest});
      const bool same = fresh || it->second.second == digest;
      EXPECT_TRUE(same) << "step " << step << ": rank " << it->second.first << " has "
                        << it->second.second << ", rank " << rank << " has " << digest;
      disagree = disagree || !same;
    }
  }
  if (disagree) ADD_FAILURE() << "the ranks' logs:\n" << log_heads(dir.path) << r.output;
  for (int v : victims) {
    const FtRankLog& l = logs.at(v);
    EXPECT_EQ(l.kills.size(), 1u) << "rank " << v;
    EXPECT_EQ(l.starts, 2) << "rank " << v << " was not restarted\n" << r.output;
    EXPECT_GE(l.heals, 1) << "rank " << v << " did not heal\n" << r.output;
  }
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

TEST(FtLaunchRefused, FtWithSeveralNodesSaysItIsNotImplemented) {
  const auto r = run_launch_command("--ft --nnodes 2 --node-rank 0 --master-port 29999", "true");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--ft with --nnodes 2 is not implemented"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace tessera::testing
