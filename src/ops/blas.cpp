// Matrix products. float32, float64, complex64 and complex128 (bfloat16/float16:
// src/ops/blas_lowp.cpp) run on Tessera's GEMM engine (src/gemm) with the operands' own
// strides: transposed and sliced views need no copies, and the engine threads on Tessera's
// pool. Integers run a plain loop.
#include "tessera/ops/blas.h"

#include "autograd/record.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_make.h"
#include "gemm/gemm.h"
#include "gemm/gemv.h"
#include "ops/blas_lowp.h"
#include "ops/blas_output.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

// A GEMM problem over 2-D strided views: C = alpha * A @ B + beta * C.
gemm::GemmProblem engine_problem(const Tensor& a, const Tensor& b, const Tensor& c, double alpha,
                                 double beta) {
  gemm::GemmProblem p;
  p.dtype = c.dtype();
  p.m = c.size(0), p.n = c.size(1), p.k = a.size(1);
  p.a = a.data_ptr(), p.a_rs = a.stride(0), p.a_cs = a.stride(1);
  p.b = b.data_ptr(), p.b_rs = b.stride(0), p.b_cs = b.stride(1);
  p.c = c.data_ptr(), p.c_rs = c.stride(0), p.c_cs = c.stride(1);
  p.alpha = alpha, p.beta = beta;
  return p;
}

// Integer products (PyTorch computes them too): a plain loop with wrapping arithmetic, as
// PyTorch on x86. C[m, n] = A[m, k] @ B[k, n] for 2-D tensors of the same dtype; C contiguous.
void integer_mm_2d(const Tensor& a, const Tensor& b, const Tensor& c) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0) return;
  visit_dtype<kIntegralTypes>(c.dtype(), "mm", [&]<class T>() {
    Tensor ac = a.contiguous(), bc = b.contiguous();
    const T* ap = ac.data_ptr<T>();
    const T* bp = bc.data_ptr<T>();
    T* cp = c.data_ptr<T>();
    using U = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        U acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += static_cast<U>(ap[i * k + p]) * static_cast<U>(bp[p * n + j]);
        cp[i * n + j] = static_cast<T>(acc);
      }
  });
}

// The conjugate transpose of the last two dims (the plain transpose for real tensors): what
// the gradient of a product multiplies by.
Tensor adjoint(const Tensor& t) {
  const Tensor tt = t.transpose(-2, -1);
  return t.is_complex() ? tt.conj() : tt;
}

// d(a @ b): g @ b^H and a^H @ g (batched: per matrix).
void record_product(autograd::Recorder& rec, const char* name, const Tensor& a, const Tensor& b,
                    const Tensor& out, bool batched) {
  rec.finish(name, {out},
             [sa = rec.save(a), sb = rec.save(b), batched](const autograd::tensor_list& g,
                                                           const autograd::Node& n) {
               const Tensor bh = adjoint(sb.unpack(n)), ah = adjoint(sa.unpack(n));
               return autograd::tensor_list{batched ? g[0].bmm(bh) : g[0].mm(bh),
                                            batched ? ah.bmm(g[0]) : ah.mm(g[0])};
             });
}

void check_mm_dtypes(std::string_view op, const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dtype() == b.dtype(), TypeError,
           "{}(): expected m1 and m2 to have the same dtype, but got: {} != {}", op, a.dtype(),
           b.dtype());
  TS_CHECK(a.dtype() != kBool && !is_float8(a.dtype()) && !is_packed(a.dtype()), TypeError,
           "{}(): dtype {} is not supported", op, a.dtype());
}

// The dtype BLAS computes in for a given input dtype.
ScalarType compute_dtype(ScalarType t) {
  return (t == kFloat16 || t == kBFloat16) ? kFloat32 : t;
}

// bfloat16/float16 products with few rows (or columns) of output (gemm::gemv_pays), on the GEMV
// path with the big operand read in its own dtype (no float32 copy of the weight): per batch, the
// rows of the small operand are the activation vectors. Returns C in float32.
Tensor batched_gemv(const Tensor& a, const Tensor& b, std::string_view op) {
  const int64_t nb = a.size(0), m = a.size(1), n = b.size(2);
  Tensor c = make_empty({nb, m, n}, kFloat32, op);
  const bool rows = m <= n;  // activations are the rows of a
  gemm::WeightFormat format;
  gemm::weight_format_of(a.dtype(), &format);
  // float16 activations are converted (they are the small operand); bfloat16 ones are read.
  Tensor x = rows ? a : b;
  if (x.dtype() == kFloat16) x = x.to(kFloat32);
  const Tensor& w = rows ? b : a;
  for (int64_t i = 0; i < nb; ++i) {
    gemm::GemvProblem p;
    p.format = format;
    p.x_dtype = x.dtype();
    p.k = a.size(2);
    p.y = c.data_ptr<float>() + i * m * n;
    if (rows) {
      p.n = n, p.nx = m;
      p.w = static_cast<const char*>(w.data_ptr()) + i * w.stride(0) * element_size(w.dtype());
      p.w_rs = w.stride(2), p.w_cs = w.stride(1);
      p.x = static_cast<const char*>(x.data_ptr()) + i * x.stride(0) * element_size(x.dtype());
      p.x_ld = x.stride(1), p.x_inc = x.stride(2);
      p.y_ld = n, p.y_inc = 1;
    } else {
      p.n = m, p.nx = n;
      p.w = static_cast<const char*>(w.data_ptr()) + i * w.stride(0) * element_size(w.dtype());
      p.w_rs = w.stride(1), p.w_cs = w.stride(2);
      p.x = static_cast<const char*>(x.data_ptr()) + i * x.stride(0) * element_size(x.dtype());
      p.x_ld = x.stride(2), p.x_inc = x.stride(1);
      p.y_ld = 1, p.y_inc = n;
    }
    gemm::gemv(p, nullptr, op);
  }
  return c;
}

// [B, m, k] x [B, k, n] -> [B, m, n]. The engine splits small batches by batch and large
// problems within each; the integer loop splits batches across the pool.
Tensor batched(const Tensor& a, const Tensor& b, std::string_view op) {
  // bfloat16/float16: a few rows or columns are a bandwidth problem (GEMV reads the weight in
  // its own dtype); the rest runs the low-precision GEMM.
  const int64_t m = a.size(1), n = b.size(2);
  if ((a.dtype() == kBFloat16 || a.dtype() == kFloat16) &&
      gemm::gemv_pays(std::min(m, n), std::max(m, n)))
    return batched_gemv(a, b, op).to(a.dtype());
  if (is_lowp_mm_dtype(a.dtype())) return bmm_lowp(a, b, op);
  const ScalarType ct = compute_dtype(a.dtype());
  Tensor ac = a.to(ct), bc = b.to(ct);
  const int64_t nb = a.size(0);
  Tensor c = make_empty({nb, a.size(1), b.size(2)}, ct, op);
  if (gemm::gemm_supports(ct)) {
    if (nb == 0) return c.to(a.dtype());
    const gemm::GemmProblem p =
        engine_problem(ac.select(0, 0), bc.select(0, 0), c.select(0, 0), 1, 0);
    gemm::gemm_strided_batched(p, nb, ac.stride(0), bc.stride(0), c.stride(0), nullptr, op);
    return c.to(a.dtype());
  }
  parallel_for(0, nb, 1, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) integer_mm_2d(ac.select(0, i), bc.select(0, i), c.select(0, i));
  });
  return c.to(a.dtype());
}

// [m, k] x [k, n] -> [m, n]: dtypes the engine runs as they are go to it in one call, without
// the batch views (select, unsqueeze, squeeze), which with their allocations were most of a
// small product's eager time (8x8: ~1.5 us, the product ~50 ns); the rest as a batch of one.
Tensor product_2d(const Tensor& a, const Tensor& b, std::string_view op) {
  if (compute_dtype(a.dtype()) != a.dtype() || !gemm::gemm_supports(a.dtype()))
    return batched(a.unsqueeze(0), b.unsqueeze(0), op).squeeze(0);
  Tensor c = make_empty({a.size(0), b.size(1)}, a.dtype(), op);
  gemm::gemm(engine_problem(a, b, c, 1, 0), nullptr, op);
  return c;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() == 2, RuntimeError, "mm(): self must be a matrix, but got {}-D", a.dim());
  TS_CHECK(b.dim() == 2, RuntimeError, "mm(): mat2 must be a matrix, but got {}-D", b.dim());
  TS_CHECK(a.size(1) == b.size(0), RuntimeError,
           "mm(): mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", a.size(0),
           a.size(1), b.size(0), b.size(1));
  check_mm_dtypes("mm", a, b);
  autograd::Recorder rec({a, b});
  Tensor out = product_2d(a, b, "mm");
  if (rec) record_product(rec, "MmBackward0", a, b, out, false);
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() == 3, RuntimeError, "bmm(): batch1 must be a 3D tensor, but got {}-D", a.dim());
  TS_CHECK(b.dim() == 3, RuntimeError, "bmm(): batch2 must be a 3D tensor, but got {}-D", b.dim());
  TS_CHECK(a.size(0) == b.size(0), RuntimeError,
           "bmm(): batch1 and batch2 must have same number of batches, got {} and {}", a.size(0),
           b.size(0));
  TS_CHECK(a.size(2) == b.size(1), RuntimeError,
           "bmm(): expected size for first two dimensions of batch2 tensor to be: [{}, {}] but "
           "got: [{}, {}]",
           a.size(0), a.size(2), b.size(0), b.size(1));
  check_mm_dtypes("bmm", a, b);
  autograd::Recorder rec({a, b});
  Tensor out = batched(a, b, "bmm");
  if (rec) record_product(rec, "BmmBackward0", a, b, out, true);
  return out;
}

namespace {
Tensor addmm_kernel(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                    const Scalar& alpha);
Tensor baddbmm_kernel(const Tensor& self, const Tensor& batch1, const Tensor& batch2,
                      const Scalar& beta, const Scalar& alpha);

// d(beta self + alpha a @ b): self gets beta g (summed over its broadcast), a and b the
// product rule (conjugated scalars and operands for complex).
autograd::FunctionNode::Backward addmm_backward(const Tensor& self, const Tensor& a,
                                                const Tensor& b, const Scalar& beta,
                                                const Scalar& alpha, bool batched) {
  return [self_sizes = self.sizes().vec(), sa = autograd::Recorder::save(a),
          sb = autograd::Recorder::save(b), beta, alpha,
          batched](const autograd::tensor_list& g, const autograd::Node& n) {
    const Scalar cb = beta.is_complex() ? Scalar(std::conj(beta.to_complex())) : beta;
    const Scalar ca = alpha.is_complex() ? Scalar(std::conj(alpha.to_complex())) : alpha;
    const Tensor ga = g[0].mul(ca);
    const Tensor bh = adjoint(sb.unpack(n)), ah = adjoint(sa.unpack(n));
    return autograd::tensor_list{autograd::sum_to(g[0].mul(cb), self_sizes),
                                 batched ? ga.bmm(bh) : ga.mm(bh),
                                 batched ? ah.bmm(ga) : ah.mm(ga)};
  };
}
}  // namespace

Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
             const Scalar& alpha) {
  autograd::Recorder rec({self, a, b});
  Tensor out = addmm_kernel(self, a, b, beta, alpha);
  if (rec) rec.finish("AddmmBackward0", {out}, addmm_backward(self, a, b, beta, alpha, false));
  return out;
}

Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  autograd::Recorder rec({self, batch1, batch2});
  Tensor out = baddbmm_kernel(self, batch1, batch2, beta, alpha);
  if (rec)
    rec.finish("BaddbmmBackward0", {out}, addmm_backward(self, batch1, batch2, beta, alpha, true));
  return out;
}

namespace {
Tensor addmm_kernel(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                    const Scalar& alpha) {
  if (is_lowp_mm_dtype(a.dtype()) && a.dim() == 2 && b.dim() == 2 && self.dtype() == a.dtype() &&
      !beta.is_complex() && !alpha.is_complex())
    return addmm_lowp(self, a, b, beta.to_double(), alpha.to_double());
  if (gemm::gemm_supports(a.dtype()) && a.dim() == 2 && b.dim() == 2 && self.dtype() == a.dtype() &&
      !beta.is_complex() && !alpha.is_complex()) {
    // The engine applies beta and alpha itself: one pass over the output, and beta == 0
    // never reads self (NaN there does not propagate, as in PyTorch).
    TS_CHECK(a.size(1) == b.size(0), RuntimeError,
             "addmm(): mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", a.size(0),
             a.size(1), b.size(0), b.size(1));
    check_mm_dtypes("addmm", a, b);
    const double beta_d = beta.to_double();
    Tensor out = addmm_output(self, {a.size(0), b.size(1)}, a.dtype(), beta_d, "addmm");
    gemm::gemm(engine_problem(a, b, out, alpha.to_double(), beta_d), nullptr, "addmm");
    return out;
  }
  Tensor prod = mm(a, b);
  TS_CHECK(self.dtype() == prod.dtype(), TypeError,
           "addmm(): expected self and mat1 to have the same dtype, but got {} != {}", self.dtype(),
           prod.dtype());
  broadcast_shapes(self.sizes(), prod.sizes(), "addmm");
  if (beta.to_double() == 0 && !beta.is_complex()) return prod.mul(alpha).add(zeros_like(prod));
  return add(self.mul(beta), prod.mul(alpha));
}

Tensor baddbmm_kernel(const Tensor& self, const Tensor& batch1, const Tensor& batch2,
                      const Scalar& beta, const Scalar& alpha) {
  TS_CHECK(batch1.dim() == 3, RuntimeError, "baddbmm(): batch1 must be a 3D tensor, but got {}-D",
           batch1.dim());
  TS_CHECK(batch2.dim() == 3, RuntimeError, "baddbmm(): batch2 must be a 3D tensor, but got {}-D",
           batch2.dim());
  TS_CHECK(batch1.size(0) == batch2.size(0), RuntimeError,
           "baddbmm(): batch1 and batch2 must have the same number of batches, but got {} and {}",
           batch1.size(0), batch2.size(0));
  TS_CHECK(batch1.size(2) == batch2.size(1), RuntimeError,
           "baddbmm(): batch1 and batch2 shapes cannot be multiplied ({}x{}x{} and {}x{}x{})",
           batch1.size(0), batch1.size(1), batch1.size(2), batch2.size(0), batch2.size(1),
           batch2.size(2));
  check_mm_dtypes("baddbmm", batch1, batch2);
  TS_CHECK(self.dtype() == batch1.dtype(), TypeError,
           "baddbmm(): expected self and batch1 to have the same dtype, but got {} != {}",
           self.dtype(), batch1.dtype());
  const int64_t nb = batch1.size(0), m = batch1.size(1), n = batch2.size(2);
  check_addmm_self(self, {nb, m, n}, "baddbmm");
  const bool real_scalars = !beta.is_complex() && !alpha.is_complex();
  const double beta_d = real_scalars ? beta.to_double() : 1;
  if (gemm::gemm_supports(batch1.dtype()) && real_scalars) {
    Tensor out = make_empty({nb, m, n}, batch1.dtype(), "baddbmm");
    if (beta_d != 0) out.copy_(self.expand({nb, m, n}));
    if (nb == 0) return out;
    const gemm::GemmProblem p = engine_problem(batch1.select(0, 0), batch2.select(0, 0),
                                               out.select(0, 0), alpha.to_double(), beta_d);
    gemm::gemm_strided_batched(p, nb, batch1.stride(0), batch2.stride(0), out.stride(0), nullptr,
                               "baddbmm");
    return out;
  }
  // Other dtypes: the product, then the scaled sum (beta == 0 never reads self).
  Tensor prod = bmm(batch1, batch2);
  if (real_scalars && beta_d == 0) return prod.mul(alpha).add(zeros({nb, m, n}, prod.dtype()));
  return add(self.mul(beta), prod.mul(alpha));
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() > 0 && b.dim() > 0, RuntimeError,
           "matmul(): both arguments need to be at least 1D, but they are {}D and {}D", a.dim(),
           b.dim());
  if (a.dim() == 1 && b.dim() == 1) return dot(a, b);
  if (a.dim() == 2 && b.dim() == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (a.dim() == 1 && b.dim() == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);
  // [..., m, k] x [k, n] with a contiguous left side: fold the batch into m, one GEMM (as a
  // Linear layer's input), no copies.
  if (a.dim() >= 3 && b.dim() == 2 && a.is_contiguous()) {
    const int64_t k = a.size(-1);
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < a.dim(); ++d) rows *= a.size(d);
    TS_CHECK(k == b.size(0), RuntimeError,
             "matmul(): shapes cannot be multiplied ({}x{} and {}x{}); a: [{}], b: [{}]", rows, k,
             b.size(0), b.size(1), fmt::join(a.sizes(), ", "), fmt::join(b.sizes(), ", "));
    DimVector os(a.sizes().begin(), a.sizes().end());
    os.back() = b.size(1);
    return mm(a.reshape({rows, k}), b).reshape(os);
  }
  // Batched: broadcast the batch dims, fold them into one, bmm, unfold.
  Tensor x = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor y = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t m = x.size(-2), k = x.size(-1), k2 = y.size(-2), n = y.size(-1);
  TS_CHECK(k == k2, RuntimeError,
           "matmul(): shapes cannot be multiplied ({}x{} and {}x{}); a: [{}], b: [{}]", m, k, k2, n,
           fmt::join(a.sizes(), ", "), fmt::join(b.sizes(), ", "));
  const IntArrayRef xb(x.sizes().data(), x.dim() - 2), yb(y.sizes().data(), y.dim() - 2);
  DimVector batch = broadcast_shapes(xb, yb, "matmul");
  DimVector xs = batch, ys = batch;
  xs.push_back(m), xs.push_back(k);
  ys.push_back(k), ys.push_back(n);
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  Tensor out = bmm(x.expand(xs).reshape({nb, m, k}), y.expand(ys).reshape({nb, k, n}));
  DimVector os = batch;
  if (a.dim() > 1) os.push_back(m);
  if (b.dim() > 1) os.push_back(n);
  return out.reshape(os);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() == 1 && b.dim() == 1, RuntimeError,
           "dot(): 1D tensors expected, but got {}D and {}D tensors", a.dim(), b.dim());
  TS_CHECK(a.size(0) == b.size(0), RuntimeError,
           "dot(): inconsistent tensor size, expected tensor [{}] and src [{}] to have the same "
           "number of elements, but got {} and {} elements respectively",
           a.size(0), b.size(0), a.size(0), b.size(0));
  check_mm_dtypes("dot", a, b);
  return mm(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
}

namespace {
// torch.mv/addmv's checks, with PyTorch's words: self (or a 1-element stand-in for mv) a vector,
// mat a matrix, vec a vector, and their sizes agreeing.
void check_mv(std::string_view op, int64_t self_dim, const Tensor& mat, const Tensor& vec,
              int64_t self_size) {
  TS_CHECK(mat.dim() == 2 && vec.dim() == 1 && self_dim <= 1, RuntimeError,
           "{}(): vector + matrix @ vector expected, got {}, {}, {}", op, self_dim, mat.dim(),
           vec.dim());
  TS_CHECK(mat.size(1) == vec.size(0) && (self_size == 1 || self_size == mat.size(0)), RuntimeError,
           "{}(): size mismatch, got {}, {}x{},{}", op, self_size, mat.size(0), mat.size(1),
           vec.size(0));
  check_mm_dtypes(op, mat, vec);
}
}  // namespace

Tensor mv(const Tensor& mat, const Tensor& vec) {
  check_mv("mv", 1, mat, vec, mat.dim() == 2 ? mat.size(0) : 1);
  return mm(mat, vec.unsqueeze(1)).squeeze(1);
}

Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta,
             const Scalar& alpha) {
  check_mv("addmv", self.dim(), mat, vec, self.dim() == 0 ? 1 : self.size(0));
  const Tensor column = self.dim() == 0 ? self : self.unsqueeze(1);
  return addmm(column, mat, vec.unsqueeze(1), beta, alpha).squeeze(1);
}

Tensor vdot(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() == 1 && b.dim() == 1, RuntimeError,
           "vdot(): 1D tensors expected, but got {}D and {}D tensors", a.dim(), b.dim());
  check_mm_dtypes("vdot", a, b);
  return dot(is_complex(a.dtype()) ? a.conj() : a, b);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() == 1 && b.dim() == 1, RuntimeError,
           "outer(): expected 1D tensors, but got {}D and {}D", a.dim(), b.dim());
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

Tensor Tensor::mm(const Tensor& o) const {
  return tessera::mm(*this, o);
}
Tensor Tensor::bmm(const Tensor& o) const {
  return tessera::bmm(*this, o);
}
Tensor Tensor::matmul(const Tensor& o) const {
  return tessera::matmul(*this, o);
}
Tensor Tensor::dot(const Tensor& o) const {
  return tessera::dot(*this, o);
}
Tensor Tensor::outer(const Tensor& o) const {
  return tessera::outer(*this, o);
}

}  // namespace tessera
