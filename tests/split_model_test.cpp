// A model split into several GGUF files (gguf-split's NAME-00001-of-0000N.gguf) runs as the whole
// file does: stories260K in 2 and 3 parts gives the same logits bit for bit and the same greedy
// tokens through the engine, and `hearth convert --split-max-tensors` then `hearth run --temp 0`
// the same text; a part missing or opened instead of the first is a clear error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/model-file.h"
#include "engine/model.h"
#include "tests/conformance.h"
#include "tests/hearth-cli.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using testing::hearth;
using testing::quote;

class split_model : public ::testing::Test {
 protected:
  void SetUp() override {
    stories_ = testing::testdata_path("models/stories260K.gguf");
    const std::string ref = testing::testdata_path("reference/stories260K.json");
    ASSERT_FALSE(stories_.empty() || ref.empty());
    reference_ = nlohmann::json::parse(testing::read_file_text(ref));
    dir_ = fs::path(::testing::TempDir()) /
           ("hearth_split_model_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // stories260K in `n` parts at `prefix`; the first part's path.
  static std::string split(const fs::path& prefix, uint32_t n) {
    const auto parts = testing::write_stories_split(prefix.string(), n);
    return parts.empty() ? std::string() : parts.front();
  }

  // Every prompt position's logits, then 64 greedy tokens, for each reference prompt.
  struct run_result {
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<int32_t>> tokens;
  };
  run_result run(model& m) {
    run_result out;
    for (const auto& c : reference_["cases"]) {
      const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
      context ctx(m, {.n_ctx = 128});
      std::vector<batch_token> batch;
      for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({prompt[i], int32_t(i), 0, true});
      EXPECT_TRUE(ctx.decode(batch).ok());
      out.logits.emplace_back(ctx.logits(0),
                              ctx.logits(0) + size_t(ctx.n_logits()) * size_t(ctx.n_vocab()));
      ctx.seq_clear(0);
      sampler smp({.temperature = 0}, ctx.n_vocab());
      auto g = generate(ctx, prompt, smp, {.max_tokens = 64}, nullptr);
      EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.message());
      out.tokens.push_back(g.ok() ? g->tokens : std::vector<int32_t>{});
      // And the reference engine's own continuation.
      context fresh(m, {.n_ctx = 128});
      testing::expect_greedy_reference(fresh, prompt, c);
    }
    return out;
  }

  std::string stories_;
  nlohmann::json reference_;
  fs::path dir_;
};

TEST_F(split_model, two_and_three_parts_give_the_whole_files_logits_and_tokens) {
  const auto whole_model = model::load(stories_, {});
  const run_result whole = run(*whole_model);
  ASSERT_EQ(whole.tokens.size(), reference_["cases"].size());
  for (uint32_t n : {2u, 3u}) {
    SCOPED_TRACE(std::to_string(n) + " parts");
    const std::string first = split(dir_ / ("stories-" + std::to_string(n)) / "stories", n);
    ASSERT_FALSE(first.empty());
    auto f = model_file::open(first);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->gguf_paths.size(), n);
    const auto m = model::load(std::move(f).value(), {});
    const run_result got = run(*m);
    ASSERT_EQ(got.logits.size(), whole.logits.size());
    for (size_t c = 0; c < whole.logits.size(); ++c) {
      EXPECT_EQ(got.logits[c], whole.logits[c]) << "case " << c;  // bit for bit
      EXPECT_EQ(got.tokens[c], whole.tokens[c]) << "case " << c;
    }
  }
}

TEST_F(split_model, a_folder_holding_the_parts_loads_as_the_model) {
  const std::string first = split(dir_ / "view" / "stories", 2);
  ASSERT_FALSE(first.empty());
  auto f = model_file::open((dir_ / "view").string());
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->gguf_paths.size(), 2u);
  EXPECT_FALSE(f->hf_dir);
  const auto m = model::load(std::move(f).value(), {});
  const auto& c = reference_["cases"][0];
  context ctx(*m, {.n_ctx = 128});
  testing::expect_greedy_reference(ctx, c["prompt_tokens"].get<std::vector<int32_t>>(), c);
}

TEST_F(split_model, convert_split_max_tensors_then_run_gives_the_whole_files_text) {
  const std::string prefix = (dir_ / "cli" / "stories").string();
  fs::create_directories(dir_ / "cli");
  auto r = hearth("convert " + quote(stories_) + " " + quote(prefix) + " --split-max-tensors 20");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // stories260K has 48 tensors: 20 + 20 + 8.
  const std::string first = prefix + "-00001-of-00003.gguf";
  EXPECT_EQ(r.out,
            first + "\n" + prefix + "-00002-of-00003.gguf\n" + prefix + "-00003-of-00003.gguf\n");
  for (const auto& c : reference_["cases"]) {
    const std::string args = " -p " + quote(c["prompt"]) + " -n 64 --temp 0";
    auto whole = hearth("run -m " + quote(stories_) + args);
    ASSERT_EQ(whole.exit_code, 0) << whole.err;
    auto parts = hearth("run -m " + quote(first) + args);
    ASSERT_EQ(parts.exit_code, 0) << parts.err;
    EXPECT_EQ(parts.out, whole.out);
    EXPECT_EQ(parts.out, c["greedy_text"].get<std::string>() + "\n");
  }

  // A later part, or a split with a part gone: the error says which file and what to do.
  const std::string second = prefix + "-00002-of-00003.gguf";
  r = hearth("run -m " + quote(second) + " -p Once -n 4 --temp 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is part 2 of 3 of a split model: open " + first), std::string::npos)
      << r.err;
  fs::remove(prefix + "-00003-of-00003.gguf");
  r = hearth("run -m " + quote(first) + " -p Once -n 4 --temp 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(prefix + "-00003-of-00003.gguf, is missing"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hearth
