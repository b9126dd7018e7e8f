// The tile kernels (engine/cpu/gemm.h) against the per-output dot products (vec_dot) on the same
// rounded activations: every weight type with a tile kernel, row lengths with and without
// partial blocks or SIMD tails, every tile size up to the kernel's maximum, and the tiled matrix
// product through the CPU backend with ragged row and token counts and a bias.
#include "engine/cpu/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "engine/convert/quantize.h"
#include "engine/cpu/kernel-test-inputs.h"
#include "engine/cpu/vec-dot.h"

namespace hearth::cpu {
namespace {

// Dot products the reference way: activations converted to the weight's vec_dot_type.
struct reference {
  tensor_type t;
  int64_t n;
  std::vector<uint8_t> w;  // rows in type t
  std::vector<uint8_t> x;  // rows in vec_dot_type
  double dot(int64_t r, int64_t c, double* magnitude) const {
    const type_kernels* k = kernels_for(t);
    const int64_t wb = tensor_type_row_bytes(t, n), xb = tensor_type_row_bytes(k->vec_dot_type, n);
    // Magnitude from the dequantized values, for a relative bound.
    std::vector<float> wf(static_cast<size_t>(n)), xf(static_cast<size_t>(n));
    k->to_float(w.data() + r * wb, wf.data(), n);
    kernels_for(k->vec_dot_type)->to_float(x.data() + c * xb, xf.data(), n);
    *magnitude = 0;
    for (int64_t i = 0; i < n; ++i) *magnitude += std::fabs(double(wf[size_t(i)]) * xf[size_t(i)]);
    return k->vec_dot(n, w.data() + r * wb, x.data() + c * xb);
  }
};

class gemm : public ::testing::TestWithParam<tensor_type> {};

// `rows` random weight rows and `cols` activation rows of n values, quantized the reference way;
// the activations in F32 in *xf.
reference random_reference(std::mt19937& rng, tensor_type t, int64_t n, int rows, int cols,
                           std::vector<float>* xf) {
  const type_kernels* k = kernels_for(t);
  reference ref{t, n, {}, {}};
  const auto wf = random_row(rng, n * rows);
  *xf = random_row(rng, n * cols);
  ref.w.resize(size_t(tensor_type_row_bytes(t, n) * rows));
  quantize_rows(t, wf.data(), ref.w.data(), rows, n);
  const int64_t xb = tensor_type_row_bytes(k->vec_dot_type, n);
  ref.x.resize(size_t(xb * cols));
  for (int c = 0; c < cols; ++c)
    kernels_for(k->vec_dot_type)->from_float(xf->data() + c * n, ref.x.data() + c * xb, n);
  return ref;
}

// Runs one tile (run(y, ldy)) into a sentinel-filled output one row wider than `rows`, and checks
// its nr x nc outputs against the reference dots and that it wrote nothing else.
template <typename Run>
void expect_tile(const reference& ref, int rows, int cols, int nr, int nc, Run run) {
  const float sentinel = 12345.0f;
  const int ldy = rows + 1;
  std::vector<float> y(size_t(cols * ldy), sentinel);
  run(y.data(), ldy);
  for (int c = 0; c < cols; ++c) {
    for (int r = 0; r < ldy; ++r) {
      const float got = y[size_t(c * ldy + r)];
      if (r >= nr || c >= nc) {
        EXPECT_EQ(got, sentinel) << "wrote outside the tile at r=" << r << " c=" << c;
        continue;
      }
      double mag = 0;
      const double want = ref.dot(r, c, &mag);
      EXPECT_NEAR(got, want, 1e-5 * mag + 1e-6)
          << tensor_type_name(ref.t) << " n=" << ref.n << " tile " << nr << "x" << nc << " r=" << r
          << " c=" << c;
    }
  }
}

TEST_P(gemm, tiles_of_every_size_match_the_dot_products) {
  const tensor_type t = GetParam();
  const gemm_kernel* g = gemm_kernel_for(t);
  if (!g) GTEST_SKIP() << "no tile kernel for " << tensor_type_name(t) << " on this CPU";
  const int64_t block = tensor_type_layout_of(uint32_t(t))->block_elems;
  std::mt19937 rng(11);
  for (int64_t n : {17, 32, 96, 256, 512, 768, 2048}) {
    if (n % block != 0) continue;
    const int rows = g->max_rows, cols = g->max_cols;
    std::vector<float> xf;
    const reference ref = random_reference(rng, t, n, rows, cols, &xf);
    const int64_t gx = g->x_row_bytes(n);
    std::vector<uint8_t> xg(size_t(gx * cols));
    for (int c = 0; c < cols; ++c) g->x_from_float(xf.data() + c * n, xg.data() + c * gx, n);
    for (int nr = 1; nr <= rows; ++nr) {
      for (int nc = 1; nc <= cols; ++nc) {
        expect_tile(ref, rows, cols, nr, nc, [&](float* y, int ldy) {
          g->tile(n, ref.w.data(), tensor_type_row_bytes(t, n), xg.data(), gx, y, ldy, nr, nc);
        });
      }
    }
  }
}

TEST_P(gemm, the_tiled_product_matches_per_output_dots_on_ragged_shapes) {
  const tensor_type t = GetParam();
  if (!gemm_kernel_for(t)) GTEST_SKIP() << "no tile kernel for " << tensor_type_name(t);
  const type_kernels* k = kernels_for(t);
  const int64_t n_in = 512, n_out = 37;
  for (const int64_t n_tok : {1, 11}) {
    std::mt19937 rng(5);
    const auto wf = random_row(rng, n_in * n_out), xf = random_row(rng, n_in * n_tok),
               bf = random_row(rng, n_out);
    auto be = make_cpu_backend(2);
    tensor w = be->alloc(t, n_in, n_out, "w"), x = be->alloc(tensor_type::f32, n_in, n_tok, "x");
    tensor b = be->alloc(tensor_type::f32, n_out, 1, "b"),
           y = be->alloc(tensor_type::f32, n_out, n_tok, "y");
    quantize_rows(t, wf.data(), w.data, n_out, n_in);
    be->upload(x, xf.data(), xf.size() * 4);
    be->upload(b, bf.data(), bf.size() * 4);
    be->mul_mat(w, x, &b, y);
    const float* yd = static_cast<const float*>(y.data);

    reference ref{t, n_in, {}, {}};
    ref.w.assign(static_cast<const uint8_t*>(w.data),
                 static_cast<const uint8_t*>(w.data) + w.n_bytes());
    const int64_t xb = tensor_type_row_bytes(k->vec_dot_type, n_in);
    ref.x.resize(size_t(xb * n_tok));
    for (int64_t c = 0; c < n_tok; ++c)
      kernels_for(k->vec_dot_type)->from_float(xf.data() + c * n_in, ref.x.data() + c * xb, n_in);
    for (int64_t c = 0; c < n_tok; ++c) {
      for (int64_t r = 0; r < n_out; ++r) {
        double mag = 0;
        const double want = ref.dot(r, c, &mag) + bf[size_t(r)];
        EXPECT_NEAR(yd[c * n_out + r], want, 1e-5 * mag + 1e-5) << "r=" << r << " c=" << c;
      }
    }
    for (auto* tt : {&w, &x, &b, &y}) be->free(*tt);
  }
}

// The packed layouts (packed_format): every group fill (1 .. group_rows stored rows, the rest
// zero) against every tile width, row lengths of one and several super-blocks (and an odd
// number of blocks for the 32-value types).
TEST_P(gemm, packed_groups_of_every_fill_match_the_dot_products) {
  const tensor_type t = GetParam();
  const packed_format* f = packed_format_for(t);
  if (!f) GTEST_SKIP() << "no packed layout for " << tensor_type_name(t) << " on this CPU";
  const gemm_kernel& g = f->kernel;
  const int64_t block = tensor_type_layout_of(uint32_t(t))->block_elems;
  std::mt19937 rng(13);
  for (int64_t n : {96, 256, 512, 2048}) {
    if (n % block != 0) continue;
    const int rows = f->group_rows, cols = g.max_cols;
    std::vector<float> xf;
    const reference ref = random_reference(rng, t, n, rows, cols, &xf);
    const int64_t gx = g.x_row_bytes(n);
    std::vector<uint8_t> xg(size_t(gx * cols));
    for (int c = 0; c < cols; ++c) g.x_from_float(xf.data() + c * n, xg.data() + c * gx, n);
    std::vector<uint8_t> group(size_t(f->group_bytes(n)), 0xAB);
    for (int nr = 1; nr <= rows; ++nr) {
      f->pack(ref.w.data(), tensor_type_row_bytes(t, n), n, nr, group.data());
      for (int nc = 1; nc <= cols; ++nc) {
        expect_tile(ref, rows, cols, nr, nc, [&](float* y, int ldy) {
          g.tile(n, group.data(), 0, xg.data(), gx, y, ldy, nr, nc);
        });
      }
    }
  }
}

// The backend packs a weight at its first product and keeps it: new bytes uploaded into the
// tensor, or a freed tensor's memory reused for another, must not be served the old packing.
TEST_P(gemm, a_weight_rewritten_after_a_product_is_repacked) {
  const tensor_type t = GetParam();
  if (!packed_format_for(t)) GTEST_SKIP() << "no packed layout for " << tensor_type_name(t);
  const int64_t n_in = 512, n_out = 32;
  std::mt19937 rng(17);
  auto be = make_cpu_backend(2);
  tensor x = be->alloc(tensor_type::f32, n_in, 1, "x"),
         y = be->alloc(tensor_type::f32, n_out, 1, "y");
  const auto xf = random_row(rng, n_in);
  be->upload(x, xf.data(), xf.size() * 4);
  auto product = [&](const tensor& w) {
    be->mul_mat(w, x, nullptr, y);
    const float* yd = static_cast<const float*>(y.data);
    return std::vector<float>(yd, yd + n_out);
  };
  auto expected = [&](const std::vector<uint8_t>& wq) {
    reference ref{t, n_in, wq, {}};
    const type_kernels* k = kernels_for(t);
    ref.x.resize(size_t(tensor_type_row_bytes(k->vec_dot_type, n_in)));
    kernels_for(k->vec_dot_type)->from_float(xf.data(), ref.x.data(), n_in);
    std::vector<double> out;
    for (int64_t r = 0; r < n_out; ++r) {
      double mag = 0;
      out.push_back(ref.dot(r, 0, &mag));
    }
    return out;
  };
  auto quantized = [&](uint32_t seed) {
    std::mt19937 r(seed);
    const auto wf = random_row(r, n_in * n_out);
    std::vector<uint8_t> wq(size_t(tensor_type_row_bytes(t, n_in) * n_out));
    quantize_rows(t, wf.data(), wq.data(), n_out, n_in);
    return wq;
  };
  const auto a = quantized(1), b = quantized(2);
  tensor w = be->alloc(t, n_in, n_out, "w");
  be->upload(w, a.data(), a.size());
  product(w);
  be->upload(w, b.data(), b.size());
  auto got = product(w);
  auto want = expected(b);
  for (int64_t r = 0; r < n_out; ++r) EXPECT_NEAR(got[size_t(r)], want[size_t(r)], 1e-3) << r;

  be->free(w);
  tensor w2 = be->alloc(t, n_in, n_out, "w2");  // likely the same memory
  std::memcpy(w2.data, a.data(), a.size());
  got = product(w2);
  want = expected(a);
  for (int64_t r = 0; r < n_out; ++r) EXPECT_NEAR(got[size_t(r)], want[size_t(r)], 1e-3) << r;
  for (auto* tt : {&w2, &x, &y}) be->free(*tt);
}

// mul_mats (several products of one activation matrix, run as one job) gives each product
// exactly what mul_mat gives it alone: products of different types (activations converted
// once per format, shared where formats match: Q4_K and Q6_K both take Q8_K rows), one token and
// several, a bias on one product, more products than one job takes, and ragged row counts.
TEST_P(gemm, several_products_of_one_input_equal_each_product_alone) {
  const tensor_type t = GetParam();
  const int64_t n_in = 512;
  const tensor_type types[] = {t, tensor_type::q6_k, t, tensor_type::f32, t, tensor_type::q8_0};
  const int64_t rows[] = {37, 64, 5, 19, 130, 33};
  constexpr size_t n = std::size(types);
  std::mt19937 rng(29);
  auto be = make_cpu_backend(2);
  std::vector<tensor> w, alone, fused;
  for (size_t i = 0; i < n; ++i) {
    w.push_back(be->alloc(types[i], n_in, rows[i], "w"));
    const auto wf = random_row(rng, n_in * rows[i]);
    quantize_rows(types[i], wf.data(), w.back().data, rows[i], n_in);
  }
  tensor b = be->alloc(tensor_type::f32, rows[2], 1, "b");
  const auto bf = random_row(rng, rows[2]);
  be->upload(b, bf.data(), bf.size() * 4);
  for (const int64_t n_tok : {1, 11}) {
    tensor x = be->alloc(tensor_type::f32, n_in, n_tok, "x");
    const auto xf = random_row(rng, n_in * n_tok);
    be->upload(x, xf.data(), xf.size() * 4);
    std::vector<backend::product> ps;
    for (size_t i = 0; i < n; ++i) {
      alone.push_back(be->alloc(tensor_type::f32, rows[i], n_tok, "alone"));
      fused.push_back(be->alloc(tensor_type::f32, rows[i], n_tok, "fused"));
      be->mul_mat(w[i], x, i == 2 ? &b : nullptr, alone.back());
    }
    for (size_t i = 0; i < n; ++i) ps.push_back({&w[i], i == 2 ? &b : nullptr, &fused[i]});
    be->mul_mats(x, ps);
    for (size_t i = 0; i < n; ++i) {
      const float* want = static_cast<const float*>(alone[i].data);
      const float* got = static_cast<const float*>(fused[i].data);
      for (int64_t j = 0; j < rows[i] * n_tok; ++j)
        ASSERT_EQ(got[j], want[j]) << tensor_type_name(types[i]) << " product " << i << " tokens "
                                   << n_tok << " output " << j;
    }
    for (auto& tt : alone) be->free(tt);
    for (auto& tt : fused) be->free(tt);
    alone.clear();
    fused.clear();
    be->free(x);
  }
  for (auto& tt : w) be->free(tt);
  be->free(b);
}

// A token's outputs do not depend on the tokens beside it: the node decodes many sequences in
// one step, and a job must give what it gives alone (node/batch-engine_test.cpp). One token and
// several must add in the same order, row tails shorter than a vector included (stories260K's
// n_ff is 172): a dot product (vec_dot) for one token and a tile for several did not.
TEST_P(gemm, a_tokens_outputs_are_the_same_bits_whatever_tokens_share_its_product) {
  const tensor_type t = GetParam();
  const int64_t block = tensor_type_layout_of(uint32_t(t))->block_elems;
  std::mt19937 rng(31);
  auto be = make_cpu_backend(2);
  for (const int64_t n_in : {int64_t(172), int64_t(200), int64_t(512), int64_t(2048)}) {
    if (n_in % block != 0) continue;
    const int64_t n_out = 70;
    tensor w = be->alloc(t, n_in, n_out, "w");
    const auto wf = random_row(rng, n_in * n_out);
    quantize_rows(t, wf.data(), w.data, n_out, n_in);
    for (const int64_t n_tok : {2, 7, 13}) {
      tensor x = be->alloc(tensor_type::f32, n_in, n_tok, "x");
      tensor y = be->alloc(tensor_type::f32, n_out, n_tok, "y");
      const auto xf = random_row(rng, n_in * n_tok);
      be->upload(x, xf.data(), xf.size() * 4);
      be->mul_mat(w, x, nullptr, y);
      tensor x1 = be->alloc(tensor_type::f32, n_in, 1, "x1");
      tensor y1 = be->alloc(tensor_type::f32, n_out, 1, "y1");
      for (int64_t c = 0; c < n_tok; ++c) {
        be->upload(x1, xf.data() + c * n_in, size_t(n_in) * 4);
        be->mul_mat(w, x1, nullptr, y1);
        const float* alone = static_cast<const float*>(y1.data);
        const float* together = static_cast<const float*>(y.data) + c * n_out;
        for (int64_t r = 0; r < n_out; ++r)
          ASSERT_EQ(std::memcmp(&alone[r], &together[r], 4), 0)
              << tensor_type_name(t) << " n_in " << n_in << ": token " << c << " of " << n_tok
              << ", output " << r << ": " << alone[r] << " alone, " << together[r] << " together";
      }
      for (tensor* u : {&x, &y, &x1, &y1}) be->free(*u);
    }
    be->free(w);
  }
}

// mul_mat_id through the CPU backend (packed or stored layout, whichever this CPU uses): each
// output row is exactly mul_mat with the chosen expert's matrix, for tokens that share and that
// do not share experts, one row per expert (decoding) and several.
TEST_P(gemm, the_expert_product_gives_each_row_its_experts_product) {
  const tensor_type t = GetParam();
  const int64_t n_in = 512, n_out = 37, n_expert = 3, k = 2;
  std::mt19937 rng(23);
  auto be = make_cpu_backend(2);
  tensor w = be->alloc(t, n_in, n_out * n_expert, "experts");
  const auto wf = random_row(rng, n_in * n_out * n_expert);
  quantize_rows(t, wf.data(), w.data, n_out * n_expert, n_in);
  w.ne[1] = n_out;
  w.ne[2] = n_expert;
  for (const int64_t n_tok : {1, 5}) {
    tensor x = be->alloc(tensor_type::f32, n_in, n_tok, "x");
    tensor ids = be->alloc(tensor_type::i32, k, n_tok, "ids");
    tensor out = be->alloc(tensor_type::f32, n_out, n_tok * k, "out");
    tensor one = be->alloc(tensor_type::f32, n_out, n_tok, "one");
    const auto xf = random_row(rng, n_in * n_tok);
    be->upload(x, xf.data(), xf.size() * 4);
    std::vector<int32_t> id;
    for (int64_t i = 0; i < n_tok; ++i) id.insert(id.end(), {int32_t(i % 3), int32_t((i + 2) % 3)});
    be->upload(ids, id.data(), id.size() * 4);
    be->mul_mat_id(w, x, ids, out);
    std::vector<float> got(static_cast<const float*>(out.data),
                           static_cast<const float*>(out.data) + n_out * n_tok * k);
    for (int64_t e = 0; e < n_expert; ++e) {
      tensor we = w;
      we.ne[2] = 1;
      we.data = static_cast<uint8_t*>(w.data) + e * n_out * w.row_bytes();
      be->mul_mat(we, x, nullptr, one);
      const float* want = static_cast<const float*>(one.data);
      for (int64_t i = 0; i < n_tok * k; ++i) {
        if (id[size_t(i)] != e) continue;
        for (int64_t r = 0; r < n_out; ++r)
          ASSERT_EQ(got[size_t(i * n_out + r)], want[i / k * n_out + r])
              << tensor_type_name(t) << " tokens " << n_tok << " row " << i << " expert " << e
              << " output " << r;
      }
    }
    for (auto* tt : {&x, &ids, &out, &one}) be->free(*tt);
  }
  w.ne[1] = n_out * n_expert;
  w.ne[2] = 1;
  be->free(w);
}

// The activation formats hold exactly the reference quantizers' values (the integer products are
// then exact, so the tile kernels differ from the reference only in summation order). Rows with
// exact ties (values at k + 1/2 steps of the scale) check the rounding rules.
std::vector<float> rows_with_ties(std::mt19937& rng, int64_t n) {
  auto v = random_row(rng, n);
  for (int64_t i = 0; i < n; i += 7) v[size_t(i)] = float(int(i % 9) - 4) + 0.5f;
  v[0] = 127.0f;  // scale 1: the halves above are exact ties
  return v;
}

TEST(gemm_activations, q8_k_format_is_the_reference_quantization_stored_unsigned) {
  const gemm_kernel* g = gemm_kernel_for(tensor_type::q4_k);
  if (!g) GTEST_SKIP() << "no tile kernel on this CPU";
  std::mt19937 rng(3);
  const int64_t n = 1024;
  for (int trial = 0; trial < 20; ++trial) {
    auto x = rows_with_ties(rng, n);
    if (trial == 1) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
    if (trial == 2) x[300] = -127.0f;  // a tie for the largest magnitude: the first one wins
    std::vector<block_q8_k> want(size_t(n / k_qk_k)), got(size_t(n / k_qk_k));
    kernels_for(tensor_type::q8_k)->from_float(x.data(), want.data(), n);
    g->x_from_float(x.data(), got.data(), n);
    for (size_t b = 0; b < want.size(); ++b) {
      EXPECT_EQ(got[b].d, want[b].d) << "block " << b;
      for (int i = 0; i < k_qk_k; ++i)
        ASSERT_EQ(uint8_t(got[b].qs[i]), uint8_t(want[b].qs[i]) ^ 0x80)
            << "block " << b << " " << i;
      for (int j = 0; j < k_qk_k / 16; ++j) EXPECT_EQ(got[b].bsums[j], want[b].bsums[j]);
    }
  }
}

TEST(gemm_activations, q8_0_format_is_the_reference_quantization_stored_unsigned) {
  const gemm_kernel* g = gemm_kernel_for(tensor_type::q8_0);
  if (!g) GTEST_SKIP() << "no tile kernel on this CPU";
  std::mt19937 rng(4);
  for (int64_t n : {32, 96, 2048}) {
    const auto x = rows_with_ties(rng, n);
    std::vector<block_q8_0> want(size_t(n / 32));
    kernels_for(tensor_type::q8_0)->from_float(x.data(), want.data(), n);
    std::vector<uint8_t> got(size_t(g->x_row_bytes(n)));
    g->x_from_float(x.data(), got.data(), n);
    const int64_t n_pad = (n + 63) / 64 * 64;
    const auto* d = reinterpret_cast<const float*>(got.data() + n_pad);
    for (int64_t b = 0; b < n / 32; ++b) {
      EXPECT_EQ(d[b], fp16_to_fp32(want[size_t(b)].d)) << "n " << n << " block " << b;
      for (int i = 0; i < 32; ++i)
        ASSERT_EQ(got[size_t(b * 32 + i)], uint8_t(want[size_t(b)].qs[i]) ^ 0x80)
            << "n " << n << " block " << b << " value " << i;
    }
    for (int64_t i = n; i < n_pad; ++i) EXPECT_EQ(got[size_t(i)], 0x80) << "padding " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(all, gemm,
                         ::testing::Values(tensor_type::f32, tensor_type::f16, tensor_type::bf16,
                                           tensor_type::q8_0, tensor_type::q4_0, tensor_type::q4_k,
                                           tensor_type::q5_k, tensor_type::q6_k),
                         [](const auto& p) { return std::string(tensor_type_name(p.param)); });

}  // namespace
}  // namespace hearth::cpu
