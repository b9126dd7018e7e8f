// The Hugging Face route (engine/import/hf-import.h, engine/convert/hf-export.h): every
// F32/F16/BF16 model of the test data is converted to a model directory (once as one
// model.safetensors, once in shards with an index) and loaded from there; the weights and the
// logits of the reference prompts must be bit-identical to those of the GGUF file. Plus the errors
// a broken directory must give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/context.h"
#include "engine/convert/hf-export.h"
#include "engine/import/hf-import.h"
#include "engine/import/hf-tokenizer.h"
#include "engine/import/sp-model.h"
#include "engine/io/gguf-writer.h"
#include "engine/io/safetensors.h"
#include "engine/model.h"
#include "engine/tokenizer/pre-tokenizer.h"
#include "engine/tokenizer/vocab.h"
#include "tests/conformance.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system's temporary folder, removed with everything in it.
class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "hearth-hf-route-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The model files of the test data that the route carries exactly: stories260K (F32) and every
// synthetic and synthetic2 F32, F16 and BF16 file, listed from the folders so that a new one is
// covered.
std::vector<std::string> model_files() {
  std::vector<std::string> out = {"stories260K.gguf"};
  std::vector<std::string> found;
  for (const char* folder : {"synthetic", "synthetic2"}) {
    std::error_code ec;
    for (const auto& e :
         fs::directory_iterator(testing::testdata_root() + "/models/" + folder, ec)) {
      const std::string name = e.path().filename().string();
      for (const char* t : {".f32.gguf", ".f16.gguf", ".bf16.gguf"}) {
        if (name.ends_with(t)) found.push_back(std::string(folder) + "/" + name);
      }
    }
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) found.push_back("synthetic/folder-missing-or-empty.f32.gguf");
  out.insert(out.end(), found.begin(), found.end());
  return out;
}

struct prompt_case {
  std::string prompt;
  std::vector<int32_t> tokens;
};

std::vector<prompt_case> reference_prompts(const std::string& model_file) {
  const std::string json_path =
      testing::testdata_path("reference/" + model_file.substr(0, model_file.size() - 5) + ".json");
  if (json_path.empty()) return {};
  const auto ref = nlohmann::json::parse(testing::read_file_text(json_path));
  std::vector<prompt_case> out;
  for (const auto& c : ref["cases"]) {
    out.push_back({c["prompt"].get<std::string>(), c["prompt_tokens"].get<std::vector<int32_t>>()});
  }
  return out;
}

// Logits of every prompt token, all rows of all prompts concatenated.
std::vector<float> logits_of(const model& m, const std::vector<prompt_case>& prompts) {
  context ctx(m, {.n_ctx = 256, .n_batch = 512, .n_seq_max = 1});
  std::vector<float> out;
  for (const auto& p : prompts) {
    ctx.clear();
    std::vector<batch_token> batch;
    for (size_t i = 0; i < p.tokens.size(); ++i) {
      batch.push_back({p.tokens[i], int32_t(i), 0, true});
    }
    auto r = ctx.decode(batch);
    EXPECT_TRUE(r.ok()) << r.message();
    if (!r.ok()) return {};
    for (int32_t i = 0; i < ctx.n_logits(); ++i) {
      out.insert(out.end(), ctx.logits(i), ctx.logits(i) + ctx.n_vocab());
    }
  }
  return out;
}

// Every tensor of `want` is in `got` with the same type, shape and bytes (and nothing else is).
void expect_same_weights(const gguf_file& want, const gguf_file& got) {
  EXPECT_EQ(want.tensors().size(), got.tensors().size());
  for (const auto& w : want.tensors()) {
    const gguf_tensor* g = got.find_tensor(w.name);
    ASSERT_NE(g, nullptr) << w.name << " is missing after the round trip";
    ASSERT_EQ(g->type, w.type) << w.name;
    ASSERT_EQ(g->shape_string(), w.shape_string()) << w.name;
    ASSERT_EQ(g->n_bytes, w.n_bytes) << w.name;
    EXPECT_EQ(std::memcmp(g->data, w.data, w.n_bytes), 0) << w.name << " differs";
  }
}

class hf_route : public ::testing::TestWithParam<std::string> {};

TEST_P(hf_route, round_trip_gives_identical_logits) {
  const std::string gguf_path = testing::testdata_path("models/" + GetParam());
  ASSERT_FALSE(gguf_path.empty());
  const auto prompts = reference_prompts(GetParam());
  ASSERT_FALSE(prompts.empty());

  auto reference = model::load(gguf_path, {});
  const std::vector<float> want = logits_of(*reference, prompts);
  ASSERT_FALSE(want.empty());

  // Several shards: as many as make sense for the model's size, 2 or 3.
  for (const int shards : {1, reference->hparams().n_layer > 2 ? 3 : 2}) {
    SCOPED_TRACE("shards: " + std::to_string(shards));
    temp_dir dir;
    auto summary = hf_export(gguf_path, dir.path().string(), {.n_shards = shards});
    ASSERT_TRUE(summary.ok()) << summary.message();
    for (const auto& w : summary->warnings) ADD_FAILURE() << "converter warning: " << w;
    EXPECT_EQ(fs::exists(dir.path() / "model.safetensors.index.json"), shards > 1);
    if (shards > 1) {
      for (int k = 1; k <= shards; ++k) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k, shards);
        EXPECT_TRUE(fs::exists(dir.path() / name)) << name;
      }
    }

    // The written tokenizer.model is one the SentencePiece library loads and agrees with.
    auto sp = sp_model::load((dir.path() / "tokenizer.model").string());
    ASSERT_TRUE(sp.ok()) << sp.message();
    EXPECT_EQ(sp->n_tokens(), reference->vocab().n_tokens());
    for (const auto& p : prompts) {
      const std::vector<int32_t> no_bos(p.tokens.begin() + 1, p.tokens.end());
      EXPECT_EQ(sp->encode(p.prompt), no_bos) << "'" << p.prompt << "'";
    }

    auto imported = model::load(dir.path().string(), {});
    expect_same_weights(reference->file(), imported->file());
    EXPECT_EQ(imported->hparams().arch, reference->hparams().arch);
    ASSERT_EQ(imported->vocab().n_tokens(), reference->vocab().n_tokens());
    for (int32_t id = 0; id < reference->vocab().n_tokens(); ++id) {
      ASSERT_EQ(imported->vocab().text(id), reference->vocab().text(id)) << "token " << id;
      ASSERT_EQ(imported->vocab().score(id), reference->vocab().score(id)) << "token " << id;
      ASSERT_EQ(imported->vocab().attr(id), reference->vocab().attr(id)) << "token " << id;
    }

    const std::vector<float> got = logits_of(*imported, prompts);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    }
    EXPECT_EQ(differ, 0u) << differ << " of " << want.size() << " logits differ";
  }
}

INSTANTIATE_TEST_SUITE_P(all, hf_route, ::testing::ValuesIn(model_files()),
                         [](const auto& param_info) {
                           return testing::conformance_case_name(param_info.param);
                         });

double worst_row_nmse(const std::vector<float>& got, const std::vector<float>& want,
                      int32_t n_vocab) {
  double worst = 0;
  for (size_t row = 0; row + size_t(n_vocab) <= want.size(); row += size_t(n_vocab)) {
    double err = 0, norm = 0;
    for (size_t v = row; v < row + size_t(n_vocab); ++v) {
      err += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
      norm += double(want[v]) * want[v];
    }
    worst = std::max(worst, err / norm);
  }
  return worst;
}

// A synthetic model's logits on its reference prompts, and its hf_export read back, for the tests
// that rewrite the export before loading it.
struct exported_reference {
  std::vector<prompt_case> prompts;
  std::unique_ptr<model> reference;  // the GGUF file loaded
  std::vector<float> want;           // its logits on `prompts`
  std::vector<uint8_t> bytes;        // the export's model.safetensors
};

// `model_file` (under models/) loaded and exported into dir; fails the test
// (ASSERT_NO_FATAL_FAILURE at the caller) when the file is missing or the export fails.
void export_with_reference(const std::string& model_file, const temp_dir& dir,
                           exported_reference& e) {
  const std::string gguf_path = testing::testdata_path("models/" + model_file);
  ASSERT_FALSE(gguf_path.empty());
  e.prompts = reference_prompts(model_file);
  e.reference = model::load(gguf_path, {});
  e.want = logits_of(*e.reference, e.prompts);
  ASSERT_TRUE(hf_export(gguf_path, dir.path().string(), {}).ok());
  e.bytes = testing::read_file_bytes((dir.path() / "model.safetensors").string());
}

// The export in dir rewritten: `each` adds each tensor of its model.safetensors to the new file
// (as it is, renamed, or with more beside it) and `config` makes the new config.json of the old;
// fails the test (ASSERT_NO_FATAL_FAILURE at the caller) when a step does.
void rewrite_export(const temp_dir& dir, const exported_reference& e,
                    const std::function<void(const safetensors_tensor&, safetensors_writer&)>& each,
                    const std::function<nlohmann::json(nlohmann::json)>& config) {
  auto file = safetensors_file::parse(e.bytes);
  ASSERT_TRUE(file.ok()) << file.message();
  safetensors_writer w;
  for (const auto& t : file->tensors()) ASSERT_NO_FATAL_FAILURE(each(t, w));
  ASSERT_TRUE(w.write_file((dir.path() / "model.safetensors").string()).ok());
  const fs::path path = dir.path() / "config.json";
  const nlohmann::json old = nlohmann::json::parse(testing::read_file_text(path.string()));
  std::ofstream(path) << config(old).dump(2);
}

// The round trip above would also pass if the converter and the importer both skipped the Q/K
// permutation (or both did it the wrong way). HF's llama rotates half-split pairs: the exported
// q_proj/k_proj loaded as qwen2 (half-split rope; zero biases added, rope base and all else the
// same) must compute what the GGUF llama computes with adjacent pairs.
TEST(hf_route_llama, exported_q_k_rows_are_in_hf_half_split_order) {
  temp_dir dir;
  exported_reference e;
  ASSERT_NO_FATAL_FAILURE(export_with_reference("synthetic/synthetic-llama-a.f32.gguf", dir, e));
  std::list<std::vector<uint8_t>> zeros;  // kept until the file is written
  auto with_zero_biases = [&](const safetensors_tensor& t, safetensors_writer& w) {
    w.add_tensor(t.name, *t.type, t.shape, {t.data, t.n_bytes});
    for (const char* proj : {".q_proj.weight", ".k_proj.weight", ".v_proj.weight"}) {
      if (!t.name.ends_with(proj)) continue;
      zeros.emplace_back(size_t(t.shape[0]) * 4, 0);
      const std::string bias = t.name.substr(0, t.name.size() - 6) + "bias";
      w.add_tensor(bias, tensor_type::f32, {t.shape[0]}, zeros.back());
    }
  };
  ASSERT_NO_FATAL_FAILURE(rewrite_export(dir, e, with_zero_biases, [](nlohmann::json config) {
    config["model_type"] = "qwen2";
    config["architectures"] = {"Qwen2ForCausalLM"};
    return config;
  }));

  auto as_qwen2 = model::load(dir.path().string(), {});
  ASSERT_EQ(as_qwen2->hparams().arch, "qwen2");
  ASSERT_TRUE(as_qwen2->hparams().rope.neox);
  const std::vector<float> got = logits_of(*as_qwen2, e.prompts);
  ASSERT_EQ(got.size(), e.want.size());
  // Only the order of additions inside rope differs; a wrong row order gives NMSE ~ 1.
  EXPECT_LE(worst_row_nmse(got, e.want, e.reference->hparams().n_vocab), 1e-10);
}

// Quantized files are dequantized (to F32 by default), and --type rounds F32 matrices: the
// directory then computes what the reference engine does for the GGUF file, within the
// conformance bounds of ../shared/README.md.
TEST(hf_route_llama, dequantized_and_retyped_exports_stay_within_conformance_bounds) {
  struct variant {
    const char* file;
    std::optional<tensor_type> type;
    tensor_type want_type;  // of the matrices after the import
    double worst_nmse;
  };
  const variant variants[] = {
      {"synthetic-llama-a.q8_0", std::nullopt, tensor_type::f32, 1e-2},
      {"synthetic-llama-a.q4_k_m", std::nullopt, tensor_type::f32, 1e-2},
      {"synthetic-llama-a.q8_0", tensor_type::bf16, tensor_type::bf16, 1e-2},
      {"synthetic-llama-a.f32", tensor_type::f16, tensor_type::f16, 1e-4},
      {"synthetic-llama-a.f32", tensor_type::bf16, tensor_type::bf16, 1e-3},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(std::string(v.file) + " -> " +
                 (v.type ? std::string(tensor_type_name(*v.type)) : "default"));
    const std::string rel = std::string("synthetic/") + v.file + ".gguf";
    const std::string gguf_path = testing::testdata_path("models/" + rel);
    ASSERT_FALSE(gguf_path.empty());
    const std::string json_path =
        testing::testdata_path("reference/synthetic/" + std::string(v.file) + ".json");
    const auto ref = nlohmann::json::parse(testing::read_file_text(json_path));
    temp_dir dir;
    auto r = hf_export(gguf_path, dir.path().string(), {.type = v.type, .n_shards = 2});
    ASSERT_TRUE(r.ok()) << r.message();
    auto m = model::load(dir.path().string(), {});
    EXPECT_EQ(m->file().find_tensor("blk.0.attn_q.weight")->type, v.want_type);
    EXPECT_EQ(m->file().find_tensor("blk.0.attn_norm.weight")->type, tensor_type::f32);
    const int32_t n_vocab = m->hparams().n_vocab;
    for (const auto& c : ref["cases"]) {
      const prompt_case p{c["prompt"].get<std::string>(),
                          c["prompt_tokens"].get<std::vector<int32_t>>()};
      const auto got = logits_of(*m, {p});
      const auto want = testing::read_f32_file(json_path.substr(0, json_path.rfind('/') + 1) +
                                               c["logits_file"].get<std::string>());
      ASSERT_EQ(got.size(), want.size());
      EXPECT_LE(worst_row_nmse(got, want, n_vocab), v.worst_nmse) << p.prompt;
    }
  }
}

// The tokenizer files the converter writes read back, through the importers, as the same
// vocabulary: every vocabulary of the test data (SentencePiece ones as tokenizer.model, byte-level
// BPE ones as tokenizer.json), tokens, types, scores or merges, pre-tokenizer and special ids.
class hf_tokenizer_round_trip : public ::testing::TestWithParam<std::string> {};

TEST_P(hf_tokenizer_round_trip, reads_back_as_the_same_vocabulary) {
  const std::string path = testing::testdata_path(GetParam());
  ASSERT_FALSE(path.empty());
  auto original = gguf_file::open(path);
  ASSERT_TRUE(original.ok()) << original.message();
  auto files = hf_tokenizer_files(*original);
  if (GetParam().ends_with("ggml-vocab-phi-3.gguf")) {
    // Converted long ago from tokenizer.model + added tokens: 53 tokens typed unknown (the
    // [PAD<id>] padding), which no SentencePiece model can hold.
    ASSERT_FALSE(files.ok());
    EXPECT_NE(files.message().find("exactly one unknown token, this vocabulary 53 (ids 32011"),
              std::string::npos)
        << files.message();
    return;
  }
  ASSERT_TRUE(files.ok()) << files.message();
  std::map<std::string, std::string> by_name(files->begin(), files->end());

  result<std::vector<gguf_kv>> kv = error{"no tokenizer file"};
  temp_dir dir;
  if (by_name.contains("tokenizer.model")) {
    const std::string model_path = (dir.path() / "tokenizer.model").string();
    std::ofstream(model_path, std::ios::binary) << by_name["tokenizer.model"];
    kv = sp_model_metadata(model_path);
  } else {
    kv = hf_tokenizer_metadata(by_name["tokenizer.json"], by_name["tokenizer_config.json"]);
  }
  ASSERT_TRUE(kv.ok()) << kv.message();
  auto back = gguf_file::from_parts(std::move(kv).value(), {}, nullptr);
  ASSERT_TRUE(back.ok()) << back.message();

  EXPECT_EQ(*back->get_string("tokenizer.ggml.model"),
            *original->get_string("tokenizer.ggml.model"));
  // tokenizer.json names no pre-tokenizer: the importer takes the first name with the same
  // expressions ("mpt" comes back as "gpt-2", "refact" as "starcoder"), which must then behave
  // the same: the same expressions and flags.
  const pre_tokenizer_spec* want_pre =
      pre_tokenizer_find(original->get_string("tokenizer.ggml.pre")->value_or("default"));
  const pre_tokenizer_spec* got_pre =
      pre_tokenizer_find(back->get_string("tokenizer.ggml.pre")->value_or("default"));
  ASSERT_TRUE(want_pre && got_pre);
  EXPECT_TRUE(std::equal(want_pre->regexes.begin(), want_pre->regexes.end(),
                         got_pre->regexes.begin(), got_pre->regexes.end()));
  EXPECT_EQ(got_pre->ignore_merges, want_pre->ignore_merges);
  EXPECT_EQ(got_pre->add_bos, want_pre->add_bos);
  EXPECT_EQ(got_pre->clean_spaces, want_pre->clean_spaces);
  EXPECT_EQ(got_pre->no_bos, want_pre->no_bos);

  const auto tokens = *original->get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(*back->get_string_array("tokenizer.ggml.tokens"), tokens);
  const auto want_types = **original->get_int_array("tokenizer.ggml.token_type");
  const auto got_types = **back->get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(got_types.size(), want_types.size());
  for (size_t id = 0; id < want_types.size(); ++id) {
    // llama.cpp's converter (build 4748) makes an added token that looks special a control
    // token, whatever tokenizer.json says; older files (deepseek-coder) have them user-defined.
    const std::string& t = (*tokens)[id];
    const bool looks_special = t == "<pad>" || (t.starts_with("<|") && t.ends_with("|>")) ||
                               (t.starts_with("<\xEF\xBD\x9C") && t.ends_with("\xEF\xBD\x9C>"));
    if (want_types[id] == 4 && got_types[id] == 3 && looks_special) continue;
    EXPECT_EQ(got_types[id], want_types[id]) << "token " << id << " '" << t << "'";
  }
  if (original->find("tokenizer.ggml.scores")) {
    EXPECT_EQ(*back->get_float_array("tokenizer.ggml.scores"),
              *original->get_float_array("tokenizer.ggml.scores"));
  }
  if (original->find("tokenizer.ggml.merges")) {
    EXPECT_EQ(*back->get_string_array("tokenizer.ggml.merges"),
              *original->get_string_array("tokenizer.ggml.merges"));
  }
  auto want_vocab = vocab::from_gguf(*original);
  auto got_vocab = vocab::from_gguf(*back);
  ASSERT_TRUE(want_vocab.ok()) << want_vocab.message();
  ASSERT_TRUE(got_vocab.ok()) << got_vocab.message();
  EXPECT_EQ(got_vocab->bos(), want_vocab->bos());
  EXPECT_EQ(got_vocab->eos(), want_vocab->eos());
  EXPECT_EQ(got_vocab->unk(), want_vocab->unk());
  EXPECT_EQ(got_vocab->add_bos(), want_vocab->add_bos());
  EXPECT_EQ(got_vocab->add_eos(), want_vocab->add_eos());
  EXPECT_EQ(got_vocab->add_space_prefix(), want_vocab->add_space_prefix());
  for (const char* text : {"Hello world", " two  spaces, 3 digits 123 and ümlauts!", "\n\tx"}) {
    EXPECT_EQ(got_vocab->tokenize(text, true, false), want_vocab->tokenize(text, true, false))
        << text;
  }
}

std::vector<std::string> vocab_files() {
  std::vector<std::string> out = {"models/stories260K.gguf"};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(testing::testdata_root() + "/vocab", ec)) {
    if (e.path().extension() == ".gguf") out.push_back("vocab/" + e.path().filename().string());
  }
  std::sort(out.begin() + 1, out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(all, hf_tokenizer_round_trip, ::testing::ValuesIn(vocab_files()),
                         [](const auto& param_info) {
                           return testing::conformance_case_name(param_info.param);
                         });

// --- rope scaling and multimodal Gemma 3 from config.json ---------------------------------------

// Llama 3.1's rope_scaling becomes rope_freqs.weight as convert_hf_to_gguf.py makes it: for head
// size 64, base 500000, factor 8, low/high frequency factors 1 and 4 over 8192 positions, the 32
// divisors below (computed by hand from the converter's formula, in double).
TEST(hf_route_rope, llama3_rope_scaling_gives_the_converters_rope_freqs) {
  const std::string gguf_path =
      testing::testdata_path("models/synthetic/synthetic-llama-a.f32.gguf");
  ASSERT_FALSE(gguf_path.empty());
  temp_dir dir;
  ASSERT_TRUE(hf_export(gguf_path, dir.path().string(), {}).ok());
  const fs::path config_path = dir.path() / "config.json";
  auto config = nlohmann::json::parse(testing::read_file_text(config_path.string()));
  ASSERT_EQ(config["head_dim"], 64);
  config["rope_theta"] = 500000.0;
  config["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", 8.0},
                            {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 8192}};
  std::ofstream(config_path) << config.dump(2);
  const std::vector<double> want = {1, 1, 1, 1, 1,          1,          1,          1, 1, 1, 1,
                                    1, 1, 1, 1, 1.55341463, 2.69452969, 5.25732659, 8, 8, 8, 8,
                                    8, 8, 8, 8, 8,          8,          8,          8, 8, 8};
  auto m = model::load(dir.path().string(), {});
  const gguf_tensor* t = m->file().find_tensor("rope_freqs.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, tensor_type::f32);
  ASSERT_EQ(t->n_elements(), int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    float got;
    std::memcpy(&got, t->data + 4 * i, 4);
    EXPECT_NEAR(got, want[i], 1e-6 * want[i]) << "rope_freqs[" << i << "]";
  }
  EXPECT_TRUE(m->weights().rope_freqs.present());
  EXPECT_EQ(m->hparams().rope.freq_scale, 1.0f);  // the divisors are the whole scaling
  // A Llama 3.1 folder cannot go back: GGUF keeps only the divisors.
  temp_dir back;
  auto r = hf_export(dir.path().string(), back.path().string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("rope_freqs.weight"), std::string::npos) << r.message();
}

// Qwen3's 128k setting (rope_scaling yarn, factor 4 over 32768) in config.json gives the model a
// GGUF with the converter's yarn metadata gives: the same hyperparameters and the same logits,
// which differ from the unscaled model's.
TEST(hf_route_rope, yarn_from_config_json_matches_yarn_gguf_metadata) {
  const std::string gguf_path =
      testing::testdata_path("models/synthetic2/synthetic-qwen3-a.f32.gguf");
  ASSERT_FALSE(gguf_path.empty());
  const auto prompts = reference_prompts("synthetic2/synthetic-qwen3-a.f32.gguf");
  ASSERT_FALSE(prompts.empty());
  auto original = gguf_file::open(gguf_path);
  ASSERT_TRUE(original.ok()) << original.message();

  temp_dir dir;
  gguf_writer w;
  w.copy_metadata_from(*original);
  w.set_string("qwen3.rope.scaling.type", "yarn");
  w.set_f32("qwen3.rope.scaling.factor", 4.0f);
  w.set_u32("qwen3.rope.scaling.original_context_length", 1024);
  for (const auto& t : original->tensors()) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    w.add_tensor(t.name, t.type, ne, std::span(t.data, t.n_bytes));
  }
  const std::string yarn_path = (dir.path() / "yarn.gguf").string();
  ASSERT_TRUE(w.write_file(yarn_path).ok());
  auto yarn = model::load(yarn_path, {});
  const rope_params& rp = yarn->hparams().rope;
  EXPECT_EQ(rp.freq_scale, 0.25f);
  EXPECT_EQ(rp.ext_factor, 1.0f);
  EXPECT_EQ(rp.attn_factor, 1.0f);
  EXPECT_EQ(rp.beta_fast, 32.0f);
  EXPECT_EQ(rp.beta_slow, 1.0f);
  EXPECT_EQ(rp.n_ctx_orig, 1024);
  const std::vector<float> with_yarn = logits_of(*yarn, prompts);
  auto plain = model::load(gguf_path, {});
  const std::vector<float> without = logits_of(*plain, prompts);
  ASSERT_EQ(with_yarn.size(), without.size());
  for (float v : with_yarn) ASSERT_TRUE(std::isfinite(v));
  // The magnitude alone (1 + 0.1 ln 4) changes every attention score: far from the same logits.
  EXPECT_GT(worst_row_nmse(with_yarn, without, plain->hparams().n_vocab), 1e-8);

  const fs::path hf = dir.path() / "hf";
  ASSERT_TRUE(hf_export(gguf_path, hf.string(), {}).ok());
  auto config = nlohmann::json::parse(testing::read_file_text((hf / "config.json").string()));
  config["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}};
  std::ofstream(hf / "config.json") << config.dump(2);
  auto imported = model::load(hf.string(), {});
  const rope_params& ip = imported->hparams().rope;
  EXPECT_EQ(ip.freq_scale, rp.freq_scale);
  EXPECT_EQ(ip.ext_factor, rp.ext_factor);
  EXPECT_EQ(ip.n_ctx_orig, rp.n_ctx_orig);
  const std::vector<float> got = logits_of(*imported, prompts);
  ASSERT_EQ(got.size(), with_yarn.size());
  EXPECT_EQ(std::memcmp(got.data(), with_yarn.data(), got.size() * 4), 0);

  // transformers 5's form: rope_theta and the scaling in rope_parameters.
  config["rope_parameters"] = config["rope_scaling"];
  config["rope_parameters"]["rope_theta"] = config["rope_theta"];
  config.erase("rope_scaling");
  config.erase("rope_theta");
  std::ofstream(hf / "config.json") << config.dump(2);
  auto v5 = model::load(hf.string(), {});
  EXPECT_EQ(v5->hparams().rope.freq_base, plain->hparams().rope.freq_base);
  EXPECT_EQ(v5->hparams().rope.ext_factor, 1.0f);
  const std::vector<float> got_v5 = logits_of(*v5, prompts);
  ASSERT_EQ(got_v5.size(), with_yarn.size());
  EXPECT_EQ(std::memcmp(got_v5.data(), with_yarn.data(), got_v5.size() * 4), 0);

  // And back: the yarn GGUF converts to a config.json that reads back as the same rope.
  const fs::path again = dir.path() / "again";
  auto r = hf_export(yarn_path, again.string(), {});
  ASSERT_TRUE(r.ok()) << r.message();
  auto reread = model::load(again.string(), {});
  EXPECT_EQ(reread->hparams().rope.ext_factor, 1.0f);
  EXPECT_EQ(reread->hparams().rope.n_ctx_orig, 1024);
  EXPECT_EQ(reread->hparams().rope.freq_scale, 0.25f);
}

// Gemma 3's multimodal checkpoint layout (Gemma3ForConditionalGeneration: text_config, tensors
// under language_model.model., a vision tower) loads as its text model, bit for bit.
TEST(hf_route_rope, gemma3_conditional_generation_loads_its_text_model) {
  temp_dir dir;
  exported_reference e;
  ASSERT_NO_FATAL_FAILURE(export_with_reference("synthetic2/synthetic-gemma3-a.f32.gguf", dir, e));
  const std::vector<uint8_t> vision(64 * 4, 0);
  bool vision_added = false;
  auto under_language_model = [&](const safetensors_tensor& t, safetensors_writer& w) {
    ASSERT_TRUE(t.name.starts_with("model."));
    w.add_tensor("language_model." + t.name, *t.type, t.shape, {t.data, t.n_bytes});
    // A vision tower's tensor beside the embedding.
    if (t.name == "model.embed_tokens.weight") {
      w.add_tensor("vision_tower.vision_model.embeddings.patch_embedding.weight", tensor_type::f32,
                   {64}, vision);
      vision_added = true;
    }
  };
  ASSERT_EQ(e.reference->hparams().n_head, 2);
  ASSERT_NO_FATAL_FAILURE(rewrite_export(dir, e, under_language_model, [](nlohmann::json text) {
    text.erase("architectures");
    text.erase("num_attention_heads");  // left to Gemma3TextConfig's default, as 4B's config does
    text["num_attention_heads"] = 2;    // ... but this model is not 4B
    return nlohmann::json{{"architectures", {"Gemma3ForConditionalGeneration"}},
                          {"model_type", "gemma3"},
                          {"text_config", text},
                          {"vision_config", {{"model_type", "siglip_vision_model"}}}};
  }));
  ASSERT_TRUE(vision_added);

  auto m = model::load(dir.path().string(), {});
  EXPECT_EQ(m->hparams().arch, "gemma3");
  expect_same_weights(e.reference->file(), m->file());
  const std::vector<float> got = logits_of(*m, e.prompts);
  ASSERT_EQ(got.size(), e.want.size());
  EXPECT_EQ(std::memcmp(got.data(), e.want.data(), got.size() * 4), 0);
}

// --- a broken directory ---------------------------------------------------------------------

// stories260K as a model directory, for tests that then break one thing in it.
class hf_route_errors : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::testdata_path("models/stories260K.gguf");
    ASSERT_FALSE(path.empty());
    auto r = hf_export(path, dir_.path().string(), {.n_shards = 3});
    ASSERT_TRUE(r.ok()) << r.message();
  }

  // load_error() after config.json's `key` is set to `value`.
  std::string load_error_with(const std::string& key, const nlohmann::json& value) {
    auto config = read_json("config.json");
    config[key] = value;
    write_json("config.json", config);
    return load_error();
  }

  // The message model::load fails with (the test fails if it loads).
  std::string load_error() {
    try {
      model::load(dir_.path().string(), {});
    } catch (const std::exception& e) {
      return e.what();
    }
    ADD_FAILURE() << "the model loaded";
    return "";
  }

  nlohmann::json read_json(const std::string& name) {
    return nlohmann::json::parse(testing::read_file_text((dir_.path() / name).string()));
  }
  void write_json(const std::string& name, const nlohmann::json& j) {
    std::ofstream(dir_.path() / name) << j.dump(2);
  }

  // Rewrites a shard, letting `edit` drop (return false) or change each tensor.
  template <typename F>
  void rewrite_shard(const std::string& name, F edit) {
    const fs::path path = dir_.path() / name;
    const std::vector<uint8_t> bytes = testing::read_file_bytes(path.string());
    auto file = safetensors_file::parse(bytes);
    ASSERT_TRUE(file.ok()) << file.message();
    safetensors_writer w;
    for (const auto& t : file->tensors()) {
      std::vector<int64_t> shape = t.shape;
      if (!edit(t.name, shape)) continue;
      w.add_tensor(t.name, *t.type, shape, {t.data, t.n_bytes});
    }
    ASSERT_TRUE(w.write_file(path.string()).ok());
  }

  // The shard the index puts a tensor in.
  std::string shard_of(const std::string& tensor) {
    return read_json("model.safetensors.index.json")["weight_map"][tensor].get<std::string>();
  }

  temp_dir dir_;
};

TEST_F(hf_route_errors, directory_loads_before_it_is_broken) {
  EXPECT_NO_THROW(model::load(dir_.path().string(), {}));
}

TEST_F(hf_route_errors, missing_config_json) {
  fs::remove(dir_.path() / "config.json");
  EXPECT_NE(load_error().find("config.json is missing"), std::string::npos) << load_error();
}

TEST_F(hf_route_errors, unknown_model_type_is_named) {
  const std::string msg = load_error_with("model_type", "mamba");
  EXPECT_NE(msg.find("model_type 'mamba' is not supported"), std::string::npos) << msg;
}

TEST_F(hf_route_errors, truncated_safetensors_file) {
  const std::string shard = shard_of("model.norm.weight");
  const fs::path path = dir_.path() / shard;
  fs::resize_file(path, fs::file_size(path) - 100);
  const std::string msg = load_error();
  EXPECT_NE(msg.find(shard), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated file?"), std::string::npos) << msg;
}

TEST_F(hf_route_errors, tensor_listed_in_the_index_but_missing_from_its_shard) {
  const std::string tensor = "model.layers.1.mlp.up_proj.weight";
  const std::string shard = shard_of(tensor);
  rewrite_shard(shard,
                [&](const std::string& name, std::vector<int64_t>&) { return name != tensor; });
  const std::string msg = load_error();
  EXPECT_NE(msg.find("tensor '" + tensor + "' is missing from " + shard), std::string::npos) << msg;
}

TEST_F(hf_route_errors, tensor_missing_from_every_shard) {
  const std::string tensor = "model.layers.4.self_attn.k_proj.weight";
  rewrite_shard(shard_of(tensor),
                [&](const std::string& name, std::vector<int64_t>&) { return name != tensor; });
  auto index = read_json("model.safetensors.index.json");
  index["weight_map"].erase(tensor);
  write_json("model.safetensors.index.json", index);
  const std::string msg = load_error();
  EXPECT_NE(msg.find("tensor '" + tensor + "' is missing (expected shape [32, 64])"),
            std::string::npos)
      << msg;
}

TEST_F(hf_route_errors, shape_mismatch_names_the_tensor) {
  const std::string tensor = "model.layers.0.self_attn.q_proj.weight";
  rewrite_shard(shard_of(tensor), [&](const std::string& name, std::vector<int64_t>& shape) {
    if (name == tensor) shape = {32, 128};  // the same bytes as [64, 64]
    return true;
  });
  const std::string msg = load_error();
  EXPECT_NE(msg.find("tensor '" + tensor + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has shape [32, 128], expected [64, 64]"), std::string::npos) << msg;
}

TEST_F(hf_route_errors, config_value_of_the_wrong_kind_is_named) {
  const std::string msg = load_error_with("num_attention_heads", "eight");
  EXPECT_NE(msg.find("num_attention_heads"), std::string::npos) << msg;
}

TEST_F(hf_route_errors, unsupported_rope_scaling_is_named) {
  const std::string msg =
      load_error_with("rope_scaling", nlohmann::json{{"rope_type", "dynamic"}, {"factor", 4.0}});
  EXPECT_NE(msg.find("rope_scaling type 'dynamic' is not supported (linear, llama3, yarn)"),
            std::string::npos)
      << msg;
}

TEST_F(hf_route_errors, yarn_without_its_original_context_is_named) {
  const std::string msg =
      load_error_with("rope_scaling", nlohmann::json{{"rope_type", "yarn"}, {"factor", 4.0}});
  EXPECT_NE(msg.find("rope_scaling yarn needs original_max_position_embeddings"), std::string::npos)
      << msg;
}

// A tokenizer.json goes through engine/import/hf-tokenizer.h: Qwen3's 151k-token vocabulary cannot
// be the one of this 512-row model, and the import says so with both sizes.
TEST_F(hf_route_errors, tokenizer_json_is_read_when_there_is_no_tokenizer_model) {
  const std::string qwen3 = testing::testdata_path("tokenizers/qwen3/tokenizer.json");
  ASSERT_FALSE(qwen3.empty());
  fs::remove(dir_.path() / "tokenizer.model");
  fs::remove(dir_.path() / "tokenizer_config.json");
  fs::copy_file(qwen3, dir_.path() / "tokenizer.json");
  const std::string msg = load_error();
  EXPECT_NE(msg.find("config.json: vocab_size 512 is smaller than the tokenizer's 151"),
            std::string::npos)
      << msg;
}

TEST_F(hf_route_errors, missing_tokenizer) {
  fs::remove(dir_.path() / "tokenizer.model");
  const std::string msg = load_error();
  EXPECT_NE(msg.find("no tokenizer.model or tokenizer.json"), std::string::npos) << msg;
}

}  // namespace
}  // namespace hearth
