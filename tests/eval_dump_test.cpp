// The forward pass's named intermediates (engine/eval-callback.h): what they hold, that observing
// them changes nothing, and (built with HEARTH_EVAL_DUMP_VULKAN) that a layer's intermediates on
// Vulkan match the CPU's within the conformance bounds of ../shared/README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/context.h"
#include "engine/eval-record.h"
#include "engine/model.h"
#include "tests/conformance.h"
#include "tests/testdata.h"

#ifdef HEARTH_EVAL_DUMP_VULKAN
#include "backends/registry.h"
#endif

namespace hearth {
namespace {

std::vector<int32_t> stories_prompt() {
  const std::string ref = testing::testdata_path("reference/stories260K.json");
  if (ref.empty()) return {};
  const auto j = nlohmann::json::parse(testing::read_file_text(ref));
  return j["cases"][0]["prompt_tokens"].get<std::vector<int32_t>>();
}

// Decodes `tokens` as one prompt, every token asking for logits, with `cb` observing (or none).
void decode_prompt(context& ctx, const std::vector<int32_t>& tokens, const eval_callback* cb) {
  ctx.clear();
  ctx.eval_callback_set(cb);
  std::vector<batch_token> batch;
  for (size_t i = 0; i < tokens.size(); ++i) batch.push_back({tokens[i], int32_t(i), 0, true});
  auto r = ctx.decode(batch);
  ctx.eval_callback_set(nullptr);
  ASSERT_TRUE(r.ok()) << r.message();
}

std::string case_name(const ::testing::TestParamInfo<std::string>& p) {
  return testing::conformance_case_name(p.param);
}

#ifndef HEARTH_EVAL_DUMP_VULKAN

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The names a block of `arch` computes, in order (engine/eval-callback.h).
std::vector<std::string> block_names(const std::string& arch) {
  const bool gemma = arch == "gemma" || arch == "gemma2";
  std::vector<std::string> n = {"attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "attn_out"};
  if (arch == "gemma2") n.push_back("attn_post_norm");
  for (const char* s : {"ffn_inp", "ffn_norm", "ffn_gate", "ffn_up"}) n.push_back(s);
  n.push_back(gemma ? "ffn_geglu" : "ffn_swiglu");
  n.push_back("ffn_out");
  if (arch == "gemma2") n.push_back("ffn_post_norm");
  n.push_back("l_out");
  return n;
}

class eval_dump_stories : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::testdata_path("models/stories260K.gguf");
    prompt_ = stories_prompt();
    ASSERT_FALSE(path.empty() || prompt_.empty());
    model_ = model::load(path, {.n_threads = 2});
    ctx_ = std::make_unique<context>(*model_, context_params{.n_ctx = 64});
  }
  std::unique_ptr<model> model_;
  std::unique_ptr<context> ctx_;
  std::vector<int32_t> prompt_;
};

TEST_F(eval_dump_stories, result_output_is_the_logits_bit_for_bit) {
  eval_record rec;
  decode_prompt(*ctx_, prompt_, &rec.callback());
  const recorded_intermediate* out = rec.find("result_output", -1);
  ASSERT_NE(out, nullptr);
  const int32_t n_vocab = ctx_->n_vocab();
  ASSERT_EQ(out->ne[0], n_vocab);
  ASSERT_EQ(out->n_rows(), int64_t(prompt_.size()));
  for (int32_t i = 0; i < ctx_->n_logits(); ++i) {
    EXPECT_EQ(std::memcmp(out->values.data() + size_t(i) * size_t(n_vocab), ctx_->logits(i),
                          size_t(n_vocab) * sizeof(float)),
              0)
        << "row " << i;
  }
}

// Recomputes the output head in double from the last block's l_out: RMSNorm with output_norm,
// then the output matrix. Both are F32 in stories260K and the CPU backend reads them in place.
TEST_F(eval_dump_stories, the_last_l_out_through_the_output_head_gives_result_output) {
  eval_record rec;
  decode_prompt(*ctx_, prompt_, &rec.callback());
  const model_hparams& hp = model_->hparams();
  const model_weights& w = model_->weights();
  ASSERT_EQ(w.output_norm.type, tensor_type::f32);
  ASSERT_EQ(w.output.type, tensor_type::f32);
  const recorded_intermediate* l_out = rec.find("l_out", hp.n_layer - 1);
  const recorded_intermediate* norm = rec.find("result_norm", -1);
  const recorded_intermediate* out = rec.find("result_output", -1);
  ASSERT_TRUE(l_out && norm && out);
  const auto* gamma = static_cast<const float*>(w.output_norm.data);
  const auto* wout = static_cast<const float*>(w.output.data);
  const size_t n_embd = size_t(hp.n_embd);
  for (size_t t = 0; t < prompt_.size(); ++t) {
    const float* x = l_out->values.data() + t * n_embd;
    double ss = 0;
    for (size_t i = 0; i < n_embd; ++i) ss += double(x[i]) * x[i];
    const double inv = 1.0 / std::sqrt(ss / double(n_embd) + hp.norm_eps);
    std::vector<double> normed(n_embd);
    for (size_t i = 0; i < n_embd; ++i) {
      normed[i] = x[i] * inv * gamma[i];
      EXPECT_NEAR(norm->values[t * n_embd + i], normed[i], 1e-5 * (1 + std::abs(normed[i])))
          << "result_norm token " << t << " dim " << i;
    }
    double err = 0, ref = 0;
    for (size_t v = 0; v < size_t(hp.n_vocab); ++v) {
      double dot = 0;
      for (size_t i = 0; i < n_embd; ++i) dot += normed[i] * wout[v * n_embd + i];
      const double got = out->values[t * size_t(hp.n_vocab) + v];
      err += (got - dot) * (got - dot);
      ref += dot * dot;
    }
    EXPECT_LE(err / ref, 1e-11) << "result_output token " << t;
  }
}

TEST_F(eval_dump_stories, a_layer_dumps_the_same_alone_as_among_all_layers) {
  eval_record all;
  decode_prompt(*ctx_, prompt_, &all.callback());
  const int32_t layer = model_->hparams().n_layer / 2;
  eval_record one([&](std::string_view, int32_t l) { return l == layer; });
  decode_prompt(*ctx_, prompt_, &one.callback());
  ASSERT_EQ(one.intermediates().size(), block_names("llama").size());
  for (const recorded_intermediate& r : one.intermediates()) {
    EXPECT_EQ(r.layer, layer);
    const recorded_intermediate* in_all = all.find(r.name, layer);
    ASSERT_NE(in_all, nullptr) << r.label();
    EXPECT_TRUE(same_bits(r.values, in_all->values)) << r.label();
    EXPECT_EQ(std::vector<int64_t>(r.ne, r.ne + 4),
              std::vector<int64_t>(in_all->ne, in_all->ne + 4));
  }
}

TEST_F(eval_dump_stories, decoding_with_an_observer_gives_the_logits_of_decoding_without) {
  // The prompt, then single tokens (the decode loop's path), each time with and without.
  std::vector<int32_t> tokens = prompt_;
  auto logits_of = [&](const eval_callback* cb) {
    decode_prompt(*ctx_, prompt_, cb);
    std::vector<float> all(ctx_->logits(0),
                           ctx_->logits(0) + size_t(ctx_->n_logits()) * size_t(ctx_->n_vocab()));
    ctx_->eval_callback_set(cb);
    int32_t next = prompt_.back();
    for (int32_t step = 0; step < 8; ++step) {
      const float* l = ctx_->logits(ctx_->n_logits() - 1);
      next = int32_t(std::max_element(l, l + ctx_->n_vocab()) - l);
      const batch_token t{next, int32_t(prompt_.size()) + step, 0, true};
      EXPECT_TRUE(ctx_->decode({&t, 1}).ok());
      all.insert(all.end(), ctx_->logits(0), ctx_->logits(0) + ctx_->n_vocab());
    }
    ctx_->eval_callback_set(nullptr);
    return all;
  };
  const std::vector<float> without = logits_of(nullptr);
  eval_record rec;
  const std::vector<float> with = logits_of(&rec.callback());
  EXPECT_TRUE(same_bits(without, with));
  // Every single-token pass appended its row.
  const recorded_intermediate* l_out = rec.find("l_out", 0);
  ASSERT_NE(l_out, nullptr);
  EXPECT_EQ(l_out->n_rows(), int64_t(prompt_.size()) + 8);
}

TEST_F(eval_dump_stories, a_prompt_split_into_passes_records_every_token) {
  context small(*model_, {.n_ctx = 64, .n_batch = 2});
  eval_record rec(
      [](std::string_view name, int32_t) { return name == "Qcur" || name == "inp_embd"; });
  decode_prompt(small, prompt_, &rec.callback());
  const model_hparams& hp = model_->hparams();
  const recorded_intermediate* q = rec.find("Qcur", 0);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->n_dims, 3);
  EXPECT_EQ(std::vector<int64_t>(q->ne, q->ne + 4),
            (std::vector<int64_t>{hp.head_dim_k, hp.n_head, int64_t(prompt_.size()), 1}));
  // The embedding rows are exact copies: a split pass must not reorder or drop any.
  eval_record whole([](std::string_view name, int32_t) { return name == "inp_embd"; });
  decode_prompt(*ctx_, prompt_, &whole.callback());
  EXPECT_TRUE(same_bits(rec.find("inp_embd", -1)->values, whole.find("inp_embd", -1)->values));
}

// Every family names every intermediate of every block, and the names sit on the right values:
// the residual adds recomputed from the dumped operands give the dumped sums bit for bit.
class eval_dump_family : public ::testing::TestWithParam<std::string> {};

TEST_P(eval_dump_family, names_every_intermediate_and_the_residual_stream_adds_up) {
  const std::string path = testing::testdata_path("models/synthetic/" + GetParam());
  const std::vector<int32_t> prompt = stories_prompt();
  ASSERT_FALSE(path.empty() || prompt.empty());
  auto m = model::load(path, {.n_threads = 2});
  context ctx(*m, {.n_ctx = 64});
  eval_record rec;
  decode_prompt(ctx, prompt, &rec.callback());
  const model_hparams& hp = m->hparams();
  const bool scaled = hp.arch == "gemma" || hp.arch == "gemma2";
  std::vector<std::string> want = {"inp_embd"};
  if (scaled) want.push_back("inp_scaled");
  for (int32_t il = 0; il < hp.n_layer; ++il)
    for (const std::string& n : block_names(hp.arch)) want.push_back(n + "-" + std::to_string(il));
  want.push_back("result_norm");
  want.push_back("result_output");
  std::vector<std::string> got;
  for (const recorded_intermediate& r : rec.intermediates()) got.push_back(r.label());
  ASSERT_EQ(got, want);

  auto sum_is = [&](const std::string& a, const std::string& b, const std::string& c, int32_t il) {
    const auto find = [&](const std::string& label) {
      for (const recorded_intermediate& r : rec.intermediates())
        if (r.label() == label) return &r;
      return static_cast<const recorded_intermediate*>(nullptr);
    };
    const recorded_intermediate *x = find(a), *y = find(b), *s = find(c);
    ASSERT_TRUE(x && y && s) << a << " + " << b << " = " << c;
    std::vector<float> added(x->values.size());
    for (size_t i = 0; i < added.size(); ++i) added[i] = x->values[i] + y->values[i];
    EXPECT_TRUE(same_bits(added, s->values))
        << a << " + " << b << " = " << c << " (layer " << il << ")";
  };
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    const std::string i = "-" + std::to_string(il);
    const std::string block_in =
        il == 0 ? (scaled ? "inp_scaled" : "inp_embd") : "l_out-" + std::to_string(il - 1);
    const bool post = hp.arch == "gemma2";
    sum_is(post ? "attn_post_norm" + i : "attn_out" + i, block_in, "ffn_inp" + i, il);
    sum_is(post ? "ffn_post_norm" + i : "ffn_out" + i, "ffn_inp" + i, "l_out" + i, il);
  }
}

INSTANTIATE_TEST_SUITE_P(all, eval_dump_family,
                         ::testing::Values("synthetic-llama-a.f32.gguf",
                                           "synthetic-qwen2-a.f32.gguf",
                                           "synthetic-phi3-a.f32.gguf",
                                           "synthetic-gemma-a.f32.gguf",
                                           "synthetic-gemma2-a.f16.gguf"),
                         case_name);

#else  // HEARTH_EVAL_DUMP_VULKAN

// A block's intermediates (and those outside the blocks) on Vulkan against the CPU's, row by row
// within the file's conformance bounds on NMSE (../shared/README.md; tests/conformance.h).
class eval_dump_vulkan : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    const std::string why = gpu::device_registry().why_no_device(gpu::backend_kind::vulkan);
    if (!why.empty()) testing::skip_all("eval dump on Vulkan: " + why);
  }
};

TEST_P(eval_dump_vulkan, a_layer_matches_the_cpu_within_the_conformance_bounds) {
  const std::string path = testing::testdata_path("models/" + GetParam());
  const std::vector<int32_t> prompt = stories_prompt();
  ASSERT_FALSE(path.empty() || prompt.empty());
  model_params on_vulkan;
  // The Vulkan module's best device, through the registry as the programs reach it.
  on_vulkan.make_backend = []() -> std::unique_ptr<backend> {
    gpu::device d;
    const gpu::backend_entry* e = nullptr;
    if (!gpu::device_registry().best(gpu::backend_kind::vulkan, d, e))
      throw std::runtime_error("vulkan: no device");
    return e->make(d.index);
  };
  auto cpu = model::load(path, {.n_threads = 2});
  auto gpu = model::load(path, on_vulkan);
  ASSERT_EQ(gpu->backend().name(), "vulkan");
  const int32_t layer = cpu->hparams().n_layer - 1;
  auto wants = [&](std::string_view, int32_t l) { return l < 0 || l == 0 || l == layer; };
  eval_record on_cpu(wants), on_gpu(wants);
  context cpu_ctx(*cpu, {.n_ctx = 64}), gpu_ctx(*gpu, {.n_ctx = 64});
  decode_prompt(cpu_ctx, prompt, &on_cpu.callback());
  decode_prompt(gpu_ctx, prompt, &on_gpu.callback());
  const double bound = testing::conformance_bounds_for(path).worst_nmse;

  ASSERT_EQ(on_cpu.intermediates().size(), on_gpu.intermediates().size());
  double worst = 0;
  for (const recorded_intermediate& want : on_cpu.intermediates()) {
    const recorded_intermediate* got = on_gpu.find(want.name, want.layer);
    ASSERT_NE(got, nullptr) << want.label();
    ASSERT_EQ(got->values.size(), want.values.size()) << want.label();
    const int64_t row = want.row_size();
    for (int64_t r = 0; r < want.n_rows(); ++r) {
      double err = 0, norm = 0;
      for (int64_t i = r * row; i < (r + 1) * row; ++i) {
        const double d = double(got->values[size_t(i)]) - want.values[size_t(i)];
        err += d * d;
        norm += double(want.values[size_t(i)]) * want.values[size_t(i)];
      }
      const double nmse = norm > 0 ? err / norm : err;
      worst = std::max(worst, nmse);
      EXPECT_LE(nmse, bound) << want.label() << " row " << r;
    }
  }
  std::printf("| vulkan | %s | layers 0, %d | worst row NMSE %.2e |\n", GetParam().c_str(), layer,
              worst);
}

INSTANTIATE_TEST_SUITE_P(all, eval_dump_vulkan,
                         ::testing::Values("stories260K.gguf",
                                           "synthetic/synthetic-llama-a.f32.gguf",
                                           "synthetic/synthetic-qwen2-a.q8_0.gguf",
                                           "synthetic/synthetic-phi3-a.f16.gguf",
                                           "synthetic/synthetic-gemma2-a.f16.gguf"),
                         case_name);

#endif

}  // namespace
}  // namespace hearth
