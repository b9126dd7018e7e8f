// Random inputs and a double-precision reference for the CPU kernels' unit tests (vec-dot_test,
// vec-dot-legacy_test, gemm_test): rows of floats, quantized rows with finite scales, and dot
// products in double. Test code only: it reports through GoogleTest.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/io/tensor-type.h"

namespace hearth::cpu {

// n values drawn from N(0, scale²).
inline std::vector<float> random_row(std::mt19937& rng, int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(size_t(n), 0.0f);
  for (auto& x : v) x = d(rng);
  return v;
}

// A random finite F16 value of either sign between 2^-12 and 1 (a block's scale or minimum).
inline uint16_t random_half(std::mt19937& rng) {
  std::uniform_real_distribution<float> mant(0.5f, 1.0f);
  std::uniform_int_distribution<int> exp(-12, 0);
  std::bernoulli_distribution neg(0.5);
  return fp32_to_fp16((neg(rng) ? -1.0f : 1.0f) * std::ldexp(mant(rng), exp(rng)));
}

// A row of n values in type t: random bytes, then random finite scales (and minimums). Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K; another type fails the test.
inline std::vector<uint8_t> random_blocks(std::mt19937& rng, tensor_type t, int64_t n) {
  std::vector<uint8_t> row(size_t(tensor_type_row_bytes(t, n)));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : row) b = uint8_t(byte(rng));
  const int64_t nb = n / tensor_type_layout_of(uint32_t(t))->block_elems;
  for (int64_t i = 0; i < nb; ++i) {
    switch (t) {
      case tensor_type::q4_0:
        reinterpret_cast<block_q4_0*>(row.data())[i].d = random_half(rng);
        break;
      case tensor_type::q4_1: {
        auto& b = reinterpret_cast<block_q4_1*>(row.data())[i];
        b.d = random_half(rng), b.m = random_half(rng);
        break;
      }
      case tensor_type::q5_0:
        reinterpret_cast<block_q5_0*>(row.data())[i].d = random_half(rng);
        break;
      case tensor_type::q5_1: {
        auto& b = reinterpret_cast<block_q5_1*>(row.data())[i];
        b.d = random_half(rng), b.m = random_half(rng);
        break;
      }
      case tensor_type::q4_k: {
        auto& b = reinterpret_cast<block_q4_k*>(row.data())[i];
        b.d = random_half(rng), b.dmin = random_half(rng);
        break;
      }
      case tensor_type::q5_k: {
        auto& b = reinterpret_cast<block_q5_k*>(row.data())[i];
        b.d = random_half(rng), b.dmin = random_half(rng);
        break;
      }
      case tensor_type::q6_k:
        reinterpret_cast<block_q6_k*>(row.data())[i].d = random_half(rng);
        break;
      default:
        ADD_FAILURE() << "no random blocks for " << tensor_type_name(t);
    }
  }
  return row;
}

struct exact_dot {
  double value = 0;
  double scale = 0;  // Σ |terms|: what float rounding errors are relative to
};

inline exact_dot dot_in_double(const std::vector<float>& a, const std::vector<float>& b) {
  exact_dot d;
  for (size_t i = 0; i < a.size(); ++i) {
    d.value += double(a[i]) * double(b[i]);
    d.scale += std::fabs(double(a[i]) * double(b[i]));
  }
  return d;
}

}  // namespace hearth::cpu
