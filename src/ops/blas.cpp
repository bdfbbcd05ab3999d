// Matrix products through OpenBLAS (float32, float64, complex64, complex128; float16 and
// bfloat16 through float32) and a plain loop for integers. OpenBLAS runs single-threaded:
// Tessera's pool splits batches. The GEMM engine will replace this file's BLAS calls.
#include "tessera/ops/blas.h"

#include <cblas.h>

#include <mutex>

#include "core/dtype_dispatch.h"
#include "core/tensor_make.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

void openblas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// A matrix view usable by BLAS: row-major with leading dimension ld, possibly transposed.
struct BlasMatrix {
  Tensor t;  // keeps the data alive
  bool trans = false;
  int64_t ld = 0;
};

BlasMatrix as_blas(const Tensor& m) {
  const int64_t r = m.size(0), c = m.size(1);
  const int64_t s0 = m.stride(0), s1 = m.stride(1);
  if ((s1 == 1 || c == 1) && s0 >= std::max<int64_t>(c, 1))
    return {m, false, std::max<int64_t>(s0, c)};
  if ((s0 == 1 || r == 1) && s1 >= std::max<int64_t>(r, 1))
    return {m, true, std::max<int64_t>(s1, r)};
  Tensor cm = m.contiguous();
  return {cm, false, std::max<int64_t>(c, 1)};
}

// C[m, n] = A[m, k] @ B[k, n] for 2-D tensors of the same BLAS dtype; C is contiguous.
void gemm_2d(const Tensor& a, const Tensor& b, const Tensor& c) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    c.zero_();
    return;
  }
  const BlasMatrix A = as_blas(a), B = as_blas(b);
  const auto ta = A.trans ? CblasTrans : CblasNoTrans, tb = B.trans ? CblasTrans : CblasNoTrans;
  const ScalarType t = c.dtype();
  if (t == kFloat32) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, A.t.data_ptr<float>(), A.ld,
                B.t.data_ptr<float>(), B.ld, 0.0f, c.data_ptr<float>(), n);
  } else if (t == kFloat64) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, A.t.data_ptr<double>(), A.ld,
                B.t.data_ptr<double>(), B.ld, 0.0, c.data_ptr<double>(), n);
  } else if (t == kComplex64) {
    const complex64 one(1), zero(0);
    cblas_cgemm(CblasRowMajor, ta, tb, m, n, k, &one, A.t.data_ptr(), A.ld, B.t.data_ptr(), B.ld,
                &zero, c.data_ptr(), n);
  } else if (t == kComplex128) {
    const complex128 one(1), zero(0);
    cblas_zgemm(CblasRowMajor, ta, tb, m, n, k, &one, A.t.data_ptr(), A.ld, B.t.data_ptr(), B.ld,
                &zero, c.data_ptr(), n);
  } else {
    visit_dtype<kIntegralTypes>(t, "mm", [&]<class T>() {
      Tensor ac = a.contiguous(), bc = b.contiguous();
      const T* ap = ac.data_ptr<T>();
      const T* bp = bc.data_ptr<T>();
      T* cp = c.data_ptr<T>();
      using U = std::make_unsigned_t<T>;  // wrapping arithmetic, as PyTorch on x86
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          U acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += static_cast<U>(ap[i * k + p]) * static_cast<U>(bp[p * n + j]);
          cp[i * n + j] = static_cast<T>(acc);
        }
    });
  }
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

// [B, m, k] x [B, k, n] -> [B, m, n], batches split across the pool.
Tensor batched(const Tensor& a, const Tensor& b, std::string_view op) {
  const ScalarType ct = compute_dtype(a.dtype());
  Tensor ac = a.to(ct), bc = b.to(ct);
  const int64_t nb = a.size(0);
  Tensor c = make_empty({nb, a.size(1), b.size(2)}, ct, op);
  openblas_single_threaded();
  parallel_for(0, nb, 1, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) gemm_2d(ac.select(0, i), bc.select(0, i), c.select(0, i));
  });
  return c.to(a.dtype());
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() == 2, RuntimeError, "mm(): self must be a matrix, but got {}-D", a.dim());
  TS_CHECK(b.dim() == 2, RuntimeError, "mm(): mat2 must be a matrix, but got {}-D", b.dim());
  TS_CHECK(a.size(1) == b.size(0), RuntimeError,
           "mm(): mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", a.size(0),
           a.size(1), b.size(0), b.size(1));
  check_mm_dtypes("mm", a, b);
  return batched(a.unsqueeze(0), b.unsqueeze(0), "mm").squeeze(0);
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
  return batched(a, b, "bmm");
}

Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
             const Scalar& alpha) {
  Tensor prod = mm(a, b);
  TS_CHECK(self.dtype() == prod.dtype(), TypeError,
           "addmm(): expected self and mat1 to have the same dtype, but got {} != {}", self.dtype(),
           prod.dtype());
  broadcast_shapes(self.sizes(), prod.sizes(), "addmm");
  if (beta.to_double() == 0 && !beta.is_complex()) return prod.mul(alpha).add(zeros_like(prod));
  return add(self.mul(beta), prod.mul(alpha));
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.dim() > 0 && b.dim() > 0, RuntimeError,
           "matmul(): both arguments need to be at least 1D, but they are {}D and {}D", a.dim(),
           b.dim());
  if (a.dim() == 1 && b.dim() == 1) return dot(a, b);
  if (a.dim() == 2 && b.dim() == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (a.dim() == 1 && b.dim() == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);
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
