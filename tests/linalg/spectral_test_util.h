// Helpers for the eigh / svd tests: LAPACK's ?syevd/?heevd and ?gesdd as the outside oracle
// (values only), the matrix kinds that matter for spectral methods (rank-deficient, graded,
// rectangular), and residual ratios in units of n eps.
#pragma once

#include <algorithm>
#include <vector>

#include "linalg/spectral.h"
#include "linalg_test_util.h"

extern "C" {
void ssyevd_(const char*, const char*, const int*, float*, const int*, float*, float*, const int*,
             int*, const int*, int*);
void dsyevd_(const char*, const char*, const int*, double*, const int*, double*, double*,
             const int*, int*, const int*, int*);
void cheevd_(const char*, const char*, const int*, std::complex<float>*, const int*, float*,
             std::complex<float>*, const int*, float*, const int*, int*, const int*, int*);
void zheevd_(const char*, const char*, const int*, std::complex<double>*, const int*, double*,
             std::complex<double>*, const int*, double*, const int*, int*, const int*, int*);
void sgesdd_(const char*, const int*, const int*, float*, const int*, float*, float*, const int*,
             float*, const int*, float*, const int*, int*, int*);
void dgesdd_(const char*, const int*, const int*, double*, const int*, double*, double*, const int*,
             double*, const int*, double*, const int*, int*, int*);
void cgesdd_(const char*, const int*, const int*, std::complex<float>*, const int*, float*,
             std::complex<float>*, const int*, std::complex<float>*, const int*,
             std::complex<float>*, const int*, float*, int*, int*);
void zgesdd_(const char*, const int*, const int*, std::complex<double>*, const int*, double*,
             std::complex<double>*, const int*, std::complex<double>*, const int*,
             std::complex<double>*, const int*, double*, int*, int*);
}

namespace tessera::linalg_test {

// Eigenvalues (ascending) of the Hermitian n x n matrix a by LAPACK's ?syevd / ?heevd (jobz N).
template <class T>
std::vector<real_t<T>> lapack_eigvalsh(int n, std::vector<T> a) {
  using R = real_t<T>;
  std::vector<R> w(static_cast<size_t>(std::max(n, 1)));
  const int lda = std::max(n, 1);
  int info = 0;
  a.resize(a.size() + lapack_slack(lda));  // see LapackCopy
  const int lwork = 2 * n + n * n + 64, liwork = 5 * n + 8, lrwork = 2 * n * n + 5 * n + 8;
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<R> rwork(static_cast<size_t>(lrwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  // Row-major Hermitian data read as column-major is conj(A): the same eigenvalues.
  if constexpr (std::is_same_v<T, float>)
    ssyevd_("N", "L", &n, a.data(), &lda, w.data(), work.data(), &lwork, iwork.data(), &liwork,
            &info);
  if constexpr (std::is_same_v<T, double>)
    dsyevd_("N", "L", &n, a.data(), &lda, w.data(), work.data(), &lwork, iwork.data(), &liwork,
            &info);
  if constexpr (std::is_same_v<T, complex64>)
    cheevd_("N", "L", &n, a.data(), &lda, w.data(), work.data(), &lwork, rwork.data(), &lrwork,
            iwork.data(), &liwork, &info);
  if constexpr (std::is_same_v<T, complex128>)
    zheevd_("N", "L", &n, a.data(), &lda, w.data(), work.data(), &lwork, rwork.data(), &lrwork,
            iwork.data(), &liwork, &info);
  EXPECT_EQ(info, 0);
  w.resize(static_cast<size_t>(n));
  return w;
}

// Singular values (descending) of the row-major m x n matrix a by LAPACK's ?gesdd (jobz N).
template <class T>
std::vector<real_t<T>> lapack_svdvals(int m, int n, std::vector<T> a) {
  using R = real_t<T>;
  // Row-major m x n is column-major n x m (A^T): the same singular values.
  const int rows = n, cols = m, lda = std::max(rows, 1), k = std::min(m, n);
  std::vector<R> s(static_cast<size_t>(std::max(k, 1)));
  const int lwork = 8 * std::max(m, n) * (k + 1) + 64;
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<R> rwork(static_cast<size_t>(7 * k + 8));
  std::vector<int> iwork(static_cast<size_t>(8 * k + 8));
  int info = 0, one = 1;
  T dummy{};
  a.resize(a.size() + lapack_slack(lda));  // see LapackCopy
  if constexpr (std::is_same_v<T, float>)
    sgesdd_("N", &rows, &cols, a.data(), &lda, s.data(), &dummy, &one, &dummy, &one, work.data(),
            &lwork, iwork.data(), &info);
  if constexpr (std::is_same_v<T, double>)
    dgesdd_("N", &rows, &cols, a.data(), &lda, s.data(), &dummy, &one, &dummy, &one, work.data(),
            &lwork, iwork.data(), &info);
  if constexpr (std::is_same_v<T, complex64>)
    cgesdd_("N", &rows, &cols, a.data(), &lda, s.data(), &dummy, &one, &dummy, &one, work.data(),
            &lwork, rwork.data(), iwork.data(), &info);
  if constexpr (std::is_same_v<T, complex128>)
    zgesdd_("N", &rows, &cols, a.data(), &lda, s.data(), &dummy, &one, &dummy, &one, work.data(),
            &lwork, rwork.data(), iwork.data(), &info);
  EXPECT_EQ(info, 0);
  s.resize(static_cast<size_t>(k));
  return s;
}

enum class SKind { kRandom, kIllConditioned, kRankDeficient, kZero, kIdentity, kDiagonal, kGraded };

inline const char* skind_name(SKind k) {
  switch (k) {
    case SKind::kRandom:
      return "random";
    case SKind::kIllConditioned:
      return "ill-conditioned";
    case SKind::kRankDeficient:
      return "rank-deficient";
    case SKind::kZero:
      return "zero";
    case SKind::kIdentity:
      return "identity";
    case SKind::kDiagonal:
      return "diagonal";
    case SKind::kGraded:
      return "graded";
  }
  return "?";
}
inline constexpr SKind kAllKinds[] = {SKind::kRandom, SKind::kIllConditioned, SKind::kRankDeficient,
                                      SKind::kZero,   SKind::kIdentity,       SKind::kDiagonal,
                                      SKind::kGraded};

// One m x n matrix (2-D, dtype) of the kind; `hermitian` makes it Hermitian (m == n):
// ill-conditioned U diag(s) U^H with s from 1 to 1/cond alternating in sign, rank-deficient
// B B^H with B n x n/2, graded D H D with D = diag(10^(-6 i / (n - 1))) and H positive definite.
// Rectangular graded: G D, columns scaled by D.
inline Tensor spectral_matrix(int64_t m, int64_t n, ScalarType dtype, SKind kind,
                              bool hermitian = false) {
  const ScalarType wide = is_complex(dtype) ? kComplex128 : kFloat64;
  const int64_t k = std::min(m, n);
  const double cond = to_real_type(dtype) == kFloat32 ? 1e6 : 1e12;
  Tensor a;
  switch (kind) {
    case SKind::kRandom: {
      a = gaussian({m, n}, wide);
      if (hermitian) a = a.add(a.transpose(0, 1).conj()).mul(0.5);
      break;
    }
    case SKind::kIllConditioned: {
      std::vector<double> s(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) {
        s[i] = k > 1 ? std::pow(cond, -double(i) / double(k - 1)) : 1.0;
        if (hermitian && i % 2) s[i] = -s[i];
      }
      const Tensor u = random_unitary(m, dtype).narrow(1, 0, k);
      const Tensor v = hermitian ? u : random_unitary(n, dtype).narrow(1, 0, k);
      a = u.mul(tensor<double>(s).to(wide).unsqueeze(0)).mm(v.transpose(0, 1).conj());
      if (hermitian) a = a.add(a.transpose(0, 1).conj()).mul(0.5);
      break;
    }
    case SKind::kRankDeficient: {
      const int64_t r = std::max<int64_t>(1, k / 2);
      const Tensor b = gaussian({m, r}, wide);
      a = hermitian ? b.mm(b.transpose(0, 1).conj()) : b.mm(gaussian({r, n}, wide));
      break;
    }
    case SKind::kZero:
      a = zeros({m, n}, wide);
      break;
    case SKind::kIdentity:
      a = eye(m, n, wide);
      break;
    case SKind::kDiagonal: {
      a = eye(m, n, wide).mul(randn({1, n}, kFloat64).to(wide));
      break;
    }
    case SKind::kGraded: {
      std::vector<double> d(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) d[i] = std::pow(10.0, n > 1 ? -6.0 * i / double(n - 1) : 0);
      const Tensor dv = tensor<double>(d).to(wide);
      if (hermitian) {
        const Tensor g = gaussian({n, n}, wide);
        const Tensor h = g.mm(g.transpose(0, 1).conj()).add(eye(n, n, wide).mul(double(n)));
        a = h.mul(dv.unsqueeze(0)).mul(dv.unsqueeze(1));
        a = a.add(a.transpose(0, 1).conj()).mul(0.5);
      } else {
        a = gaussian({m, n}, wide).mul(dv.unsqueeze(0));
      }
      break;
    }
  }
  // Exactly Hermitian (both triangles, real diagonal) after the products above.
  if (hermitian) a = a.add(a.transpose(0, 1).conj()).mul(0.5);
  return a.to(dtype);
}

// Raw row-major copy of a 2-D tensor.
template <class T>
std::vector<T> to_vector(const Tensor& t) {
  const Tensor c = t.contiguous();
  const T* p = static_cast<const T*>(c.data_ptr());
  return std::vector<T>(p, p + c.numel());
}

// ||U^H U - I||_F for the columns of u (2-D).
inline long double orthogonality_error(const Tensor& u) {
  const LMat U = to_lmat(u);
  const LMat g = matmul(adjoint(U), U);
  long double s = 0;
  for (int64_t i = 0; i < g.rows; ++i)
    for (int64_t j = 0; j < g.cols; ++j) s += std::norm(g(i, j) - CLD(i == j ? 1 : 0));
  return std::sqrt(s);
}

}  // namespace tessera::linalg_test
