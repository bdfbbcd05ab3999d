#include "tessera/core/dtype.h"

#include <array>
#include <atomic>

#include "tessera/core/error.h"

namespace tessera {

namespace {

struct DtypeInfo {
  std::string_view name;
  int64_t size;
};

constexpr std::array<DtypeInfo, kNumScalarTypes> kInfo = {{
    {"bool", 1},
    {"uint8", 1},
    {"int8", 1},
    {"int16", 2},
    {"int32", 4},
    {"int64", 8},
    {"float16", 2},
    {"bfloat16", 2},
    {"float32", 4},
    {"float64", 8},
    {"complex64", 8},
    {"complex128", 16},
    {"float8_e4m3fn", 1},
    {"float8_e5m2", 1},
    {"float4_e2m1fn_x2", 1},
}};

std::atomic<ScalarType> g_default_dtype{ScalarType::Float32};

int index_of(ScalarType t) {
  const int i = static_cast<int>(t);
  TS_CHECK(i >= 0 && i < kNumScalarTypes, TypeError, "invalid dtype (enum value {})", i);
  return i;
}

}  // namespace

int64_t element_size(ScalarType t) {
  return kInfo[index_of(t)].size;
}

std::string_view dtype_name(ScalarType t) {
  if (t == ScalarType::Undefined) return "undefined";
  return kInfo[index_of(t)].name;
}

ScalarType dtype_from_name(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (kInfo[i].name == name) return static_cast<ScalarType>(i);
  struct Alias {
    std::string_view name;
    ScalarType type;
  };
  static constexpr Alias kAliases[] = {
      {"float", kFloat32}, {"double", kFloat64}, {"half", kFloat16},     {"long", kInt64},
      {"int", kInt32},     {"short", kInt16},    {"cfloat", kComplex64}, {"cdouble", kComplex128},
      {"byte", kUInt8},    {"char", kInt8},      {"bf16", kBFloat16},    {"fp16", kFloat16},
      {"fp32", kFloat32},  {"fp64", kFloat64},
  };
  for (const auto& a : kAliases)
    if (a.name == name) return a.type;
  TS_THROW(TypeError, "dtype_from_name(): unknown dtype '{}'", name);
}

ScalarType to_complex_type(ScalarType t) {
  switch (t) {
    case kFloat16:
    case kBFloat16:
    case kFloat32:
    case kComplex64:
      return kComplex64;
    case kFloat64:
    case kComplex128:
      return kComplex128;
    default:
      TS_THROW(TypeError, "to_complex_type(): expected a floating point dtype, but got {}", t);
  }
}

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  TS_CHECK(a != ScalarType::Undefined && b != ScalarType::Undefined, TypeError,
           "promote_types(): undefined dtype");
  TS_CHECK(!is_float8(a) && !is_float8(b) && !is_packed(a) && !is_packed(b), TypeError,
           "promote_types(): promotion for {} and {} is not supported (float8/float4 only "
           "combine with themselves; convert explicitly)",
           a, b);
  if (a == kBool) return b;
  if (b == kBool) return a;
  if (is_complex(a) || is_complex(b)) {
    const ScalarType r = promote_types(to_real_type(a), to_real_type(b));
    return is_integral(r, false) ? kComplex64 : to_complex_type(r);
  }
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
    return element_size(a) >= element_size(b) ? a : b;
  }
  // Both integral. uint8 with a signed type needs the next wider signed type.
  if (a == kUInt8 || b == kUInt8) {
    const ScalarType s = a == kUInt8 ? b : a;
    return s == kInt8 ? kInt16 : s;
  }
  return element_size(a) >= element_size(b) ? a : b;
}

bool can_cast(ScalarType from, ScalarType to) {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating_point(from) && is_integral(to, false)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

ScalarType get_default_dtype() {
  return g_default_dtype.load(std::memory_order_relaxed);
}

void set_default_dtype(ScalarType t) {
  TS_CHECK(t == kFloat32 || t == kFloat64 || t == kFloat16 || t == kBFloat16, TypeError,
           "set_default_dtype(): expected a floating point dtype, but got {}", t);
  g_default_dtype.store(t, std::memory_order_relaxed);
}

}  // namespace tessera
