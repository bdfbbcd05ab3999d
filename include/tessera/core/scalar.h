// Scalar: a number passed to an op (`x.add(2)`, `full({2}, 0.5)`), carrying its category
// (bool, integer, floating, complex) so type promotion treats it like a Python number.
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tessera/core/dtype.h"

namespace tessera {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double, Complex };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool) { i_ = v; }  // NOLINT: implicit, as c10::Scalar
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int) {  // NOLINT
    i_ = static_cast<int64_t>(v);
  }
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Double) {  // NOLINT
    d_ = static_cast<double>(v);
  }
  Scalar(Half v) : Scalar(static_cast<double>(static_cast<float>(v))) {}           // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<double>(static_cast<float>(v))) {}       // NOLINT
  Scalar(Float8_e4m3fn v) : Scalar(static_cast<double>(static_cast<float>(v))) {}  // NOLINT
  Scalar(Float8_e5m2 v) : Scalar(static_cast<double>(static_cast<float>(v))) {}    // NOLINT
  template <class T>
  Scalar(std::complex<T> v) : kind_(Kind::Complex) {  // NOLINT
    re_ = static_cast<double>(v.real());
    im_ = static_cast<double>(v.imag());
  }

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating_point() const { return kind_ == Kind::Double; }
  bool is_complex() const { return kind_ == Kind::Complex; }

  // The dtype a Python number of this kind gets: bool, int64, the default float dtype, or
  // its complex counterpart.
  ScalarType default_dtype() const;

  bool to_bool() const;
  int64_t to_int64() const;
  double to_double() const;
  std::complex<double> to_complex() const;
  // Value converted to T (any element type Tensor supports), with the same rules as a
  // tensor conversion.
  template <class T>
  T to() const;

  Scalar operator-() const;
  std::string repr() const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
    struct {
      double re_, im_;
    };
  };
};

}  // namespace tessera
