// Float32 erf and the standard normal CDF on the SIMD wrappers: Tessera's own approximations
// built on Vec::exp, about 8x faster than Sleef's erff (which dominated gelu).
//
//   erf, |z| <  1:  erf(z)  = z * P(z^2)                             P of degree 6
//   erf, |z| >= 1:  erfc(a) = t * exp(G(t) - a^2),  t = 1/(1 + a/2)   G of degree 8
//   Phi, all x:     see normal_cdf below                              H of degree 9
//
// The coefficients were fitted by least squares in float64 (P on Chebyshev-spaced points of
// [0, 1] with relative weights; G on [1, 10]; H on [0, 10]); the fits' relative errors are
// 1.4e-9, 1.5e-8 and 7e-8. Evaluated in float32: erf is within 2.5 ulp on [-9, 9]; normal_cdf
// keeps relative accuracy in the lower tail (a few ulp, plus x^2/2 * 2^-24 from exp's
// conditioning), where the usual 0.5 * (1 + erf(x / sqrt 2)) loses every digit. NaN in, NaN
// out; erf(+-inf) = +-1. tests/ops/test_pointwise_math.cpp checks both against libm over the
// whole float range, on every ISA.
#pragma once

#include "core/vec.h"

namespace tessera::vec::TS_ISA {

namespace detail {

inline constexpr float kErfP[] = {
    1.128379225730896f,    -0.3761262893676758f,    0.11283612251281738f,  -0.026854805648326874f,
    0.005190048832446337f, -0.0008024311973713338f, 7.898066542111337e-05f};
inline constexpr float kErfcG[] = {
    -1.265505075454712f,  0.9998525381088257f,   0.37607482075691223f,
    0.08166694641113281f, -0.10749199241399765f, 0.008314390666782856f,
    -0.5464568138122559f, 0.713836669921875f,    -0.2617364823818207f};
// normal_cdf's H: 0.5 erfc(a) = u exp(H(u) - a^2), u = 1 / (2 + a), a in [0, 10]; relative
// error of the fit 7e-8, of its float32 evaluation 2.6e-7.
inline constexpr float kErfcH[] = {-1.2654414176940918f, 1.9969851970672607f,  1.5515964031219482f,
                                   0.22688159346580505f, 0.32298678159713745f, -3.7366299629211426f,
                                   -41.681297302246094f, 143.66943359375f,     -170.5139617919922f,
                                   72.80412292480469f};

// normal_cdf's C: log Phi(-a) + a^2 / 2 for a in [0, 3.5].
inline constexpr float kLogPhiC[] = {-0.6931471824645996f,    -0.7978853583335876f,
                                     0.18169955909252167f,    -0.03637295961380005f,
                                     0.0048527345061302185f,  -3.510358146741055e-05f,
                                     -0.0001727047492749989f, 4.453902874956839e-05f,
                                     -5.435952971311053e-06f, 2.778940313419298e-07f};

template <class V, size_t N>
V horner(const float (&c)[N], V x) {
  V r(c[N - 1]);
  for (size_t k = N - 1; k-- > 0;) r = V::fmadd(r, x, V(c[k]));
  return r;
}

// The same polynomial of degree 9 in Estrin's order: four FMA levels under three squarings
// instead of Horner's nine dependent FMAs. normal_cdf's loop is bound by the vectors in flight
// (each one a long chain), not by the FMA ports, so the shorter chain is worth three multiplies.
template <class V>
V estrin(const float (&c)[10], V x) {
  const V x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
  const V p01 = V::fmadd(V(c[1]), x, V(c[0])), p23 = V::fmadd(V(c[3]), x, V(c[2]));
  const V p45 = V::fmadd(V(c[5]), x, V(c[4])), p67 = V::fmadd(V(c[7]), x, V(c[6]));
  const V p89 = V::fmadd(V(c[9]), x, V(c[8]));
  const V p03 = V::fmadd(p23, x2, p01), p47 = V::fmadd(p67, x2, p45);
  return V::fmadd(p89, x8, V::fmadd(p47, x4, p03));
}

// c - a * b with one rounding (a fused multiply-add; the generic ISA has no vector FMA, so it
// asks libm per lane). With the square as the product, exp's argument carries no error from
// squaring.
template <class V>
V fnmadd_exact(V a, V b, V c) {
#if defined(__FMA__)
  return V::fmadd(-a, b, c);
#else
  alignas(64) float la[V::kSize], lb[V::kSize], lc[V::kSize];
  a.store(la);
  b.store(lb);
  c.store(lc);
  for (int i = 0; i < V::kSize; ++i) la[i] = std::fma(-la[i], lb[i], lc[i]);
  return V::load(la);
#endif
}

// erfc(a) for 1 <= a. a is clamped to 10 (erfc(10) = 2e-45 is below float's range), which
// also keeps the square finite.
template <class V>
V erfc_large(V a) {
  a = V::min(a, V(10.0f));  // NaN-propagating
  const V t = V(1.0f) / V::fmadd(a, V(0.5f), V(1.0f));
  return t * fnmadd_exact(a, a, horner(kErfcG, t)).exp();
}

}  // namespace detail

inline Vec<float> erf_approx(Vec<float> z) {
  using V = Vec<float>;
  const V a = z.abs();
  const V small = z * detail::horner(detail::kErfP, z * z);
  const V large = V::copysign(V(1.0f) - detail::erfc_large(a), z);
  return V::select_lt(a, V(1.0f), small, large);  // NaN: `large`, which is NaN
}

// Phi(x) = P(X <= x) for X ~ N(0, 1) = 0.5 * erfc(-x / sqrt(2)), from one formula on the
// whole line (gelu's cost is this function): with a = |x| / sqrt(2) and u = 1 / (2 + a),
//   0.5 * erfc(a) = u * exp(H(u) - a^2),   H of degree 9 fitted on a in [0, 10],
// and Phi(x) = 0.5 erfc(a) for x < 0, 1 - 0.5 erfc(a) for x >= 0. a^2 = (|x| / 2) * |x| enters
// exp's argument through one fused multiply-add, so the lower tail keeps its relative
// accuracy down to Phi(-12.9) = 2.2e-38, just above float's smallest normal. Beyond |x| = 12.9
// the tail is exactly 0 (Phi = 0 or 1): the values there are subnormal, and every operation
// that makes or reads a subnormal costs a microcode assist of ~150 cycles on Intel cores (gelu
// of GEMM outputs with a few |x| > 13 ran 3x slower). PyTorch 1.13 returns 0 from x < -5.5,
// where 1 + erf(x / sqrt 2) cancels. gelu(-inf) = -inf * 0 = NaN, as in PyTorch. About 40
// vector instructions: gelu's whole cost.
//
// When every lane has |x| < 3.5 (all but 0.7% of 16-lane vectors of N(0, 1) data: most
// activations), a cheaper form serves the vector: Phi(-|x|) = exp(C(|x|) - x^2/2), C of degree
// 9 in |x| (fitted on [0, 3.5], coefficients refitted one by one after rounding each to
// float; the float32 evaluation is within 3.5e-7 of log Phi(-|x|) + x^2/2, i.e. relative in
// Phi). No division, and the polynomial in Estrin's order: about 28 instructions.
constexpr float kNormalCdfTail = 12.9f;
constexpr float kNormalCdfCentral = 3.5f;

inline Vec<float> normal_cdf(Vec<float> x) {
  using V = Vec<float>;
  const V ax = x.abs();
  if (V::all_lt(ax, V(kNormalCdfCentral))) {  // no division, a shorter polynomial
    const V half_ax = V(0.5f) * ax;
    const V half_erfc =
        detail::fnmadd_exact(half_ax, ax, detail::estrin(detail::kLogPhiC, ax)).exp_finite();
    return V::select_lt(x, V(0.0f), half_erfc, V(1.0f) - half_erfc);
  }
  const V xc = V::min_fast(V(kNormalCdfTail), ax);  // NaN: min_fast returns its second operand
  const V u = V(1.0f) / V::fmadd(xc, V(0.7071067811865476f), V(2.0f));
  const V half_xc = V(0.5f) * xc;
  V half_erfc =
      u * detail::fnmadd_exact(half_xc, xc, detail::horner(detail::kErfcH, u)).exp_finite();
  half_erfc = V::select_lt(V(kNormalCdfTail), ax, V(0.0f), half_erfc);  // NaN: kept
  return V::select_lt(x, V(0.0f), half_erfc, V(1.0f) - half_erfc);
}

// gelu's tanh form, 0.5 x (1 + tanh(y)) with y = sqrt(2/pi) (x + 0.044715 x^3), computed as
// x * sigmoid(2y) = x / (1 + exp(-2y)): the same function, without tanh's cost or its
// cancellation for negative x. C is float or double.
// exp's argument stays in [-87, 87], where its result and 1 + it are normal floats: past 87
// (x > 10.3) the quotient is x exactly, before -87 (x < -10.3) it is x * 0 = -0 (PyTorch's
// tanh form gives 0 from x < -5.8, and NaN at -inf as this does); subnormals there would cost
// a microcode assist each (see normal_cdf).
template <class C>
Vec<C> gelu_tanh(Vec<C> x) {
  using V = Vec<C>;
  const V y2 = V(C(2 * 0.7978845608028654)) * V::fmadd(V(C(0.044715)) * x * x, x, x);
  const V arg = V::min_fast(V(C(87)), V::max_fast(V(C(-87)), -y2));  // NaN: passed through
  return V::select_lt(V(C(87)), -y2, x * V(C(0)), x / (V(C(1)) + arg.exp()));  // -inf: NaN
}

}  // namespace tessera::vec::TS_ISA
