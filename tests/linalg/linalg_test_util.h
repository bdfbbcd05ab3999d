// Helpers for the linalg tests: LAPACK (Debian's OpenBLAS) as an outside oracle, seeded test
// matrices (random, ill-conditioned, diagonal, identity, zero, Hermitian positive-definite),
// and residuals computed in long double so that the check itself adds no rounding that matters.
#pragma once

#include <gtest/gtest.h>
#include <functional>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "linalg/kernels.h"
#include "tessera/tessera.h"

// ---- LAPACK / BLAS (Fortran symbols exported by OpenBLAS; column-major) -------------------------
extern "C" {
void spotrf_(const char*, const int*, float*, const int*, int*);
void dpotrf_(const char*, const int*, double*, const int*, int*);
void cpotrf_(const char*, const int*, std::complex<float>*, const int*, int*);
void zpotrf_(const char*, const int*, std::complex<double>*, const int*, int*);
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void cgetrf_(const int*, const int*, std::complex<float>*, const int*, int*, int*);
void zgetrf_(const int*, const int*, std::complex<double>*, const int*, int*, int*);
void openblas_set_num_threads(int);
}

namespace tessera::linalg_test {

using linalg::detail::real_t;

// LAPACK works on copies that have slack after them. Debian 12's OpenBLAS (0.3.21) was built
// with gcc 12, whose vectorizer turned the strided-x gather in the x86-64 ?gemv_n kernels (and
// ?dot) into loads that reach past the vector's last element (OpenBLAS issue 4013, fixed in
// 0.3.23). LAPACK hands rows of the matrix to gemv as such vectors (zlarz under zgelsy, ?larf
// under ?gelqf and ?gebrd), so an oracle matrix that ended at the top of the heap made the test
// segfault about once in a hundred runs. Four spare columns cover a read a stride or more past
// any row. The values are copied back when the copy goes out of scope.
inline size_t lapack_slack(int64_t rows) {
  return static_cast<size_t>(4 * rows + 16);
}
template <class T>
class LapackCopy {
 public:
  // The rows x cols column-major matrix at `a` (leading dimension rows).
  LapackCopy(T* a, int64_t rows, int64_t cols)
      : a_(a), count_(rows * cols), buffer_(static_cast<size_t>(count_) + lapack_slack(rows)) {
    std::copy(a, a + count_, buffer_.begin());
  }
  LapackCopy(const LapackCopy&) = delete;
  LapackCopy& operator=(const LapackCopy&) = delete;
  ~LapackCopy() { std::copy(buffer_.begin(), buffer_.begin() + count_, a_); }
  T* data() { return buffer_.data(); }

 private:
  T* a_;
  int64_t count_;
  std::vector<T> buffer_;
};

// Column-major LAPACK on row-major data: the tests transpose before and after.
template <class T>
int lapack_potrf_lower_colmajor(int n, T* a_in) {
  int info = 0;
  const int lda = std::max(1, n);
  LapackCopy<T> copy(a_in, n, n);
  T* a = copy.data();
  if constexpr (std::is_same_v<T, float>) spotrf_("L", &n, a, &lda, &info);
  if constexpr (std::is_same_v<T, double>) dpotrf_("L", &n, a, &lda, &info);
  if constexpr (std::is_same_v<T, complex64>) cpotrf_("L", &n, a, &lda, &info);
  if constexpr (std::is_same_v<T, complex128>) zpotrf_("L", &n, a, &lda, &info);
  return info;
}
template <class T>
int lapack_getrf_colmajor(int m, int n, T* a_in, int* ipiv) {
  int info = 0;
  const int lda = std::max(1, m);
  LapackCopy<T> copy(a_in, m, n);
  T* a = copy.data();
  if constexpr (std::is_same_v<T, float>) sgetrf_(&m, &n, a, &lda, ipiv, &info);
  if constexpr (std::is_same_v<T, double>) dgetrf_(&m, &n, a, &lda, ipiv, &info);
  if constexpr (std::is_same_v<T, complex64>) cgetrf_(&m, &n, a, &lda, ipiv, &info);
  if constexpr (std::is_same_v<T, complex128>) zgetrf_(&m, &n, a, &lda, ipiv, &info);
  return info;
}

// Row-major m x n <-> column-major.
template <class T>
std::vector<T> transposed(const std::vector<T>& a, int64_t rows, int64_t cols) {
  std::vector<T> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

// ---- long double matrices for residuals ---------------------------------------------------------

using CLD = std::complex<long double>;
struct LMat {
  int64_t rows = 0, cols = 0;
  std::vector<CLD> v;
  LMat(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c)) {}
  CLD& operator()(int64_t i, int64_t j) { return v[i * cols + j]; }
  CLD operator()(int64_t i, int64_t j) const { return v[i * cols + j]; }
};

// One matrix (2-D tensor, any dtype and strides).
inline LMat to_lmat(const Tensor& t) {
  const Tensor c = t.to(kComplex128).contiguous();
  LMat m(t.size(0), t.size(1));
  const complex128* p = c.data_ptr<complex128>();
  for (size_t i = 0; i < m.v.size(); ++i) m.v[i] = CLD(p[i].real(), p[i].imag());
  return m;
}
inline LMat matmul(const LMat& a, const LMat& b) {
  LMat c(a.rows, b.cols);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t p = 0; p < a.cols; ++p)
      for (int64_t j = 0; j < b.cols; ++j) c(i, j) += a(i, p) * b(p, j);
  return c;
}
inline LMat adjoint(const LMat& a) {
  LMat c(a.cols, a.rows);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < a.cols; ++j) c(j, i) = std::conj(a(i, j));
  return c;
}
inline long double frob(const LMat& a) {
  long double s = 0;
  for (const CLD& x : a.v) s += std::norm(x);
  return std::sqrt(s);
}
inline long double frob_diff(const LMat& a, const LMat& b) {
  long double s = 0;
  for (size_t i = 0; i < a.v.size(); ++i) s += std::norm(a.v[i] - b.v[i]);
  return std::sqrt(s);
}

// Unit roundoff of a dtype.
inline double eps_of(ScalarType t) {
  return to_real_type(t) == kFloat32 ? std::numeric_limits<float>::epsilon()
                                     : std::numeric_limits<double>::epsilon();
}

// ---- test matrices (seeded; built in float64/complex128, then cast) -----------------------------

enum class Kind { kRandom, kIllConditioned, kDiagonal, kIdentity, kZero };

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kRandom:
      return "random";
    case Kind::kIllConditioned:
      return "ill-conditioned";
    case Kind::kDiagonal:
      return "diagonal";
    case Kind::kIdentity:
      return "identity";
    case Kind::kZero:
      return "zero";
  }
  return "?";
}

// Standard normal values of any linalg dtype (complex: real and imaginary parts each with
// variance 1/2).
// A [batch.., m, n] tensor whose b-th matrix (in row-major batch order) is make(b).
inline Tensor batch_from(DimVector batch, int64_t m, int64_t n, ScalarType dtype,
                         const std::function<Tensor(int64_t)>& make) {
  int64_t count = 1;
  for (int64_t b : batch) count *= b;
  DimVector shape = batch;
  shape.push_back(m), shape.push_back(n);
  Tensor out = empty(shape, dtype);
  Tensor flat = out.reshape({count, m, n});
  for (int64_t b = 0; b < count; ++b) flat.select(0, b).copy_(make(b));
  return out;
}

inline Tensor gaussian(DimVector shape, ScalarType dtype) {
  if (!is_complex(dtype)) return randn(shape, dtype);
  const ScalarType r = to_real_type(dtype);
  return complex(randn(shape, r), randn(shape, r)).mul(std::sqrt(0.5));
}

// A random unitary (orthogonal for real dtypes) n x n matrix: a product of 3 Householder
// reflectors I - 2 v v^H / |v|^2 with Gaussian v.
inline Tensor random_unitary(int64_t n, ScalarType dtype) {
  const ScalarType wide = is_complex(dtype) ? kComplex128 : kFloat64;
  Tensor q = eye(n, n, wide);
  for (int r = 0; r < 3 && n > 0; ++r) {
    const Tensor v = gaussian({n, 1}, wide);
    const Tensor vh = v.transpose(0, 1).conj();
    const double vv = vh.mm(v).real().item<double>();
    q = q.sub(q.mm(v).mm(vh).mul(2.0 / vv));
  }
  return q;
}

// The diagonal matrix with diagonal d (1-D).
inline Tensor diag_matrix(const Tensor& d) {
  const int64_t n = d.size(0);
  return eye(n, n, d.dtype()).mul(d.unsqueeze(0));
}

// [batch.., n, n] of the given kind; ill-conditioned: U diag(s) V^H with s geometric from 1 to
// 1 / cond (cond 1e6 for single precision, 1e12 for double); `hpd` makes it Hermitian
// positive-definite (random: B B^H + n I; ill-conditioned: U diag(s) U^H).
inline Tensor make_matrix(DimVector batch, int64_t n, ScalarType dtype, Kind kind,
                          bool hpd = false) {
  const ScalarType wide = is_complex(dtype) ? kComplex128 : kFloat64;
  const double cond = to_real_type(dtype) == kFloat32 ? 1e6 : 1e12;
  DimVector shape = batch;
  shape.push_back(n), shape.push_back(n);
  int64_t count = 1;
  for (int64_t b : batch) count *= b;
  std::vector<Tensor> mats;
  for (int64_t b = 0; b < count; ++b) {
    Tensor m;
    switch (kind) {
      case Kind::kRandom: {
        m = gaussian({n, n}, wide);
        if (hpd) m = m.mm(m.transpose(0, 1).conj()).add(eye(n, n, wide).mul(double(n)));
        break;
      }
      case Kind::kIllConditioned: {
        std::vector<double> s(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          s[i] = n > 1 ? std::pow(cond, -double(i) / double(n - 1)) : 1.0;
        const Tensor d = diag_matrix(tensor<double>(s).to(wide));
        const Tensor u = random_unitary(n, dtype);
        const Tensor v = hpd ? u : random_unitary(n, dtype);
        m = u.mm(d).mm(v.transpose(0, 1).conj());
        if (hpd) m = m.add(m.transpose(0, 1).conj()).mul(0.5);  // exactly Hermitian
        break;
      }
      case Kind::kDiagonal: {
        const Tensor d = rand({n}, kFloat64).add(0.5);
        m = diag_matrix(d.to(wide));
        if (!hpd) m = m.mul(randn({n, 1}, kFloat64).sign().to(wide));
        break;
      }
      case Kind::kIdentity:
        m = eye(n, n, wide);
        break;
      case Kind::kZero:
        m = zeros({n, n}, wide);
        break;
    }
    mats.push_back(m);
  }
  Tensor out = empty(shape, dtype);
  Tensor flat = out.reshape({count, n, n});
  for (int64_t b = 0; b < count; ++b) flat.select(0, b).copy_(mats[b]);
  return out;
}

}  // namespace tessera::linalg_test
