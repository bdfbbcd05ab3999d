#include "tessera/core/scalar.h"

#include <cmath>
#include <limits>

#include "core/convert.h"
#include "tessera/core/error.h"

namespace tessera {

ScalarType Scalar::default_dtype() const {
  switch (kind_) {
    case Kind::Bool:
      return kBool;
    case Kind::Int:
      return kInt64;
    case Kind::Double:
      return get_default_dtype();
    case Kind::Complex:
      return get_default_dtype() == kFloat64 ? kComplex128 : kComplex64;
  }
  return kFloat32;
}

bool Scalar::to_bool() const {
  switch (kind_) {
    case Kind::Bool:
    case Kind::Int:
      return i_ != 0;
    case Kind::Double:
      return d_ != 0;
    case Kind::Complex:
      return re_ != 0 || im_ != 0;
  }
  return false;
}

int64_t Scalar::to_int64() const {
  switch (kind_) {
    case Kind::Bool:
    case Kind::Int:
      return i_;
    case Kind::Double:
      return convert<int64_t>(d_);
    case Kind::Complex:
      return convert<int64_t>(re_);
  }
  return 0;
}

double Scalar::to_double() const {
  switch (kind_) {
    case Kind::Bool:
    case Kind::Int:
      return static_cast<double>(i_);
    case Kind::Double:
      return d_;
    case Kind::Complex:
      return re_;
  }
  return 0;
}

std::complex<double> Scalar::to_complex() const {
  if (kind_ == Kind::Complex) return {re_, im_};
  return {to_double(), 0.0};
}

template <class T>
T Scalar::to() const {
  switch (kind_) {
    case Kind::Bool:
      return convert<T>(i_ != 0);
    case Kind::Int:
      return convert<T>(i_);
    case Kind::Double:
      return convert<T>(d_);
    case Kind::Complex:
      return convert<T>(std::complex<double>(re_, im_));
  }
  return T{};
}

#define TS_INSTANTIATE(T) template T Scalar::to<T>() const;
TS_INSTANTIATE(bool)
TS_INSTANTIATE(uint8_t)
TS_INSTANTIATE(int8_t)
TS_INSTANTIATE(int16_t)
TS_INSTANTIATE(int32_t)
TS_INSTANTIATE(int64_t)
TS_INSTANTIATE(Half)
TS_INSTANTIATE(BFloat16)
TS_INSTANTIATE(float)
TS_INSTANTIATE(double)
TS_INSTANTIATE(complex64)
TS_INSTANTIATE(complex128)
TS_INSTANTIATE(Float8_e4m3fn)
TS_INSTANTIATE(Float8_e5m2)
#undef TS_INSTANTIATE

Scalar Scalar::operator-() const {
  switch (kind_) {
    case Kind::Bool:
      TS_THROW(TypeError, "negation of a bool scalar is not supported");
    case Kind::Int:
      return Scalar(static_cast<int64_t>(0ULL - static_cast<uint64_t>(i_)));
    case Kind::Double:
      return Scalar(-d_);
    case Kind::Complex:
      return Scalar(std::complex<double>(-re_, -im_));
  }
  return *this;
}

std::string Scalar::repr() const {
  switch (kind_) {
    case Kind::Bool:
      return i_ ? "True" : "False";
    case Kind::Int:
      return fmt::format("{}", i_);
    case Kind::Double:
      return fmt::format("{}", d_);
    case Kind::Complex:
      return fmt::format("({}{:+}j)", re_, im_);
  }
  return "?";
}

}  // namespace tessera
