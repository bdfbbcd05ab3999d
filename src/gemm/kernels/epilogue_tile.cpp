// The epilogue-plan interpreter, compiled once per ISA (contract: epilogue_tile.h).
//
// One call per finished MR x NR tile. Nodes run in order, each as one tight loop over the
// tile's mr * nr / L vectors (node outer, vectors inner), so the switch on the op costs once
// per node per tile, not once per vector; a node's values live in its own tile buffer in
// `scratch` (a 14 x 32 float tile is 1.8 KiB, so a dozen nodes stay in L1). The accumulator
// node reads the driver's tile in place.
//
// A chain (epilogue_tile.h: the accumulator, a bias, one unary op) skips the node loop on
// whole tiles: one pass takes each vector through its stages in registers, stores and reduces
// the last one there, and writes a stage to its buffer only for the other outputs (run_chain).
// bias + gelu + store + row sum over the bare GEMM, `bench gemm` on the Zen 5 VM, one thread,
// builds alternated (medians of 3): 512^3 18.7% node by node -> 14.8% as a chain, 1024^3
// 9.5% -> 7.3%, 2048^3 5.0% -> 3.5%. What is left there is mostly gelu itself: 15-18 cycles
// a vector of 16 on this core, 6-7% of a 512^3 product's time (docs/gemm.md, "Chains").
//
// Nodes run over the tile's live part only: rows [0, mv) and the whole vectors that cover
// columns [0, nv) (lanes past nv in the last one hold finite padding, so no loop needs a
// tail). Nothing past it reaches an output, and an edge tile of a small product is mostly
// padding: an 8x8 product's one 14x32 tile is 7x its live part. Only leaves that read
// memory, stores and reductions look at nv itself.
#include "gemm/kernels/epilogue_tile.h"

#include <cmath>
#include <limits>
#include <type_traits>

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

// A unary node's parameters, copied out of its instruction once per pass (the loops' stores
// through float pointers could alias the instruction's floats, so read in place they would be
// reloaded for every vector).
struct UnaryArgs {
  V lo, hi;          // Clamp's bounds
  ScalarType dtype;  // Cast's target
  explicit UnaryArgs(const EpilogueInstr& in) : lo(in.s0), hi(in.s1), dtype(in.dtype) {}
};

// The unary ops, one definition for the node loop and the chain. Accumulator stands for no op
// (a chain without its unary stage).
template <EpilogueOp Op>
V apply_unary(V a, const UnaryArgs& args) {
  using O = EpilogueOp;
  if constexpr (Op == O::Relu) return V::max(a, V(0.0f));
  if constexpr (Op == O::GeluErf) return a * vec::TS_ISA::normal_cdf(a);
  if constexpr (Op == O::GeluTanh) return vec::TS_ISA::gelu_tanh<float>(a);
  if constexpr (Op == O::Silu) return a * sigmoid(a);
  if constexpr (Op == O::Sigmoid) return sigmoid(a);
  if constexpr (Op == O::Tanh) return a.tanh();
  if constexpr (Op == O::Exp) return a.exp();
  if constexpr (Op == O::Clamp) return V::min(V::max(a, args.lo), args.hi);
  if constexpr (Op == O::Cast) return round_to(a, args.dtype);
  if constexpr (Op == O::Accumulator) return a;
}

// f(std::integral_constant<EpilogueOp, op>) for op among Ops (Accumulator for any other).
template <EpilogueOp... Ops, class F>
void with_op(EpilogueOp op, F&& f) {
  const bool found = ((op == Ops && (f(std::integral_constant<EpilogueOp, Ops>{}), true)) || ...);
  if (!found) f(std::integral_constant<EpilogueOp, EpilogueOp::Accumulator>{});
}

// with_op over the unary ops.
template <class F>
void with_unary(EpilogueOp op, F&& f) {
  using O = EpilogueOp;
  with_op<O::Relu, O::GeluErf, O::GeluTanh, O::Silu, O::Sigmoid, O::Tanh, O::Exp, O::Clamp,
          O::Cast>(op, f);
}

// The tile's first row of a RowBroadcast leaf: its values at columns < nv, zeros to nr.
void broadcast_row(const EpilogueInstr& in, const EpilogueTile& t, float* out) {
  for (int j = 0; j < t.nr; j += L) V(0.0f).store(out + j);
  if (in.rs == 1) {
    load_row(in.data, in.dtype, t.j0, t.nv, out);
  } else {
    for (int j = 0; j < t.nv; ++j) out[j] = load_scalar(in.data, in.dtype, (t.j0 + j) * in.rs);
  }
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
      broadcast_row(in, t, out);
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
    case EpilogueOp::GeluErf:
    case EpilogueOp::GeluTanh:
    case EpilogueOp::Silu:
    case EpilogueOp::Sigmoid:
    case EpilogueOp::Tanh:
    case EpilogueOp::Exp:
    case EpilogueOp::Clamp:
    case EpilogueOp::Cast:
      with_unary(in.op, [&](auto op) {
        const UnaryArgs args(in);
        map_unary(x, out, t, [args](V a) { return apply_unary<decltype(op)::value>(a, args); });
      });
      break;
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
      // A streamed row's first and last vectors are partial (cnt < L) and may start anywhere:
      // read only their lanes, never past the row's end (the last row of the last buffer ends
      // the scratch).
      detail::store_row(d, t.nv, s.stream, [row](int64_t j, int cnt) {
        return cnt == L ? V::load(row + j) : V::load(row + j, cnt);
      });
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

// The tiles a chain runs on: NV vectors a row (every kernel's float tile today; others go node
// by node).
constexpr int kChainVecs = 2;

// A chain (epilogue_tile.h) over a whole tile (NV vectors a row) in one pass, row by row:
// each vector goes from the accumulator through the bias and the unary op Op in registers; the
// last stage is written to `store` (of dtype S; null when the tile leaves it to run_store) and
// reduced by the chain's row reductions there, and a stage that other outputs read is written
// to out[stage] for them. The values are those of the node-by-node passes: the same
// operations in the same order on the same operands.
template <EpilogueOp Op, class S>
void run_chain(const EpilogueProgram& program, const EpilogueTile& t, float* const* out,
               const EpilogueStoreOp* store) {
  constexpr int NV = kChainVecs;
  const EpilogueChain& ch = *program.chain;
  const EpilogueInstr* bias = ch.last >= 1 ? ch.bias : nullptr;
  const bool row_bias = bias && bias->op == EpilogueOp::RowBroadcast;
  V bias_row[NV];
  if (row_bias) {
    alignas(64) float values[NV * L];
    broadcast_row(*bias, t, values);
    for (int j = 0; j < NV; ++j) bias_row[j] = V::load(values + j * L);
  }
  const UnaryArgs unary(ch.unary ? *ch.unary : EpilogueInstr{});
  const int64_t tile_col = t.j0 / t.nr;
  for (int i = 0; i < t.mv; ++i) {
    const int row = i * NV * L;
    const V col_bias = bias && !row_bias
                           ? V(load_scalar(bias->data, bias->dtype, (t.i0 + i) * bias->rs))
                           : V(0.0f);
    V x[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      x[j] = V::load(t.acc + row + j * L);
      if (bias) {
        x[j] = x[j] + (row_bias ? bias_row[j] : col_bias);
        if (out[1]) x[j].store(out[1] + row + j * L);
      }
      if constexpr (Op != EpilogueOp::Accumulator) {
        x[j] = apply_unary<Op>(x[j], unary);
        if (out[2]) x[j].store(out[2] + row + j * L);
      }
    }
    if (store) {
      S* d = static_cast<S*>(store->data) + (t.i0 + i) * store->rs + t.j0;
      // A streamed store's rows start on cache lines (chain_of).
      bool streamed = false;
      if constexpr (detail::kStreamable<S>) {
        if (store->stream) {
          for (int j = 0; j < NV; ++j) x[j].stream_convert(d + j * L);
          streamed = true;
        }
      }
      if (!streamed)
        for (int j = 0; j < NV; ++j) x[j].store_convert(d + j * L);
    }
    for (uint32_t bits = ch.reduces; bits != 0; bits &= bits - 1) {  // as run_reduce's rows
      const EpilogueReduceOp& r = program.reduces[__builtin_ctz(bits)];
      V acc(identity(r.kind));
      for (int j = 0; j < NV; ++j) acc = combine(r.kind, acc, x[j]);
      r.partials[(t.i0 + i) * r.ld + tile_col] = horizontal(r.kind, acc);
    }
  }
}

// run_chain<Op, S> for the chain's unary op and the dtype of `store`.
void dispatch_chain(const EpilogueProgram& program, const EpilogueTile& t, float* const* out,
                    const EpilogueStoreOp* store) {
  const EpilogueChain& ch = *program.chain;
  with_unary(ch.last == 2 ? ch.unary->op : EpilogueOp::Accumulator, [&](auto op) {
    constexpr EpilogueOp kOp = decltype(op)::value;
    switch (store ? store->dtype : ScalarType::Float32) {
      case ScalarType::BFloat16:
        return run_chain<kOp, BFloat16>(program, t, out, store);
      case ScalarType::Float16:
        return run_chain<kOp, Half>(program, t, out, store);
      default:
        return run_chain<kOp, float>(program, t, out, store);
    }
  });
}

}  // namespace

void epilogue_tile_f32(const EpilogueProgram& program, const EpilogueTile& tile) {
  const float* vals[kMaxEpilogueNodes];
  const int size = tile.mr * tile.nr;
  auto buffer = [&](int k) { return tile.scratch + static_cast<int64_t>(k) * size; };
  // Tiles narrower than the kernel's (the last columns, small products) run node by node: a
  // chain over an 8 x 8 product ran slower than the node loops.
  const EpilogueChain* ch =
      tile.nr == kChainVecs * L && tile.nv == tile.nr ? program.chain : nullptr;
  // The chain writes its own store, streamed ones too (from registers, rows on cache lines:
  // bias + gelu + row sum on a 4096 x 4096 float32 output of k = 64, over the bare GEMM,
  // 102-104% -> 81-84% on one thread).
  const EpilogueStoreOp* own_store = ch && ch->store >= 0 ? &program.stores[ch->store] : nullptr;
  if (ch) {
    float* out[EpilogueChain::kStages] = {};
    vals[ch->stage_node[0]] = tile.acc;
    for (int s = 1; s < EpilogueChain::kStages; ++s)
      if (ch->buffered[s]) vals[ch->stage_node[s]] = out[s] = buffer(ch->stage_node[s]);
    dispatch_chain(program, tile, out, own_store);
  } else {
    for (int k = 0; k < program.n_instrs; ++k) {
      const EpilogueInstr& in = program.instrs[k];
      if (in.op == EpilogueOp::Accumulator) {
        vals[k] = tile.acc;
        continue;
      }
      float* out = buffer(k);
      run_node(in, tile, vals, out);
      vals[k] = out;
    }
  }
  for (int s = 0; s < program.n_stores; ++s)
    if (&program.stores[s] != own_store)
      run_store(program.stores[s], tile, vals[program.stores[s].node]);
  for (int r = 0; r < program.n_reduces; ++r)
    if (!ch || r >= 32 || !(ch->reduces >> r & 1))
      run_reduce(program.reduces[r], tile, vals[program.reduces[r].node]);
}

}  // namespace tessera::cpu::TS_ISA
