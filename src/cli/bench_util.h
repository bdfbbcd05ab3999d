// Shared plumbing for `tessera bench` suites (BENCHMARKS.md): timing with median and spread,
// the JSON-lines row format, the machine limits measured in the same run (`membw`: streaming
// read bandwidth; `peak`: float32 FMA and bfloat16 dot-product throughput), running Python
// anchors (PyTorch 1.13, NumPy) in the same invocation, and the readable table.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tessera::cli {

struct Stats {
  double median_s = 0, min_s = 0, max_s = 0;
  int reps = 0;
};

// How long to measure: at least min_reps repetitions and min_time_s seconds (after one
// warm-up call), at most max_reps repetitions.
struct Budget {
  int min_reps = 5;
  double min_time_s = 0.5;
  int max_reps = 50;
};

// The times of fn's repetitions (after its warm-up call, unless warm_up is false); `between`,
// when given, runs untimed before each timed repetition (its time counts toward the budget's
// min_time_s).
std::vector<double> time_reps(const std::function<void()>& fn, const Budget& budget,
                              const std::function<void()>& between = {}, bool warm_up = true);
// Median and spread of repetition times (at least one).
Stats stats_of(std::vector<double> times);
Stats measure(const std::function<void()>& fn, const Budget& budget);

// One JSON line. A skipped anchor has `skipped` set and no timings.
struct BenchRow {
  BenchRow() = default;
  BenchRow(std::string suite_, std::string case_name_, std::string impl_, int threads_)
      : suite(std::move(suite_)),
        case_name(std::move(case_name_)),
        impl(std::move(impl_)),
        threads(threads_) {}

  std::string suite, case_name, impl;
  int threads = 1;
  std::optional<Stats> stats;
  std::optional<double> gflops, gbps;
  // The streaming read bandwidth measured alternately with this row's repetitions (a
  // ReadProbe between them): the limit under the same neighbours, for "% of bandwidth"
  // columns.
  std::optional<double> membw_gbps;
  std::string skipped;        // non-empty: this implementation did not run, and why
  std::vector<double> times;  // the repetitions' times, where the source kept them (not in JSON)
};

std::string to_json_line(const BenchRow& row);

// The first row of `rows` with this impl and thread count (and case, unless empty);
// measured_only skips rows that were skipped (no stats).
const BenchRow* find_row(const std::vector<BenchRow>& rows, const std::string& impl,
                         const std::string& case_name, int threads, bool measured_only = false);

// "openblas ran its <core> kernels (...)": OpenBLAS picks its kernel by cpuid unless
// OPENBLAS_CORETYPE forces one (an older core's kernel can be half as fast), so every suite
// with an OpenBLAS anchor says which one the run measured.
std::string openblas_kernel_note();
// The `tessera info` line for the anchors the command links (libtessera does not).
std::string anchor_info();
// Stops the worker pool that OpenBLAS (its pthreads build) starts when the command loads it:
// the workers spin for about 2^28 cycles (~0.1 s) before they sleep, so every process the
// command starts (a launched worker, a restarted rank, a bench worker) would run its first
// 0.1 s beside a spinning thread on these 2 cores (a shm all_reduce of 8 B measured 3x
// slower). Only the bench anchors call OpenBLAS; its first threaded call starts the pool
// again. Does nothing where the library has no such pool, and then returns false. The bench
// anchors call it after each multi-threaded OpenBLAS turn (bench_anchors.h).
bool stop_openblas_pool();

// Streaming read bandwidth in GB/s over a 256 MiB buffer (`bytes`: far beyond the caches, and
// the size of the largest benchmark inputs, so both see the same page and TLB behaviour),
// with `threads` threads of Tessera's pool, each summing its share with a multi-accumulator
// AVX-512/AVX2 loop.
BenchRow measure_membw(const std::string& suite, int threads, const Budget& budget,
                       size_t bytes = size_t{256} << 20);

// measure_membw's read loop with its buffer kept, so it can run between a case's repetitions.
class ReadProbe {
 public:
  explicit ReadProbe(int threads, size_t bytes = size_t{256} << 20);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;

  void run() const;          // one streaming pass over the buffer, on `threads` threads
  double timed_run() const;  // run(), returning its seconds
  double bytes_read() const;

 private:
  int threads_;
  size_t bytes_;
  int64_t share_;  // floats per thread, a multiple of 128
  float* buf_;
};

// measure_peak's float32 FMA loop as one short call (a few milliseconds on `threads` threads),
// to be timed in turns with a suite's cases: the peak under the same neighbours. `flops` is
// the work of one call; `run` is empty where the CPU has no FMA.
struct PeakProbe {
  std::function<void()> run;
  double flops = 0;
};
PeakProbe fma_peak_probe(int threads);
// float32 FMA peak (GFLOP/s) and, where the CPU has AVX512-BF16, the vdpbf16ps peak.
std::vector<BenchRow> measure_peak(const std::string& suite, int threads);

// The rows of JSON lines (BenchRow's format; lines that are not JSON objects with a "case"
// are ignored).
std::vector<BenchRow> parse_json_rows(const std::string& text);

// Runs a shell command that prints JSON rows (as parse_json_rows reads them) on stdout; its
// stderr is kept for the note. When it exits non-zero, sets *note ("<label> exited with
// status N: <the end of its stderr>").
std::vector<BenchRow> run_anchor_command(const std::string& command, const std::string& label,
                                         std::string* note);

// Runs `python script args...` with extra environment variables, collecting the JSON lines
// it prints (rows with "suite", "case", "impl", "threads", "median_s", ... or "skipped").
// When the script cannot run, returns no rows and sets *note.
std::vector<BenchRow> run_python_anchor(const std::string& script,
                                        const std::vector<std::string>& args,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        std::string* note);

// An anchor script in lockstep mode (its --serve flag; bench/anchor_common.py's serve()):
// started once, then asked for one case at a time, so that a suite can take turns with it.
class AnchorServer {
 public:
  AnchorServer(const std::string& script, const std::vector<std::string>& args,
               const std::vector<std::pair<std::string, std::string>>& env, std::string label);
  ~AnchorServer();
  AnchorServer(const AnchorServer&) = delete;
  AnchorServer& operator=(const AnchorServer&) = delete;

  // Waits until the script has started (imported its libraries and built its inputs: it
  // says {"ready": true}), so that no one is timed beside a start-up that takes a core and
  // memory bandwidth for seconds. rows() waits too; call it early to start several at once.
  void wait_ready(double timeout_s = 900);
  // The script's rows for one case at `threads` threads (none for a case it does not have),
  // timed with the budget it was started with. Once the script has failed (exited, or said
  // nothing for timeout_s), returns no rows and note() says why.
  std::vector<BenchRow> rows(const std::string& case_name, int threads, double timeout_s = 900);
  const std::string& note() const { return note_; }

 private:
  void fail(const std::string& why);
  // Reads the script's lines until last(line) holds (true), or fails (false) after timeout_s
  // of silence or when the script stops; `what` ends the failure's note.
  bool read_until(const std::function<bool(const nlohmann::json&)>& last, double timeout_s,
                  const std::string& what);

  std::string label_, err_path_, note_, pending_;
  int pid_ = -1;
  int fd_ = -1;  // our end of a socket pair: the script's stdin and stdout
  bool ready_ = false;
};

// An anchor script's timing flags (--reps, --min-time, --max-reps) for one turn.
std::vector<std::string> turn_args(const Budget& turn);

// bench/<script> in lockstep once per thread count, with OPENBLAS_NUM_THREADS and
// OMP_NUM_THREADS set to the count (both libraries read it when they load, so one process
// cannot change it), given `args` and turn_args(turn); labelled "<label> (<t> threads)".
std::map<int, std::unique_ptr<AnchorServer>> lockstep_per_thread_count(
    const std::string& script, const std::vector<std::string>& args,
    const std::vector<int>& threads, const Budget& turn, const std::string& label);

// One implementation of a case in a suite that takes turns (take_turns): either a call timed
// here (`impl`, `run`) or an anchor script in lockstep (`script`; its rows name themselves).
struct Contender {
  std::string impl = {};
  std::function<void()> run = {};
  AnchorServer* script = nullptr;
  std::function<void()> enter = {}, leave = {};  // around its turn: its thread count, say
  std::function<void()> between = {};            // untimed, before each of run's timed repetitions
  // Idle time after its turn: a library whose workers spin after a call (OpenBLAS for about
  // 0.1 s, OpenMP for milliseconds) would otherwise take a core from the next contender.
  double settle_s = 0;
};

// Tessera at t threads of its pool (`between` as Contender's).
Contender tessera_contender(std::string impl, int t, std::function<void()> run,
                            std::function<void()> between = {});

// Every contender in order, one turn each, `rounds` times over: a neighbour's burst lasting a
// second hits all alike. A turn of `run` is a warm-up call (skipped once a call has taken
// 50 ms or more) and repetitions within `turn`. Returns one row per impl with the times of all
// its turns and their stats; a contender that throws is skipped with the message, and a row
// with no times has no stats.
std::vector<BenchRow> take_turns(const std::string& suite, const std::string& case_name,
                                 int threads, int rounds, const Budget& turn,
                                 const std::vector<Contender>& contenders);

// Runs bench/<script> once per thread count with `args`, --threads and the budget's timing
// flags, and OPENBLAS_NUM_THREADS / OMP_NUM_THREADS set to the count: Debian's PyTorch runs on
// OpenBLAS (pthreads), whose thread count is read at load time, so torch.set_num_threads alone
// let a "1-thread" row use every core. A run that fails adds "<label> (<t> threads): why" to
// notes.
std::vector<BenchRow> run_torch_anchor(const std::string& script,
                                       const std::vector<std::string>& args,
                                       const std::vector<int>& threads, const Budget& budget,
                                       const std::string& label, std::vector<std::string>& notes);

// 1 and the number of cores this process may use (when more than 1).
std::vector<int> default_threads();

// Writes rows as JSON lines to `path` (nothing when path is empty). Returns false on error.
bool write_json_lines(const std::string& path, const std::vector<BenchRow>& rows);

// The end of every suite: prints the notes, writes the JSON lines; returns the exit status.
int finish_bench(const std::string& suite, const std::vector<std::string>& notes,
                 const std::string& json_path, const std::vector<BenchRow>& rows);

}  // namespace tessera::cli
