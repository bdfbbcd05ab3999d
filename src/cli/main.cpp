// The `tessera` command: info, demo, train, sample, bench, launch, fr-trace.
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "cli/bench.h"
#include "cli/bench_util.h"
#include "cli/demo.h"
#include "cli/train.h"
#include "gemm/blocksizes.h"
#include "gemm/epilogue.h"
#include "gemm/gemv.h"
#include "gemm/lowp.h"
#include "tessera/distributed/flight_recorder.h"
#include "tessera/distributed/launch.h"
#include "tessera/tessera.h"

namespace {

std::vector<int> parse_threads(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const int n = std::stoi(item);
    TS_CHECK(n >= 1, ValueError, "bench: --threads expects positive counts, but got {}", n);
    out.push_back(n);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::cli::stop_openblas_pool();
  CLI::App app{"Tessera: a deep-learning runtime in C++20"};
  app.require_subcommand(1);
  int status = 0;

  auto* info = app.add_subcommand("info", "Print the kernel ISA, threads, build type, libraries");
  info->callback([] {
    std::fputs(tessera::build_info().c_str(), stdout);
    std::fputs(tessera::cli::anchor_info().c_str(), stdout);
    const auto& bf16 = tessera::gemm::bf16_path();
    std::printf("bf16 GEMM:    %s (%s)\n",
                bf16.amx     ? "AMX tile kernel"
                : bf16.pairs ? "vdpbf16ps pair kernel"
                             : "float32 kernel",
                bf16.reason.c_str());
    std::printf("GEMV kernels: %s\n", tessera::gemm::default_gemv_kernels().isa);
    // The blocking each float kernel runs with here (docs/gemm.md, "Blocksizes"): from the
    // caches as the blocking takes them (implausible reports replaced by the defaults), or
    // from TESSERA_GEMM_BLOCKS.
    namespace gemm = tessera::gemm;
    const auto& caches = gemm::cache_sizes();
    const auto& kernels = gemm::detail::default_gemm_kernels();
    const auto blocks = [&](const auto& uk, int64_t size) {
      const gemm::BlockSizes b = gemm::block_sizes(uk.mr, uk.nr, size, caches);
      return fmt::format("{} MC {} KC {} NC {}", uk.name, b.mc, b.kc, b.nc);
    };
    std::printf("GEMM blocks:  float32 %s, float64 %s%s\n",
                blocks(kernels.sgemm, sizeof(float)).c_str(),
                blocks(kernels.dgemm, sizeof(double)).c_str(),
                gemm::block_sizes_overridden() ? " (TESSERA_GEMM_BLOCKS)" : "");
    std::printf(
        "caches:       L1d %lld KiB, L2 %lld KiB, L3 %lld KiB (as the GEMM blocking takes "
        "them)\n",
        static_cast<long long>(caches.l1d >> 10), static_cast<long long>(caches.l2 >> 10),
        static_cast<long long>(caches.l3 >> 10));
  });

  auto* demo = app.add_subcommand("demo", "Run the showcase of the tensor library");
  demo->callback([&] { status = tessera::cli::run_demo(); });

  tessera::cli::BenchOptions bench_opts;
  std::string threads;
  auto* bench = app.add_subcommand("bench", "Run a benchmark suite against its anchors");
  bench
      ->add_option(
          "suite", bench_opts.suite,
          "Suite to run (ops, gemm, gemv, train, ctc, attention, linalg, comm, window, ft)")
      ->required();
  bench->add_flag("--quick", bench_opts.quick, "Headline cases only (about 2 minutes)");
  bench->add_flag("--soak", bench_opts.soak, "ft: the 300-step soak run with kills");
  bench->add_option("--threads", threads, "Thread counts, e.g. 1,2 (comm: rank counts, e.g. 2,4)");
  bench->add_option("--json", bench_opts.json_path, "Write JSON lines to this file");
  bench->add_option("--filter", bench_opts.filter,
                    "Only cases whose name contains this text, e.g. var/ or dim0");
  bench->callback([&] {
    if (!threads.empty()) bench_opts.threads = parse_threads(threads);
    for (char c : bench_opts.filter) {  // it reaches the anchor scripts' command line
      TS_CHECK(std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/_.-", c), ValueError,
               "bench: --filter may hold letters, digits and / _ . -, but got '{}'",
               bench_opts.filter);
    }
    TS_CHECK(bench_opts.suite == "ops" || bench_opts.suite == "gemm" ||
                 bench_opts.suite == "gemv" || bench_opts.suite == "train" ||
                 bench_opts.suite == "ctc" || bench_opts.suite == "attention" ||
                 bench_opts.suite == "linalg" || bench_opts.suite == "comm" ||
                 bench_opts.suite == "window" || bench_opts.suite == "ft",
             NotImplementedError,
             "bench: suite '{}' is not available yet (available: ops, gemm, gemv, train, ctc, "
             "attention, linalg, comm, window, ft)",
             bench_opts.suite);
    status = bench_opts.suite == "gemm"        ? tessera::cli::run_bench_gemm(bench_opts)
             : bench_opts.suite == "gemv"      ? tessera::cli::run_bench_gemv(bench_opts)
             : bench_opts.suite == "train"     ? tessera::cli::run_bench_train(bench_opts)
             : bench_opts.suite == "ctc"       ? tessera::cli::run_bench_ctc(bench_opts)
             : bench_opts.suite == "attention" ? tessera::cli::run_bench_attention(bench_opts)
             : bench_opts.suite == "linalg"    ? tessera::cli::run_bench_linalg(bench_opts)
             : bench_opts.suite == "comm"      ? tessera::cli::run_bench_comm(bench_opts)
             : bench_opts.suite == "window"    ? tessera::cli::run_bench_window(bench_opts)
             : bench_opts.suite == "ft"        ? tessera::cli::run_bench_ft(bench_opts)
                                               : tessera::cli::run_bench_ops(bench_opts);
  });

  // One rank of a `bench comm` or `bench window` job; started by the bench through tessera
  // launch, not by hand (hidden from --help).
  tessera::cli::CommWorkerOptions comm_opts;
  auto add_worker = [&](const char* name, int (*run)(const tessera::cli::CommWorkerOptions&)) {
    auto* worker = app.add_subcommand(name, "");
    worker->group("");
    worker->add_option("--backend", comm_opts.backend)->required();
    worker->add_option("--impl", comm_opts.impl);
    worker->add_option("--ops", comm_opts.ops)->required();
    worker->add_option("--sizes", comm_opts.sizes)->required();
    worker->add_option("--trials", comm_opts.trials)->check(CLI::Range(1, 1000));
    worker->add_option("--out", comm_opts.out_path)->required();
    worker->callback([&, run] { status = run(comm_opts); });
  };
  add_worker("bench-comm-worker", tessera::cli::run_bench_comm_worker);
  add_worker("bench-window-worker", tessera::cli::run_bench_window_worker);

  // One rank of a `bench ft` job or of the fault-injection tests (hidden, as above).
  tessera::cli::FtWorkerOptions ft_opts;
  auto* ft_worker = app.add_subcommand("bench-ft-worker", "");
  ft_worker->group("");
  ft_worker->add_option("--backend", ft_opts.backend);
  ft_worker->add_option("--steps", ft_opts.steps)->check(CLI::Range(1, 1000000));
  ft_worker->add_option("--kill", ft_opts.kills);
  ft_worker->add_option("--log", ft_opts.log_dir);
  ft_worker->add_option("--dim", ft_opts.dim)->check(CLI::Range(1, 1 << 24));
  ft_worker->add_option("--heartbeat-ms", ft_opts.heartbeat_ms)->check(CLI::Range(1, 60000));
  ft_worker->add_flag("--plain", ft_opts.plain);
  ft_worker->add_option("--checkpoint", ft_opts.checkpoint);
  ft_worker->callback([&] { status = tessera::cli::run_bench_ft_worker(ft_opts); });

  tessera::cli::TrainOptions train_opts;
  auto* train = app.add_subcommand(
      "train", "Train a small decoder-only transformer (default: reverse digit strings)");
  train->add_option("--data", train_opts.data,
                    "Train a byte-level language model on this text file instead");
  train->add_option("--out", train_opts.out, "Directory for the checkpoint and the curve")
      ->capture_default_str();
  train->add_option("--resume", train_opts.resume, "Continue from this checkpoint");
  train->add_option("--digits", train_opts.digits, "Reverse task: digits per example")
      ->capture_default_str();
  train->add_option("--seq-len", train_opts.seq_len, "Byte model: context length")
      ->capture_default_str();
  train->add_option("--dim", train_opts.dim, "Model width")->capture_default_str();
  train->add_option("--layers", train_opts.layers, "Transformer blocks")->capture_default_str();
  train->add_option("--heads", train_opts.heads, "Attention heads")->capture_default_str();
  train->add_option("--kv-heads", train_opts.kv_heads, "Key/value heads (grouped-query)")
      ->capture_default_str();
  train->add_option("--batch", train_opts.batch, "Sequences per step")->capture_default_str();
  train->add_option("--steps", train_opts.max_steps, "Maximum optimizer steps")
      ->capture_default_str();
  train->add_option("--lr", train_opts.lr, "Peak learning rate (AdamW, warm-up + cosine)")
      ->capture_default_str();
  train
      ->add_option("--target-accuracy", train_opts.target_accuracy,
                   "Reverse task: stop once exact-match accuracy reaches this")
      ->capture_default_str();
  train->add_option("--time-limit", train_opts.time_limit, "Stop after this many seconds")
      ->capture_default_str();
  train->add_option("--eval-every", train_opts.eval_every, "Steps between evaluations")
      ->capture_default_str();
  train->add_option("--seed", train_opts.seed, "Random seed")->capture_default_str();
  train->add_option("--threads", train_opts.threads, "Threads (default: all cores)");
  train->callback([&] { status = tessera::cli::run_train(train_opts); });

  tessera::cli::SampleOptions sample_opts;
  auto* sample = app.add_subcommand("sample", "Generate from a `tessera train` checkpoint");
  sample->add_option("checkpoint", sample_opts.checkpoint, "The checkpoint file")->required();
  sample->add_option("--prompt", sample_opts.prompt,
                     "Reverse model: the digits; byte model: the text to continue");
  sample->add_option("--count", sample_opts.count, "Reverse model: random examples")
      ->capture_default_str();
  sample->add_option("--max-new", sample_opts.max_new, "Byte model: bytes to generate")
      ->capture_default_str();
  sample->add_option("--temperature", sample_opts.temperature, "Byte model: sampling temperature")
      ->capture_default_str();
  sample->add_option("--seed", sample_opts.seed, "Random seed")->capture_default_str();
  sample->callback([&] { status = tessera::cli::run_sample(sample_opts); });

  tessera::distributed::LaunchOptions launch_opts;
  double term_timeout_s = 5;
  auto* launch = app.add_subcommand(
      "launch",
      "Run a distributed job: PROGRAM once per rank, like torchrun (tessera launch "
      "--nproc-per-node 2 -- PROGRAM ARGS)");
  launch->add_option("--nproc-per-node", launch_opts.nproc_per_node, "Workers on this node")
      ->capture_default_str();
  launch->add_option("--nnodes", launch_opts.nnodes, "Nodes in the job")->capture_default_str();
  launch->add_option("--node-rank", launch_opts.node_rank, "This node's rank")
      ->capture_default_str();
  launch
      ->add_option("--master-addr", launch_opts.master_addr,
                   "Address of node 0, where the store is served")
      ->capture_default_str();
  launch
      ->add_option("--master-port", launch_opts.master_port,
                   "Port of the store (0: any free port, single node only)")
      ->capture_default_str();
  launch
      ->add_option("--max-restarts", launch_opts.max_restarts,
                   "Restart the whole group this many times after a failure (with --ft: each "
                   "failed rank alone, this many times per rank)")
      ->capture_default_str();
  launch->add_flag("--ft", launch_opts.ft,
                   "Fault tolerance (ft::Manager programs): run the lighthouse; restart a dead "
                   "or hung rank alone while the others go on");
  launch
      ->add_option("--min-replicas", launch_opts.ft_min_replicas,
                   "--ft: replicas a quorum needs at least")
      ->capture_default_str();
  int heartbeat_timeout_ms = 2000;
  launch
      ->add_option("--heartbeat-timeout", heartbeat_timeout_ms,
                   "--ft: milliseconds of silence after which a replica is dead")
      ->capture_default_str();
  launch
      ->add_option("--term-timeout", term_timeout_s,
                   "Seconds stopped workers get between SIGTERM and SIGKILL")
      ->capture_default_str();
  launch->add_option("--run-id", launch_opts.run_id, "Job id (TESSERA_JOB_ID; default: random)");
  launch->add_option("command", launch_opts.command, "-- PROGRAM ARGS")->required();
  launch->callback([&] {
    TS_CHECK(term_timeout_s > 0 && term_timeout_s < 1e6, ValueError,
             "launch: --term-timeout must be in (0, 1e6) seconds, but got {}", term_timeout_s);
    launch_opts.term_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(term_timeout_s * 1000));
    launch_opts.ft_heartbeat_timeout = std::chrono::milliseconds(heartbeat_timeout_ms);
    status = tessera::distributed::launch(launch_opts);
  });

  std::string fr_dir;
  auto* fr_trace = app.add_subcommand(
      "fr-trace",
      "Merge the Flight Recorder dumps of all ranks and report the first collective "
      "where they disagree");
  fr_trace->add_option("dir", fr_dir, "Directory of the dumps (TESSERA_FR_DUMP_DIR)")->required();
  fr_trace->callback([&] { std::fputs(tessera::distributed::fr_trace(fr_dir).c_str(), stdout); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "\ntessera: error: %s\n", e.what());
    return 1;
  }
  return status;
}
