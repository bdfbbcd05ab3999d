// Device: where a tensor's memory lives. Tessera runs on the CPU; the type leaves room for
// accelerators without assuming them away.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

enum class DeviceType : int8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = -1;
  constexpr Device() = default;
  constexpr Device(DeviceType t, int16_t i = -1) : type(t), index(i) {}  // NOLINT
  bool is_cpu() const { return type == DeviceType::CPU; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr DeviceType kCPU = DeviceType::CPU;

}  // namespace tessera
