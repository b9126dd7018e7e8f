// `hearth mkmodel` as a user runs it: one-layer files of every shape load, generate and tokenize
// with their vocabularies, carry llama.cpp's metadata keys and the weight types asked for, are
// the size the dry run announces and the same bytes whatever the thread count. Only one layer,
// because the embeddings alone are 65M (TinyLlama) to 525M (Llama 3 8B) values.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/io/gguf.h"
#include "tests/hearth-cli.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using testing::hearth;
using testing::process_result;

// The byte count mkmodel's summary line announces ("..., 123 bytes (...)").
uint64_t announced_bytes(const std::string& out) {
  const size_t end = out.find(" bytes (");
  if (end == std::string::npos) return 0;
  const size_t begin = out.rfind(' ', end - 1) + 1;
  return std::stoull(out.substr(begin, end - begin));
}

class mkmodel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "hearth_mkmodel/";
    std::filesystem::create_directories(dir_);
  }
  // The files are hundreds of megabytes: none outlives its test.
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes a one-layer file (`layers` when given) and checks what every file must be; returns
  // its path.
  std::string make(const std::string& shape, const std::string& type, const std::string& extra = "",
                   int layers = 1) {
    const std::string path = dir_ + shape + "." + type + ".gguf";
    const std::string cut = " --layers " + std::to_string(layers);
    auto dry = hearth("mkmodel --shape " + shape + " --type " + type + cut + " --dry-run " + extra);
    EXPECT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_FALSE(std::filesystem::exists(path));
    auto r =
        hearth("mkmodel --shape " + shape + " --type " + type + cut + " -o " + path + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote " + path), std::string::npos) << r.out;
    EXPECT_EQ(std::filesystem::file_size(path), announced_bytes(r.out)) << r.out;
    EXPECT_EQ(announced_bytes(dry.out), announced_bytes(r.out)) << dry.out;
    return path;
  }

  // `hearth run` loads the file and generates.
  void expect_generates(const std::string& path) {
    auto r = hearth("run -m " + path + " -p Hello -n 4 --temp 0 --json -t 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
    const auto summary = nlohmann::json::parse(last);
    EXPECT_GE(summary["n_generated"].get<int>(), 1) << last;
  }

  std::vector<int32_t> tokenize(const std::string& path, const std::string& args) {
    auto r = hearth("tokenize -m " + path + " " + args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out).get<std::vector<int32_t>>()
                            : std::vector<int32_t>{};
  }

  std::string dir_;
};

uint64_t u(const gguf_file& f, const std::string& key) {
  auto v = f.get_uint(key);
  EXPECT_TRUE(v && *v) << key;
  return v && *v ? **v : 0;
}
double fl(const gguf_file& f, const std::string& key) {
  auto v = f.get_float(key);
  EXPECT_TRUE(v && *v) << key;
  return v && *v ? **v : 0;
}
std::string str(const gguf_file& f, const std::string& key) {
  auto v = f.get_string(key);
  EXPECT_TRUE(v && *v) << key;
  return v && *v ? **v : "";
}
// Each `<arch>.<key>` integer of the file is the value given.
void expect_u32s(const gguf_file& f, const std::string& arch,
                 std::initializer_list<std::pair<const char*, uint64_t>> want) {
  for (const auto& [key, value] : want) EXPECT_EQ(u(f, arch + "." + key), value) << key;
}

tensor_type type_of(const gguf_file& f, const std::string& name) {
  const gguf_tensor* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t ? t->type : tensor_type::i8;
}

TEST_F(mkmodel, tinyllama_in_f16_and_q8_0) {
  for (const std::string type : {"f16", "q8_0"}) {
    const std::string path = make("tinyllama-1.1b", type);
    {
      auto f = gguf_file::open(path);
      ASSERT_TRUE(f) << f.message();
      EXPECT_EQ(str(*f, "general.architecture"), "llama");
      EXPECT_EQ(str(*f, "general.name"), "TinyLlama-1.1B random weights, 1 of 22 layers");
      EXPECT_EQ(u(*f, "general.file_type"), type == "f16" ? 1u : 7u);
      EXPECT_EQ(u(*f, "general.quantization_version"), 2u);
      EXPECT_EQ(u(*f, "llama.block_count"), 1u);
      EXPECT_EQ(u(*f, "llama.context_length"), 2048u);
      EXPECT_EQ(u(*f, "llama.embedding_length"), 2048u);
      EXPECT_EQ(u(*f, "llama.feed_forward_length"), 5632u);
      EXPECT_EQ(u(*f, "llama.attention.head_count"), 32u);
      EXPECT_EQ(u(*f, "llama.attention.head_count_kv"), 4u);
      EXPECT_EQ(u(*f, "llama.rope.dimension_count"), 64u);
      EXPECT_EQ(u(*f, "llama.vocab_size"), 32000u);
      EXPECT_EQ(fl(*f, "llama.rope.freq_base"), 10000.0);
      EXPECT_NEAR(fl(*f, "llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
      EXPECT_EQ(str(*f, "tokenizer.ggml.model"), "llama");
      EXPECT_EQ(f->tensors().size(), 12u);
      const tensor_type want = type == "f16" ? tensor_type::f16 : tensor_type::q8_0;
      EXPECT_EQ(type_of(*f, "token_embd.weight"), want);
      EXPECT_EQ(type_of(*f, "blk.0.ffn_down.weight"), want);
      EXPECT_EQ(type_of(*f, "output.weight"), want);
      EXPECT_EQ(type_of(*f, "blk.0.attn_norm.weight"), tensor_type::f32);
    }
    expect_generates(path);
    EXPECT_EQ(tokenize(path, "--no-bos 'Hello world'"), (std::vector<int32_t>{15043, 3186}));
    EXPECT_EQ(tokenize(path, "'Hello world'"), (std::vector<int32_t>{1, 15043, 3186}));
  }
}

TEST_F(mkmodel, the_same_seed_gives_the_same_bytes_whatever_the_thread_count) {
  const std::string a = make("tinyllama-1.1b", "q8_0", "--threads 1 --seed 7");
  const std::string b = dir_ + "b.gguf";
  auto r =
      hearth("mkmodel --shape tinyllama-1.1b --type q8_0 --layers 1 --threads 2 --seed 7 -o " + b);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::read_file_bytes(a), testing::read_file_bytes(b));
  r = hearth("mkmodel --shape tinyllama-1.1b --type q8_0 --layers 1 --seed 8 -o " + b);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(testing::read_file_bytes(a), testing::read_file_bytes(b));
}

TEST_F(mkmodel, qwen2_5_has_biases_a_tied_output_and_the_padded_qwen2_vocabulary) {
  const std::string path = make("qwen2.5-0.5b", "f16");
  {
    auto f = gguf_file::open(path);
    ASSERT_TRUE(f) << f.message();
    EXPECT_EQ(str(*f, "general.architecture"), "qwen2");
    EXPECT_EQ(u(*f, "qwen2.embedding_length"), 896u);
    EXPECT_EQ(u(*f, "qwen2.attention.head_count_kv"), 2u);
    EXPECT_EQ(u(*f, "qwen2.context_length"), 32768u);
    EXPECT_EQ(u(*f, "qwen2.vocab_size"), 151936u);
    EXPECT_EQ(fl(*f, "qwen2.rope.freq_base"), 1e6);
    EXPECT_EQ(str(*f, "tokenizer.ggml.pre"), "qwen2");
    EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
    EXPECT_EQ(type_of(*f, "blk.0.attn_k.bias"), tensor_type::f32);
    EXPECT_EQ(type_of(*f, "blk.0.attn_k.weight"), tensor_type::f16);
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens && *tokens);
    EXPECT_EQ((*tokens)->size(), 151936u);
  }
  expect_generates(path);
  EXPECT_EQ(tokenize(path, "'Hello world'"), (std::vector<int32_t>{9707, 1879}));
}

TEST_F(mkmodel, llama_3_2_has_rope_freqs_and_a_llama_3_vocabulary) {
  const std::string path = make("llama-3.2-1b", "q8_0");
  {
    auto f = gguf_file::open(path);
    ASSERT_TRUE(f) << f.message();
    EXPECT_EQ(u(*f, "llama.vocab_size"), 128256u);
    EXPECT_EQ(fl(*f, "llama.rope.freq_base"), 500000.0);
    EXPECT_EQ(str(*f, "tokenizer.ggml.pre"), "llama-bpe");
    EXPECT_EQ(u(*f, "tokenizer.ggml.bos_token_id"), 128000u);
    EXPECT_EQ(u(*f, "tokenizer.ggml.eos_token_id"), 128009u);
    EXPECT_NE(str(*f, "tokenizer.chat_template").find("<|start_header_id|>"), std::string::npos);
    const gguf_tensor* rope = f->find_tensor("rope_freqs.weight");
    ASSERT_NE(rope, nullptr);
    EXPECT_EQ(rope->type, tensor_type::f32);
    EXPECT_EQ(rope->ne[0], 32);
    EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
  }
  expect_generates(path);
  EXPECT_EQ(tokenize(path, "'Hello world'"), (std::vector<int32_t>{128000, 9707, 1879}));
  auto r = hearth("run -m " + path + " --chat Hi -n 2 --temp 0 -t 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("chat template: the model's own (Jinja; llama3 family)"), std::string::npos)
      << r.err;
}

TEST_F(mkmodel, llama_3_8b_dry_run_counts_the_published_parameters) {
  // A one-layer 8B file is still 1.3 GB in Q8_0: the dry run only.
  auto r = hearth("mkmodel --shape llama-3-8b --type f16 --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("llama-3-8b f16: 32 layers, 291 tensors, 8030261248 parameters"),
            std::string::npos)
      << r.out;
  // F16: two bytes per parameter plus the metadata.
  EXPECT_GT(announced_bytes(r.out), 2 * 8030261248ull);
  EXPECT_LT(announced_bytes(r.out), 2 * 8030261248ull + 8'000'000);
}

TEST_F(mkmodel, qwen3_has_query_key_norms_wide_heads_and_the_qwen2_vocabulary) {
  const std::string path = make("qwen3-0.6b", "q8_0", "", 2);
  {
    auto f = gguf_file::open(path);
    ASSERT_TRUE(f) << f.message();
    EXPECT_EQ(str(*f, "general.architecture"), "qwen3");
    EXPECT_EQ(str(*f, "general.name"), "Qwen3-0.6B random weights, 2 of 28 layers");
    expect_u32s(*f, "qwen3",
                {{"block_count", 2},
                 {"embedding_length", 1024},
                 {"feed_forward_length", 3072},
                 {"attention.head_count", 16},
                 {"attention.head_count_kv", 8}});
    // 16 heads of 128 are wider than n_embd / n_head = 64: the key and value lengths say so.
    expect_u32s(*f, "qwen3",
                {{"attention.key_length", 128},
                 {"attention.value_length", 128},
                 {"rope.dimension_count", 128},
                 {"context_length", 40960}});
    EXPECT_EQ(fl(*f, "qwen3.rope.freq_base"), 1e6);
    EXPECT_NEAR(fl(*f, "qwen3.attention.layer_norm_rms_epsilon"), 1e-6, 1e-12);
    EXPECT_EQ(str(*f, "tokenizer.ggml.pre"), "qwen2");
    EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
    const gguf_tensor* q = f->find_tensor("blk.1.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->ne[0], 1024);
    EXPECT_EQ(q->ne[1], 16 * 128);
    const gguf_tensor* o = f->find_tensor("blk.1.attn_output.weight");
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->ne[0], 16 * 128);
    const gguf_tensor* kn = f->find_tensor("blk.0.attn_k_norm.weight");
    ASSERT_NE(kn, nullptr);
    EXPECT_EQ(kn->ne[0], 128);
    EXPECT_EQ(kn->type, tensor_type::f32);
    EXPECT_EQ(type_of(*f, "blk.0.attn_q_norm.weight"), tensor_type::f32);
    EXPECT_EQ(f->tensors().size(), 2 + 2 * 11u);
  }
  expect_generates(path);
  EXPECT_EQ(tokenize(path, "'Hello world'"), (std::vector<int32_t>{9707, 1879}));
}

TEST_F(mkmodel, qwen3_moe_stacks_its_experts_behind_an_f32_router) {
  const std::string path = make("qwen3-30b-a3b", "q4_k_m");
  {
    auto f = gguf_file::open(path);
    ASSERT_TRUE(f) << f.message();
    EXPECT_EQ(str(*f, "general.architecture"), "qwen3moe");
    expect_u32s(*f, "qwen3moe",
                {{"block_count", 1},
                 {"embedding_length", 2048},
                 {"feed_forward_length", 6144},
                 {"attention.head_count", 32},
                 {"attention.head_count_kv", 4},
                 {"attention.key_length", 128},
                 {"expert_count", 128},
                 {"expert_used_count", 8},
                 {"expert_feed_forward_length", 768}});
    EXPECT_NE(f->find_tensor("output.weight"), nullptr);
    EXPECT_EQ(f->find_tensor("blk.0.ffn_gate.weight"), nullptr);
    const gguf_tensor* router = f->find_tensor("blk.0.ffn_gate_inp.weight");
    ASSERT_NE(router, nullptr);
    EXPECT_EQ(router->type, tensor_type::f32);
    EXPECT_EQ(router->ne[0], 2048);
    EXPECT_EQ(router->ne[1], 128);
    for (const char* name : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      const gguf_tensor* e = f->find_tensor("blk.0." + std::string(name) + ".weight");
      ASSERT_NE(e, nullptr) << name;
      const bool down = std::string(name) == "ffn_down_exps";
      EXPECT_EQ(e->ne[0], down ? 768 : 2048) << name;
      EXPECT_EQ(e->ne[1], down ? 2048 : 768) << name;
      EXPECT_EQ(e->ne[2], 128) << name;
    }
    // 128 experts: llama-quantize's 8-expert rules (attn_k/v Q8_0) do not apply.
    EXPECT_EQ(type_of(*f, "blk.0.attn_k.weight"), tensor_type::q4_k);
    EXPECT_EQ(type_of(*f, "blk.0.ffn_gate_exps.weight"), tensor_type::q4_k);
    EXPECT_EQ(type_of(*f, "blk.0.ffn_down_exps.weight"), tensor_type::q6_k);
  }
  expect_generates(path);
}

TEST_F(mkmodel, qwen3_moe_announces_its_active_parameters_and_has_a_dense_twin) {
  auto r = hearth("mkmodel --shape qwen3-30b-a3b --type f16 --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The published counts: 30.5B in all, 3.3B active.
  EXPECT_NE(r.out.find("qwen3-30b-a3b f16: 48 layers, 579 tensors, 30532122624 parameters"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("per token: 3353032704 active parameters"), std::string::npos) << r.out;
  // The dense twin: the active parameters less the routers (48 x 2048 x 128).
  r = hearth("mkmodel --shape qwen3-30b-a3b --type f16 --dry-run --dense-active");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(": 48 layers, 531 tensors, " +
                       std::to_string(3353032704ull - 48ull * 2048 * 128) + " parameters"),
            std::string::npos)
      << r.out;
  const std::string path = make("qwen3-30b-a3b", "q8_0", "--dense-active");
  {
    auto f = gguf_file::open(path);
    ASSERT_TRUE(f) << f.message();
    EXPECT_EQ(str(*f, "general.architecture"), "qwen3");
    EXPECT_EQ(u(*f, "qwen3.feed_forward_length"), 8u * 768);
    EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.weight"), nullptr);
    EXPECT_NE(str(*f, "general.name").find("as one dense 6144-wide feed-forward"),
              std::string::npos);
  }
  expect_generates(path);
  r = hearth("mkmodel --shape qwen3-8b --type f16 --dry-run --dense-active");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no experts"), std::string::npos) << r.err;
}

TEST_F(mkmodel, qwen3_8b_dry_run_counts_the_published_parameters) {
  auto r = hearth("mkmodel --shape qwen3-8b --type f16 --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("qwen3-8b f16: 36 layers, 399 tensors, 8190735360 parameters"),
            std::string::npos)
      << r.out;
}

TEST_F(mkmodel, gemma3_has_sliding_windows_post_norms_and_a_padded_sentencepiece_vocabulary) {
  const std::string path = make("gemma3-1b", "q8_0", "", 2);
  {
    auto f = gguf_file::open(path);
    ASSERT_TRUE(f) << f.message();
    EXPECT_EQ(str(*f, "general.architecture"), "gemma3");
    expect_u32s(*f, "gemma3",
                {{"block_count", 2},
                 {"embedding_length", 1152},
                 {"feed_forward_length", 6912},
                 {"attention.head_count", 4},
                 {"attention.head_count_kv", 1},
                 {"attention.key_length", 256},
                 {"attention.value_length", 256},
                 {"attention.sliding_window", 512},
                 {"attention.sliding_window_pattern", 6}});
    EXPECT_EQ(fl(*f, "gemma3.rope.freq_base"), 1e6);
    EXPECT_EQ(fl(*f, "gemma3.rope.freq_base_swa"), 10000.0);
    EXPECT_EQ(u(*f, "gemma3.vocab_size"), 262144u);
    EXPECT_FALSE(f->get_string("gemma3.rope.scaling.type").value());
    EXPECT_EQ(str(*f, "tokenizer.ggml.model"), "llama");
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens && *tokens);
    EXPECT_EQ((*tokens)->size(), 262144u);
    EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
    EXPECT_EQ(f->find_tensor("token_embd.weight")->ne[1], 262144);
    for (const char* name : {"post_attention_norm", "post_ffw_norm", "attn_q_norm"})
      EXPECT_EQ(type_of(*f, "blk.1." + std::string(name) + ".weight"), tensor_type::f32) << name;
    EXPECT_EQ(f->find_tensor("blk.1.attn_q_norm.weight")->ne[0], 256);
    EXPECT_EQ(f->tensors().size(), 2 + 2 * 13u);
  }
  expect_generates(path);
  // The Llama 2 pieces (see random-model.h): Llama 2's ids.
  EXPECT_EQ(tokenize(path, "--no-bos 'Hello world'"), (std::vector<int32_t>{15043, 3186}));
}

TEST_F(mkmodel, gemma3_4b_scales_its_global_rope_linearly) {
  auto r = hearth("mkmodel --shape gemma3-4b --type f16 --dry-run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gemma3-4b f16: 34 layers, 444 tensors, 3880099328 parameters"),
            std::string::npos)
      << r.out;
  const std::string path = make("gemma3-4b", "q8_0");
  {
    auto f = gguf_file::open(path);
    ASSERT_TRUE(f) << f.message();
    expect_u32s(*f, "gemma3",
                {{"embedding_length", 2560},
                 {"attention.head_count", 8},
                 {"attention.head_count_kv", 4},
                 {"attention.sliding_window", 1024},
                 {"context_length", 131072}});
    EXPECT_EQ(str(*f, "gemma3.rope.scaling.type"), "linear");
    EXPECT_EQ(fl(*f, "gemma3.rope.scaling.factor"), 8.0);
  }
  expect_generates(path);
}

TEST_F(mkmodel, unknown_names_are_one_line_listing_the_accepted_ones) {
  auto r = hearth("mkmodel --shape llama-7b --type f16 --dry-run");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err,
            "hearth: error: unknown shape 'llama-7b' (shapes: tinyllama-1.1b, qwen2.5-0.5b, "
            "llama-3.2-1b, llama-3-8b, qwen3-0.6b, qwen3-8b, qwen3-30b-a3b, gemma3-1b, "
            "gemma3-4b)\n");
  r = hearth("mkmodel --shape tinyllama-1.1b --type q9 --dry-run");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("hearth: error: unknown type 'q9' (types: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("q8_0"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  r = hearth("mkmodel --shape tinyllama-1.1b --type f16");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("-o FILE"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hearth
