// quant.cuh compiled by the host compiler against the CPU backend's dequantization: every value
// of every weight type the CUDA kernels read must be the same float, bit for bit.
#include "backends/cuda/quant.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/kernels.h"
#include "engine/cpu/vec-dot.h"

namespace hearth::cuda {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Equal bits, or both NaN: the CPU's F16 rows go through F16C where the CPU has it, which
// quiets signalling NaNs (the table and quant.cuh keep their payloads as they are).
bool same_float(float a, float b) {
  return bits_of(a) == bits_of(b) || (std::isnan(a) && std::isnan(b));
}

TEST(CudaQuant, HalfToFloatIsExactForAllHalves) {
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(bits_of(half_bits_to_float(h)), bits_of(fp16_to_fp32(uint16_t(h)))) << "half " << h;
}

TEST(CudaQuant, FloatToBf16MatchesTheEngine) {
  std::mt19937 rng(7);
  std::vector<uint32_t> inputs = {0u,          0x80000000u, 0x7f800000u, 0xff800000u,
                                  0x7fc00000u, 0x7f800001u, 0xffbfffffu, 0x00000001u,
                                  0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x3f80ffffu};
  for (int i = 0; i < 1000000; ++i) inputs.push_back(rng());
  for (uint32_t u : inputs) {
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(float_to_bf16_bits(f), fp32_to_bf16(f)) << "bits " << std::hex << u;
  }
}

// Rows of random bytes (every byte pattern is a valid block; F16 scales include infinities and
// NaNs), dequantized by group8 and value() and by the CPU's to_float.
template <tensor_type T>
void expect_same_as_cpu(uint32_t seed) {
  using traits = weight_traits<T>;
  const cpu::type_kernels* k = cpu::kernels_for(T);
  ASSERT_NE(k, nullptr);
  ASSERT_NE(k->to_float, nullptr);
  const int64_t n = 64 * 256;  // a whole number of blocks of every type
  static_assert(n % traits::block_elems == 0);
  std::vector<uint8_t> row(size_t(n / traits::block_elems * traits::block_bytes));
  std::mt19937 rng(seed);
  for (auto& b : row) b = uint8_t(rng());
  if constexpr (T == tensor_type::f32) {
    // Keep some ordinary values among the random bit patterns.
    for (int64_t j = 0; j < n; j += 3) {
      const float f = float(int(rng() % 2001) - 1000) / 37.0f;
      std::memcpy(row.data() + 4 * j, &f, 4);
    }
  }

  std::vector<float> want(static_cast<size_t>(n));
  k->to_float(row.data(), want.data(), n);
  for (int64_t i = 0; i < n / 8; ++i) {
    float v[8];
    traits::group8(row.data(), i, v);
    for (int j = 0; j < 8; ++j)
      ASSERT_TRUE(same_float(v[j], want[size_t(8 * i + j)]))
          << tensor_type_name(T) << " value " << 8 * i + j << ": " << v[j] << " vs "
          << want[size_t(8 * i + j)];
  }
  for (int64_t j = 0; j < n; ++j)
    ASSERT_TRUE(same_float(traits::value(row.data(), j), want[size_t(j)]))
        << tensor_type_name(T) << " value() " << j;
}

TEST(CudaQuant, DequantizationMatchesCpuBitForBit) {
  const tensor_type types[] = {tensor_type::f32,  tensor_type::f16,  tensor_type::bf16,
                               tensor_type::q8_0, tensor_type::q4_0, tensor_type::q4_1,
                               tensor_type::q5_0, tensor_type::q5_1, tensor_type::q4_k,
                               tensor_type::q5_k, tensor_type::q6_k};
  uint32_t seed = 1;
  for (tensor_type t : types) {
    SCOPED_TRACE(std::string(tensor_type_name(t)));
    EXPECT_TRUE(has_weight_kernels(t));
    dispatch_weight_type(t, "test", [&](auto tag) {
      constexpr tensor_type T = decltype(tag)::value;
      EXPECT_EQ(weight_traits<T>::block_elems, tensor_type_layout_of(uint32_t(T))->block_elems);
      EXPECT_EQ(weight_traits<T>::block_bytes, tensor_type_layout_of(uint32_t(T))->block_bytes);
      for (int rep = 0; rep < 4; ++rep) expect_same_as_cpu<T>(seed++);
    });
  }
}

TEST(CudaQuant, OtherTypesAreRefused) {
  for (tensor_type t : {tensor_type::q8_1, tensor_type::q2_k, tensor_type::q3_k, tensor_type::q8_k,
                        tensor_type::iq4_nl, tensor_type::i32}) {
    EXPECT_FALSE(has_weight_kernels(t)) << tensor_type_name(t);
    EXPECT_THROW(dispatch_weight_type(t, "test", [](auto) {}), std::invalid_argument);
  }
}

// The rows dequantize_rows and get_rows read: whole blocks, aligned for the type's loads, and 8
// values a thread only where groups, rows and output allow it.
TEST(CudaQuant, WeightRowsAreCheckedAndGroupedWhereTheyMayBe) {
  alignas(64) static uint8_t bytes[4096];
  alignas(64) static float out[64];
  const auto q4 = weight_rows_for<tensor_type::q4_0>(64, bytes, out, "get_rows", "weight table");
  EXPECT_EQ(q4.row_bytes, 2 * 18);
  EXPECT_TRUE(q4.grouped);
  const auto q8 = weight_rows_for<tensor_type::q8_0>(64, bytes, out, "get_rows", "weight table");
  EXPECT_EQ(q8.row_bytes, 2 * 34);
  const auto f32 = weight_rows_for<tensor_type::f32>(64, bytes, out, "get_rows", "weight table");
  EXPECT_EQ(f32.row_bytes, 256);
  EXPECT_TRUE(f32.grouped);
  EXPECT_FALSE((weight_rows_for<tensor_type::f32>(64, bytes, out + 1, "x", "y").grouped));
  EXPECT_FALSE((weight_rows_for<tensor_type::f32>(60, bytes, out, "x", "y").grouped));
  try {
    weight_rows_for<tensor_type::q4_0>(48, bytes, out, "dequantize_rows", "weights");
    ADD_FAILURE() << "48 values are not whole Q4_0 blocks";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "dequantize_rows: rows are not whole blocks");
  }
  try {
    weight_rows_for<tensor_type::q4_k>(256, bytes + 2, out, "get_rows", "weight table");
    ADD_FAILURE() << "a Q4_K table 2 bytes past an aligned address";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "get_rows: misaligned weight table");
  }
}

}  // namespace
}  // namespace hearth::cuda
