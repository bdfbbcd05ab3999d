#include "cli/bench_util.h"

#include <cblas.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <immintrin.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/amx_tiles.h"
#include "core/cpu_features.h"
#include "tessera/core/parallel.h"
#include "tessera/core/storage.h"

#ifndef TS_ORACLE_PYTHON
#define TS_ORACLE_PYTHON "/usr/bin/python3"
#endif

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- streaming read kernels ----------------------------------------------------------------
// Each sums [p, p + n) floats with 8 independent vector accumulators so that loads, not the
// add latency, limit the loop. n is a multiple of 128 (the buffer is sized so).

// Horizontal sum through memory: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.
__attribute__((target("avx512f"))) float hsum512(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

__attribute__((target("avx512f"))) float read_avx512(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t i = 0; i < n; i += 128) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    a4 = _mm512_add_ps(a4, _mm512_load_ps(p + i + 64));
    a5 = _mm512_add_ps(a5, _mm512_load_ps(p + i + 80));
    a6 = _mm512_add_ps(a6, _mm512_load_ps(p + i + 96));
    a7 = _mm512_add_ps(a7, _mm512_load_ps(p + i + 112));
  }
  a0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                     _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  return hsum512(a0);
}

__attribute__((target("avx2"))) float read_avx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t i = 0; i < n; i += 64) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    a4 = _mm256_add_ps(a4, _mm256_load_ps(p + i + 32));
    a5 = _mm256_add_ps(a5, _mm256_load_ps(p + i + 40));
    a6 = _mm256_add_ps(a6, _mm256_load_ps(p + i + 48));
    a7 = _mm256_add_ps(a7, _mm256_load_ps(p + i + 56));
  }
  a0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                     _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, a0);
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}

float read_generic(const float* p, int64_t n) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; i += 16)
    for (int k = 0; k < 16; ++k) acc[k] += p[i + k];
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

// ---- peak kernels --------------------------------------------------------------------------
// 12 independent FMA chains (latency 4, two issue ports: at least 8 are needed).

constexpr int kChains = 12;

__attribute__((target("avx512f,fma"))) float fma_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  return hsum512(s);
}

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  __m256 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  return lanes[0] + lanes[7];
}

// vdpbf16ps: 16 lanes x 2 bf16 products x 2 flops = 64 flops per instruction.
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_avx512(int64_t iters) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380);  // ~6e-8
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  return hsum512(s);
}

// TDPBF16PS on tiles alone: 16 x 16 float32 lanes x 32 bf16 products x 2 flops = 16384 flops
// per instruction, four independent accumulator tiles (the GEMM kernel's 2 x 2).
__attribute__((target("amx-tile,amx-bf16"))) float tdpbf16_amx(int64_t iters) {
  static constexpr AmxTileConfig config = amx_full_tiles();
  alignas(64) static uint16_t a[512], b[512];
  std::fill(std::begin(a), std::end(a), uint16_t{0x3f80});  // 1.0
  std::fill(std::begin(b), std::end(b), uint16_t{0x3380});  // ~6e-8
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[256];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

volatile float g_sink;

// Runs fn(thread_index) on `threads` threads of Tessera's pool at once.
void on_threads(int threads, const std::function<void(int64_t)>& fn) {
  set_num_threads(threads);
  parallel_for(0, threads, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) fn(t);
  });
}

BenchRow peak_row(const std::string& suite, const std::string& case_name, int threads,
                  double flops_per_iter, float (*kernel)(int64_t)) {
  const int64_t iters = 20'000'000;
  std::vector<double> times;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    on_threads(threads, [&](int64_t) { g_sink = kernel(iters); });
    times.push_back(seconds_since(t0));
  }
  BenchRow row{suite, case_name, "peak", threads};
  row.stats = stats_of(std::move(times));
  row.gflops = flops_per_iter * static_cast<double>(iters) * threads / row.stats->median_s / 1e9;
  return row;
}

}  // namespace

std::vector<double> time_reps(const std::function<void()>& fn, const Budget& budget,
                              const std::function<void()>& between, bool warm_up) {
  if (warm_up) fn();  // page faults, caches, lazily built plans, threads woken
  std::vector<double> times;
  const auto start = Clock::now();
  while (static_cast<int>(times.size()) < budget.max_reps &&
         (static_cast<int>(times.size()) < budget.min_reps ||
          seconds_since(start) < budget.min_time_s)) {
    if (between) between();
    const auto t0 = Clock::now();
    fn();
    times.push_back(seconds_since(t0));
  }
  return times;
}

Stats stats_of(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  const double median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  return Stats{median, times.front(), times.back(), static_cast<int>(n)};
}

Stats measure(const std::function<void()>& fn, const Budget& budget) {
  return stats_of(time_reps(fn, budget));
}

std::string to_json_line(const BenchRow& row) {
  nlohmann::ordered_json j;
  j["suite"] = row.suite;
  j["case"] = row.case_name;
  j["impl"] = row.impl;
  j["threads"] = row.threads;
  if (row.stats) {
    j["median_s"] = row.stats->median_s;
    j["min_s"] = row.stats->min_s;
    j["max_s"] = row.stats->max_s;
    j["reps"] = row.stats->reps;
  } else {
    j["median_s"] = j["min_s"] = j["max_s"] = nullptr;
    j["reps"] = 0;
  }
  j["gflops"] = row.gflops ? nlohmann::ordered_json(*row.gflops) : nullptr;
  j["gbps"] = row.gbps ? nlohmann::ordered_json(*row.gbps) : nullptr;
  if (row.membw_gbps) j["membw_gbps"] = *row.membw_gbps;
  if (!row.skipped.empty()) j["skipped"] = row.skipped;
  return j.dump();
}

ReadProbe::ReadProbe(int threads, size_t bytes)
    : threads_(threads),
      bytes_(bytes),
      share_((static_cast<int64_t>(bytes / sizeof(float)) / threads) / 128 * 128),
      buf_(static_cast<float*>(cpu_allocate(bytes))) {
  // Each thread first-touches and later reads its own share.
  on_threads(threads_, [&](int64_t t) {
    float* p = buf_ + t * share_;
    for (int64_t i = 0; i < share_; ++i) p[i] = 1.0f;
  });
}

ReadProbe::~ReadProbe() {
  cpu_free(buf_, bytes_);
}

void ReadProbe::run() const {
  const auto& f = cpu_features();
  float (*kernel)(const float*, int64_t) =
      f.avx512f ? read_avx512 : (f.avx2 ? read_avx2 : read_generic);
  on_threads(threads_, [&](int64_t t) { g_sink = kernel(buf_ + t * share_, share_); });
}

double ReadProbe::bytes_read() const {
  return static_cast<double>(share_ * threads_ * static_cast<int64_t>(sizeof(float)));
}

BenchRow measure_membw(const std::string& suite, int threads, const Budget& budget, size_t bytes) {
  const ReadProbe probe(threads, bytes);
  const Stats s = measure([&] { probe.run(); }, budget);
  const auto floats = static_cast<int64_t>(probe.bytes_read()) / int64_t{sizeof(float)};
  BenchRow row{suite, fmt::format("stream_read/float32/{}", floats), "membw", threads};
  row.stats = s;
  row.gbps = probe.bytes_read() / s.median_s / 1e9;
  return row;
}

double ReadProbe::timed_run() const {
  const auto t0 = Clock::now();
  run();
  return seconds_since(t0);
}

namespace {

// The float32 FMA loop this CPU runs at full width, its case name and flops per iteration;
// null kernel where it has no FMA.
struct FmaLoop {
  float (*kernel)(int64_t) = nullptr;
  const char* case_name = "";
  double flops_per_iter = 0;
};

FmaLoop fma_loop() {
  const auto& f = cpu_features();
  if (f.avx512f && f.fma) return {fma_avx512, "fma/float32/avx512", 2.0 * 16 * kChains};
  if (f.avx2 && f.fma) return {fma_avx2, "fma/float32/avx2", 2.0 * 8 * kChains};
  return {};
}

}  // namespace

PeakProbe fma_peak_probe(int threads) {
  constexpr int64_t iters = 1'000'000;  // ~2-3 ms at 2 FMAs a cycle
  const FmaLoop loop = fma_loop();
  PeakProbe p;
  if (!loop.kernel) return p;
  p.flops = loop.flops_per_iter * static_cast<double>(iters) * threads;
  p.run = [=] { on_threads(threads, [&](int64_t) { g_sink = loop.kernel(iters); }); };
  return p;
}

std::vector<BenchRow> measure_peak(const std::string& suite, int threads) {
  std::vector<BenchRow> rows;
  const auto& f = cpu_features();
  if (const FmaLoop loop = fma_loop(); loop.kernel)
    rows.push_back(peak_row(suite, loop.case_name, threads, loop.flops_per_iter, loop.kernel));
  if (f.avx512f && f.avx512_bf16) {
    rows.push_back(
        peak_row(suite, "dpbf16/bfloat16/avx512", threads, 4.0 * 16 * kChains, dpbf16_avx512));
  } else {
    BenchRow row{suite, "dpbf16/bfloat16/avx512", "peak", threads};
    row.skipped = "this CPU has no AVX512-BF16";
    rows.push_back(row);
  }
  if (f.amx_bf16 && request_amx_tiles())
    rows.push_back(peak_row(suite, "tdpbf16/bfloat16/amx", threads, 4.0 * 16384, tdpbf16_amx));
  return rows;
}

namespace {

// A JSON object with a "case" as a BenchRow; nothing for anything else.
std::optional<BenchRow> row_of(const nlohmann::json& j) {
  if (j.is_discarded() || !j.is_object() || !j.contains("case")) return std::nullopt;
  BenchRow row{j.value("suite", std::string("ops")), j["case"], j.value("impl", std::string()),
               j.value("threads", 1)};
  if (j.contains("skipped") && j["skipped"].is_string()) {
    row.skipped = j["skipped"];
  } else {
    row.stats = Stats{j["median_s"], j["min_s"], j["max_s"], j["reps"]};
    if (j.contains("times_s") && j["times_s"].is_array())
      for (const auto& t : j["times_s"])
        if (t.is_number()) row.times.push_back(t);
  }
  return row;
}

}  // namespace

std::vector<BenchRow> parse_json_rows(const std::string& text) {
  std::vector<BenchRow> rows;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] != '{') continue;
    if (auto row = row_of(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false)))
      rows.push_back(std::move(*row));
  }
  return rows;
}

std::vector<BenchRow> run_anchor_command(const std::string& command, const std::string& label,
                                         std::string* note) {
  std::vector<BenchRow> rows;
  const std::string err_path = fmt::format("/tmp/tessera-bench-{}.err", ::getpid());
  const std::string cmd = fmt::format("{} 2>'{}'", command, err_path);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    *note = "could not start " + cmd;
    return rows;
  }
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  const int status = ::pclose(p);
  std::string err;
  {
    std::ifstream f(err_path);
    err.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    std::remove(err_path.c_str());
  }
  rows = parse_json_rows(out);
  if (status != 0) {
    const size_t cut = err.size() > 600 ? err.size() - 600 : 0;
    *note = fmt::format("{} exited with status {}: {}", label, status, err.substr(cut));
  }
  return rows;
}

std::vector<BenchRow> run_python_anchor(const std::string& script,
                                        const std::vector<std::string>& args,
                                        const std::vector<std::pair<std::string, std::string>>& env,
                                        std::string* note) {
  std::string cmd = "env";
  for (const auto& [k, v] : env) cmd += fmt::format(" {}='{}'", k, v);
  cmd += fmt::format(" '{}' '{}'", TS_ORACLE_PYTHON, script);
  for (const auto& a : args) cmd += fmt::format(" '{}'", a);
  return run_anchor_command(cmd, script, note);
}

AnchorServer::AnchorServer(const std::string& script, const std::vector<std::string>& args,
                           const std::vector<std::pair<std::string, std::string>>& env,
                           std::string label)
    : label_(std::move(label)) {
  static int serial = 0;
  err_path_ = fmt::format("/tmp/tessera-bench-{}-{}.err", ::getpid(), serial++);
  std::vector<std::string> argv_s = {TS_ORACLE_PYTHON, script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  argv_s.push_back("--serve");
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const bool overridden = std::any_of(env.begin(), env.end(), [&](const auto& p) {
      return kv.substr(0, kv.find('=')) == p.first;
    });
    if (!overridden) env_s.emplace_back(kv);
  }
  for (const auto& [k, v] : env) env_s.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  for (auto& e : env_s) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    note_ = fmt::format("{}: socketpair failed: {}", label_, std::strerror(errno));
    return;
  }
  const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(sv[1], 0);
    ::dup2(sv[1], 1);
    if (err >= 0) ::dup2(err, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (err >= 0) ::close(err);
  ::close(sv[1]);
  if (pid < 0) {
    ::close(sv[0]);
    note_ = fmt::format("{}: fork failed: {}", label_, std::strerror(errno));
    return;
  }
  pid_ = pid;
  fd_ = sv[0];
}

AnchorServer::~AnchorServer() {
  if (fd_ >= 0) ::close(fd_);  // the script reads end-of-file and returns
  if (pid_ > 0) {
    const auto start = Clock::now();
    while (::waitpid(pid_, nullptr, WNOHANG) == 0) {
      if (seconds_since(start) > 10) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        break;
      }
      ::usleep(10'000);
    }
  }
  std::remove(err_path_.c_str());
}

void AnchorServer::fail(const std::string& why) {
  int status = -1;
  if (pid_ > 0) {
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  std::ifstream f(err_path_);
  const std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t cut = err.size() > 600 ? err.size() - 600 : 0;
  std::string how;
  if (status >= 0 && WIFEXITED(status))
    how = fmt::format(" (exited with status {})", WEXITSTATUS(status));
  else if (status >= 0 && WIFSIGNALED(status))
    how = fmt::format(" (killed by signal {})", WTERMSIG(status));
  note_ = fmt::format("{}: {}{}: {}", label_, why, how, err.substr(cut));
}

bool AnchorServer::read_until(const std::function<bool(const nlohmann::json&)>& last,
                              double timeout_s, const std::string& what) {
  const auto start = Clock::now();
  for (;;) {
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      const std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (last(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false))) return true;
    }
    const double left = timeout_s - seconds_since(start);
    pollfd p{fd_, POLLIN, 0};
    const int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left * 1000) + 1) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      fail(fmt::format("said nothing for {:.0f} s {}", timeout_s, what));
      return false;
    }
    char buf[4096];
    const ssize_t got = ::recv(fd_, buf, sizeof(buf), 0);
    if (got <= 0) {
      fail(fmt::format("stopped {}", what));
      return false;
    }
    pending_.append(buf, static_cast<size_t>(got));
  }
}

void AnchorServer::wait_ready(double timeout_s) {
  if (fd_ < 0 || ready_) return;
  ready_ =
      read_until([](const nlohmann::json& j) { return j.is_object() && j.value("ready", false); },
                 timeout_s, "while starting");
}

std::vector<BenchRow> AnchorServer::rows(const std::string& case_name, int threads,
                                         double timeout_s) {
  std::vector<BenchRow> out;
  wait_ready(timeout_s);
  if (fd_ < 0) return out;
  const std::string request = fmt::format("{} {}\n", case_name, threads);
  if (::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    fail("could not send it a case");
    return out;
  }
  const bool done = read_until(
      [&](const nlohmann::json& j) {
        if (!j.is_discarded() && j.is_object() && j.value("done", false)) return true;
        if (auto row = row_of(j)) out.push_back(std::move(*row));
        return false;
      },
      timeout_s, fmt::format("while timing {}", case_name));
  return done ? out : std::vector<BenchRow>{};
}

std::vector<std::string> turn_args(const Budget& turn) {
  return {"--reps",     std::to_string(turn.min_reps),
          "--min-time", fmt::format("{}", turn.min_time_s),
          "--max-reps", std::to_string(turn.max_reps)};
}

std::map<int, std::unique_ptr<AnchorServer>> lockstep_per_thread_count(
    const std::string& script, const std::vector<std::string>& args,
    const std::vector<int>& threads, const Budget& turn, const std::string& label) {
  std::vector<std::string> all = args;
  for (auto& a : turn_args(turn)) all.push_back(std::move(a));
  std::map<int, std::unique_ptr<AnchorServer>> servers;
  for (int t : threads) {
    const std::string ts = std::to_string(t);
    servers[t] =
        std::make_unique<AnchorServer>(std::string(TS_BENCH_SCRIPT_DIR) + "/" + script, all,
                                       std::vector<std::pair<std::string, std::string>>{
                                           {"OPENBLAS_NUM_THREADS", ts}, {"OMP_NUM_THREADS", ts}},
                                       fmt::format("{} ({} threads)", label, t));
  }
  for (auto& [t, server] : servers) server->wait_ready();  // they start side by side
  return servers;
}

Contender tessera_contender(std::string impl, int t, std::function<void()> run,
                            std::function<void()> between) {
  return {.impl = std::move(impl),
          .run = std::move(run),
          .enter = [t] { set_num_threads(t); },
          .between = std::move(between)};
}

std::vector<BenchRow> take_turns(const std::string& suite, const std::string& case_name,
                                 int threads, int rounds, const Budget& turn,
                                 const std::vector<Contender>& contenders) {
  std::map<std::string, BenchRow> gathered;  // impl -> its row, times gathered over the turns
  std::vector<std::string> order;            // impls in the order they first answered
  auto gather = [&](BenchRow r) {
    auto [it, first] = gathered.try_emplace(r.impl, r);
    if (first)
      order.push_back(r.impl);
    else
      it->second.times.insert(it->second.times.end(), r.times.begin(), r.times.end());
  };
  // A contender's fastest call so far: one that has never taken under 50 ms skips its warm-up
  // (bench/anchor_common.py's measure() has the same rule, and says why not the last call).
  std::map<const Contender*, double> fastest;
  for (int round = 0; round < rounds; ++round) {
    for (const Contender& c : contenders) {
      if (c.script) {
        for (auto& r : c.script->rows(case_name, threads)) gather(std::move(r));
      } else if (gathered.count(c.impl) == 0 || gathered.at(c.impl).skipped.empty()) {
        BenchRow r{suite, case_name, c.impl, threads};
        if (c.enter) c.enter();
        try {
          const auto [best, first] =
              fastest.try_emplace(&c, std::numeric_limits<double>::infinity());
          r.times = time_reps(c.run, turn, c.between, best->second < 0.05 || first);
          for (double t : r.times) best->second = std::min(best->second, t);
        } catch (const std::exception& e) {
          r.skipped = e.what();
        }
        if (c.leave) c.leave();
        gather(std::move(r));
      }
      if (c.settle_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(c.settle_s));
    }
  }
  std::vector<BenchRow> rows;
  for (const auto& impl : order) {
    BenchRow& r = gathered.at(impl);
    if (!r.times.empty() && r.skipped.empty()) {
      r.stats = stats_of(r.times);
    } else {
      if (r.skipped.empty()) r.skipped = "no repetitions were timed";
      r.stats.reset();
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<BenchRow> run_torch_anchor(const std::string& script,
                                       const std::vector<std::string>& args,
                                       const std::vector<int>& threads, const Budget& budget,
                                       const std::string& label, std::vector<std::string>& notes) {
  std::vector<BenchRow> rows;
  for (int t : threads) {
    const std::string ts = std::to_string(t);
    std::vector<std::string> all = args;
    for (const std::string& a :
         {std::string("--threads"), ts, std::string("--reps"), std::to_string(budget.min_reps),
          std::string("--min-time"), fmt::format("{}", budget.min_time_s),
          std::string("--max-reps"), std::to_string(budget.max_reps)})
      all.push_back(a);
    std::string note;
    for (auto& r :
         run_python_anchor(std::string(TS_BENCH_SCRIPT_DIR) + "/" + script, all,
                           {{"OPENBLAS_NUM_THREADS", ts}, {"OMP_NUM_THREADS", ts}}, &note))
      rows.push_back(std::move(r));
    if (!note.empty()) notes.push_back(fmt::format("{} ({} threads): {}", label, t, note));
  }
  return rows;
}

std::vector<int> default_threads() {
  cpu_set_t set;
  int cores = 1;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  std::vector<int> t{1};
  if (cores > 1) t.push_back(cores);
  return t;
}

bool write_json_lines(const std::string& path, const std::vector<BenchRow>& rows) {
  if (path.empty()) return true;
  std::ofstream f(path);
  for (const auto& r : rows) f << to_json_line(r) << '\n';
  return static_cast<bool>(f);
}

const BenchRow* find_row(const std::vector<BenchRow>& rows, const std::string& impl,
                         const std::string& case_name, int threads, bool measured_only) {
  for (const auto& r : rows)
    if (r.impl == impl && r.threads == threads && (case_name.empty() || r.case_name == case_name) &&
        (r.stats || !measured_only))
      return &r;
  return nullptr;
}

std::string openblas_kernel_note() {
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  return fmt::format("openblas ran its {} kernels{}", openblas_get_corename(),
                     forced ? fmt::format(" (OPENBLAS_CORETYPE={} is set)", forced)
                            : std::string(" (detected from cpuid)"));
}

std::string anchor_info() {
  return fmt::format(
      "anchors:      {} (in the tessera command only, as a benchmark anchor: libtessera does "
      "not link it)\n",
      openblas_get_config());
}

bool stop_openblas_pool() {
  // blas_thread_shutdown_ is what OpenBLAS itself runs before a fork; exec_blas() starts the
  // pool again when it finds it down.
  using ShutdownFn = int (*)();
  static const auto shutdown =
      reinterpret_cast<ShutdownFn>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"));
  if (shutdown) shutdown();
  return shutdown != nullptr;
}

int finish_bench(const std::string& suite, const std::vector<std::string>& notes,
                 const std::string& json_path, const std::vector<BenchRow>& rows) {
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
  if (!write_json_lines(json_path, rows)) {
    std::fprintf(stderr, "bench %s: cannot write %s\n", suite.c_str(), json_path.c_str());
    return 1;
  }
  return 0;
}

}  // namespace tessera::cli
