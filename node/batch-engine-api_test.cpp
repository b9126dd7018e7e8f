// The batch engine's answers to issue 56's requests, on the real stories260K model (CPU): output
// events (content equal to the plain text of the same seed), n choices from one prompt decoded
// once (each choice what a job of one choice with its seed gives), and the context's sequence
// copy they rest on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "node/fake-job-sink.h"
#include "node/job-engine.h"
#include "schema/job-params.h"
#include "schema/output-events.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;
using testing::fake_job_sink;

// What a choice's events say: its content and reasoning text, its calls and its finish.
struct choice_events : wire::choice_output {
  int n_finish = 0;
};

// Public: the checks shared by tests (expect_choices_as_single_jobs) use its helpers.
class batch_engine_api_test : public ::testing::Test {
 public:
  static const hearth::model& stories() { return *model_; }
  static void SetUpTestSuite() {
    const std::string stories = hearth::testing::testdata_path("models/stories260K.gguf");
    if (stories.empty()) return;
    model_ = model::load(stories, {}).release();
    dir_ = new fs::path(fs::temp_directory_path() / "hearth_batch_engine_api_models");
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    fs::create_symlink(fs::absolute(stories), *dir_ / "stories.gguf");
    // The same weights carrying a tool-calling template (Qwen2.5's own): what `hearth convert
    // --chat-template` makes of a model.
    const std::string qwen_template =
        hearth::testing::testdata_path("chat-templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja");
    if (!qwen_template.empty()) {
      const std::string text = hearth::testing::read_file_text(qwen_template);
      fs::copy_file(hearth::testing::write_stories_variant(
                        "node_api_tools", {.metadata =
                                               [text](gguf_writer& w) {
                                                 w.set_string("tokenizer.chat_template", text);
                                               }}),
                    *dir_ / "stories-tools.gguf");
    }
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    delete model_;
  }
  void SetUp() override { ASSERT_TRUE(model_) << "stories260K test data missing"; }

  static batch_engine_config config(uint32_t slots, int32_t n_ctx_per_slot) {
    batch_engine_config c;
    c.models_dir = dir_->string();
    c.slots = slots;
    c.threads = 1;
    c.n_ctx_per_slot = n_ctx_per_slot;
    return c;
  }

  static wire::job_params sampled(int32_t max_tokens, uint64_t seed) {
    wire::job_params p;
    p.max_tokens = max_tokens;
    p.temperature = 0.9f;
    p.repeat_penalty = 1.1f;
    p.seed = seed;
    return p;
  }

  static wire::job_assign job(uint64_t id, const std::string& prompt, wire::job_params p,
                              const std::string& model_name = "stories") {
    wire::job_assign j;
    j.job_id = id;
    j.model = model_name;
    j.prompt = prompt;
    j.params = std::move(p);
    return j;
  }

  // The finished attempt's events by choice, checking what every events stream must hold: whole
  // lines, tokens with every text, one finish per choice and nothing after it.
  static std::vector<choice_events> events_of(const fake_job_sink& sink, uint64_t id) {
    const auto r = sink.record(id);
    EXPECT_TRUE(r.final && r.final->state == wire::job_state::completed)
        << "job " << id << ": " << (r.final ? r.final->error : "did not finish");
    EXPECT_TRUE(r.seq_ok && r.text_with_tokens && r.started_before_tokens) << "job " << id;
    if (r.final) {
      EXPECT_EQ(r.final->n_gen, r.n_tokens) << "job " << id;
    }
    auto events = wire::output_events_parse(r.text);
    EXPECT_TRUE(events.ok()) << (events.ok() ? "" : events.message());
    std::vector<choice_events> out;
    if (!events.ok()) return out;
    for (const auto& e : *events) {
      if (out.size() <= e.choice) out.resize(e.choice + 1);
      choice_events& c = out[e.choice];
      EXPECT_EQ(c.n_finish, 0) << "job " << id << ": an event after choice " << e.choice
                               << " finished";
      wire::choice_output_add(c, e);
      if (e.kind == wire::output_event_kind::finish) ++c.n_finish;
    }
    for (size_t i = 0; i < out.size(); ++i)
      EXPECT_EQ(out[i].n_finish, 1) << "job " << id << " choice " << i;
    return out;
  }

  static inline hearth::model* model_ = nullptr;
  static inline fs::path* dir_ = nullptr;
};

// The same prompt, parameters and seed: the events' content is the plain job's text, and the
// finish says why it ended as OpenAI does.
TEST_F(batch_engine_api_test, events_content_is_the_plain_text_of_the_same_seed) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(4, 128), sink);
  std::vector<wire::job_params> params = {sampled(40, 3), sampled(64, 9), sampled(30, 4)};
  params[2].stop = {"e"};  // ends early, on a stop string
  for (uint64_t i = 0; i < params.size(); ++i) {
    engine->submit(job(i, "Once upon a time", params[i]));
    wire::job_params with_events = params[i];
    with_events.api.events = true;
    engine->submit(job(10 + i, "Once upon a time", with_events));
  }
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 10, 11, 12}));
  for (uint64_t i = 0; i < params.size(); ++i) {
    const auto plain = sink.record(i);
    const auto events = events_of(sink, 10 + i);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].content, plain.text) << "job " << i;
    EXPECT_TRUE(events[0].reasoning.empty() && events[0].tool_calls.empty());
    const std::string want = plain.final->stop_reason == "max_tokens" ? "length" : "stop";
    EXPECT_EQ(events[0].finish, want) << "job " << i;
    EXPECT_EQ(sink.record(10 + i).final->stop_reason, plain.final->stop_reason);
    // Tokens sampled: the generated ones, and the end-of-generation token when one ended it.
    EXPECT_EQ(sink.record(10 + i).final->n_gen,
              plain.final->n_gen + (plain.final->stop_reason == "end_of_generation" ? 1 : 0));
  }
  EXPECT_EQ(sink.record(12).final->stop_reason, "stop_string");
}

// n = 3: three choices, the prompt decoded once for all of them, and choice i what a job of one
// choice gives with seed + i (its cells are copies of choice 0's, the same keys and values).
void expect_choices_as_single_jobs(const batch_engine_config& cfg) {
  fake_job_sink sink;
  auto engine = make_batch_engine(cfg, sink);
  const std::string prompt = "Once upon a time, there was a little dog";
  const uint32_t n_prompt =
      uint32_t(batch_engine_api_test::stories().vocab().tokenize(prompt, true, false).size());
  wire::job_params p = batch_engine_api_test::sampled(48, 21);
  p.api.events = true;
  p.api.n = 3;
  const uint64_t decoded_before = engine->prompt_tokens_decoded();
  engine->submit(batch_engine_api_test::job(0, prompt, p));
  ASSERT_TRUE(sink.wait_finished(0));
  EXPECT_EQ(engine->prompt_tokens_decoded() - decoded_before, n_prompt);
  EXPECT_EQ(sink.record(0).final->n_prompt, n_prompt);
  const auto choices = batch_engine_api_test::events_of(sink, 0);
  ASSERT_EQ(choices.size(), 3u);

  // Each alone, one after the other.
  for (uint64_t i = 0; i < 3; ++i) {
    wire::job_params one = batch_engine_api_test::sampled(48, 21 + i);
    one.api.events = true;
    engine->submit(batch_engine_api_test::job(1 + i, prompt, one));
    ASSERT_TRUE(sink.wait_finished(1 + i));
    const auto alone = batch_engine_api_test::events_of(sink, 1 + i);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(choices[i].content, alone[0].content) << "choice " << i;
    EXPECT_EQ(choices[i].finish, alone[0].finish) << "choice " << i;
  }
  EXPECT_NE(choices[0].content, choices[1].content);
  EXPECT_NE(choices[1].content, choices[2].content);
  EXPECT_EQ(engine->prompt_tokens_decoded() - decoded_before, 4 * n_prompt);
}

TEST_F(batch_engine_api_test, n_choices_share_one_prompt_decode_and_each_samples_its_own_seed) {
  expect_choices_as_single_jobs(config(4, 128));
}

// The same on a Vulkan device where there is one (lavapipe in CI: the copy runs the device's own
// get_rows and kv_store on device memory); elsewhere the model falls back to the CPU.
TEST_F(batch_engine_api_test, n_choices_on_the_vulkan_backend_are_single_jobs_too) {
  batch_engine_config cfg = config(4, 128);
  cfg.backend = gpu::backend_kind::vulkan;
  expect_choices_as_single_jobs(cfg);
}

// Choices of several attempts side by side, more than the slots at once: each attempt waits for
// as many free sequences as it has choices, and each gives what it gives alone.
TEST_F(batch_engine_api_test, attempts_of_several_choices_wait_for_free_sequences) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(3, 96), sink);
  std::vector<wire::job_params> params;
  for (int i = 0; i < 4; ++i) {
    wire::job_params p = sampled(20 + 7 * i, 40 + uint64_t(i));
    p.api.events = true;
    p.api.n = 1 + i % 3;  // 1, 2, 3, 1
    params.push_back(p);
    engine->submit(job(uint64_t(i), "Once upon a time", p));
  }
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 3}));
  std::vector<std::vector<choice_events>> got;
  for (uint64_t i = 0; i < params.size(); ++i) {
    got.push_back(events_of(sink, i));
    EXPECT_EQ(got.back().size(), size_t(params[i].api.n)) << "job " << i;
  }
  // Each choice again as a job of one choice with its seed.
  for (uint64_t i = 0; i < params.size(); ++i) {
    for (int32_t k = 0; k < params[i].api.n; ++k) {
      wire::job_params one = params[i];
      one.api.n = 1;
      one.seed += uint64_t(k);
      const uint64_t id = 100 + i * 10 + uint64_t(k);
      engine->submit(job(id, "Once upon a time", one));
      ASSERT_TRUE(sink.wait_finished(id));
      const auto alone = events_of(sink, id);
      ASSERT_EQ(alone.size(), 1u);
      if (size_t(k) < got[i].size()) {
        EXPECT_EQ(got[i][size_t(k)].content, alone[0].content) << "job " << i << " choice " << k;
      }
    }
  }
}

TEST_F(batch_engine_api_test, choices_beyond_the_slots_or_without_events_are_refused) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 64), sink);
  wire::job_params p = sampled(8, 1);
  p.api.events = true;
  p.api.n = 3;
  engine->submit(job(0, "Once", p));
  p.api.events = false;
  p.api.n = 2;
  engine->submit(job(1, "Once", p));
  ASSERT_TRUE(sink.wait_all_finished({0, 1}));
  const auto r0 = sink.record(0), r1 = sink.record(1);
  EXPECT_EQ(r0.final->state, wire::job_state::failed);
  EXPECT_EQ(r0.final->stop_reason, "");  // another node may have the slots
  EXPECT_NE(r0.final->error.find("slots"), std::string::npos) << r0.final->error;
  EXPECT_EQ(r1.final->state, wire::job_state::failed);
  EXPECT_EQ(r1.final->stop_reason, wire::stop_reason_invalid_request);
  EXPECT_FALSE(r0.started || r1.started);
}

// logprobs: one entry per generated token, its alternatives most likely first, and the sampled
// token's log-probability the log-softmax of the model's logits after logit_bias (recomputed
// here from a context of its own).
TEST_F(batch_engine_api_test, logprobs_are_the_log_softmax_of_the_biased_logits) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 128), sink);
  const std::string prompt = "Once upon a time";
  wire::job_params p;
  p.max_tokens = 12;
  p.temperature = 0;  // greedy: the sampled token is the argmax of the biased logits
  p.seed = 5;
  p.api.events = true;
  p.api.logprobs = true;
  p.api.top_logprobs = 5;
  p.api.logit_bias = {{.token = 278, .bias = 2.5f}, {.token = 263, .bias = -100}};
  engine->submit(job(0, prompt, p));
  ASSERT_TRUE(sink.wait_finished(0));
  const auto choices = events_of(sink, 0);
  ASSERT_EQ(choices.size(), 1u);
  const auto& probs = choices[0].logprobs;
  ASSERT_EQ(probs.size(), size_t(sink.record(0).final->n_gen) -
                              (sink.record(0).final->stop_reason == "end_of_generation" ? 1 : 0));

  context ctx(*model_, {.n_ctx = 128});
  const vocab& voc = model_->vocab();
  std::vector<int32_t> tokens = voc.tokenize(prompt, true, false);
  std::vector<batch_token> batch;
  for (size_t i = 0; i < tokens.size(); ++i)
    batch.push_back({tokens[i], int32_t(i), 0, i + 1 == tokens.size()});
  std::string text;
  for (size_t k = 0; k < probs.size(); ++k) {
    ASSERT_TRUE(ctx.decode(batch).ok());
    std::vector<double> row(ctx.logits(0), ctx.logits(0) + ctx.n_vocab());
    for (const auto& b : p.api.logit_bias) row[size_t(b.token)] += b.bias;
    const int32_t best = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    double sum = 0;
    for (double x : row) sum += std::exp(x - row[size_t(best)]);
    const double lse = row[size_t(best)] + std::log(sum);
    const auto& got = probs[k];
    EXPECT_EQ(got.sampled.token, voc.token_to_piece(best, false)) << "token " << k;
    EXPECT_NEAR(got.sampled.logprob, row[size_t(best)] - lse, 1e-4) << "token " << k;
    EXPECT_EQ(std::string(got.sampled.bytes.begin(), got.sampled.bytes.end()), got.sampled.token);
    ASSERT_EQ(got.top.size(), 5u) << "token " << k;
    EXPECT_EQ(got.top[0].token, got.sampled.token);
    for (size_t j = 1; j < got.top.size(); ++j)
      EXPECT_GE(got.top[j - 1].logprob, got.top[j].logprob) << "token " << k;
    for (const auto& t : got.top) EXPECT_NE(t.token, voc.token_to_piece(263, false));
    text += got.sampled.token;
    batch = {{best, int32_t(tokens.size() + k), 0, true}};
  }
  EXPECT_EQ(text, choices[0].content);
}

// json_schema: a random sample still gives JSON valid against the schema (the grammar decides
// what may be sampled); a schema or grammar that does not compile is the request's fault.
TEST_F(batch_engine_api_test, a_json_schema_constrains_the_output_to_valid_json) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(4, 256), sink);
  const nlohmann::json schema = {{"type", "object"},
                                 {"properties",
                                  {{"name", {{"type", "string"}, {"maxLength", 12}}},
                                   {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 150}}},
                                   {"pet", {{"enum", {"cat", "dog"}}}}}},
                                 {"required", {"name", "age", "pet"}},
                                 {"additionalProperties", false}};
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    wire::job_params p = sampled(200, seed);
    p.api.events = true;
    p.api.json_schema = schema.dump();
    p.api.n = 1 + int32_t(seed % 2);
    engine->submit(job(seed, "Once upon a time", p));
  }
  wire::job_params bad = sampled(20, 1);
  bad.api.grammar = "root ::= undefined-rule";
  engine->submit(job(10, "Once upon a time", bad));
  ASSERT_TRUE(sink.wait_all_finished({1, 2, 3, 10}));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    for (const auto& c : events_of(sink, seed)) {
      EXPECT_EQ(c.finish, "stop") << c.content;
      const auto v = nlohmann::json::parse(c.content, nullptr, false);
      ASSERT_TRUE(v.is_object()) << c.content;
      EXPECT_EQ(v.size(), 3u) << c.content;
      ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << c.content;
      EXPECT_LE(v["name"].get<std::string>().size(), 12u) << c.content;
      ASSERT_TRUE(v.contains("age") && v["age"].is_number_integer()) << c.content;
      EXPECT_TRUE(v["age"].get<int64_t>() >= 0 && v["age"].get<int64_t>() <= 150) << c.content;
      ASSERT_TRUE(v.contains("pet")) << c.content;
      EXPECT_TRUE(v["pet"] == "cat" || v["pet"] == "dog") << c.content;
    }
  }
  const auto r = sink.record(10);
  EXPECT_EQ(r.final->stop_reason, wire::stop_reason_invalid_request);
  EXPECT_NE(r.final->error.find("grammar"), std::string::npos) << r.final->error;
}

// A thinking model's think block: reasoning events in events mode, content the rest. The grammar
// makes a random model write one.
TEST_F(batch_engine_api_test, a_think_block_comes_as_reasoning_events) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 128), sink);
  wire::job_params p = sampled(80, 7);
  p.chat_template = "qwen3";
  p.api.events = true;
  p.api.grammar = R"(root ::= "<think>" [a-z]{3,12} "</think>" [A-Z] [a-z]{2,12})";
  auto j = job(0, "", p);
  j.messages = {{.role = "user", .content = "Once upon a time"}};
  engine->submit(j);
  ASSERT_TRUE(sink.wait_finished(0));
  const auto choices = events_of(sink, 0);
  ASSERT_EQ(choices.size(), 1u);
  const auto& c = choices[0];
  EXPECT_EQ(c.finish, "stop");
  EXPECT_TRUE(c.reasoning.size() >= 3 && c.reasoning.size() <= 12) << c.reasoning;
  EXPECT_EQ(c.reasoning.find_first_not_of("abcdefghijklmnopqrstuvwxyz"), std::string::npos)
      << c.reasoning;
  ASSERT_GE(c.content.size(), 3u) << c.content;
  EXPECT_TRUE(c.content[0] >= 'A' && c.content[0] <= 'Z') << c.content;
  EXPECT_EQ(c.content.find("think"), std::string::npos) << c.content;
}

// tool_choice auto (or absent): calls the model writes in its template's format are parsed out of
// the answer (a grammar makes this random model write one); "none" leaves the text as it is.
TEST_F(batch_engine_api_test, calls_in_the_templates_format_are_parsed_unless_tool_choice_is_none) {
  ASSERT_TRUE(fs::exists(*dir_ / "stories-tools.gguf")) << "the Qwen2.5 template is missing";
  fake_job_sink sink;
  auto engine = make_batch_engine(config(3, 1280), sink);
  const nlohmann::json tools = nlohmann::json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_time"},
          {"parameters",
           {{"type", "object"}, {"properties", {{"zone", {{"type", "string"}}}}}}}}}}});
  // GBNF's escapes: \n a newline, \" a quote.
  const std::string call =
      R"(<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>)";
  for (uint64_t id = 1; id <= 3; ++id) {
    wire::job_params p = sampled(120, id);
    p.api.events = true;
    p.api.tools = tools.dump();
    p.api.tool_choice = id == 1 ? "" : id == 2 ? "auto" : "none";
    p.api.grammar = "root ::= \"Sure. \" \"" + call + "\"";
    auto j = job(id, "", p, "stories-tools");
    j.messages = {{.role = "user", .content = "What time is it?"}};
    engine->submit(j);
  }
  ASSERT_TRUE(sink.wait_all_finished({1, 2, 3}));
  for (uint64_t id = 1; id <= 2; ++id) {
    const auto choices = events_of(sink, id);
    ASSERT_EQ(choices.size(), 1u);
    EXPECT_EQ(choices[0].finish, "tool_calls");
    EXPECT_EQ(choices[0].content, "Sure. ");
    ASSERT_EQ(choices[0].tool_calls.size(), 1u) << choices[0].content;
    EXPECT_EQ(choices[0].tool_calls[0].name, "get_time");
    EXPECT_EQ(nlohmann::json::parse(choices[0].tool_calls[0].arguments, nullptr, false),
              nlohmann::json({{"zone", "UTC"}}))
        << choices[0].tool_calls[0].arguments;
    EXPECT_FALSE(choices[0].tool_calls[0].id.empty());
  }
  const auto none = events_of(sink, 3);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].finish, "stop");
  EXPECT_TRUE(none[0].tool_calls.empty());
  EXPECT_EQ(none[0].content,
            "Sure. <tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": "
            "\"UTC\"}}\n</tool_call>");
}

// tool_choice naming a function, on a model whose own template writes tool calls (Qwen2.5's):
// the output is a call of that function, with arguments valid against its parameters, as a
// tool_call event with an id, and the choice finishes with "tool_calls".
TEST_F(batch_engine_api_test, a_named_tool_choice_gives_a_valid_call_of_that_function) {
  ASSERT_TRUE(fs::exists(*dir_ / "stories-tools.gguf")) << "the Qwen2.5 template is missing";
  fake_job_sink sink;
  // Qwen2.5's system prompt lists the tools: some 700 tokens of the stories vocabulary.
  auto engine = make_batch_engine(config(2, 1280), sink);
  const nlohmann::json tools = nlohmann::json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"},
          {"description", "The weather in a city"},
          {"parameters",
           {{"type", "object"},
            {"properties",
             {{"city", {{"type", "string"}, {"maxLength", 16}}},
              {"days", {{"type", "integer"}, {"minimum", 1}, {"maximum", 7}}}}},
            {"required", {"city", "days"}},
            {"additionalProperties", false}}}}}},
       {{"type", "function"},
        {"function",
         {{"name", "get_time"},
          {"parameters", {{"type", "object"}, {"properties", nlohmann::json::object()}}}}}}});
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    wire::job_params p = sampled(200, seed);
    p.api.events = true;
    p.api.tools = tools.dump();
    p.api.tool_choice = "function:get_weather";
    p.api.parallel_tool_calls = false;
    auto j = job(seed, "", p, "stories-tools");
    j.messages = {{.role = "user", .content = "What is the weather in Oslo?"}};
    engine->submit(j);
  }
  wire::job_params unknown = sampled(20, 1);
  unknown.api.events = true;
  unknown.api.tools = tools.dump();
  unknown.api.tool_choice = "function:no_such_tool";
  auto j = job(3, "", unknown, "stories-tools");
  j.messages = {{.role = "user", .content = "Hi"}};
  engine->submit(j);
  ASSERT_TRUE(sink.wait_all_finished({1, 2, 3}));
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    const auto choices = events_of(sink, seed);
    ASSERT_EQ(choices.size(), 1u);
    const auto& c = choices[0];
    EXPECT_EQ(c.finish, "tool_calls") << c.content;
    ASSERT_EQ(c.tool_calls.size(), 1u) << c.content;
    EXPECT_EQ(c.tool_calls[0].name, "get_weather");
    EXPECT_TRUE(c.tool_calls[0].id.starts_with("call_")) << c.tool_calls[0].id;
    const auto args = nlohmann::json::parse(c.tool_calls[0].arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << c.tool_calls[0].arguments;
    EXPECT_EQ(args.size(), 2u) << c.tool_calls[0].arguments;
    ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << c.tool_calls[0].arguments;
    EXPECT_LE(args["city"].get<std::string>().size(), 16u);
    ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer());
    EXPECT_TRUE(args["days"].get<int64_t>() >= 1 && args["days"].get<int64_t>() <= 7);
  }
  EXPECT_EQ(sink.record(3).final->stop_reason, wire::stop_reason_invalid_request);
  EXPECT_NE(sink.record(3).final->error.find("no_such_tool"), std::string::npos)
      << sink.record(3).final->error;
}

// context::seq_copy: a sequence continued from copied cells computes what the original does.
TEST_F(batch_engine_api_test, a_copied_sequence_continues_as_the_original) {
  context ctx(*model_, {.n_ctx = 256, .n_seq_max = 3});
  const auto prompt = model_->vocab().tokenize("Once upon a time", true, false);
  std::vector<batch_token> batch;
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({prompt[i], int32_t(i), 0, i + 1 == prompt.size()});
  ASSERT_TRUE(ctx.decode(batch).ok());
  ASSERT_TRUE(ctx.seq_copy(0, 1).ok());
  EXPECT_EQ(ctx.seq_next_pos(1), int32_t(prompt.size()));
  EXPECT_FALSE(ctx.seq_copy(0, 1).ok());  // not empty
  EXPECT_FALSE(ctx.seq_copy(0, 0).ok());
  EXPECT_FALSE(ctx.seq_copy(0, 3).ok());
  // The same next token on both: identical rows, bit for bit.
  const int32_t next = 42;
  std::vector<batch_token> two = {{next, int32_t(prompt.size()), 0, true},
                                  {next, int32_t(prompt.size()), 1, true}};
  ASSERT_TRUE(ctx.decode(two).ok());
  const int32_t n_vocab = ctx.n_vocab();
  EXPECT_EQ(std::vector<float>(ctx.logits(0), ctx.logits(0) + n_vocab),
            std::vector<float>(ctx.logits(1), ctx.logits(1) + n_vocab));
  // And the original's cells freed leave the copy whole.
  ctx.seq_clear(0);
  std::vector<batch_token> one = {{7, int32_t(prompt.size()) + 1, 1, true}};
  ASSERT_TRUE(ctx.decode(one).ok());
  context fresh(*model_, {.n_ctx = 256});
  std::vector<batch_token> all = batch;
  all.back().logits = false;
  all.push_back({next, int32_t(prompt.size()), 0, false});
  all.push_back({7, int32_t(prompt.size()) + 1, 0, true});
  ASSERT_TRUE(fresh.decode(all).ok());
  EXPECT_EQ(std::vector<float>(ctx.logits(0), ctx.logits(0) + n_vocab),
            std::vector<float>(fresh.logits(0), fresh.logits(0) + n_vocab));
}

}  // namespace
}  // namespace hearth::node
