// `tessera launch` with real processes: jobs that succeed, a rank that exits with an error, a
// rank killed by a signal, a restart that succeeds, signal forwarding, bad options. Every run
// is bounded by timeout(1), so a launcher that hangs fails the test instead of blocking it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "dist_test_util.h"
#include "launch_test_util.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;

// The workers' pids, from the pid files they wrote.
std::vector<pid_t> worker_pids(const std::filesystem::path& dir, int n) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    std::ifstream in(dir / ("pid" + std::to_string(r)));
    pid_t pid = 0;
    if (in >> pid) pids.push_back(pid);
  }
  return pids;
}

bool process_exists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

class Launch : public ::testing::TestWithParam<int> {};

TEST_P(Launch, AllRanksAllReduceAndSucceed) {
  const int n = GetParam();
  const auto r = run_launch(fmt::format("--nproc-per-node {} --master-port 0", n), "allreduce");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_NE(r.output.find(fmt::format("rank {} local {} world {} local_world {} restart 0: "
                                        "all_reduce ok ({})",
                                        rank, rank, n, n, n * (n + 1) / 2)),
              std::string::npos)
        << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Launch, ::testing::Values(2, 3), world_size_name);

TEST(LaunchFaults, ARankThatExitsWithAnErrorEndsTheJobWithItsCode) {
  TempDir dir("launch-exit");
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_launch("--nproc-per-node 3 --master-port 0 --term-timeout 2",
                            fmt::format("exit 1 3 {}", dir.path.string()));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("rank 1 (local rank 1, pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with code 3; stopping the other workers"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("job failed: rank 1 exited with code 3; exiting with code 3"),
            std::string::npos)
      << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);  // not the others' 60 s sleep
  const auto pids = worker_pids(dir.path, 3);
  ASSERT_EQ(pids.size(), 3u) << r.output;
  for (pid_t pid : pids) EXPECT_FALSE(process_exists(pid)) << "worker " << pid << " survived";
}

TEST(LaunchFaults, ARankKilledByASignalIsNamedWithTheSignal) {
  TempDir dir("launch-signal");
  const auto r = run_launch("--nproc-per-node 2 --master-port 0 --term-timeout 2",
                            fmt::format("signal 0 {} {}", SIGKILL, dir.path.string()));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  EXPECT_NE(r.output.find("rank 0 (local rank 0, pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("was killed by signal 9 (SIGKILL)"), std::string::npos) << r.output;
  for (pid_t pid : worker_pids(dir.path, 2)) EXPECT_FALSE(process_exists(pid));
}

TEST(LaunchFaults, AWorkerThatIgnoresSigtermIsKilledAfterTheDeadline) {
  TempDir dir("launch-stubborn");
  // Rank 0 ignores SIGTERM (also in its child): only SIGKILL after the deadline stops it.
  // Rank 1 fails once rank 0 is ready.
  const std::string script = (dir.path / "stubborn.sh").string();
  std::ofstream(script) << fmt::format(
      "if [ \"$RANK\" = 1 ]; then\n"
      "  while [ ! -s {0}/pid0 ]; do sleep 0.05; done\n"
      "  exit 4\n"
      "fi\n"
      "trap '' TERM\n"
      "echo $$ > {0}/pid$RANK\n"
      "sleep 60 & wait\n",
      dir.path.string());
  const auto r =
      run_launch_command("--nproc-per-node 2 --master-port 0 --term-timeout 0.5", "bash " + script);
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("ranks 0 did not stop within 500 ms of SIGTERM; sending SIGKILL"),
            std::string::npos)
      << r.output;
}

TEST(LaunchRestart, AGroupThatFailsOnceSucceedsOnTheSecondAttempt) {
  const auto r = run_launch("--nproc-per-node 2 --master-port 0 --max-restarts 2 --term-timeout 2",
                            "fail-first 1 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 (local rank 1, pid "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("restarting the group (2 of 2 restarts left)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("restart 1 of 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 0 local 0 world 2 local_world 2 restart 1: all_reduce ok (3)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank 1 local 1 world 2 local_world 2 restart 1: all_reduce ok (3)"),
            std::string::npos)
      << r.output;
}

TEST(LaunchRestart, RestartsRunOutAndTheLastFailureIsReported) {
  const auto r = run_launch_command("--nproc-per-node 2 --master-port 0 --max-restarts 1",
                                    "bash -c 'exit $((RANK + 6))'");
  EXPECT_TRUE(r.exit_code == 6 || r.exit_code == 7) << r.output;
  EXPECT_NE(r.output.find("(after 1 restarts)"), std::string::npos) << r.output;
}

class LaunchSignals : public ::testing::TestWithParam<int> {};

TEST_P(LaunchSignals, AreForwardedToTheWorkers) {
  const int sig = GetParam();
  TempDir dir("launch-signal-forward");
  // The launcher runs in the background; the test signals it once both workers are up.
  const std::string cmd = fmt::format(
      "{} launch --nproc-per-node 2 --master-port 0 -- bash -c 'echo $$ > {}/pid$RANK; exec "
      "sleep 60' & pid=$!; for i in $(seq 100); do [ -s {}/pid0 ] && [ -s {}/pid1 ] && break; "
      "sleep 0.1; done; kill -{} $pid; wait $pid",
      kTesseraCli, dir.path.string(), dir.path.string(), dir.path.string(), sig);
  const auto r = run_shell(cmd);
  EXPECT_EQ(r.exit_code, 128 + sig) << r.output;
  EXPECT_NE(r.output.find(fmt::format("received SIG{}; forwarding it to the workers",
                                      sig == SIGINT ? "INT" : "TERM")),
            std::string::npos)
      << r.output;
  const auto pids = worker_pids(dir.path, 2);
  EXPECT_EQ(pids.size(), 2u);
  for (pid_t pid : pids) EXPECT_FALSE(process_exists(pid));
}

INSTANTIATE_TEST_SUITE_P(Signals, LaunchSignals, ::testing::Values(SIGINT, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGINT ? std::string("SIGINT")
                                                       : std::string("SIGTERM");
                         });

TEST(LaunchOptions, BadOptionsAreExplained) {
  auto r = run_launch_command("--nproc-per-node 0", "true");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--nproc-per-node must be at least 1, but got 0"), std::string::npos)
      << r.output;
  r = run_launch_command("--nnodes 2 --node-rank 2", "true");
  EXPECT_NE(r.output.find("--node-rank must be in [0, 2) for --nnodes 2, but got 2"),
            std::string::npos)
      << r.output;
  r = run_launch_command("--nnodes 2 --master-port 0", "true");
  EXPECT_NE(r.output.find("--master-port 0 (any free port) works only with --nnodes 1"),
            std::string::npos)
      << r.output;
  r = run_shell(fmt::format("env -u {} {} launch --nnodes 2 --master-port 29999 -- true",
                            dist::kJobSecretEnv, kTesseraCli));
  EXPECT_NE(r.output.find("needs the job's secret in TESSERA_JOB_SECRET"), std::string::npos)
      << r.output;
  r = run_launch_command("--master-port 0", "/nonexistent/program");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot run '/nonexistent/program' for rank 0: No such file"),
            std::string::npos)
      << r.output;
  r = run_launch_command("--max-restarts -1", "true");
  EXPECT_NE(r.output.find("--max-restarts must not be negative, but got -1"), std::string::npos)
      << r.output;
}

// Two launchers as two nodes of one job, running `scenario` of the launch worker with `extra`
// launcher options; returns both launchers' output and "rc <node0> <node1>".
ShellResult run_two_nodes(const std::string& extra, const std::string& scenario) {
  const int port = free_port();
  EXPECT_GT(port, 0);
  const std::string common = fmt::format(
      "--nnodes 2 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port {} {}", port, extra);
  const std::string cmd = fmt::format(
      "export TESSERA_JOB_SECRET=multi-node-test-secret; {0} launch {1} --node-rank 1 -- {2} "
      "{4} > {3}.node1 2>&1 & n1=$!; {0} launch {1} --node-rank 0 -- {2} {4}; "
      "rc0=$?; wait $n1; rc1=$?; cat {3}.node1; rm -f {3}.node1; echo \"rc $rc0 $rc1\"",
      kTesseraCli, common, kLaunchWorker,
      (std::filesystem::temp_directory_path() / fmt::format("tessera-mn-{}", ::getpid())).string(),
      scenario);
  return run_shell(cmd);
}

// Two launchers on this host, as node 0 and node 1 of one job: node 0 serves the store,
// every rank knows its global rank, the all_reduce spans both.
TEST(LaunchMultiNode, TwoNodesOfTwoRanks) {
  const auto r = run_two_nodes("", "allreduce");
  EXPECT_NE(r.output.find("rc 0 0"), std::string::npos) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(r.output.find(fmt::format("rank {} local {} world 4 local_world 2 restart 0: "
                                        "all_reduce ok (10)",
                                        rank, rank % 2)),
              std::string::npos)
        << r.output;
  }
}

// A rank on node 1 fails in the first round: both nodes stop their workers, the job restarts
// on both (the workers rendezvous afresh under the new round's store prefix) and succeeds.
TEST(LaunchMultiNode, AFailureOnOneNodeRestartsTheJobOnEvery) {
  const auto r = run_two_nodes("--max-restarts 1", "fail-first 3 7");
  EXPECT_NE(r.output.find("rc 0 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 3 (node 1, local rank 1, pid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with code 7 on another node; stopping this node's workers"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("restarting the job on every node (1 of 1 restarts left)"),
            std::string::npos)
      << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(r.output.find(fmt::format("rank {} local {} world 4 local_world 2 restart 1: "
                                        "all_reduce ok (10)",
                                        rank, rank % 2)),
              std::string::npos)
        << r.output;
}

// Without restarts left, every launcher returns the failed rank's exit code.
TEST(LaunchMultiNode, WithoutRestartsEveryNodeExitsWithTheFailedRanksCode) {
  const auto r = run_two_nodes("", "fail-first 0 5");
  EXPECT_NE(r.output.find("rc 5 5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("job failed: rank 0 (node 0, local rank 0, pid"), std::string::npos)
      << r.output;
}

// A launcher that is signalled ends the job on every node, without a restart: both return
// 128 + SIGTERM.
TEST(LaunchMultiNode, ASignalledLauncherEndsTheJobOnEveryNode) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("tessera-mns-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string common = fmt::format(
      "--nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port {} --max-restarts 3",
      port);
  // Rank 9 does not exist: every worker sleeps until it is stopped.
  const std::string cmd = fmt::format(
      "export TESSERA_JOB_SECRET=multi-node-test-secret; {0} launch {1} --node-rank 1 -- {2} "
      "exit 9 0 {3} > {3}/node1 2>&1 & n1=$!; {0} launch {1} --node-rank 0 -- {2} exit 9 0 {3} "
      "> {3}/node0 2>&1 & n0=$!; for i in $(seq 100); do [ -e {3}/pid1 ] && [ -e {3}/pid0 ] && "
      "break; sleep 0.1; done; kill -TERM $n1; wait $n0; rc0=$?; wait $n1; rc1=$?; cat {3}/node0 "
      "{3}/node1; echo \"rc $rc0 $rc1\"",
      kTesseraCli, common, kLaunchWorker, dir.string());
  const auto r = run_shell(cmd);
  std::filesystem::remove_all(dir);
  EXPECT_NE(r.output.find("rc 143 143"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("node 1's launcher received SIGTERM on another node"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("restarting the job"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessera::testing
