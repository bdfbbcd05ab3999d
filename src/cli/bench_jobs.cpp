// Multi-process bench jobs: see bench_jobs.h.
#include "cli/bench_jobs.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/distributed/launch.h"

namespace tessera::cli {

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  TS_CHECK(n > 0, RuntimeError, "bench: cannot read /proc/self/exe");
  return std::string(buf, static_cast<size_t>(n));
}

std::string join_csv(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

std::vector<BenchRow> run_worker_job(const std::string& worker, int n, const std::string& backend,
                                     const std::string& impl, const std::vector<std::string>& args,
                                     std::vector<std::string>& notes) {
  const std::string out =
      fmt::format("/tmp/tessera-{}-{}-{}-{}.jsonl", worker, ::getpid(), backend, n);
  distributed::LaunchOptions lo;
  lo.nproc_per_node = n;
  lo.master_port = 0;
  lo.command = {self_exe(), worker, "--backend", backend, "--impl", impl, "--out", out};
  lo.command.insert(lo.command.end(), args.begin(), args.end());
  std::fprintf(stderr, "%s: %s, %d ranks\n", worker.c_str(), backend.c_str(), n);
  const int rc = distributed::launch(lo);
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(out.c_str());
  if (rc != 0)
    notes.push_back(fmt::format("{} with {} ranks: the job exited with {}", backend, n, rc));
  return parse_json_rows(text);
}

}  // namespace tessera::cli
