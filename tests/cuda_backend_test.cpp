// The CUDA backend as a whole, beyond single ops (backend_ops_test.cpp) and whole models
// (conformance_device_test.cpp): decoding steps replayed from CUDA graphs give the same logits,
// bit for bit, as the same steps launched op by op; a batch of several sequences gives each the
// logits it gets alone; running out of device memory is an error that names what did not fit,
// after which the backend still works; the mixture-of-experts ops through what the CUDA
// kernels do differently from the Vulkan ones (backend_ops_test.cpp checks both against the CPU):
// the grouping of a prompt's rows by expert on the device, many rows per expert taken 8 at a time,
// and a routed step replayed from a graph with new ids; matrix products round their activations
// as the CPU does (to the weight's dot-product type), so they agree with the CPU's nearly bit for
// bit, and several products of one input, rounded once, are each the product alone. Without an
// NVIDIA GPU the binary reports itself skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/backend-cuda.h"
#include "engine/context.h"
#include "engine/convert/quantize.h"
#include "engine/cpu/vec-dot.h"
#include "engine/io/gguf.h"
#include "engine/io/type-traits.h"
#include "engine/model.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

class cuda_backend_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string why = cuda::unavailable_reason();
    if (!why.empty()) testing::skip_all("CUDA backend: " + why);
  }

  static std::unique_ptr<model> load(const char* file, bool graphs) {
    const std::string path = testing::testdata_path(file);
    EXPECT_FALSE(path.empty()) << file;
    model_params p;
    p.make_backend = [graphs] {
      cuda_options o;
      o.graphs = graphs;
      return make_cuda_backend(o);
    };
    return model::load(path, p);
  }

  // Greedy decoding of `n` tokens after a prompt, one token per step; every step's logits.
  static std::vector<std::vector<float>> decode_steps(model& m, int n) {
    context ctx(m, {.n_ctx = 256});
    std::vector<batch_token> prompt;
    for (int32_t i = 0; i < 9; ++i) prompt.push_back({(i * 37 + 5) % 200 + 1, i, 0, i == 8});
    auto r = ctx.decode(prompt);
    EXPECT_TRUE(r.ok()) << r.message();
    std::vector<std::vector<float>> out;
    int32_t pos = int32_t(prompt.size());
    for (int step = 0; step < n; ++step) {
      const float* l = ctx.logits(0);
      out.emplace_back(l, l + ctx.n_vocab());
      const int32_t next = int32_t(std::max_element(l, l + ctx.n_vocab()) - l);
      const batch_token b{next, pos++, 0, true};
      r = ctx.decode({&b, 1});
      EXPECT_TRUE(r.ok()) << r.message();
    }
    return out;
  }
};

TEST_F(cuda_backend_test, graph_replays_match_eager_launches_bit_for_bit) {
  for (const char* file :
       {"models/stories260K.gguf", "models/synthetic/synthetic-llama-a.q4_k_m.gguf",
        "models/synthetic/synthetic-gemma2-a.q8_0.gguf"}) {
    auto with = load(file, true);
    auto without = load(file, false);
    const auto a = decode_steps(*with, 24);
    const auto b = decode_steps(*without, 24);
    ASSERT_EQ(a.size(), b.size());
    for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s], b[s]) << file << " step " << s;
    const cuda_step_stats gs = cuda_stats(with->backend());
    const cuda_step_stats es = cuda_stats(without->backend());
    std::printf("%s: graphs %llu captures, %llu replays of %llu steps; eager %llu steps\n", file,
                (unsigned long long)gs.graph_captures, (unsigned long long)gs.graph_replays,
                (unsigned long long)gs.steps, (unsigned long long)es.steps);
    // 24 steps of one token: the second is captured, the rest replay.
    EXPECT_GE(gs.graph_replays, 20u) << file;
    EXPECT_EQ(es.graph_replays, 0u) << file;
  }
}

TEST_F(cuda_backend_test, a_batch_of_sequences_gives_each_its_own_logits) {
  auto m = load("models/synthetic/synthetic-qwen2-a.q4_k_m.gguf", true);
  const int32_t n_seq = 12;  // above the decoding kernel's 8 tokens: the GEMM path too
  context together(*m, {.n_ctx = 64 * n_seq, .n_seq_max = n_seq});
  std::vector<batch_token> batch;
  for (int32_t s = 0; s < n_seq; ++s)
    for (int32_t i = 0; i < 3 + s; ++i) batch.push_back({(s * 31 + i * 7) % 300 + 1, i, s, false});
  for (int32_t s = 0; s < n_seq; ++s) {
    // The last token of each sequence wants logits.
    for (auto it = batch.rbegin(); it != batch.rend(); ++it)
      if (it->seq == s) {
        it->logits = true;
        break;
      }
  }
  ASSERT_TRUE(together.decode(batch).ok());
  context alone(*m, {.n_ctx = 64});
  int32_t row = 0;
  double worst = 0;
  for (int32_t s = 0; s < n_seq; ++s) {
    alone.clear();
    std::vector<batch_token> one;
    for (const auto& t : batch)
      if (t.seq == s) one.push_back({t.token, t.pos, 0, t.logits});
    ASSERT_TRUE(alone.decode(one).ok());
    const float* a = together.logits(row++);
    const float* b = alone.logits(0);
    double err = 0, norm = 0;
    for (int32_t v = 0; v < alone.n_vocab(); ++v) {
      err += double(a[v] - b[v]) * double(a[v] - b[v]);
      norm += double(b[v]) * double(b[v]);
    }
    // Not bit for bit: the batch's products run on cuBLAS's SGEMM, a sequence of up to 8 tokens
    // alone on the decoding kernel, both in F32 over the same rounded activations, summed in
    // another order. A sequence that read another's cache or rows would be off by order 1.
    EXPECT_LE(err / norm, 1e-8) << "sequence " << s;
    worst = std::max(worst, err / norm);
  }
  std::printf("batch of %d sequences against each alone: worst NMSE %.2e\n", n_seq, worst);
}

// Up to 16 tokens of quantized weights stay on the decoding kernel, 8 tokens at a time
// (backend-cuda.cpp, on_mmv): a step of 12 sequences, a token each, is then each sequence's own
// step bit for bit, the second chunk's 4 tokens included.
TEST_F(cuda_backend_test, a_decoding_step_of_twelve_sequences_is_each_alone_bit_for_bit) {
  auto m = load("models/synthetic/synthetic-qwen2-a.q4_k_m.gguf", true);
  const int32_t n_seq = 12;
  context together(*m, {.n_ctx = 16 * n_seq, .n_seq_max = n_seq});
  std::vector<batch_token> step;
  for (int32_t s = 0; s < n_seq; ++s) step.push_back({s * 23 % 300 + 1, 0, s, true});
  ASSERT_TRUE(together.decode(step).ok());
  context alone(*m, {.n_ctx = 16});
  for (int32_t s = 0; s < n_seq; ++s) {
    alone.clear();
    const batch_token one{step[size_t(s)].token, 0, 0, true};
    ASSERT_TRUE(alone.decode({&one, 1}).ok());
    const float* a = together.logits(s);
    const float* b = alone.logits(0);
    int32_t differ = 0;
    for (int32_t v = 0; v < alone.n_vocab(); ++v) differ += a[v] != b[v];
    EXPECT_EQ(differ, 0) << "sequence " << s << ": logits that differ from its step alone";
  }
}

TEST_F(cuda_backend_test, out_of_memory_names_what_did_not_fit_and_the_backend_survives) {
  auto b = make_cuda_backend({});
  const int64_t huge = int64_t(1) << 40;  // 4 TiB of F32
  try {
    b->alloc(tensor_type::f32, huge, 1, "a far too large tensor");
    FAIL() << "a 4 TiB allocation succeeded";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of device memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("a far too large tensor"), std::string::npos) << msg;
  }
  tensor x = b->alloc(tensor_type::f32, 4, 1, "x");
  const float in[4] = {1, -2, 3, -4};
  b->upload(x, in, sizeof in);
  b->scale(x, 0.5f, x);
  float out[4] = {};
  b->download(x, out, sizeof out);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{0.5f, -1, 1.5f, -2}));
  b->free(x);
}

// --- mixture of experts ----------------------------------------------------------------------

// A router's output and experts' weights on the CPU (the reference) and on the CUDA backend.
class cuda_moe_test : public cuda_backend_test {
 protected:
  void SetUp() override {
    cpu_ = make_cpu_backend(2);
    gpu_ = make_cuda_backend({});
  }
  void TearDown() override {
    for (tensor& t : cpu_owned_) cpu_->free(t);
    for (tensor& t : gpu_owned_) gpu_->free(t);
  }

  std::vector<float> random(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }

  // The same bytes on both backends.
  void both(tensor_type type, int64_t ne0, int64_t ne1, const void* bytes, tensor& c, tensor& g) {
    c = cpu_->alloc(type, ne0, ne1, "c");
    g = gpu_->alloc(type, ne0, ne1, "g");
    cpu_owned_.push_back(c);
    gpu_owned_.push_back(g);
    cpu_->upload(c, bytes, size_t(c.n_bytes()));
    gpu_->upload(g, bytes, size_t(g.n_bytes()));
  }

  // n_expert matrices [n_out, n_in] of type t from random values, as a model file holds them.
  void experts(tensor_type t, int64_t n_in, int64_t n_out, int64_t n_expert, tensor& c, tensor& g) {
    const std::vector<float> v = random(size_t(n_in * n_out * n_expert), -1.0f, 1.0f);
    auto bytes = std::make_unique<std::vector<uint8_t>>(
        size_t(tensor_type_row_bytes(t, n_in) * n_out * n_expert));
    const int64_t rows = n_out * n_expert;
    if (t == tensor_type::f32) {
      std::memcpy(bytes->data(), v.data(), bytes->size());
    } else if (t == tensor_type::f16) {
      tensor_type_traits_of(t).from_float(v.data(), bytes->data(), n_in * rows);
    } else {
      quantize_rows(t, v.data(), bytes->data(), rows, n_in);
    }
    auto file = std::make_unique<gguf_tensor>();
    file->name = "experts";
    file->type = t;
    file->n_dims = 3;
    file->ne[0] = n_in;
    file->ne[1] = n_out;
    file->ne[2] = n_expert;
    file->n_bytes = bytes->size();
    file->data = bytes->data();
    c = cpu_->weight(*file);
    g = gpu_->weight(*file);
    files_.push_back(std::move(file));
    bytes_.push_back(std::move(bytes));
  }

  template <class T>
  std::vector<T> read(backend& b, const tensor& t) {
    std::vector<T> v(size_t(t.n_elements()));
    b.download(t, v.data(), v.size() * sizeof(T));
    return v;
  }

  static double nmse(const std::vector<float>& ref, const std::vector<float>& got) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
      norm += double(ref[i]) * ref[i];
    }
    return err / std::max(norm, 1e-30);
  }

  // Rows of n_in activations as the CPU takes them into a product with weights of type w:
  // converted to the weight's dot-product type and read back as F32.
  static std::vector<float> cpu_rounded(tensor_type w, const std::vector<float>& x, int64_t n_in) {
    const tensor_type dot = cpu::kernels_for(w)->vec_dot_type;
    const cpu::type_kernels* k = cpu::kernels_for(dot);
    std::vector<float> out(x.size());
    std::vector<uint8_t> row(size_t(tensor_type_row_bytes(dot, n_in)));
    for (size_t r = 0; r < x.size() / size_t(n_in); ++r) {
      k->from_float(x.data() + r * size_t(n_in), row.data(), n_in);
      k->to_float(row.data(), out.data() + r * size_t(n_in), n_in);
    }
    return out;
  }

  // Every expert's rows as the CPU dequantizes them: F32 [n_expert * n_out, n_in].
  std::vector<float> dequantized(const tensor& w_cpu) {
    tensor table = w_cpu;  // the experts' rows as one table, for get_rows
    table.ne[1] = w_cpu.ne[1] * w_cpu.ne[2];
    table.ne[2] = 1;
    std::vector<int32_t> all(size_t(table.ne[1]));
    for (size_t i = 0; i < all.size(); ++i) all[i] = int32_t(i);
    tensor c_ids = cpu_->alloc(tensor_type::i32, int64_t(all.size()), 1, "all");
    tensor c_w = cpu_->alloc(tensor_type::f32, w_cpu.ne[0], int64_t(all.size()), "w");
    cpu_->upload(c_ids, all.data(), all.size() * 4);
    cpu_->get_rows(table, c_ids, c_w);
    std::vector<float> wf = read<float>(*cpu_, c_w);
    cpu_->free(c_ids);
    cpu_->free(c_w);
    return wf;
  }

  // out[t*k + j] = x[r] · w[ids[t, j]]ᵀ in double over the weights as the CPU dequantizes them
  // and the activations as the CPU rounds them (the CPU's own product takes both in integers).
  std::vector<float> exact_mul_mat_id(const tensor& w_cpu, const std::vector<float>& x_f32,
                                      int64_t x_rows, const std::vector<int32_t>& ids, int64_t k) {
    const int64_t n_in = w_cpu.ne[0], n_out = w_cpu.ne[1];
    const std::vector<float> x = cpu_rounded(w_cpu.type, x_f32, n_in);
    const std::vector<float> wf = dequantized(w_cpu);
    const int64_t n_rows = int64_t(ids.size());
    std::vector<float> out(size_t(n_rows * n_out));
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* xr = x.data() + (x_rows == n_rows ? r : r / k) * n_in;
      const float* we = wf.data() + int64_t(ids[size_t(r)]) * n_out * n_in;
      for (int64_t o = 0; o < n_out; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < n_in; ++i) acc += double(we[o * n_in + i]) * xr[i];
        out[size_t(r * n_out + o)] = float(acc);
      }
    }
    return out;
  }

  std::mt19937 rng_{2026};
  std::unique_ptr<backend> cpu_, gpu_;
  std::vector<tensor> cpu_owned_, gpu_owned_;
  std::vector<std::unique_ptr<gguf_tensor>> files_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> bytes_;
};

TEST_F(cuda_moe_test, routing_picks_the_cpu_experts_with_its_weights) {
  struct shape {
    int64_t n_tok, n_expert, k;
  };
  for (const shape s : {shape{1, 8, 2}, shape{5, 128, 8}, shape{300, 60, 4}, shape{9, 40, 40}}) {
    for (const bool normalize : {false, true}) {
      std::vector<float> logits = random(size_t(s.n_tok * s.n_expert), -6.0f, 6.0f);
      // Token 0's logits repeat in threes: equal probabilities, the lower expert first.
      for (int64_t e = 0; e < s.n_expert; ++e) logits[size_t(e)] = float(e % 3);
      tensor cl, gl, ci, gi, cw, gw;
      both(tensor_type::f32, s.n_expert, s.n_tok, logits.data(), cl, gl);
      both(tensor_type::i32, s.k, s.n_tok, std::vector<int32_t>(size_t(s.n_tok * s.k)).data(), ci,
           gi);
      both(tensor_type::f32, s.k, s.n_tok, std::vector<float>(size_t(s.n_tok * s.k)).data(), cw,
           gw);
      cpu_->moe_route(cl, normalize, ci, cw);
      gpu_->moe_route(gl, normalize, gi, gw);
      EXPECT_EQ(read<int32_t>(*gpu_, gi), read<int32_t>(*cpu_, ci))
          << s.n_tok << " tokens, " << s.n_expert << " experts, k " << s.k;
      const std::vector<float> a = read<float>(*gpu_, gw), b = read<float>(*cpu_, cw);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6f * std::max(1.0f, b[i]));
    }
  }
}

TEST_F(cuda_moe_test, expert_products_grouped_on_the_device_match_the_exact_product) {
  struct shape {
    tensor_type t;
    int64_t n_in, n_out, n_expert, n_tok, k;
    bool shared_x;  // x has a row per token (gate, up) rather than per chosen expert (down)
  };
  // One token (decoding); a few with repeated experts; a prompt whose experts get far more than
  // the kernel's 8 rows a pass and whose 2,400 rows span two of the grouping's 2,048-id chunks;
  // odd row counts and rows the 8-value groups do not fit (the value-by-value kernel).
  for (const shape s : {shape{tensor_type::q4_k, 256, 64, 8, 1, 2, true},
                        shape{tensor_type::q8_0, 128, 96, 16, 6, 4, false},
                        shape{tensor_type::q6_k, 256, 33, 8, 600, 4, true},
                        shape{tensor_type::f16, 64, 40, 4, 600, 4, false},
                        shape{tensor_type::f32, 36, 17, 5, 20, 3, true}}) {
    tensor cw, gw;
    experts(s.t, s.n_in, s.n_out, s.n_expert, cw, gw);
    const int64_t n_rows = s.n_tok * s.k, x_rows = s.shared_x ? s.n_tok : n_rows;
    const std::vector<float> x = random(size_t(x_rows * s.n_in), -1.0f, 1.0f);
    // Distinct experts per token, as a router picks them; the last expert is never chosen.
    std::vector<int32_t> ids(static_cast<size_t>(n_rows));
    for (int64_t t = 0; t < s.n_tok; ++t) {
      std::vector<int32_t> order(size_t(s.n_expert - 1));
      for (size_t e = 0; e < order.size(); ++e) order[e] = int32_t(e);
      std::shuffle(order.begin(), order.end(), rng_);
      for (int64_t j = 0; j < s.k; ++j) ids[size_t(t * s.k + j)] = order[size_t(j)];
    }
    tensor cx, gx, ci, gi, co, go;
    both(tensor_type::f32, s.n_in, x_rows, x.data(), cx, gx);
    both(tensor_type::i32, s.k, s.n_tok, ids.data(), ci, gi);
    // One row more than the product writes, to catch writes past its end.
    const std::vector<float> sentinel(size_t((n_rows + 1) * s.n_out), 1234.5f);
    both(tensor_type::f32, s.n_out, n_rows + 1, sentinel.data(), co, go);
    gpu_->mul_mat_id(gw, gx, gi, tensor_rows(go, n_rows));
    std::vector<float> got = read<float>(*gpu_, go);
    for (int64_t o = 0; o < s.n_out; ++o)
      EXPECT_EQ(got[size_t(n_rows * s.n_out + o)], 1234.5f) << "written past the end";
    got.resize(size_t(n_rows * s.n_out));
    const double e = nmse(exact_mul_mat_id(cw, x, x_rows, ids, s.k), got);
    EXPECT_LE(e, 1e-9) << tensor_type_name(s.t) << " " << s.n_tok << " tokens, k " << s.k;
    std::printf("mul_mat_id %s n_in %lld n_out %lld experts %lld tokens %lld k %lld: NMSE %.2e\n",
                std::string(tensor_type_name(s.t)).c_str(), (long long)s.n_in, (long long)s.n_out,
                (long long)s.n_expert, (long long)s.n_tok, (long long)s.k, e);
  }
}

// A product whose activations the CUDA backend did not round as the CPU does differs from the
// CPU's by about the activations' 8-bit rounding (NMSE ~1e-5), enough to flip a router's choice;
// rounded, only the order of the sums differs. Decoding (the matrix-vector kernel) and a prompt
// (dequantized F16 weights and cuBLAS, which rounds weights and activations to F16: looser).
TEST_F(cuda_moe_test, products_round_activations_as_the_cpu_does) {
  struct shape {
    tensor_type t;
    int64_t n_in, n_out, n_tok;
    double bound;
  };
  for (const shape s :
       {shape{tensor_type::q8_0, 512, 96, 1, 1e-9}, shape{tensor_type::q4_k, 1024, 64, 3, 1e-9},
        shape{tensor_type::q6_k, 768, 80, 8, 1e-9}, shape{tensor_type::q4_0, 256, 40, 2, 1e-9},
        shape{tensor_type::f16, 256, 40, 2, 1e-9}, shape{tensor_type::q8_0, 512, 96, 40, 1e-9},
        shape{tensor_type::q4_k, 1024, 64, 33, 1e-9}, shape{tensor_type::q6_k, 768, 80, 20, 1e-9},
        shape{tensor_type::f16, 256, 40, 24, 1e-9}, shape{tensor_type::q4_k, 768, 51, 5, 1e-9},
        shape{tensor_type::q4_k, 4096, 33, 8, 1e-9}, shape{tensor_type::q6_k, 4096, 33, 3, 1e-9},
        shape{tensor_type::q6_k, 256, 7, 1, 1e-9}}) {
    tensor cw, gw;
    experts(s.t, s.n_in, s.n_out, 1, cw, gw);
    const std::vector<float> x = random(size_t(s.n_tok * s.n_in), -1.0f, 1.0f);
    tensor cx, gx, co, go;
    both(tensor_type::f32, s.n_in, s.n_tok, x.data(), cx, gx);
    both(tensor_type::f32, s.n_out, s.n_tok, std::vector<float>(size_t(s.n_out * s.n_tok)).data(),
         co, go);
    cpu_->mul_mat(cw, cx, nullptr, co);
    gpu_->mul_mat(gw, gx, nullptr, go);
    const std::vector<float> ref = read<float>(*cpu_, co), got = read<float>(*gpu_, go);
    const double e = nmse(ref, got);
    EXPECT_LE(e, s.bound) << tensor_type_name(s.t) << " " << s.n_tok << " tokens";
    // The test can tell: the CPU's product is far from one with unrounded activations.
    const std::vector<float> wf = dequantized(cw);
    std::vector<float> exact(ref.size());
    for (int64_t t = 0; t < s.n_tok; ++t)
      for (int64_t o = 0; o < s.n_out; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < s.n_in; ++i)
          acc += double(wf[size_t(o * s.n_in + i)]) * x[size_t(t * s.n_in + i)];
        exact[size_t(t * s.n_out + o)] = float(acc);
      }
    const double unrounded = nmse(ref, exact);
    EXPECT_GE(unrounded, 100 * e) << tensor_type_name(s.t) << " " << s.n_tok << " tokens";
    std::printf("mul_mat %s n_in %lld n_out %lld tokens %lld: NMSE vs CPU %.2e (unrounded %.2e)\n",
                std::string(tensor_type_name(s.t)).c_str(), (long long)s.n_in, (long long)s.n_out,
                (long long)s.n_tok, e, unrounded);
  }
}

// mul_mats rounds x once for the products whose weights round it alike (backend-cuda.cpp); each
// product must still be what mul_mat alone gives, bit for bit: the K-quants after a Q8_0
// product round afresh, F32 weights and F16 on the GEMM path (20 tokens) round nothing between.
TEST_F(cuda_moe_test, several_products_of_one_input_equal_each_product_alone_bit_for_bit) {
  const int64_t n_in = 512;
  const tensor_type types[] = {tensor_type::q4_k, tensor_type::q6_k, tensor_type::q8_0,
                               tensor_type::q4_k, tensor_type::f32,  tensor_type::q4_0,
                               tensor_type::f16,  tensor_type::q5_k, tensor_type::q8_0};
  constexpr size_t n = std::size(types);
  for (const int64_t n_tok : {1, 11, 20}) {
    const std::vector<float> x = random(size_t(n_tok * n_in), -1.0f, 1.0f);
    tensor cx, gx;
    both(tensor_type::f32, n_in, n_tok, x.data(), cx, gx);
    std::vector<tensor> w(n), bias(n), alone(n), together(n), unused(3);
    std::vector<backend::product> products;
    for (size_t k = 0; k < n; ++k) {
      const int64_t n_out = 32 + 8 * int64_t(k);
      experts(types[k], n_in, n_out, 1, unused[0], w[k]);
      const std::vector<float> zeros(size_t(n_out * n_tok)), b = random(size_t(n_out), -1, 1);
      both(tensor_type::f32, n_out, n_tok, zeros.data(), unused[1], alone[k]);
      both(tensor_type::f32, n_out, n_tok, zeros.data(), unused[2], together[k]);
      both(tensor_type::f32, n_out, 1, b.data(), unused[0], bias[k]);
      products.push_back({&w[k], k % 3 == 1 ? &bias[k] : nullptr, &together[k]});
    }
    for (size_t k = 0; k < n; ++k) gpu_->mul_mat(w[k], gx, products[k].bias, alone[k]);
    gpu_->mul_mats(gx, products);
    for (size_t k = 0; k < n; ++k) {
      const std::vector<float> a = read<float>(*gpu_, alone[k]),
                               t = read<float>(*gpu_, together[k]);
      EXPECT_EQ(0, std::memcmp(a.data(), t.data(), a.size() * sizeof(float)))
          << tensor_type_name(types[k]) << ", product " << k << ", " << n_tok << " tokens";
    }
  }
}

TEST_F(cuda_moe_test, combine_matches_the_cpu) {
  const int64_t n_tok = 70, k = 8, cols = 200;
  const std::vector<float> x = random(size_t(n_tok * k * cols), -3.0f, 3.0f);
  const std::vector<float> w = random(size_t(n_tok * k), 0.0f, 1.0f);
  tensor cx, gx, cw, gw, co, go;
  both(tensor_type::f32, cols, n_tok * k, x.data(), cx, gx);
  both(tensor_type::f32, k, n_tok, w.data(), cw, gw);
  both(tensor_type::f32, cols, n_tok, std::vector<float>(size_t(n_tok * cols)).data(), co, go);
  cpu_->moe_combine(cx, cw, co);
  gpu_->moe_combine(gx, gw, go);
  const std::vector<float> a = read<float>(*gpu_, go), b = read<float>(*cpu_, co);
  // The same products and sums in the same order (the CPU may fuse a multiply-add: one rounding).
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f) << i;
}

// Route, the expert product and the combine as one step, run five times with new logits: the
// first is split in two (growing the grouping's scratch launches the ops recorded before it), the
// second runs eagerly, the third is captured and the fourth and fifth replay the graph, whose
// ids come from the router on the device.
TEST_F(cuda_moe_test, a_routed_step_replays_from_a_graph_with_new_ids) {
  const int64_t n_in = 256, n_out = 64, n_expert = 16, n_tok = 3, k = 4;
  tensor cw, gw;
  experts(tensor_type::q4_k, n_in, n_out, n_expert, cw, gw);
  const std::vector<float> x = random(size_t(n_tok * n_in), -1.0f, 1.0f);
  tensor cx, gx, cl, gl, ci, gi, cwt, gwt, cy, gy, co, go;
  both(tensor_type::f32, n_in, n_tok, x.data(), cx, gx);
  both(tensor_type::f32, n_expert, n_tok, std::vector<float>(size_t(n_tok * n_expert)).data(), cl,
       gl);
  both(tensor_type::i32, k, n_tok, std::vector<int32_t>(size_t(n_tok * k)).data(), ci, gi);
  both(tensor_type::f32, k, n_tok, std::vector<float>(size_t(n_tok * k)).data(), cwt, gwt);
  both(tensor_type::f32, n_out, n_tok * k, std::vector<float>(size_t(n_tok * k * n_out)).data(), cy,
       gy);
  both(tensor_type::f32, n_out, n_tok, std::vector<float>(size_t(n_tok * n_out)).data(), co, go);
  const cuda_step_stats before = cuda_stats(*gpu_);
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> logits = random(size_t(n_tok * n_expert), -4.0f, 4.0f);
    cpu_->upload(cl, logits.data(), logits.size() * 4);
    gpu_->upload(gl, logits.data(), logits.size() * 4);
    for (backend* b : {cpu_.get(), gpu_.get()}) {
      const bool g = b == gpu_.get();
      b->moe_route(g ? gl : cl, true, g ? gi : ci, g ? gwt : cwt);
      b->mul_mat_id(g ? gw : cw, g ? gx : cx, g ? gi : ci, g ? gy : cy);
      b->moe_combine(g ? gy : cy, g ? gwt : cwt, g ? go : co);
    }
    const std::vector<int32_t> ids = read<int32_t>(*cpu_, ci);
    ASSERT_EQ(read<int32_t>(*gpu_, gi), ids) << "step " << step;
    const std::vector<float> exact = exact_mul_mat_id(cw, x, n_tok, ids, k);
    const std::vector<float> wts = read<float>(*cpu_, cwt);
    std::vector<float> ref(size_t(n_tok * n_out), 0.0f);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t o = 0; o < n_out; ++o)
          ref[size_t(t * n_out + o)] +=
              wts[size_t(t * k + j)] * exact[size_t((t * k + j) * n_out + o)];
    EXPECT_LE(nmse(ref, read<float>(*gpu_, go)), 1e-9) << "step " << step;
  }
  const cuda_step_stats after = cuda_stats(*gpu_);
  EXPECT_GE(after.graph_replays - before.graph_replays, 2u);
}

}  // namespace
}  // namespace hearth
