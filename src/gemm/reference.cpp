// The GEMM oracle: the definition, one element at a time, accumulated in a wider type
// (double for float32, long double for float64). Same semantics as gemm(): alpha == 0 or
// k == 0 reads neither A nor B, beta == 0 never reads C.
#include <complex>
#include <type_traits>

#include "gemm/gemm.h"
#include "tessera/core/error.h"

namespace tessera::gemm {

namespace {

template <class T>
struct Wider {
  using type = std::conditional_t<std::is_same_v<T, float>, double, long double>;
};
template <class T>
struct Wider<std::complex<T>> {
  using type = std::complex<typename Wider<T>::type>;
};

template <class T>
void reference(const GemmProblem& p) {
  using Acc = typename Wider<T>::type;
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  T* c = static_cast<T*>(p.c);
  const Acc alpha = static_cast<Acc>(p.alpha), beta = static_cast<Acc>(p.beta);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      Acc acc = 0;
      if (alpha != Acc(0))
        for (int64_t q = 0; q < p.k; ++q)
          acc += static_cast<Acc>(a[i * p.a_rs + q * p.a_cs]) *
                 static_cast<Acc>(b[q * p.b_rs + j * p.b_cs]);
      T& out = c[i * p.c_rs + j * p.c_cs];
      const Acc prev = beta == Acc(0) ? Acc(0) : beta * static_cast<Acc>(out);
      out = static_cast<T>(alpha * acc + prev);
    }
  }
}

}  // namespace

void gemm_reference(const GemmProblem& p) {
  TS_CHECK(gemm_supports(p.dtype), TypeError,
           "gemm_reference(): expected dtype float32, float64, complex64 or complex128, but got "
           "{}",
           p.dtype);
  switch (p.dtype) {
    case ScalarType::Float32:
      return reference<float>(p);
    case ScalarType::Float64:
      return reference<double>(p);
    case ScalarType::Complex64:
      return reference<std::complex<float>>(p);
    default:
      return reference<std::complex<double>>(p);
  }
}

}  // namespace tessera::gemm
