// Low-precision rows of `tessera bench gemm` (bench_gemm_lowp.cpp).
#pragma once

#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/bench_util.h"

namespace tessera::cli {

// Runs the bfloat16 mm and scaled_mm (float8, NVFP4) cases for each thread count, appends
// their rows (and PyTorch 1.13 bf16 anchors) to `rows`, and prints their table; the float32
// and peak rows already in `rows` give the ratios.
void bench_gemm_lowp(const BenchOptions& options, const std::vector<int>& threads,
                     const Budget& budget, std::vector<BenchRow>& rows,
                     std::vector<std::string>& notes);

}  // namespace tessera::cli
