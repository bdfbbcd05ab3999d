// dtype properties, promotion, and the narrow-float conversions (exhaustive where cheap).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tessera/tessera.h"

namespace ts = tessera;

TEST(Dtype, NamesAndSizes) {
  EXPECT_EQ(ts::dtype_name(ts::kFloat32), "float32");
  EXPECT_EQ(ts::dtype_name(ts::kFloat4_e2m1fn_x2), "float4_e2m1fn_x2");
  EXPECT_EQ(ts::element_size(ts::kComplex128), 16);
  EXPECT_EQ(ts::element_size(ts::kFloat8_e5m2), 1);
  EXPECT_EQ(ts::dtype_from_name("torch.bfloat16"), ts::kBFloat16);
  EXPECT_EQ(ts::dtype_from_name("half"), ts::kFloat16);
  EXPECT_THROW(ts::dtype_from_name("float13"), ts::TypeError);
}

TEST(Dtype, PromotionMatchesPyTorch) {
  using namespace ts;
  EXPECT_EQ(promote_types(kUInt8, kInt8), kInt16);
  EXPECT_EQ(promote_types(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kInt64, kFloat16), kFloat16);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kBFloat16, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kComplex64, kFloat64), kComplex128);
  EXPECT_EQ(promote_types(kComplex64, kInt64), kComplex64);
  EXPECT_EQ(promote_types(kComplex128, kFloat16), kComplex128);
  EXPECT_THROW(promote_types(kFloat8_e4m3fn, kFloat32), TypeError);
  EXPECT_EQ(promote_types(kFloat8_e5m2, kFloat8_e5m2), kFloat8_e5m2);
  EXPECT_TRUE(can_cast(kInt64, kFloat16));
  EXPECT_FALSE(can_cast(kFloat32, kInt64));
  EXPECT_FALSE(can_cast(kComplex64, kFloat64));
  EXPECT_FALSE(can_cast(kInt8, kBool));
}

TEST(Dtype, ResultTypeWithScalarsAndZeroDim) {
  using namespace ts;
  Tensor i32 = ones({3}, kInt32), f16 = ones({3}, kFloat16), u8 = ones({3}, kUInt8);
  EXPECT_EQ(result_type(i32, Scalar(2.5)), kFloat32);
  EXPECT_EQ(result_type(f16, Scalar(2.5)), kFloat16);
  EXPECT_EQ(result_type(i32, Scalar(1000)), kInt32);
  EXPECT_EQ(result_type(u8, scalar_tensor(1, kInt8)), kUInt8);  // 0-dim: category only
  EXPECT_EQ(result_type(u8, ones({1}, kInt8)), kInt16);
  EXPECT_EQ(result_type(f16, Scalar(std::complex<double>(1, 1))), kComplex64);
  EXPECT_EQ(result_type(ones({2}, kFloat64), scalar_tensor(1, kComplex64)), kComplex128);
  EXPECT_EQ(result_type(ones({2}, kBool), Scalar(3)), kInt64);
}

TEST(Half, ExhaustiveRoundTripThroughFloat) {
  // Every float16 bit pattern converts to float and back unchanged (NaNs stay NaN).
  for (uint32_t b = 0; b < 65536; ++b) {
    const ts::Half h(ts::from_bits, static_cast<uint16_t>(b));
    const float f = h;
    const ts::Half back(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(back)));
    } else {
      ASSERT_EQ(back.x, b) << "bits " << b;
    }
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(ts::Half(1.0f + 0x1p-11f).x, ts::Half(1.0f).x);                // tie -> even
  EXPECT_EQ(ts::Half(1.0f + 3 * 0x1p-11f).x, ts::Half(1.0f + 0x1p-9f).x);  // tie -> even (up)
  EXPECT_EQ(ts::Half(65520.0f).x, 0x7c00);                                 // rounds to inf
  EXPECT_EQ(ts::Half(65519.0f).x, 0x7bff);
  EXPECT_EQ(ts::Half(0x1p-25f).x, 0x0000);  // half of the smallest subnormal: tie -> 0
  EXPECT_EQ(ts::Half(0x1p-24f * 1.5f).x, 0x0002);
  EXPECT_EQ(ts::Half(-0.0f).x, 0x8000);
}

TEST(BFloat16, RoundingAndNaN) {
  EXPECT_EQ(ts::BFloat16(1.0f).x, 0x3f80);
  EXPECT_EQ(ts::BFloat16(std::bit_cast<float>(0x3f808000u)).x, 0x3f80);  // tie -> even
  EXPECT_EQ(ts::BFloat16(std::bit_cast<float>(0x3f818000u)).x, 0x3f82);  // tie -> even (up)
  EXPECT_EQ(ts::BFloat16(NAN).x, 0x7fc0);
  EXPECT_TRUE(std::isinf(static_cast<float>(ts::BFloat16(3.4e38f * 2))));
  for (uint32_t b = 0; b < 65536; ++b) {
    const ts::BFloat16 h(ts::from_bits, static_cast<uint16_t>(b));
    const float f = h;
    if (!std::isnan(f)) {
      ASSERT_EQ(ts::BFloat16(f).x, b);
    }
  }
}

TEST(Float8, E4m3fnMatchesPyTorchSemantics) {
  EXPECT_EQ(static_cast<float>(ts::Float8_e4m3fn(448.0f)), 448.0f);
  EXPECT_EQ(static_cast<float>(ts::Float8_e4m3fn(460.0f)), 448.0f);  // rounds down to max
  EXPECT_EQ(static_cast<float>(ts::Float8_e4m3fn(464.0f)), 448.0f);  // tie -> even (448)
  EXPECT_TRUE(std::isnan(static_cast<float>(ts::Float8_e4m3fn(470.0f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(ts::Float8_e4m3fn(INFINITY))));
  EXPECT_EQ(ts::Float8_e4m3fn(-INFINITY).x, 0xff);
  EXPECT_EQ(static_cast<float>(ts::Float8_e4m3fn(0x1p-9f)), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(static_cast<float>(ts::Float8_e4m3fn(0x1p-10f)), 0.0f);    // tie -> 0
  for (int b = 0; b < 256; ++b) {
    const ts::Float8_e4m3fn v(ts::from_bits, static_cast<uint8_t>(b));
    const float f = v;
    if (!std::isnan(f)) {
      ASSERT_EQ(ts::Float8_e4m3fn(f).x, b) << b;
    }
  }
}

TEST(Float8, E5m2) {
  EXPECT_EQ(static_cast<float>(ts::Float8_e5m2(57344.0f)), 57344.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(ts::Float8_e5m2(61440.0f))));  // tie -> inf
  EXPECT_EQ(static_cast<float>(ts::Float8_e5m2(60000.0f)), 57344.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(ts::Float8_e5m2(NAN))));
  for (int b = 0; b < 256; ++b) {
    const ts::Float8_e5m2 v(ts::from_bits, static_cast<uint8_t>(b));
    const float f = v;
    if (!std::isnan(f)) {
      ASSERT_EQ(ts::Float8_e5m2(f).x, b) << b;
    }
  }
}

TEST(Float4, E2m1PackingAndRounding) {
  const float expect[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    const ts::Float4_e2m1fn_x2 p(expect[c], -expect[c]);
    EXPECT_EQ(p.lo(), expect[c]);
    EXPECT_EQ(p.hi(), -expect[c]);
  }
  EXPECT_EQ(ts::Float4_e2m1fn_x2(5.0f, 0).lo(), 4.0f);  // tie -> even code
  EXPECT_EQ(ts::Float4_e2m1fn_x2(5.5f, 0).lo(), 6.0f);
  EXPECT_EQ(ts::Float4_e2m1fn_x2(100.0f, 0).lo(), 6.0f);  // saturates
  EXPECT_EQ(ts::Float4_e2m1fn_x2(0.75f, 0).lo(), 1.0f);   // tie -> even code (1.0)
  EXPECT_EQ(ts::Float4_e2m1fn_x2(0.25f, 0).lo(), 0.0f);   // tie -> 0
  EXPECT_EQ(ts::Float4_e2m1fn_x2(1.0f, 2.0f).x, 0x42);    // low nibble first
}
