// TensorOptions: dtype and device for factories, as in libtorch:
//   tessera::zeros({2, 3}, tessera::kFloat32)
//   tessera::ones({4}, tessera::TensorOptions().dtype(tessera::kInt64))
#pragma once

#include <optional>

#include "tessera/core/device.h"
#include "tessera/core/dtype.h"

namespace tessera {

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType t) : dtype_(t) {}  // NOLINT: implicit, as in libtorch
  TensorOptions(Device d) : device_(d) {}     // NOLINT

  TensorOptions dtype(ScalarType t) const {
    TensorOptions o = *this;
    o.dtype_ = t;
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  bool has_dtype() const { return dtype_.has_value(); }
  // The dtype, or the default float dtype when none was given.
  ScalarType dtype() const { return dtype_.value_or(get_default_dtype()); }
  std::optional<ScalarType> dtype_opt() const { return dtype_; }
  Device device() const { return device_; }

 private:
  std::optional<ScalarType> dtype_;
  Device device_{kCPU};
};

inline TensorOptions dtype(ScalarType t) {
  return TensorOptions(t);
}

}  // namespace tessera
