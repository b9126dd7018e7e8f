// The CPU kernels against plain double-precision arithmetic on the dequantized values, for every
// weight type and row lengths with and without SIMD tails; and the F16/BF16 conversions.
#include "engine/cpu/vec-dot.h"

#include <cpuid.h>
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace hearth::cpu {
namespace {

std::vector<float> random_row(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

class kernels : public ::testing::TestWithParam<tensor_type> {};

TEST_P(kernels, dot_matches_double_precision_on_the_converted_values) {
  const tensor_type t = GetParam();
  const type_kernels* k = kernels_for(t);
  ASSERT_NE(k, nullptr);
  const type_kernels* xk = kernels_for(k->vec_dot_type);
  ASSERT_NE(xk, nullptr);
  std::mt19937 rng(7);
  const int64_t block = t == tensor_type::q8_0 ? 32 : 1;
  for (int64_t n : {32, 64, 96, 256, 288, 4096}) {
    if (block == 1) n += 3;  // F32/F16/BF16 rows need not fill a SIMD register
    const auto w = random_row(rng, n), x = random_row(rng, n);
    std::vector<uint8_t> wq(size_t(tensor_type_row_bytes(t, n))),
        xq(size_t(tensor_type_row_bytes(k->vec_dot_type, n)));
    k->from_float(w.data(), wq.data(), n);
    xk->from_float(x.data(), xq.data(), n);
    std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
    k->to_float(wq.data(), wd.data(), n);
    xk->to_float(xq.data(), xd.data(), n);
    double want = 0, scale = 0;
    for (int64_t i = 0; i < n; ++i)
      want += double(wd[size_t(i)]) * xd[size_t(i)],
          scale += std::fabs(wd[size_t(i)] * xd[size_t(i)]);
    const float got = k->vec_dot(n, wq.data(), xq.data());
    EXPECT_NEAR(got, want, 1e-5 * scale + 1e-6) << tensor_type_name(t) << " n=" << n;
    // The conversion itself loses at most the type's precision.
    double err = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i)
      err += std::pow(wd[size_t(i)] - w[size_t(i)], 2), norm += std::pow(w[size_t(i)], 2);
    const double bound = t == tensor_type::f32    ? 0
                         : t == tensor_type::f16  ? 1e-6
                         : t == tensor_type::bf16 ? 3e-5
                                                  : 5e-4;
    EXPECT_LE(err / norm, bound) << tensor_type_name(t);
  }
}

INSTANTIATE_TEST_SUITE_P(all, kernels,
                         ::testing::Values(tensor_type::f32, tensor_type::f16, tensor_type::bf16,
                                           tensor_type::q8_0),
                         [](const auto& param_info) {
                           return std::string(tensor_type_name(param_info.param));
                         });

TEST(conversions, every_half_survives_a_round_trip_through_float) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
}

__attribute__((target("f16c"))) uint16_t hardware_fp16(float f) {
  return uint16_t(_cvtss_sh(f, 0));
}

TEST(conversions, float_to_half_rounds_as_the_hardware_does) {
  // Asks CPUID itself: the portable-kernel run of this test turns cpu_has_avx2() off.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !((ecx >> 29) & 1))
    GTEST_SKIP() << "no F16C on this CPU";
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), hardware_fp16(f)) << f;
  }
}

TEST(conversions, bfloat16_rounds_to_nearest_even) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  uint32_t halfway = 0x3f808000;  // exactly between 0x3f80 and 0x3f81: rounds to even 0x3f80
  float f;
  std::memcpy(&f, &halfway, 4);
  EXPECT_EQ(fp32_to_bf16(f), 0x3f80);
  halfway = 0x3f818000;  // between 0x3f81 and 0x3f82: rounds to even 0x3f82
  std::memcpy(&f, &halfway, 4);
  EXPECT_EQ(fp32_to_bf16(f), 0x3f82);
}

}  // namespace
}  // namespace hearth::cpu
