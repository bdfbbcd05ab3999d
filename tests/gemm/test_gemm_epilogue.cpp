// Epilogue plans (src/gemm/epilogue.h): every node and every reduction against the float64
// reference (gemm_epilogue_reference), on every ISA table this CPU runs, over odd shapes,
// strided operands and outputs, sentinels around every output, beta 0 with NaN in C, k over
// several KC blocks, threads 1 vs 2 bitwise, supports() and error messages.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gemm/epilogue.h"
#include "gemm_test_util.h"
#include "tessera/core/error.h"
#include "tessera/core/half.h"
#include "tessera/core/parallel.h"
#include "tessera/tessera.h"

namespace tessera::gemm::testing {
namespace {

using Node = EpiloguePlan::Node;

// A bfloat16 or float16 value given by its bits, widened to float.
float widen16(ScalarType dtype, uint16_t bits) {
  return dtype == ScalarType::BFloat16 ? float(BFloat16(from_bits, bits))
                                       : float(Half(from_bits, bits));
}

// A guarded vector of len values at `stride` (float32), sentinels in the gaps and around.
struct GuardedVector {
  static constexpr int64_t kGuard = 32;
  int64_t len = 0, stride = 1;
  std::vector<float> buf;
  GuardedVector(int64_t n, int64_t s) : len(n), stride(s) {
    buf.assign((n > 0 ? (n - 1) * s + 1 : 0) + 2 * kGuard, GuardedMatrix<float>::kSentinel);
  }
  float* data() { return buf.data() + kGuard; }
  float at(int64_t i) const { return buf[kGuard + i * stride]; }
  bool sentinels_intact() const {
    for (size_t x = 0; x < buf.size(); ++x) {
      const int64_t off = static_cast<int64_t>(x) - kGuard;
      const bool owned = off >= 0 && off % stride == 0 && off / stride < len;
      if (!owned && !(buf[x] == GuardedMatrix<float>::kSentinel)) return false;
    }
    return true;
  }
};

// Operands of one problem: A, B, C, a row vector (n), a column vector (m, values in [1, 2] so
// it can divide) and a residual tile.
struct Operands {
  int64_t m, n, k;
  GuardedMatrix<float> a, b, c, resid;
  std::vector<float> row, col;
  GemmProblem p;
  Operands(int64_t m_, int64_t n_, int64_t k_, Layout la, Layout lb, uint64_t seed)
      : m(m_),
        n(n_),
        k(k_),
        a(m_, k_, la),
        b(k_, n_, lb),
        c(m_, n_, Layout::RowMajor),
        resid(m_, n_, Layout::General),
        row(n_),
        col(m_) {
    std::mt19937_64 rng(seed);
    a.fill_random(rng);
    b.fill_random(rng);
    c.fill_random(rng);
    resid.fill_random(rng);
    std::uniform_real_distribution<float> d(-1, 1), pos(1, 2);
    for (auto& x : row) x = d(rng);
    for (auto& x : col) x = pos(rng);
    p = make_problem<float>(m, n, k, a, b, c, 1.5 / std::sqrt(double(k) + 1), 0.0);
  }
};

// Outputs requested by a test: float32 matrices (any layout) and vectors, with sentinels.
struct Outputs {
  std::vector<GuardedMatrix<float>> mats;
  std::vector<GuardedVector> vecs;
};

using Builder = std::function<void(EpiloguePlan&, Operands&, Outputs&)>;

// Builds the plan twice (engine outputs, reference outputs), runs both, compares everything.
::testing::AssertionResult check_plan(Operands& o, const Builder& build,
                                      const cpu::GemmKernels* kernels, double rtol = 2e-4) {
  Outputs got, ref;
  EpiloguePlan plan(o.m, o.n), ref_plan(o.m, o.n);
  build(plan, o, got);
  build(ref_plan, o, ref);
  if (std::string why = plan.supports(o.p); !why.empty())
    return ::testing::AssertionFailure() << "supports(): " << why;
  gemm_epilogue(o.p, plan, kernels);
  gemm_epilogue_reference(o.p, ref_plan);
  auto close = [&](double g, double r) {
    if (std::isnan(r)) return std::isnan(g);
    if (std::isinf(r)) return g == r;
    return std::fabs(g - r) <= rtol * (1 + std::fabs(r)) * (1 + o.n / 64.0);
  };
  for (size_t s = 0; s < got.mats.size(); ++s) {
    if (!got.mats[s].sentinels_intact())
      return ::testing::AssertionFailure() << "write outside output matrix " << s;
    for (int64_t i = 0; i < o.m; ++i)
      for (int64_t j = 0; j < o.n; ++j)
        if (!close(got.mats[s].at(i, j), ref.mats[s].at(i, j)))
          return ::testing::AssertionFailure()
                 << "output " << s << " (" << i << ", " << j << ") = " << got.mats[s].at(i, j)
                 << ", expected " << ref.mats[s].at(i, j) << " for m=" << o.m << " n=" << o.n
                 << " k=" << o.k;
  }
  for (size_t v = 0; v < got.vecs.size(); ++v) {
    if (!got.vecs[v].sentinels_intact())
      return ::testing::AssertionFailure() << "write outside output vector " << v;
    for (int64_t i = 0; i < got.vecs[v].len; ++i)
      if (!close(got.vecs[v].at(i), ref.vecs[v].at(i)))
        return ::testing::AssertionFailure()
               << "vector " << v << " [" << i << "] = " << got.vecs[v].at(i) << ", expected "
               << ref.vecs[v].at(i) << " for m=" << o.m << " n=" << o.n << " k=" << o.k;
  }
  return ::testing::AssertionSuccess();
}

void store_matrix(EpiloguePlan& plan, Node x, Outputs& out, int64_t m, int64_t n, Layout l) {
  out.mats.emplace_back(m, n, l);
  auto& d = out.mats.back();
  plan.store(x, d.data(), d.rs, d.cs);
}

void reduce_vector(EpiloguePlan& plan, Node x, Outputs& out, EpilogueReduceKind kind,
                   EpilogueAxis axis, int64_t m, int64_t n, int64_t stride = 1) {
  out.vecs.emplace_back(axis == EpilogueAxis::Rows ? m : n, stride);
  plan.reduce(x, kind, axis, out.vecs.back().data(), stride);
}

// bias + gelu, pre-activation kept, row sum and column max: the headline plan.
Builder bias_gelu_plan(Layout ld) {
  return [ld](EpiloguePlan& plan, Operands& o, Outputs& out) {
    const Node h = plan.add(plan.accumulator(), plan.row_vector(o.row.data()));
    const Node g = plan.unary(EpilogueOp::GeluErf, h);
    store_matrix(plan, g, out, o.m, o.n, ld);
    store_matrix(plan, h, out, o.m, o.n, Layout::RowMajor);
    reduce_vector(plan, g, out, EpilogueReduceKind::Sum, EpilogueAxis::Rows, o.m, o.n);
    reduce_vector(plan, g, out, EpilogueReduceKind::Max, EpilogueAxis::Cols, o.m, o.n, 3);
  };
}

TEST(GemmEpilogue, EveryUnaryNodeEveryIsa) {
  const EpilogueOp ops[] = {EpilogueOp::Relu, EpilogueOp::GeluErf, EpilogueOp::GeluTanh,
                            EpilogueOp::Silu, EpilogueOp::Sigmoid, EpilogueOp::Tanh,
                            EpilogueOp::Exp,  EpilogueOp::Clamp,   EpilogueOp::Cast};
  for (const auto& nk : runnable_kernels()) {
    for (EpilogueOp op : ops) {
      Operands o(17, 37, 31, Layout::RowMajor, Layout::ColMajor, 7);
      auto build = [op](EpiloguePlan& plan, Operands& o, Outputs& out) {
        const Node h = plan.add(plan.accumulator(), plan.row_vector(o.row.data()));
        Node y;
        if (op == EpilogueOp::Clamp) {
          y = plan.clamp(h, -0.25, 0.5);
        } else if (op == EpilogueOp::Cast) {
          y = plan.cast(h, ScalarType::BFloat16);
        } else {
          y = plan.unary(op, h);
        }
        store_matrix(plan, y, out, o.m, o.n, Layout::RowMajor);
      };
      EXPECT_TRUE(check_plan(o, build, nk.kernels)) << nk.isa << " " << epilogue_op_info(op).name;
    }
  }
}

TEST(GemmEpilogue, EveryBinaryNodeAndLeafEveryIsa) {
  const EpilogueOp ops[] = {EpilogueOp::Add, EpilogueOp::Sub, EpilogueOp::Mul,
                            EpilogueOp::Div, EpilogueOp::Max, EpilogueOp::Min};
  for (const auto& nk : runnable_kernels()) {
    for (EpilogueOp op : ops) {
      Operands o(31, 33, 65, Layout::General, Layout::RowMajor, 11);
      o.p.beta = 0.75;
      auto build = [op](EpiloguePlan& plan, Operands& o, Outputs& out) {
        // (acc + beta C + residual - 0.5) op col_vector, with col_vector in [1, 2].
        Node x = plan.add(plan.accumulator(), plan.source_c());
        x = plan.add(x, plan.input(o.resid.data(), o.resid.rs, o.resid.cs));
        x = plan.binary(EpilogueOp::Sub, x, plan.scalar(0.5));
        const Node y = plan.binary(op, x, plan.col_vector(o.col.data()));
        store_matrix(plan, y, out, o.m, o.n, Layout::ColMajor);
      };
      EXPECT_TRUE(check_plan(o, build, nk.kernels)) << nk.isa << " " << epilogue_op_info(op).name;
    }
  }
}

TEST(GemmEpilogue, EveryReductionBothAxes) {
  const EpilogueReduceKind kinds[] = {EpilogueReduceKind::Sum, EpilogueReduceKind::Mean,
                                      EpilogueReduceKind::Max, EpilogueReduceKind::Min,
                                      EpilogueReduceKind::SumSquares};
  for (const auto& nk : runnable_kernels()) {
    for (int64_t size : {1, 2, 3, 7, 17, 31, 65}) {
      Operands o(size, size + 2, size, Layout::RowMajor, Layout::RowMajor, 13 + size);
      auto build = [&](EpiloguePlan& plan, Operands& o, Outputs& out) {
        const Node h = plan.add(plan.accumulator(), plan.row_vector(o.row.data()));
        for (auto kind : kinds)
          for (auto axis : {EpilogueAxis::Rows, EpilogueAxis::Cols})
            reduce_vector(plan, h, out, kind, axis, o.m, o.n, 2);
      };
      EXPECT_TRUE(check_plan(o, build, nk.kernels)) << nk.isa << " size " << size;
    }
  }
}

// gemm_epilogue keeps a plan's program on the stack up to 8 nodes, 2 stores, 2 reductions and
// 256 partials, and on the heap beyond: a plan past every one of those, on small and large
// outputs.
TEST(GemmEpilogue, PlansPastTheOnStackSizes) {
  for (const auto& nk : runnable_kernels()) {
    for (int64_t size : {5, 97}) {
      Operands o(size, size + 3, 19, Layout::RowMajor, Layout::RowMajor, 29 + size);
      auto build = [](EpiloguePlan& plan, Operands& o, Outputs& out) {
        Node x = plan.add(plan.accumulator(), plan.row_vector(o.row.data()));
        for (int step = 0; step < 4; ++step) {  // 11 nodes in all
          x = plan.binary(EpilogueOp::Mul, x, plan.scalar(0.75));
          if (step % 2 == 0) store_matrix(plan, x, out, o.m, o.n, Layout::RowMajor);
        }
        x = plan.unary(EpilogueOp::Tanh, x);
        store_matrix(plan, x, out, o.m, o.n, Layout::ColMajor);
        reduce_vector(plan, x, out, EpilogueReduceKind::Sum, EpilogueAxis::Rows, o.m, o.n);
        reduce_vector(plan, x, out, EpilogueReduceKind::Max, EpilogueAxis::Cols, o.m, o.n);
        reduce_vector(plan, x, out, EpilogueReduceKind::SumSquares, EpilogueAxis::Rows, o.m, o.n);
      };
      EXPECT_TRUE(check_plan(o, build, nk.kernels)) << nk.isa << " size " << size;
    }
  }
}

TEST(GemmEpilogue, OddSizesAndLayouts) {
  const int64_t sizes[] = {1, 2, 3, 7, 17, 31, 65, 257};
  int seed = 0;
  for (int64_t m : sizes) {
    for (int64_t n : sizes) {
      const int64_t k = sizes[(m + n) % 8];
      for (Layout la : kLayouts) {
        const Layout lb = kLayouts[(seed + 1) % 3], ld = kLayouts[seed % 3];
        Operands o(m, n, k, la, lb, ++seed);
        EXPECT_TRUE(check_plan(o, bias_gelu_plan(ld), nullptr))
            << layout_name(la) << " " << layout_name(lb) << " -> " << layout_name(ld);
      }
    }
  }
}

TEST(GemmEpilogue, DeepKUsesAccumulationBuffer) {
  // k = 1100 spans several KC blocks: partial sums live in the float32 D, or in a buffer when
  // D is bfloat16 or the residual is D itself (in place).
  for (const auto& nk : runnable_kernels()) {
    Operands o(45, 70, 1100, Layout::RowMajor, Layout::ColMajor, 5);
    EXPECT_TRUE(check_plan(o, bias_gelu_plan(Layout::RowMajor), nk.kernels)) << nk.isa;
    // In place: D = acc + D.
    GuardedMatrix<float> d(o.m, o.n, Layout::RowMajor), ref(o.m, o.n, Layout::RowMajor);
    std::mt19937_64 rng(3);
    d.fill_random(rng);
    ref = d;
    for (auto* t : {&d, &ref}) {
      EpiloguePlan plan(o.m, o.n);
      plan.store(plan.add(plan.accumulator(), plan.input(t->data(), t->rs, t->cs)), t->data(),
                 t->rs, t->cs);
      if (t == &d) {
        gemm_epilogue(o.p, plan, nk.kernels);
      } else {
        gemm_epilogue_reference(o.p, plan);
      }
    }
    ASSERT_TRUE(d.sentinels_intact());
    for (int64_t i = 0; i < o.m; ++i)
      for (int64_t j = 0; j < o.n; ++j)
        ASSERT_NEAR(d.at(i, j), ref.at(i, j), 1e-4 * (1 + std::fabs(ref.at(i, j)))) << nk.isa;
  }
}

TEST(GemmEpilogue, BetaZeroNeverReadsC) {
  Operands o(19, 23, 29, Layout::RowMajor, Layout::RowMajor, 9);
  o.c.fill(NAN);
  o.p.beta = 0;
  auto build = [](EpiloguePlan& plan, Operands& o, Outputs& out) {
    store_matrix(plan, plan.add(plan.accumulator(), plan.source_c()), out, o.m, o.n,
                 Layout::RowMajor);
  };
  EXPECT_TRUE(check_plan(o, build, nullptr));
  o.p.c = nullptr;  // not needed at all
  EXPECT_TRUE(check_plan(o, build, nullptr));
}

TEST(GemmEpilogue, ZeroProductStillRunsThePlan) {
  for (int64_t k : {0, 5}) {
    Operands o(9, 40, k, Layout::RowMajor, Layout::RowMajor, 21);
    if (k > 0) o.p.alpha = 0;
    EXPECT_TRUE(check_plan(o, bias_gelu_plan(Layout::RowMajor), nullptr)) << k;
  }
  // Empty outputs: reductions over no elements give the identity (mean: NaN).
  Operands o(4, 0, 3, Layout::RowMajor, Layout::RowMajor, 1);
  EpiloguePlan plan(4, 0);
  GuardedVector sum(4, 1), mean(4, 1);
  plan.reduce(plan.accumulator(), EpilogueReduceKind::Sum, EpilogueAxis::Rows, sum.data());
  plan.reduce(0, EpilogueReduceKind::Mean, EpilogueAxis::Rows, mean.data());
  gemm_epilogue(o.p, plan);
  EXPECT_EQ(sum.at(3), 0.0f);
  EXPECT_TRUE(std::isnan(mean.at(0)));
}

// Narrow outputs and inputs: bfloat16/float16 stores, a bfloat16 residual and bias.
TEST(GemmEpilogue, NarrowDtypes) {
  for (ScalarType dt : {ScalarType::BFloat16, ScalarType::Float16}) {
    for (const auto& nk : runnable_kernels()) {
      const int64_t m = 33, n = 47, k = 40;
      Operands o(m, n, k, Layout::RowMajor, Layout::RowMajor, 17);
      std::vector<BFloat16> bias(n), resid(m * n);
      for (int64_t j = 0; j < n; ++j) bias[j] = BFloat16(o.row[j]);
      for (int64_t i = 0; i < m * n; ++i) resid[i] = BFloat16(o.resid.data()[i % 61] * 0.5f);
      std::vector<uint16_t> got(m * n + 64, 0xabcd), ref(m * n + 64, 0xabcd);
      for (auto* out : {&got, &ref}) {
        EpiloguePlan plan(m, n);
        Node h = plan.add(plan.accumulator(), plan.row_vector(bias.data(), ScalarType::BFloat16));
        h = plan.add(h, plan.input(resid.data(), n, 1, ScalarType::BFloat16));
        plan.store(plan.unary(EpilogueOp::Silu, h), out->data() + 32, n, 1, dt);
        if (out == &got) {
          gemm_epilogue(o.p, plan, nk.kernels);
        } else {
          gemm_epilogue_reference(o.p, plan);
        }
      }
      for (int g = 0; g < 32; ++g) {
        ASSERT_EQ(got[g], 0xabcd);
        ASSERT_EQ(got[m * n + 32 + g], 0xabcd);
      }
      for (int64_t i = 0; i < m * n; ++i) {
        const float g = widen16(dt, got[32 + i]), r = widen16(dt, ref[32 + i]);
        ASSERT_NEAR(g, r, (dt == ScalarType::BFloat16 ? 8e-3 : 1e-3) * (1 + std::fabs(r)))
            << nk.isa << " " << (dt == ScalarType::BFloat16 ? "bfloat16" : "float16") << " at "
            << i;
      }
    }
  }
}

// Threads split only M and N: every output, reductions included, is bitwise the same.
TEST(GemmEpilogue, ThreadsOneVsTwoBitwise) {
  const int saved = get_num_threads();
  Operands o(301, 283, 600, Layout::RowMajor, Layout::RowMajor, 23);
  std::vector<float> d[2], rsum[2], cmean[2];
  for (int t : {1, 2}) {
    set_num_threads(t);
    auto& dd = d[t - 1];
    dd.assign(o.m * o.n, 0);
    rsum[t - 1].assign(o.m, 0);
    cmean[t - 1].assign(o.n, 0);
    EpiloguePlan plan(o.m, o.n);
    const Node g = plan.unary(EpilogueOp::GeluTanh,
                              plan.add(plan.accumulator(), plan.row_vector(o.row.data())));
    plan.store(g, dd.data(), o.n, 1);
    plan.reduce(g, EpilogueReduceKind::Sum, EpilogueAxis::Rows, rsum[t - 1].data());
    plan.reduce(g, EpilogueReduceKind::Mean, EpilogueAxis::Cols, cmean[t - 1].data());
    gemm_epilogue(o.p, plan);
  }
  set_num_threads(saved);
  EXPECT_EQ(d[0], d[1]);
  EXPECT_EQ(rsum[0], rsum[1]);
  EXPECT_EQ(cmean[0], cmean[1]);
}

// The accumulator is bitwise what gemm() with beta 0 computes.
TEST(GemmEpilogue, AccumulatorMatchesPlainGemmBitwise) {
  // k = 1100 spans KC blocks (KC is at most 1024): the last one finishes whole tiles in place
  // in D (the accumulation buffer), bottom edges on the kernel for their rows; D row- and
  // column-major.
  for (const auto& nk : runnable_kernels()) {
    for (Layout d_layout : {Layout::RowMajor, Layout::ColMajor}) {
      Operands o(40, 70, 1100, Layout::RowMajor, Layout::General, 29);
      GuardedMatrix<float> plain(o.m, o.n, d_layout), fused(o.m, o.n, d_layout);
      GemmProblem q = o.p;
      q.c = plain.data(), q.c_rs = plain.rs, q.c_cs = plain.cs;
      gemm(q, nk.kernels);
      EpiloguePlan plan(o.m, o.n);
      plan.store(plan.accumulator(), fused.data(), fused.rs, fused.cs);
      gemm_epilogue(o.p, plan, nk.kernels);
      EXPECT_EQ(plain.buf, fused.buf) << nk.isa;
      EXPECT_TRUE(fused.sentinels_intact()) << nk.isa;
    }
  }
}

// A float32 output of 32 MiB or more is written around the cache (non-temporal stores from
// each row's first vector-aligned element; the rows here start off that alignment): its bits
// are still gemm()'s, on every ISA and on two threads, and nothing outside it is written.
TEST(GemmEpilogue, OutputsPastTheCacheAreStreamedExactly) {
  const int saved = get_num_threads();
  const int64_t m = 2900, n = 2901, k = 8;
  ASSERT_GE(m * n * int64_t{sizeof(float)}, int64_t{32} << 20);
  GuardedMatrix<float> a(m, k, Layout::RowMajor), b(k, n, Layout::RowMajor);
  GuardedMatrix<float> plain(m, n, Layout::RowMajor), fused(m, n, Layout::RowMajor);
  std::mt19937_64 rng(31);
  a.fill_random(rng);
  b.fill_random(rng);
  for (const auto& nk : runnable_kernels()) {
    const GemmProblem q = make_problem<float>(m, n, k, a, b, plain, 1.0, 0.0);
    gemm(q, nk.kernels);
    GemmProblem p = q;
    p.c = nullptr;
    for (int t : {1, 2}) {
      set_num_threads(t);
      fused.fill(0.0f);
      EpiloguePlan plan(m, n);
      plan.store(plan.accumulator(), fused.data(), fused.rs, fused.cs);
      gemm_epilogue(p, plan, nk.kernels);
      EXPECT_TRUE(fused.buf == plain.buf) << nk.isa << ", " << t << " thread(s)";
    }
  }
  // bfloat16 of 32 MiB or more with rows on cache lines (n = 4096) streams too; it holds the
  // cast of gemm()'s float32 bits.
  const int64_t mb = 4100, nb = 4096;
  ASSERT_GE(mb * nb * 2, int64_t{32} << 20);
  const Tensor x = randn({mb, k}), y = randn({k, nb});
  GemmProblem q;
  q.m = mb, q.n = nb, q.k = k;
  q.a = x.data_ptr(), q.a_rs = k, q.a_cs = 1;
  q.b = y.data_ptr(), q.b_rs = nb, q.b_cs = 1;
  for (const auto& nk : runnable_kernels()) {
    Tensor c = empty({mb, nb}, kFloat32);
    GemmProblem pc = q;
    pc.c = c.data_ptr(), pc.c_rs = nb, pc.c_cs = 1;
    gemm(pc, nk.kernels);
    const Tensor want = c.to(kBFloat16);
    for (int t : {1, 2}) {
      set_num_threads(t);
      Tensor d = full({mb, nb}, 0.0, kBFloat16);
      EpiloguePlan plan(mb, nb);
      plan.store(plan.accumulator(), d.data_ptr(), nb, 1, kBFloat16);
      gemm_epilogue(q, plan, nk.kernels);
      EXPECT_TRUE(equal(d, want)) << nk.isa << ", bfloat16, " << t << " thread(s)";
    }
  }
  set_num_threads(saved);
}

// Every output of a plan as raw bytes, with each one's dtype.
struct PlanOutputs {
  struct Output {
    ScalarType dtype;
    std::vector<uint8_t> bytes;
  };
  std::vector<Output> outputs;
  PlanOutputs(int64_t m, int64_t n, ScalarType dt) {
    for (auto [dtype, count] : {std::pair{dt, m * n},
                                {ScalarType::BFloat16, m * n},
                                {ScalarType::Float16, m * n},
                                {ScalarType::Float32, m},
                                {ScalarType::Float32, n},
                                {ScalarType::Float32, m}})
      outputs.push_back({dtype, std::vector<uint8_t>(count * element_size(dtype))});
  }
  uint8_t* data(int k) { return outputs[k].bytes.data(); }
};

// The value of element e of a float32/bfloat16/float16 output, widened.
float element(const PlanOutputs::Output& o, size_t e) {
  if (o.dtype == ScalarType::Float32) return reinterpret_cast<const float*>(o.bytes.data())[e];
  uint16_t bits;
  std::memcpy(&bits, o.bytes.data() + 2 * e, 2);
  return widen16(o.dtype, bits);
}

// Whether two runs wrote the same bits everywhere, but that a NaN's sign and payload may differ
// (the x86 result of an operation on two NaNs is whichever operand the compiler put first).
::testing::AssertionResult same_bits(const PlanOutputs& a, const PlanOutputs& b) {
  for (size_t k = 0; k < a.outputs.size(); ++k) {
    const auto& x = a.outputs[k];
    const auto& y = b.outputs[k];
    const size_t size = element_size(x.dtype);
    for (size_t e = 0; e < x.bytes.size() / size; ++e) {
      if (std::memcmp(x.bytes.data() + e * size, y.bytes.data() + e * size, size) == 0) continue;
      if (std::isnan(element(x, e)) && std::isnan(element(y, e))) continue;
      return ::testing::AssertionFailure() << "output " << k << " element " << e << ": "
                                           << element(x, e) << " vs " << element(y, e);
    }
  }
  return ::testing::AssertionSuccess();
}

enum class Bias { None, Row, Col };

// D = unary(acc [+ bias]) stored as `dt` (the chain's own store), again as bfloat16, the
// pre-activation as float16 column-major (strided), the row sums of D, its column maxima and
// the pre-activation's row sums of squares. With `unused_leaf`, an extra scalar leaf that no
// node reads makes the same plan no chain.
void run_chain_plan(const Operands& o, Bias bias, EpilogueOp op, ScalarType dt, bool unused_leaf,
                    PlanOutputs& out, const cpu::GemmKernels* kernels) {
  EpiloguePlan plan(o.m, o.n);
  Node x = plan.accumulator();
  if (unused_leaf) plan.scalar(2.0);
  if (bias == Bias::Row) x = plan.add(x, plan.row_vector(o.row.data()));
  if (bias == Bias::Col) x = plan.add(plan.col_vector(o.col.data()), x);
  Node y = x;
  if (op == EpilogueOp::Clamp) {
    y = plan.clamp(x, -0.25, 0.5);
  } else if (op == EpilogueOp::Cast) {
    y = plan.cast(x, ScalarType::Float16);
  } else if (op != EpilogueOp::Accumulator) {
    y = plan.unary(op, x);
  }
  plan.store(y, out.data(0), o.n, 1, dt);
  plan.store(y, out.data(1), o.n, 1, ScalarType::BFloat16);
  plan.store(x, out.data(2), 1, o.m, ScalarType::Float16);
  plan.reduce(y, EpilogueReduceKind::Sum, EpilogueAxis::Rows, out.data(3));
  plan.reduce(y, EpilogueReduceKind::Max, EpilogueAxis::Cols, out.data(4));
  plan.reduce(x, EpilogueReduceKind::SumSquares, EpilogueAxis::Rows, out.data(5));
  ASSERT_EQ(detail::is_chain(plan), !unused_leaf);
  gemm_epilogue(o.p, plan, kernels);
}

// A chain (the accumulator, a bias, one unary op) runs in one pass over each tile, its values
// in registers from stage to stage; it writes what the node-by-node passes write, bit for bit
// (same_bits):
// every unary op and none, a row, a column and no bias (with a NaN and infinities in it),
// float32, bfloat16 and float16 as the chain's own store beside buffered stores of both stages
// and reductions on both axes, over edge tiles, a product on the GEMV kernels, an unpacked
// small one and one over several KC blocks, on every ISA.
TEST(GemmEpilogue, ChainsHaveTheNodeByNodeBits) {
  const EpilogueOp ops[] = {EpilogueOp::Accumulator, EpilogueOp::Relu, EpilogueOp::GeluErf,
                            EpilogueOp::GeluTanh,    EpilogueOp::Silu, EpilogueOp::Sigmoid,
                            EpilogueOp::Tanh,        EpilogueOp::Exp,  EpilogueOp::Clamp,
                            EpilogueOp::Cast};
  struct Shape {
    int64_t m, n, k;
    bool every_op;
  };
  for (const auto& nk : runnable_kernels()) {
    for (const Shape& s : {Shape{37, 70, 50, true}, Shape{5, 200, 40, true},
                           Shape{64, 48, 30, false}, Shape{45, 97, 1100, false}}) {
      Operands o(s.m, s.n, s.k, Layout::RowMajor, Layout::RowMajor, 43 + s.m);
      o.row[1] = NAN, o.row[2] = INFINITY, o.row[3] = -INFINITY;
      o.col[2] = INFINITY;
      for (Bias bias : {Bias::None, Bias::Row, Bias::Col}) {
        for (EpilogueOp op : ops) {
          if (!s.every_op && op != EpilogueOp::GeluErf && op != EpilogueOp::Accumulator) continue;
          for (ScalarType dt : {ScalarType::Float32, ScalarType::BFloat16, ScalarType::Float16}) {
            PlanOutputs chain(s.m, s.n, dt), nodes(s.m, s.n, dt);
            run_chain_plan(o, bias, op, dt, false, chain, nk.kernels);
            run_chain_plan(o, bias, op, dt, true, nodes, nk.kernels);
            EXPECT_TRUE(same_bits(chain, nodes))
                << nk.isa << " " << s.m << "x" << s.n << "x" << s.k << " bias "
                << static_cast<int>(bias) << " " << epilogue_op_info(op).name << " "
                << dtype_name(dt);
          }
        }
      }
    }
  }
}

// A chain's own store past the cache streams (and is fenced) like any other: from registers
// where every row starts on a vector boundary (float32 rows of 4096, bfloat16 rows of 4096),
// through run_store where rows start anywhere (2901 columns): the node-by-node bits, on every
// ISA.
TEST(GemmEpilogue, ChainStoresPastTheCacheStream) {
  const int64_t k = 8;
  for (auto [m, n, dtype] : {std::tuple{int64_t{2900}, int64_t{2901}, kFloat32},
                             {int64_t{2048}, int64_t{4096}, kFloat32},
                             {int64_t{4096}, int64_t{4096}, kBFloat16}}) {
    ASSERT_GE(m * n * element_size(dtype), int64_t{32} << 20);
    const Tensor a = randn({m, k}), b = randn({k, n}), bias = randn({n});
    GemmProblem p;
    p.m = m, p.n = n, p.k = k;
    p.a = a.data_ptr(), p.a_rs = k, p.a_cs = 1;
    p.b = b.data_ptr(), p.b_rs = n, p.b_cs = 1;
    for (const auto& nk : runnable_kernels()) {
      Tensor d[2] = {full({m, n}, 0.0, dtype), full({m, n}, 0.0, dtype)};
      Tensor rsum[2] = {zeros({m}), zeros({m})};
      for (int unused_leaf = 0; unused_leaf < 2; ++unused_leaf) {
        EpiloguePlan plan(m, n);
        if (unused_leaf) plan.scalar(2.0);
        const Node g = plan.unary(EpilogueOp::GeluErf,
                                  plan.add(plan.accumulator(), plan.row_vector(bias.data_ptr())));
        plan.store(g, d[unused_leaf].data_ptr(), n, 1, dtype);
        plan.reduce(g, EpilogueReduceKind::Sum, EpilogueAxis::Rows, rsum[unused_leaf].data_ptr());
        ASSERT_EQ(detail::is_chain(plan), !unused_leaf);
        gemm_epilogue(p, plan, nk.kernels);
      }
      const size_t bytes = static_cast<size_t>(m * n * element_size(dtype));
      EXPECT_EQ(std::memcmp(d[0].data_ptr(), d[1].data_ptr(), bytes), 0)
          << nk.isa << " " << m << "x" << n << " " << dtype_name(dtype);
      EXPECT_TRUE(equal(rsum[0], rsum[1])) << nk.isa << " " << m << "x" << n;
    }
  }
}

// A product of at most 64 x 64 within one KC block runs unpacked (driver.cpp, small_epilogue);
// its tiles reach the plan with the packed path's values: the first 40 rows of an 80-row
// problem (packed) equal the 40-row problem (unpacked) bit for bit, with and without beta.
TEST(GemmEpilogue, SmallProductsHaveThePackedPathsBits) {
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    Operands o(80, 50, 100, Layout::RowMajor, Layout::RowMajor, 31);
    for (double beta : {0.0, 0.5}) {
      std::vector<float> d[2], rsum[2];
      for (int small = 0; small < 2; ++small) {
        GemmProblem q = o.p;
        q.m = small ? 40 : 80;
        q.beta = beta;
        EpiloguePlan plan(q.m, o.n);
        const Node h = plan.add(plan.accumulator(), plan.row_vector(o.row.data()));
        const Node g = plan.unary(EpilogueOp::GeluErf, h);
        d[small].assign(q.m * o.n, 0.0f);
        rsum[small].assign(q.m, 0.0f);
        plan.store(g, d[small].data(), o.n, 1);
        plan.reduce(g, EpilogueReduceKind::Sum, EpilogueAxis::Rows, rsum[small].data());
        gemm_epilogue(q, plan, nk.kernels);
      }
      for (int64_t e = 0; e < 40 * o.n; ++e) ASSERT_EQ(d[0][e], d[1][e]) << "beta " << beta;
      for (int64_t i = 0; i < 40; ++i) ASSERT_EQ(rsum[0][i], rsum[1][i]) << "beta " << beta;
    }
  }
}

// Few rows or columns beside many run the GEMV kernels, then the plan on their products: within
// the oracle's bound on every ISA (both orientations, reductions on both axes, k past one KC
// block), and the accumulator is gemm()'s, bit for bit.
TEST(GemmEpilogue, FewRowsRunGemvThenThePlan) {
  for (const auto& nk : runnable_kernels()) {
    SCOPED_TRACE(nk.isa);
    for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 300}, {6, 300}, {8, 97}, {300, 5}}) {
      Operands o(m, n, 1100, Layout::RowMajor, Layout::RowMajor, 41 + m);
      auto build = [&](EpiloguePlan& plan, Operands& o, Outputs& out) {
        const Node h = plan.add(plan.accumulator(), plan.row_vector(o.row.data()));
        const Node g = plan.unary(EpilogueOp::GeluErf, h);
        store_matrix(plan, g, out, o.m, o.n, Layout::RowMajor);
        for (auto axis : {EpilogueAxis::Rows, EpilogueAxis::Cols})
          reduce_vector(plan, g, out, EpilogueReduceKind::Sum, axis, o.m, o.n, 1);
      };
      EXPECT_TRUE(check_plan(o, build, nk.kernels)) << "m=" << m << " n=" << n;
      GuardedMatrix<float> plain(m, n, Layout::RowMajor), fused(m, n, Layout::RowMajor);
      GemmProblem q = o.p;
      q.c = plain.data(), q.c_rs = plain.rs, q.c_cs = plain.cs;
      gemm(q, nk.kernels);
      EpiloguePlan plan(m, n);
      plan.store(plan.accumulator(), fused.data(), fused.rs, fused.cs);
      gemm_epilogue(o.p, plan, nk.kernels);
      EXPECT_EQ(plain.buf, fused.buf) << "m=" << m << " n=" << n;
    }
  }
}

// A prepacked B runs the same tiles with the same values: every output and reduction of the
// plan bit for bit what the unpacked B gives, on every ISA, with default and small blocks
// (several KC blocks: the accumulation buffer) and one or two threads.
// The headline plan through gemm_epilogue and through gemm_epilogue_prepacked: the same bits.
void expect_prepacked_bits(Operands& o, const cpu::GemmKernels* kernels) {
  Outputs out[2];
  for (int packed = 0; packed < 2; ++packed) {
    EpiloguePlan plan(o.m, o.n);
    bias_gelu_plan(Layout::RowMajor)(plan, o, out[packed]);
    if (packed) {
      const PackedB pb(ScalarType::Float32, o.k, o.n, o.b.data(), o.b.rs, o.b.cs, kernels);
      gemm_epilogue_prepacked(o.p, plan, pb);
    } else {
      gemm_epilogue(o.p, plan, kernels);
    }
  }
  for (size_t i = 0; i < out[0].mats.size(); ++i)
    EXPECT_EQ(out[0].mats[i].buf, out[1].mats[i].buf) << "matrix " << i;
  for (size_t i = 0; i < out[0].vecs.size(); ++i)
    EXPECT_EQ(out[0].vecs[i].buf, out[1].vecs[i].buf) << "vector " << i;
}

TEST(GemmEpilogue, PrepackedBHasTheUnpackedBits) {
  const int saved = get_num_threads();
  for (const char* blocks : {"", "28,16,64"}) {
    const ScopedGemmBlocks scoped(blocks);
    for (const auto& nk : runnable_kernels()) {
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        SCOPED_TRACE(fmt::format("{} blocks '{}' threads {}", nk.isa, blocks, threads));
        Operands o(100, 150, 1100, Layout::RowMajor, Layout::ColMajor, 51 + threads);
        expect_prepacked_bits(o, nk.kernels);
      }
    }
  }
  // Medium products (up to 512 x 512, k within one KC block, B's rows contiguous) run their
  // plan's tiles on the small kernel; with a prepacked B, packed.
  for (const auto& nk : runnable_kernels()) {
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (auto [m, n, k] : {std::tuple{256, 256, 256}, {131, 300, 77}, {500, 70, 33}}) {
        SCOPED_TRACE(fmt::format("{} threads {} m={} n={} k={}", nk.isa, threads, m, n, k));
        Operands o(m, n, k, Layout::RowMajor, Layout::RowMajor, 61 + threads);
        expect_prepacked_bits(o, nk.kernels);
      }
    }
  }
  set_num_threads(saved);

  // The pack must fit the problem.
  Operands o(20, 30, 40, Layout::RowMajor, Layout::RowMajor, 5);
  EpiloguePlan plan(o.m, o.n);
  Outputs sink;
  bias_gelu_plan(Layout::RowMajor)(plan, o, sink);
  std::vector<double> b64(40 * 30, 1.0);
  const PackedB p64(ScalarType::Float64, 40, 30, b64.data(), 30, 1);
  expect_error_mentions([&] { gemm_epilogue_prepacked(o.p, plan, p64); },
                        {"gemm_epilogue", "float64", "float32"});
  const PackedB p31(ScalarType::Float32, 40, 31, o.b.data(), o.b.rs, 1);
  expect_error_mentions([&] { gemm_epilogue_prepacked(o.p, plan, p31); },
                        {"gemm_epilogue", "n=31", "n=30"});
}

TEST(GemmEpilogue, SupportsSaysWhyNot) {
  Operands o(4, 5, 6, Layout::RowMajor, Layout::RowMajor, 1);
  std::vector<float> d(20);
  std::vector<double> dv(5);
  {
    EpiloguePlan plan(4, 5);
    plan.store(plan.accumulator(), d.data(), 5, 1);
    GemmProblem q = o.p;
    q.dtype = ScalarType::Float64;
    EXPECT_NE(plan.supports(q).find("float32"), std::string::npos) << plan.supports(q);
    EXPECT_THROW(gemm_epilogue(q, plan), NotImplementedError);
  }
  auto expect_reason = [&](const EpiloguePlan& plan, const std::string& word) {
    const std::string why = plan.supports(o.p);
    EXPECT_NE(why.find(word), std::string::npos) << why;
    try {
      gemm_epilogue(o.p, plan);
      ADD_FAILURE() << "expected NotImplementedError";
    } catch (const NotImplementedError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  {
    EpiloguePlan plan(4, 5);
    plan.store(plan.cast(plan.accumulator(), ScalarType::Int32), d.data(), 5, 1);
    expect_reason(plan, "casts to int32");
  }
  {
    EpiloguePlan plan(4, 5);
    plan.store(plan.add(plan.accumulator(), plan.row_vector(dv.data(), ScalarType::Float64)),
               d.data(), 5, 1);
    expect_reason(plan, "reads float64");
  }
  {
    EpiloguePlan plan(4, 5);
    plan.store(plan.accumulator(), dv.data(), 5, 1, ScalarType::Float64);
    expect_reason(plan, "writes float64");
  }
  {
    EpiloguePlan plan(4, 5);
    Node x = plan.accumulator();
    for (int i = 0; i < 70; ++i) x = plan.unary(EpilogueOp::Relu, x);
    plan.store(x, d.data(), 5, 1);
    expect_reason(plan, "at most 64");
  }
}

// Bad input: the message names the method or op, the argument, expected and given.
TEST(GemmEpilogue, ErrorsNameArgumentExpectedAndGiven) {
  auto expect_error = [](const std::function<void()>& f, const std::vector<std::string>& words) {
    try {
      f();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      for (const auto& w : words)
        EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  };
  std::vector<float> d(64), v(16);
  expect_error([] { EpiloguePlan(-1, 2); }, {"EpiloguePlan", "m=-1"});
  expect_error(
      [] {
        EpiloguePlan plan(2, 2);
        plan.unary(EpilogueOp::Relu, 3);
      },
      {"unary", "'x'", "[0, 0)", "got 3"});
  expect_error(
      [] {
        EpiloguePlan plan(2, 2);
        plan.unary(EpilogueOp::Add, plan.accumulator());
      },
      {"unary", "'op'", "unary op", "add"});
  expect_error(
      [] {
        EpiloguePlan plan(2, 2);
        plan.clamp(plan.accumulator(), 1, 0);
      },
      {"clamp", "'lo'", "1 > 0"});
  expect_error(
      [] {
        EpiloguePlan plan(2, 2);
        plan.row_vector(nullptr);
      },
      {"row_vector", "'v'", "null"});
  expect_error(
      [&] {
        EpiloguePlan plan(2, 2);
        plan.store(plan.accumulator(), d.data(), 2, 1);
        plan.store(0, d.data() + 1, 2, 1);
      },
      {"store", "'d'", "overlap"});
  expect_error(
      [&] {
        EpiloguePlan plan(2, 2);
        plan.store(plan.accumulator(), d.data(), 1, 1);
      },
      {"store", "'d'", "non-overlapping", "(1, 1)"});
  expect_error(
      [&] {
        EpiloguePlan plan(2, 2);
        const Node b = plan.row_vector(v.data());
        plan.store(plan.add(0, b), v.data(), 2, 1);
      },
      {"store", "'d'", "inputs", "row_vector"});
  Operands o(4, 5, 6, Layout::RowMajor, Layout::RowMajor, 1);
  expect_error(
      [&] {
        EpiloguePlan plan(5, 4);
        plan.store(plan.accumulator(), d.data(), 4, 1);
        gemm_epilogue(o.p, plan);
      },
      {"gemm_epilogue", "'plan'", "4x5", "5x4"});
  expect_error(
      [&] {
        EpiloguePlan plan(4, 5);
        plan.accumulator();
        gemm_epilogue(o.p, plan);
      },
      {"gemm_epilogue", "'plan'", "store or reduction", "none"});
  expect_error(
      [&] {
        EpiloguePlan plan(4, 5);
        plan.store(plan.accumulator(), const_cast<float*>(o.a.data()), 6, 1);
        gemm_epilogue(o.p, plan);
      },
      {"gemm_epilogue", "node 0", "apart from a, b"});
}

}  // namespace
}  // namespace tessera::gemm::testing
