// Benchmarks that run as multi-process jobs (`bench comm`, `bench window`): each starts
// `tessera <worker subcommand>` on n ranks through tessera launch, and rank 0 of the job writes
// its timings as JSON lines to a file the bench reads back.
#pragma once

#include <string>
#include <vector>

#include "cli/bench_util.h"

namespace tessera::cli {

// The path of the running `tessera` executable.
std::string self_exe();
std::string join_csv(const std::vector<std::string>& v);

// Runs `tessera <worker> --backend <backend> --impl <impl> --out <tmp> <args...>` as an n-rank
// job and returns the rows rank 0 wrote; a job that fails adds a note naming it.
std::vector<BenchRow> run_worker_job(const std::string& worker, int n, const std::string& backend,
                                     const std::string& impl, const std::vector<std::string>& args,
                                     std::vector<std::string>& notes);

}  // namespace tessera::cli
