// The `tessera` command: info, demo, bench.
#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "cli/bench.h"
#include "cli/demo.h"
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
  CLI::App app{"Tessera: a deep-learning runtime in C++20"};
  app.require_subcommand(1);
  int status = 0;

  auto* info = app.add_subcommand("info", "Print the kernel ISA, threads, build type, libraries");
  info->callback([] { std::fputs(tessera::build_info().c_str(), stdout); });

  auto* demo = app.add_subcommand("demo", "Run the showcase of the tensor library");
  demo->callback([&] { status = tessera::cli::run_demo(); });

  tessera::cli::BenchOptions bench_opts;
  std::string threads;
  auto* bench = app.add_subcommand("bench", "Run a benchmark suite against its anchors");
  bench->add_option("suite", bench_opts.suite, "Suite to run (ops, gemm, gemv)")->required();
  bench->add_flag("--quick", bench_opts.quick, "Headline cases only (about 2 minutes)");
  bench->add_option("--threads", threads, "Thread counts, e.g. 1,2");
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
    TS_CHECK(bench_opts.suite == "ops" || bench_opts.suite == "gemm" || bench_opts.suite == "gemv",
             NotImplementedError,
             "bench: suite '{}' is not available yet (available: ops, gemm, gemv)",
             bench_opts.suite);
    status = bench_opts.suite == "gemm"   ? tessera::cli::run_bench_gemm(bench_opts)
             : bench_opts.suite == "gemv" ? tessera::cli::run_bench_gemv(bench_opts)
                                          : tessera::cli::run_bench_ops(bench_opts);
  });

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
