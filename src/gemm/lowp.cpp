// The low-precision GEMM driver (contract: src/gemm/lowp.h): the five loops of driver.cpp
// around either the bf16 pair microkernel or the float32 one, with decode-while-packing and
// an epilogue on every stored tile.
//
//   for jc in 0..n step NC                  B block of NC columns
//     for pc in 0..k step KC                pack B[pc:pc+KC, jc:jc+NC] (decoded)
//       for ic in 0..m step MC              pack A[ic:ic+MC, pc:pc+KC] (decoded)
//         for each MR x NR tile             kernel -> float32 accumulator tile
//           if pc is the last KC block:     epilogue(scales, bias, beta * C) -> C
//
// The accumulator must stay float32 until the last KC block, whatever C's dtype is, so when k
// spans several KC blocks each thread keeps a float32 workspace W for its rows x NC columns
// (NC shrunk so W stays within kMaxAccBytes); with a single KC block the kernel writes a
// temporary tile and the epilogue follows at once. Either way C is written exactly once.
//
// Threads: the thread's block of C is a contiguous range of rows or of columns on MR/NR
// boundaries; k is never split and KC depends only on the kernel and k, so every tile's
// arithmetic is the same for any thread count (bitwise reproducible).
#include "gemm/lowp.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
#include <vector>

#include <fmt/format.h>

#include "core/dispatch.h"
#include "gemm/blocksizes.h"
#include "gemm/pack_lowp.h"
#include "tessera/core/error.h"
#include "tessera/core/half.h"
#include "tessera/core/parallel.h"

namespace tessera::gemm {

namespace {

constexpr int64_t kMinParallelWork = int64_t{1} << 21;
constexpr int64_t kMaxAccBytes = int64_t{8} << 20;
constexpr int64_t kMaxTile = 32 * 64;
// The pair kernel runs where its instruction does at least this many times the multiply-adds
// of a float32 FMA: at 2x (the usual AVX512_BF16 core) it nearly doubles the float32 kernel;
// some cores run vdpbf16ps at half that rate, where decoding to float32 while packing wins.
constexpr double kMinPairGain = 1.2;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Per-thread buffers (64-byte aligned) for packed A, packed B and the float32 accumulators.
class LowpWorkspace {
 public:
  ~LowpWorkspace() {
    for (Buffer& b : bufs_)
      if (b.ptr) ::operator delete (b.ptr, std::align_val_t{64});
  }
  void* get(int slot, size_t bytes) {
    Buffer& b = bufs_[slot];
    if (bytes > b.bytes) {
      if (b.ptr) ::operator delete (b.ptr, std::align_val_t{64});
      b.ptr = ::operator new (bytes, std::align_val_t{64});
      b.bytes = bytes;
    }
    return b.ptr;
  }

 private:
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  Buffer bufs_[3];
};

LowpWorkspace& workspace() {
  thread_local LowpWorkspace ws;
  return ws;
}

LaneView lanes_of_a(const LowpOperand& o) {
  return {o.dtype, o.data, o.rs, o.cs, o.block_scale, o.scale_ls, o.scale_ks};
}
LaneView lanes_of_b(const LowpOperand& o) {
  return {o.dtype, o.data, o.cs, o.rs, o.block_scale, o.scale_ls, o.scale_ks};
}

// The kernel choice for a problem: pairs (vdpbf16ps, or AMX tiles) or float32.
struct Plan {
  bool pairs = false;
  int64_t mr = 0, nr = 0;
  BlockSizes bs;
  bool a_tiles = false;  // the pair kernel reads A in AMX tiles
  int64_t kp_align = 1;  // its k-pairs come in multiples of this

  // Elements per lane of a packed KC block of depth kc.
  int64_t stored_k(int64_t kc) const {
    return pairs ? (kc + 2 * kp_align - 1) / (2 * kp_align) * (2 * kp_align) : kc;
  }
};

// The pair kernel's layout on the plan.
void take_pair_layout(Plan& pl, const cpu::Bf16PairKernel& kernel) {
  pl.a_tiles = kernel.a_tiles;
  pl.kp_align = std::max(1, kernel.kp_align);
}

// The pair kernel's KC for a depth of k. The kernel streams its B micro-panel from L2 at no cost
// (two zmm loads per 28 vdpbf16ps), so KC need not keep that panel in L1 (512 elements); what
// each further KC block costs is a round trip of the float32 accumulators through the workspace
// and a narrower NC (A packed again for each NC block). So one KC block covers k up to
// kPairKcMax, and a longer k is split evenly. bfloat16 products on one Zen 5 thread, KC = 512
// against this: 1024^3 346 -> 386 GFLOP/s, 2048^3 348 -> 387, 512^3 unchanged.
int64_t pair_kc(int64_t k) {
  constexpr int64_t kPairKcMax = 2048;
  const int64_t blocks = ceil_div(std::max<int64_t>(k, 1), kPairKcMax);
  return std::max<int64_t>(2, (ceil_div(k, blocks) + 1) / 2 * 2);
}

Plan make_plan(const LowpProblem& p, const cpu::LowpGemmKernels& ks) {
  Plan pl;
  pl.pairs =
      ks.bf16.fn != nullptr && p.a.dtype != ScalarType::Float16 && p.b.dtype != ScalarType::Float16;
  pl.mr = pl.pairs ? ks.bf16.mr : ks.f32->sgemm.mr;
  pl.nr = pl.pairs ? ks.bf16.nr : ks.f32->sgemm.nr;
  pl.bs = block_sizes(pl.mr, pl.nr, pl.pairs ? 2 : 4, cache_sizes(), pl.pairs ? pair_kc(p.k) : 0);
  if (pl.pairs) {
    take_pair_layout(pl, ks.bf16);
    // Pairs never straddle two KC blocks, nor do the AMX kernel's steps of 16 pairs (but the
    // last block), so only the last one is padded.
    const int64_t step = 2 * pl.kp_align;
    pl.bs.kc = std::max<int64_t>(step, pl.bs.kc / step * step);
    // The AMX kernel's tile loads read its A micro-panel from L2 at four times the rate the
    // vdpbf16ps kernel's broadcasts do, while the B micro-panels (64-128 KiB) stream through
    // L2 beside it: an A block of at most half of L2 and 256 rows. And at the kernel's rate,
    // packing A again for every NC block costs ~10% of the product per pass: B blocks up to
    // 8 MiB. bfloat16 products on one Xeon (Sapphire Rapids class) thread, against MC = 2/3
    // of L2 (672 and 320 rows): 1024^3 934 -> 1018 GFLOP/s, 2048^3 662 -> 957; 2048^3 with
    // NC 512 (the L3 share's) 805, 1024 970, 2048 993, 4096 855.
    if (pl.a_tiles && !block_sizes_overridden()) {
      pl.bs.mc = std::clamp<int64_t>(cache_sizes().l2 / 2 / (pl.bs.kc * 2) / pl.mr * pl.mr, pl.mr,
                                     std::min<int64_t>(pl.bs.mc, 256));
      constexpr int64_t kAmxBBlockBytes = int64_t{8} << 20;
      pl.bs.nc =
          std::clamp<int64_t>(kAmxBBlockBytes / (pl.bs.kc * 2) / pl.nr * pl.nr, pl.bs.nc, 4096);
    }
  }
  return pl;
}

// The plan a pack was made with.
Plan plan_of(const PackedLowpB& packed) {
  Plan pl{packed.pairs(), packed.block_sizes().mr, packed.block_sizes().nr, packed.block_sizes()};
  if (pl.pairs) take_pair_layout(pl, packed.kernels().bf16);
  return pl;
}

// The epilogue for the tile at (i, j) of the whole problem, from float32 accumulators.
void store(const LowpProblem& p, const cpu::LowpGemmKernels& ks, int64_t i, int64_t j, int64_t mv,
           int64_t nv, const float* acc, int64_t ld) {
  cpu::LowpTile t;
  t.acc = acc, t.ld = ld, t.mv = mv, t.nv = nv;
  t.alpha = p.alpha, t.beta = p.beta;
  t.row_scale = p.row_scale ? p.row_scale + i : nullptr;
  t.col_scale = p.col_scale ? p.col_scale + j : nullptr;
  t.bias = p.bias ? p.bias + j : nullptr;
  t.out = p.c_dtype;
  t.c = static_cast<char*>(p.c) + (i * p.c_rs + j * p.c_cs) * element_size(p.c_dtype);
  t.c_rs = p.c_rs, t.c_cs = p.c_cs;
  ks.store(t);
}

// k == 0 or alpha == 0: the product is zero; C := bias + beta * C through the epilogue.
void store_zero_product(const LowpProblem& p, const cpu::LowpGemmKernels& ks) {
  alignas(64) static const float zeros[64 * 64] = {};
  for (int64_t i = 0; i < p.m; i += 64)
    for (int64_t j = 0; j < p.n; j += 64)
      store(p, ks, i, j, std::min<int64_t>(64, p.m - i), std::min<int64_t>(64, p.n - j), zeros, 64);
}

// One B micro-panel (kcs steps) against every A micro-panel of an MC block, on the AMX kernel:
// C(ir.., :) at c + ir * ldc, accumulated onto when `accumulate`. The steps go in chunks of
// kAmxChunk, each chunk's B (32 columns x 256 k, 16 KiB) staying in L1 while every A
// micro-panel's chunk streams past it; C goes through its 4 KiB tiles between chunks (the
// float32 round trip is exact, so the bits are those of one pass). Against one pass over all
// kcs steps per A micro-panel, where both panels' tile loads came from L2, alternated
// processes on one Xeon thread: 1024^3 718-878 -> 908-940 GFLOP/s, two threads 1557-1583 ->
// 1695-1702, 512^3 823-824 -> 858-871; chunks of 384 ran slower than one pass.
constexpr int64_t kAmxChunk = 256;

// done(ir) follows the last chunk of rows ir.., while their C block is still in L1 (run after
// the whole block's last chunks, the epilogue took 14% of a 1024^3 product in perf, against
// 7% for one pass; alternated processes, one thread, 1024^3 980-1003 -> 1043-1071 GFLOP/s,
// 512^3 932-941 -> 951-961, two threads and 2048^3 within the noise).
template <class Done>
void amx_micro_panel(const cpu::Bf16PairKernel& kernel, const uint16_t* a, const uint16_t* b,
                     int64_t mc, int64_t kcs, float* c, int64_t ldc, bool accumulate,
                     const Done& done) {
  const int64_t mr = kernel.mr, nr = kernel.nr;
  for (int64_t p0 = 0; p0 < kcs; p0 += kAmxChunk) {
    const int64_t steps = std::min(kAmxChunk, kcs - p0);
    const bool final = p0 + steps >= kcs;
    // From step p0: A's micro-panel holds mr elements per step (tiles of 32 steps), B's nr
    // (pair rows of 2 nr).
    for (int64_t ir = 0; ir < mc; ir += mr) {
      kernel.fn(steps / 2, a + ir * kcs + p0 * mr, b + p0 * nr, c + ir * ldc, ldc,
                accumulate || p0 > 0);
      if (final) done(ir);
    }
  }
}

// Rows [i0, i1) x columns [j0, j1) of C on the calling thread.
void run_block(const LowpProblem& p, const cpu::LowpGemmKernels& ks, const Plan& pl, int64_t i0,
               int64_t i1, int64_t j0, int64_t j1, const PackedLowpB* packed) {
  const BlockSizes& bs = pl.bs;
  const int64_t mr = pl.mr, nr = pl.nr, m = i1 - i0, n = j1 - j0;
  const bool multi_k = p.k > bs.kc;
  const int64_t m_pad = ceil_div(m, mr) * mr;
  int64_t nc_max = std::min(bs.nc, n);
  if (multi_k) {
    const int64_t fit = kMaxAccBytes / (4 * m_pad) / nr * nr;
    nc_max = std::min(nc_max, std::max(nr, fit));
  }
  const int64_t kc_max = std::min(bs.kc, p.k);
  const int64_t kc_store = pl.stored_k(kc_max);  // elements per lane
  const int64_t elem = pl.pairs ? 2 : 4;
  const int64_t mc_max = std::min(bs.mc, m);
  LowpWorkspace& ws = workspace();
  void* apack = ws.get(0, ceil_div(mc_max, mr) * mr * kc_store * elem);
  void* bpack = packed ? nullptr : ws.get(1, ceil_div(nc_max, nr) * nr * kc_store * elem);
  const int64_t ldw = ceil_div(nc_max, nr) * nr;
  float* acc_ws = multi_k ? static_cast<float*>(ws.get(2, m_pad * ldw * sizeof(float))) : nullptr;
  alignas(64) float tile[kMaxTile];
  // The AMX kernel's C blocks for one B micro-panel and the MC rows of the A block (single KC
  // block; with several the accumulator workspace serves).
  float* amx_c =
      pl.a_tiles && !multi_k
          ? static_cast<float*>(ws.get(2, ceil_div(mc_max, mr) * mr * nr * sizeof(float)))
          : nullptr;
  const LaneView av = lanes_of_a(p.a), bv = lanes_of_b(p.b);

  for (int64_t jc = 0; jc < n; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n - jc);
    for (int64_t pc = 0; pc < p.k; pc += bs.kc) {
      const int64_t kc = std::min(bs.kc, p.k - pc);
      const int64_t kcs = pl.stored_k(kc);
      const bool first = pc == 0, last = pc + kc >= p.k;
      if (packed) {
        bpack = const_cast<void*>(packed->panels(pc / bs.kc, j0 + jc));
      } else if (pl.pairs) {
        pack_lowp_pairs(bv, j0 + jc, pc, nc, kc, nr, static_cast<uint16_t*>(bpack), kcs);
      } else {
        pack_lowp_f32(bv, j0 + jc, pc, nc, kc, nr, static_cast<float*>(bpack));
      }
      for (int64_t ic = 0; ic < m; ic += bs.mc) {
        const int64_t mc = std::min(bs.mc, m - ic);
        if (pl.a_tiles) {
          pack_lowp_tiles(av, i0 + ic, pc, mc, kc, kcs, static_cast<uint16_t*>(apack));
        } else if (pl.pairs) {
          pack_lowp_pairs(av, i0 + ic, pc, mc, kc, mr, static_cast<uint16_t*>(apack));
        } else {
          pack_lowp_f32(av, i0 + ic, pc, mc, kc, mr, static_cast<float*>(apack));
        }
        for (int64_t jr = 0; jr < nc; jr += nr) {
          const int64_t nv = std::min(nr, nc - jr);
          if (pl.a_tiles) {
            float* c = multi_k ? acc_ws + ic * ldw + jr : amx_c;
            const int64_t ldc = multi_k ? ldw : nr;
            amx_micro_panel(ks.bf16, static_cast<const uint16_t*>(apack),
                            static_cast<const uint16_t*>(bpack) + jr * kcs, mc, kcs, c, ldc,
                            multi_k && !first, [&](int64_t ir) {
                              if (last)
                                store(p, ks, i0 + ic + ir, j0 + jc + jr, std::min(mr, mc - ir), nv,
                                      c + ir * ldc, ldc);
                            });
            continue;
          }
          for (int64_t ir = 0; ir < mc; ir += mr) {
            const int64_t mv = std::min(mr, mc - ir);
            float* c = multi_k ? acc_ws + (ic + ir) * ldw + jr : tile;
            const int64_t ldc = multi_k ? ldw : nr;
            const bool accumulate = multi_k && !first;
            if (pl.pairs) {
              ks.bf16.fn(kcs / 2, static_cast<const uint16_t*>(apack) + ir * kcs,
                         static_cast<const uint16_t*>(bpack) + jr * kcs, c, ldc, accumulate);
            } else {
              ks.f32->sgemm.fn(kc, 1.0f, static_cast<const float*>(apack) + ir * kc,
                               static_cast<const float*>(bpack) + jr * kc, accumulate ? 1.0f : 0.0f,
                               c, ldc, 1);
            }
            if (last) store(p, ks, i0 + ic + ir, j0 + jc + jr, mv, nv, c, ldc);
          }
        }
      }
    }
  }
}

void run(const LowpProblem& p, const cpu::LowpGemmKernels& ks,
         const PackedLowpB* packed = nullptr) {
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0 || p.alpha == 0) {
    store_zero_product(p, ks);
    return;
  }
  const Plan pl = packed ? plan_of(*packed) : make_plan(p, ks);
  TS_INTERNAL_ASSERT(pl.mr * pl.nr <= kMaxTile);
  const int64_t threads = in_parallel_region() ? 1 : get_num_threads();
  const double work = double(p.m) * double(p.n) * double(p.k);
  const int64_t mp = ceil_div(p.m, pl.mr), np = ceil_div(p.n, pl.nr);
  if (threads <= 1 || work < double(kMinParallelWork) || (mp < 2 && np < 2)) {
    run_block(p, ks, pl, 0, p.m, 0, p.n, packed);
    return;
  }
  // Split the longer side (in tiles): cutting columns re-packs A per thread, rows B.
  const bool by_cols = np >= mp;
  const int64_t tiles = by_cols ? np : mp;
  const int64_t tasks = std::min(threads, tiles);
  parallel_tasks(tasks, [&](int64_t t) {
    const int64_t s = tiles * t / tasks, e = tiles * (t + 1) / tasks;
    if (by_cols) {
      run_block(p, ks, pl, 0, p.m, s * pl.nr, std::min(p.n, e * pl.nr), packed);
    } else {
      run_block(p, ks, pl, s * pl.mr, std::min(p.m, e * pl.mr), 0, p.n, packed);
    }
  });
}

bool is_output_dtype(ScalarType t) {
  return t == ScalarType::Float32 || t == ScalarType::BFloat16 || t == ScalarType::Float16;
}

void validate_operand(const LowpOperand& o, const char* name, bool is_b, int64_t lanes, int64_t k,
                      std::string_view op) {
  TS_CHECK(gemm_lowp_supports(o.dtype), TypeError,
           "{}(): argument '{}' expected dtype bfloat16, float16, float8_e4m3fn, float8_e5m2 or "
           "float4_e2m1fn_x2, but got {}",
           op, name, o.dtype);
  TS_CHECK(o.data != nullptr, ValueError, "{}(): argument '{}' expected a pointer, but got null",
           op, name);
  if (o.dtype != ScalarType::Float4_e2m1fn_x2) {
    TS_CHECK(o.block_scale == nullptr, ValueError,
             "{}(): argument '{}' expected no block scales for dtype {}, but got some", op, name,
             o.dtype);
    return;
  }
  const int64_t kstride = is_b ? o.rs : o.cs, lstride = is_b ? o.cs : o.rs;
  TS_CHECK(k % 16 == 0, ValueError,
           "{}(): argument '{}' expected K a multiple of 16 for float4_e2m1fn_x2 (NVFP4 blocks), "
           "but got K={}",
           op, name, k);
  TS_CHECK(kstride == 1 && (lanes <= 1 || (lstride > 0 && lstride % 2 == 0)), ValueError,
           "{}(): argument '{}' expected float4_e2m1fn_x2 packed along K (K stride 1, other "
           "stride even and positive, in 4-bit elements), but got strides ({}, {})",
           op, name, o.rs, o.cs);
  TS_CHECK(o.block_scale != nullptr, ValueError,
           "{}(): argument '{}' expected float8_e4m3fn block scales for float4_e2m1fn_x2, but "
           "got none",
           op, name);
}

// b_packed: B comes from a PackedLowpB of dtype p.b.dtype (validated when it was packed).
void validate(const LowpProblem& p, std::string_view op, bool b_packed = false) {
  TS_CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0, ValueError,
           "{}(): expected non-negative sizes, but got m={}, n={}, k={}", op, p.m, p.n, p.k);
  TS_CHECK(is_output_dtype(p.c_dtype), TypeError,
           "{}(): argument 'c' expected dtype float32, bfloat16 or float16, but got {}", op,
           p.c_dtype);
  if (p.m == 0 || p.n == 0) return;
  TS_CHECK(p.c != nullptr, ValueError, "{}(): argument 'c' expected a pointer, but got null", op);
  if (p.k == 0 || p.alpha == 0) return;
  validate_operand(p.a, "a", false, p.m, p.k, op);
  if (!b_packed) validate_operand(p.b, "b", true, p.n, p.k, op);
  TS_CHECK(
      (p.a.dtype == ScalarType::Float4_e2m1fn_x2) == (p.b.dtype == ScalarType::Float4_e2m1fn_x2),
      TypeError, "{}(): expected both operands float4_e2m1fn_x2 or neither, but got {} and {}", op,
      p.a.dtype, p.b.dtype);
}

double read_c(const LowpProblem& p, int64_t i, int64_t j) {
  const int64_t off = i * p.c_rs + j * p.c_cs;
  if (p.c_dtype == ScalarType::BFloat16) return float(static_cast<const BFloat16*>(p.c)[off]);
  if (p.c_dtype == ScalarType::Float16) return float(static_cast<const Half*>(p.c)[off]);
  return static_cast<const float*>(p.c)[off];
}

void write_c(const LowpProblem& p, int64_t i, int64_t j, double v) {
  const int64_t off = i * p.c_rs + j * p.c_cs;
  if (p.c_dtype == ScalarType::BFloat16) {
    static_cast<BFloat16*>(p.c)[off] = BFloat16(static_cast<float>(v));
  } else if (p.c_dtype == ScalarType::Float16) {
    static_cast<Half*>(p.c)[off] = Half(static_cast<float>(v));
  } else {
    static_cast<float*>(p.c)[off] = static_cast<float>(v);
  }
}

}  // namespace

bool gemm_lowp_supports(ScalarType t) {
  return t == ScalarType::BFloat16 || t == ScalarType::Float16 || t == ScalarType::Float8_e4m3fn ||
         t == ScalarType::Float8_e5m2 || t == ScalarType::Float4_e2m1fn_x2;
}

double lowp_decode(const LowpOperand& o, bool is_b, int64_t row, int64_t col) {
  return is_b ? lowp_value(lanes_of_b(o), col, row) : lowp_value(lanes_of_a(o), row, col);
}

const Bf16Path& bf16_path() {
  static const Bf16Path path = [] {
    const cpu::LowpGemmKernels& ks = TS_DISPATCH(lowp_gemm_kernels);
    Bf16Path p;
    if (ks.bf16.fn == nullptr) {
      p.reason = "this CPU or ISA has no AVX512_BF16";
      return p;
    }
    p.gain = ks.bf16.gain ? ks.bf16.gain() : 2.0;
    const char* env = std::getenv("TESSERA_GEMM_BF16");
    const std::string_view forced = env ? env : "";
    TS_CHECK(forced.empty() || forced == "amx" || forced == "pairs" || forced == "float32",
             ValueError,
             "gemm_lowp(): environment variable TESSERA_GEMM_BF16 expected 'amx', 'pairs' or "
             "'float32', but got '{}'",
             forced);
    TS_CHECK(forced != "amx" || ks.amx.fn != nullptr, ValueError,
             "gemm_lowp(): environment variable TESSERA_GEMM_BF16 expected a kernel this CPU "
             "runs, but got 'amx' (no AMX-BF16 tiles, or the OS did not grant their state)");
    if (!forced.empty()) {
      p.amx = forced == "amx";
      p.pairs = forced != "float32";
      p.reason = fmt::format("TESSERA_GEMM_BF16={}", forced);
    } else if (ks.amx.fn != nullptr) {
      p.amx = p.pairs = true;
      p.reason = fmt::format(
          "AMX-BF16 tiles; vdpbf16ps alone does {:.2f}x the multiply-adds of an FMA on this core",
          p.gain);
    } else {
      p.pairs = p.gain >= kMinPairGain;
      p.reason =
          fmt::format("vdpbf16ps does {:.2f}x the multiply-adds of an FMA on this core", p.gain);
    }
    return p;
  }();
  return path;
}

namespace {

// The dispatched table, with the AMX kernel as its pair kernel or without a pair kernel where
// bf16_path() decided so.
const cpu::LowpGemmKernels& default_lowp_kernels() {
  const cpu::LowpGemmKernels& ks = TS_DISPATCH(lowp_gemm_kernels);
  if (bf16_path().amx) {
    static const cpu::LowpGemmKernels with_amx = [&] {
      cpu::LowpGemmKernels t = ks;
      t.bf16 = ks.amx;
      return t;
    }();
    return with_amx;
  }
  if (ks.bf16.fn == nullptr || bf16_path().pairs) return ks;
  static const cpu::LowpGemmKernels without_pairs = [&] {
    cpu::LowpGemmKernels t = ks;
    t.bf16 = {};
    return t;
  }();
  return without_pairs;
}

}  // namespace

void gemm_lowp(const LowpProblem& p, const cpu::LowpGemmKernels* kernels, std::string_view op) {
  validate(p, op);
  run(p, kernels ? *kernels : default_lowp_kernels());
}

PackedLowpB::PackedLowpB(int64_t k, int64_t n, const LowpOperand& b,
                         const cpu::LowpGemmKernels* kernels, std::string_view op)
    : dtype_(b.dtype), k_(k), n_(n), kernels_(kernels ? kernels : &default_lowp_kernels()) {
  TS_CHECK(k >= 0 && n >= 0, ValueError, "{}(): expected non-negative sizes, but got k={}, n={}",
           op, k, n);
  if (k > 0 && n > 0) {
    validate_operand(b, "b", true, n, k, op);
  } else {
    TS_CHECK(gemm_lowp_supports(dtype_), TypeError,
             "{}(): argument 'b' expected dtype bfloat16, float16, float8_e4m3fn, float8_e5m2 or "
             "float4_e2m1fn_x2, but got {}",
             op, dtype_);
  }
  const ScalarType dtype = dtype_;
  LowpProblem shape;  // the plan depends on the operand dtypes, k and the kernels only
  shape.a.dtype = shape.b.dtype = dtype;
  shape.k = k;
  const Plan pl = make_plan(shape, *kernels_);
  pairs_ = pl.pairs;
  bs_ = pl.bs;
  const int64_t elem = pairs_ ? 2 : 4, panels = ceil_div(n, bs_.nr);
  for (int64_t pc = 0; pc < k; pc += bs_.kc) {
    const int64_t kc = std::min(bs_.kc, k - pc);
    const int64_t kcs = pl.stored_k(kc);
    block_offsets_.push_back(bytes_);
    panel_bytes_.push_back(bs_.nr * kcs * elem);
    bytes_ += panels * bs_.nr * kcs * elem;
  }
  if (bytes_ == 0) return;
  data_ = ::operator new (static_cast<size_t>(bytes_), std::align_val_t{64});
  const LaneView bv = lanes_of_b(b);
  parallel_tasks(static_cast<int64_t>(block_offsets_.size()), [&](int64_t t) {
    const int64_t pc = t * bs_.kc, kc = std::min(bs_.kc, k - pc);
    char* dst = static_cast<char*>(data_) + block_offsets_[t];
    if (pairs_) {
      pack_lowp_pairs(bv, 0, pc, n, kc, bs_.nr, reinterpret_cast<uint16_t*>(dst), pl.stored_k(kc));
    } else {
      pack_lowp_f32(bv, 0, pc, n, kc, bs_.nr, reinterpret_cast<float*>(dst));
    }
  });
}

PackedLowpB::~PackedLowpB() {
  if (data_) ::operator delete (data_, std::align_val_t{64});
}

const void* PackedLowpB::panels(int64_t block, int64_t col) const {
  return static_cast<const char*>(data_) + block_offsets_[static_cast<size_t>(block)] +
         col / bs_.nr * panel_bytes_[static_cast<size_t>(block)];
}

void gemm_lowp_prepacked(const LowpProblem& p, const PackedLowpB& b, std::string_view op) {
  TS_CHECK(p.k == b.k() && p.n == b.n(), ValueError,
           "{}(): expected a problem with k={}, n={} (the packed B), but got k={}, n={}", op, b.k(),
           b.n(), p.k, p.n);
  // A has the pack's dtype, or, against a float8 pack, the other float8 format (as in
  // scaled_mm) or bfloat16 (a float8 Linear weight): every one exact in bfloat16, so the pack's
  // kernel choice holds for them.
  const bool fp8_pack = is_float8(b.dtype());
  TS_CHECK(p.a.dtype == b.dtype() ||
               (fp8_pack && (is_float8(p.a.dtype) || p.a.dtype == ScalarType::BFloat16)),
           TypeError, "{}(): argument 'a' expected dtype {} (as the packed B{}), but got {}", op,
           b.dtype(), fp8_pack ? ", or the other float8 format, or bfloat16" : "", p.a.dtype);
  LowpProblem q = p;
  q.b = {b.dtype(), nullptr, 0, 0};  // never read: the panels come from the pack
  validate(q, op, /*b_packed=*/true);
  run(q, b.kernels(), &b);
}

void gemm_lowp_reference(const LowpProblem& p) {
  validate(p, "gemm_lowp_reference");
  std::vector<double> arow(static_cast<size_t>(p.k));
  for (int64_t i = 0; i < p.m; ++i) {
    const bool product = p.alpha != 0 && p.k > 0;
    if (product)
      for (int64_t q = 0; q < p.k; ++q) arow[q] = lowp_decode(p.a, false, i, q);
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0;
      if (product)
        for (int64_t q = 0; q < p.k; ++q) acc += arow[q] * lowp_decode(p.b, true, q, j);
      double v = double(p.alpha) * acc;
      if (p.row_scale) v *= p.row_scale[i];
      if (p.col_scale) v *= p.col_scale[j];
      if (p.bias) v += p.bias[j];
      if (p.beta != 0) v += double(p.beta) * read_c(p, i, j);
      write_c(p, i, j, v);
    }
  }
}

}  // namespace tessera::gemm
