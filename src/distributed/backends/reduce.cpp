// Elementwise reductions: see reduce.h.
//
// Each dtype has a storage type T and a compute type C (float for the narrow floats, the
// unsigned twin for signed integers under SUM/PRODUCT so overflow wraps, T otherwise). The
// loop works in blocks of kBlock elements: widen source 0 into a C accumulator, fold the other
// sources in, narrow into dst. The inner loops are plain and branch-free, so the compiler
// vectorises them.
#include "distributed/backends/reduce.h"

#include <algorithm>
#include <complex>
#include <type_traits>

#include "tessera/core/error.h"
#include "tessera/core/half.h"

namespace tessera::distributed {

namespace {

constexpr int64_t kBlock = 256;
constexpr int64_t kFew = 8;

template <class C>
struct Sum {
  C operator()(C a, C b) const { return a + b; }
};
template <class C>
struct Prod {
  C operator()(C a, C b) const { return a * b; }
};
template <class C>
struct Max {  // NaN wins, as torch.maximum
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return (a > b || a != a) ? a : b;
    else
      return a > b ? a : b;
  }
};
template <class C>
struct Min {
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return (a < b || a != a) ? a : b;
    else
      return a < b ? a : b;
  }
};
template <class C>
struct BitAnd {
  C operator()(C a, C b) const { return a & b; }
};
template <class C>
struct BitOr {
  C operator()(C a, C b) const { return a | b; }
};
template <class C>
struct BitXor {
  C operator()(C a, C b) const { return a ^ b; }
};

template <class T, class C, class F>
void fold(T* dst, const void* const* srcs, int n, int64_t count, F f, bool average) {
  if (count <= kFew) {  // small all-reduces: the same folds, without the blocks' loop set-up
    for (int64_t j = 0; j < count; ++j) {
      C a = static_cast<C>(static_cast<const T*>(srcs[0])[j]);
      for (int k = 1; k < n; ++k) a = f(a, static_cast<C>(static_cast<const T*>(srcs[k])[j]));
      if constexpr (!std::is_integral_v<C>) {
        if (average) a = a / static_cast<C>(n);
      }
      dst[j] = static_cast<T>(a);
    }
    return;
  }
  C acc[kBlock];
  for (int64_t base = 0; base < count; base += kBlock) {
    const int64_t len = std::min(kBlock, count - base);
    const T* s0 = static_cast<const T*>(srcs[0]) + base;
    for (int64_t j = 0; j < len; ++j) acc[j] = static_cast<C>(s0[j]);
    for (int k = 1; k < n; ++k) {
      const T* s = static_cast<const T*>(srcs[k]) + base;
      for (int64_t j = 0; j < len; ++j) acc[j] = f(acc[j], static_cast<C>(s[j]));
    }
    if constexpr (!std::is_integral_v<C>) {
      if (average) {
        const C divisor = static_cast<C>(n);
        for (int64_t j = 0; j < len; ++j) acc[j] = acc[j] / divisor;
      }
    }
    T* d = dst + base;
    for (int64_t j = 0; j < len; ++j) d[j] = static_cast<T>(acc[j]);
  }
}

// Floating types (C = float for narrow ones, T itself for float/double).
template <class T, class C>
void reduce_float(ReduceOp op, void* dst, const void* const* srcs, int n, int64_t count) {
  T* d = static_cast<T*>(dst);
  switch (op) {
    case ReduceOp::SUM:
      return fold<T, C>(d, srcs, n, count, Sum<C>{}, false);
    case ReduceOp::AVG:
      return fold<T, C>(d, srcs, n, count, Sum<C>{}, true);
    case ReduceOp::PRODUCT:
      return fold<T, C>(d, srcs, n, count, Prod<C>{}, false);
    case ReduceOp::MIN:
      return fold<T, C>(d, srcs, n, count, Min<C>{}, false);
    case ReduceOp::MAX:
      return fold<T, C>(d, srcs, n, count, Max<C>{}, false);
    default:
      TS_INTERNAL_ASSERT(false);
  }
}

template <class T>
void reduce_complex(ReduceOp op, void* dst, const void* const* srcs, int n, int64_t count) {
  T* d = static_cast<T*>(dst);
  switch (op) {
    case ReduceOp::SUM:
      return fold<T, T>(d, srcs, n, count, Sum<T>{}, false);
    case ReduceOp::AVG:
      return fold<T, T>(d, srcs, n, count, Sum<T>{}, true);
    case ReduceOp::PRODUCT:
      return fold<T, T>(d, srcs, n, count, Prod<T>{}, false);
    default:
      TS_INTERNAL_ASSERT(false);
  }
}

template <class T>
void reduce_int(ReduceOp op, void* dst, const void* const* srcs, int n, int64_t count) {
  using U = std::make_unsigned_t<T>;
  // Same size and representation: SUM/PRODUCT run on the unsigned twin so they wrap.
  U* du = static_cast<U*>(dst);
  T* d = static_cast<T*>(dst);
  switch (op) {
    case ReduceOp::SUM:
      return fold<U, U>(du, srcs, n, count, Sum<U>{}, false);
    case ReduceOp::PRODUCT:
      return fold<U, U>(
          du, srcs, n, count, [](U a, U b) { return static_cast<U>(a * b); }, false);
    case ReduceOp::MIN:
      return fold<T, T>(d, srcs, n, count, Min<T>{}, false);
    case ReduceOp::MAX:
      return fold<T, T>(d, srcs, n, count, Max<T>{}, false);
    case ReduceOp::BAND:
      return fold<T, T>(d, srcs, n, count, BitAnd<T>{}, false);
    case ReduceOp::BOR:
      return fold<T, T>(d, srcs, n, count, BitOr<T>{}, false);
    case ReduceOp::BXOR:
      return fold<T, T>(d, srcs, n, count, BitXor<T>{}, false);
    default:
      TS_INTERNAL_ASSERT(false);
  }
}

// bool is stored as one byte holding 0 or 1.
void reduce_bool(ReduceOp op, void* dst, const void* const* srcs, int n, int64_t count) {
  auto* d = static_cast<uint8_t*>(dst);
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::MAX:
    case ReduceOp::BOR:
      return fold<uint8_t, uint8_t>(d, srcs, n, count, BitOr<uint8_t>{}, false);
    case ReduceOp::PRODUCT:
    case ReduceOp::MIN:
    case ReduceOp::BAND:
      return fold<uint8_t, uint8_t>(d, srcs, n, count, BitAnd<uint8_t>{}, false);
    case ReduceOp::BXOR:
      return fold<uint8_t, uint8_t>(d, srcs, n, count, BitXor<uint8_t>{}, false);
    default:
      TS_INTERNAL_ASSERT(false);
  }
}

}  // namespace

void check_reducible(std::string_view op_name, ScalarType dtype, ReduceOp op) {
  const bool bitwise = op == ReduceOp::BAND || op == ReduceOp::BOR || op == ReduceOp::BXOR;
  TS_CHECK(!is_packed(dtype) && dtype != ScalarType::Undefined, TypeError,
           "{}(): dtype {} cannot be reduced (it is a packed storage format); only data "
           "movement ops accept it",
           op_name, dtype);
  TS_CHECK(!bitwise || is_integral(dtype, /*include_bool=*/true), TypeError,
           "{}(): cannot use ReduceOp.{} with non-integral dtype {}", op_name, reduce_op_name(op),
           dtype);
  TS_CHECK(op != ReduceOp::AVG || is_floating_point(dtype) || is_complex(dtype), TypeError,
           "{}(): ReduceOp.AVG needs a floating or complex dtype, but got {}", op_name, dtype);
  TS_CHECK(
      !is_complex(dtype) || op == ReduceOp::SUM || op == ReduceOp::AVG || op == ReduceOp::PRODUCT,
      TypeError, "{}(): ReduceOp.{} is not defined for complex dtype {}", op_name,
      reduce_op_name(op), dtype);
}

void reduce_into(ScalarType dtype, ReduceOp op, void* dst, const void* const* srcs, int n,
                 int64_t count) {
  switch (dtype) {
    case ScalarType::Bool:
      return reduce_bool(op, dst, srcs, n, count);
    case ScalarType::UInt8:
      return reduce_int<uint8_t>(op, dst, srcs, n, count);
    case ScalarType::Int8:
      return reduce_int<int8_t>(op, dst, srcs, n, count);
    case ScalarType::Int16:
      return reduce_int<int16_t>(op, dst, srcs, n, count);
    case ScalarType::Int32:
      return reduce_int<int32_t>(op, dst, srcs, n, count);
    case ScalarType::Int64:
      return reduce_int<int64_t>(op, dst, srcs, n, count);
    case ScalarType::Float16:
      return reduce_float<Half, float>(op, dst, srcs, n, count);
    case ScalarType::BFloat16:
      return reduce_float<BFloat16, float>(op, dst, srcs, n, count);
    case ScalarType::Float32:
      return reduce_float<float, float>(op, dst, srcs, n, count);
    case ScalarType::Float64:
      return reduce_float<double, double>(op, dst, srcs, n, count);
    case ScalarType::Complex64:
      return reduce_complex<complex64>(op, dst, srcs, n, count);
    case ScalarType::Complex128:
      return reduce_complex<complex128>(op, dst, srcs, n, count);
    case ScalarType::Float8_e4m3fn:
      return reduce_float<Float8_e4m3fn, float>(op, dst, srcs, n, count);
    case ScalarType::Float8_e5m2:
      return reduce_float<Float8_e5m2, float>(op, dst, srcs, n, count);
    default:
      TS_THROW(TypeError, "reduce: dtype {} cannot be reduced", dtype);
  }
}

}  // namespace tessera::distributed
