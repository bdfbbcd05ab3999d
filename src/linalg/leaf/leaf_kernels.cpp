// Per-ISA leaves of linalg's recursive algorithms (leaf_kernels.h).
#include "linalg/leaf/leaf_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/transpose.h"
#include "core/vec.h"
#include "linalg/scalar_ops.h"

namespace tessera::cpu::TS_ISA {
namespace {

using linalg::detail::abs1;
using linalg::detail::conj_of;
using linalg::detail::fms;
using linalg::detail::maybe_conj;
using linalg::detail::mul;
using linalg::detail::real_part;
using linalg::detail::real_t;
using linalg::detail::swap_rows;

// y -= sum_{c < C} A(:, c) s_c for the real column-major len x C A (leading dimension lda):
// whole vectors and a masked tail, each column one fused multiply-subtract per element, in order
// of c. gemv_minus's blocks of columns and the leaves' row updates (axpy_minus).
template <int C, class T>
[[gnu::always_inline]] inline void minus_columns(int64_t len, const T* a, int64_t lda, const T* s,
                                                 T* y) {
  using V = vec::TS_ISA::Vec<T>;
  constexpr int W = V::kSize;
  auto update = [&](int64_t t, int n) {
    V acc = n == W ? V::load(y + t) : V::load(y + t, n);
    for (int c = 0; c < C; ++c) {
      const T* col = a + c * lda + t;
      acc = V::fmadd(n == W ? V::load(col) : V::load(col, n), V(-s[c]), acc);
    }
    if (n == W) {
      acc.store(y + t);
    } else {
      acc.store(y + t, n);
    }
  };
  int64_t t = 0;
  for (; t + W <= len; t += W) update(t, W);
  if (t < len) update(t, static_cast<int>(len - t));
}

// y[k] -= u * x[k] for k < len, contiguous, each element the bits of fms (which the compiler
// contracts). The leaves' rows are short (32 or fewer), and the compiler's own loop spent much
// of its time in its scalar tail. Complex rows keep fms's operand order (u first).
template <class T>
[[gnu::always_inline]] inline void axpy_minus(int64_t len, T u, const T* x, T* y) {
  if constexpr (linalg::detail::kIsComplex<T>) {
    for (int64_t k = 0; k < len; ++k) y[k] = fms(y[k], u, x[k]);
  } else {
    minus_columns<1>(len, x, 0, &u, y);
  }
}

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
        axpy_minus(nrhs, aik, bk, bi);
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

template <class T>
int64_t potrf(int64_t n, T* a, int64_t lda) {
  using R = real_t<T>;
  for (int64_t j = 0; j < n; ++j) {
    T* rowj = a + j * lda;
    const R ajj = real_part(rowj[j]);
    if (!(ajj > R(0))) {  // NaN fails too
      rowj[j] = T(ajj);
      return j + 1;
    }
    const R d = std::sqrt(ajj);
    rowj[j] = T(d);
    const R r = R(1) / d;
    for (int64_t k = j + 1; k < n; ++k) rowj[k] *= r;
    for (int64_t i = j + 1; i < n; ++i) {
      T* rowi = a + i * lda;
      axpy_minus(n - i, conj_of(rowj[i]), rowj + i, rowi + i);
    }
  }
  return 0;
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
        axpy_minus(n - j - 1, ri[j], uj + j + 1, ri + j + 1);
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
  vec::TS_ISA::transpose(r, c, src, lds, dst, ldd);
}

// out[c][v] = sum_t col[c][t] xs[v][t] for C columns and V vectors of len reals: one vector of
// partial sums per column and vector (the tail through a masked load), summed across at the end.
template <class R, int C, int V>
void dot_columns(int64_t len, const R* const* col, const R* const* xs, R (*out)[V]) {
  using Vr = vec::TS_ISA::Vec<R>;
  constexpr int W = Vr::kSize;
  Vr acc[C][V];
  for (int c = 0; c < C; ++c)
    for (int v = 0; v < V; ++v) acc[c][v] = Vr(R(0));
  auto step = [&](int64_t t, auto load) {
    Vr x[V];
    for (int v = 0; v < V; ++v) x[v] = load(xs[v] + t);
    for (int c = 0; c < C; ++c) {
      const Vr a = load(col[c] + t);
      for (int v = 0; v < V; ++v) acc[c][v] = Vr::fmadd(a, x[v], acc[c][v]);
    }
  };
  int64_t t = 0;
  for (; t + W <= len; t += W) step(t, [](const R* p) { return Vr::load(p); });
  if (t < len) {
    const int rest = static_cast<int>(len - t);
    step(t, [rest](const R* p) { return Vr::load(p, rest); });
  }
  for (int c = 0; c < C; ++c)
    for (int v = 0; v < V; ++v) out[c][v] = acc[c][v].reduce_add();
}

// Real T: four columns at a time against x. Complex T: on the reals (a_re, a_im, ...), Re(a^H x)
// = sum a_t x_t and Im(a^H x) = sum a_t s_t with s = (x_im, -x_re, ...): two columns at a time
// against x and s.
template <class T>
void adjoint_gemv(int64_t len, int64_t ncols, const T* a, int64_t lda, const T* x, T* y) {
  using R = real_t<T>;
  if constexpr (std::is_same_v<T, R>) {
    const R* xs[1] = {x};
    int64_t j = 0;
    for (; j + 4 <= ncols; j += 4) {
      const R* col[4] = {a + j * lda, a + (j + 1) * lda, a + (j + 2) * lda, a + (j + 3) * lda};
      R out[4][1];
      dot_columns<R, 4, 1>(len, col, xs, out);
      for (int c = 0; c < 4; ++c) y[j + c] = out[c][0];
    }
    for (; j < ncols; ++j) {
      const R* col[1] = {a + j * lda};
      R out[1][1];
      dot_columns<R, 1, 1>(len, col, xs, out);
      y[j] = out[0][0];
    }
  } else {
    thread_local std::vector<R> swapped;
    swapped.resize(static_cast<size_t>(2 * len));
    for (int64_t i = 0; i < len; ++i)
      swapped[2 * i] = x[i].imag(), swapped[2 * i + 1] = -x[i].real();
    const R* xs[2] = {reinterpret_cast<const R*>(x), swapped.data()};
    auto column = [&](int64_t j) { return reinterpret_cast<const R*>(a + j * lda); };
    int64_t j = 0;
    for (; j + 2 <= ncols; j += 2) {
      const R* col[2] = {column(j), column(j + 1)};
      R out[2][2];
      dot_columns<R, 2, 2>(2 * len, col, xs, out);
      for (int c = 0; c < 2; ++c) y[j + c] = T(out[c][0], out[c][1]);
    }
    for (; j < ncols; ++j) {
      const R* col[1] = {column(j)};
      R out[1][2];
      dot_columns<R, 1, 2>(2 * len, col, xs, out);
      y[j] = T(out[0][0], out[0][1]);
    }
  }
}

// Real T: y is read and written once per four columns, in vectors (a masked one at the tail).
// Complex T: column by column, as the compiler vectorizes it.
template <class T>
void gemv_minus(int64_t len, int64_t ncols, const T* a, int64_t lda, const T* s, bool conj_a,
                T* y) {
  if constexpr (std::is_same_v<T, real_t<T>>) {
    (void)conj_a;
    int64_t q = 0;
    for (; q + 4 <= ncols; q += 4) minus_columns<4>(len, a + q * lda, lda, s + q, y);
    for (; q < ncols; ++q) minus_columns<1>(len, a + q * lda, lda, s + q, y);
  } else {
    for (int64_t q = 0; q < ncols; ++q) {
      const T* col = a + q * lda;
      const T sq = s[q];
      if (conj_a) {
        for (int64_t t = 0; t < len; ++t) y[t] = fms(y[t], std::conj(col[t]), sq);
      } else {
        for (int64_t t = 0; t < len; ++t) y[t] = fms(y[t], col[t], sq);
      }
    }
  }
}

}  // namespace

const LinalgLeafKernels& linalg_leaf_kernels() {
  static const LinalgLeafKernels k{
      trsm<float>,         trsm<double>,         trsm<complex64>,         trsm<complex128>,
      getf2<float>,        getf2<double>,        getf2<complex64>,        getf2<complex128>,
      potrf<float>,        potrf<double>,        potrf<complex64>,        potrf<complex128>,
      transpose<float>,    transpose<double>,    transpose<complex64>,    transpose<complex128>,
      adjoint_gemv<float>, adjoint_gemv<double>, adjoint_gemv<complex64>, adjoint_gemv<complex128>,
      gemv_minus<float>,   gemv_minus<double>,   gemv_minus<complex64>,   gemv_minus<complex128>};
  return k;
}

}  // namespace tessera::cpu::TS_ISA
