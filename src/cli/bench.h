// `tessera bench SUITE [--quick] [--threads 1,2] [--json PATH]` (see BENCHMARKS.md).
//
// Each suite prints a readable table and, with --json, writes one JSON object per line:
//   {"suite", "case", "impl", "threads", "median_s", "min_s", "max_s", "reps", "gflops", "gbps"}
// with the machine's limits measured in the same run (`peak` and `membw` rows) and its
// anchors (PyTorch 1.13, NumPy) run in the same invocation through /usr/bin/python3.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

struct BenchOptions {
  std::string suite = "ops";
  bool quick = false;        // headline cases, fewer repetitions: the run stays under ~2 min
  std::vector<int> threads;  // thread counts to measure; empty: 1 and the machine's cores
  std::string json_path;     // empty: no JSON file
  std::string filter;        // only cases whose name contains this (anchors too)
  bool soak = false;         // bench ft: the 300-step soak run with kills
};

// `tessera bench ops`: reductions over 64M float32 and an 8192x8192 matrix, broadcast add,
// gelu and softmax, against PyTorch 1.13 and NumPy. Returns the process exit status.
int run_bench_ops(const BenchOptions& options);

// `tessera bench gemm`: float32 GEMM (square 256..4096 and transformer shapes) through the
// engine against OpenBLAS and PyTorch 1.13, with the same run's FMA peak.
int run_bench_gemm(const BenchOptions& options);

// `tessera bench gemv`: GEMV with weights far larger than L3 (8192x8192, 4096x14336) in
// float32, bfloat16, float16, float8_e4m3fn and NVFP4, as GB/s and % of the same run's read
// bandwidth, against OpenBLAS sgemv and PyTorch 1.13 F.linear on a [1, 1, K] input.
int run_bench_gemv(const BenchOptions& options);

// `tessera bench train`: training steps per second of the demo model (tessera train's
// defaults) against the same model, batches and optimizer in PyTorch 1.13, as tokens/s.
int run_bench_train(const BenchOptions& options);

// `tessera bench ctc`: ctc_loss forward + backward against PyTorch 1.13 on the two
// shapes.
int run_bench_ctc(const BenchOptions& options);

// `tessera bench attention`: causal prefill attention against PyTorch 1.13's math attention.
int run_bench_attention(const BenchOptions& options);

// `tessera bench linalg`: cholesky and lu_factor (float32/float64; n = 64, 256, 1024 and
// batches of 10,000 8x8, 16x16, 32x32) against LAPACK (OpenBLAS) and PyTorch 1.13.
int run_bench_linalg(const BenchOptions& options);

// `tessera bench comm`: all_reduce, all_gather, reduce_scatter and all_to_all on 2 and 4 ranks
// (--threads gives the rank counts) from 8 B to 64 MiB, latency and bus bandwidth, against
// Gloo and PyTorch 1.13's gloo, with the same run's read bandwidth.
int run_bench_comm(const BenchOptions& options);

// `tessera bench window`: one-sided put and get (each with a flush) between 2 ranks, 8 B latency
// and 1-64 MiB bandwidth, Tessera's shm window against OpenMPI's MPI_Put/MPI_Get.
int run_bench_window(const BenchOptions& options);

// `tessera bench ft`: recovery of a 4-rank data-parallel job (ft::Manager under tessera launch
// --ft) from SIGKILLed ranks, kill to next committed step, against tearing the job down and
// relaunching it from its checkpoint and against PyTorch 1.13's gloo group re-created by the
// survivors. --soak: 300 steps with a kill about every 30, final loss against a clean run.
int run_bench_ft(const BenchOptions& options);

// One rank of a `bench ft` job or of the fault-injection tests (the hidden `bench-ft-worker`
// command, under tessera launch; see bench_ft.cpp for what it logs).
struct FtWorkerOptions {
  std::string backend = "shm";
  int steps = 30;
  std::vector<std::string> kills;  // RANK:STEP:MODE; a rank's k-th kill in its k-th life
  std::string log_dir;             // empty: no log
  int64_t dim = 256;               // elements of the weights (and of each step's all-reduce)
  int heartbeat_ms = 100;
  bool plain = false;      // an ordinary group and a checkpoint instead of ft::Manager
  std::string checkpoint;  // --plain: the checkpoint file
};
int run_bench_ft_worker(const FtWorkerOptions& options);

// One rank of a `bench comm` job (started by tessera launch; the hidden `bench-comm-worker`
// command): times the ops and sizes given, rank 0 writes JSON lines to out_path.
struct CommWorkerOptions {
  std::string backend = "shm";
  std::string impl = "tessera";  // the rows' impl
  std::string ops;               // comma-separated op names
  std::string sizes;             // comma-separated byte counts
  int trials = 5;
  std::string out_path;
};
int run_bench_comm_worker(const CommWorkerOptions& options);
// One rank of a `bench window` job (the hidden `bench-window-worker` command; ops put, get).
int run_bench_window_worker(const CommWorkerOptions& options);

}  // namespace tessera::cli
