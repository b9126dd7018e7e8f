// The hidden-state codec between pipeline stages (hidden-state.h): F32 exact, F16 and Q8_0
// within their precision, sizes as stated, and hostile bytes refused.
#include "engine/io/hidden-state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace hearth {
namespace {

std::vector<float> random_rows(int64_t n_embd, int64_t n_rows) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(size_t(n_embd * n_rows));
  for (float& x : v) x = d(rng);
  return v;
}

TEST(hidden_state, f32_is_exact_and_the_others_within_their_precision) {
  const int64_t n_embd = 64, n_rows = 5;
  const auto rows = random_rows(n_embd, n_rows);
  for (auto e : {hidden_encoding::f32, hidden_encoding::f16, hidden_encoding::q8_0}) {
    SCOPED_TRACE(std::string(hidden_encoding_name(e)));
    EXPECT_EQ(hidden_encoding_from_name(hidden_encoding_name(e)), e);
    const auto bytes = hidden_encode(e, rows, n_embd);
    ASSERT_EQ(bytes.size(), hidden_bytes(e, n_embd, n_rows));
    std::vector<float> back(rows.size());
    ASSERT_TRUE(hidden_decode(e, bytes, n_embd, back).ok());
    for (size_t i = 0; i < rows.size(); ++i) {
      const float err = std::fabs(back[i] - rows[i]);
      if (e == hidden_encoding::f32) {
        ASSERT_EQ(std::memcmp(&back[i], &rows[i], 4), 0) << i;
      } else if (e == hidden_encoding::f16) {
        ASSERT_LE(err, std::fabs(rows[i]) * 0x1p-11f) << i;
      } else {
        // Q8_0: a block's scale is its largest magnitude / 127; rounding costs half a step.
        const size_t block = i / 32 * 32;
        float amax = 0;
        for (size_t j = block; j < block + 32; ++j) amax = std::max(amax, std::fabs(rows[j]));
        ASSERT_LE(err, amax / 127.0f * 0.51f + 1e-6f) << i;
      }
    }
  }
  EXPECT_EQ(hidden_bytes(hidden_encoding::f32, 64, 5), 64u * 5 * 4);
  EXPECT_EQ(hidden_bytes(hidden_encoding::f16, 64, 5), 64u * 5 * 2);
  EXPECT_EQ(hidden_bytes(hidden_encoding::q8_0, 64, 5), 2u * 34 * 5);
  EXPECT_FALSE(hidden_encoding_from_name("q4_0"));
}

TEST(hidden_state, bytes_from_a_peer_are_checked) {
  const int64_t n_embd = 64;
  const auto rows = random_rows(n_embd, 2);
  std::vector<float> out(rows.size());
  for (auto e : {hidden_encoding::f32, hidden_encoding::f16, hidden_encoding::q8_0}) {
    SCOPED_TRACE(std::string(hidden_encoding_name(e)));
    auto bytes = hidden_encode(e, rows, n_embd);
    // One byte short, one too many, nothing.
    for (size_t n : {bytes.size() - 1, bytes.size() + 1, size_t(0)}) {
      std::vector<uint8_t> b(bytes.begin(), bytes.end());
      b.resize(n);
      const auto r = hidden_decode(e, b, n_embd, out);
      ASSERT_FALSE(r.ok()) << n;
      EXPECT_NE(r.message().find("bytes where 2 rows"), std::string::npos) << r.message();
    }
  }
  // A NaN or an infinity, as F32 and as F16 bits.
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto v = rows;
    v[70] = bad;
    const auto b32 = hidden_encode(hidden_encoding::f32, v, n_embd);
    const auto r = hidden_decode(hidden_encoding::f32, b32, n_embd, out);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.message().find("value 70 is not finite"), std::string::npos) << r.message();
  }
  auto b16 = hidden_encode(hidden_encoding::f16, rows, n_embd);
  b16[2 * 9] = 0x00, b16[2 * 9 + 1] = 0x7c;  // +inf
  EXPECT_FALSE(hidden_decode(hidden_encoding::f16, b16, n_embd, out).ok());
  auto bq = hidden_encode(hidden_encoding::q8_0, rows, n_embd);
  bq[0] = 0x00, bq[1] = 0x7e;  // a NaN block scale
  EXPECT_FALSE(hidden_decode(hidden_encoding::q8_0, bq, n_embd, out).ok());
  // Bytes at any address (a message's frame need not be aligned) decode as aligned ones do.
  for (auto e : {hidden_encoding::f32, hidden_encoding::f16, hidden_encoding::q8_0}) {
    const auto bytes = hidden_encode(e, rows, n_embd);
    std::vector<uint8_t> shifted(bytes.size() + 1);
    std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
    std::vector<float> want(rows.size());
    ASSERT_TRUE(hidden_decode(e, bytes, n_embd, want).ok());
    ASSERT_TRUE(hidden_decode(e, std::span(shifted).subspan(1), n_embd, out).ok());
    EXPECT_EQ(out, want) << hidden_encoding_name(e);
  }
  // Q8_0 needs rows of a multiple of 32 values.
  EXPECT_EQ(hidden_bytes(hidden_encoding::q8_0, 48, 1), 0u);
  std::vector<float> odd(48);
  EXPECT_FALSE(hidden_decode(hidden_encoding::q8_0, std::vector<uint8_t>(51), 48, odd).ok());
  EXPECT_EQ(hidden_bytes(hidden_encoding::f32, 0, 1), 0u);
  EXPECT_EQ(hidden_bytes(hidden_encoding::f32, 64, -1), 0u);
}

}  // namespace
}  // namespace hearth
