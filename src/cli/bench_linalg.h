// Pieces shared by `tessera bench linalg`'s tables (bench_linalg.cpp, bench_linalg_spectral.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/bench_util.h"

namespace tessera::cli {

// Every implementation of a case takes turns with the others (take_turns), PyTorch among them
// in lockstep (bench/torch_linalg.py --serve, one script per thread count: its OpenBLAS reads
// the count when it loads). On a shared machine what a neighbour leaves drifts within
// seconds, and a large factorization is bound by the memory bandwidth it leaves: PyTorch's
// gelsy on a 2048 x 2048 float64 matrix took 1.01, 0.99 and 0.55 s in three calls in a row on
// one thread, so rows timed minutes apart compared the neighbours, not the libraries.
struct LinalgTurns {
  std::vector<int> threads;
  int rounds = 5;
  Budget turn;
  std::map<int, std::unique_ptr<AnchorServer>> torch;  // thread count -> PyTorch

  // One case's rows at t threads: the contenders `cs`, then PyTorch, `rounds` times over.
  std::vector<BenchRow> take(const std::string& name, int t, std::vector<Contender> cs) const;
};

// LAPACK (OpenBLAS) as a contender named `impl`: a single matrix (batch 1) on OpenBLAS's t
// threads; a batch spread over Tessera's pool of t threads, OpenBLAS single-threaded inside
// each call (ARCHITECTURE.md: one pool).
Contender lapack_contender(std::string impl, int64_t batch, int t, std::function<void()> run);

// Times linalg::eigh and linalg::svd (batches of 10,000 small matrices; single 256 and 1024
// matrices) in turns with LAPACK (?syevd, ?gesdd, ?gesvj) and PyTorch 1.13, prints the tables
// and the accuracy table on graded matrices, and appends the rows.
void run_bench_linalg_spectral(const BenchOptions& options, const LinalgTurns& turns,
                               std::vector<BenchRow>& rows);

}  // namespace tessera::cli
