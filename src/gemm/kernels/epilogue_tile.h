// The epilogue program as the per-ISA tile interpreter sees it (src/gemm/epilogue.h builds
// it; src/gemm/kernels/epilogue_tile.cpp runs it).
//
// After the last rank-KC update of an MR x NR tile, the driver leaves alpha * (A B) for the
// tile in a contiguous, L1-hot buffer (`EpilogueTile::acc`, row stride NR) and calls the
// interpreter once. The interpreter evaluates the nodes in order (node k reads only nodes
// < k), each over the tile's live part (rows < mv, the vectors covering columns < nv), one
// vector at a time, into per-node tile buffers in `scratch`; then it performs the stores (valid mv
// x nv part only) and writes one partial per row (per column) of the tile for each reduction.
// Partials are combined by the driver in a fixed order, so reductions do not depend on the thread
// count.
//
// Lanes past the matrix edge inside the live part's last vector (j >= nv) hold values
// computed from zero padding; leaves never read memory there, stores never write there, and
// reductions skip them. Rows >= mv and vectors past the live part are never computed.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "tessera/core/dtype.h"

namespace tessera::cpu {

// The closed set of epilogue operations. Properties: epilogue_op_info() (src/gemm/epilogue.h).
enum class EpilogueOp : uint8_t {
  // leaves
  Accumulator,   // alpha * (A B)(i, j)
  SourceC,       // beta * C(i, j) (s0 = beta); a plan turns beta == 0 into Scalar 0
  RowBroadcast,  // v[j * rs]: one value per column (a bias over N)
  ColBroadcast,  // v[i * rs]: one value per row
  Scalar,        // s0
  InputTile,     // X(i, j) = x[i * rs + j * cs] (a residual)
  // binary
  Add,
  Sub,
  Mul,
  Div,
  Max,  // NaN-propagating, as torch.maximum
  Min,
  // unary
  Relu,
  GeluErf,   // x * Phi(x)
  GeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  Silu,      // x * sigmoid(x)
  Sigmoid,
  Tanh,
  Exp,
  Clamp,  // min(max(x, s0), s1)
  Cast,   // round to `dtype` (float16, bfloat16, float32) and continue in float32
  kCount
};

enum class EpilogueReduceKind : uint8_t { Sum, Mean, Max, Min, SumSquares };

// Rows: reduce over N, one value per row (length m). Cols: reduce over M (length n).
enum class EpilogueAxis : uint8_t { Rows, Cols };

struct EpilogueInstr {
  EpilogueOp op = EpilogueOp::Accumulator;
  int32_t x = -1, y = -1;                  // operand nodes (earlier indices), -1 when unused
  float s0 = 0, s1 = 0;                    // Scalar value, SourceC beta, Clamp bounds
  ScalarType dtype = ScalarType::Float32;  // Cast target; element type of a leaf's memory
  const void* data = nullptr;              // leaves that read memory
  int64_t rs = 0, cs = 0;                  // element strides (vectors use rs)
};

// stream: the output is too large for the cache (kStreamOutputBytes); whole vectors of its
// contiguous rows are written around it, and the driver fences once the tiles are done.
struct EpilogueStoreOp {
  int32_t node = 0;
  void* data = nullptr;
  ScalarType dtype = ScalarType::Float32;
  int64_t rs = 0, cs = 0;
  bool stream = false;
};

// Partials (float32): Rows -> partials[i * ld + j0 / NR], Cols -> partials[(i0 / MR) * ld + j].
// A Mean's partial is its sum; the driver divides at the end.
struct EpilogueReduceOp {
  int32_t node = 0;
  EpilogueReduceKind kind = EpilogueReduceKind::Sum;
  EpilogueAxis axis = EpilogueAxis::Rows;
  float* partials = nullptr;
  int64_t ld = 0;
};

// The plans most GEMMs carry, recognised when the program is built (src/gemm/epilogue.cpp):
// a chain of at most three stages, the accumulator, then optionally that plus a row or column
// broadcast vector (a bias), then optionally one unary op of that (relu ... cast), with every
// store and reduction reading one of the stages. The interpreter runs a chain in one pass over
// the tile, row by row, each value taken from stage to stage in registers; the last stage goes
// from there to one store of contiguous rows (a streamed one only where its rows start on
// cache lines) and to its row reductions (the usual D and a row sum), and a stage that any
// other output reads is written to its node's tile buffer for the node-by-node store and
// reduction loops.
struct EpilogueChain {
  static constexpr int kStages = 3;
  int32_t stage_node[kStages] = {-1, -1, -1};  // the node of each stage, -1 when absent
  const EpilogueInstr* bias = nullptr;         // the broadcast leaf of stage 1, or null
  const EpilogueInstr* unary = nullptr;        // stage 2's node, or null
  int last = 0;                                // the last stage any output reads
  int32_t store = -1;           // the store the pass writes itself (of the last stage), or -1
  uint32_t reduces = 0;         // bit r: the pass computes reduction r (rows, of the last stage)
  bool buffered[kStages] = {};  // whether another output reads stage s from its tile buffer
};

struct EpilogueProgram {
  const EpilogueInstr* instrs = nullptr;
  int32_t n_instrs = 0;
  const EpilogueStoreOp* stores = nullptr;
  int32_t n_stores = 0;
  const EpilogueReduceOp* reduces = nullptr;
  int32_t n_reduces = 0;
  const EpilogueChain* chain = nullptr;  // set when the nodes form a chain
};

// One finished tile: acc[i * nr + j] = alpha * (A B)(i0 + i, j0 + j) for i < mr, j < nr (the
// padded part is finite: zero panels). scratch: n_instrs * mr * nr floats, 64-byte aligned.
struct EpilogueTile {
  const float* acc = nullptr;
  int mr = 0, nr = 0;
  int64_t i0 = 0, j0 = 0;
  int mv = 0, nv = 0;
  float* scratch = nullptr;
};

using EpilogueTileFn = void (*)(const EpilogueProgram& program, const EpilogueTile& tile);

// Most nodes a plan may hold (scratch is nodes x tile).
inline constexpr int kMaxEpilogueNodes = 64;

}  // namespace tessera::cpu

#define TS_DECLARE_EPILOGUE_TILE(isa)                                               \
  namespace tessera::cpu::isa {                                                     \
  void epilogue_tile_f32(const EpilogueProgram& program, const EpilogueTile& tile); \
  }
TS_DECLARE_EPILOGUE_TILE(generic)
TS_DECLARE_EPILOGUE_TILE(avx2)
TS_DECLARE_EPILOGUE_TILE(avx512)
#undef TS_DECLARE_EPILOGUE_TILE
