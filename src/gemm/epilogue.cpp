// Epilogue plans: building and validating the tree, supports(), and gemm_epilogue() around
// the driver's loops (src/gemm/driver.cpp) and the per-ISA tile interpreter
// (src/gemm/kernels/epilogue_tile.cpp). Contract: src/gemm/epilogue.h.
//
// Reductions: every tile writes one float32 partial per row (Rows) or column (Cols) into a
// partials matrix indexed by the tile's global position (tile column j0 / NR, tile row
// i0 / MR). Threads split only M and N on tile boundaries, so each partial is computed the
// same way whatever the thread count; after the loops the partials of each row (column) are
// combined in double in index order. The result is bitwise the same for any thread count.
#include "gemm/epilogue.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/cached_vector.h"
#include "core/iterator.h"
#include "tessera/core/error.h"
#include "tessera/core/half.h"

namespace tessera::gemm {

namespace {

using cpu::EpilogueInstr;

constexpr EpilogueOpInfo kOpInfo[] = {
    {"accumulator", kEpLeaf},
    {"source_c", kEpLeaf | kEpReadsMemory},
    {"row_vector", kEpLeaf | kEpReadsMemory},
    {"col_vector", kEpLeaf | kEpReadsMemory},
    {"scalar", kEpLeaf},
    {"input", kEpLeaf | kEpReadsMemory},
    {"add", kEpBinary | kEpCommutative},
    {"sub", kEpBinary},
    {"mul", kEpBinary | kEpCommutative},
    {"div", kEpBinary},
    {"max", kEpBinary | kEpCommutative},
    {"min", kEpBinary | kEpCommutative},
    {"relu", kEpUnary},
    {"gelu_erf", kEpUnary | kEpTranscendental},
    {"gelu_tanh", kEpUnary | kEpTranscendental},
    {"silu", kEpUnary | kEpTranscendental},
    {"sigmoid", kEpUnary | kEpTranscendental},
    {"tanh", kEpUnary | kEpTranscendental},
    {"exp", kEpUnary | kEpTranscendental},
    {"clamp", kEpUnary},
    {"cast", kEpUnary},
};
static_assert(std::size(kOpInfo) == static_cast<size_t>(EpilogueOp::kCount));

bool float_like(ScalarType t) {
  return t == ScalarType::Float32 || t == ScalarType::BFloat16 || t == ScalarType::Float16;
}

int64_t elem_size(ScalarType t) {
  return t == ScalarType::Float32 ? 4 : t == ScalarType::Float64 ? 8 : 2;
}

// The bytes [lo, hi) a strided matrix (or vector: cols 1) can touch.
struct Range {
  const char* lo = nullptr;
  const char* hi = nullptr;
  bool empty() const { return lo == hi; }
};

Range range_of(const void* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, ScalarType t) {
  if (!p || rows <= 0 || cols <= 0) return {};
  int64_t lo = 0, hi = 0;
  for (auto [extent, stride] : {std::pair{rows, rs}, std::pair{cols, cs}}) {
    (stride < 0 ? lo : hi) += (extent - 1) * stride;
  }
  const char* base = static_cast<const char*>(p);
  return {base + lo * elem_size(t), base + (hi + 1) * elem_size(t)};
}

bool overlap(const Range& a, const Range& b) {
  return !a.empty() && !b.empty() && a.lo < b.hi && b.lo < a.hi;
}

// Whether a strided matrix has two elements at one address (as driver.cpp's check).
bool self_overlapping(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (rows <= 1 || cols <= 1) return (rows > 1 && rs == 0) || (cols > 1 && cs == 0);
  const int64_t ars = rs < 0 ? -rs : rs, acs = cs < 0 ? -cs : cs;
  if (ars <= acs) return ars == 0 || ars * (rows - 1) >= acs;
  return acs == 0 || acs * (cols - 1) >= ars;
}

double identity(EpilogueReduceKind k) {
  if (k == EpilogueReduceKind::Max) return -std::numeric_limits<double>::infinity();
  if (k == EpilogueReduceKind::Min) return std::numeric_limits<double>::infinity();
  return 0.0;
}

double combine(EpilogueReduceKind k, double acc, double x) {
  switch (k) {
    case EpilogueReduceKind::Max:
      return std::isnan(acc) || std::isnan(x) ? NAN : std::max(acc, x);
    case EpilogueReduceKind::Min:
      return std::isnan(acc) || std::isnan(x) ? NAN : std::min(acc, x);
    default:
      return acc + x;  // partials of SumSquares are already squares
  }
}

void store_value(void* p, ScalarType t, int64_t off, double v) {
  const float f = static_cast<float>(v);
  if (t == ScalarType::BFloat16) {
    static_cast<BFloat16*>(p)[off] = BFloat16(f);
  } else if (t == ScalarType::Float16) {
    static_cast<Half*>(p)[off] = Half(f);
  } else {
    static_cast<float*>(p)[off] = f;
  }
}

double load_value(const void* p, ScalarType t, int64_t off) {
  if (t == ScalarType::BFloat16) return static_cast<float>(static_cast<const BFloat16*>(p)[off]);
  if (t == ScalarType::Float16) return static_cast<float>(static_cast<const Half*>(p)[off]);
  return static_cast<const float*>(p)[off];
}

double round_to(double x, ScalarType t) {
  const float f = static_cast<float>(x);
  if (t == ScalarType::BFloat16) return static_cast<float>(BFloat16(f));
  if (t == ScalarType::Float16) return static_cast<float>(Half(f));
  return f;
}

// Throws unless r stays apart from every output already in the plan.
void check_apart_from_outputs(const EpiloguePlan& plan, const Range& r, std::string_view method,
                              std::string_view arg) {
  const int64_t m = plan.m(), n = plan.n();
  for (const auto& s : plan.stores())
    TS_CHECK(!overlap(r, range_of(s.data, m, n, s.rs, s.cs, s.dtype)), ValueError,
             "EpiloguePlan::{}(): argument '{}' expected memory apart from the other outputs, "
             "but got an overlap with the store of node {}",
             method, arg, s.node);
  for (const auto& red : plan.reductions()) {
    const int64_t len = red.axis == EpilogueAxis::Rows ? m : n;
    TS_CHECK(!overlap(r, range_of(red.out, len, 1, red.stride, 1, red.dtype)), ValueError,
             "EpiloguePlan::{}(): argument '{}' expected memory apart from the other outputs, "
             "but got an overlap with the {} reduction of node {}",
             method, arg, reduce_kind_name(red.kind), red.node);
  }
}

}  // namespace

const EpilogueOpInfo& epilogue_op_info(EpilogueOp op) {
  const auto i = static_cast<size_t>(op);
  TS_CHECK(i < std::size(kOpInfo), ValueError,
           "epilogue_op_info(): argument 'op' expected an EpilogueOp below {}, but got {}",
           std::size(kOpInfo), i);
  return kOpInfo[i];
}

std::string_view reduce_kind_name(EpilogueReduceKind kind) {
  constexpr std::string_view kNames[] = {"sum", "mean", "max", "min", "sum_squares"};
  return kNames[static_cast<size_t>(kind)];
}

// ------------------------------------------------------------------------------ building

EpiloguePlan::EpiloguePlan(int64_t m, int64_t n) : m_(m), n_(n) {
  TS_CHECK(m >= 0 && n >= 0, ValueError,
           "EpiloguePlan(): expected non-negative sizes, but got m={}, n={}", m, n);
  // One allocation each for the usual plan (a Linear layer's: up to 8 nodes, 2 of each output)
  // instead of one per growth.
  nodes_.reserve(8);
  stores_.reserve(2);
  reductions_.reserve(2);
}

EpiloguePlan::Node EpiloguePlan::push(const EpilogueInstr& in) {
  nodes_.push_back(in);
  return static_cast<Node>(nodes_.size() - 1);
}

void EpiloguePlan::check_node(Node x, std::string_view method, std::string_view arg) const {
  TS_CHECK(x >= 0 && static_cast<size_t>(x) < nodes_.size(), ValueError,
           "EpiloguePlan::{}(): argument '{}' expected a node index in [0, {}), but got {}", method,
           arg, nodes_.size(), x);
}

EpiloguePlan::Node EpiloguePlan::accumulator() {
  return push({.op = EpilogueOp::Accumulator});
}

EpiloguePlan::Node EpiloguePlan::source_c() {
  uses_c_ = true;
  return push({.op = EpilogueOp::SourceC});
}

EpiloguePlan::Node EpiloguePlan::scalar(double value) {
  return push({.op = EpilogueOp::Scalar, .s0 = static_cast<float>(value)});
}

EpiloguePlan::Node EpiloguePlan::row_vector(const void* v, ScalarType dtype, int64_t stride) {
  TS_CHECK(v != nullptr || n_ == 0, ValueError,
           "EpiloguePlan::row_vector(): argument 'v' expected a pointer to {} values, but got "
           "null",
           n_);
  return push({.op = EpilogueOp::RowBroadcast, .dtype = dtype, .data = v, .rs = stride});
}

EpiloguePlan::Node EpiloguePlan::col_vector(const void* v, ScalarType dtype, int64_t stride) {
  TS_CHECK(v != nullptr || m_ == 0, ValueError,
           "EpiloguePlan::col_vector(): argument 'v' expected a pointer to {} values, but got "
           "null",
           m_);
  return push({.op = EpilogueOp::ColBroadcast, .dtype = dtype, .data = v, .rs = stride});
}

EpiloguePlan::Node EpiloguePlan::input(const void* x, int64_t rs, int64_t cs, ScalarType dtype) {
  TS_CHECK(x != nullptr || m_ == 0 || n_ == 0, ValueError,
           "EpiloguePlan::input(): argument 'x' expected a pointer to a {}x{} matrix, but got "
           "null",
           m_, n_);
  const Range r = range_of(x, m_, n_, rs, cs, dtype);
  for (const auto& s : stores_) {
    const bool same_view = s.data == x && s.rs == rs && s.cs == cs && s.dtype == dtype;
    TS_CHECK(same_view || !overlap(r, range_of(s.data, m_, n_, s.rs, s.cs, s.dtype)), ValueError,
             "EpiloguePlan::input(): argument 'x' expected memory apart from the plan's outputs "
             "(or exactly one output's view), but got an overlap with the store of node {}",
             s.node);
  }
  return push({.op = EpilogueOp::InputTile, .dtype = dtype, .data = x, .rs = rs, .cs = cs});
}

EpiloguePlan::Node EpiloguePlan::unary(EpilogueOp op, Node x) {
  const EpilogueOpInfo& info = epilogue_op_info(op);
  TS_CHECK(info.props & kEpUnary, ValueError,
           "EpiloguePlan::unary(): argument 'op' expected a unary op, but got {}", info.name);
  TS_CHECK(op != EpilogueOp::Clamp && op != EpilogueOp::Cast, ValueError,
           "EpiloguePlan::unary(): argument 'op' expected an op without parameters, but got {} "
           "(use EpiloguePlan::{}())",
           info.name, info.name);
  check_node(x, "unary", "x");
  return push({.op = op, .x = x});
}

EpiloguePlan::Node EpiloguePlan::binary(EpilogueOp op, Node x, Node y) {
  const EpilogueOpInfo& info = epilogue_op_info(op);
  TS_CHECK(info.props & kEpBinary, ValueError,
           "EpiloguePlan::binary(): argument 'op' expected a binary op, but got {}", info.name);
  check_node(x, "binary", "x");
  check_node(y, "binary", "y");
  return push({.op = op, .x = x, .y = y});
}

EpiloguePlan::Node EpiloguePlan::clamp(Node x, double lo, double hi) {
  check_node(x, "clamp", "x");
  TS_CHECK(!(lo > hi), ValueError,
           "EpiloguePlan::clamp(): arguments 'lo' and 'hi' expected lo <= hi, but got {} > {}", lo,
           hi);
  return push({.op = EpilogueOp::Clamp,
               .x = x,
               .s0 = static_cast<float>(lo),
               .s1 = static_cast<float>(hi)});
}

EpiloguePlan::Node EpiloguePlan::cast(Node x, ScalarType dtype) {
  check_node(x, "cast", "x");
  return push({.op = EpilogueOp::Cast, .x = x, .dtype = dtype});
}

void EpiloguePlan::store(Node x, void* d, int64_t rs, int64_t cs, ScalarType dtype) {
  check_node(x, "store", "x");
  if (m_ == 0 || n_ == 0) {
    stores_.push_back({x, d, dtype, rs, cs});
    return;
  }
  TS_CHECK(d != nullptr, ValueError,
           "EpiloguePlan::store(): argument 'd' expected a pointer to a {}x{} matrix, but got null",
           m_, n_);
  TS_CHECK(!self_overlapping(m_, n_, rs, cs), ValueError,
           "EpiloguePlan::store(): argument 'd' expected non-overlapping strides for a {}x{} "
           "matrix, but got ({}, {})",
           m_, n_, rs, cs);
  const Range r = range_of(d, m_, n_, rs, cs, dtype);
  check_apart_from_outputs(*this, r, "store", "d");
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const EpilogueInstr& in = nodes_[k];
    if (!(epilogue_op_info(in.op).props & kEpReadsMemory) || in.op == EpilogueOp::SourceC) continue;
    const bool matrix = in.op == EpilogueOp::InputTile;
    const Range ir = matrix ? range_of(in.data, m_, n_, in.rs, in.cs, in.dtype)
                            : range_of(in.data, in.op == EpilogueOp::RowBroadcast ? n_ : m_, 1,
                                       in.rs, 1, in.dtype);
    const bool same_view =
        matrix && in.data == d && in.rs == rs && in.cs == cs && in.dtype == dtype;
    TS_CHECK(same_view || !overlap(r, ir), ValueError,
             "EpiloguePlan::store(): argument 'd' expected memory apart from the plan's inputs "
             "(or exactly one input tile's view), but got an overlap with node {} ({})",
             k, epilogue_op_info(in.op).name);
  }
  stores_.push_back({x, d, dtype, rs, cs});
}

void EpiloguePlan::reduce(Node x, EpilogueReduceKind kind, EpilogueAxis axis, void* out,
                          int64_t stride, ScalarType dtype) {
  check_node(x, "reduce", "x");
  const int64_t len = axis == EpilogueAxis::Rows ? m_ : n_;
  TS_CHECK(out != nullptr || len == 0, ValueError,
           "EpiloguePlan::reduce(): argument 'out' expected a pointer to {} values, but got null",
           len);
  TS_CHECK(len <= 1 || stride != 0, ValueError,
           "EpiloguePlan::reduce(): argument 'stride' expected a non-zero stride for {} values, "
           "but got 0",
           len);
  check_apart_from_outputs(*this, range_of(out, len, 1, stride, 1, dtype), "reduce", "out");
  reductions_.push_back({x, kind, axis, out, stride, dtype});
}

// ------------------------------------------------------------------------------ supports

std::string EpiloguePlan::supports(const GemmProblem& p) const {
  if (p.dtype != ScalarType::Float32)
    return fmt::format(
        "epilogue plans run on float32 GEMMs; this problem is {} (no {} epilogue interpreter)",
        p.dtype, p.dtype);
  if (nodes_.size() > static_cast<size_t>(cpu::kMaxEpilogueNodes))
    return fmt::format("the plan has {} nodes; the interpreter evaluates at most {}", nodes_.size(),
                       cpu::kMaxEpilogueNodes);
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const EpilogueInstr& in = nodes_[k];
    const bool reads = epilogue_op_info(in.op).props & kEpReadsMemory;
    if (reads && in.op != EpilogueOp::SourceC && !float_like(in.dtype))
      return fmt::format("node {} ({}) reads {}; epilogue leaves read float32, bfloat16 or float16",
                         k, epilogue_op_info(in.op).name, in.dtype);
    if (in.op == EpilogueOp::Cast && !float_like(in.dtype))
      return fmt::format("node {} casts to {}; an epilogue casts to float32, bfloat16 or float16",
                         k, in.dtype);
  }
  for (const auto& s : stores_)
    if (!float_like(s.dtype))
      return fmt::format(
          "the store of node {} writes {}; epilogue outputs are float32, bfloat16 or float16",
          s.node, s.dtype);
  for (const auto& r : reductions_)
    if (!float_like(r.dtype))
      return fmt::format(
          "the {} reduction of node {} writes {}; epilogue outputs are float32, bfloat16 or "
          "float16",
          reduce_kind_name(r.kind), r.node, r.dtype);
  return {};
}

// ------------------------------------------------------------------------------ running

namespace {

void check_call(const GemmProblem& p, const EpiloguePlan& plan, std::string_view op) {
  detail::validate_problem(p, op, false);
  TS_CHECK(p.m == plan.m() && p.n == plan.n(), ValueError,
           "{}(): argument 'plan' expected an epilogue plan for a {}x{} output, but got one for "
           "{}x{}",
           op, p.m, p.n, plan.m(), plan.n());
  TS_CHECK(!plan.stores().empty() || !plan.reductions().empty(), ValueError,
           "{}(): argument 'plan' expected at least one store or reduction, but got none", op);
  if (const std::string why = plan.supports(p); !why.empty())
    TS_THROW(NotImplementedError, "{}(): {}", op, why);
  if (p.m == 0 || p.n == 0) return;
  if (plan.uses_source_c() && p.beta != 0) {
    TS_CHECK(p.c != nullptr, ValueError,
             "{}(): argument 'c' expected a pointer (the plan reads beta * C with beta = {}), but "
             "got null",
             op, p.beta);
  }
  const Range ra = range_of(p.a, p.m, p.k, p.a_rs, p.a_cs, p.dtype);
  const Range rb = range_of(p.b, p.k, p.n, p.b_rs, p.b_cs, p.dtype);
  const Range rc = plan.uses_source_c() && p.beta != 0
                       ? range_of(p.c, p.m, p.n, p.c_rs, p.c_cs, p.dtype)
                       : Range{};
  for (const auto& s : plan.stores()) {
    const Range r = range_of(s.data, p.m, p.n, s.rs, s.cs, s.dtype);
    const bool c_in_place =
        s.data == p.c && s.rs == p.c_rs && s.cs == p.c_cs && s.dtype == ScalarType::Float32;
    TS_CHECK(!overlap(r, ra) && !overlap(r, rb) && (c_in_place || !overlap(r, rc)), ValueError,
             "{}(): the store of node {} expected memory apart from a, b and c (or exactly c's "
             "view), but got an overlap",
             op, s.node);
  }
}

// Whether the plan reads the memory of store s: C (beta != 0) or an input tile, in place.
bool plan_reads(const GemmProblem& p, const EpiloguePlan& plan, const cpu::EpilogueStoreOp& s) {
  const Range r = range_of(s.data, p.m, p.n, s.rs, s.cs, s.dtype);
  bool read = plan.uses_source_c() && p.beta != 0 &&
              overlap(r, range_of(p.c, p.m, p.n, p.c_rs, p.c_cs, p.dtype));
  for (const auto& in : plan.nodes())
    if (in.op == EpilogueOp::InputTile)
      read = read || overlap(r, range_of(in.data, p.m, p.n, in.rs, in.cs, in.dtype));
  return read;
}

// A float32 store that can hold the partial sums between KC blocks: one that no input reads.
const cpu::EpilogueStoreOp* accumulation_store(const GemmProblem& p, const EpiloguePlan& plan) {
  for (const auto& s : plan.stores())
    if (s.dtype == ScalarType::Float32 && !plan_reads(p, plan, s)) return &s;
  return nullptr;
}

}  // namespace

namespace {

// n values of T, on the stack up to N and on the heap beyond: a plan's nodes and outputs are
// few, and the per-call heap allocations of run_plan were a fifth of a small fused product's
// time (8x8x8 with bias + gelu + row sum).
template <class T, size_t N>
class SmallArray {
 public:
  explicit SmallArray(size_t n) : n_(n) {
    if (n > N) heap_.resize(n);
  }
  explicit SmallArray(const std::vector<T>& from) : SmallArray(from.size()) {
    std::copy(from.begin(), from.end(), begin());
  }
  T* data() { return n_ > N ? heap_.data() : local_.data(); }
  T* begin() { return data(); }
  T* end() { return data() + n_; }
  T& operator[](size_t i) { return data()[i]; }
  size_t size() const { return n_; }

 private:
  size_t n_;
  std::array<T, N> local_;  // not zeroed: the caller writes what it reads
  cached_vector<T> heap_;
};

// Whether every row of store s starts on a cache line.
bool rows_on_lines(const cpu::EpilogueStoreOp& s) {
  return reinterpret_cast<uintptr_t>(s.data) % 64 == 0 && (s.rs * elem_size(s.dtype)) % 64 == 0;
}

// The plan's nodes as a chain (cpu::EpilogueChain), where they form one: one accumulator, at
// most one broadcast leaf added to it, at most one unary op of the last of those and nothing
// else, every store and reduction reading one of these stages.
std::optional<cpu::EpilogueChain> chain_of(const cpu::EpilogueInstr* nodes, size_t count,
                                           const cpu::EpilogueStoreOp* stores, size_t n_stores,
                                           const std::vector<EpiloguePlan::Reduction>& reductions) {
  int32_t acc = -1, leaf = -1, add = -1, unary = -1;
  for (size_t k = 0; k < count; ++k) {
    const EpilogueOp op = nodes[k].op;
    int32_t* slot = op == EpilogueOp::Accumulator                                      ? &acc
                    : op == EpilogueOp::RowBroadcast || op == EpilogueOp::ColBroadcast ? &leaf
                    : op == EpilogueOp::Add                                            ? &add
                    : (kOpInfo[static_cast<size_t>(op)].props & kEpUnary) != 0         ? &unary
                                                                                       : nullptr;
    if (slot == nullptr || *slot >= 0) return std::nullopt;
    *slot = static_cast<int32_t>(k);
  }
  if (acc < 0 || (leaf >= 0) != (add >= 0)) return std::nullopt;
  if (add >= 0 && !((nodes[add].x == acc && nodes[add].y == leaf) ||
                    (nodes[add].x == leaf && nodes[add].y == acc)))
    return std::nullopt;
  if (unary >= 0 && nodes[unary].x != (add >= 0 ? add : acc)) return std::nullopt;
  cpu::EpilogueChain chain{.stage_node = {acc, add, unary},
                           .bias = leaf >= 0 ? &nodes[leaf] : nullptr,
                           .unary = unary >= 0 ? &nodes[unary] : nullptr};
  auto stage_of = [&chain](int32_t node) {
    for (int s = 0; s < cpu::EpilogueChain::kStages; ++s)
      if (chain.stage_node[s] == node) return s;
    return -1;
  };
  for (size_t s = 0; s < n_stores; ++s) chain.last = std::max(chain.last, stage_of(stores[s].node));
  for (const auto& r : reductions) chain.last = std::max(chain.last, stage_of(r.node));
  // The last stage's first store of contiguous rows and its row reductions (up to 32) come from
  // the pass itself; every other output reads its stage's buffer. A streamed store only where
  // its rows start on cache lines: a tile's rows (at multiples of NR columns) then start on
  // vector boundaries, as non-temporal stores need.
  for (size_t s = 0; s < n_stores; ++s) {
    const int stage = stage_of(stores[s].node);
    if (stage < 0) return std::nullopt;
    if (stage == chain.last && stores[s].cs == 1 && chain.store < 0 &&
        (!stores[s].stream || rows_on_lines(stores[s]))) {
      chain.store = static_cast<int32_t>(s);
    } else {
      chain.buffered[stage] = true;
    }
  }
  for (size_t r = 0; r < reductions.size(); ++r) {
    const int stage = stage_of(reductions[r].node);
    if (stage < 0) return std::nullopt;
    if (stage == chain.last && reductions[r].axis == EpilogueAxis::Rows && r < 32) {
      chain.reduces |= 1u << r;
    } else {
      chain.buffered[stage] = true;
    }
  }
  return chain;
}

// gemm_epilogue's body; `packed` (or null) is a prepacked B, whose kernels `ks` are.
void run_plan(const GemmProblem& p, const EpiloguePlan& plan, const cpu::GemmKernels& ks,
              const PackedB* packed, std::string_view op) {
  TS_CHECK(ks.epilogue_f32 != nullptr, NotImplementedError,
           "{}(): the {} kernel table has no epilogue interpreter", op, ks.isa);
  int64_t mr = 0, nr = 0;
  detail::float_tile_shape(ks, &mr, &nr);

  SmallArray<cpu::EpilogueInstr, 8> instrs(plan.nodes());
  for (auto& in : instrs) {
    if (in.op != EpilogueOp::SourceC) continue;
    if (p.beta == 0) {  // never read C
      in = {.op = EpilogueOp::Scalar, .s0 = 0.0f};
    } else {
      in.data = p.c, in.rs = p.c_rs, in.cs = p.c_cs, in.s0 = static_cast<float>(p.beta);
    }
  }
  // Partials: Rows m x ceil(n / NR), Cols ceil(m / MR) x n.
  const int64_t tiles_m = (p.m + mr - 1) / mr, tiles_n = (p.n + nr - 1) / nr;
  // All reductions' partials in one buffer (on the stack when small).
  const auto& reductions = plan.reductions();
  auto partials_of = [&](const EpiloguePlan::Reduction& red) {
    return red.axis == EpilogueAxis::Rows ? p.m * tiles_n : tiles_m * p.n;
  };
  int64_t total = 0;
  for (const auto& red : reductions) total += partials_of(red);
  SmallArray<float, 256> partials(static_cast<size_t>(total));
  SmallArray<cpu::EpilogueReduceOp, 2> reduces(reductions.size());
  for (size_t r = 0, offset = 0; r < reductions.size(); ++r) {
    const auto& red = reductions[r];
    const bool rows = red.axis == EpilogueAxis::Rows;
    reduces[r] = {red.node, red.kind, red.axis, partials.data() + offset, rows ? tiles_n : p.n};
    offset += static_cast<size_t>(partials_of(red));
  }
  // A float32 store too large for the cache is written around it, as eager ops write such
  // outputs (src/core/loops.h): its lines are not read for ownership first. bias + gelu + row
  // sum on a 4096x4096 output of k = 64 ran 1.18x faster (8192x8192, k = 128: 1.14x). Not when
  // the plan reads the same memory (the accumulation buffer, C or an input tile in place): those
  // lines are in the cache already.
  SmallArray<cpu::EpilogueStoreOp, 2> stores(plan.stores());
  float* acc = nullptr;
  int64_t acc_rs = 0, acc_cs = 0;
  cached_vector<float> acc_buffer;
  if (p.m > 0 && p.n > 0 && detail::needs_accumulation_buffer(p, ks, packed)) {
    if (const cpu::EpilogueStoreOp* s = accumulation_store(p, plan)) {
      acc = static_cast<float*>(s->data), acc_rs = s->rs, acc_cs = s->cs;
    } else {
      acc_buffer.resize(static_cast<size_t>(p.m * p.n));
      acc = acc_buffer.data(), acc_rs = p.n, acc_cs = 1;
    }
  }
  for (auto& s : stores) {
    const int64_t esize = static_cast<int64_t>(element_size(s.dtype));
    // float16/bfloat16 stream half-width vectors (32 bytes on AVX-512): only where every row
    // starts on a cache line and a tile row is whole lines, so that one tile row's stores
    // fill its lines and no partial line leaves the write-combining buffers.
    const bool lines = s.dtype == ScalarType::Float32 ||
                       ((s.dtype == ScalarType::BFloat16 || s.dtype == ScalarType::Float16) &&
                        rows_on_lines(s) && (ks.sgemm.nr * esize) % 64 == 0);
    s.stream = lines && s.cs == 1 && s.data != acc && p.m * p.n * esize >= kStreamOutputBytes &&
               !plan_reads(p, plan, s);
  }
  // Only whole tiles run as a chain (epilogue_tile.cpp): none where n < NR.
  const std::optional<cpu::EpilogueChain> chain =
      p.n >= nr
          ? chain_of(instrs.data(), instrs.size(), stores.data(), stores.size(), plan.reductions())
          : std::nullopt;
  const cpu::EpilogueProgram program{instrs.data(),
                                     static_cast<int32_t>(instrs.size()),
                                     stores.data(),
                                     static_cast<int32_t>(stores.size()),
                                     reduces.data(),
                                     static_cast<int32_t>(reduces.size()),
                                     chain ? &*chain : nullptr};

  if (p.m > 0 && p.n > 0) detail::run_epilogue_loops(p, ks, program, acc, acc_rs, acc_cs, packed);

  // Combine the partials of each row (column) in index order.
  for (size_t r = 0; r < reductions.size(); ++r) {
    const auto& red = reductions[r];
    const bool rows = red.axis == EpilogueAxis::Rows;
    const int64_t len = rows ? p.m : p.n, parts = rows ? tiles_n : tiles_m;
    const int64_t count = rows ? p.n : p.m;
    const float* part = reduces[r].partials;
    for (int64_t i = 0; i < len; ++i) {
      double acc = identity(red.kind);
      for (int64_t t = 0; t < parts; ++t)
        acc = combine(red.kind, acc, rows ? part[i * parts + t] : part[t * len + i]);
      if (red.kind == EpilogueReduceKind::Mean) acc /= static_cast<double>(count);
      store_value(red.out, red.dtype, i * red.stride, acc);
    }
  }
}

}  // namespace

bool detail::is_chain(const EpiloguePlan& plan) {
  return chain_of(plan.nodes().data(), plan.nodes().size(), plan.stores().data(),
                  plan.stores().size(), plan.reductions())
      .has_value();
}

void gemm_epilogue(const GemmProblem& p, const EpiloguePlan& plan, const cpu::GemmKernels* kernels,
                   std::string_view op) {
  check_call(p, plan, op);
  run_plan(p, plan, kernels ? *kernels : detail::default_gemm_kernels(), nullptr, op);
}

void gemm_epilogue_prepacked(const GemmProblem& p, const EpiloguePlan& plan, const PackedB& b,
                             std::string_view op) {
  const GemmProblem q = detail::with_packed_b(p, b, op);
  check_call(q, plan, op);
  run_plan(q, plan, b.kernels(), &b, op);
}

// ------------------------------------------------------------------------------ reference

void gemm_epilogue_reference(const GemmProblem& p, const EpiloguePlan& plan) {
  TS_CHECK(p.dtype == ScalarType::Float32 && p.m == plan.m() && p.n == plan.n(), ValueError,
           "gemm_epilogue_reference(): expected a float32 problem of the plan's {}x{} shape, but "
           "got {} {}x{}",
           plan.m(), plan.n(), p.dtype, p.m, p.n);
  const auto& nodes = plan.nodes();
  const float* a = static_cast<const float*>(p.a);
  const float* b = static_cast<const float*>(p.b);
  const float* c = static_cast<const float*>(p.c);
  std::vector<std::vector<double>> red_acc;
  for (const auto& red : plan.reductions())
    red_acc.emplace_back(red.axis == EpilogueAxis::Rows ? p.m : p.n, identity(red.kind));
  std::vector<double> v(nodes.size());
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      long double dot = 0;
      if (p.alpha != 0)
        for (int64_t q = 0; q < p.k; ++q)
          dot += static_cast<long double>(a[i * p.a_rs + q * p.a_cs]) * b[q * p.b_rs + j * p.b_cs];
      for (size_t k = 0; k < nodes.size(); ++k) {
        const EpilogueInstr& in = nodes[k];
        const double x = in.x >= 0 ? v[in.x] : 0.0, y = in.y >= 0 ? v[in.y] : 0.0;
        double r = 0;
        switch (in.op) {
          case EpilogueOp::Accumulator:
            r = p.alpha * static_cast<double>(dot);
            break;
          case EpilogueOp::SourceC:
            r = p.beta == 0 ? 0.0 : p.beta * c[i * p.c_rs + j * p.c_cs];
            break;
          case EpilogueOp::RowBroadcast:
            r = load_value(in.data, in.dtype, j * in.rs);
            break;
          case EpilogueOp::ColBroadcast:
            r = load_value(in.data, in.dtype, i * in.rs);
            break;
          case EpilogueOp::Scalar:
            r = in.s0;
            break;
          case EpilogueOp::InputTile:
            r = load_value(in.data, in.dtype, i * in.rs + j * in.cs);
            break;
          case EpilogueOp::Add:
            r = x + y;
            break;
          case EpilogueOp::Sub:
            r = x - y;
            break;
          case EpilogueOp::Mul:
            r = x * y;
            break;
          case EpilogueOp::Div:
            r = x / y;
            break;
          case EpilogueOp::Max:
            r = std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
            break;
          case EpilogueOp::Min:
            r = std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
            break;
          case EpilogueOp::Relu:
            r = std::isnan(x) ? x : std::max(x, 0.0);
            break;
          case EpilogueOp::GeluErf:
            r = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
            break;
          case EpilogueOp::GeluTanh:
            r = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
            break;
          case EpilogueOp::Silu:
            r = x / (1 + std::exp(-x));
            break;
          case EpilogueOp::Sigmoid:
            r = 1 / (1 + std::exp(-x));
            break;
          case EpilogueOp::Tanh:
            r = std::tanh(x);
            break;
          case EpilogueOp::Exp:
            r = std::exp(x);
            break;
          case EpilogueOp::Clamp:
            r = std::isnan(x) ? x : std::min(std::max(x, double(in.s0)), double(in.s1));
            break;
          case EpilogueOp::Cast:
            r = round_to(x, in.dtype);
            break;
          case EpilogueOp::kCount:
            break;
        }
        v[k] = r;
      }
      for (const auto& s : plan.stores())
        store_value(s.data, s.dtype, i * s.rs + j * s.cs, v[s.node]);
      for (size_t r = 0; r < plan.reductions().size(); ++r) {
        const auto& red = plan.reductions()[r];
        const double x = v[red.node];
        double& acc = red_acc[r][red.axis == EpilogueAxis::Rows ? i : j];
        acc = combine(red.kind, acc, red.kind == EpilogueReduceKind::SumSquares ? x * x : x);
      }
    }
  }
  for (size_t r = 0; r < plan.reductions().size(); ++r) {
    const auto& red = plan.reductions()[r];
    const double count = static_cast<double>(red.axis == EpilogueAxis::Rows ? p.n : p.m);
    for (size_t i = 0; i < red_acc[r].size(); ++i) {
      double x = red_acc[r][i];
      if (red.kind == EpilogueReduceKind::Mean) x /= count;
      store_value(red.out, red.dtype, static_cast<int64_t>(i) * red.stride, x);
    }
  }
}

}  // namespace tessera::gemm
