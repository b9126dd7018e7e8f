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
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using testing::process_result;

// Runs the hearth binary with a shell-quoted argument string.
process_result hearth(const std::string& args) {
  return testing::run_command(std::string(HEARTH_BIN) + " " + args);
}

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

  // Writes a one-layer file and checks what every file must be; returns its path.
  std::string make(const std::string& shape, const std::string& type,
                   const std::string& extra = "") {
    const std::string path = dir_ + shape + "." + type + ".gguf";
    auto dry = hearth("mkmodel --shape " + shape + " --type " + type + " --layers 1 --dry-run");
    EXPECT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_FALSE(std::filesystem::exists(path));
    auto r = hearth("mkmodel --shape " + shape + " --type " + type + " --layers 1 -o " + path +
                    " " + extra);
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
  EXPECT_NE(r.err.find("chat template: llama3"), std::string::npos) << r.err;
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

TEST_F(mkmodel, unknown_names_are_one_line_listing_the_accepted_ones) {
  auto r = hearth("mkmodel --shape llama-7b --type f16 --dry-run");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err,
            "hearth: error: unknown shape 'llama-7b' (shapes: tinyllama-1.1b, qwen2.5-0.5b, "
            "llama-3.2-1b, llama-3-8b)\n");
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
