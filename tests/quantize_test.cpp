// `hearth quantize` against llama-quantize (build 4748, no importance matrix): every synthetic
// model's F32 file quantized to each file type the test data has must give the test data's file
// byte for byte (metadata, tensor order, types and blocks). Gemma 2's quantized files were made
// from an F32 file the test data does not hold; from its F16 file the types must match and every
// tensor must be as close to the F16 values as llama-quantize's is. Then the command as a user
// runs it: the output runs; rows that 256 does not divide fall back to Q5_0/Q5_1/Q8_0 and the
// model still computes what its dequantized copy does; Hugging Face folders are read; errors are
// one line with no file left behind.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include "engine/io/gguf-writer.h"
#include "engine/io/gguf.h"
#include "engine/io/type-traits.h"
#include "tests/hearth-cli.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using testing::hearth;
using testing::process_result;
using testing::quote;

// Every file the tests write goes in one folder per process (`quantize` and `quantize_portable` run
// this binary at the same time under ctest -j), removed when the tests end: left behind, each run
// added about 10 MB to the temporary folder, and a few thousand runs filled a disk.
std::string temp_dir() {
  return ::testing::TempDir() + "hearth_quantize_" + std::to_string(getpid());
}

std::string temp_path(const std::string& name) {
  static const bool made = std::filesystem::create_directories(temp_dir()) || true;
  (void)made;
  return temp_dir() + "/" + name;
}

class remove_temp_dir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const k_remove_temp_dir =
    ::testing::AddGlobalTestEnvironment(new remove_temp_dir);

std::string synthetic(const std::string& family, const std::string& type) {
  return testing::testdata_path("models/synthetic/synthetic-" + family + "-a." + type + ".gguf");
}

// Quantizes `in` to `type` at `out`; fails the test when the command does.
void quantize(const std::string& in, const std::string& out, const std::string& type) {
  const auto r = hearth("quantize " + quote(in) + " " + quote(out) + " " + type);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(out), std::string::npos) << r.out;  // the summary line names the file
}

std::vector<float> to_f32(const gguf_tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements()));
  tensor_type_traits_of(t.type).to_float(t.data, v.data(), t.n_elements());
  return v;
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += std::pow(double(got[i]) - want[i], 2);
    norm += std::pow(double(want[i]), 2);
  }
  return norm > 0 ? err / norm : err;
}

// What differs between two GGUF files, tensor by tensor ("" when every tensor is equal).
std::string tensor_differences(const gguf_file& got, const gguf_file& want) {
  std::ostringstream out;
  for (const auto& w : want.tensors()) {
    const gguf_tensor* g = got.find_tensor(w.name);
    if (!g) {
      out << w.name << " missing; ";
    } else if (g->type != w.type || g->shape_string() != w.shape_string()) {
      out << w.name << " is " << tensor_type_name(g->type) << " " << g->shape_string()
          << ", llama-quantize wrote " << tensor_type_name(w.type) << " " << w.shape_string()
          << "; ";
    } else if (std::memcmp(g->data, w.data, w.n_bytes) != 0) {
      size_t n = 0;
      for (uint64_t i = 0; i < w.n_bytes; ++i) n += g->data[i] != w.data[i];
      out << w.name << " (" << tensor_type_name(w.type) << ") differs in " << n << " of "
          << w.n_bytes << " bytes; ";
    }
  }
  if (got.tensors().size() != want.tensors().size()) out << "tensor counts differ; ";
  return out.str();
}

// --- byte equality with llama-quantize --------------------------------------------------

struct exact_case {
  std::string family;
  std::string type;
};

void PrintTo(const exact_case& c, std::ostream* os) {
  *os << c.family << " " << c.type;
}

class quantize_like_llama_cpp : public ::testing::TestWithParam<exact_case> {};

TEST_P(quantize_like_llama_cpp, the_f32_file_quantizes_to_the_test_datas_file_byte_for_byte) {
  const auto& [family, type] = GetParam();
  const std::string src = synthetic(family, "f32"), want_path = synthetic(family, type);
  ASSERT_FALSE(src.empty() || want_path.empty());
  const std::string out = temp_path(family + "." + type + ".gguf");
  quantize(src, out, type);
  const auto got_bytes = testing::read_file_bytes(out);
  const auto want_bytes = testing::read_file_bytes(want_path);
  if (got_bytes == want_bytes) return;
  // Say which tensors differ (or that only metadata or order does).
  auto got = gguf_file::open(out);
  auto want = gguf_file::open(want_path);
  ASSERT_TRUE(got && want);
  ADD_FAILURE() << out << " differs from " << want_path << ": " << tensor_differences(*got, *want)
                << "(sizes " << got_bytes.size() << " and " << want_bytes.size() << ")";
}

std::vector<exact_case> exact_cases() {
  std::vector<exact_case> out;
  for (const char* family : {"llama", "qwen2", "phi3", "gemma"})
    for (const char* type : {"q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k", "f16", "bf16"})
      out.push_back({family, type});
  return out;
}

INSTANTIATE_TEST_SUITE_P(synthetic, quantize_like_llama_cpp, ::testing::ValuesIn(exact_cases()),
                         [](const auto& param_info) {
                           return param_info.param.family + "_" + param_info.param.type;
                         });

// The 2025–26 families (../shared/testdata/models/synthetic2): the reference engine's files of
// every type are held only as SHA256SUMS; hearth quantize of the F32 source must give each of
// them byte for byte. The files are left in the build tree's testdata folder, where the
// conformance tests read them (this suite is also the synthetic2_models fixture).
std::map<std::string, std::string> synthetic2_sums() {
  std::map<std::string, std::string> sums;
  std::istringstream in(
      testing::read_file_text(testing::testdata_path("models/synthetic2/SHA256SUMS")));
  std::string sum, name;
  while (in >> sum >> name) sums[name] = sum;
  return sums;
}

std::string sha256_of(const std::string& path) {
  const auto r = testing::run_command("sha256sum " + quote(path));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out.substr(0, r.out.find(' '));
}

class synthetic2 : public ::testing::TestWithParam<exact_case> {};

TEST_P(synthetic2, hearth_quantize_writes_the_reference_file_byte_for_byte) {
  const auto& [family, type] = GetParam();
  const std::string name = "synthetic-" + family + "-a." + type + ".gguf";
  const auto sums = synthetic2_sums();
  ASSERT_TRUE(sums.count(name)) << name << " is not in SHA256SUMS";
  const std::string src =
      testing::testdata_path("models/synthetic2/synthetic-" + family + "-a.f32.gguf");
  ASSERT_FALSE(src.empty());
  if (type == "f32") {  // the source itself (the reference's converter wrote it)
    EXPECT_EQ(sha256_of(src), sums.at(name));
    return;
  }
  const std::string out = temp_path("s2." + name);
  quantize(src, out, type);
  EXPECT_EQ(sha256_of(out), sums.at(name)) << out << " differs from the reference's " << name;
  // Published for the conformance tests (a rename: tests running at once never see half a file).
  const std::filesystem::path dir = testing::generated_testdata_root() + "/models/synthetic2";
  std::filesystem::create_directories(dir);
  std::filesystem::rename(out, dir / name);
}

std::vector<exact_case> synthetic2_cases() {
  std::vector<exact_case> out;
  for (const char* family : {"qwen3", "qwen3moe", "mixtral", "gemma3"})
    for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"})
      out.push_back({family, type});
  return out;
}

INSTANTIATE_TEST_SUITE_P(synthetic2, synthetic2, ::testing::ValuesIn(synthetic2_cases()),
                         [](const auto& param_info) {
                           return param_info.param.family + "_" + param_info.param.type;
                         });

// Gemma 2's quantized files come from an F32 file that is not in the test data, and F16 values
// quantize differently from the F32 values they round (the F16 file of every other family gives
// different blocks than its F32 file, while the F32 file matches exactly). So: the same type for
// every tensor, and each tensor no further from the F16 values than llama-quantize's tensor,
// which quantized values within F16 rounding of them.
TEST(quantize_gemma2, types_match_and_tensors_are_as_close_as_llama_cpps) {
  const std::string src_path = synthetic("gemma2", "f16");
  ASSERT_FALSE(src_path.empty());
  auto src = gguf_file::open(src_path);
  ASSERT_TRUE(src) << src.message();
  for (const char* type : {"q8_0", "q4_k_m", "q6_k"}) {
    const std::string want_path = synthetic("gemma2", type);
    ASSERT_FALSE(want_path.empty());
    const std::string out = temp_path(std::string("gemma2.") + type + ".gguf");
    quantize(src_path, out, type);
    auto got = gguf_file::open(out);
    auto want = gguf_file::open(want_path);
    ASSERT_TRUE(got && want);
    ASSERT_EQ(got->tensors().size(), want->tensors().size());
    for (const auto& w : want->tensors()) {
      const gguf_tensor* g = got->find_tensor(w.name);
      ASSERT_NE(g, nullptr) << w.name;
      ASSERT_EQ(g->type, w.type) << type << " " << w.name;
      if (w.type == tensor_type::f32) {
        EXPECT_EQ(std::memcmp(g->data, w.data, w.n_bytes), 0) << w.name;
        continue;
      }
      const auto x = to_f32(*src->find_tensor(w.name));
      const double ours = nmse(to_f32(*g), x), theirs = nmse(to_f32(w), x);
      EXPECT_LE(ours, theirs * 1.01) << type << " " << w.name;
      EXPECT_GT(ours, 0) << type << " " << w.name;
    }
  }
}

// A Hugging Face folder (hearth convert of the F32 file) quantizes to the same tensors: the dense
// families and those of synthetic2 (Qwen3, Qwen3-MoE with its experts stacked back from one HF
// tensor per expert, Gemma 3, Mixtral).
TEST(quantize_cli, a_hugging_face_folder_gives_the_same_tensors) {
  const std::pair<const char*, const char*> families[] = {{"synthetic", "qwen2"},
                                                          {"synthetic2", "qwen3"},
                                                          {"synthetic2", "qwen3moe"},
                                                          {"synthetic2", "gemma3"},
                                                          {"synthetic2", "mixtral"}};
  for (const auto& [folder, family] : families) {
    SCOPED_TRACE(family);
    const std::string base = "models/" + std::string(folder) + "/synthetic-" + family + "-a.";
    const std::string src = testing::testdata_path(base + "f32.gguf");
    const std::string want_path = testing::testdata_path(base + "q4_k_m.gguf");
    ASSERT_FALSE(src.empty() || want_path.empty());
    const std::string dir = temp_path(std::string(family) + "-hf");
    std::filesystem::remove_all(dir);
    auto r = hearth("convert " + quote(src) + " " + quote(dir));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string out = temp_path(std::string(family) + "-hf.q4_k_m.gguf");
    quantize(dir, out, "q4_k_m");
    auto got = gguf_file::open(out);
    auto want = gguf_file::open(want_path);
    ASSERT_TRUE(got && want);
    EXPECT_EQ(tensor_differences(*got, *want), "");
    std::filesystem::remove_all(dir);
  }
}

// --- the command --------------------------------------------------------------------------

TEST(quantize_cli, the_output_runs_as_the_test_datas_file_does) {
  const std::string src = synthetic("llama", "f32"), ref = synthetic("llama", "q4_k_m");
  ASSERT_FALSE(src.empty() || ref.empty());
  const std::string out = temp_path("run.q4_k_m.gguf");
  const auto q = hearth("quantize " + quote(src) + " " + quote(out) + " Q4_K_M --threads 2 -v");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  // --verbose: one line per tensor, then the summary.
  auto f = gguf_file::open(out);
  ASSERT_TRUE(f) << f.message();
  EXPECT_EQ(size_t(std::count(q.out.begin(), q.out.end(), '\n')), f->tensors().size() + 1) << q.out;
  EXPECT_NE(q.out.find("blk.1.attn_v.weight"), std::string::npos);
  EXPECT_NE(q.out.find("f32 -> q6_k"), std::string::npos);
  const std::string args = " -p 'Once upon a time' -n 12 --temp 0";
  const auto ours = hearth("run -m " + quote(out) + args);
  const auto theirs = hearth("run -m " + quote(ref) + args);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  ASSERT_EQ(theirs.exit_code, 0) << theirs.err;
  EXPECT_FALSE(ours.out.empty());
  EXPECT_EQ(ours.out, theirs.out);
}

// A Llama-family model 288 wide (not a multiple of 256, as Qwen2.5-0.5B's 896): F32 weights
// with the synthetic llama's vocabulary and metadata.
void write_288_wide_model(const std::string& path) {
  auto base = gguf_file::open(synthetic("llama", "f32"));
  ASSERT_TRUE(base) << base.message();
  gguf_writer w;
  w.copy_metadata_from(*base);
  const int64_t n_embd = 288, n_ff = 768, n_vocab = 512, n_layer = 2, n_head = 4, n_kv = 2;
  const int64_t head = n_embd / n_head;
  w.set_u32("llama.embedding_length", n_embd);
  w.set_u32("llama.feed_forward_length", n_ff);
  w.set_u32("llama.block_count", n_layer);
  w.set_u32("llama.attention.head_count", n_head);
  w.set_u32("llama.attention.head_count_kv", n_kv);
  w.set_u32("llama.rope.dimension_count", head);
  std::mt19937 rng(42);
  auto add = [&](const std::string& name, std::vector<int64_t> ne, float sd, float mean = 0) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::normal_distribution<float> dist(mean, sd);
    std::vector<uint8_t> bytes(size_t(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = dist(rng);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    w.add_tensor(name, tensor_type::f32, std::move(ne), std::move(bytes));
  };
  add("token_embd.weight", {n_embd, n_vocab}, 1.0f);
  add("output_norm.weight", {n_embd}, 0.01f, 1.0f);
  add("output.weight", {n_embd, n_vocab}, 0.06f);
  for (int i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", {n_embd}, 0.01f, 1.0f);
    add(b + "attn_q.weight", {n_embd, n_embd}, 0.06f);
    add(b + "attn_k.weight", {n_embd, head * n_kv}, 0.06f);
    add(b + "attn_v.weight", {n_embd, head * n_kv}, 0.06f);
    add(b + "attn_output.weight", {n_embd, n_embd}, 0.06f);
    add(b + "ffn_norm.weight", {n_embd}, 0.01f, 1.0f);
    add(b + "ffn_gate.weight", {n_embd, n_ff}, 0.06f);
    add(b + "ffn_up.weight", {n_embd, n_ff}, 0.06f);
    add(b + "ffn_down.weight", {n_ff, n_embd}, 0.04f);
  }
  auto r = w.write_file(path);
  ASSERT_TRUE(r) << r.message();
}

TEST(quantize_cli, rows_256_does_not_divide_fall_back_and_still_compute_the_model) {
  const std::string f32 = temp_path("w288.f32.gguf");
  ASSERT_NO_FATAL_FAILURE(write_288_wide_model(f32));
  for (const char* type : {"q4_k_m", "q5_k_m"}) {
    const std::string q = temp_path(std::string("w288.") + type + ".gguf");
    quantize(f32, q, type);
    auto f = gguf_file::open(q);
    ASSERT_TRUE(f) << f.message();
    std::map<std::string, std::string> types;
    for (const auto& t : f->tensors()) types[t.name] = std::string(tensor_type_name(t.type));
    const std::string fallback = std::string(type) == "q4_k_m" ? "q5_0" : "q5_1";
    EXPECT_EQ(types["blk.0.attn_q.weight"], fallback);
    EXPECT_EQ(types["blk.1.attn_v.weight"], "q8_0");    // Q6_K (more bits) -> Q8_0
    EXPECT_EQ(types["blk.1.ffn_down.weight"], "q6_k");  // 768 columns: no fallback
    EXPECT_EQ(types["output.weight"], "q8_0");
    // The quantized model against its own weights dequantized to F32 (hearth quantize to f32):
    // they differ only by the activation rounding inside the quantized dot products.
    const std::string back = temp_path(std::string("w288.") + type + ".f32.gguf");
    quantize(q, back, "f32");
    std::vector<std::vector<float>> logits;
    for (const std::string& m : {q, back}) {
      const std::string out = m + ".logits";
      const auto r =
          hearth("eval -m " + quote(m) + " --tokens 1,50,300,7,99,5 --logits-out " + quote(out));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      logits.push_back(testing::read_f32_file(out));
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    EXPECT_LE(nmse(logits[0], logits[1]), 1e-2) << type;
    // The Vulkan backend computes the fallback types too (Q5_0, Q5_1): asked for, the model runs
    // there, or, on a machine without a Vulkan device, on the CPU saying that none was found.
    const auto r = hearth("run -m " + quote(q) + " -p Hi -n 2 --temp 0 --backend vulkan");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const bool on_vulkan = r.err.find("| vulkan (") != std::string::npos;
    const bool no_device = r.err.find("running on the CPU") != std::string::npos &&
                           (r.err.find("device found") != std::string::npos ||
                            r.err.find("is not loaded") != std::string::npos);
    EXPECT_TRUE(on_vulkan || no_device) << r.err;
  }
}

TEST(quantize_cli, errors_are_one_line_and_leave_no_file) {
  const std::string src = synthetic("llama", "f32");
  ASSERT_FALSE(src.empty());
  auto one_line = [](const process_result& r) {
    return r.exit_code != 0 && r.out.empty() && std::count(r.err.begin(), r.err.end(), '\n') == 1;
  };

  const std::string out = temp_path("never.gguf");
  std::filesystem::remove(out);
  auto r = hearth("quantize " + quote(src) + " " + quote(out) + " q3_k_xl");
  EXPECT_TRUE(one_line(r)) << r.err;
  EXPECT_NE(r.err.find("unknown type 'q3_k_xl'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("q4_k_m"), std::string::npos) << r.err;  // the accepted names
  EXPECT_FALSE(std::filesystem::exists(out));

  r = hearth("quantize " + quote(temp_path("no-such-model.gguf")) + " " + quote(out) + " q8_0");
  EXPECT_TRUE(one_line(r)) << r.err;
  EXPECT_NE(r.err.find("no-such-model.gguf"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));

  const std::string missing_dir = temp_path("no-such-dir");
  std::filesystem::remove_all(missing_dir);
  const std::string nested = missing_dir + "/out.gguf";
  r = hearth("quantize " + quote(src) + " " + quote(nested) + " q8_0");
  EXPECT_TRUE(one_line(r)) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(missing_dir));
  EXPECT_FALSE(std::filesystem::exists(nested + ".tmp"));

  // A NaN in a weight: the tensor is named, and the half-written file is removed.
  gguf_writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  std::vector<float> values(512, 0.5f);
  values[300] = std::nanf("");
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  w.add_tensor("blk.0.attn_q.weight", tensor_type::f32, {256, 2}, std::move(bytes));
  const std::string nan_model = temp_path("nan.gguf");
  ASSERT_TRUE(w.write_file(nan_model));
  r = hearth("quantize " + quote(nan_model) + " " + quote(out) + " q8_0");
  EXPECT_TRUE(one_line(r)) << r.err;
  EXPECT_NE(r.err.find("'blk.0.attn_q.weight' has a non-finite value in row 1"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

}  // namespace
}  // namespace hearth
