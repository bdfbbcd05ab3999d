// The GEMM driver: BLIS's five loops around the microkernel, thread splitting, batching.
//
//   for jc in 0..n step NC            loop 5: B block of NC columns
//     for pc in 0..k step KC          loop 4: rank-KC update; pack B[pc:pc+KC, jc:jc+NC]
//       for ic in 0..m step MC        loop 3: pack A[ic:ic+MC, pc:pc+KC]
//         for jr in 0..NC step NR     loop 2: B micro-panel (stays in L1)
//           for ir in 0..MC step MR   loop 1: A micro-panel (streams from L2)
//             microkernel(KC, alpha, A panel, B panel, pc == 0 ? beta : 1, C tile)
//
// Edge tiles (fewer than MR rows or NR columns left) run the same full-size kernel on a
// temporary MR x NR tile: the valid part of C is copied in (only when beta != 0), the kernel
// runs with the real beta, and the valid part is copied back, so edge and interior tiles
// round identically and no write ever lands outside C.
//
// Threads: C is cut into a tm x tn grid of blocks whose edges fall on MR/NR boundaries, one
// block per thread, each running the five loops on its own packed buffers. k is never split,
// and a tile's arithmetic does not depend on which block holds it, so the result is bitwise
// the same for any thread count. Cutting n makes every thread pack all of A's rows for its
// columns (A is packed tn times), cutting m packs B tm times; the plan picks the grid with
// the shortest critical path (multiply-adds plus a packing cost per element). One parallel
// region per GEMM: a BLIS-style split of loop 3 over a shared packed B (two barriers per KC
// step, tasks claimed dynamically) measured 5-15% slower on a 2-core machine shared with
// another process, because every barrier waits for a worker the OS may have descheduled.
#include <emmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "gemm/blocksizes.h"
#include "gemm/epilogue.h"
#include "gemm/gemm.h"
#include "gemm/gemv.h"
#include "gemm/pack.h"
#include "tessera/core/error.h"
#include "tessera/core/parallel.h"

namespace tessera::gemm {

namespace {

// Below this many multiply-adds a GEMM runs on one thread: waking the pool costs more.
constexpr int64_t kMinParallelWork = int64_t{1} << 21;
// A packed element costs about this many multiply-adds of kernel time (plan_grid). A profile
// of 2048^3 on one Zen 5 thread: packing A (a transpose) ~1.3 cycles an element, B (row
// copies) ~0.8, the kernel ~29 multiply-adds a cycle, so 24-38; it read 8 until 2026-12-07,
// which split a prepacked 512x3072x768 by columns (each thread packing all of A): two threads,
// rows split instead, the libraries alternated 12 / 8 / 6 times, 382 -> 391, 382 -> 399,
// 378 -> 381 GFLOP/s.
constexpr int64_t kPackCost = 32;
// Largest register tile any kernel uses (elements), for the edge-tile buffer.
constexpr int64_t kMaxTile = 32 * 64;

template <class T>
struct Operands {
  int64_t m = 0, n = 0, k = 0;
  const T* a = nullptr;
  int64_t a_rs = 0, a_cs = 0;
  const T* b = nullptr;
  int64_t b_rs = 0, b_cs = 0;
  T* c = nullptr;
  int64_t c_rs = 0, c_cs = 0;
  T alpha = 1, beta = 0;
  int64_t i0 = 0, j0 = 0;  // where this block's C(0, 0) sits in the whole output (epilogues)
  // A prepacked B (PackedB) of packed_n columns in all, instead of b: column j0 of this block
  // is column j0 of the pack.
  const T* b_packed = nullptr;
  int64_t packed_n = 0;
  Triangle tri = Triangle::kAll;  // gemm_triangle: the part of the whole C computed
};

// Whether the rows x cols block of C at (i, j) (whole-C coordinates) lies wholly outside, or
// wholly inside, the triangle t.
bool outside(Triangle t, int64_t i, int64_t j, int64_t rows, int64_t cols) {
  if (t == Triangle::kUpper) return j + cols - 1 < i;
  if (t == Triangle::kLower) return j > i + rows - 1;
  return false;
}
bool inside(Triangle t, int64_t i, int64_t j, int64_t rows, int64_t cols) {
  if (t == Triangle::kUpper) return j >= i + rows - 1;
  if (t == Triangle::kLower) return j + cols - 1 <= i;
  return true;
}

// An epilogue plan's program, run on every tile after its last rank-KC update.
struct EpilogueHook {
  const cpu::EpilogueProgram* program = nullptr;
  cpu::EpilogueTileFn fn = nullptr;
};

template <class T>
Operands<T> typed(const GemmProblem& p, Triangle tri = Triangle::kAll) {
  Operands<T> o{p.m,
                p.n,
                p.k,
                static_cast<const T*>(p.a),
                p.a_rs,
                p.a_cs,
                static_cast<const T*>(p.b),
                p.b_rs,
                p.b_cs,
                static_cast<T*>(p.c),
                p.c_rs,
                p.c_cs,
                static_cast<T>(p.alpha),
                static_cast<T>(p.beta)};
  o.tri = tri;
  return o;
}

// C^T = B^T A^T: the same product with the roles of rows and columns exchanged.
template <class T>
Operands<T> transposed(const Operands<T>& p) {
  Operands<T> t{p.n,    p.m,    p.k, p.b,    p.b_cs, p.b_rs,  p.a,
                p.a_cs, p.a_rs, p.c, p.c_cs, p.c_rs, p.alpha, p.beta};
  t.tri = p.tri == Triangle::kUpper   ? Triangle::kLower
          : p.tri == Triangle::kLower ? Triangle::kUpper
                                      : Triangle::kAll;
  return t;
}

// Per-thread packing buffers (64-byte aligned), grown on demand and kept for the thread's
// life, so steady-state GEMMs allocate nothing.
class Workspace {
 public:
  ~Workspace() {
    release(a_);
    release(b_);
    release(e_);
  }
  template <class T>
  T* a(int64_t count) {
    return static_cast<T*>(grow(a_, count * sizeof(T)));
  }
  template <class T>
  T* b(int64_t count) {
    return static_cast<T*>(grow(b_, count * sizeof(T)));
  }
  // The epilogue's accumulator tile and per-node tile buffers.
  float* epilogue(int64_t count) { return static_cast<float*>(grow(e_, count * sizeof(float))); }

 private:
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  static void release(Buffer& buf) {
    if (buf.ptr) ::operator delete (buf.ptr, std::align_val_t{64});
    buf = {};
  }
  static void* grow(Buffer& buf, size_t bytes) {
    if (bytes > buf.bytes) {
      release(buf);
      buf.ptr = ::operator new (bytes, std::align_val_t{64});
      buf.bytes = bytes;
    }
    return buf.ptr;
  }
  Buffer a_, b_, e_;
};

Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Multiply-adds of a problem, in double: m * n * k can exceed int64 for valid sizes.
double work(int64_t m, int64_t n, int64_t k) {
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

// C := beta * C (zeros when beta == 0, without reading C).
template <class T>
void scale_c(const Operands<T>& p) {
  for (int64_t i = 0; i < p.m; ++i) {
    T* row = p.c + i * p.c_rs;
    // The columns of row i within the triangle.
    const int64_t j0 = p.tri == Triangle::kUpper ? std::min(i, p.n) : 0;
    const int64_t j1 = p.tri == Triangle::kLower ? std::min(i + 1, p.n) : p.n;
    if (p.beta == T(0)) {
      for (int64_t j = j0; j < j1; ++j) row[j * p.c_cs] = T(0);
    } else if (p.beta != T(1)) {
      for (int64_t j = j0; j < j1; ++j) row[j * p.c_cs] *= p.beta;
    }
  }
}

// Scratch for the epilogue on this thread: the accumulator tile, then one tile per node.
float* epilogue_scratch(const cpu::EpilogueProgram& program, int64_t mr, int64_t nr) {
  return workspace().epilogue((program.n_instrs + 1) * mr * nr);
}

// Starts pulling the tile's rows of every output and input matrix of the plan into L1, as
// the microkernel does for C: issued before the k loop, they arrive before the epilogue needs
// them. Without it the stores of a short-k GEMM stalled on every line (measured: a quarter of
// the interpreter's time at k = 64).
void prefetch_tile_memory(const cpu::EpilogueProgram& program, int64_t i0, int64_t j0, int mv,
                          int nv) {
  auto rows = [&](const void* data, ScalarType t, int64_t rs, int64_t cs, int rw) {
    if (cs != 1) return;
    const int64_t esz = t == ScalarType::Float32 ? 4 : 2;
    const char* base = static_cast<const char*>(data) + (i0 * rs + j0) * esz;
    for (int i = 0; i < mv; ++i) {
      const char* row = base + i * rs * esz;
      if (rw) {
        __builtin_prefetch(row, 1, 3);
        __builtin_prefetch(row + (nv - 1) * esz, 1, 3);
      } else {
        __builtin_prefetch(row, 0, 3);
        __builtin_prefetch(row + (nv - 1) * esz, 0, 3);
      }
    }
  };
  for (int s = 0; s < program.n_stores; ++s) {
    const cpu::EpilogueStoreOp& st = program.stores[s];
    if (!st.stream) rows(st.data, st.dtype, st.rs, st.cs, 1);  // streamed: not into the cache
  }
  for (int k = 0; k < program.n_instrs; ++k) {
    const cpu::EpilogueInstr& in = program.instrs[k];
    if (in.op == cpu::EpilogueOp::InputTile || in.op == cpu::EpilogueOp::SourceC)
      rows(in.data, in.dtype, in.rs, in.cs, 0);
  }
}

// Streamed stores are weakly ordered: fenced before this thread's tiles are reported done.
void fence_streamed_stores(const cpu::EpilogueProgram& program) {
  for (int s = 0; s < program.n_stores; ++s) {
    if (program.stores[s].stream) {
      _mm_sfence();
      return;
    }
  }
}

// Runs the plan on every microkernel-sized tile of an m x n product (tiles at multiples of
// MR and NR from (i_base, j_base), as the packed path visits them); fill(acc, i0, j0, mv, nv)
// writes the tile's accumulators into the plan's scratch tile (row stride NR) first.
template <class Fill>
void epilogue_tiles(const EpilogueHook& epi, int mr, int nr, int64_t m, int64_t n, int64_t i_base,
                    int64_t j_base, Fill fill) {
  float* acc = epilogue_scratch(*epi.program, mr, nr);
  cpu::EpilogueTile t{acc, mr, nr, 0, 0, 0, 0, acc + mr * nr};
  for (int64_t j0 = 0; j0 < n; j0 += nr) {
    const int nv = static_cast<int>(std::min<int64_t>(nr, n - j0));
    for (int64_t i0 = 0; i0 < m; i0 += mr) {
      const int mv = static_cast<int>(std::min<int64_t>(mr, m - i0));
      prefetch_tile_memory(*epi.program, i_base + i0, j_base + j0, mv, nv);
      fill(acc, i0, j0, mv, nv);
      t.i0 = i_base + i0, t.j0 = j_base + j0, t.mv = mv, t.nv = nv;
      epi.fn(*epi.program, t);
    }
  }
  fence_streamed_stores(*epi.program);
}

// dst (contiguous rows, row stride ld) := the mv x nv block at src (strides rs, cs).
template <class T>
void copy_block_in(T* dst, int64_t ld, const T* src, int64_t rs, int64_t cs, int64_t mv,
                   int64_t nv) {
  for (int64_t i = 0; i < mv; ++i) {
    if (cs == 1) {
      std::memcpy(dst + i * ld, src + i * rs, static_cast<size_t>(nv) * sizeof(T));
    } else {
      for (int64_t j = 0; j < nv; ++j) dst[i * ld + j] = src[i * rs + j * cs];
    }
  }
}

// One mv x nv tile of C (at most MR x NR), c = alpha A B + beta c, in place: whole tiles on
// the kernel, bottom edges on the kernel for their rows, anything narrower in the zero-padded
// `edge` buffer (C copied in when beta != 0, the valid part copied back), so edge and interior
// tiles round identically and no write lands outside the tile.
template <class T>
void finish_tile(const cpu::GemmMicroKernel<T>& uk, int64_t kc, T alpha, const T* a, const T* b,
                 T beta, T* tile, int64_t rs, int64_t cs, int64_t mv, int64_t nv, T* edge) {
  const int64_t mr = uk.mr, nr = uk.nr;
  if (mv == mr && nv == nr) {
    uk.fn(kc, alpha, a, b, beta, tile, rs, cs);
    return;
  }
  if (nv == nr && uk.rows) {
    uk.rows[mv](kc, alpha, a, b, beta, tile, rs, cs);
    return;
  }
  if (beta != T(0)) {
    std::fill(edge, edge + mr * nr, T(0));
    copy_block_in(edge, nr, tile, rs, cs, mv, nv);
  }
  uk.fn(kc, alpha, a, b, beta, edge, nr, 1);
  for (int64_t i = 0; i < mv; ++i)
    for (int64_t j = 0; j < nv; ++j) tile[i * rs + j * cs] = edge[i * nr + j];
}

// Loops 2 and 1 for the last rank-KC update of an epilogue plan: each tile is finished as the
// plain path finishes it (finish_tile) and handed to the plan in the contiguous scratch tile
// `acc` while it is hot in L1. With partial sums in c (beta != 0: c is then the accumulation
// buffer, which the plan never reads and whose final values are the plan's to write), the tile
// is finished in place there, where the microkernel prefetches c's lines under its multiplies,
// and copied to acc from L1; copying the partial sums in first stalled on each line (3% of a
// 1024^3 product). Lanes past nv in acc's last live vector stay finite (zeros). (i0, j0): where c
// sits in the output.
void macro_kernel_epilogue(const cpu::GemmMicroKernel<float>& uk, int64_t mc, int64_t nc,
                           int64_t kc, float alpha, const float* ap, const float* bp, float beta,
                           float* c, int64_t rs, int64_t cs, const EpilogueHook& epi, int64_t i0,
                           int64_t j0) {
  const int mr = uk.mr, nr = uk.nr;
  alignas(64) float edge[kMaxTile];
  epilogue_tiles(epi, mr, nr, mc, nc, i0, j0,
                 [&](float* acc, int64_t ir, int64_t jr, int mv, int nv) {
                   const float* a = ap + ir * kc;
                   const float* b = bp + jr * kc;
                   if (beta == 0.0f) {  // acc is a whole tile wide: its padding columns are zeros
                     finish_tile(uk, kc, alpha, a, b, beta, acc, nr, 1, mv, nr, edge);
                     return;
                   }
                   float* tile = c + ir * rs + jr * cs;
                   finish_tile(uk, kc, alpha, a, b, beta, tile, rs, cs, mv, nv, edge);
                   if (nv < nr) std::fill(acc, acc + mr * nr, 0.0f);
                   copy_block_in(acc, nr, tile, rs, cs, mv, nv);
                 });
}

// A small product (one KC block) with an epilogue plan: each tile is computed unpacked into
// the plan's scratch tile, the same tiles with the same values as macro_kernel_epilogue's (C
// is a leaf of the plan, so beta is 0 here).
void small_epilogue(const Operands<float>& p, const cpu::GemmMicroKernel<float>& uk,
                    cpu::SmallGemmFn<float> small, const EpilogueHook& epi) {
  TS_INTERNAL_ASSERT(p.beta == 0.0f);
  epilogue_tiles(epi, uk.mr, uk.nr, p.m, p.n, p.i0, p.j0,
                 [&](float* acc, int64_t i0, int64_t j0, int mv, int nv) {
                   small(mv, nv, p.k, p.alpha, p.a + i0 * p.a_rs, p.a_rs, p.a_cs, p.b + j0, p.b_rs,
                         0.0f, acc, uk.nr);
                 });
}

// Loops 2 and 1 over one packed A block (mc x kc) and one packed B block (kc x nc). With a
// triangle (c(0, 0) at row gi, column gj of the whole C), tiles wholly outside it are skipped
// and tiles across its diagonal run in the edge buffer, of which only the triangle's elements
// are read and written back.
template <class T>
void macro_kernel(const cpu::GemmMicroKernel<T>& uk, int64_t mc, int64_t nc, int64_t kc, T alpha,
                  const T* ap, const T* bp, T beta, T* c, int64_t rs, int64_t cs,
                  Triangle tri = Triangle::kAll, int64_t gi = 0, int64_t gj = 0) {
  const int64_t mr = uk.mr, nr = uk.nr;
  alignas(64) T edge[kMaxTile];
  for (int64_t jr = 0; jr < nc; jr += nr) {
    const int64_t nv = std::min(nr, nc - jr);
    const T* b_panel = bp + jr * kc;
    for (int64_t ir = 0; ir < mc; ir += mr) {
      const int64_t mv = std::min(mr, mc - ir);
      const T* a_panel = ap + ir * kc;
      T* tile = c + ir * rs + jr * cs;
      if (tri != Triangle::kAll && !inside(tri, gi + ir, gj + jr, mv, nv)) {
        if (outside(tri, gi + ir, gj + jr, mv, nv)) continue;
        // Row i of the tile keeps columns [lo(i), hi(i)); the rest of the buffer is zeros.
        const int64_t d = gi + ir - (gj + jr);  // the diagonal: column i + d of row i
        auto lo = [&](int64_t i) {
          return tri == Triangle::kUpper ? std::clamp<int64_t>(i + d, 0, nv) : int64_t{0};
        };
        auto hi = [&](int64_t i) {
          return tri == Triangle::kUpper ? nv : std::clamp<int64_t>(i + d + 1, 0, nv);
        };
        for (int64_t i = 0; i < mr; ++i) {
          T* e = edge + i * nr;
          const int64_t l = i < mv ? lo(i) : 0, h = i < mv ? hi(i) : 0;
          std::fill(e, e + l, T(0));
          std::fill(e + h, e + nr, T(0));
          for (int64_t j = l; j < h; ++j) e[j] = beta != T(0) ? tile[i * rs + j * cs] : T(0);
        }
        uk.fn(kc, alpha, a_panel, b_panel, beta, edge, nr, 1);
        for (int64_t i = 0; i < mv; ++i)
          for (int64_t j = lo(i), h = hi(i); j < h; ++j) tile[i * rs + j * cs] = edge[i * nr + j];
        continue;
      }
      finish_tile(uk, kc, alpha, a_panel, b_panel, beta, tile, rs, cs, mv, nv, edge);
    }
  }
}

// Loops 5, 4 and 3 on the calling thread. With an epilogue (float32 only), the last rank-KC
// update of each tile goes to the plan instead of C; earlier ones accumulate in C.
// Where the packed panels of B(pc.., col..) start in a PackedB's buffer (col a multiple of
// NR): blocks of NC columns one after another, each k rows of NR-wide panels, the last block
// padded to a whole panel (see PackedB).
template <class T>
const T* packed_b_at(const T* base, int64_t k, int64_t packed_n, const BlockSizes& bs, int64_t pc,
                     int64_t kc, int64_t col) {
  const int64_t jb = col / bs.nc, block_cols = std::min(bs.nc, packed_n - jb * bs.nc);
  const int64_t padded = ceil_div(block_cols, bs.nr) * bs.nr;
  return base + jb * bs.nc * k + pc * padded + (col - jb * bs.nc) * kc;
}

// Loops 3, 2 and 1 for one packed A block (mc x kc) and the packed B panels bp (kc x nc) of
// columns jc..: into C, or, on the last rank-KC update of an epilogue plan, into the plan.
template <class T>
void update_block(const Operands<T>& p, const cpu::GemmMicroKernel<T>& uk, const EpilogueHook* epi,
                  int64_t ic, int64_t mc, int64_t jc, int64_t nc, int64_t pc, int64_t kc,
                  const T* apack, const T* bp) {
  const T beta = pc == 0 ? p.beta : T(1);
  T* c = p.c + ic * p.c_rs + jc * p.c_cs;
  if constexpr (std::is_same_v<T, float>) {
    if (epi && pc + kc == p.k) {
      macro_kernel_epilogue(uk, mc, nc, kc, p.alpha, apack, bp, beta, c, p.c_rs, p.c_cs, *epi,
                            p.i0 + ic, p.j0 + jc);
      return;
    }
  }
  macro_kernel<T>(uk, mc, nc, kc, p.alpha, apack, bp, beta, c, p.c_rs, p.c_cs, p.tri, p.i0 + ic,
                  p.j0 + jc);
}

// A product with few rows (its packed A block within a quarter of L2: m up to 64 at
// KC = 1024, 1 MiB) uses each packed B block once and briefly, so packing B a whole KC x NC
// block ahead (4 MiB at KC = NC = 1024) only sends the packed copy through L3 and back. Here the
// rank-KC loop goes outside: A is packed once per KC step, and B in chunks of columns whose
// packed panels fit half of L2, each used while it is there. (A full-height A block is sized
// to fill L2 itself and reuses each B panel for MC / MR tiles: it keeps gemm_serial's order.)
// Every tile still sees its rank-KC updates in order, so the bits are those of gemm_serial's
// loop order. On the AMD EPYC (Zen 4 class) VM, k = n = 4096, one thread, medians of 30
// alternating with the old order: m = 64 24.3-26.1 ms vs 25.3-28.3 ms (packing B 20% of the
// profile vs 25%), m = 128 45.1-45.2 ms vs 47.1-47.2 ms; two threads the same (m = 64,
// 12.7-13.0 ms).
template <class T>
bool takes_one_a_block(const Operands<T>& p, const BlockSizes& bs) {
  const int64_t a_bytes =
      ceil_div(p.m, bs.mr) * bs.mr * std::min(bs.kc, p.k) * static_cast<int64_t>(sizeof(T));
  return !p.b_packed && p.m <= bs.mc && a_bytes <= cache_sizes().l2 / 4;
}

template <class T>
void gemm_serial_one_a_block(const Operands<T>& p, const cpu::GemmMicroKernel<T>& uk,
                             const BlockSizes& bs, const EpilogueHook* epi) {
  const int64_t kc_max = std::min(bs.kc, p.k);
  const int64_t l2_cols = cache_sizes().l2 / 2 / (kc_max * static_cast<int64_t>(sizeof(T)));
  const int64_t chunk = std::min(std::max(bs.nr, l2_cols / bs.nr * bs.nr), bs.nc);
  Workspace& ws = workspace();
  T* apack = ws.a<T>(ceil_div(p.m, bs.mr) * bs.mr * kc_max);
  T* bpack = ws.b<T>(ceil_div(std::min(chunk, p.n), bs.nr) * bs.nr * kc_max);
  for (int64_t pc = 0; pc < p.k; pc += bs.kc) {
    const int64_t kc = std::min(bs.kc, p.k - pc);
    pack_a_block<T>(p.m, kc, p.a + pc * p.a_cs, p.a_rs, p.a_cs, bs.mr, apack);
    for (int64_t jc = 0; jc < p.n; jc += chunk) {
      const int64_t nc = std::min(chunk, p.n - jc);
      if (outside(p.tri, p.i0, p.j0 + jc, p.m, nc)) continue;
      pack_b_block<T>(kc, nc, p.b + pc * p.b_rs + jc * p.b_cs, p.b_rs, p.b_cs, bs.nr, bpack);
      update_block(p, uk, epi, 0, p.m, jc, nc, pc, kc, apack, bpack);
    }
  }
}

// A prepacked B has no block to pack per call, so the A block goes outside: each is packed
// once and runs against the B panels of every column block in turn, where gemm_serial's order
// packs it once per NC block (n / NC times: 4 at n = 4096, NC = 1024). Between two uses of a
// B block the others pass through L3, so B comes from memory, ~1 GB/s a thread here. Every
// tile still sees its rank-KC updates in order: the bits are gemm_serial's.
template <class T>
void gemm_serial_packed_b(const Operands<T>& p, const cpu::GemmMicroKernel<T>& uk,
                          const BlockSizes& bs, const EpilogueHook* epi) {
  const int64_t mc_max = std::min(bs.mc, p.m), kc_max = std::min(bs.kc, p.k);
  T* apack = workspace().a<T>(ceil_div(mc_max, bs.mr) * bs.mr * kc_max);
  for (int64_t pc = 0; pc < p.k; pc += bs.kc) {
    const int64_t kc = std::min(bs.kc, p.k - pc);
    for (int64_t ic = 0; ic < p.m; ic += bs.mc) {
      const int64_t mc = std::min(bs.mc, p.m - ic);
      bool packed = false;
      for (int64_t jc = 0, nc = 0; jc < p.n; jc += nc) {
        // The pack's blocks start at multiples of NC of the whole matrix: stop at the next.
        nc = std::min(bs.nc - (p.j0 + jc) % bs.nc, p.n - jc);
        if (outside(p.tri, p.i0 + ic, p.j0 + jc, mc, nc)) continue;
        if (!packed) {
          pack_a_block<T>(mc, kc, p.a + ic * p.a_rs + pc * p.a_cs, p.a_rs, p.a_cs, bs.mr, apack);
          packed = true;
        }
        update_block(p, uk, epi, ic, mc, jc, nc, pc, kc, apack,
                     packed_b_at(p.b_packed, p.k, p.packed_n, bs, pc, kc, p.j0 + jc));
      }
    }
  }
}

template <class T>
void gemm_serial(const Operands<T>& p, const cpu::GemmMicroKernel<T>& uk, const BlockSizes& bs,
                 const EpilogueHook* epi = nullptr) {
  if (p.b_packed) return gemm_serial_packed_b(p, uk, bs, epi);
  if (takes_one_a_block(p, bs)) return gemm_serial_one_a_block(p, uk, bs, epi);
  const int64_t mc_max = std::min(bs.mc, p.m), nc_max = std::min(bs.nc, p.n);
  const int64_t kc_max = std::min(bs.kc, p.k);
  Workspace& ws = workspace();
  T* apack = ws.a<T>(ceil_div(mc_max, bs.mr) * bs.mr * kc_max);
  T* bpack = ws.b<T>(ceil_div(nc_max, bs.nr) * bs.nr * kc_max);
  for (int64_t jc = 0; jc < p.n; jc += bs.nc) {
    const int64_t nc = std::min(bs.nc, p.n - jc);
    for (int64_t pc = 0; pc < p.k; pc += bs.kc) {
      const int64_t kc = std::min(bs.kc, p.k - pc);
      pack_b_block<T>(kc, nc, p.b + pc * p.b_rs + jc * p.b_cs, p.b_rs, p.b_cs, bs.nr, bpack);
      for (int64_t ic = 0; ic < p.m; ic += bs.mc) {
        const int64_t mc = std::min(bs.mc, p.m - ic);
        if (outside(p.tri, p.i0 + ic, p.j0 + jc, mc, nc)) continue;
        pack_a_block<T>(mc, kc, p.a + ic * p.a_rs + pc * p.a_cs, p.a_rs, p.a_cs, bs.mr, apack);
        update_block(p, uk, epi, ic, mc, jc, nc, pc, kc, apack, bpack);
      }
    }
  }
}

// Products with at most this many rows and columns (and k <= KC) take the unpacked small kernel.
constexpr int64_t kSmallMax = 64;

// Whether p is small enough for the unpacked small kernel (run() also needs a small kernel in
// the table, and a row-major C without an epilogue, or an epilogue).
template <class T>
bool small_dims(const Operands<T>& p) {
  return !p.b_packed && p.b_cs == 1 && p.m <= kSmallMax && p.n <= kSmallMax;
}
template <class T>
bool small_shape(const Operands<T>& p, const BlockSizes& bs) {
  return small_dims(p) && p.k <= bs.kc;
}

// Medium products run on the small kernel too: up to this many rows and columns, k within one
// KC block, and B within half of L2 or prepacked. Every 8-row tile then streams B from L2 (its
// rows are contiguous, so B is read as it lies; a prepacked B panel by panel, each from L1
// for all the rows) and A in place, where the packed path copies A (and B) first (~5-10% of
// such a product). One thread on the Zen 5 VM, float32, GFLOP/s packed -> unpacked: 96^3
// 154 -> 217, 128^3 192 -> 203, 256^3 204 -> 216, 256x128x256 190 -> 220, 250^3 177 -> 203,
// 512x512x256 204 -> 214.
// With an epilogue plan (C not written; B not prepacked), the plan's MR-row tiles are filled
// by the small kernel as one 8-row tile and one of the rest, and the plan runs on each:
// bias + gelu + row sum at 256^3 (one thread) 198 -> 189 us, 128^3 30.4 -> 28.2.
constexpr int64_t kMediumMax = 512;
template <class T>
bool medium_shape(const Operands<T>& p, const BlockSizes& bs, bool epilogue) {
  if ((!epilogue && p.c_cs != 1) || p.m > kMediumMax || p.n > kMediumMax || p.k > bs.kc)
    return false;
  const bool b_in_l2 = !p.b_packed && p.b_cs == 1 &&
                       p.k * p.n * static_cast<int64_t>(sizeof(T)) <= cache_sizes().l2 / 2;
  return b_in_l2 || (!epilogue && p.b_packed);
}

struct Grid {
  int64_t tm = 1, tn = 1;
};

// The tm x tn thread grid with the shortest critical path for at most `threads` threads.
// A prepacked B costs nothing to share, so only A's packing counts then.
Grid plan_grid(int64_t m, int64_t n, int64_t k, const BlockSizes& bs, int64_t threads,
               bool b_prepacked) {
  const int64_t mp = ceil_div(m, bs.mr), np = ceil_div(n, bs.nr);
  if (threads <= 1 || work(m, n, k) < kMinParallelWork) return {};
  Grid best;
  double best_cost = 0;
  for (int64_t tm = 1; tm <= threads; ++tm) {
    for (int64_t tn = 1; tm * tn <= threads; ++tn) {
      if (tm > mp || tn > np) continue;
      const double rows = static_cast<double>(ceil_div(mp, tm) * bs.mr);
      const double cols = static_cast<double>(ceil_div(np, tn) * bs.nr);
      const double kd = static_cast<double>(k);
      const double packed = rows * kd * std::ceil(cols / bs.nc) + (b_prepacked ? 0 : cols * kd);
      const double cost = rows * cols * kd + kPackCost * packed;
      if (best_cost == 0 || cost < best_cost) {
        best_cost = cost;
        best = {tm, tn};
      }
    }
  }
  return best;
}

// An epilogue over a zero product (k == 0 or alpha == 0): every tile gets a zero accumulator.
void epilogue_zero_product(int64_t m, int64_t n, int mr, int nr, const EpilogueHook& epi) {
  float* acc = epilogue_scratch(*epi.program, mr, nr);
  std::fill(acc, acc + mr * nr, 0.0f);
  cpu::EpilogueTile t{acc, mr, nr, 0, 0, 0, 0, acc + mr * nr};
  for (int64_t i = 0; i < m; i += mr) {
    for (int64_t j = 0; j < n; j += nr) {
      t.i0 = i, t.j0 = j;
      t.mv = static_cast<int>(std::min<int64_t>(mr, m - i));
      t.nv = static_cast<int>(std::min<int64_t>(nr, n - j));
      epi.fn(*epi.program, t);
    }
  }
  fence_streamed_stores(*epi.program);
}

// `packed_bs`: the block sizes a prepacked B was packed with (p0.b_packed), else null.
template <class T>
void run(const Operands<T>& p0, const cpu::GemmKernels& kernels, bool allow_threads,
         const EpilogueHook* epi = nullptr, const BlockSizes* packed_bs = nullptr) {
  if (p0.m == 0 || p0.n == 0) return;
  if (p0.k == 0 || p0.alpha == T(0)) {
    if (epi) {
      epilogue_zero_product(p0.m, p0.n, kernels.sgemm.mr, kernels.sgemm.nr, *epi);
    } else {
      scale_c(p0);
    }
    return;
  }
  auto run_small = [&](const Operands<T>& p) {
    kernels.small<T>()(p.m, p.n, p.k, p.alpha, p.a, p.a_rs, p.a_cs, p.b, p.b_rs, p.beta, p.c,
                       p.c_rs);
  };
  // A small row-major product of depth within any KC runs before the flip and the block sizes:
  // that bookkeeping was a third of an 8x8x8 product's time. (Not on a triangle: the small
  // kernel writes all of C.)
  const bool all = p0.tri == Triangle::kAll;
  if (all && !epi && p0.c_cs == 1 && small_dims(p0) && within_min_kc(p0.k) && kernels.small<T>()) {
    run_small(p0);
    return;
  }
  // Column-major C: compute C^T = B^T A^T so that the kernel stores contiguous rows. (Not
  // with an epilogue: its tiles must stay in the output's own row/column orientation; not
  // with a prepacked B, which only serves as B.)
  const bool flip = !epi && !p0.b_packed && p0.c_cs != 1 && p0.c_rs == 1;
  const Operands<T> p = flip ? transposed(p0) : p0;
  const cpu::GemmMicroKernel<T>& uk = kernels.get<T>();
  TS_INTERNAL_ASSERT(uk.mr * uk.nr <= kMaxTile);
  TS_INTERNAL_ASSERT((p.b_packed != nullptr) == (packed_bs != nullptr));
  const BlockSizes bs =
      packed_bs ? *packed_bs : block_sizes(uk.mr, uk.nr, sizeof(T), cache_sizes());
  // Small and medium products within one KC block run unpacked (packing would cost about as
  // much as a small product, 5-10% of a medium one), with the same per-element arithmetic
  // (microkernel.h).
  const int64_t threads = allow_threads && !in_parallel_region() ? get_num_threads() : 1;
  if (all && medium_shape(p, bs, epi != nullptr) && kernels.small<T>()) {
    auto run_medium = [&](const Operands<T>& s) {
      if constexpr (std::is_same_v<T, float>) {
        if (epi) return small_epilogue(s, kernels.sgemm, kernels.small_sgemm, *epi);
      }
      if (!s.b_packed) return run_small(s);
      for (int64_t j = 0; j < s.n; j += bs.nr) {  // one KC block: panels of k x NR, row stride NR
        const T* panel = packed_b_at(s.b_packed, s.k, s.packed_n, bs, 0, s.k, s.j0 + j);
        kernels.small<T>()(s.m, std::min(bs.nr, s.n - j), s.k, s.alpha, s.a, s.a_rs, s.a_cs, panel,
                           bs.nr, s.beta, s.c + j, s.c_rs);
      }
    };
    // Threads take blocks of whole tiles: the small kernel's 8 rows, or an epilogue plan's MR
    // (its tiles sit where the packed path's do). The elements are independent: same bits.
    const int64_t rows = epi ? uk.mr : 8, tiles = ceil_div(p.m, rows);
    const int64_t parts =
        work(p.m, p.n, p.k) < kMinParallelWork ? 1 : std::min<int64_t>(threads, tiles);
    if (parts <= 1) {
      run_medium(p);
      return;
    }
    parallel_tasks(parts, [&](int64_t t) {
      const int64_t i0 = tiles * t / parts * rows;
      const int64_t i1 = std::min(p.m, tiles * (t + 1) / parts * rows);
      Operands<T> s = p;
      s.m = i1 - i0;
      s.a = p.a + i0 * p.a_rs;
      if (!epi) s.c = p.c + i0 * p.c_rs;  // an epilogue writes only its plan's outputs
      s.i0 = p.i0 + i0;
      run_medium(s);
    });
    return;
  }
  const Grid g = plan_grid(p.m, p.n, p.k, bs, threads, p.b_packed != nullptr);
  if (g.tm * g.tn == 1) {
    gemm_serial(p, uk, bs, epi);
    return;
  }
  const int64_t mp = ceil_div(p.m, bs.mr), np = ceil_div(p.n, bs.nr);
  if (!all) {
    // Slices of whole columns with equal shares of a square triangle: the upper one's columns
    // [0, j) hold (j / n)^2 of its elements, the lower one's [j, n) hold ((n - j) / n)^2.
    const int64_t parts = g.tm * g.tn;
    auto edge = [&](int64_t t) {
      const double f = static_cast<double>(t) / static_cast<double>(parts);
      const double x = p.tri == Triangle::kUpper ? std::sqrt(f) : 1 - std::sqrt(1 - f);
      return t == parts
                 ? p.n
                 : std::min(p.n, static_cast<int64_t>(std::llround(x * static_cast<double>(np))) *
                                     bs.nr);
    };
    parallel_tasks(parts, [&](int64_t t) {
      const int64_t j0 = edge(t), j1 = edge(t + 1);
      if (j0 >= j1) return;
      Operands<T> s = p;
      s.n = j1 - j0;
      s.b = p.b + j0 * p.b_cs;
      s.c = p.c + j0 * p.c_cs;
      s.j0 = p.j0 + j0;
      gemm_serial(s, uk, bs, epi);
    });
    return;
  }
  parallel_tasks(g.tm * g.tn, [&](int64_t t) {
    const int64_t ti = t / g.tn, tj = t % g.tn;
    const int64_t i0 = mp * ti / g.tm * bs.mr, i1 = std::min(p.m, mp * (ti + 1) / g.tm * bs.mr);
    const int64_t j0 = np * tj / g.tn * bs.nr, j1 = std::min(p.n, np * (tj + 1) / g.tn * bs.nr);
    if (i0 >= i1 || j0 >= j1) return;
    Operands<T> s = p;
    s.m = i1 - i0;
    s.n = j1 - j0;
    s.a = p.a + i0 * p.a_rs;
    if (!p.b_packed) s.b = p.b + j0 * p.b_cs;
    s.c = p.c + i0 * p.c_rs + j0 * p.c_cs;
    s.i0 = p.i0 + i0;
    s.j0 = p.j0 + j0;
    gemm_serial(s, uk, bs, epi);
  });
}

// Products with few rows or columns of C (gemv_pays) run on the GEMV path when the GEMV
// kernels read the other operand in place (its rows or columns contiguous): each output row
// (column) is a vector times that operand, which then streams once from memory instead of
// being packed (docs/gemm.md, "GEMV"). float32 on the float32 kernels, float64 and complex on
// gemm_as_gemv's. Not a tiny real product that the small kernel can take whole (m, n and k up
// to 64): there the GEMV's setup cost more than the product (one thread, float32: 4x4x4 119 ->
// 71 ns, 1x16x16 98 -> 55, 4x64x64 445 -> 371). Deeper products stay on the GEMV path
// (1x64x512: 1.3 us there, 7.9 packed).
bool takes_gemv(const GemmProblem& p, const cpu::GemmKernels& kernels) {
  if (!gemv_pays(std::min(p.m, p.n), std::max(p.m, p.n)) || !gemv_reads_in_place(p)) return false;
  // By shape alone: every layout of a tiny real product then runs in run(), whose paths (the
  // small kernel, or packing where B's layout rules it out) sum k in the same order, so
  // storage order never changes a bit (geqrf on row- and on column-major storage agree
  // bitwise). The GEMV's order matches theirs only for some layouts.
  const bool has_small = (p.dtype == ScalarType::Float32 && kernels.small_sgemm) ||
                         (p.dtype == ScalarType::Float64 && kernels.small_dgemm);
  const bool small = has_small && p.m <= kSmallMax && p.n <= kSmallMax && within_min_kc(p.k);
  return !small;
}

// C = alpha A B + beta C as a float32 GemvProblem (gemv_view's W, vectors and outputs).
GemvProblem as_gemv(const GemmProblem& p) {
  const GemvView v = gemv_view(p);
  GemvProblem g;
  g.n = v.n, g.k = v.k, g.nx = v.nx;
  g.alpha = p.alpha, g.beta = p.beta;
  g.w = v.w, g.w_rs = v.w_rs, g.w_cs = v.w_cs;
  g.x = v.x, g.x_ld = v.x_ld, g.x_inc = v.x_inc;
  g.y = static_cast<float*>(v.y), g.y_ld = v.y_ld, g.y_inc = v.y_inc;
  return g;
}

void run_problem(const GemmProblem& p, const cpu::GemmKernels& kernels, bool allow_threads,
                 Triangle tri = Triangle::kAll);

// complex64/complex128 as four real products on the real kernels (BLIS's "4m" induced
// method). A complex matrix with element strides (rs, cs) is two real ones: its real parts at
// the same address and its imaginary parts one real element further, both with strides
// (2 rs, 2 cs). With real alpha and beta:
//   Cr = alpha Ar Br + beta Cr,   Cr = -alpha Ai Bi + Cr,
//   Ci = alpha Ar Bi + beta Ci,   Ci =  alpha Ai Br + Ci.
// The flops are those of a complex kernel (a complex multiply-add is four real ones); each
// real product threads and reproduces bitwise like any other, and beta == 0 still never
// reads C.
void run_complex(const GemmProblem& p, const cpu::GemmKernels& kernels, bool allow_threads,
                 Triangle tri) {
  const bool single = p.dtype == ScalarType::Complex64;
  const int64_t part_bytes = single ? sizeof(float) : sizeof(double);
  auto part = [&](const void* base, int imag) -> const void* {
    return base ? static_cast<const char*>(base) + imag * part_bytes : nullptr;
  };
  GemmProblem q = p;
  q.dtype = single ? ScalarType::Float32 : ScalarType::Float64;
  q.a_rs = 2 * p.a_rs, q.a_cs = 2 * p.a_cs;
  q.b_rs = 2 * p.b_rs, q.b_cs = 2 * p.b_cs;
  q.c_rs = 2 * p.c_rs, q.c_cs = 2 * p.c_cs;
  auto step = [&](int a_imag, int b_imag, int c_imag, double alpha, double beta) {
    q.a = part(p.a, a_imag), q.b = part(p.b, b_imag);
    q.c = const_cast<void*>(part(p.c, c_imag));
    q.alpha = alpha, q.beta = beta;
    run_problem(q, kernels, allow_threads, tri);
  };
  step(0, 0, 0, p.alpha, p.beta);
  step(1, 1, 0, -p.alpha, 1);
  step(0, 1, 1, p.alpha, p.beta);
  step(1, 0, 1, p.alpha, 1);
}

// Runs one validated problem with the dtype's kernels (the GEMV kernels of the same ISA for
// tiny m or n, except on a triangle; complex ones as four real products otherwise).
void run_problem(const GemmProblem& p, const cpu::GemmKernels& kernels, bool allow_threads,
                 Triangle tri) {
  if (tri == Triangle::kAll && takes_gemv(p, kernels)) {
    const cpu::GemvKernels& gemv_kernels = gemv_kernels_for(kernels.isa);
    if (p.dtype == ScalarType::Float32) {
      gemv_run(as_gemv(p), gemv_kernels, allow_threads);
    } else {
      gemm_as_gemv(p, gemv_kernels, allow_threads);
    }
    return;
  }
  if (is_complex(p.dtype)) {
    run_complex(p, kernels, allow_threads, tri);
    return;
  }
  if (p.dtype == ScalarType::Float32) {
    run(typed<float>(p, tri), kernels, allow_threads);
  } else {
    run(typed<double>(p, tri), kernels, allow_threads);
  }
}

const cpu::GemmKernels& default_kernels() {
  return TS_DISPATCH(gemm_kernels);
}

// Sum of |stride| * (extent - 1): the span of a strided matrix, in elements.
bool overlaps_itself(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rows <= 1 || cols <= 1) return (rows > 1 && rs == 0) || (cols > 1 && cs == 0);
  const int64_t ars = rs < 0 ? -rs : rs, acs = cs < 0 ? -cs : cs;
  // Non-overlapping when the smaller stride's whole run fits inside one step of the larger.
  if (ars <= acs) return ars == 0 || ars * (rows - 1) >= acs;
  return acs == 0 || acs * (cols - 1) >= ars;
}

}  // namespace

void detail::validate_problem(const GemmProblem& p, std::string_view op, bool c_is_output) {
  TS_CHECK(gemm_supports(p.dtype), TypeError,
           "{}(): expected dtype float32, float64, complex64 or complex128, but got {}", op,
           p.dtype);
  TS_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0, ValueError,
           "{}(): expected non-negative sizes, but got m={}, n={}, k={}", op, p.m, p.n, p.k);
  // Complex operands are addressed as real ones with doubled strides (run_complex).
  const double w = is_complex(p.dtype) ? 2.0 : 1.0;
  auto fits = [w](int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    return w * (static_cast<double>(rows) * std::fabs(static_cast<double>(rs)) +
                static_cast<double>(cols) * std::fabs(static_cast<double>(cs))) <
           9.0e18;
  };
  TS_CHECK(fits(p.m, p.k, p.a_rs, p.a_cs) && fits(p.k, p.n, p.b_rs, p.b_cs) &&
               fits(p.m, p.n, p.c_rs, p.c_cs),
           ValueError,
           "{}(): expected operands whose element offsets fit in int64, but got m={}, n={}, "
           "k={} with strides a=({}, {}), b=({}, {}), c=({}, {})",
           op, p.m, p.n, p.k, p.a_rs, p.a_cs, p.b_rs, p.b_cs, p.c_rs, p.c_cs);
  if (p.m == 0 || p.n == 0) return;
  if (!c_is_output) {
    if (p.k == 0 || p.alpha == 0) return;
    TS_CHECK(p.a != nullptr && p.b != nullptr, ValueError,
             "{}(): arguments 'a' and 'b' expected pointers, but got {} and {}", op,
             p.a ? "a pointer" : "null", p.b ? "a pointer" : "null");
    return;
  }
  TS_CHECK(p.c != nullptr, ValueError, "{}(): argument 'c' expected a pointer, but got null", op);
  TS_CHECK(!overlaps_itself(p.m, p.n, p.c_rs, p.c_cs), ValueError,
           "{}(): argument 'c' expected non-overlapping strides for a {}x{} matrix, but got "
           "({}, {})",
           op, p.m, p.n, p.c_rs, p.c_cs);
  if (p.k == 0 || p.alpha == 0) return;
  TS_CHECK(p.a != nullptr && p.b != nullptr, ValueError,
           "{}(): arguments 'a' and 'b' expected pointers, but got {} and {}", op,
           p.a ? "a pointer" : "null", p.b ? "a pointer" : "null");
}

namespace {
// A problem that validate_problem accepts, recognised without a call: a float32/float64
// product, every size and stride below 2^30 (offsets then fit int64 by far), a row-major C
// (rows cannot overlap: |c_rs| >= n) and both operands present. Anything else takes the full
// check, which names what is wrong. The call and its frame were a tenth of an 8x8x8 product.
inline bool plainly_valid(const GemmProblem& p) {
  auto below = [](int64_t v) { return v > -(int64_t{1} << 30) && v < (int64_t{1} << 30); };
  return (p.dtype == ScalarType::Float32 || p.dtype == ScalarType::Float64) && p.m > 0 && p.n > 0 &&
         p.k > 0 && below(p.m) && below(p.n) && below(p.k) && below(p.a_rs) && below(p.a_cs) &&
         below(p.b_rs) && below(p.b_cs) && below(p.c_rs) && p.c_cs == 1 && p.c_rs >= p.n &&
         p.a != nullptr && p.b != nullptr && p.c != nullptr;
}

void validate(const GemmProblem& p, std::string_view op) {
  if (plainly_valid(p)) return;
  detail::validate_problem(p, op, true);
}
}  // namespace

const cpu::GemmKernels& detail::default_gemm_kernels() {
  return default_kernels();
}

void detail::float_tile_shape(const cpu::GemmKernels& kernels, int64_t* mr, int64_t* nr) {
  *mr = kernels.sgemm.mr;
  *nr = kernels.sgemm.nr;
}

bool detail::needs_accumulation_buffer(const GemmProblem& p, const cpu::GemmKernels& kernels,
                                       const PackedB* packed) {
  const BlockSizes bs =
      packed ? packed->block_sizes()
             : block_sizes(kernels.sgemm.mr, kernels.sgemm.nr, sizeof(float), cache_sizes());
  return p.alpha != 0 && p.k > bs.kc;
}

namespace {

// Few rows (or columns) beside many, with an epilogue plan: the GEMV kernels write alpha A B
// into a float32 buffer, and the plan runs over it in the microkernel's tiles, as it would on
// the packed path's accumulators (which would pack all of B for a 14-row kernel: 2.2x the
// product's time at (8, 4096, 4096)). The accumulators are gemm()'s bits, since gemm() takes
// the GEMV path for the same problem.
void gemv_epilogue(const GemmProblem& p, const cpu::GemmKernels& kernels, const EpilogueHook& epi) {
  std::vector<float> products(static_cast<size_t>(p.m * p.n));
  GemmProblem q = p;
  q.c = products.data(), q.c_rs = p.n, q.c_cs = 1, q.beta = 0;
  gemv_run(as_gemv(q), gemv_kernels_for(kernels.isa), true);
  const int nr = kernels.sgemm.nr;
  epilogue_tiles(epi, kernels.sgemm.mr, nr, p.m, p.n, 0, 0,
                 [&](float* acc, int64_t i0, int64_t j0, int mv, int nv) {
                   for (int i = 0; i < mv; ++i)
                     std::copy_n(products.data() + (i0 + i) * p.n + j0, nv, acc + i * nr);
                 });
}

}  // namespace

void detail::run_epilogue_loops(const GemmProblem& p, const cpu::GemmKernels& kernels,
                                const cpu::EpilogueProgram& program, float* acc, int64_t acc_rs,
                                int64_t acc_cs, const PackedB* packed) {
  TS_INTERNAL_ASSERT(p.dtype == ScalarType::Float32 && kernels.epilogue_f32 != nullptr);
  if (!packed && takes_gemv(p, kernels) && p.k > 0 && p.alpha != 0) {
    gemv_epilogue(p, kernels, EpilogueHook{&program, kernels.epilogue_f32});
    return;
  }
  Operands<float> o = typed<float>(p);
  static float unused = 0;  // k within one KC block: the partial sums are never stored
  o.c = acc ? acc : &unused;
  o.c_rs = acc ? acc_rs : 0, o.c_cs = acc ? acc_cs : 0;
  o.beta = 0.0f;  // the source C is a leaf of the plan, not the microkernel's
  const EpilogueHook hook{&program, kernels.epilogue_f32};
  if (packed) {
    o.b = nullptr;
    o.b_packed = static_cast<const float*>(packed->data());
    o.packed_n = packed->n();
    run(o, kernels, true, &hook, &packed->block_sizes());
    return;
  }
  run(o, kernels, true, &hook);
}

bool gemm_supports(ScalarType dtype) {
  return dtype == ScalarType::Float32 || dtype == ScalarType::Float64 || is_complex(dtype);
}

void gemm(const GemmProblem& p, const cpu::GemmKernels* kernels, std::string_view op) {
  validate(p, op);
  run_problem(p, kernels ? *kernels : default_kernels(), true);
}

void gemm_triangle(const GemmProblem& p, Triangle triangle, const cpu::GemmKernels* kernels,
                   std::string_view op) {
  TS_CHECK(
      triangle == Triangle::kAll || triangle == Triangle::kUpper || triangle == Triangle::kLower,
      ValueError, "{}(): argument 'triangle' expected kAll, kUpper or kLower, but got {}", op,
      static_cast<int>(triangle));
  validate(p, op);
  run_problem(p, kernels ? *kernels : default_kernels(), true, triangle);
}

namespace {

// Whether run() gives every problem of a strided batch shaped like p the small kernel: then the
// batch calls it directly (the same call, so the same bits) without run()'s per-problem
// dispatch.
template <class T>
bool batch_takes_small_kernel(const GemmProblem& p, const cpu::GemmKernels& ks) {
  const Operands<T> o = typed<T>(p);
  if (!ks.small<T>() || o.k == 0 || o.alpha == T(0) || o.c_cs != 1 || takes_gemv(p, ks))
    return false;
  const cpu::GemmMicroKernel<T>& uk = ks.get<T>();
  return small_shape(o, block_sizes(uk.mr, uk.nr, sizeof(T), cache_sizes()));
}

// Problems [begin, end) of that batch on the small kernel.
template <class T>
void run_small_batch(const GemmProblem& p, int64_t begin, int64_t end, int64_t a_bs, int64_t b_bs,
                     int64_t c_bs, const cpu::GemmKernels& ks) {
  const Operands<T> o = typed<T>(p);
  const cpu::SmallGemmFn<T> small = ks.small<T>();
  for (int64_t i = begin; i < end; ++i)
    small(o.m, o.n, o.k, o.alpha, o.a + i * a_bs, o.a_rs, o.a_cs, o.b + i * b_bs, o.b_rs, o.beta,
          o.c + i * c_bs, o.c_rs);
}

}  // namespace

void gemm_strided_batched(const GemmProblem& p, int64_t batch, int64_t a_bs, int64_t b_bs,
                          int64_t c_bs, const cpu::GemmKernels* kernels, std::string_view op) {
  TS_CHECK(batch >= 0, ValueError, "{}(): argument 'batch' expected >= 0, but got {}", op, batch);
  validate(p, op);
  if (batch == 0 || p.m == 0 || p.n == 0) return;
  TS_CHECK(batch == 1 || c_bs != 0, ValueError,
           "{}(): argument 'c_bs' expected a non-zero batch stride for {} outputs, but got 0", op,
           batch);
  const cpu::GemmKernels& ks = kernels ? *kernels : default_kernels();
  const size_t elem = element_size(p.dtype);
  auto problem = [&](int64_t i) {
    GemmProblem q = p;
    q.a = static_cast<const char*>(p.a) + i * a_bs * static_cast<int64_t>(elem);
    q.b = static_cast<const char*>(p.b) + i * b_bs * static_cast<int64_t>(elem);
    q.c = static_cast<char*>(p.c) + i * c_bs * static_cast<int64_t>(elem);
    return q;
  };
  // Small problems: runs of kBatchRun problems per task (a claim per problem cost a fifth of a
  // 32^3 product on two threads), each problem on the small kernel directly when run() would
  // give it that kernel (its dispatch cost a sixth). Large ones: each split over all threads.
  if (batch > 1 && work(p.m, p.n, p.k) < 16 * kMinParallelWork) {
    constexpr int64_t kBatchRun = 16;
    const bool f32 = p.dtype == ScalarType::Float32, f64 = p.dtype == ScalarType::Float64;
    const bool small = (f32 && batch_takes_small_kernel<float>(p, ks)) ||
                       (f64 && batch_takes_small_kernel<double>(p, ks));
    parallel_tasks((batch + kBatchRun - 1) / kBatchRun, [&](int64_t task) {
      const int64_t begin = task * kBatchRun, end = std::min(batch, begin + kBatchRun);
      if (small && f32) {
        run_small_batch<float>(p, begin, end, a_bs, b_bs, c_bs, ks);
      } else if (small) {
        run_small_batch<double>(p, begin, end, a_bs, b_bs, c_bs, ks);
      } else {
        for (int64_t i = begin; i < end; ++i) run_problem(problem(i), ks, false);
      }
    });
  } else {
    for (int64_t i = 0; i < batch; ++i) run_problem(problem(i), ks, true);
  }
}

namespace {

// Packs every (NC, KC) block of B into `dst` at the offsets packed_b_at expects.
template <class T>
void pack_all_blocks(int64_t k, int64_t n, const T* b, int64_t b_rs, int64_t b_cs,
                     const BlockSizes& bs, T* dst) {
  const int64_t jblocks = ceil_div(n, bs.nc), pblocks = ceil_div(k, bs.kc);
  parallel_tasks(jblocks * pblocks, [&](int64_t t) {
    const int64_t jc = t / pblocks * bs.nc, pc = t % pblocks * bs.kc;
    const int64_t nc = std::min(bs.nc, n - jc), kc = std::min(bs.kc, k - pc);
    pack_b_block<T>(kc, nc, b + pc * b_rs + jc * b_cs, b_rs, b_cs, bs.nr,
                    const_cast<T*>(packed_b_at<T>(dst, k, n, bs, pc, kc, jc)));
  });
}

BlockSizes packed_block_sizes(ScalarType dtype, const cpu::GemmKernels& ks) {
  if (dtype == ScalarType::Float32)
    return block_sizes(ks.sgemm.mr, ks.sgemm.nr, sizeof(float), cache_sizes());
  return block_sizes(ks.dgemm.mr, ks.dgemm.nr, sizeof(double), cache_sizes());
}

}  // namespace

PackedB::PackedB(ScalarType dtype, int64_t k, int64_t n, const void* b, int64_t b_rs, int64_t b_cs,
                 const cpu::GemmKernels* kernels, std::string_view op)
    : dtype_(dtype), k_(k), n_(n), kernels_(kernels ? kernels : &default_kernels()) {
  TS_CHECK(dtype == ScalarType::Float32 || dtype == ScalarType::Float64, TypeError,
           "{}(): expected dtype float32 or float64, but got {}", op, dtype);
  TS_CHECK(k >= 0 && n >= 0, ValueError, "{}(): expected non-negative sizes, but got k={}, n={}",
           op, k, n);
  TS_CHECK(offsets_fit_int64(k, n, b_rs, b_cs), ValueError,
           "{}(): expected a matrix whose element offsets fit in int64, but got k={}, n={} with "
           "strides ({}, {})",
           op, k, n, b_rs, b_cs);
  TS_CHECK(k == 0 || n == 0 || b != nullptr, ValueError,
           "{}(): argument 'b' expected a pointer, but got null", op);
  bs_ = packed_block_sizes(dtype, *kernels_);
  const BlockSizes& bs = bs_;
  const int64_t elem = dtype == ScalarType::Float32 ? 4 : 8;
  const double bytes = static_cast<double>(ceil_div(n, bs.nr) * bs.nr) * k * elem;
  TS_CHECK(bytes < 9.0e18, ValueError, "{}(): a {}x{} matrix is too large to pack", op, k, n);
  bytes_ = static_cast<int64_t>(bytes);
  if (bytes_ == 0) return;
  data_ = ::operator new (static_cast<size_t>(bytes_), std::align_val_t{64});
  if (dtype == ScalarType::Float32) {
    pack_all_blocks<float>(k, n, static_cast<const float*>(b), b_rs, b_cs, bs,
                           static_cast<float*>(data_));
  } else {
    pack_all_blocks<double>(k, n, static_cast<const double*>(b), b_rs, b_cs, bs,
                            static_cast<double*>(data_));
  }
}

PackedB::~PackedB() {
  if (data_) ::operator delete (data_, std::align_val_t{64});
}

GemmProblem detail::with_packed_b(const GemmProblem& p, const PackedB& b, std::string_view op) {
  TS_CHECK(p.dtype == b.dtype(), TypeError,
           "{}(): expected the problem's dtype to match the packed B's {}, but got {}", op,
           b.dtype(), p.dtype);
  TS_CHECK(p.k == b.k() && p.n == b.n(), ValueError,
           "{}(): expected k={} and n={} (the packed B's shape), but got k={} and n={}", op, b.k(),
           b.n(), p.k, p.n);
  GemmProblem q = p;
  q.b = b.data() ? b.data() : &b;  // validated as present; never read through q.b
  q.b_rs = q.b_cs = 0;
  return q;
}

void gemm_prepacked(const GemmProblem& p, const PackedB& b, std::string_view op) {
  const GemmProblem q = detail::with_packed_b(p, b, op);
  validate(q, op);
  auto go = [&](auto zero) {
    using T = decltype(zero);
    Operands<T> o = typed<T>(q);
    o.b = nullptr;
    o.b_packed = static_cast<const T*>(b.data());
    o.packed_n = b.n();
    run(o, b.kernels(), true, nullptr, &b.block_sizes());
  };
  if (p.dtype == ScalarType::Float32) {
    go(0.0f);
  } else {
    go(0.0);
  }
}

void gemm_grouped(std::span<const GemmProblem> problems, const cpu::GemmKernels* kernels,
                  std::string_view op) {
  for (const GemmProblem& p : problems) validate(p, op);
  const cpu::GemmKernels& ks = kernels ? *kernels : default_kernels();
  std::vector<int64_t> small;
  for (size_t i = 0; i < problems.size(); ++i) {
    const GemmProblem& p = problems[i];
    if (work(p.m, p.n, p.k) < 16 * kMinParallelWork) {
      small.push_back(static_cast<int64_t>(i));
    } else {
      run_problem(p, ks, true);
    }
  }
  // Largest first, so that dynamic claiming balances the tail.
  std::stable_sort(small.begin(), small.end(), [&](int64_t x, int64_t y) {
    const GemmProblem &a = problems[x], &b = problems[y];
    return work(a.m, a.n, a.k) > work(b.m, b.n, b.k);
  });
  parallel_tasks(static_cast<int64_t>(small.size()),
                 [&](int64_t i) { run_problem(problems[small[i]], ks, false); });
}

}  // namespace tessera::gemm
