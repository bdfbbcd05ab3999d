// Scalar helpers for the linalg kernels, templated over float, double, complex64 and
// complex128. Complex products are spelled out (re*re - im*im, ...) so that loops vectorize:
// std::complex's operator* must call a library routine to recover infinities (C99 Annex G),
// which stops GCC from vectorizing. Only the NaN/inf corner cases of a product differ.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace tessera::linalg::detail {

template <class T>
struct RealOf {
  using type = T;
};
template <class R>
struct RealOf<std::complex<R>> {
  using type = R;
};
template <class T>
using real_t = typename RealOf<T>::type;
template <class T>
inline constexpr bool kIsComplex = !std::is_same_v<T, real_t<T>>;

template <class T>
inline T conj_of(T x) {
  if constexpr (kIsComplex<T>) {
    return std::conj(x);
  } else {
    return x;
  }
}
template <class T>
inline T maybe_conj(T x, bool conj) {
  if constexpr (kIsComplex<T>) {
    return conj ? std::conj(x) : x;
  } else {
    (void)conj;
    return x;
  }
}
// LAPACK's cabs1: |re| + |im| (|x| for real x), what i?amax compares when choosing a pivot.
template <class T>
inline real_t<T> abs1(T x) {
  if constexpr (kIsComplex<T>) {
    return std::abs(x.real()) + std::abs(x.imag());
  } else {
    return std::abs(x);
  }
}
template <class T>
inline real_t<T> real_part(T x) {
  if constexpr (kIsComplex<T>) {
    return x.real();
  } else {
    return x;
  }
}

// c - a * b.
template <class T>
inline T fms(T c, T a, T b) {
  if constexpr (kIsComplex<T>) {
    return T(c.real() - (a.real() * b.real() - a.imag() * b.imag()),
             c.imag() - (a.real() * b.imag() + a.imag() * b.real()));
  } else {
    return c - a * b;
  }
}
// a * b.
template <class T>
inline T mul(T a, T b) {
  if constexpr (kIsComplex<T>) {
    return T(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
  } else {
    return a * b;
  }
}
// |x|^2.
template <class T>
inline real_t<T> abs2(T x) {
  if constexpr (kIsComplex<T>) {
    return x.real() * x.real() + x.imag() * x.imag();
  } else {
    return x * x;
  }
}

// Swaps rows r0 and r1 (ncols elements each) of the strided matrix a.
template <class T>
inline void swap_rows(T* a, int64_t rs, int64_t cs, int64_t r0, int64_t r1, int64_t ncols) {
  if (cs == 1) {
    std::swap_ranges(a + r0 * rs, a + r0 * rs + ncols, a + r1 * rs);
  } else {
    for (int64_t j = 0; j < ncols; ++j) std::swap(a[r0 * rs + j * cs], a[r1 * rs + j * cs]);
  }
}

// The power of two s that puts amax * s in [1, 2): the scaled entries' squares and sums of
// squares neither overflow nor underflow, and undoing the scaling is exact. 1 for a zero or
// non-finite amax. Below the normal range 2^-ilogb(amax) is not representable, so s stops at
// 2^(max_exponent - 1) and amax * s lands below 1 (at least 2^-23 for float), still far from
// underflow.
template <class R>
inline R unit_scale(R amax) {
  if (!(amax > R(0)) || !std::isfinite(amax)) return R(1);
  return std::ldexp(R(1), std::min(-std::ilogb(amax), std::numeric_limits<R>::max_exponent - 1));
}

}  // namespace tessera::linalg::detail
