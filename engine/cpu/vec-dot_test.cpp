// The CPU kernels against plain double-precision arithmetic on the dequantized values, for every
// weight type and row lengths with and without SIMD tails; the portable and SIMD kernels (AVX2 on
// x86, NEON with and without SDOT on arm64) against each other; dequantization of hand-built blocks
// (so a layout error cannot cancel out between dequantization and dot product); the Q8_K quantizer;
// the F16/BF16 conversions; and the backend's row conversions against the types' own.
#include "engine/cpu/vec-dot.h"

#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/kernel-test-inputs.h"
#include "engine/cpu/vec-dot-kernels.h"
#include "engine/io/gguf.h"
#include "tests/testdata.h"

namespace hearth::cpu {
namespace {

class kernels : public ::testing::TestWithParam<tensor_type> {};

TEST_P(kernels, dot_matches_double_precision_on_the_converted_values) {
  const tensor_type t = GetParam();
  const type_kernels* k = kernels_for(t);
  ASSERT_NE(k, nullptr);
  const type_kernels* xk = kernels_for(k->vec_dot_type);
  ASSERT_NE(xk, nullptr);
  std::mt19937 rng(7);
  const int64_t block = tensor_type_layout_of(uint32_t(t))->block_elems;
  for (int64_t n : {32, 64, 96, 256, 288, 4096}) {
    if (block == 1) n += 3;  // F32/F16/BF16 rows need not fill a SIMD register
    if (n % block != 0) continue;
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
                                           tensor_type::q8_0, tensor_type::q8_k),
                         [](const auto& param_info) {
                           return std::string(tensor_type_name(param_info.param));
                         });

// --- quantized weight types (read from files, never produced here) ----------------------

// A SIMD kernel of this architecture, and whether the CPU itself has its instructions, whatever
// HEARTH_CPU_PORTABLE says: the portable run of this binary still compares both paths.
struct simd_kernel {
  const char* name;  // "avx2", "neon", "neon-dotprod"; nullptr: none
  vec_dot_fn fn;
};

bool cpu_runs(const simd_kernel& k) {
  if (!k.fn) return false;
  const std::string name = k.name;
#if defined(__x86_64__)
  if (name == "avx2") {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !((ecx >> 29) & 1)) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }
#elif defined(__aarch64__)
  if (name == "neon") return true;  // ASIMD: every arm64 CPU
  if (name == "neon-dotprod") return getauxval(AT_HWCAP) & HWCAP_ASIMDDP;
#endif
  return false;
}

struct quant_case {
  tensor_type type;
  const char* model;  // a synthetic model file holding tensors of this type
  vec_dot_fn generic;
  simd_kernel simd[2];
};

void PrintTo(const quant_case& c, std::ostream* os) {
  *os << tensor_type_name(c.type);
}

std::string quant_case_name(const ::testing::TestParamInfo<quant_case>& info) {
  return std::string(tensor_type_name(info.param.type));
}

// vec_dot of a weight row against random activations, checked against double precision on the
// dequantized rows; and the portable kernel against the SIMD ones on the same bytes.
void check_dot(const quant_case& c, const uint8_t* w, int64_t n, std::mt19937& rng,
               const std::string& what) {
  const type_kernels* k = kernels_for(c.type);
  const type_kernels* xk = kernels_for(k->vec_dot_type);
  const auto x = random_row(rng, n);
  std::vector<uint8_t> xq(size_t(tensor_type_row_bytes(k->vec_dot_type, n)));
  xk->from_float(x.data(), xq.data(), n);
  std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
  k->to_float(w, wd.data(), n);
  xk->to_float(xq.data(), xd.data(), n);
  const exact_dot want = dot_in_double(wd, xd);
  ASSERT_TRUE(std::isfinite(want.value)) << what;
  EXPECT_NEAR(k->vec_dot(n, w, xq.data()), want.value, 1e-5 * want.scale + 1e-30) << what;
  const float generic = c.generic(n, w, xq.data());
  EXPECT_NEAR(generic, want.value, 1e-5 * want.scale + 1e-30) << what << " (portable)";
  for (const simd_kernel& simd : c.simd) {
    if (!cpu_runs(simd)) continue;
    EXPECT_NEAR(simd.fn(n, w, xq.data()), generic, 1e-6 * want.scale + 1e-30)
        << what << " (" << simd.name << ")";
  }
}

class quantized_weights : public ::testing::TestWithParam<quant_case> {};

TEST_P(quantized_weights, dot_of_model_rows_matches_double_precision) {
  const quant_case& c = GetParam();
  const std::string path = testing::testdata_path(c.model);
  ASSERT_FALSE(path.empty());
  auto g = gguf_file::open(path);
  ASSERT_TRUE(g) << g.message();
  std::mt19937 rng(11);
  int n_tensors = 0;
  for (const auto& t : g->tensors()) {
    if (t.type != c.type) continue;
    ++n_tensors;
    const int64_t row_bytes = tensor_type_row_bytes(t.type, t.ne[0]);
    for (int64_t r = 0; r < std::min<int64_t>(t.ne[1], 8); ++r)
      check_dot(c, t.data + r * row_bytes, t.ne[0], rng, t.name + " row " + std::to_string(r));
  }
  EXPECT_GT(n_tensors, 0) << "no " << tensor_type_name(c.type) << " tensor in " << path;
}

TEST_P(quantized_weights, dot_of_random_blocks_matches_double_precision) {
  const quant_case& c = GetParam();
  const int64_t block = tensor_type_layout_of(uint32_t(c.type))->block_elems;
  std::mt19937 rng(13);
  for (int64_t n : {1, 2, 3, 16}) {
    for (int rep = 0; rep < 20; ++rep) {
      const auto w = random_blocks(rng, c.type, n * block);
      check_dot(c, w.data(), n * block, rng, "n=" + std::to_string(n * block));
    }
  }
}

// The ops that read these weights: mul_mat converts activations with the dot type's
// from_float; get_rows dequantizes embedding rows.
TEST_P(quantized_weights, mul_mat_and_get_rows_read_the_weights) {
  const quant_case& c = GetParam();
  const std::string path = testing::testdata_path(c.model);
  ASSERT_FALSE(path.empty());
  auto g = gguf_file::open(path);
  ASSERT_TRUE(g) << g.message();
  const gguf_tensor* gt = nullptr;
  for (const auto& t : g->tensors())
    if (t.type == c.type && !gt) gt = &t;
  ASSERT_NE(gt, nullptr);
  auto be = make_cpu_backend(2);
  ASSERT_TRUE(be->supports_weight_type(c.type));
  const tensor w = be->weight(*gt);
  const int64_t n_in = gt->ne[0], n_out = gt->ne[1], n_tok = 3;
  const type_kernels* k = kernels_for(c.type);
  const type_kernels* xk = kernels_for(k->vec_dot_type);

  std::mt19937 rng(17);
  const auto x = random_row(rng, n_in * n_tok);
  tensor xt = be->alloc(tensor_type::f32, n_in, n_tok, "x");
  tensor out = be->alloc(tensor_type::f32, n_out, n_tok, "out");
  be->upload(xt, x.data(), x.size() * 4);
  be->mul_mat(w, xt, nullptr, out);
  std::vector<float> got(size_t(n_out * n_tok));
  be->download(out, got.data(), got.size() * 4);

  std::vector<float> wd(static_cast<size_t>(n_in)), xd(static_cast<size_t>(n_in));
  std::vector<uint8_t> xq(size_t(tensor_type_row_bytes(k->vec_dot_type, n_in)));
  for (int64_t tok = 0; tok < n_tok; ++tok) {
    xk->from_float(x.data() + tok * n_in, xq.data(), n_in);
    xk->to_float(xq.data(), xd.data(), n_in);
    for (int64_t r = 0; r < n_out; ++r) {
      k->to_float(gt->data + r * w.row_bytes(), wd.data(), n_in);
      const exact_dot want = dot_in_double(wd, xd);
      ASSERT_NEAR(got[size_t(tok * n_out + r)], want.value, 1e-5 * want.scale + 1e-30)
          << gt->name << " row " << r << " token " << tok;
    }
  }

  const int32_t ids[3] = {int32_t(n_out - 1), 0, int32_t(n_out / 2)};
  tensor idt = be->alloc(tensor_type::i32, 3, 1, "ids");
  tensor rows = be->alloc(tensor_type::f32, n_in, 3, "rows");
  be->upload(idt, ids, sizeof ids);
  be->get_rows(w, idt, rows);
  std::vector<float> got_rows(size_t(n_in * 3));
  be->download(rows, got_rows.data(), got_rows.size() * 4);
  for (int i = 0; i < 3; ++i) {
    k->to_float(gt->data + ids[i] * w.row_bytes(), wd.data(), n_in);
    for (int64_t j = 0; j < n_in; ++j) ASSERT_EQ(got_rows[size_t(i * n_in + j)], wd[size_t(j)]);
  }
  for (tensor* t : {&xt, &out, &idt, &rows}) be->free(*t);
}

// Each type's SIMD kernels on this architecture.
#if defined(__x86_64__)
#define SIMD_KERNELS(avx2, neon, neon_dotprod) \
  {                                            \
    { "avx2", avx2 }                           \
  }
#elif defined(__aarch64__)
#define SIMD_KERNELS(avx2, neon, neon_dotprod) \
  {                                            \
    {"neon", neon}, {                          \
      "neon-dotprod", neon_dotprod             \
    }                                          \
  }
#else
#define SIMD_KERNELS(avx2, neon, neon_dotprod) \
  {}
#endif

INSTANTIATE_TEST_SUITE_P(
    all, quantized_weights,
    ::testing::Values(
        quant_case{
            tensor_type::q4_0, "models/synthetic/synthetic-llama-a.q4_0.gguf",
            dot_q4_0_q8_0_generic,
            SIMD_KERNELS(dot_q4_0_q8_0_avx2, dot_q4_0_q8_0_neon, dot_q4_0_q8_0_neon_dotprod)},
        quant_case{
            tensor_type::q4_k, "models/synthetic/synthetic-llama-a.q4_k_m.gguf",
            dot_q4_k_q8_k_generic,
            SIMD_KERNELS(dot_q4_k_q8_k_avx2, dot_q4_k_q8_k_neon, dot_q4_k_q8_k_neon_dotprod)},
        quant_case{tensor_type::q5_k, "models/synthetic/synthetic-llama-a.q5_k_m.gguf",
                   dot_q5_k_q8_k_generic, SIMD_KERNELS(dot_q5_k_q8_k_avx2, nullptr, nullptr)},
        quant_case{
            tensor_type::q6_k, "models/synthetic/synthetic-llama-a.q6_k.gguf",
            dot_q6_k_q8_k_generic,
            SIMD_KERNELS(dot_q6_k_q8_k_avx2, dot_q6_k_q8_k_neon, dot_q6_k_q8_k_neon_dotprod)}),
    quant_case_name);

// --- dequantization of hand-built blocks ------------------------------------------------
// Blocks are packed here as ggml's quantize_row_*_ref packs them, from chosen values whose
// products are exact in F32, so every dequantized value must come out exactly.

TEST(dequantize, q4_0_block) {
  block_q4_0 b[2];
  b[0].d = fp32_to_fp16(0.5f);
  b[1].d = fp32_to_fp16(-2.0f);
  for (int j = 0; j < 16; ++j) {
    b[0].qs[j] = uint8_t(j | ((15 - j) << 4));
    b[1].qs[j] = uint8_t(((j * 5) % 16) | (((j * 3 + 1) % 16) << 4));
  }
  float y[64];
  kernels_for(tensor_type::q4_0)->to_float(b, y, 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * float(j - 8)) << j;
    EXPECT_EQ(y[j + 16], 0.5f * float(7 - j)) << j;
    EXPECT_EQ(y[32 + j], -2.0f * float((j * 5) % 16 - 8)) << j;
    EXPECT_EQ(y[48 + j], -2.0f * float((j * 3 + 1) % 16 - 8)) << j;
  }
}

// Eight 6-bit scales and mins into 12 bytes, as quantize_row_q4_K_ref does.
void pack_scales_mins(const uint8_t sc[8], const uint8_t m[8], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] = sc[j];
      out[j + 4] = m[j];
    } else {
      out[j + 4] = uint8_t((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      out[j - 4] |= uint8_t((sc[j] >> 4) << 6);
      out[j] |= uint8_t((m[j] >> 4) << 6);
    }
  }
}

// Scales and mins using all six bits, the high ones included.
constexpr uint8_t k_test_scales[8] = {1, 17, 33, 63, 5, 40, 63, 21};
constexpr uint8_t k_test_mins[8] = {0, 63, 2, 48, 31, 16, 60, 7};

TEST(dequantize, q4_k_block) {
  block_q4_k b{};
  b.d = fp32_to_fp16(0.25f);
  b.dmin = fp32_to_fp16(0.5f);
  pack_scales_mins(k_test_scales, k_test_mins, b.scales);
  int q[256];
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 7 + 3) % 16;
    const int c = i / 64, r = i % 64;
    b.qs[32 * c + r % 32] |= uint8_t(r < 32 ? q[i] : q[i] << 4);
  }
  float y[256];
  kernels_for(tensor_type::q4_k)->to_float(&b, y, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    EXPECT_EQ(y[i], 0.25f * float(k_test_scales[s] * q[i]) - 0.5f * float(k_test_mins[s])) << i;
  }
}

TEST(dequantize, q5_k_block) {
  block_q5_k b{};
  b.d = fp32_to_fp16(0.25f);
  b.dmin = fp32_to_fp16(-0.5f);
  pack_scales_mins(k_test_scales, k_test_mins, b.scales);
  int q[256];
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 11 + 5) % 32;
    const int c = i / 64, r = i % 64;
    b.qs[32 * c + r % 32] |= uint8_t(r < 32 ? (q[i] & 0xF) : (q[i] & 0xF) << 4);
    if (q[i] & 16) b.qh[r % 32] |= uint8_t(1 << (2 * c + (r >= 32)));
  }
  float y[256];
  kernels_for(tensor_type::q5_k)->to_float(&b, y, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 32;
    EXPECT_EQ(y[i], 0.25f * float(k_test_scales[s] * q[i]) + 0.5f * float(k_test_mins[s])) << i;
  }
}

TEST(dequantize, q6_k_block) {
  block_q6_k b{};
  b.d = fp32_to_fp16(0.125f);
  const int8_t sc[16] = {1, -2, 3, -4, 127, -128, 7, 0, 9, -10, 64, -64, 13, 14, -15, 16};
  std::memcpy(b.scales, sc, 16);
  int q[256];
  for (int i = 0; i < 256; ++i) {
    q[i] = (i * 13 + 7) % 64;
    const int h = i / 128, g = (i % 128) / 32, l = i % 32;
    b.ql[64 * h + l + 32 * (g & 1)] |= uint8_t((q[i] & 0xF) << (4 * (g >> 1)));
    b.qh[32 * h + l] |= uint8_t((q[i] >> 4) << (2 * g));
  }
  float y[256];
  kernels_for(tensor_type::q6_k)->to_float(&b, y, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.125f * float(sc[i / 16] * (q[i] - 32))) << i;
}

// --- the Q8_K quantizer -----------------------------------------------------------------

TEST(q8_k, quantizes_to_within_half_a_step_with_exact_block_sums) {
  const type_kernels* k = kernels_for(tensor_type::q8_k);
  ASSERT_NE(k, nullptr);
  ASSERT_NE(k->from_float, nullptr);
  std::mt19937 rng(5);
  for (float magnitude : {1e-6f, 1.0f, 3e4f}) {
    const int64_t n = 1024;
    auto x = random_row(rng, n);
    for (auto& v : x) v *= magnitude;
    x[300] = 10 * magnitude;  // a positive largest value in block 1 (stored as -127)
    std::vector<block_q8_k> q(size_t(n / k_qk_k));
    k->from_float(x.data(), q.data(), n);
    std::vector<float> back(static_cast<size_t>(n));
    k->to_float(q.data(), back.data(), n);
    for (int64_t b = 0; b < n / k_qk_k; ++b) {
      const block_q8_k& blk = q[size_t(b)];
      const float* xb = x.data() + b * k_qk_k;
      const int64_t imax =
          std::max_element(xb, xb + k_qk_k,
                           [](float a, float c) { return std::fabs(a) < std::fabs(c); }) -
          xb;
      EXPECT_EQ(blk.qs[imax], -127) << "block " << b;
      for (int i = 0; i < k_qk_k; ++i) {
        EXPECT_GE(blk.qs[i], -127);
        EXPECT_LE(std::fabs(back[size_t(b * k_qk_k + i)] - xb[i]),
                  0.5f * std::fabs(blk.d) * (1 + 1e-5f))
            << "block " << b << " value " << i;
      }
      for (int j = 0; j < k_qk_k / 16; ++j) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += blk.qs[16 * j + i];
        EXPECT_EQ(blk.bsums[j], sum) << "block " << b << " group " << j;
      }
    }
  }
}

TEST(q8_k, zero_block_is_all_zero) {
  const type_kernels* k = kernels_for(tensor_type::q8_k);
  std::vector<float> x(512, 0.0f);
  x[400] = 1.0f;  // the second block is not zero
  block_q8_k q[2];
  std::memset(q, 0x5a, sizeof q);
  k->from_float(x.data(), q, 512);
  EXPECT_EQ(q[0].d, 0.0f);
  for (int i = 0; i < k_qk_k; ++i) EXPECT_EQ(q[0].qs[i], 0);
  for (int j = 0; j < k_qk_k / 16; ++j) EXPECT_EQ(q[0].bsums[j], 0);
  EXPECT_EQ(q[1].qs[400 - 256], -127);
  EXPECT_FLOAT_EQ(q[1].d, -1.0f / 127);
}

TEST(conversions, every_half_survives_a_round_trip_through_float) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
}

// F32 -> F16 by the CPU's own instruction (F16C's VCVTPS2PH, arm64's FCVT), when it has one.
#if defined(__x86_64__)
bool cpu_converts_halves() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && ((ecx >> 29) & 1);
}

__attribute__((target("f16c"))) uint16_t hardware_fp16(float f) {
  return uint16_t(_cvtss_sh(f, 0));
}
#elif defined(__aarch64__)
bool cpu_converts_halves() {
  return true;
}

uint16_t hardware_fp16(float f) {
  return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0);
}
#else
bool cpu_converts_halves() {
  return false;
}

uint16_t hardware_fp16(float) {
  return 0;
}
#endif

TEST(conversions, float_to_half_rounds_as_the_hardware_does) {
  // Asks the CPU itself: the portable-kernel run of this test turns the SIMD paths off.
  if (!cpu_converts_halves()) GTEST_SKIP() << "no F32 -> F16 instruction on this CPU";
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

// The backend's own row conversions (F16C, the activation quantizers) and the ones it takes from
// the type (engine/io/type-traits.h) must agree with the type's bit for bit: the converters and the
// quantizer read weights through the type's, the forward pass through the backend's.
TEST(conversions, the_backend_converts_rows_as_the_type_does) {
  std::mt19937 rng(29);
  const int64_t n = 512;
  for (tensor_type t :
       {tensor_type::f32, tensor_type::f16, tensor_type::bf16, tensor_type::q8_0, tensor_type::q4_0,
        tensor_type::q4_1, tensor_type::q5_0, tensor_type::q5_1, tensor_type::q8_1,
        tensor_type::q4_k, tensor_type::q5_k, tensor_type::q6_k, tensor_type::q8_k}) {
    SCOPED_TRACE(std::string(tensor_type_name(t)));
    const type_kernels* k = kernels_for(t);
    const tensor_type_traits& tt = tensor_type_traits_of(t);
    ASSERT_NE(k, nullptr);
    ASSERT_NE(tt.to_float, nullptr);
    const auto x = random_row(rng, n);
    std::vector<uint8_t> row(static_cast<size_t>(tensor_type_row_bytes(t, n)));
    if (tt.from_float) {
      tt.from_float(x.data(), row.data(), n);
      if (k->from_float) {
        std::vector<uint8_t> mine(row.size());
        k->from_float(x.data(), mine.data(), n);
        EXPECT_EQ(mine, row);
      }
    } else {
      ASSERT_NE(k->from_float, nullptr);  // an activation type: only the backend writes it
      k->from_float(x.data(), row.data(), n);
    }
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    tt.to_float(row.data(), want.data(), n);
    k->to_float(row.data(), got.data(), n);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace hearth::cpu
