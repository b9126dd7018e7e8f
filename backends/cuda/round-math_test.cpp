// round-math.cuh compiled by the host compiler against the CPU backend: every activation a CUDA
// product rounds must become the float the CPU's row conversion (the weight's vec_dot_type's
// from_float, then its to_float) makes of it, bit for bit, for every weight type the CUDA kernels
// take.
#include "backends/cuda/round-math.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/vec-dot.h"

namespace hearth::cuda {
namespace {

// Equal bits, or both NaN (the CPU's F16C conversion keeps NaN payloads the portable one drops).
bool same_float(float a, float b) {
  return float_to_f32_bits(a) == float_to_f32_bits(b) || (std::isnan(a) && std::isnan(b));
}

// x as the CPU converts it for a product with weights of type w, read back as F32.
std::vector<float> cpu_rounded(tensor_type w, const std::vector<float>& x) {
  const tensor_type dot = cpu::kernels_for(w)->vec_dot_type;
  const cpu::type_kernels* k = cpu::kernels_for(dot);
  const int64_t n = int64_t(x.size());
  std::vector<uint8_t> row(size_t(tensor_type_row_bytes(dot, n)));
  k->from_float(x.data(), row.data(), n);
  std::vector<float> out(x.size());
  k->to_float(row.data(), out.data(), n);
  return out;
}

std::vector<float> gpu_rounded(tensor_type w, const std::vector<float>& x) {
  const activation_rounding r = activation_rounding_for(w);
  const size_t qk = size_t(activation_rounding_block(r));
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size() / qk; ++b) {
    const float* xb = x.data() + b * qk;
    float* yb = out.data() + b * qk;
    switch (r) {
      case activation_rounding::f16:
        round_activation_block<activation_rounding::f16>(xb, yb);
        break;
      case activation_rounding::bf16:
        round_activation_block<activation_rounding::bf16>(xb, yb);
        break;
      case activation_rounding::q8_0:
        round_activation_block<activation_rounding::q8_0>(xb, yb);
        break;
      case activation_rounding::q8_k:
        round_activation_block<activation_rounding::q8_k>(xb, yb);
        break;
      case activation_rounding::none:
        ADD_FAILURE() << "no rounding";
        return out;
    }
  }
  return out;
}

constexpr tensor_type k_rounded_types[] = {
    tensor_type::f16,  tensor_type::bf16, tensor_type::q8_0, tensor_type::q4_0, tensor_type::q5_0,
    tensor_type::q4_1, tensor_type::q5_1, tensor_type::q4_k, tensor_type::q5_k, tensor_type::q6_k};

TEST(CudaRound, EveryTypeRoundsToTheCpusDotProductType) {
  EXPECT_EQ(activation_rounding_for(tensor_type::f32), activation_rounding::none);
  for (const tensor_type w : k_rounded_types) {
    const tensor_type dot = cpu::kernels_for(w)->vec_dot_type;
    const activation_rounding r = activation_rounding_for(w);
    const activation_rounding want = dot == tensor_type::f16    ? activation_rounding::f16
                                     : dot == tensor_type::bf16 ? activation_rounding::bf16
                                     : dot == tensor_type::q8_k ? activation_rounding::q8_k
                                                                : activation_rounding::q8_0;
    EXPECT_EQ(r, want) << tensor_type_name(w);
    EXPECT_TRUE(dot == tensor_type::f16 || dot == tensor_type::bf16 || dot == tensor_type::q8_0 ||
                dot == tensor_type::q8_1 || dot == tensor_type::q8_k)
        << tensor_type_name(w);
  }
}

TEST(CudaRound, FloatToHalfMatchesTheEngine) {
  std::mt19937 rng(11);
  std::vector<uint32_t> inputs = {0u,          0x80000000u, 0x7f800000u, 0xff800000u, 0x477ff000u,
                                  0x477fefffu, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u,
                                  0x32ffffffu, 0x00000001u, 0x7f7fffffu, 0x3f801000u, 0x3f803000u};
  for (int i = 0; i < 1000000; ++i) inputs.push_back(rng());
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) inputs.push_back(uint32_t(u));
  for (const uint32_t u : inputs) {
    const float f = f32_bits_to_float(u);
    if (std::isnan(f)) continue;  // the engine's NaN is 0x7e00, as ours
    ASSERT_EQ(float_to_half_bits(f), fp32_to_fp16(f)) << std::hex << "float bits 0x" << u;
  }
  EXPECT_EQ(float_to_half_bits(f32_bits_to_float(0x7fc00001u)), 0x7e00u);
}

// Random rows of several scales, and blocks that test the edges: all zeros, one value only,
// huge and tiny magnitudes, ties of the rounding (halves), equal magnitudes of both signs (the
// first sets Q8_K's sign), half's overflow and subnormal range.
std::vector<float> test_row(std::mt19937& rng) {
  constexpr int n = 256 * 12;
  std::vector<float> x(n);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int i = 0; i < n; ++i) x[size_t(i)] = g(rng);
  auto block = [&](int b) { return x.data() + 256 * b; };
  std::fill(block(0), block(1), 0.0f);
  std::fill(block(1), block(2), 0.0f);
  block(1)[77] = -3.5f;
  for (int i = 0; i < 256; ++i) block(2)[i] *= 1e30f;
  for (int i = 0; i < 256; ++i) block(3)[i] *= 1e-30f;
  for (int i = 0; i < 256; ++i) block(4)[i] = float(i % 254 - 127) + 0.5f;  // halves
  for (int b = 0; b < 8; ++b) block(4)[32 * b] = 127.0f;                    // Q8_0: d 1
  block(4)[0] = -127.0f;  // Q8_K: the first of the largest, iscale 1
  for (int i = 0; i < 256; ++i) block(5)[i] = (i % 2 ? -1.0f : 1.0f) * float(i % 7);
  for (int i = 0; i < 256; ++i) block(6)[i] = 65504.0f + float(i) * 0.25f;  // F16 overflow edge
  for (int i = 0; i < 256; ++i) block(7)[i] = float(i) * 3e-8f;             // F16 subnormals
  for (int i = 0; i < 256; ++i) block(8)[i] *= 3e37f;  // near F32's largest, no overflow
  for (int i = 0; i < 256; ++i) block(9)[i] = float(i % 3) - 1.0f;
  return x;
}

TEST(CudaRound, RoundedRowsMatchTheCpuConversionBitForBit) {
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<float> x = test_row(rng);
    for (const tensor_type w : k_rounded_types) {
      const std::vector<float> want = cpu_rounded(w, x), got = gpu_rounded(w, x);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_TRUE(same_float(got[i], want[i]))
            << tensor_type_name(w) << " trial " << trial << " value " << i << " x " << x[i]
            << ": got " << got[i] << ", the CPU " << want[i];
    }
  }
}

}  // namespace
}  // namespace hearth::cuda
