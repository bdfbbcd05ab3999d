// `tessera launch`: torchrun for Tessera. Starts nproc_per_node copies of a program on this
// node, gives each its place in the job through the environment, serves the job's TCPStore,
// and watches the workers until they all succeed or one fails.
//
// Environment of every worker (torchrun's names):
//   RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK (the node rank),
//   MASTER_ADDR, MASTER_PORT             where the TCPStore listens
//   TESSERA_JOB_SECRET                   the store's secret (kJobSecretEnv)
//   TESSERA_STORE_EXTERNAL=1             rank 0 must not start a store server of its own
//   TESSERA_JOB_ID                       names the job (Flight Recorder headers)
//   TESSERA_RESTART_COUNT                0 on the first attempt, then 1, 2, ...
//   TESSERA_STORE_PREFIX                 multi-node jobs: the restart round's namespace in the
//                                        store ("round<k>"; init_process_group applies it)
//
// Failure policy (without --ft; see LaunchOptions::ft): when a worker exits with a non-zero code
// or is killed by a signal, the
// launcher names it ("rank 1 (local rank 1, pid 4242) exited with code 3"), sends SIGTERM to
// the other workers, SIGKILL to those still alive after `term_timeout`, and then either
// restarts the whole group (while restarts are left) or returns the failed worker's exit code
// (128 + N for signal N). SIGINT and SIGTERM sent to the launcher are forwarded to every
// worker, which then get the same deadline; the launcher returns 128 + the signal.
// Each worker runs in a process group of its own, so teardown reaches its children too.
//
// Multi-node jobs: every node runs one launcher with the same nnodes, master_addr and
// master_port and its own node_rank; the node-0 launcher serves the store (on every interface
// when the address is not loopback) for the whole job. The secret cannot be made up per node:
// with nnodes > 1 it must be given in TESSERA_JOB_SECRET to every launcher. The launchers
// agree through the store: each round starts once every node's launcher has joined it; a
// failure on any node stops the workers on every node, and the whole job restarts while
// restarts are left (torchrun's elastic agents); every launcher returns the same exit code. A
// launcher that receives SIGINT/SIGTERM ends the job on every node (no restart).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tessera::distributed {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  // 0: any free port (only where this launcher serves the store).
  int master_port = 29500;
  // Whole-group restarts after a failure (torchrun's --max-restarts).
  int max_restarts = 0;
  // How long torn-down workers get between SIGTERM and SIGKILL.
  std::chrono::milliseconds term_timeout{5000};
  // TESSERA_JOB_ID; empty: a random id.
  std::string run_id;
  // The program and its arguments.
  std::vector<std::string> command;
  // Fault-tolerance mode (--ft, for programs using ft::Manager): the launcher runs the job's
  // ft::Lighthouse beside the store; a worker that dies is declared dead at once and started
  // again alone (same RANK, TESSERA_RESTART_COUNT counting its own restarts) while restarts
  // are left (max_restarts per rank), and a worker the Lighthouse declares dead for a stale
  // heartbeat (hung, e.g. stopped) is killed and restarted the same way. The others go on;
  // nobody is torn down. Across nodes, node 0's launcher runs the Lighthouse and every
  // launcher reaches it through the store; node 0 serves the store until the other launchers
  // say their workers are done (or fall silent for 30 s).
  bool ft = false;
  int ft_min_replicas = 1;
  std::chrono::milliseconds ft_heartbeat_timeout{2000};
};

// Runs the job to its end and returns the launcher's exit code (0 when every worker
// succeeded). Prints what it does to stderr, prefixed "tessera launch:". Throws ValueError
// for bad options.
int launch(const LaunchOptions& options);

}  // namespace tessera::distributed
