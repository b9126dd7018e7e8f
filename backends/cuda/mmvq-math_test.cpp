// mmvq-math.cuh compiled by the host compiler against the CPU's portable Q4_K × Q8_K and
// Q6_K × Q8_K dot products: a block's 8 lanes, their integers summed and turned into the block's
// term as the integer decoding kernel does, must give the CPU's float for that block, bit for
// bit. And the layout of the activations those products read (kernels.h q8k_rows).
#include "backends/cuda/mmvq-math.cuh"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backends/cuda/kernels.h"
#include "engine/convert/quantize.h"
#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cuda {
namespace {

// One block of weights against one Q8_K block as the kernel takes it: lanes j = 0..7 in turn.
template <tensor_type T>
float kernel_block(const void* w, const block_q8_k& x) {
  using lane_t = q8k_lane<T>;
  const auto* wb = static_cast<const uint8_t*>(w);
  int32_t sumi = 0, summ = 0;
  for (int j = 0; j < 8; ++j) {
    const lane_t l = lane_t::load(wb, j);
    uint32_t a[8];
    std::memcpy(a, x.qs + 32 * j, 32);
    const k_lane_sums s = l.sums(a, x.bsums[2 * j], x.bsums[2 * j + 1]);
    sumi += s.sumi;
    summ += s.summ;
  }
  return lane_t::term(x.d, lane_t::load(wb, 0).dbits, sumi, summ);
}

template <tensor_type T, class Block>
void expect_the_cpus(float (*cpu_dot)(int64_t, const void*, const void*)) {
  std::mt19937 rng(21);
  const int64_t n_blocks = 4000;
  for (const float spread : {1.0f, 1e-3f, 40.0f}) {
    std::uniform_real_distribution<float> u(-spread, spread);
    std::vector<float> wf(size_t(256 * n_blocks)), xf(wf.size());
    for (float& v : wf) v = u(rng);
    for (float& v : xf) v = u(rng) * u(rng);
    // A block of zero activations, and one of weights of one sign (scales and mins at their
    // edges).
    std::fill(xf.begin(), xf.begin() + 256, 0.0f);
    for (int i = 256; i < 512; ++i) wf[size_t(i)] = std::abs(wf[size_t(i)]);
    std::vector<Block> w(static_cast<size_t>(n_blocks));
    std::vector<block_q8_k> x(static_cast<size_t>(n_blocks));
    quantize_rows(T, wf.data(), w.data(), n_blocks, 256);
    cpu::kernels_for(tensor_type::q8_k)->from_float(xf.data(), x.data(), 256 * n_blocks);
    int nonzero = 0;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const float cpu = cpu_dot(256, &w[size_t(b)], &x[size_t(b)]);
      const float got = kernel_block<T>(&w[size_t(b)], x[size_t(b)]);
      ASSERT_EQ(cpu, got) << tensor_type_name(T) << " block " << b << ", spread " << spread;
      nonzero += cpu != 0.0f;
    }
    EXPECT_GT(nonzero, n_blocks / 2);  // the comparison is of real values
  }
}

TEST(CudaMmvqMath, Q4KBlocksAgainstQ8KActivationsAreTheCpusBitForBit) {
  expect_the_cpus<tensor_type::q4_k, block_q4_k>(cpu::dot_q4_k_q8_k_generic);
}

// Q6_K blocks are 210 bytes: every other one starts 2 bytes past a 4-byte boundary, which the
// device's funnel-shifted loads handle (the host reads bytes as they are).
TEST(CudaMmvqMath, Q6KBlocksAgainstQ8KActivationsAreTheCpusBitForBit) {
  expect_the_cpus<tensor_type::q6_k, block_q6_k>(cpu::dot_q6_k_q8_k_generic);
}

// The three arrays of quantize_q8k's output lie one after the other in q8k_bytes, each 256-aligned
// (the kernels read them 16 and 8 bytes at a time) and each as long as kernels.h says.
TEST(CudaMmvqMath, Q8kArraysAreAlignedAndDisjointWithinTheirAllocation) {
  for (const auto& [n_in, rows] :
       {std::pair<int64_t, int64_t>{256, 1}, {2048, 1}, {4096, 8}, {768, 13}, {14336, 16}}) {
    const size_t bytes = q8k_bytes(n_in, rows);
    const q8k_rows r = q8k_at(nullptr, n_in, rows);
    const auto at = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
    const size_t n = size_t(n_in * rows);
    EXPECT_EQ(at(r.qs), 0u);
    EXPECT_EQ(at(r.d) % 256, 0u);
    EXPECT_EQ(at(r.sums) % 256, 0u);
    EXPECT_GE(at(r.d), n);
    EXPECT_GE(at(r.sums), at(r.d) + n / 256 * sizeof(float));
    EXPECT_GE(bytes, at(r.sums) + n / 16 * sizeof(int32_t)) << n_in << " x " << rows;
    EXPECT_LT(bytes, at(r.sums) + n / 16 * sizeof(int32_t) + 256) << n_in << " x " << rows;
  }
}

TEST(CudaMmvqMath, Dot4IsTheSignedByteDotProduct) {
  EXPECT_EQ(dot4_i8(0x0f0f0f0fu, 0x80ff7f01u, 5), 5 + 15 * (1 + 127 - 1 - 128));
  EXPECT_EQ(dot4_i8(0x01020304u, 0x01010101u, 0), 10);
}

}  // namespace
}  // namespace hearth::cuda
