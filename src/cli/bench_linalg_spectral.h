// The eigh / svd part of `tessera bench linalg` (bench_linalg_spectral.cpp).
#pragma once

#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/bench_util.h"

namespace tessera::cli {

// Times linalg::eigh and linalg::svd (batches of 10,000 small matrices; single 256 and 1024
// matrices) against LAPACK (?syevd, ?gesdd, ?gesvj) and PyTorch 1.13 at each thread count,
// prints the tables and the accuracy table on graded matrices, and appends the rows.
void run_bench_linalg_spectral(const BenchOptions& options, const std::vector<int>& threads,
                               const Budget& budget, std::vector<BenchRow>& rows,
                               std::vector<std::string>& notes);

}  // namespace tessera::cli
