// The Q4_1, Q5_0 and Q5_1 weight kernels and the Q8_1 activations (vec-dot-legacy.cpp):
// dequantization of hand-packed blocks, the Q8_1 quantizer (portable and AVX2 write the same
// bytes), the dot products against double precision on the dequantized rows (portable and AVX2),
// and the CPU backend's mul_mat and get_rows reading such weights.
#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/convert/quantize.h"
#include "engine/cpu/kernel-test-inputs.h"
#include "engine/cpu/vec-dot-kernels.h"
#include "engine/cpu/vec-dot.h"
#include "engine/io/gguf.h"

namespace hearth::cpu {
namespace {

// Whether this CPU has the AVX2 kernels' instructions, whatever HEARTH_CPU_PORTABLE says. These
// types have SIMD kernels on x86 only; elsewhere the portable ones are checked alone.
#if defined(__x86_64__)
bool cpu_runs_avx2_kernels() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !((ecx >> 29) & 1)) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#define AVX2_KERNEL(f) f
#else
bool cpu_runs_avx2_kernels() {
  return false;
}
#define AVX2_KERNEL(f) nullptr
#endif

// Q8_1 stores s = d * Σq as F16, and the kernels (as ggml's) take a weight block's minimum m
// times that rounded s, where the dequantized rows give m * d * Σq: the difference (up to
// 2^-11 of |m * s|) is part of the format, not an error of the kernel, so it is added to the
// double-precision expectation. Zero for types without a minimum.
double q8_1_sum_rounding(tensor_type t, const uint8_t* w, const uint8_t* xq, int64_t n) {
  if (t != tensor_type::q4_1 && t != tensor_type::q5_1) return 0;
  const auto* x = reinterpret_cast<const block_q8_1*>(xq);
  double total = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint16_t m = t == tensor_type::q4_1 ? reinterpret_cast<const block_q4_1*>(w)[b].m
                                              : reinterpret_cast<const block_q5_1*>(w)[b].m;
    int sum = 0;
    for (int8_t q : x[b].qs) sum += q;
    total += double(fp16_to_fp32(m)) *
             (double(fp16_to_fp32(x[b].s)) - double(fp16_to_fp32(x[b].d)) * sum);
  }
  return total;
}

// --- hand-packed blocks -------------------------------------------------------------------
// Packed as quantize_row_*_ref packs them, with exact scales, so every value is exact.

TEST(legacy_dequantize, q4_1_block) {
  block_q4_1 b;
  b.d = fp32_to_fp16(0.5f);
  b.m = fp32_to_fp16(-3.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  float y[32];
  kernels_for(tensor_type::q4_1)->to_float(&b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * float(j) - 3.0f) << j;
    EXPECT_EQ(y[j + 16], 0.5f * float(15 - j) - 3.0f) << j;
  }
}

// q[j] for j < 32 into a Q5 block's qs and qh.
void pack_q5(const int q[32], uint8_t qs[16], uint8_t qh[4]) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = uint8_t((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    h |= uint32_t(q[j] >> 4) << j;
    h |= uint32_t(q[j + 16] >> 4) << (j + 16);
  }
  std::memcpy(qh, &h, 4);
}

TEST(legacy_dequantize, q5_0_block) {
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (j * 7 + 5) % 32;  // every fifth-bit pattern
  block_q5_0 b;
  b.d = fp32_to_fp16(-0.25f);
  pack_q5(q, b.qs, b.qh);
  float y[32];
  kernels_for(tensor_type::q5_0)->to_float(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], -0.25f * float(q[j] - 16)) << j;
}

TEST(legacy_dequantize, q5_1_block) {
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (j * 11 + 3) % 32;
  block_q5_1 b;
  b.d = fp32_to_fp16(0.125f);
  b.m = fp32_to_fp16(1.5f);
  pack_q5(q, b.qs, b.qh);
  float y[32];
  kernels_for(tensor_type::q5_1)->to_float(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.125f * float(q[j]) + 1.5f) << j;
}

// --- Q8_1 -------------------------------------------------------------------------------

#if defined(__x86_64__)
TEST(q8_1, portable_and_avx2_write_the_same_bytes) {
  if (!cpu_runs_avx2_kernels()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(21);
  for (int rep = 0; rep < 50; ++rep) {
    auto x = random_row(rng, 256, rep % 2 ? 1.0f : 1e-3f);
    // Values that land exactly on .5 steps: amax 127 makes d = 1, so x itself is rounded.
    if (rep % 5 == 0) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 40) - 20) + 0.5f;
      for (size_t i = 0; i < x.size(); i += 32) x[i] = 127.0f;
    }
    std::vector<uint8_t> a(static_cast<size_t>(tensor_type_row_bytes(tensor_type::q8_1, 256)));
    std::vector<uint8_t> b(a.size());
    q8_1_from_float_generic(x.data(), a.data(), 256);
    q8_1_from_float_avx2(x.data(), b.data(), 256);
    ASSERT_EQ(a, b) << "rep " << rep;
  }
}
#endif

TEST(q8_1, rounds_half_away_from_zero_and_stores_d_times_the_sum) {
  float x[32] = {127.0f, 0.5f, -0.5f, 1.5f, -2.5f, 2.49f, -126.5f};
  block_q8_1 b;
  kernels_for(tensor_type::q8_1)->from_float(x, &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);
  const int want[7] = {127, 1, -1, 2, -3, 2, -127};
  int sum = 0;
  for (int j = 0; j < 7; ++j) EXPECT_EQ(b.qs[j], want[j]) << j;
  for (int j = 0; j < 32; ++j) sum += b.qs[j];
  EXPECT_EQ(fp16_to_fp32(b.s), float(sum));
}

TEST(q8_1, round_trip_error_is_that_of_8_bits) {
  std::mt19937 rng(4);
  const auto x = random_row(rng, 4096);
  std::vector<uint8_t> q(static_cast<size_t>(tensor_type_row_bytes(tensor_type::q8_1, 4096)));
  std::vector<float> y(4096);
  kernels_for(tensor_type::q8_1)->from_float(x.data(), q.data(), 4096);
  kernels_for(tensor_type::q8_1)->to_float(q.data(), y.data(), 4096);
  double err = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) err += std::pow(y[i] - x[i], 2), norm += x[i] * x[i];
  EXPECT_LE(err / norm, 6e-5);
}

// --- dot products -----------------------------------------------------------------------

struct dot_case {
  tensor_type type;
  vec_dot_fn generic;
  vec_dot_fn avx2;
};

void PrintTo(const dot_case& c, std::ostream* os) {
  *os << tensor_type_name(c.type);
}

// The kernels' dot of weight row w against activations x (converted to the dot type), checked
// against double precision on the dequantized values; portable and AVX2 against each other.
void check_dot(const dot_case& c, const uint8_t* w, const std::vector<float>& x,
               const std::string& what) {
  const int64_t n = int64_t(x.size());
  const type_kernels* k = kernels_for(c.type);
  ASSERT_NE(k, nullptr);
  const type_kernels* xk = kernels_for(k->vec_dot_type);
  ASSERT_NE(xk, nullptr);
  std::vector<uint8_t> xq(static_cast<size_t>(tensor_type_row_bytes(k->vec_dot_type, n)));
  xk->from_float(x.data(), xq.data(), n);
  std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
  k->to_float(w, wd.data(), n);
  xk->to_float(xq.data(), xd.data(), n);
  exact_dot want = dot_in_double(wd, xd);
  want.value += q8_1_sum_rounding(c.type, w, xq.data(), n);
  ASSERT_TRUE(std::isfinite(want.value)) << what;
  const float generic = c.generic(n, w, xq.data());
  EXPECT_NEAR(generic, want.value, 1e-5 * want.scale + 1e-30) << what << " (portable)";
  EXPECT_NEAR(k->vec_dot(n, w, xq.data()), want.value, 1e-5 * want.scale + 1e-30) << what;
  if (cpu_runs_avx2_kernels()) {
    EXPECT_NEAR(c.avx2(n, w, xq.data()), generic, 1e-6 * want.scale + 1e-30) << what << " (avx2)";
  }
}

class legacy_dot : public ::testing::TestWithParam<dot_case> {};

TEST_P(legacy_dot, random_blocks_match_double_precision) {
  const dot_case& c = GetParam();
  std::mt19937 rng(13);
  for (int64_t n : {32, 64, 96, 512}) {
    for (int rep = 0; rep < 20; ++rep) {
      const auto w = random_blocks(rng, c.type, n);
      check_dot(c, w.data(), random_row(rng, n), "n=" + std::to_string(n));
    }
  }
}

TEST_P(legacy_dot, quantized_rows_match_double_precision) {
  const dot_case& c = GetParam();
  std::mt19937 rng(17);
  for (int64_t n : {896, 4864}) {  // Qwen2.5-0.5B's widths, the reason these types are here
    const auto wf = random_row(rng, n, 0.05f);
    std::vector<uint8_t> w(static_cast<size_t>(tensor_type_row_bytes(c.type, n)));
    quantize_rows(c.type, wf.data(), w.data(), 1, n);
    check_dot(c, w.data(), random_row(rng, n), "n=" + std::to_string(n));
  }
}

// mul_mat converts the activations with the dot type's from_float; get_rows dequantizes rows.
TEST_P(legacy_dot, mul_mat_and_get_rows_read_the_weights) {
  const dot_case& c = GetParam();
  const int64_t n_in = 896, n_out = 40, n_tok = 3;
  std::mt19937 rng(19);
  const auto wf = random_row(rng, n_in * n_out, 0.05f);
  std::vector<uint8_t> wq(static_cast<size_t>(n_out * tensor_type_row_bytes(c.type, n_in)));
  quantize_rows(c.type, wf.data(), wq.data(), n_out, n_in);
  gguf_tensor g;
  g.name = "w";
  g.type = c.type;
  g.n_dims = 2;
  g.ne[0] = n_in;
  g.ne[1] = n_out;
  g.n_bytes = wq.size();
  g.data = wq.data();

  auto be = make_cpu_backend(2);
  ASSERT_TRUE(be->supports_weight_type(c.type));
  const tensor w = be->weight(g);
  const auto x = random_row(rng, n_in * n_tok);
  tensor xt = be->alloc(tensor_type::f32, n_in, n_tok, "x");
  tensor out = be->alloc(tensor_type::f32, n_out, n_tok, "out");
  be->upload(xt, x.data(), x.size() * 4);
  be->mul_mat(w, xt, nullptr, out);
  std::vector<float> got(static_cast<size_t>(n_out * n_tok));
  be->download(out, got.data(), got.size() * 4);

  const type_kernels* k = kernels_for(c.type);
  const type_kernels* xk = kernels_for(k->vec_dot_type);
  std::vector<float> wd(static_cast<size_t>(n_in)), xd(static_cast<size_t>(n_in));
  std::vector<uint8_t> xq(static_cast<size_t>(tensor_type_row_bytes(k->vec_dot_type, n_in)));
  for (int64_t tok = 0; tok < n_tok; ++tok) {
    xk->from_float(x.data() + tok * n_in, xq.data(), n_in);
    xk->to_float(xq.data(), xd.data(), n_in);
    for (int64_t r = 0; r < n_out; ++r) {
      k->to_float(wq.data() + r * w.row_bytes(), wd.data(), n_in);
      exact_dot want = dot_in_double(wd, xd);
      want.value += q8_1_sum_rounding(c.type, wq.data() + r * w.row_bytes(), xq.data(), n_in);
      ASSERT_NEAR(got[size_t(tok * n_out + r)], want.value, 1e-5 * want.scale + 1e-30)
          << "row " << r << " token " << tok;
    }
  }

  const int32_t ids[3] = {int32_t(n_out - 1), 0, int32_t(n_out / 2)};
  tensor idt = be->alloc(tensor_type::i32, 3, 1, "ids");
  tensor rows = be->alloc(tensor_type::f32, n_in, 3, "rows");
  be->upload(idt, ids, sizeof ids);
  be->get_rows(w, idt, rows);
  std::vector<float> got_rows(static_cast<size_t>(n_in * 3));
  be->download(rows, got_rows.data(), got_rows.size() * 4);
  for (int i = 0; i < 3; ++i) {
    k->to_float(wq.data() + ids[i] * w.row_bytes(), wd.data(), n_in);
    for (int64_t j = 0; j < n_in; ++j) ASSERT_EQ(got_rows[size_t(i * n_in + j)], wd[size_t(j)]);
  }
  for (tensor* t : {&xt, &out, &idt, &rows}) be->free(*t);
}

INSTANTIATE_TEST_SUITE_P(
    all, legacy_dot,
    ::testing::Values(
        dot_case{tensor_type::q4_1, dot_q4_1_q8_1_generic, AVX2_KERNEL(dot_q4_1_q8_1_avx2)},
        dot_case{tensor_type::q5_0, dot_q5_0_q8_0_generic, AVX2_KERNEL(dot_q5_0_q8_0_avx2)},
        dot_case{tensor_type::q5_1, dot_q5_1_q8_1_generic, AVX2_KERNEL(dot_q5_1_q8_1_avx2)}),
    [](const auto& param_info) { return std::string(tensor_type_name(param_info.param.type)); });

TEST(q8_1, dot_with_itself_matches_double_precision) {
  std::mt19937 rng(23);
  for (int64_t n : {32, 256}) {
    const auto a = random_row(rng, n), b = random_row(rng, n);
    std::vector<uint8_t> qa(static_cast<size_t>(tensor_type_row_bytes(tensor_type::q8_1, n))),
        qb(qa.size());
    q8_1_from_float_generic(a.data(), qa.data(), n);
    q8_1_from_float_generic(b.data(), qb.data(), n);
    std::vector<float> da(static_cast<size_t>(n)), db(static_cast<size_t>(n));
    const to_float_fn q8_1_to_float = tensor_type_traits_of(tensor_type::q8_1).to_float;
    q8_1_to_float(qa.data(), da.data(), n);
    q8_1_to_float(qb.data(), db.data(), n);
    const exact_dot want = dot_in_double(da, db);
    EXPECT_NEAR(dot_q8_1_q8_1_generic(n, qa.data(), qb.data()), want.value, 1e-5 * want.scale);
#if defined(__x86_64__)
    if (cpu_runs_avx2_kernels()) {
      EXPECT_NEAR(dot_q8_1_q8_1_avx2(n, qa.data(), qb.data()), want.value, 1e-5 * want.scale);
    }
#endif
  }
}

}  // namespace
}  // namespace hearth::cpu
