// Constrained generation end to end on the random-weight synthetic models: whatever the weights
// say, a JSON Schema's grammar gives a document that parses and validates, and json_object mode
// an object.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/grammar/grammar-matcher.h"
#include "engine/grammar/json-schema.h"
#include "engine/model.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

constexpr const char* schema = R"({"type": "object", "additionalProperties": false,
  "properties": {"city": {"type": "string", "maxLength": 8}, "rank": {"type": "integer",
  "minimum": 1, "maximum": 20}, "open": {"type": "boolean"}, "kind": {"enum": ["a", "b", 3]},
  "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 2}},
  "required": ["city", "rank", "open", "kind", "scores"]})";

void expect_valid(const nlohmann::json& d, const std::string& text) {
  ASSERT_TRUE(d.is_object()) << text;
  EXPECT_EQ(d.size(), 5u) << text;
  ASSERT_TRUE(d["city"].is_string()) << text;
  ASSERT_TRUE(d["rank"].is_number_integer()) << text;
  EXPECT_GE(d["rank"].get<int>(), 1) << text;
  EXPECT_LE(d["rank"].get<int>(), 20) << text;
  EXPECT_TRUE(d["open"].is_boolean()) << text;
  EXPECT_TRUE(d["kind"] == "a" || d["kind"] == "b" || d["kind"] == 3) << text;
  ASSERT_TRUE(d["scores"].is_array()) << text;
  EXPECT_LE(d["scores"].size(), 2u) << text;
  for (const auto& x : d["scores"]) EXPECT_TRUE(x.is_number()) << text;
}

// Generations under `g`, one greedy (it does not depend on the seed) and one sampled at
// temperature 1 for each of seeds 1 to 3: each must end by itself, within `max_tokens`, with a
// JSON document, which `check` then looks at (with the text, for its messages). `finished` is set
// at the end: a failed generation, or text that is not JSON, stops it before (its own ASSERT).
void expect_documents(context& ctx, std::span<const int32_t> prompt,
                      const std::shared_ptr<const grammar>& g,
                      const std::shared_ptr<const grammar_vocab>& gv, int32_t max_tokens,
                      const std::function<void(const nlohmann::json&, const std::string&)>& check,
                      bool& finished) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    for (float temp : {0.0f, 1.0f}) {
      sampler_params p;
      p.temperature = temp;
      p.seed = seed;
      sampler smp(p, ctx.n_vocab());
      smp.set_grammar(g, gv);
      auto out = generate(ctx, prompt, smp, {.max_tokens = max_tokens}, nullptr);
      ASSERT_TRUE(out.ok()) << out.message();
      EXPECT_EQ(out->reason, stop_reason::end_of_generation) << out->text;
      const auto d = nlohmann::json::parse(out->text, nullptr, false);
      ASSERT_FALSE(d.is_discarded()) << out->text;
      check(d, out->text);
      if (temp == 0) break;
    }
  }
  finished = true;
}

class constrained : public ::testing::TestWithParam<const char*> {};

TEST_P(constrained, random_weights_still_give_a_valid_document) {
  const std::string path = testing::model_path(std::string("models/") + GetParam());
  ASSERT_FALSE(path.empty());
  auto m = model::load(path, {.n_threads = 2});
  auto gv = grammar_vocab::make(m->vocab());
  auto gbnf = json_schema_to_gbnf(schema);
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = grammar_from_gbnf(*gbnf);
  ASSERT_TRUE(g.ok()) << g.message();
  auto obj = grammar_from_gbnf(json_object_gbnf());
  ASSERT_TRUE(obj.ok());
  context ctx(*m, {.n_ctx = 1024});
  const auto prompt = m->vocab().tokenize("Answer in JSON:", true, false);
  bool finished = false;
  expect_documents(ctx, prompt, *g, gv, 900, expect_valid, finished);
  if (!finished) return;
  // json_object: a prefix of an object whatever the length, an object when it ends.
  sampler_params p;
  p.seed = 9;
  sampler smp(p, ctx.n_vocab());
  smp.set_grammar(*obj, gv);
  auto out = generate(ctx, prompt, smp, {.max_tokens = 64}, nullptr);
  ASSERT_TRUE(out.ok());
  grammar_matcher check(*obj, gv);
  EXPECT_TRUE(check.accept_bytes(out->text)) << out->text;
  if (out->reason == stop_reason::end_of_generation) {
    EXPECT_TRUE(nlohmann::json::parse(out->text, nullptr, false).is_object()) << out->text;
  }
}

// Unbounded strings, which a random-weight model rarely closes: the sequence tells the sampler
// the tokens left, and the document still ends complete within max_tokens.
TEST_P(constrained, a_budget_ends_unbounded_strings_within_max_tokens) {
  const std::string path = testing::model_path(std::string("models/") + GetParam());
  ASSERT_FALSE(path.empty());
  auto m = model::load(path, {.n_threads = 2});
  auto gv = grammar_vocab::make(m->vocab());
  auto gbnf = json_schema_to_gbnf(R"({"type": "object", "properties": {"city": {"type": "string"},
    "note": {"type": "string"}, "n": {"type": "integer"}}, "required": ["city", "note", "n"],
    "additionalProperties": false})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = grammar_from_gbnf(*gbnf);
  ASSERT_TRUE(g.ok()) << g.message();
  context ctx(*m, {.n_ctx = 512});
  const auto prompt = m->vocab().tokenize("Answer in JSON:", true, false);
  bool finished = false;
  expect_documents(
      ctx, prompt, *g, gv, 48,
      [](const nlohmann::json& d, const std::string& text) {
        EXPECT_TRUE(d["city"].is_string() && d["note"].is_string() && d["n"].is_number_integer())
            << text;
      },
      finished);
}

INSTANTIATE_TEST_SUITE_P(synthetic, constrained,
                         ::testing::Values("synthetic/synthetic-qwen2-a.q8_0.gguf",
                                           "synthetic/synthetic-llama-a.q8_0.gguf",
                                           "synthetic/synthetic-gemma2-a.q8_0.gguf",
                                           "synthetic2/synthetic-qwen3-a.f32.gguf",
                                           "stories260K.gguf"));

}  // namespace
}  // namespace hearth
