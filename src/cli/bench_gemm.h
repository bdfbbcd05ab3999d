// Pieces shared by `tessera bench gemm`'s tables (bench_gemm.cpp, bench_gemm_lowp.cpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/bench_util.h"

namespace tessera::cli {

// Every implementation of a case takes turns with the others (take_turns): on this shared
// machine what a neighbour leaves drifts within seconds, and rows measured minutes apart
// compared the neighbours, not the libraries. The contenders that run an anchor library come
// from bench_anchors.h.
struct Turns {
  std::vector<int> threads;
  bool quick = false;
  int rounds = 5;
  Budget turn;
  std::map<int, std::unique_ptr<AnchorServer>> torch_servers;  // thread count -> PyTorch

  AnchorServer* torch(int t) const;
  // One case's rows at t threads, GFLOP/s from `flops`.
  std::vector<BenchRow> take(const std::string& name, double flops, int t,
                             const std::vector<Contender>& cs) const;
};

// Runs the bfloat16 mm and scaled_mm (float8, NVFP4) cases in turns with the float32 product
// of the same shape, oneDNN's bf16 matmul and PyTorch 1.13's bf16 mm; appends their rows to
// `rows` and prints their table.
void bench_gemm_lowp(const BenchOptions& options, const Turns& turns, std::vector<BenchRow>& rows,
                     std::vector<std::string>& notes);

}  // namespace tessera::cli
