// bfloat16/float16 mm, bmm and addmm on the GEMM engine's low-precision path: the operands'
// own strides (transposed and sliced views need no copies), float32 accumulation, output in
// the input dtype rounded once, as PyTorch does.
#include "ops/blas_lowp.h"

#include "ops/blas_output.h"

#include "core/tensor_make.h"
#include "gemm/lowp.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/pointwise.h"

namespace tessera {

namespace {

// C (2-D, dtype of a) = alpha * a @ b + beta * C.
gemm::LowpProblem lowp_problem(const Tensor& a, const Tensor& b, const Tensor& c, double alpha,
                               double beta) {
  gemm::LowpProblem p;
  p.m = c.size(0), p.n = c.size(1), p.k = a.size(1);
  p.a = {a.dtype(), a.data_ptr(), a.stride(0), a.stride(1)};
  p.b = {b.dtype(), b.data_ptr(), b.stride(0), b.stride(1)};
  p.c_dtype = c.dtype();
  p.c = c.data_ptr(), p.c_rs = c.stride(0), p.c_cs = c.stride(1);
  p.alpha = static_cast<float>(alpha), p.beta = static_cast<float>(beta);
  return p;
}

// Below this many multiply-adds per problem, a batch is split across threads by problem.
constexpr double kSmallProblem = double(int64_t{1} << 25);

}  // namespace

bool is_lowp_mm_dtype(ScalarType t) {
  return t == kBFloat16 || t == kFloat16;
}

Tensor bmm_lowp(const Tensor& a, const Tensor& b, std::string_view op) {
  const int64_t nb = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  Tensor c = make_empty({nb, m, n}, a.dtype(), op);
  auto one = [&](int64_t i) {
    gemm::gemm_lowp(lowp_problem(a.select(0, i), b.select(0, i), c.select(0, i), 1, 0), nullptr,
                    op);
  };
  if (nb > 1 && double(m) * double(n) * double(k) < kSmallProblem) {
    parallel_tasks(nb, one);
  } else {
    for (int64_t i = 0; i < nb; ++i) one(i);
  }
  return c;
}

Tensor addmm_lowp(const Tensor& self, const Tensor& a, const Tensor& b, double beta, double alpha) {
  TS_CHECK(a.size(1) == b.size(0), RuntimeError,
           "addmm(): argument 'mat2' expected {} rows to match mat1 [{}, {}], but got [{}, {}]",
           a.size(1), a.size(0), a.size(1), b.size(0), b.size(1));
  TS_CHECK(a.dtype() == b.dtype(), TypeError,
           "addmm(): argument 'mat2' expected dtype {} (as mat1), but got {}", a.dtype(),
           b.dtype());
  Tensor out = addmm_output(self, {a.size(0), b.size(1)}, a.dtype(), beta, "addmm");
  gemm::gemm_lowp(lowp_problem(a, b, out, alpha, beta), nullptr, "addmm");
  return out;
}

}  // namespace tessera
