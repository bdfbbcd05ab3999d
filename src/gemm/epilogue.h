// Epilogue plans: a small expression tree evaluated on each finished GEMM tile before it is
// stored (CUTLASS's epilogue visitor tree is the model; here the tree is data, run by a small
// per-ISA interpreter, src/gemm/kernels/epilogue_tile.cpp).
//
//   leaves:  accumulator (alpha * A B), source C (beta * C, from the GemmProblem), row
//            broadcast v[j] (a bias over N), column broadcast v[i], scalar, input tile X(i, j)
//   nodes:   add sub mul div max min, relu gelu_erf gelu_tanh silu sigmoid tanh exp, clamp,
//            cast (round to float16/bfloat16/float32 and continue in float32)
//   outputs: any number of m x n stores of any node (the first is usually D; others keep e.g.
//            the pre-activation for backward), each float32/bfloat16/float16 at any strides;
//            and row or column reductions of any node (sum, mean, max, min, sum of squares)
//            written as vectors. One GEMM returns the reduced vectors and the full matrices.
//
// Example: D = gelu(A B + bias) and rowsum = sum_j D(i, j)
//
//   EpiloguePlan plan(m, n);
//   auto h = plan.add(plan.accumulator(), plan.row_vector(bias));
//   auto g = plan.unary(EpilogueOp::GeluErf, h);
//   plan.store(g, d, n, 1, ScalarType::BFloat16);
//   plan.reduce(g, EpilogueReduceKind::Sum, EpilogueAxis::Rows, rowsum);
//   if (auto why = plan.supports(problem); !why.empty()) { /* fall back whole */ }
//   gemm_epilogue(problem, plan);
//
// A plan is built for one m x n output and validated as it is built (node indices, dtypes,
// strides, overlapping outputs); builder methods throw tessera::Error naming the method, the
// argument, what was expected and what was given. `supports(problem)` then says, as a
// sentence, why the engine cannot run it on that problem (empty when it can), so callers fall
// back whole, never half. The plan holds pointers to the caller's memory; it allocates only
// in gemm_epilogue (reduction partials, and an accumulation buffer when k spans several KC
// blocks and no float32 output can hold the partial sums).
//
// Numerics: the accumulator is bitwise what gemm() with beta = 0 computes; nodes run in
// float32 with Tessera's vector math (gelu: x * normal_cdf(x)); reductions combine per-tile
// float32 partials in double in a fixed order, so every output is bitwise the same for any
// thread count. The source C is never read when beta == 0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gemm/gemm.h"
#include "gemm/kernels/epilogue_tile.h"

namespace tessera::gemm {

using cpu::EpilogueAxis;
using cpu::EpilogueOp;
using cpu::EpilogueReduceKind;

// Properties of each op, as data.
enum EpilogueOpProps : uint32_t {
  kEpLeaf = 1u << 0,
  kEpUnary = 1u << 1,
  kEpBinary = 1u << 2,
  kEpReadsMemory = 1u << 3,    // a leaf that loads from the caller's memory
  kEpCommutative = 1u << 4,    // binary op with f(x, y) == f(y, x)
  kEpTranscendental = 1u << 5  // uses exp/tanh/erf-class math
};

struct EpilogueOpInfo {
  std::string_view name;
  uint32_t props;
};

const EpilogueOpInfo& epilogue_op_info(EpilogueOp op);
std::string_view reduce_kind_name(EpilogueReduceKind kind);

class EpiloguePlan {
 public:
  using Node = int32_t;

  EpiloguePlan(int64_t m, int64_t n);

  // Leaves.
  Node accumulator();
  Node source_c();  // beta * C of the problem given to gemm_epilogue (float32)
  Node row_vector(const void* v, ScalarType dtype = ScalarType::Float32, int64_t stride = 1);
  Node col_vector(const void* v, ScalarType dtype = ScalarType::Float32, int64_t stride = 1);
  Node scalar(double value);
  Node input(const void* x, int64_t rs, int64_t cs, ScalarType dtype = ScalarType::Float32);

  // Nodes.
  Node unary(EpilogueOp op, Node x);
  Node binary(EpilogueOp op, Node x, Node y);
  Node clamp(Node x, double lo, double hi);
  Node cast(Node x, ScalarType dtype);
  Node add(Node x, Node y) { return binary(EpilogueOp::Add, x, y); }
  Node mul(Node x, Node y) { return binary(EpilogueOp::Mul, x, y); }

  // Outputs. `store` writes node x to an m x n matrix; `reduce` writes a vector of length m
  // (Rows: over each row's n values) or n (Cols), element i at out[i * stride].
  void store(Node x, void* d, int64_t rs, int64_t cs, ScalarType dtype = ScalarType::Float32);
  void reduce(Node x, EpilogueReduceKind kind, EpilogueAxis axis, void* out, int64_t stride = 1,
              ScalarType dtype = ScalarType::Float32);

  // Empty when gemm_epilogue can run this plan on p; otherwise the reason, as a sentence.
  std::string supports(const GemmProblem& p) const;

  int64_t m() const { return m_; }
  int64_t n() const { return n_; }
  const std::vector<cpu::EpilogueInstr>& nodes() const { return nodes_; }
  const std::vector<cpu::EpilogueStoreOp>& stores() const { return stores_; }
  struct Reduction {
    Node node;
    EpilogueReduceKind kind;
    EpilogueAxis axis;
    void* out;
    int64_t stride;
    ScalarType dtype;
  };
  const std::vector<Reduction>& reductions() const { return reductions_; }
  bool uses_source_c() const { return uses_c_; }

 private:
  Node push(const cpu::EpilogueInstr& in);
  void check_node(Node x, std::string_view method, std::string_view arg) const;

  int64_t m_ = 0, n_ = 0;
  bool uses_c_ = false;
  std::vector<cpu::EpilogueInstr> nodes_;
  std::vector<cpu::EpilogueStoreOp> stores_;
  std::vector<Reduction> reductions_;
};

// Runs p (alpha * A B, float32) through `plan` on the kernels of the ISA chosen at start-up,
// or on `kernels` when given. p.c / p.c_rs / p.c_cs / p.beta describe the source C leaf only;
// gemm_epilogue writes nothing but the plan's outputs. Throws when plan.supports(p) is not
// empty (NotImplementedError) or the problem is invalid (ValueError/TypeError).
void gemm_epilogue(const GemmProblem& p, const EpiloguePlan& plan,
                   const cpu::GemmKernels* kernels = nullptr,
                   std::string_view op = "gemm_epilogue");

// gemm_epilogue with B prepacked (a Linear weight packed once, then bias and activation fused
// into every product): p.k and p.n must match b's, p.b is ignored; runs on b's kernels and
// block sizes. Bitwise gemm_epilogue() on the unpacked B for the problems that run the packed
// kernels there (not the small or GEMV ones).
void gemm_epilogue_prepacked(const GemmProblem& p, const EpiloguePlan& plan, const PackedB& b,
                             std::string_view op = "gemm_epilogue");

// The oracle: the product in double (long double sums), then the tree in double per element
// (a cast rounds to its dtype), outputs converted at the end. Serial and slow; for tests.
void gemm_epilogue_reference(const GemmProblem& p, const EpiloguePlan& plan);

namespace detail {
// The driver's part (driver.cpp): the five loops with `program` run on every finished tile.
// `acc` is a float32 m x n buffer (strides acc_rs, acc_cs) for the partial sums when k spans
// several KC blocks; it may be null otherwise (see needs_accumulation_buffer).
// `packed`: a prepacked B (its kernels are `kernels`), or null.
void run_epilogue_loops(const GemmProblem& p, const cpu::GemmKernels& kernels,
                        const cpu::EpilogueProgram& program, float* acc, int64_t acc_rs,
                        int64_t acc_cs, const PackedB* packed = nullptr);
bool needs_accumulation_buffer(const GemmProblem& p, const cpu::GemmKernels& kernels,
                               const PackedB* packed = nullptr);
// Whether the plan's nodes form a chain (cpu::EpilogueChain: the accumulator, a bias, one unary
// op), which the interpreter runs in one pass over each tile.
bool is_chain(const EpiloguePlan& plan);
// The tile shape (MR, NR) of the float32 kernel, for sizing reduction partials.
void float_tile_shape(const cpu::GemmKernels& kernels, int64_t* mr, int64_t* nr);
const cpu::GemmKernels& default_gemm_kernels();
void validate_problem(const GemmProblem& p, std::string_view op, bool c_is_output);
// p with B taken from a pack (checked against p's dtype, k and n; p.b is ignored).
GemmProblem with_packed_b(const GemmProblem& p, const PackedB& b, std::string_view op);
}  // namespace detail

}  // namespace tessera::gemm
