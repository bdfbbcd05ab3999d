#include "ops/cpu/pointwise_kernels.h"

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "core/loops.h"
#include "core/prefetch.h"
#include "core/vec_math.h"

namespace tessera::cpu::TS_ISA {

namespace {

template <class T>
constexpr bool kVecFloat = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                           std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <class T>
using Unsigned = std::make_unsigned_t<T>;

// Wrapping integer arithmetic (no signed-overflow UB), as PyTorch's results on x86.
template <class T>
T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
}
template <class T>
T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b));
}
template <class T>
T wrap_mul(T a, T b) {
  using W = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, Unsigned<T>>;
  return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
}

// Python-style floor division and modulus for floats (PyTorch's div_floor / remainder).
template <class C>
C floor_div(C a, C b) {
  if (b == 0) return a / b;
  const C mod = std::fmod(a, b);
  C div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(C(0), a / b);
  C fl = std::floor(div);
  if (div - fl > C(0.5)) fl += 1;
  return fl;
}
template <class C>
C py_mod(C a, C b) {
  C mod = std::fmod(a, b);
  if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
  return mod;
}

template <class C>
C nan_max(C a, C b) {
  if (a != a || b != b) return std::numeric_limits<C>::quiet_NaN();
  return a > b ? a : b;
}
template <class C>
C nan_min(C a, C b) {
  if (a != a || b != b) return std::numeric_limits<C>::quiet_NaN();
  return a < b ? a : b;
}

// ------------------------------------------------------------------------------- binary

template <class T>
void binary_float(TensorIterator& iter, BinaryOp op, const Scalar& alpha_s) {
  using C = compute_t<T>;
  using V = Vec<C>;
  const C alpha = static_cast<C>(alpha_s.to_double());
  switch (op) {
    case BinaryOp::Add:
      if (alpha == C(1))
        return cpu_kernel_vec<T, true>(
            iter, [](C a, C b) { return a + b; }, [](V a, V b) { return a + b; });
      return cpu_kernel_vec<T, true>(
          iter, [alpha](C a, C b) { return a + alpha * b; },
          [alpha](V a, V b) { return V::fmadd(V(alpha), b, a); });
    case BinaryOp::Sub:
      if (alpha == C(1))
        return cpu_kernel_vec<T, true>(
            iter, [](C a, C b) { return a - b; }, [](V a, V b) { return a - b; });
      return cpu_kernel_vec<T, true>(
          iter, [alpha](C a, C b) { return a - alpha * b; },
          [alpha](V a, V b) { return a - V(alpha) * b; });
    case BinaryOp::Mul:
      return cpu_kernel_vec<T, true>(
          iter, [](C a, C b) { return a * b; }, [](V a, V b) { return a * b; });
    case BinaryOp::Div:
      return cpu_kernel_vec<T, true>(
          iter, [](C a, C b) { return a / b; }, [](V a, V b) { return a / b; });
    case BinaryOp::Maximum:
      return cpu_kernel_vec<T, true>(iter, nan_max<C>, [](V a, V b) { return V::max(a, b); });
    case BinaryOp::Minimum:
      return cpu_kernel_vec<T, true>(iter, nan_min<C>, [](V a, V b) { return V::min(a, b); });
    case BinaryOp::Pow:
      return cpu_kernel_vec<T>(
          iter, [](C a, C b) { return std::pow(a, b); }, [](V a, V b) { return a.pow(b); });
    default:
      break;
  }
  auto scalar = [&](auto f) {
    cpu_kernel<T, T, T>(iter, [f](T a, T b) { return T(f(C(a), C(b))); });
  };
  switch (op) {
    case BinaryOp::DivTrunc:
      return scalar([](C a, C b) { return std::trunc(a / b); });
    case BinaryOp::DivFloor:
      return scalar(floor_div<C>);
    case BinaryOp::Remainder:
      return scalar(py_mod<C>);
    case BinaryOp::Fmod:
      return scalar([](C a, C b) { return std::fmod(a, b); });
    case BinaryOp::Atan2:
      return scalar([](C a, C b) { return std::atan2(a, b); });
    default:
      TS_THROW(RuntimeError, "{}(): internal: binary op {} has no float kernel", iter.op_name(),
               static_cast<int>(op));
  }
}

template <class T>
void binary_int(TensorIterator& iter, BinaryOp op, const Scalar& alpha_s) {
  const T alpha = alpha_s.to<T>();
  auto k = [&](auto f) { cpu_kernel<T, T, T>(iter, f); };
  constexpr int kBits = sizeof(T) * 8;
  switch (op) {
    case BinaryOp::Add:
      return k([alpha](T a, T b) { return wrap_add(a, wrap_mul(alpha, b)); });
    case BinaryOp::Sub:
      return k([alpha](T a, T b) { return wrap_sub(a, wrap_mul(alpha, b)); });
    case BinaryOp::Mul:
      return k([](T a, T b) { return wrap_mul(a, b); });
    case BinaryOp::DivTrunc:  // divisors were checked non-zero by the front end
      return k([](T a, T b) -> T {
        if constexpr (std::is_signed_v<T>)
          if (b == -1) return wrap_sub(T(0), a);
        return static_cast<T>(a / b);
      });
    case BinaryOp::DivFloor:
      return k([](T a, T b) -> T {
        if constexpr (std::is_signed_v<T>) {
          if (b == -1) return wrap_sub(T(0), a);
          const T q = static_cast<T>(a / b), r = static_cast<T>(a % b);
          return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;
        }
        return static_cast<T>(a / b);
      });
    case BinaryOp::Remainder:
      return k([](T a, T b) -> T {
        if constexpr (std::is_signed_v<T>) {
          if (b == -1) return 0;
          T r = static_cast<T>(a % b);
          if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
          return r;
        }
        return static_cast<T>(a % b);
      });
    case BinaryOp::Fmod:
      return k([](T a, T b) -> T {
        if constexpr (std::is_signed_v<T>)
          if (b == -1) return 0;
        return static_cast<T>(a % b);
      });
    case BinaryOp::Pow:
      return k([](T a, T b) -> T {
        if constexpr (std::is_signed_v<T>) {
          if (b < 0) {  // integer pow with negative exponent: as PyTorch
            if (a == 1) return 1;
            if (a == -1) return (b & 1) ? T(-1) : T(1);
            return 0;
          }
        }
        T r = 1, base = a;
        for (auto e = static_cast<Unsigned<T>>(b); e; e >>= 1) {
          if (e & 1) r = wrap_mul(r, base);
          base = wrap_mul(base, base);
        }
        return r;
      });
    case BinaryOp::Maximum:
      return k([](T a, T b) { return a > b ? a : b; });
    case BinaryOp::Minimum:
      return k([](T a, T b) { return a < b ? a : b; });
    case BinaryOp::BitAnd:
      return k([](T a, T b) { return static_cast<T>(a & b); });
    case BinaryOp::BitOr:
      return k([](T a, T b) { return static_cast<T>(a | b); });
    case BinaryOp::BitXor:
      return k([](T a, T b) { return static_cast<T>(a ^ b); });
    case BinaryOp::Shl:
      return k([](T a, T b) -> T {
        if (b < 0 || b >= kBits) return 0;
        return static_cast<T>(static_cast<Unsigned<T>>(a) << b);
      });
    case BinaryOp::Shr:
      return k([](T a, T b) -> T {
        if (b < 0 || b >= kBits) return (std::is_signed_v<T> && a < 0) ? T(-1) : T(0);
        return static_cast<T>(a >> b);
      });
    default:
      TS_THROW(RuntimeError, "{}(): internal: binary op {} has no integer kernel", iter.op_name(),
               static_cast<int>(op));
  }
}

void binary_bool(TensorIterator& iter, BinaryOp op) {
  auto k = [&](auto f) { cpu_kernel<bool, bool, bool>(iter, f); };
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::BitOr:
    case BinaryOp::Maximum:
      return k([](bool a, bool b) { return a || b; });
    case BinaryOp::Mul:
    case BinaryOp::BitAnd:
    case BinaryOp::Minimum:
      return k([](bool a, bool b) { return a && b; });
    case BinaryOp::BitXor:
      return k([](bool a, bool b) { return a != b; });
    default:
      TS_THROW(RuntimeError, "{}(): internal: binary op {} has no bool kernel", iter.op_name(),
               static_cast<int>(op));
  }
}

// Scaled division, as PyTorch's vectorised CPU kernel: both operands are divided by
// max(|re|, |im|) of the divisor, so a zero divisor gives NaN components (not inf).
template <class T>
T complex_div(T x, T y) {
  using R = typename T::value_type;
  const R sc = std::max(std::fabs(y.real()), std::fabs(y.imag()));
  const R a = x.real() / sc, b = x.imag() / sc, c = y.real() / sc, d = y.imag() / sc;
  const R denom = c * c + d * d;
  return T((a * c + b * d) / denom, (b * c - a * d) / denom);
}

template <class T>
void binary_complex(TensorIterator& iter, BinaryOp op, const Scalar& alpha_s) {
  const T alpha = alpha_s.to<T>();
  auto k = [&](auto f) { cpu_kernel<T, T, T>(iter, f); };
  switch (op) {
    case BinaryOp::Add:
      return k([alpha](T a, T b) { return a + alpha * b; });
    case BinaryOp::Sub:
      return k([alpha](T a, T b) { return a - alpha * b; });
    case BinaryOp::Mul:
      return k([](T a, T b) { return a * b; });
    case BinaryOp::Div:
      return k(complex_div<T>);
    case BinaryOp::Pow:
      return k([](T a, T b) { return std::pow(a, b); });
    default:
      TS_THROW(RuntimeError, "{}(): internal: binary op {} has no complex kernel", iter.op_name(),
               static_cast<int>(op));
  }
}

// Comparisons and logical ops: inputs of the common dtype, bool output.
template <class T>
void compare(TensorIterator& iter, BinaryOp op) {
  auto k = [&](auto f) { cpu_kernel<bool, T, T>(iter, f); };
  if constexpr (is_complex_t<T>::value) {
    switch (op) {
      case BinaryOp::Eq:
        return k([](T a, T b) { return a == b; });
      case BinaryOp::Ne:
        return k([](T a, T b) { return a != b; });
      case BinaryOp::LogicalAnd:
        return k([](T a, T b) { return a != T(0) && b != T(0); });
      case BinaryOp::LogicalOr:
        return k([](T a, T b) { return a != T(0) || b != T(0); });
      case BinaryOp::LogicalXor:
        return k([](T a, T b) { return (a != T(0)) != (b != T(0)); });
      default:
        TS_THROW(TypeError, "{}(): not supported for complex tensors", iter.op_name());
    }
  } else {
    using C = std::conditional_t<kVecFloat<T>, compute_t<T>, T>;
    switch (op) {
      case BinaryOp::Eq:
        return k([](T a, T b) { return C(a) == C(b); });
      case BinaryOp::Ne:
        return k([](T a, T b) { return C(a) != C(b); });
      case BinaryOp::Lt:
        return k([](T a, T b) { return C(a) < C(b); });
      case BinaryOp::Le:
        return k([](T a, T b) { return C(a) <= C(b); });
      case BinaryOp::Gt:
        return k([](T a, T b) { return C(a) > C(b); });
      case BinaryOp::Ge:
        return k([](T a, T b) { return C(a) >= C(b); });
      case BinaryOp::LogicalAnd:
        return k([](T a, T b) { return C(a) != C(0) && C(b) != C(0); });
      case BinaryOp::LogicalOr:
        return k([](T a, T b) { return C(a) != C(0) || C(b) != C(0); });
      case BinaryOp::LogicalXor:
        return k([](T a, T b) { return (C(a) != C(0)) != (C(b) != C(0)); });
      default:
        TS_THROW(RuntimeError, "{}(): internal: not a comparison", iter.op_name());
    }
  }
}

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
         op == BinaryOp::Gt || op == BinaryOp::Ge || op == BinaryOp::LogicalAnd ||
         op == BinaryOp::LogicalOr || op == BinaryOp::LogicalXor;
}

void binary_kernel(TensorIterator& iter, BinaryOp op, const Scalar& alpha) {
  const ScalarType t = iter.input_dtype(0);
  if (is_comparison(op)) {
    return visit_dtype<dtype_bit(kBool) | kNumericTypes>(t, iter.op_name(),
                                                         [&]<class T>() { compare<T>(iter, op); });
  }
  visit_dtype<dtype_bit(kBool) | kNumericTypes>(t, iter.op_name(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      binary_bool(iter, op);
    } else if constexpr (kVecFloat<T>) {
      binary_float<T>(iter, op, alpha);
    } else if constexpr (is_complex_t<T>::value) {
      binary_complex<T>(iter, op, alpha);
    } else {
      binary_int<T>(iter, op, alpha);
    }
  });
}

// -------------------------------------------------------------------------------- unary

// x * Phi(x) with Phi through erfc, so the lower tail keeps its digits (1 + erf(x / sqrt 2)
// cancels to nothing there).
template <class C>
C gelu_erf(C x) {
  return C(0.5) * x * std::erfc(-x * C(M_SQRT1_2));
}
template <class C>
C gelu_tanh(C x) {
  const C k = C(M_2_SQRTPI * M_SQRT1_2);  // sqrt(2/pi)
  return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
}

template <class T>
void unary_float(TensorIterator& iter, UnaryOp op) {
  using C = compute_t<T>;
  using V = Vec<C>;
  auto vk = [&](auto s, auto v) { cpu_kernel_vec<T>(iter, s, v); };
  // Large outputs written around the cache, inputs prefetched (core/loops.h): for cheap ops, and
  // for gelu where streamed stores overlap its computation (core/prefetch.h).
  auto vk_streamed = [&](auto s, auto v) { cpu_kernel_vec<T, true>(iter, s, v); };
  switch (op) {
    case UnaryOp::Abs:
      return vk_streamed([](C x) { return std::fabs(x); }, [](V x) { return x.abs(); });
    case UnaryOp::Neg:
      return vk_streamed([](C x) { return -x; }, [](V x) { return -x; });
    case UnaryOp::Exp:
      return vk([](C x) { return std::exp(x); }, [](V x) { return x.exp(); });
    case UnaryOp::Expm1:
      return vk([](C x) { return std::expm1(x); }, [](V x) { return x.expm1(); });
    case UnaryOp::Log:
      return vk([](C x) { return std::log(x); }, [](V x) { return x.log(); });
    case UnaryOp::Log1p:
      return vk([](C x) { return std::log1p(x); }, [](V x) { return x.log1p(); });
    case UnaryOp::Log2:
      return vk([](C x) { return std::log2(x); }, [](V x) { return x.log2(); });
    case UnaryOp::Sqrt:
      return vk([](C x) { return std::sqrt(x); }, [](V x) { return x.sqrt(); });
    case UnaryOp::Rsqrt:
      return vk([](C x) { return C(1) / std::sqrt(x); }, [](V x) { return V(C(1)) / x.sqrt(); });
    case UnaryOp::Sin:
      return vk([](C x) { return std::sin(x); }, [](V x) { return x.sin(); });
    case UnaryOp::Cos:
      return vk([](C x) { return std::cos(x); }, [](V x) { return x.cos(); });
    case UnaryOp::Tanh:
      return vk([](C x) { return std::tanh(x); }, [](V x) { return x.tanh(); });
    case UnaryOp::Sigmoid:
      return vk([](C x) { return C(1) / (C(1) + std::exp(-x)); },
                [](V x) { return V(C(1)) / (V(C(1)) + (-x).exp()); });
    case UnaryOp::Erf:
      return vk([](C x) { return std::erf(x); },
                [](V x) {
                  if constexpr (std::is_same_v<C, float>) {
                    return vec::TS_ISA::erf_approx(x);
                  } else {
                    return x.erf();
                  }
                });
    case UnaryOp::Relu:
      // relu keeps NaN (PyTorch's clamp_min(0) propagates it).
      return vk_streamed([](C x) { return x != x ? x : (x > 0 ? x : C(0)); },
                         [](V x) { return V::max(x, V(C(0))); });
    case UnaryOp::GeluErf: {
      auto vop = [](V x) {
        if constexpr (std::is_same_v<C, float>) {
          return x * vec::TS_ISA::normal_cdf(x);
        } else {
          return V(C(0.5)) * x * (V(C(1)) + (x * V(C(M_SQRT1_2))).erf());
        }
      };
      return streamed_stores_overlap_compute() ? vk_streamed(gelu_erf<C>, vop)
                                               : vk(gelu_erf<C>, vop);
    }
    case UnaryOp::GeluTanh:
      return vk(gelu_tanh<C>, [](V x) { return vec::TS_ISA::gelu_tanh<C>(x); });
    case UnaryOp::Silu:
      return vk([](C x) { return x / (C(1) + std::exp(-x)); },
                [](V x) { return x / (V(C(1)) + (-x).exp()); });
    case UnaryOp::Reciprocal:
      return vk([](C x) { return C(1) / x; }, [](V x) { return V(C(1)) / x; });
    case UnaryOp::Square:
      return vk([](C x) { return x * x; }, [](V x) { return x * x; });
    default:
      break;
  }
  auto sk = [&](auto f) { cpu_kernel<T, T>(iter, [f](T x) { return T(f(C(x))); }); };
  switch (op) {
    case UnaryOp::Sign:  // sign(NaN) is 0, as PyTorch
      return sk([](C x) -> C { return C((C(0) < x) - (x < C(0))); });
    case UnaryOp::Floor:
      return sk([](C x) { return std::floor(x); });
    case UnaryOp::Ceil:
      return sk([](C x) { return std::ceil(x); });
    case UnaryOp::Round:
      return sk([](C x) { return std::nearbyint(x); });
    case UnaryOp::Trunc:
      return sk([](C x) { return std::trunc(x); });
    case UnaryOp::Angle:
      return sk([](C x) -> C { return x != x ? x : (x < 0 ? C(M_PI) : C(0)); });
    case UnaryOp::Conj:
      return sk([](C x) { return x; });
    default:
      break;
  }
  auto pk = [&](auto f) { cpu_kernel<bool, T>(iter, [f](T x) { return f(C(x)); }); };
  switch (op) {
    case UnaryOp::IsNan:
      return pk([](C x) { return x != x; });
    case UnaryOp::IsInf:
      return pk([](C x) { return std::isinf(x); });
    case UnaryOp::IsFinite:
      return pk([](C x) { return std::isfinite(x); });
    case UnaryOp::LogicalNot:
      return pk([](C x) { return x == C(0); });
    default:
      TS_THROW(RuntimeError, "{}(): internal: unary op {} has no float kernel", iter.op_name(),
               static_cast<int>(op));
  }
}

template <class T>
void unary_int(TensorIterator& iter, UnaryOp op) {
  auto k = [&](auto f) { cpu_kernel<T, T>(iter, f); };
  auto pk = [&](auto f) { cpu_kernel<bool, T>(iter, f); };
  switch (op) {
    case UnaryOp::Abs:
      return k([](T x) -> T {
        if constexpr (std::is_signed_v<T>) return x < 0 ? wrap_sub(T(0), x) : x;
        return x;
      });
    case UnaryOp::Neg:
      return k([](T x) { return wrap_sub(T(0), x); });
    case UnaryOp::Sign:
      return k([](T x) -> T { return static_cast<T>((T(0) < x) - (x < T(0))); });
    case UnaryOp::Relu:
      return k([](T x) -> T { return x > 0 ? x : T(0); });
    case UnaryOp::Square:
      return k([](T x) { return wrap_mul(x, x); });
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::Trunc:
    case UnaryOp::Conj:
      return k([](T x) { return x; });
    case UnaryOp::BitNot:
      return k([](T x) { return static_cast<T>(~x); });
    case UnaryOp::IsNan:
    case UnaryOp::IsInf:
      return pk([](T) { return false; });
    case UnaryOp::IsFinite:
      return pk([](T) { return true; });
    case UnaryOp::LogicalNot:
      return pk([](T x) { return x == 0; });
    default:
      TS_THROW(RuntimeError, "{}(): internal: unary op {} has no integer kernel", iter.op_name(),
               static_cast<int>(op));
  }
}

void unary_bool(TensorIterator& iter, UnaryOp op) {
  auto k = [&](auto f) { cpu_kernel<bool, bool>(iter, f); };
  switch (op) {
    case UnaryOp::BitNot:
    case UnaryOp::LogicalNot:
      return k([](bool x) { return !x; });
    case UnaryOp::Abs:
    case UnaryOp::Sign:
    case UnaryOp::Relu:
    case UnaryOp::Conj:
    case UnaryOp::Square:
      return k([](bool x) { return x; });
    case UnaryOp::IsNan:
    case UnaryOp::IsInf:
      return k([](bool) { return false; });
    case UnaryOp::IsFinite:
      return k([](bool) { return true; });
    default:
      TS_THROW(RuntimeError, "{}(): internal: unary op {} has no bool kernel", iter.op_name(),
               static_cast<int>(op));
  }
}

template <class T>
void unary_complex(TensorIterator& iter, UnaryOp op) {
  using R = typename T::value_type;
  auto k = [&](auto f) { cpu_kernel<T, T>(iter, f); };
  switch (op) {
    case UnaryOp::Neg:
      return k([](T x) { return -x; });
    case UnaryOp::Exp:
      return k([](T x) { return std::exp(x); });
    case UnaryOp::Log:
      return k([](T x) { return std::log(x); });
    case UnaryOp::Sqrt:
      return k([](T x) { return std::sqrt(x); });
    case UnaryOp::Rsqrt:
      return k([](T x) { return T(1) / std::sqrt(x); });
    case UnaryOp::Sin:
      return k([](T x) { return std::sin(x); });
    case UnaryOp::Cos:
      return k([](T x) { return std::cos(x); });
    case UnaryOp::Tanh:
      return k([](T x) { return std::tanh(x); });
    case UnaryOp::Sigmoid:
      return k([](T x) { return T(1) / (T(1) + std::exp(-x)); });
    case UnaryOp::Reciprocal:
      return k([](T x) { return T(1) / x; });
    case UnaryOp::Square:
      return k([](T x) { return x * x; });
    case UnaryOp::Conj:
      return k([](T x) { return std::conj(x); });
    case UnaryOp::Sign:
      return k([](T x) { return x == T(0) ? T(0) : x / std::abs(x); });
    case UnaryOp::Angle:
      return cpu_kernel<R, T>(iter, [](T x) { return std::arg(x); });
    case UnaryOp::AbsComplex:
      return cpu_kernel<R, T>(iter, [](T x) { return std::abs(x); });
    case UnaryOp::IsNan:
      return cpu_kernel<bool, T>(iter,
                                 [](T x) { return x.real() != x.real() || x.imag() != x.imag(); });
    case UnaryOp::IsInf:
      return cpu_kernel<bool, T>(iter,
                                 [](T x) { return std::isinf(x.real()) || std::isinf(x.imag()); });
    case UnaryOp::IsFinite:
      return cpu_kernel<bool, T>(
          iter, [](T x) { return std::isfinite(x.real()) && std::isfinite(x.imag()); });
    case UnaryOp::LogicalNot:
      return cpu_kernel<bool, T>(iter, [](T x) { return x == T(0); });
    default:
      TS_THROW(RuntimeError, "{}(): internal: unary op {} has no complex kernel", iter.op_name(),
               static_cast<int>(op));
  }
}

void unary_kernel(TensorIterator& iter, UnaryOp op) {
  visit_dtype<dtype_bit(kBool) | kNumericTypes>(iter.input_dtype(0), iter.op_name(),
                                                [&]<class T>() {
                                                  if constexpr (std::is_same_v<T, bool>) {
                                                    unary_bool(iter, op);
                                                  } else if constexpr (kVecFloat<T>) {
                                                    unary_float<T>(iter, op);
                                                  } else if constexpr (is_complex_t<T>::value) {
                                                    unary_complex<T>(iter, op);
                                                  } else {
                                                    unary_int<T>(iter, op);
                                                  }
                                                });
}

// ------------------------------------------------------------------------------ ternary

void ternary_kernel(TensorIterator& iter, TernaryOp op, const Scalar& value) {
  if (op == TernaryOp::Where) {
    // iter: out, cond (bool), a, b: all of the output dtype except cond.
    return visit_dtype<kAllTypes>(iter.dtype(0), "where", [&]<class T>() {
      cpu_kernel<T, bool, T, T>(iter, [](bool c, T a, T b) { return c ? a : b; });
    });
  }
  if (op == TernaryOp::Polar || op == TernaryOp::Complex) {
    return visit_dtype<dtype_bit(kFloat32) | dtype_bit(kFloat64)>(
        iter.input_dtype(0), iter.op_name(), [&]<class R>() {
          using T = std::complex<R>;
          if (op == TernaryOp::Polar)
            cpu_kernel<T, R, R>(iter,
                                [](R r, R th) { return T(r * std::cos(th), r * std::sin(th)); });
          else
            cpu_kernel<T, R, R>(iter, [](R re, R im) { return T(re, im); });
        });
  }
  visit_dtype<kNumericTypes>(iter.dtype(0), iter.op_name(), [&]<class T>() {
    if constexpr (kVecFloat<T>) {
      using C = compute_t<T>;
      using V = Vec<C>;
      const C v = static_cast<C>(value.to_double());
      switch (op) {
        case TernaryOp::Lerp:
          // PyTorch's two-sided form keeps lerp(a, b, 1) == b exactly.
          return cpu_kernel_vec<T>(
              iter,
              [](C a, C b, C w) {
                return std::fabs(w) < C(0.5) ? a + w * (b - a) : b - (b - a) * (C(1) - w);
              },
              [](V a, V b, V w) {
                // Vector form uses the same two-sided split lane-wise.
                alignas(64) C wa[V::kSize], av[V::kSize], bv[V::kSize], out[V::kSize];
                w.store(wa), a.store(av), b.store(bv);
                for (int i = 0; i < V::kSize; ++i)
                  out[i] = std::fabs(wa[i]) < C(0.5) ? av[i] + wa[i] * (bv[i] - av[i])
                                                     : bv[i] - (bv[i] - av[i]) * (C(1) - wa[i]);
                return V::load(out);
              });
        case TernaryOp::Addcmul:
          return cpu_kernel_vec<T, true>(
              iter, [v](C s, C a, C b) { return s + v * a * b; },
              [v](V s, V a, V b) { return V::fmadd(V(v) * a, b, s); });
        case TernaryOp::Addcdiv:
          return cpu_kernel_vec<T, true>(
              iter, [v](C s, C a, C b) { return s + v * a / b; },
              [v](V s, V a, V b) { return s + V(v) * a / b; });
        default:
          break;
      }
    } else if constexpr (is_complex_t<T>::value) {
      const T v = value.to<T>();
      switch (op) {
        case TernaryOp::Lerp:
          return cpu_kernel<T, T, T, T>(iter, [](T a, T b, T w) { return a + w * (b - a); });
        case TernaryOp::Addcmul:
          return cpu_kernel<T, T, T, T>(iter, [v](T s, T a, T b) { return s + v * a * b; });
        case TernaryOp::Addcdiv:
          return cpu_kernel<T, T, T, T>(iter, [v](T s, T a, T b) { return s + v * a / b; });
        default:
          break;
      }
    } else {
      const T v = value.to<T>();
      if (op == TernaryOp::Addcmul)
        return cpu_kernel<T, T, T, T>(
            iter, [v](T s, T a, T b) { return wrap_add(s, wrap_mul(v, wrap_mul(a, b))); });
    }
    TS_THROW(TypeError, "{}(): not supported for dtype {}", iter.op_name(), iter.dtype(0));
  });
}

void clamp_kernel(TensorIterator& iter, const std::optional<Scalar>& lo,
                  const std::optional<Scalar>& hi) {
  visit_dtype<kRealTypes>(iter.dtype(0), "clamp", [&]<class T>() {
    if constexpr (kVecFloat<T>) {
      using C = compute_t<T>;
      using V = Vec<C>;
      const C l = lo ? static_cast<C>(lo->to_double()) : -std::numeric_limits<C>::infinity();
      const C h = hi ? static_cast<C>(hi->to_double()) : std::numeric_limits<C>::infinity();
      // NaN input stays NaN; a NaN bound makes the result NaN (as PyTorch).
      cpu_kernel_vec<T, true>(
          iter, [l, h](C x) { return nan_min(nan_max(x, l), h); },
          [l, h](V x) { return V::min(V::max(x, V(l)), V(h)); });
    } else {
      // Bounds convert to T first (uint8 min=-1 is 255), and min > max gives max: both as
      // PyTorch's min(max(x, lo), hi).
      const T l = lo ? lo->to<T>() : std::numeric_limits<T>::lowest();
      const T h = hi ? hi->to<T>() : std::numeric_limits<T>::max();
      cpu_kernel<T, T>(iter, [l, h](T x) { return std::min(std::max(x, l), h); });
    }
  });
}

void softplus_kernel(TensorIterator& iter, const Scalar& beta_s, const Scalar& threshold_s) {
  visit_dtype<kFloatingTypes>(iter.dtype(0), "softplus", [&]<class T>() {
    using C = compute_t<T>;
    const C beta = static_cast<C>(beta_s.to_double());
    const C threshold = static_cast<C>(threshold_s.to_double());
    cpu_kernel<T, T>(iter, [beta, threshold](T xt) {
      const C x = C(xt);
      return T(x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta);
    });
  });
}

}  // namespace

const PointwiseKernels& pointwise_kernels() {
  static const PointwiseKernels k{binary_kernel, unary_kernel, ternary_kernel, clamp_kernel,
                                  softplus_kernel};
  return k;
}

}  // namespace tessera::cpu::TS_ISA
