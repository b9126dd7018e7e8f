// The type traits: which types can be read and written, and that writing then reading a row
// loses no more than the type's bits allow (a swapped to/from pair or a wrong block size shows
// as a large error). Exact layouts are checked on hand-built blocks by the CPU backend's vec-dot
// tests, and the quantizers' bytes in engine/quantize_test.cpp.
#include "engine/io/type-traits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/convert/quantize.h"

namespace hearth {
namespace {

TEST(type_traits, read_every_type_the_engine_computes_with_and_write_what_the_quantizer_writes) {
  const std::vector<tensor_type> readable = {
      tensor_type::f32,  tensor_type::f16,  tensor_type::bf16, tensor_type::q4_0, tensor_type::q4_1,
      tensor_type::q5_0, tensor_type::q5_1, tensor_type::q8_0, tensor_type::q8_1, tensor_type::q4_k,
      tensor_type::q5_k, tensor_type::q6_k, tensor_type::q8_k};
  for (uint32_t id = 0; id < 64; ++id) {
    if (!tensor_type_layout_of(id)) continue;
    const tensor_type t = tensor_type(id);
    SCOPED_TRACE(std::string(tensor_type_name(t)));
    const tensor_type_traits& tt = tensor_type_traits_of(t);
    const bool read = std::find(readable.begin(), readable.end(), t) != readable.end();
    EXPECT_EQ(tt.to_float != nullptr, read);
    // The activation types Q8_1 and Q8_K are read back but only the CPU backend writes them.
    const bool written = read && t != tensor_type::q8_1 && t != tensor_type::q8_k;
    EXPECT_EQ(tt.from_float != nullptr, written);
    EXPECT_EQ(can_quantize(t), written);
  }
}

// Mean squared error of a round trip relative to the mean square of the values: about
// step² / 12 for a uniform quantizer, so each type's bound follows from its bits per value.
struct round_trip_case {
  tensor_type type;
  double max_nmse;
};

class type_round_trip : public ::testing::TestWithParam<round_trip_case> {};

TEST_P(type_round_trip, loses_no_more_than_the_types_bits) {
  const auto [t, max_nmse] = GetParam();
  const tensor_type_traits& tt = tensor_type_traits_of(t);
  const int64_t n = 4 * 256;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  std::vector<uint8_t> row(static_cast<size_t>(tensor_type_row_bytes(t, n)));
  tt.from_float(x.data(), row.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  tt.to_float(row.data(), y.data(), n);
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    ref += double(x[i]) * x[i];
  }
  EXPECT_LE(err / ref, max_nmse);
  if (max_nmse == 0) {
    EXPECT_EQ(y, x);
  }
}

INSTANTIATE_TEST_SUITE_P(
    writable, type_round_trip,
    ::testing::Values(
        round_trip_case{tensor_type::f32, 0.0}, round_trip_case{tensor_type::f16, 1e-6},
        round_trip_case{tensor_type::bf16, 2e-5}, round_trip_case{tensor_type::q8_0, 6e-5},
        round_trip_case{tensor_type::q6_k, 1e-3}, round_trip_case{tensor_type::q5_0, 4e-3},
        round_trip_case{tensor_type::q5_1, 4e-3}, round_trip_case{tensor_type::q5_k, 4e-3},
        round_trip_case{tensor_type::q4_0, 1.6e-2}, round_trip_case{tensor_type::q4_1, 1.6e-2},
        round_trip_case{tensor_type::q4_k, 1.6e-2}),
    [](const auto& param_info) { return std::string(tensor_type_name(param_info.param.type)); });

}  // namespace
}  // namespace hearth
