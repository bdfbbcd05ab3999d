// Packing with decode (layout and contract: src/gemm/pack_lowp.h). The common bfloat16 cases,
// k contiguous (row-major A, column-major B) and lanes contiguous (row-major B), go to the
// per-ISA pair packer (gemm/kernels/pack_kernels.h). Everything else goes element by element
// through a decoder chosen once per panel.
#include "gemm/pack_lowp.h"

#include <array>
#include <bit>
#include <cstring>

#include "gemm/kernels/pack_kernels.h"
#include "tessera/core/half.h"

namespace tessera::gemm {

namespace {

struct Tables {
  std::array<float, 256> e4m3{}, e5m2{};
  std::array<float, 16> e2m1{};
  Tables() {
    for (int x = 0; x < 256; ++x) {
      e4m3[x] = float(Float8_e4m3fn(from_bits, static_cast<uint8_t>(x)));
      e5m2[x] = float(Float8_e5m2(from_bits, static_cast<uint8_t>(x)));
    }
    for (int x = 0; x < 16; ++x) e2m1[x] = detail::e2m1_bits_to_f32(static_cast<uint8_t>(x));
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

// Decoders: value(l, p) for absolute lane and step. One struct per format so that the
// packing loops below are instantiated without a per-element switch.
struct Bf16Dec {
  const uint16_t* d;
  int64_t ls, ks;
  float operator()(int64_t l, int64_t p) const {
    return std::bit_cast<float>(static_cast<uint32_t>(d[l * ls + p * ks]) << 16);
  }
};
struct F16Dec {
  const uint16_t* d;
  int64_t ls, ks;
  float operator()(int64_t l, int64_t p) const {
    return detail::f16_bits_to_f32(d[l * ls + p * ks]);
  }
};
struct F8Dec {
  const uint8_t* d;
  int64_t ls, ks;
  const float* table;
  float operator()(int64_t l, int64_t p) const { return table[d[l * ls + p * ks]]; }
};
struct F4Dec {
  const uint8_t* d;
  int64_t ls, ks;
  const uint8_t* s;
  int64_t s_ls, s_ks;
  const float* e2m1;
  const float* e4m3;
  float operator()(int64_t l, int64_t p) const {
    const int64_t e = l * ls + p * ks;
    const int nib = (d[e >> 1] >> ((e & 1) * 4)) & 0xf;
    return e2m1[nib] * e4m3[s[l * s_ls + (p >> 4) * s_ks]];
  }
};

template <class F>
decltype(auto) with_decoder(const LaneView& v, F&& f) {
  const Tables& t = tables();
  switch (v.dtype) {
    case ScalarType::BFloat16:
      return f(Bf16Dec{static_cast<const uint16_t*>(v.data), v.ls, v.ks});
    case ScalarType::Float16:
      return f(F16Dec{static_cast<const uint16_t*>(v.data), v.ls, v.ks});
    case ScalarType::Float8_e4m3fn:
      return f(F8Dec{static_cast<const uint8_t*>(v.data), v.ls, v.ks, t.e4m3.data()});
    case ScalarType::Float8_e5m2:
      return f(F8Dec{static_cast<const uint8_t*>(v.data), v.ls, v.ks, t.e5m2.data()});
    default:
      return f(F4Dec{static_cast<const uint8_t*>(v.data), v.ls, v.ks,
                     static_cast<const uint8_t*>(v.scale), v.scale_ls, v.scale_ks, t.e2m1.data(),
                     t.e4m3.data()});
  }
}

// Bits of an exactly representable bfloat16 value.
inline uint16_t bf16_bits(float x) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
}

template <class D>
void f32_panel(const D& dec, int64_t l0, int64_t p0, int64_t valid, int64_t width, int64_t kc,
               float* dst) {
  for (int64_t p = 0; p < kc; ++p) {
    float* d = dst + p * width;
    for (int64_t l = 0; l < valid; ++l) d[l] = dec(l0 + l, p0 + p);
    for (int64_t l = valid; l < width; ++l) d[l] = 0.0f;
  }
}

template <class D>
void pair_panel(const D& dec, int64_t l0, int64_t p0, int64_t valid, int64_t width, int64_t kc,
                uint16_t* dst) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t q = 0; q < kp; ++q) {
    uint16_t* d = dst + q * width * 2;
    const bool second = 2 * q + 1 < kc;
    for (int64_t l = 0; l < valid; ++l) {
      d[2 * l] = bf16_bits(dec(l0 + l, p0 + 2 * q));
      d[2 * l + 1] = second ? bf16_bits(dec(l0 + l, p0 + 2 * q + 1)) : uint16_t{0};
    }
    for (int64_t l = valid; l < width; ++l) d[2 * l] = d[2 * l + 1] = 0;
  }
}

}  // namespace

float lowp_value(const LaneView& v, int64_t l, int64_t p) {
  return with_decoder(v, [&](const auto& dec) { return dec(l, p); });
}

void pack_lowp_f32(const LaneView& v, int64_t l0, int64_t p0, int64_t lanes, int64_t kc,
                   int64_t width, float* dst) {
  with_decoder(v, [&](const auto& dec) {
    for (int64_t r = 0; r < lanes; r += width)
      f32_panel(dec, l0 + r, p0, lanes - r < width ? lanes - r : width, width, kc, dst + r * kc);
  });
}

void pack_lowp_pairs(const LaneView& v, int64_t l0, int64_t p0, int64_t lanes, int64_t kc,
                     int64_t width, uint16_t* dst) {
  const int64_t panel = width * 2 * ((kc + 1) / 2);
  if (v.dtype == ScalarType::BFloat16 && (v.ks == 1 || v.ls == 1)) {
    const cpu::PackPairsFn pairs = TS_DISPATCH(pack_kernels).pairs_bf16;
    const uint16_t* base = static_cast<const uint16_t*>(v.data) + l0 * v.ls + p0 * v.ks;
    for (int64_t r = 0; r < lanes; r += width)
      pairs(lanes - r < width ? lanes - r : width, width, kc, base + r * v.ls, v.ls, v.ks,
            dst + (r / width) * panel);
    return;
  }
  with_decoder(v, [&](const auto& dec) {
    for (int64_t r = 0; r < lanes; r += width)
      pair_panel(dec, l0 + r, p0, lanes - r < width ? lanes - r : width, width, kc,
                 dst + (r / width) * panel);
  });
}

}  // namespace tessera::gemm
