// Packing with decode (layout and contract: src/gemm/pack_lowp.h). The common bfloat16 cases,
// k contiguous (row-major A, column-major B) and lanes contiguous (row-major B), go to the
// per-ISA pair packer (gemm/kernels/pack_kernels.h). Everything else goes element by element
// through a decoder chosen once per panel.
#include "gemm/pack_lowp.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <vector>

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

// Steps (an even number) packed across every panel before the next ones.
constexpr int64_t kStepBlock = 32;

void pack_lowp_pairs(const LaneView& v, int64_t l0, int64_t p0, int64_t lanes, int64_t kc,
                     int64_t width, uint16_t* dst, int64_t kcs) {
  const int64_t filled = width * 2 * ((kc + 1) / 2);
  const int64_t panel = kcs < 0 ? filled : width * kcs;
  const auto pad = [&](uint16_t* p) { std::fill(p + filled, p + panel, uint16_t{0}); };
  if (v.dtype == ScalarType::BFloat16 && (v.ks == 1 || v.ls == 1)) {
    const cpu::PackPairsFn pairs = TS_DISPATCH(pack_kernels).pairs_bf16;
    const uint16_t* base = static_cast<const uint16_t*>(v.data) + l0 * v.ls + p0 * v.ks;
    // Lanes contiguous (row-major B): a panel's column strip walked down all kc rows reads one
    // line per row, rows a whole row length apart; kStepBlock rows at a time across every
    // panel read each row's lines while they are in cache (bfloat16 B of 1024 x 1024, one
    // Xeon thread: 0.2 ms per pack as strips, 10% of a 1024^3 AMX product).
    const int64_t block = v.ks == 1 ? kc : kStepBlock;
    for (int64_t p = 0; p < kc; p += block) {
      const int64_t steps = std::min(block, kc - p);
      for (int64_t r = 0; r < lanes; r += width)
        pairs(lanes - r < width ? lanes - r : width, width, steps, base + r * v.ls + p * v.ks, v.ls,
              v.ks, dst + (r / width) * panel + p * width);
    }
    for (int64_t r = 0; r < lanes; r += width) pad(dst + (r / width) * panel);
    return;
  }
  with_decoder(v, [&](const auto& dec) {
    for (int64_t r = 0; r < lanes; r += width) {
      uint16_t* d = dst + (r / width) * panel;
      pair_panel(dec, l0 + r, p0, lanes - r < width ? lanes - r : width, width, kc, d);
      pad(d);
    }
  });
}

void pack_lowp_tiles(const LaneView& v, int64_t l0, int64_t p0, int64_t lanes, int64_t kc,
                     int64_t kcs, uint16_t* dst) {
  constexpr int64_t kLanes = 32, kSteps = 32;  // a micro-panel's lanes; a tile row's steps
  const int64_t tiles = kcs / kSteps;
  // Each lane's steps: in place where they are contiguous bfloat16 (kc of them), else decoded
  // into a row of kcs (zero past kc); lanes past `lanes` read a zero row.
  const bool in_place = v.dtype == ScalarType::BFloat16 && v.ks == 1;
  thread_local std::vector<uint16_t> rows, zeros;  // zeros: never written, only grown
  if (!in_place) rows.resize(static_cast<size_t>(kLanes * kcs));
  if (lanes % kLanes != 0 && zeros.size() < static_cast<size_t>(kcs))
    zeros.resize(static_cast<size_t>(kcs), 0);
  const uint16_t* src[kLanes];
  int64_t valid[kLanes];
  for (int64_t l = 0; l < lanes; l += kLanes) {
    for (int64_t r = 0; r < kLanes; ++r) {
      if (l + r >= lanes) {
        src[r] = zeros.data(), valid[r] = kcs;
      } else if (in_place) {
        src[r] = static_cast<const uint16_t*>(v.data) + (l0 + l + r) * v.ls + p0, valid[r] = kc;
      } else {
        pack_lowp_pairs(v, l0 + l + r, p0, 1, kc, 1, rows.data() + r * kcs, kcs);
        src[r] = rows.data() + r * kcs, valid[r] = kcs;
      }
    }
    // Tile by tile, so the micro-panel is written in order: two tiles of 16 lanes x 32 steps
    // for every 32 steps (written lane by lane, each lane's 64 bytes 2 KiB apart, the panel
    // packed at 5 GB/s: 9% of a 2048^3 AMX product).
    uint16_t* d = dst + l * kcs;
    for (int64_t t = 0; t < tiles; ++t) {
      for (int64_t r = 0; r < kLanes; ++r, d += kSteps) {
        const int64_t n = std::clamp<int64_t>(valid[r] - t * kSteps, 0, kSteps);
        if (n == kSteps) {
          std::memcpy(d, src[r] + t * kSteps, kSteps * sizeof(uint16_t));
          continue;
        }
        if (n > 0)  // (src[r] + t * kSteps lies past the lane's steps otherwise)
          std::memcpy(d, src[r] + t * kSteps, static_cast<size_t>(n) * sizeof(uint16_t));
        std::fill(d + n, d + kSteps, uint16_t{0});
      }
    }
  }
}

}  // namespace tessera::gemm
