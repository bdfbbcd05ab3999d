// Per-ISA leaves of linalg's recursive algorithms (leaf_kernels.h).
#include "linalg/leaf/leaf_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "linalg/scalar_ops.h"
#include "linalg/small/interleave.h"

namespace tessera::cpu::TS_ISA {
namespace {

using linalg::detail::abs1;
using linalg::detail::fms;
using linalg::detail::maybe_conj;
using linalg::detail::mul;
using linalg::detail::real_t;
using linalg::detail::swap_rows;

// Lower triangle, forward substitution; upper, backward. Row i of the solve:
//   x_i = (b_i - sum_{k on the solved side} A(i, k) x_k) / A(i, i).
template <class T>
void trsm(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs, bool lower, bool conj,
          bool unit, T* b, int64_t b_rs, int64_t b_cs) {
  for (int64_t s = 0; s < n; ++s) {
    const int64_t i = lower ? s : n - 1 - s;
    T* bi = b + i * b_rs;
    const int64_t k0 = lower ? 0 : i + 1, k1 = lower ? i : n;
    for (int64_t k = k0; k < k1; ++k) {
      const T aik = maybe_conj(a[i * a_rs + k * a_cs], conj);
      const T* bk = b + k * b_rs;
      if (b_cs == 1) {
        for (int64_t j = 0; j < nrhs; ++j) bi[j] = fms(bi[j], aik, bk[j]);
      } else {
        for (int64_t j = 0; j < nrhs; ++j) bi[j * b_cs] = fms(bi[j * b_cs], aik, bk[j * b_cs]);
      }
    }
    if (!unit) {
      const T d = maybe_conj(a[i * a_rs + i * a_cs], conj);
      for (int64_t j = 0; j < nrhs; ++j) bi[j * b_cs] /= d;
    }
  }
}

// Scales x[0], x[inc], ... (count values) by 1 / pivot as LAPACK does: multiply by the
// reciprocal unless |pivot| is below the smallest normal number, then divide.
template <class T>
void scale_by_pivot(T* x, int64_t inc, int64_t count, T pivot) {
  using R = real_t<T>;
  if (std::abs(pivot) >= std::numeric_limits<R>::min()) {
    const T r = T(1) / pivot;
    for (int64_t i = 0; i < count; ++i) x[i * inc] = mul(x[i * inc], r);
  } else {
    for (int64_t i = 0; i < count; ++i) x[i * inc] /= pivot;
  }
}

// Unblocked right-looking LU of the m x n matrix a, row-major (cs == 1) or column-major
// (rs == 1); the rank-1 update runs along the contiguous dimension.
template <class T>
int64_t getf2(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, int32_t* ipiv) {
  auto at = [&](int64_t i, int64_t j) -> T& { return a[i * rs + j * cs]; };
  int64_t info = 0;
  const int64_t mn = std::min(m, n);
  for (int64_t j = 0; j < mn; ++j) {
    int64_t p = j;
    real_t<T> best = abs1(at(j, j));
    for (int64_t i = j + 1; i < m; ++i) {
      const real_t<T> v = abs1(at(i, j));
      if (v > best) best = v, p = i;
    }
    ipiv[j] = static_cast<int32_t>(p + 1);
    if (at(p, j) != T(0)) {
      if (p != j) swap_rows(a, rs, cs, j, p, n);
      scale_by_pivot(&at(j + 1, j), rs, m - j - 1, at(j, j));
    } else if (info == 0) {
      info = j + 1;
    }
    if (cs == 1) {
      const T* uj = &at(j, 0);
      for (int64_t i = j + 1; i < m; ++i) {
        T* ri = &at(i, 0);
        const T lij = ri[j];
        for (int64_t k = j + 1; k < n; ++k) ri[k] = fms(ri[k], lij, uj[k]);
      }
    } else {  // rs == 1
      const T* lj = &at(0, j);
      for (int64_t k = j + 1; k < n; ++k) {
        T* ck = &at(0, k);
        const T ujk = ck[j];
        for (int64_t i = j + 1; i < m; ++i) ck[i] = fms(ck[i], lj[i], ujk);
      }
    }
  }
  return info;
}

template <class T>
void transpose(int64_t r, int64_t c, const T* src, int64_t lds, T* dst, int64_t ldd) {
  using linalg::detail::transpose_into_plain;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using B = interleave_detail::Block<T>;
    constexpr int W = B::W;
    const int64_t rf = r / W * W, cf = c / W * W;
    typename B::R v[W];
    for (int64_t i0 = 0; i0 < rf; i0 += W) {
      for (int64_t j0 = 0; j0 < cf; j0 += W) {
        for (int t = 0; t < W; ++t) v[t] = B::load(src + (i0 + t) * lds + j0, W);
        interleave_detail::transpose(v);
        for (int t = 0; t < W; ++t) B::store(dst + (j0 + t) * ldd + i0, v[t], W);
      }
    }
    transpose_into_plain(rf, c - cf, src + cf, lds, dst + cf * ldd, ldd);  // right edge
    transpose_into_plain(r - rf, c, src + rf * lds, lds, dst + rf, ldd);   // bottom rows
    return;
  }
#endif
  transpose_into_plain(r, c, src, lds, dst, ldd);
}

}  // namespace

const LinalgLeafKernels& linalg_leaf_kernels() {
  static const LinalgLeafKernels k{trsm<float>,       trsm<double>,         trsm<complex64>,
                                   trsm<complex128>,  getf2<float>,         getf2<double>,
                                   getf2<complex64>,  getf2<complex128>,    transpose<float>,
                                   transpose<double>, transpose<complex64>, transpose<complex128>};
  return k;
}

}  // namespace tessera::cpu::TS_ISA
