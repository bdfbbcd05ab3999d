// The epilogue-plan interpreter, compiled once per ISA (contract: epilogue_tile.h).
//
// One call per finished MR x NR tile. Nodes run in order, each as one tight loop over the
// tile's mr * nr / L vectors (node outer, vectors inner), so the switch on the op costs once
// per node per tile, not once per vector; a node's values live in its own tile buffer in
// `scratch` (a 14 x 32 float tile is 1.8 KiB, so a dozen nodes stay in L1). The accumulator
// node reads the driver's tile in place.
//
// Nodes run over the tile's live part only: rows [0, mv) and the whole vectors that cover
// columns [0, nv) (lanes past nv in the last one hold finite padding, so no loop needs a
// tail). Nothing past it reaches an output, and an edge tile of a small product is mostly
// padding: an 8x8 product's one 14x32 tile is 7x its live part. Only leaves that read
// memory, stores and reductions look at nv itself.
#include "gemm/kernels/epilogue_tile.h"

#include <cmath>
#include <limits>

#include "core/loops.h"
#include "core/vec.h"
#include "core/vec_math.h"
#include "tessera/core/half.h"

namespace tessera::cpu::TS_ISA {
namespace {

using V = vec::TS_ISA::Vec<float>;
constexpr int L = V::kSize;

float load_scalar(const void* p, ScalarType t, int64_t off) {
  switch (t) {
    case ScalarType::BFloat16:
      return static_cast<const BFloat16*>(p)[off];
    case ScalarType::Float16:
      return static_cast<const Half*>(p)[off];
    default:
      return static_cast<const float*>(p)[off];
  }
}

// `n` contiguous elements of dtype t at p, widened to float, into dst[0..n).
void load_row(const void* p, ScalarType t, int64_t off, int n, float* dst) {
  int j = 0;
  switch (t) {
    case ScalarType::BFloat16: {
      const BFloat16* s = static_cast<const BFloat16*>(p) + off;
      for (; j + L <= n; j += L) V::load_convert(s + j).store(dst + j);
      if (j < n) V::load_convert(s + j, n - j).store(dst + j, n - j);
      break;
    }
    case ScalarType::Float16: {
      const Half* s = static_cast<const Half*>(p) + off;
      for (; j + L <= n; j += L) V::load_convert(s + j).store(dst + j);
      if (j < n) V::load_convert(s + j, n - j).store(dst + j, n - j);
      break;
    }
    default: {
      const float* s = static_cast<const float*>(p) + off;
      for (; j + L <= n; j += L) V::load(s + j).store(dst + j);
      if (j < n) V::load(s + j, n - j).store(dst + j, n - j);
    }
  }
}

// Calls f(offset) for the offset of every vector in the tile's live part, row by row.
template <class F>
void each_live_vector(const EpilogueTile& t, F f) {
  const int cols = (t.nv + L - 1) / L * L;
  if (cols == t.nr) {  // whole rows: one contiguous run
    for (int v = 0; v < t.mv * t.nr; v += L) f(v);
    return;
  }
  for (int i = 0; i < t.mv; ++i)
    for (int j = 0; j < cols; j += L) f(i * t.nr + j);
}

// A matrix leaf (InputTile, SourceC): rows < mv, columns < nv from memory; zeros in the rest of
// the live part.
void gather_tile(const EpilogueInstr& in, const EpilogueTile& t, float* out) {
  each_live_vector(t, [out](int v) { V(0.0f).store(out + v); });
  for (int i = 0; i < t.mv; ++i) {
    float* row = out + i * t.nr;
    const int64_t base = (t.i0 + i) * in.rs + t.j0 * in.cs;
    if (in.cs == 1) {
      load_row(in.data, in.dtype, base, t.nv, row);
    } else {
      for (int j = 0; j < t.nv; ++j) row[j] = load_scalar(in.data, in.dtype, base + j * in.cs);
    }
  }
}

template <class F>
void map_unary(const float* x, float* out, const EpilogueTile& t, F f) {
  each_live_vector(t, [&](int v) { f(V::load(x + v)).store(out + v); });
}

template <class F>
void map_binary(const float* x, const float* y, float* out, const EpilogueTile& t, F f) {
  each_live_vector(t, [&](int v) { f(V::load(x + v), V::load(y + v)).store(out + v); });
}

V sigmoid(V x) {
  return V(1.0f) / (V(1.0f) + (-x).exp());
}

// Rounds each lane to `dtype` and back (float32: unchanged).
V round_to(V x, ScalarType dtype) {
  if (dtype == ScalarType::BFloat16) {
    BFloat16 tmp[L];
    x.store_convert(tmp);
    return V::load_convert(tmp);
  }
  if (dtype == ScalarType::Float16) {
    Half tmp[L];
    x.store_convert(tmp);
    return V::load_convert(tmp);
  }
  return x;
}

void run_node(const EpilogueInstr& in, const EpilogueTile& t, const float* const* vals,
              float* out) {
  const float* x = in.x >= 0 ? vals[in.x] : nullptr;
  const float* y = in.y >= 0 ? vals[in.y] : nullptr;
  switch (in.op) {
    case EpilogueOp::Accumulator:
    case EpilogueOp::kCount:
      break;  // Accumulator reads t.acc in place (see epilogue_tile_f32)
    case EpilogueOp::Scalar:
      each_live_vector(t, [&](int v) { V(in.s0).store(out + v); });
      break;
    case EpilogueOp::SourceC:
      gather_tile(in, t, out);
      each_live_vector(t, [&](int v) { (V::load(out + v) * V(in.s0)).store(out + v); });
      break;
    case EpilogueOp::InputTile:
      gather_tile(in, t, out);
      break;
    case EpilogueOp::RowBroadcast: {
      for (int j = 0; j < t.nr; j += L) V(0.0f).store(out + j);
      if (in.rs == 1) {
        load_row(in.data, in.dtype, t.j0, t.nv, out);
      } else {
        for (int j = 0; j < t.nv; ++j) out[j] = load_scalar(in.data, in.dtype, (t.j0 + j) * in.rs);
      }
      for (int i = 1; i < t.mv; ++i)
        for (int j = 0; j < t.nv; j += L) V::load(out + j).store(out + i * t.nr + j);
      break;
    }
    case EpilogueOp::ColBroadcast:
      for (int i = 0; i < t.mv; ++i) {
        const float v = load_scalar(in.data, in.dtype, (t.i0 + i) * in.rs);
        for (int j = 0; j < t.nv; j += L) V(v).store(out + i * t.nr + j);
      }
      break;
    case EpilogueOp::Add:
      map_binary(x, y, out, t, [](V a, V b) { return a + b; });
      break;
    case EpilogueOp::Sub:
      map_binary(x, y, out, t, [](V a, V b) { return a - b; });
      break;
    case EpilogueOp::Mul:
      map_binary(x, y, out, t, [](V a, V b) { return a * b; });
      break;
    case EpilogueOp::Div:
      map_binary(x, y, out, t, [](V a, V b) { return a / b; });
      break;
    case EpilogueOp::Max:
      map_binary(x, y, out, t, [](V a, V b) { return V::max(a, b); });
      break;
    case EpilogueOp::Min:
      map_binary(x, y, out, t, [](V a, V b) { return V::min(a, b); });
      break;
    case EpilogueOp::Relu:
      map_unary(x, out, t, [](V a) { return V::max(a, V(0.0f)); });
      break;
    case EpilogueOp::GeluErf:
      map_unary(x, out, t, [](V a) { return a * vec::TS_ISA::normal_cdf(a); });
      break;
    case EpilogueOp::GeluTanh:
      map_unary(x, out, t, vec::TS_ISA::gelu_tanh<float>);
      break;
    case EpilogueOp::Silu:
      map_unary(x, out, t, [](V a) { return a * sigmoid(a); });
      break;
    case EpilogueOp::Sigmoid:
      map_unary(x, out, t, sigmoid);
      break;
    case EpilogueOp::Tanh:
      map_unary(x, out, t, [](V a) { return a.tanh(); });
      break;
    case EpilogueOp::Exp:
      map_unary(x, out, t, [](V a) { return a.exp(); });
      break;
    case EpilogueOp::Clamp: {
      const V lo(in.s0), hi(in.s1);
      map_unary(x, out, t, [&](V a) { return V::min(V::max(a, lo), hi); });
      break;
    }
    case EpilogueOp::Cast: {
      const ScalarType d = in.dtype;
      map_unary(x, out, t, [d](V a) { return round_to(a, d); });
      break;
    }
  }
}

// The tile's live part (rows < mv, columns < nv) to S at (s.rs, s.cs), the dtype dispatched
// once per tile: whole-width rows to cached contiguous memory (the usual D) are a plain copy of
// whole vectors; edge rows and streamed outputs go through core/loops.h's store_row (streamed
// rows go around the cache), strided ones element by element. Dispatching per row, through
// store_row, cost more than the copy: a store-only plan ran 10.8-11.7% over the bare GEMM at
// 256^3, 7.0-7.2% this way (docs/gemm.md).
template <class S>
void store_tile(const EpilogueStoreOp& s, const EpilogueTile& t, const float* val) {
  S* out = static_cast<S*>(s.data);
  const bool whole = s.cs == 1 && !s.stream && t.nv == t.nr;
  for (int i = 0; i < t.mv; ++i) {
    const float* row = val + i * t.nr;
    S* d = out + (t.i0 + i) * s.rs + t.j0 * s.cs;
    if (whole) {
      for (int j = 0; j < t.nr; j += L) V::load(row + j).store_convert(d + j);
    } else if (s.cs == 1) {
      detail::store_row(d, t.nv, s.stream, [row](int64_t j, int) { return V::load(row + j); });
    } else {
      for (int j = 0; j < t.nv; ++j) d[j * s.cs] = S(row[j]);
    }
  }
}

void run_store(const EpilogueStoreOp& s, const EpilogueTile& t, const float* val) {
  switch (s.dtype) {
    case ScalarType::BFloat16:
      return store_tile<BFloat16>(s, t, val);
    case ScalarType::Float16:
      return store_tile<Half>(s, t, val);
    default:
      return store_tile<float>(s, t, val);
  }
}

float identity(EpilogueReduceKind k) {
  if (k == EpilogueReduceKind::Max) return -std::numeric_limits<float>::infinity();
  if (k == EpilogueReduceKind::Min) return std::numeric_limits<float>::infinity();
  return 0.0f;
}

V combine(EpilogueReduceKind k, V acc, V x) {
  switch (k) {
    case EpilogueReduceKind::Max:
      return V::max(acc, x);
    case EpilogueReduceKind::Min:
      return V::min(acc, x);
    case EpilogueReduceKind::SumSquares:
      return V::fmadd(x, x, acc);
    default:
      return acc + x;
  }
}

// Horizontal combine in a fixed order. Max/min go through memory so that NaN propagates
// (the instructions' reduce_max drops NaN).
float horizontal(EpilogueReduceKind k, V acc) {
  if (k != EpilogueReduceKind::Max && k != EpilogueReduceKind::Min) return acc.reduce_add();
  alignas(64) float lanes[L];
  acc.store(lanes);
  float r = lanes[0];
  for (int l = 1; l < L; ++l) {
    const float x = lanes[l];
    if (std::isnan(x) || std::isnan(r)) {
      r = NAN;
    } else {
      r = k == EpilogueReduceKind::Max ? (x > r ? x : r) : (x < r ? x : r);
    }
  }
  return r;
}

void run_reduce(const EpilogueReduceOp& r, const EpilogueTile& t, const float* val) {
  const V id(identity(r.kind));
  if (r.axis == EpilogueAxis::Rows) {
    // An edge tile's columns past nv take the identity, lane by lane in registers (a padded
    // copy of the row, written element by element and read back as vectors, stalled on every
    // load: store forwarding fails from narrow stores to a wide load).
    const V lanes = vec::TS_ISA::lane_indices();
    const int64_t tile_col = t.j0 / t.nr;  // not divided per row
    for (int i = 0; i < t.mv; ++i) {
      const float* row = val + i * t.nr;
      V acc = id;
      for (int j = 0; j < t.nr; j += L) {
        V x = V::load(row + j);
        if (j + L > t.nv) x = V::select_lt(lanes, V(static_cast<float>(t.nv - j)), x, id);
        acc = combine(r.kind, acc, x);
      }
      r.partials[(t.i0 + i) * r.ld + tile_col] = horizontal(r.kind, acc);
    }
  } else {
    float* dst = r.partials + (t.i0 / t.mr) * r.ld + t.j0;
    for (int j = 0; j < t.nv; j += L) {
      V acc = id;
      for (int i = 0; i < t.mv; ++i) acc = combine(r.kind, acc, V::load(val + i * t.nr + j));
      if (j + L <= t.nv) {
        acc.store(dst + j);
      } else if (j < t.nv) {
        acc.store(dst + j, t.nv - j);
      }
    }
  }
}

}  // namespace

void epilogue_tile_f32(const EpilogueProgram& program, const EpilogueTile& tile) {
  const float* vals[kMaxEpilogueNodes];
  const int size = tile.mr * tile.nr;
  for (int k = 0; k < program.n_instrs; ++k) {
    const EpilogueInstr& in = program.instrs[k];
    if (in.op == EpilogueOp::Accumulator) {
      vals[k] = tile.acc;
      continue;
    }
    float* out = tile.scratch + static_cast<int64_t>(k) * size;
    run_node(in, tile, vals, out);
    vals[k] = out;
  }
  for (int s = 0; s < program.n_stores; ++s)
    run_store(program.stores[s], tile, vals[program.stores[s].node]);
  for (int r = 0; r < program.n_reduces; ++r)
    run_reduce(program.reduces[r], tile, vals[program.reduces[r].node]);
}

}  // namespace tessera::cpu::TS_ISA
