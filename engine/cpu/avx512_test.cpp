// The helpers the AVX-512 kernels share (engine/cpu/avx512.h), where the CPU has AVX-512 VNNI.
#include <gtest/gtest.h>

#include "engine/io/cpu-features.h"

#if defined(__x86_64__)
#include <cmath>
#include <cstring>
#include <random>

#include "engine/cpu/avx512.h"

namespace hearth::cpu {
namespace {

// Lane j of hsum512_x16(v) against hsum512(v[j]).
HEARTH_AVX512 void expect_sums_of_16_equal_each_sum(const float (&values)[16][16]) {
  __m512 v[16];
  for (int j = 0; j < 16; ++j) v[j] = _mm512_loadu_ps(values[j]);
  float together[16];
  _mm512_storeu_ps(together, hsum512_x16(v));
  for (int j = 0; j < 16; ++j) {
    const float alone = hsum512(v[j]);
    // Bits, not values: the attention kernel promises the same results as one sum at a time.
    uint32_t a, b;
    std::memcpy(&a, &alone, 4);
    std::memcpy(&b, &together[j], 4);
    ASSERT_EQ(a, b) << "vector " << j << ": " << alone << " alone, " << together[j] << " together";
  }
}

}  // namespace
}  // namespace hearth::cpu
#endif

namespace hearth::cpu {
namespace {

TEST(avx512, sixteen_lane_sums_taken_together_equal_each_taken_alone) {
#if defined(__x86_64__)
  if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  // Magnitudes from 2^-20 to 2^20 and both signs, so that any other order of the additions
  // rounds differently somewhere.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  float values[16][16];
  for (int round = 0; round < 2000; ++round) {
    for (auto& row : values)
      for (float& x : row) x = std::ldexp(mantissa(rng), exponent(rng));
    expect_sums_of_16_equal_each_sum(values);
    if (HasFatalFailure()) return;
  }
  // Each vector distinct in one lane only, so a lane taken from the wrong vector shows.
  for (int j = 0; j < 16; ++j)
    for (int l = 0; l < 16; ++l) values[j][l] = l == j ? float(j + 1) : 0.0f;
  expect_sums_of_16_equal_each_sum(values);
#else
  GTEST_SKIP() << "AVX-512 is x86 only";
#endif
}

}  // namespace
}  // namespace hearth::cpu
