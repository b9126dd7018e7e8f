// The quantizers on random rows (error within what each format's step allows, dequantized
// through the CPU kernels), on hand-checked blocks (zeros, constants, an outlier), their
// argument checks; the file type names and ids; and the per-tensor type choice against
// llama.cpp's rules (Q4_K_M's layer pattern, the 256-column fallback, tied embeddings, fused
// Phi-3 tensors, 70B). Byte equality with llama-quantize's files is tests/quantize_test.cpp.
#include "engine/convert/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "engine/io/cpu-features.h"
#include "engine/io/quantize-fit.h"
#include "engine/io/type-traits.h"

namespace hearth {
namespace {

std::vector<float> dequantize(tensor_type t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(size_t(n), 0.0f);
  tensor_type_traits_of(t).to_float(q.data(), y.data(), n);
  return y;
}

std::vector<float> round_trip(tensor_type t, const std::vector<float>& x, int64_t n_per_row) {
  const int64_t n_rows = int64_t(x.size()) / n_per_row;
  std::vector<uint8_t> q(static_cast<size_t>(n_rows * tensor_type_row_bytes(t, n_per_row)));
  quantize_rows(t, x.data(), q.data(), n_rows, n_per_row);
  return dequantize(t, q, int64_t(x.size()));
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += std::pow(double(got[i]) - want[i], 2);
    norm += std::pow(double(want[i]), 2);
  }
  return err / norm;
}

struct bound_case {
  tensor_type type;
  double max_nmse;  // on unit Gaussian values: about 1.5x what the format achieves
};

class quantizer : public ::testing::TestWithParam<bound_case> {};

TEST_P(quantizer, random_rows_round_trip_within_the_formats_precision) {
  const auto [t, bound] = GetParam();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t n_per_row : {256, 512, 4096}) {
    std::vector<float> x(static_cast<size_t>(8 * n_per_row));
    for (auto& v : x) v = normal(rng);
    const auto y = round_trip(t, x, n_per_row);
    EXPECT_LE(nmse(y, x), bound) << tensor_type_name(t) << " n_per_row=" << n_per_row;
    // Every step commutes with a power-of-two scale (while the F16 scales stay normal): the
    // same levels, the result scaled exactly. Not F16 itself, whose values near zero are
    // subnormal.
    if (t == tensor_type::f16) continue;
    for (float f : {8.0f, 0.125f}) {
      std::vector<float> xs(x);
      for (auto& v : xs) v *= f;
      const auto ys = round_trip(t, xs, n_per_row);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(ys[i], y[i] * f) << tensor_type_name(t) << " scale " << f << " i=" << i;
    }
  }
}

TEST_P(quantizer, zeros_stay_zero) {
  const tensor_type t = GetParam().type;
  const std::vector<float> x(512, 0.0f);
  for (float v : round_trip(t, x, 256)) ASSERT_EQ(v, 0.0f) << tensor_type_name(t);
}

TEST_P(quantizer, a_constant_row_comes_back_close) {
  const tensor_type t = GetParam().type;
  for (float c : {0.5f, -3.0f}) {
    const std::vector<float> x(256, c);
    for (float v : round_trip(t, x, 256))
      ASSERT_NEAR(v, c, 4e-3 * std::fabs(c)) << tensor_type_name(t) << " c=" << c;
  }
}

TEST_P(quantizer, an_outlier_keeps_its_value_and_the_rest_stay_small) {
  const tensor_type t = GetParam().type;
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * float(int(i % 7) - 3);
  x[37] = 10.0f;
  const auto y = round_trip(t, x, 256);
  EXPECT_NEAR(y[37], 10.0f, 10.0f * 0.01f) << tensor_type_name(t);
  for (size_t i = 0; i < x.size(); ++i) {
    if (i == 37) continue;
    // At most one step of the outlier's block (10/7 for the coarsest, 4-bit formats).
    ASSERT_LE(std::fabs(y[i] - x[i]), 1.5f) << tensor_type_name(t) << " i=" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    all, quantizer,
    ::testing::Values(bound_case{tensor_type::f32, 0}, bound_case{tensor_type::f16, 1e-7},
                      bound_case{tensor_type::bf16, 5e-6}, bound_case{tensor_type::q8_0, 5e-5},
                      bound_case{tensor_type::q4_0, 1.1e-2}, bound_case{tensor_type::q4_1, 1e-2},
                      bound_case{tensor_type::q5_0, 3e-3}, bound_case{tensor_type::q5_1, 2.5e-3},
                      bound_case{tensor_type::q4_k, 8e-3}, bound_case{tensor_type::q5_k, 2e-3},
                      bound_case{tensor_type::q6_k, 5e-4}),
    [](const auto& param_info) { return std::string(tensor_type_name(param_info.param.type)); });

// --- hand-checked blocks ------------------------------------------------------------------

TEST(quantize_block, q4_0_maps_the_extreme_to_minus_eight) {
  // max |x| = 4 at a positive value: d = 4 / -8 = -0.5, so 4 is level 0 (4 = -0.5 * (0 - 8)),
  // and the other values round half up in units of -0.5.
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * float(j % 8) - 1.0f;  // -1 .. 0.75
  x[5] = 4.0f;
  block_q4_0 b;
  quantize_rows(tensor_type::q4_0, x, &b, 1, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), -0.5f);
  EXPECT_EQ(b.qs[5] & 0xF, 0);
  // -1 -> -1 / -0.5 = 2 -> 10; 0.25 * 7 - 1 = 0.75 -> -1.5 + 8.5 = 7 (truncated) -> 7.
  EXPECT_EQ(b.qs[0] & 0xF, 10);
  EXPECT_EQ(b.qs[7] & 0xF, 7);
  EXPECT_EQ(b.qs[7] >> 4, 7);  // x[23] = 0.25 * 7 - 1
}

TEST(quantize_block, q5_1_uses_min_and_range) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j) - 10.0f;  // -10 .. 21: step (31 / 31) = 1
  block_q5_1 b;
  quantize_rows(tensor_type::q5_1, x, &b, 1, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);
  EXPECT_EQ(fp16_to_fp32(b.m), -10.0f);
  float y[32];
  tensor_type_traits_of(tensor_type::q5_1).to_float(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]) << j;
}

TEST(quantize_block, q8_0_rounds_half_away_from_zero) {
  // amax 127 makes d = 1 exactly: every value rounds as roundf does.
  float x[32] = {127.0f, 0.5f, -0.5f, 1.5f, -2.5f, 2.49f};
  block_q8_0 b;
  quantize_rows(tensor_type::q8_0, x, &b, 1, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);
  EXPECT_EQ(b.qs[1], 1);
  EXPECT_EQ(b.qs[2], -1);
  EXPECT_EQ(b.qs[3], 2);
  EXPECT_EQ(b.qs[4], -3);
  EXPECT_EQ(b.qs[5], 2);
}

TEST(quantize_block, q6_k_scales_fit_int8_with_the_largest_at_minus_128) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256);
  for (auto& v : x) v = normal(rng);
  block_q6_k b;
  quantize_rows(tensor_type::q6_k, x.data(), &b, 1, 256);
  int extremes = 0;
  for (int s : b.scales) extremes += s == -128 || s == 127;
  EXPECT_GE(extremes, 1);
}

TEST(quantize_rows, refuses_bad_rows_and_types) {
  std::vector<float> x(512, 1.0f);
  std::vector<uint8_t> out(4096);
  EXPECT_THROW(quantize_rows(tensor_type::q4_k, x.data(), out.data(), 1, 128),
               std::invalid_argument);
  EXPECT_THROW(quantize_rows(tensor_type::q6_k, x.data(), out.data(), 1, 300),
               std::invalid_argument);
  EXPECT_THROW(quantize_rows(tensor_type::q4_0, x.data(), out.data(), 1, 33),
               std::invalid_argument);
  EXPECT_THROW(quantize_rows(tensor_type::q8_0, x.data(), out.data(), 1, 0), std::invalid_argument);
  EXPECT_THROW(quantize_rows(tensor_type::q2_k, x.data(), out.data(), 1, 256),
               std::invalid_argument);
  EXPECT_FALSE(can_quantize(tensor_type::q8_k));
  EXPECT_TRUE(can_quantize(tensor_type::q5_1));
}

TEST(quantize_rows, rows_are_independent) {
  // Two rows at once equal each row alone: threads may split a tensor anywhere between rows.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(512);
  for (auto& v : x) v = normal(rng);
  for (tensor_type t : {tensor_type::q4_k, tensor_type::q5_0, tensor_type::q6_k}) {
    const int64_t rb = tensor_type_row_bytes(t, 256);
    std::vector<uint8_t> both(static_cast<size_t>(2 * rb)), one(static_cast<size_t>(rb));
    quantize_rows(t, x.data(), both.data(), 2, 256);
    quantize_rows(t, x.data() + 256, one.data(), 1, 256);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), both.begin() + rb)) << tensor_type_name(t);
  }
}

// --- the AVX2 sub-block fits ------------------------------------------------------------
#if defined(__x86_64__)  // they exist only there

// Super-blocks that reach every branch of the fits: Gaussian, all positive (the min is clamped
// to 0), all negative, constant sub-blocks (the flat early return), zeros, tiny values (below
// Q6_K's all-zero threshold), an outlier, and values on rounding ties.
std::vector<std::vector<float>> fit_cases() {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);
  std::vector<std::vector<float>> out;
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<float> x(256);
    for (auto& v : x) v = normal(rng);
    out.push_back(x);
  }
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> x(256);
    for (auto& v : x) v = sign * uniform(rng);
    out.push_back(x);
  }
  std::vector<float> mixed(256);
  for (int i = 0; i < 256; ++i) {
    const int sub = i / 32;
    mixed[size_t(i)] = sub == 0   ? 0.0f
                       : sub == 1 ? 0.75f
                       : sub == 2 ? -2.0f
                       : sub == 3 ? 1e-20f * normal(rng)
                       : sub == 4 ? float(i % 7) - 3.0f
                       : sub == 5 ? 0.5f * float(i % 5)
                                  : normal(rng);
  }
  mixed[200] = 50.0f;
  out.push_back(mixed);
  out.push_back(std::vector<float>(256, 0.0f));
  return out;
}

TEST(quantize_fit, avx2_fits_equal_the_portable_ones_bit_for_bit) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 here (or HEARTH_CPU_PORTABLE=1)";
  for (const auto& x : fit_cases()) {
    for (const auto& [nmax, rmin, rdelta, nstep] :
         {std::tuple{15, -1.f, 0.1f, 20}, std::tuple{31, -0.5f, 0.1f, 15}}) {
      uint8_t la[256], lb[256];
      float sa[8], sb[8], ma[8], mb[8];
      quant::fit_k_subblocks_portable(x.data(), nmax, rmin, rdelta, nstep, la, sa, ma);
      quant::fit_k_subblocks_avx2(x.data(), nmax, rmin, rdelta, nstep, lb, sb, mb);
      ASSERT_EQ(std::memcmp(la, lb, sizeof la), 0) << "nmax " << nmax;
      ASSERT_EQ(std::memcmp(sa, sb, sizeof sa), 0) << "nmax " << nmax;
      ASSERT_EQ(std::memcmp(ma, mb, sizeof ma), 0) << "nmax " << nmax;
    }
    for (int half = 0; half < 2; ++half) {
      int8_t la[128], lb[128];
      float sa[8], sb[8];
      quant::fit_q6_k_subblocks_portable(x.data() + 128 * half, la, sa);
      quant::fit_q6_k_subblocks_avx2(x.data() + 128 * half, lb, sb);
      ASSERT_EQ(std::memcmp(la, lb, sizeof la), 0);
      ASSERT_EQ(std::memcmp(sa, sb, sizeof sa), 0);
    }
  }
}
#endif

// --- file types ---------------------------------------------------------------------------

TEST(file_type, every_llama_cpp_file_type_has_its_name) {
  EXPECT_EQ(llama_ftype_name(0), "f32");
  EXPECT_EQ(llama_ftype_name(15), "q4_k_m");
  EXPECT_EQ(llama_ftype_name(19), "iq2_xxs");  // not written here, still named
  EXPECT_EQ(llama_ftype_name(32), "bf16");
  EXPECT_FALSE(llama_ftype_name(5));  // removed from llama.cpp
  EXPECT_FALSE(llama_ftype_name(999));
}

TEST(file_type, names_and_llama_cpp_ids) {
  const std::pair<const char*, uint32_t> want[] = {
      {"f32", 0},     {"f16", 1},     {"bf16", 32},   {"q8_0", 7},    {"q4_0", 2},
      {"q4_k_s", 14}, {"q4_k_m", 15}, {"q5_k_s", 16}, {"q5_k_m", 17}, {"q6_k", 18}};
  for (const auto& [name, id] : want) {
    const auto ft = file_type_from_name(name);
    ASSERT_TRUE(ft) << name;
    EXPECT_EQ(file_type_name(*ft), name);
    EXPECT_EQ(file_type_id(*ft), id) << name;
    EXPECT_NE(file_type_names().find(name), std::string::npos) << name;
  }
  EXPECT_EQ(file_type_from_name("Q4_K_M"), file_type::q4_k_m);
  EXPECT_FALSE(file_type_from_name("q4_k"));
  EXPECT_FALSE(file_type_from_name("q3_k_m"));
  EXPECT_FALSE(file_type_from_name(""));
}

// --- type choice ----------------------------------------------------------------------------

tensor_type type_of(file_type ft, const quant_model_info& m, const std::string& name,
                    std::vector<int64_t> ne) {
  return tensor_type_for(ft, m, name, ne);
}

std::string blk(int i, const char* what) {
  return "blk." + std::to_string(i) + "." + what;
}

// TinyLlama 1.1B: 22 layers, 2048 wide, ffn 5632, 4 KV heads of 32.
const quant_model_info k_tinyllama{"llama", 22, 32, 4, true};

TEST(tensor_type_for, q4_k_m_gives_more_bits_to_llama_cpps_layers) {
  // use_more_bits(i, 22): i < 2, i >= 19, or (i - 2) % 3 == 2.
  const std::vector<int> more = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  for (int i = 0; i < 22; ++i) {
    const bool m = std::find(more.begin(), more.end(), i) != more.end();
    const tensor_type want = m ? tensor_type::q6_k : tensor_type::q4_k;
    EXPECT_EQ(type_of(file_type::q4_k_m, k_tinyllama, blk(i, "attn_v.weight"), {2048, 256}), want)
        << i;
    EXPECT_EQ(type_of(file_type::q4_k_m, k_tinyllama, blk(i, "ffn_down.weight"), {5632, 2048}),
              want)
        << i;
    EXPECT_EQ(type_of(file_type::q5_k_m, k_tinyllama, blk(i, "ffn_down.weight"), {5632, 2048}),
              m ? tensor_type::q6_k : tensor_type::q5_k)
        << i;
    for (const char* other : {"attn_q.weight", "attn_k.weight", "attn_output.weight",
                              "ffn_gate.weight", "ffn_up.weight"}) {
      EXPECT_EQ(type_of(file_type::q4_k_m, k_tinyllama, blk(i, other), {2048, 2048}),
                tensor_type::q4_k)
          << i << other;
    }
    EXPECT_EQ(type_of(file_type::q4_k_m, k_tinyllama, blk(i, "attn_norm.weight"), {2048}),
              tensor_type::f32);
  }
  EXPECT_EQ(type_of(file_type::q4_k_m, k_tinyllama, "output.weight", {2048, 32000}),
            tensor_type::q6_k);
  EXPECT_EQ(type_of(file_type::q4_k_m, k_tinyllama, "token_embd.weight", {2048, 32000}),
            tensor_type::q4_k);
  EXPECT_EQ(type_of(file_type::q4_k_m, k_tinyllama, "output_norm.weight", {2048}),
            tensor_type::f32);
}

TEST(tensor_type_for, q4_k_s_raises_the_first_layers) {
  for (int i = 0; i < 22; ++i) {
    EXPECT_EQ(type_of(file_type::q4_k_s, k_tinyllama, blk(i, "attn_v.weight"), {2048, 256}),
              i < 4 ? tensor_type::q5_k : tensor_type::q4_k)
        << i;
    EXPECT_EQ(type_of(file_type::q4_k_s, k_tinyllama, blk(i, "ffn_down.weight"), {5632, 2048}),
              i < 22 / 8 ? tensor_type::q5_k : tensor_type::q4_k)
        << i;
  }
  for (file_type ft : {file_type::q5_k_s, file_type::q6_k}) {
    const tensor_type all = ft == file_type::q6_k ? tensor_type::q6_k : tensor_type::q5_k;
    EXPECT_EQ(type_of(ft, k_tinyllama, blk(0, "attn_v.weight"), {2048, 256}), all);
    EXPECT_EQ(type_of(ft, k_tinyllama, blk(21, "ffn_down.weight"), {5632, 2048}), all);
    EXPECT_EQ(type_of(ft, k_tinyllama, "output.weight", {2048, 32000}), tensor_type::q6_k);
  }
}

TEST(tensor_type_for, the_output_gets_q6_k_except_in_q8_0_and_float_files) {
  EXPECT_EQ(type_of(file_type::q4_0, k_tinyllama, "output.weight", {2048, 32000}),
            tensor_type::q6_k);
  EXPECT_EQ(type_of(file_type::q4_0, k_tinyllama, blk(3, "attn_v.weight"), {2048, 256}),
            tensor_type::q4_0);
  EXPECT_EQ(type_of(file_type::q8_0, k_tinyllama, "output.weight", {2048, 32000}),
            tensor_type::q8_0);
  for (file_type ft : {file_type::f16, file_type::bf16, file_type::f32}) {
    const tensor_type want = ft == file_type::f16    ? tensor_type::f16
                             : ft == file_type::bf16 ? tensor_type::bf16
                                                     : tensor_type::f32;
    EXPECT_EQ(type_of(ft, k_tinyllama, "output.weight", {2048, 32000}), want);
    EXPECT_EQ(type_of(ft, k_tinyllama, blk(0, "attn_v.weight"), {2048, 256}), want);
    EXPECT_EQ(type_of(ft, k_tinyllama, blk(0, "ffn_norm.weight"), {2048}), tensor_type::f32);
  }
}

TEST(tensor_type_for, tied_embeddings_are_quantized_as_the_output) {
  const quant_model_info gemma{"gemma", 18, 8, 1, false};
  EXPECT_EQ(type_of(file_type::q4_k_m, gemma, "token_embd.weight", {2048, 256000}),
            tensor_type::q6_k);
  EXPECT_EQ(type_of(file_type::q8_0, gemma, "token_embd.weight", {2048, 256000}),
            tensor_type::q8_0);
}

TEST(tensor_type_for, rows_256_does_not_divide_fall_back_as_llama_cpp) {
  // Qwen2.5-0.5B: 896 wide (3.5 x 256), ffn 4864 (19 x 256), 24 layers, 2 KV heads of 14, tied
  // embeddings.
  const quant_model_info qwen{"qwen2", 24, 14, 2, false};
  EXPECT_EQ(type_of(file_type::q4_k_m, qwen, blk(5, "attn_q.weight"), {896, 896}),
            tensor_type::q5_0);
  EXPECT_EQ(type_of(file_type::q5_k_m, qwen, blk(5, "attn_q.weight"), {896, 896}),
            tensor_type::q5_1);
  EXPECT_EQ(type_of(file_type::q6_k, qwen, blk(5, "attn_q.weight"), {896, 896}), tensor_type::q8_0);
  // attn_v of a more-bits layer: Q6_K, then Q8_0 for its 896-value rows.
  EXPECT_EQ(type_of(file_type::q4_k_m, qwen, blk(0, "attn_v.weight"), {896, 128}),
            tensor_type::q8_0);
  EXPECT_EQ(type_of(file_type::q4_k_m, qwen, blk(6, "attn_v.weight"), {896, 128}),
            tensor_type::q5_0);
  EXPECT_EQ(type_of(file_type::q4_k_s, qwen, blk(0, "attn_v.weight"), {896, 128}),
            tensor_type::q5_1);
  // ffn_down's rows are 4864 long: no fallback.
  EXPECT_EQ(type_of(file_type::q4_k_m, qwen, blk(0, "ffn_down.weight"), {4864, 896}),
            tensor_type::q6_k);
  EXPECT_EQ(type_of(file_type::q4_k_m, qwen, blk(6, "ffn_down.weight"), {4864, 896}),
            tensor_type::q4_k);
  EXPECT_EQ(type_of(file_type::q4_k_m, qwen, "token_embd.weight", {896, 151936}),
            tensor_type::q8_0);
  // Biases are vectors: F32.
  EXPECT_EQ(type_of(file_type::q4_k_m, qwen, blk(0, "attn_q.bias"), {896}), tensor_type::f32);
  // Q4_0 and Q8_0 blocks (32) divide 896.
  EXPECT_EQ(type_of(file_type::q4_0, qwen, blk(5, "attn_q.weight"), {896, 896}), tensor_type::q4_0);
  // A width no block divides: Q5_0 does not fit either, so F16; llama-quantize refuses it for
  // the 32-value types themselves.
  EXPECT_EQ(type_of(file_type::q4_k_m, qwen, blk(5, "attn_q.weight"), {100, 896}),
            tensor_type::f16);
  EXPECT_THROW(type_of(file_type::q8_0, qwen, blk(5, "attn_q.weight"), {100, 896}),
               std::invalid_argument);
}

TEST(tensor_type_for, phi3_fused_tensors) {
  const quant_model_info phi3{"phi3", 32, 32, 32, true};
  EXPECT_EQ(type_of(file_type::q4_k_m, phi3, blk(3, "attn_qkv.weight"), {3072, 9216}),
            tensor_type::q5_k);
  EXPECT_EQ(type_of(file_type::q5_k_m, phi3, blk(3, "attn_qkv.weight"), {3072, 9216}),
            tensor_type::q6_k);
  EXPECT_EQ(type_of(file_type::q4_k_s, phi3, blk(3, "attn_qkv.weight"), {3072, 9216}),
            tensor_type::q4_k);
  EXPECT_EQ(type_of(file_type::q4_k_m, phi3, blk(3, "ffn_up.weight"), {3072, 16384}),
            tensor_type::q4_k);
  EXPECT_EQ(type_of(file_type::q4_k_m, phi3, blk(0, "ffn_down.weight"), {8192, 3072}),
            tensor_type::q6_k);
}

TEST(tensor_type_for, a_70b_model_gives_attn_v_five_bits) {
  const quant_model_info llama70{"llama", 80, 64, 8, true};
  // Layer 11: not a more-bits layer (80 / 8 = 10; (11 - 10) % 3 = 1).
  EXPECT_EQ(type_of(file_type::q4_k_m, llama70, blk(11, "attn_v.weight"), {8192, 1024}),
            tensor_type::q5_k);
  EXPECT_EQ(type_of(file_type::q4_k_m, llama70, blk(12, "attn_v.weight"), {8192, 1024}),
            tensor_type::q6_k);
  EXPECT_EQ(type_of(file_type::q4_k_m, llama70, blk(11, "attn_q.weight"), {8192, 8192}),
            tensor_type::q4_k);
  // 80 layers without grouped KV heads is llama.cpp's 65B: no raise.
  const quant_model_info llama65{"llama", 80, 64, 64, true};
  EXPECT_EQ(type_of(file_type::q4_k_m, llama65, blk(11, "attn_v.weight"), {8192, 8192}),
            tensor_type::q4_k);
}

}  // namespace
}  // namespace hearth
