// Runs a planned reduction on the thread pool (internal to src/ops).
//
// Chunking is part of the numerical contract: a Rows problem splits each row into chunks of
// cpu::kRowChunk elements and a Cols problem splits the reduced rows into chunks of
// cpu::kColRowChunk; chunk results are merged pairwise in a fixed order. Chunk boundaries
// depend only on the shape, and threads only decide who computes which chunk, so results
// are bitwise identical for every thread count.
#pragma once

#include <algorithm>
#include <vector>

#include "ops/cpu/reduce_kernels.h"
#include "ops/reduce_plan.h"
#include "tessera/core/parallel.h"

namespace tessera {

using RowsKernel = void (*)(const cpu::ReduceArgs&);

// merge(a, b) combines partials of consecutive chunks (a before b); finalize(p, out_offset)
// writes one result. index_partials: partial.n is an index that needs the chunk's offset.
template <class Merge, class Finalize>
void run_reduction(const ReducePlan& plan, cpu::ReduceArgs args, RowsKernel rows_kernel,
                   RowsKernel cols_kernel, bool index_partials, const Merge& merge,
                   const Finalize& finalize) {
  using cpu::Partial;
  const int64_t esize = plan.input.element_size();
  const char* base = static_cast<const char*>(plan.input.data_ptr());
  const int64_t B = plan.num_batches();
  const int64_t K = plan.K;
  auto pairwise = [&](auto&& self, Partial* p, int64_t n) -> Partial {
    if (n == 1) return p[0];
    const int64_t h = n / 2;
    return merge(self(self, p, h), self(self, p + h, n - h));
  };

  if (plan.layout == ReducePlan::Layout::Rows) {
    const int64_t nc = (K + cpu::kRowChunk - 1) / cpu::kRowChunk;
    if (nc == 1) {
      // Whole rows per kernel call; rows along the innermost batch dim share a stride.
      const int64_t inner = plan.batch_sizes.empty() ? 1 : plan.batch_sizes[0];
      const int64_t inner_stride = plan.batch_sizes.empty() ? 0 : plan.batch_in_strides[0];
      const int64_t inner_out = plan.batch_sizes.empty() ? 0 : plan.batch_out_strides[0];
      const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(K, 1));
      parallel_for(0, B, grain, [&](int64_t b0, int64_t b1) {
        constexpr int64_t kMaxRun = 256;
        Partial part[kMaxRun];
        int64_t b = b0;
        while (b < b1) {
          const int64_t i = b % inner;
          const int64_t run = std::min({b1 - b, inner - i, kMaxRun});
          int64_t in_off, out_off;
          plan.batch_offsets(b, in_off, out_off);
          cpu::ReduceArgs a = args;
          a.in = base + in_off * esize;
          a.rows = run;
          a.K = K;
          a.row_stride = inner_stride;
          a.out = part;
          rows_kernel(a);
          for (int64_t r = 0; r < run; ++r) finalize(part[r], out_off + r * inner_out);
          b += run;
        }
      });
      return;
    }
    std::vector<Partial> parts(static_cast<size_t>(B * nc));
    parallel_for(0, B * nc, 1, [&](int64_t t0, int64_t t1) {
      // A thread's consecutive chunks of one row go to the kernel as rows of one call, which
      // reads several of them side by side (reduce_kernels.cpp, kReadStreams); the last,
      // shorter chunk of a row alone.
      const int64_t full = (K % cpu::kRowChunk == 0) ? nc : nc - 1;  // chunks of kRowChunk
      for (int64_t t = t0; t < t1;) {
        const int64_t b = t / nc, c = t % nc;
        const int64_t run = c < full ? std::min(t1 - t, full - c) : 1;
        int64_t in_off, out_off;
        plan.batch_offsets(b, in_off, out_off);
        cpu::ReduceArgs a = args;
        a.in = base + (in_off + c * cpu::kRowChunk) * esize;
        a.rows = run;
        a.K = std::min(cpu::kRowChunk, K - c * cpu::kRowChunk);
        a.row_stride = cpu::kRowChunk;
        a.out = &parts[t];
        rows_kernel(a);
        if (index_partials)
          for (int64_t r = 0; r < run; ++r) parts[t + r].n += (c + r) * cpu::kRowChunk;
        t += run;
      }
    });
    parallel_for(0, B, std::max<int64_t>(1, 4096 / nc), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t in_off, out_off;
        plan.batch_offsets(b, in_off, out_off);
        finalize(pairwise(pairwise, &parts[b * nc], nc), out_off);
      }
    });
    return;
  }

  // Cols: tasks are (batch, column tile, row chunk). Tiles are as wide as cpu::kColTile,
  // narrowed (halving, down to kMinTile) while the threads outnumber the tasks.
  const int64_t N = plan.N;
  const int64_t nrc = (K + cpu::kColRowChunk - 1) / cpu::kColRowChunk;
  constexpr int64_t kMinTile = 1024;
  const int64_t threads = get_num_threads();
  int64_t width = cpu::kColTile;
  while (width > kMinTile && B * ((N + width - 1) / width) * nrc < threads) width /= 2;
  const int64_t ntiles = (N + width - 1) / width;
  // Whole rows in every call on one or two threads: a shape fact, so results never depend on
  // the thread count (more threads than B * nrc tasks narrow the tiles, and then the kernels
  // read parts of rows in the same order, only slower).
  args.whole_rows = N == plan.k_stride && N <= cpu::kColTile && B * nrc >= 2;
  std::vector<Partial> parts(nrc > 1 ? static_cast<size_t>(B * nrc * N) : 0);
  parallel_tasks(B * ntiles * nrc, [&](int64_t t) {
    const int64_t c = t % nrc, tile = (t / nrc) % ntiles, b = t / (nrc * ntiles);
    const int64_t j0 = tile * width, nb = std::min(width, N - j0);
    int64_t in_off, out_off;
    plan.batch_offsets(b, in_off, out_off);
    cpu::ReduceArgs a = args;
    a.in = base + (in_off + c * cpu::kColRowChunk * plan.k_stride + j0) * esize;
    a.K = std::min(cpu::kColRowChunk, K - c * cpu::kColRowChunk);
    a.N = nb;
    a.row_stride = plan.k_stride;
    if (nrc == 1) {
      std::vector<Partial> local(static_cast<size_t>(nb));
      a.out = local.data();
      cols_kernel(a);
      for (int64_t j = 0; j < nb; ++j) finalize(local[j], out_off + (j0 + j) * plan.n_out_stride);
    } else {
      a.out = &parts[(b * nrc + c) * N + j0];
      cols_kernel(a);
      if (index_partials)
        for (int64_t j = 0; j < nb; ++j) a.out[j].n += c * cpu::kColRowChunk;
    }
  });
  if (nrc == 1) return;
  parallel_for(0, B * N, std::max<int64_t>(1, 4096 / nrc), [&](int64_t i0, int64_t i1) {
    std::vector<Partial> col(static_cast<size_t>(nrc));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / N, j = i % N;
      for (int64_t c = 0; c < nrc; ++c) col[c] = parts[(b * nrc + c) * N + j];
      int64_t in_off, out_off;
      plan.batch_offsets(b, in_off, out_off);
      finalize(pairwise(pairwise, col.data(), nrc), out_off + j * plan.n_out_stride);
    }
  });
}

}  // namespace tessera
