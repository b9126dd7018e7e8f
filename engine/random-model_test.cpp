#include "engine/random-model.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "engine/vocab.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

const model_shape& shape(std::string_view name) {
  const model_shape* s = model_shape_find(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

TEST(random_model, parameter_counts_of_the_full_shapes_are_the_published_ones) {
  EXPECT_EQ(random_model_param_count(shape("tinyllama-1.1b")), 1'100'048'384u);
  EXPECT_EQ(random_model_param_count(shape("qwen2.5-0.5b")), 494'032'768u);
  EXPECT_EQ(random_model_param_count(shape("llama-3.2-1b")), 1'235'814'400u);
  EXPECT_EQ(random_model_param_count(shape("llama-3-8b")), 8'030'261'248u);
}

TEST(random_model, shapes_are_found_by_name_in_any_case) {
  EXPECT_EQ(model_shape_find("TinyLlama-1.1B"), &shape("tinyllama-1.1b"));
  EXPECT_EQ(model_shape_find("llama-7b"), nullptr);
  EXPECT_EQ(model_shape_names(), "tinyllama-1.1b, qwen2.5-0.5b, llama-3.2-1b, llama-3-8b");
}

using tensor_list = std::vector<std::pair<std::string, std::vector<int64_t>>>;

tensor_list list_of(const model_shape& s, int32_t n_layer) {
  tensor_list out;
  for (const auto& t : random_model_tensors(s, n_layer)) out.emplace_back(t.name, t.ne);
  return out;
}

TEST(random_model, one_layer_tensor_lists_are_llama_cpp_names_and_shapes) {
  EXPECT_EQ(list_of(shape("tinyllama-1.1b"), 1),
            (tensor_list{{"token_embd.weight", {2048, 32000}},
                         {"blk.0.attn_norm.weight", {2048}},
                         {"blk.0.attn_q.weight", {2048, 2048}},
                         {"blk.0.attn_k.weight", {2048, 256}},
                         {"blk.0.attn_v.weight", {2048, 256}},
                         {"blk.0.attn_output.weight", {2048, 2048}},
                         {"blk.0.ffn_norm.weight", {2048}},
                         {"blk.0.ffn_gate.weight", {2048, 5632}},
                         {"blk.0.ffn_up.weight", {2048, 5632}},
                         {"blk.0.ffn_down.weight", {5632, 2048}},
                         {"output_norm.weight", {2048}},
                         {"output.weight", {2048, 32000}}}));
  // Qwen2: q/k/v biases, the output tied to the embedding.
  EXPECT_EQ(list_of(shape("qwen2.5-0.5b"), 1),
            (tensor_list{{"token_embd.weight", {896, 151936}},
                         {"blk.0.attn_norm.weight", {896}},
                         {"blk.0.attn_q.weight", {896, 896}},
                         {"blk.0.attn_q.bias", {896}},
                         {"blk.0.attn_k.weight", {896, 128}},
                         {"blk.0.attn_k.bias", {128}},
                         {"blk.0.attn_v.weight", {896, 128}},
                         {"blk.0.attn_v.bias", {128}},
                         {"blk.0.attn_output.weight", {896, 896}},
                         {"blk.0.ffn_norm.weight", {896}},
                         {"blk.0.ffn_gate.weight", {896, 4864}},
                         {"blk.0.ffn_up.weight", {896, 4864}},
                         {"blk.0.ffn_down.weight", {4864, 896}},
                         {"output_norm.weight", {896}}}));
  // Llama 3.2: rope_freqs first (as the converter yields it), tied output.
  const tensor_list l32 = list_of(shape("llama-3.2-1b"), 1);
  ASSERT_EQ(l32.size(), 12u);
  EXPECT_EQ(l32.front(), (tensor_list::value_type{"rope_freqs.weight", {32}}));
  EXPECT_EQ(l32[1], (tensor_list::value_type{"token_embd.weight", {2048, 128256}}));
  EXPECT_EQ(l32.back(), (tensor_list::value_type{"output_norm.weight", {2048}}));
  // 0 layers means the shape's own count.
  EXPECT_EQ(random_model_tensors(shape("llama-3-8b")).size(), 2 + 32 * 9 + 1u);
}

TEST(random_model, rope_factors_are_llama_3_1_scaling) {
  const std::vector<float> f = llama3_rope_factors(shape("llama-3.2-1b"));
  ASSERT_EQ(f.size(), 32u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(f[i], 1.0f) << i;
  EXPECT_NEAR(f[15], 1.6513292f, 1e-5);
  EXPECT_NEAR(f[16], 3.2922626f, 1e-5);
  EXPECT_NEAR(f[17], 9.6667299f, 1e-4);
  for (size_t i = 18; i < 32; ++i) EXPECT_EQ(f[i], 32.0f) << i;
}

result<vocab> load_vocab(const model_shape& s) {
  auto kv = random_model_vocab(s, testing::testdata_root());
  if (!kv) return kv.err();
  auto f = gguf_file::from_parts(std::move(*kv), {}, nullptr);
  if (!f) return f.err();
  return vocab::from_gguf(*f);
}

TEST(random_model, vocabularies_load_with_the_shape_vocab_size) {
  auto tiny = load_vocab(shape("tinyllama-1.1b"));
  ASSERT_TRUE(tiny) << tiny.message();
  EXPECT_EQ(tiny->n_tokens(), 32000);
  EXPECT_EQ(tiny->tokenize("Hello world", false, false), (std::vector<int32_t>{15043, 3186}));

  auto qwen = load_vocab(shape("qwen2.5-0.5b"));
  ASSERT_TRUE(qwen) << qwen.message();
  EXPECT_EQ(qwen->n_tokens(), 151936);
  EXPECT_EQ(qwen->pre(), "qwen2");
  EXPECT_EQ(qwen->text(151935), "[PAD151935]");
  EXPECT_EQ(qwen->attr(151935), token_attr::unused);
  EXPECT_EQ(qwen->tokenize("Hello world", true, false), (std::vector<int32_t>{9707, 1879}));
}

TEST(random_model, the_llama_3_vocabulary_round_trips_text) {
  for (const char* name : {"llama-3.2-1b", "llama-3-8b"}) {
    auto v = load_vocab(shape(name));
    ASSERT_TRUE(v) << v.message();
    EXPECT_EQ(v->n_tokens(), 128256);
    EXPECT_EQ(v->pre(), "llama-bpe");
    EXPECT_EQ(v->bos(), 128000);
    EXPECT_EQ(v->eos(), 128009);
    EXPECT_TRUE(v->is_eog(128009));
    EXPECT_EQ(v->text(128000), "<|begin_of_text|>");
    EXPECT_EQ(v->text(128006), "<|start_header_id|>");
    EXPECT_EQ(v->text(128007), "<|end_header_id|>");
    EXPECT_EQ(v->text(128009), "<|eot_id|>");
    EXPECT_EQ(v->text(128255), std::string(name) == "llama-3-8b"
                                   ? "<|reserved_special_token_250|>"
                                   : "<|reserved_special_token_247|>");
    EXPECT_EQ(v->attr(128100), token_attr::control);
    const auto ids = v->tokenize("Hello world", true, false);
    EXPECT_EQ(ids, (std::vector<int32_t>{128000, 9707, 1879}));
    EXPECT_EQ(v->detokenize(ids, false), "Hello world");
    for (const std::string text :
         {"The quick brown fox jumps over 1234567 lazy dogs.", "  leading spaces\n\ttabs",
          "über naïve café — 東京 🦙", "<|eot_id|> is text here"}) {
      const auto t = v->tokenize(text, false, false);
      for (int32_t id : t) EXPECT_LT(id, 128000) << text;
      EXPECT_EQ(v->detokenize(t, false), text);
    }
    EXPECT_EQ(v->tokenize("<|start_header_id|>user<|end_header_id|>", false, true).front(), 128006);
  }
}

TEST(random_model, a_dry_run_counts_the_file_without_writing_it) {
  random_model_options o;
  o.type = file_type::q8_0;
  o.n_layer = 2;
  o.testdata_root = testing::testdata_root();
  auto r = random_model_write(shape("tinyllama-1.1b"), o, "");
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->n_layer, 2);
  EXPECT_EQ(r->n_tensors, 1 + 2 * 9 + 2u);
  EXPECT_EQ(r->n_params, random_model_param_count(shape("tinyllama-1.1b"), 2));
  // Q8_0 matrices: 34 bytes per 32 values; norms F32.
  const uint64_t matrices = r->n_params - 5 * 2048;
  EXPECT_EQ(r->tensor_bytes, matrices / 32 * 34 + 5 * 2048 * 4);
  EXPECT_GT(r->file_bytes, r->tensor_bytes);
  EXPECT_LT(r->file_bytes, r->tensor_bytes + 2'000'000);  // vocabulary and tensor descriptions

  o.testdata_root = "/nonexistent";
  auto missing = random_model_write(shape("tinyllama-1.1b"), o, "");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("/nonexistent/vocab/ggml-vocab-llama-spm.gguf"),
            std::string::npos)
      << missing.message();
}

}  // namespace
}  // namespace hearth
