// OpenAI request bodies as clients send them, good and hostile: every parameter applied or
// refused with a message naming it, the type expected and the one given; OpenAI's defaults;
// the response and error bodies byte for byte.
#include "gateway/openai-request.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "common/generation-params.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;
constexpr auto chat = openai_endpoint::chat_completions;
constexpr auto completions = openai_endpoint::completions;

openai_request parse_ok(openai_endpoint e, const std::string& body) {
  auto r = parse_openai_request(e, body);
  if (auto* refused = std::get_if<request_refusal>(&r)) {
    ADD_FAILURE() << body << " refused: " << refused->message;
    return {};
  }
  return std::get<openai_request>(r);
}

request_refusal parse_refused(openai_endpoint e, const std::string& body) {
  auto r = parse_openai_request(e, body);
  if (auto* refused = std::get_if<request_refusal>(&r)) return *refused;
  ADD_FAILURE() << body << " was accepted";
  return {};
}

// A chat body with `extra` fields ("" for none) after a one-message conversation.
std::string chat_body(const std::string& extra) {
  return R"({"model":"m","messages":[{"role":"user","content":"Hi"}])" +
         (extra.empty() ? "" : "," + extra) + "}";
}

TEST(OpenaiRequest, EndpointsByUrl) {
  EXPECT_EQ(openai_endpoint_of("/v1/chat/completions"), chat);
  EXPECT_EQ(openai_endpoint_of("/v1/completions"), completions);
  EXPECT_EQ(openai_endpoint_of("/v1/embeddings"), std::nullopt);
  EXPECT_EQ(openai_endpoint_of("/v1/chat/completions/"), std::nullopt);
}

TEST(OpenaiRequest, AChatGetsOpenaisDefaultsNotTheClis) {
  auto r = parse_ok(chat, chat_body(""));
  EXPECT_EQ(r.endpoint, chat);
  EXPECT_EQ(r.submit.model, "m");
  ASSERT_EQ(r.submit.messages.size(), 1u);
  EXPECT_EQ(r.submit.messages[0].role, "user");
  EXPECT_EQ(r.submit.messages[0].content, "Hi");
  EXPECT_EQ(r.submit.prompt, "");
  const wire::job_params& p = r.submit.params;
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.repeat_last_n, -1);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  // No limit of its own: the slot's context ends a long generation.
  EXPECT_EQ(p.max_tokens, generation_max_tokens_limit);
  EXPECT_EQ(p.seed, 0u);  // the broker chooses
  EXPECT_TRUE(p.stop.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.submit.priority, 0);
  EXPECT_EQ(r.submit.api_key, "");
}

TEST(OpenaiRequest, EveryParameterIsApplied) {
  auto r = parse_ok(chat, chat_body(R"("max_tokens":7,"temperature":0.5,"top_p":0.9,"seed":42,)"
                                    R"("stop":["\n","END"],"presence_penalty":1.5,)"
                                    R"("frequency_penalty":-0.5,"n":1,"stream":true,)"
                                    R"("stream_options":{"include_usage":true},"user":"alice")"));
  const wire::job_params& p = r.submit.params;
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_EQ(p.temperature, 0.5f);
  EXPECT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(p.presence_penalty, 1.5f);
  EXPECT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.user, "alice");
}

TEST(OpenaiRequest, MaxCompletionTokensIsTheNewerNameAndWins) {
  EXPECT_EQ(parse_ok(chat, chat_body(R"("max_completion_tokens":9)")).submit.params.max_tokens, 9);
  EXPECT_EQ(parse_ok(chat, chat_body(R"("max_tokens":5,"max_completion_tokens":9)"))
                .submit.params.max_tokens,
            9);
  auto e = parse_refused(chat, chat_body(R"("max_completion_tokens":0)"));
  EXPECT_EQ(e.param, "max_completion_tokens");
  EXPECT_EQ(e.message, "max_completion_tokens must be in [1, 1048576], got 0");
}

TEST(OpenaiRequest, NullMeansNotGiven) {
  auto r =
      parse_ok(chat, chat_body(R"("max_tokens":null,"temperature":null,"stop":null,)"
                               R"("seed":null,"stream":null,"n":null,"tools":null,"user":null)"));
  EXPECT_EQ(r.submit.params.temperature, 1.0f);
  EXPECT_EQ(r.submit.params.max_tokens, generation_max_tokens_limit);
}

TEST(OpenaiRequest, ThinkingIsOnAndItsReasoningHiddenUnlessAsked) {
  auto r = parse_ok(chat, chat_body(""));
  EXPECT_TRUE(r.submit.params.enable_thinking);
  EXPECT_FALSE(r.submit.params.show_thinking);
  EXPECT_FALSE(r.include_reasoning);
  r = parse_ok(chat, chat_body(R"("enable_thinking":false,"include_reasoning":true)"));
  EXPECT_FALSE(r.submit.params.enable_thinking);
  EXPECT_TRUE(r.submit.params.show_thinking);
  EXPECT_TRUE(r.include_reasoning);
  r = parse_ok(chat, chat_body(R"("chat_template_kwargs":{"enable_thinking":false,"x":1})"));
  EXPECT_FALSE(r.submit.params.enable_thinking);
  auto bad = parse_refused(chat, chat_body(R"("chat_template_kwargs":{"enable_thinking":"no"})"));
  EXPECT_EQ(bad.param, "chat_template_kwargs.enable_thinking");
  bad = parse_refused(chat, chat_body(R"("include_reasoning":1)"));
  EXPECT_EQ(bad.param, "include_reasoning");
}

// A chat request may name one of hearth's templates, as the CLI's --template does: a model whose
// file has none can then be chatted with. What is not shaped as a name (a template's text, as vLLM
// takes in this field) is refused here without being echoed back; a name the node does not know,
// by the node (tests/openai).
TEST(OpenaiRequest, ChatTemplateNamesOneOfHearthsTemplates) {
  EXPECT_EQ(parse_ok(chat, chat_body("")).submit.params.chat_template, "");
  EXPECT_EQ(parse_ok(chat, chat_body(R"("chat_template":"chatml")")).submit.params.chat_template,
            "chatml");
  const std::string jinja = "{% for message in messages %}{{ message.content }}{% endfor %}";
  auto bad = parse_refused(chat, chat_body(R"("chat_template":")" + jinja + "\""));
  EXPECT_EQ(bad.param, "chat_template");
  EXPECT_NE(bad.message.find("chat_template must be a template's name"), std::string::npos)
      << bad.message;
  EXPECT_EQ(bad.message.find("for message"), std::string::npos) << bad.message;
  EXPECT_EQ(parse_refused(chat, chat_body(R"("chat_template":7)")).param, "chat_template");
}

TEST(OpenaiRequest, UnknownFieldsAreIgnoredAsOpenaiDoes) {
  auto r = parse_ok(chat, chat_body(R"("metadata":{"a":"b"},"store":false,"x_future":[1,2])"));
  EXPECT_EQ(r.submit.model, "m");
}

TEST(OpenaiRequest, MessagesTakeTextPartsAndTheDeveloperRoleAndIgnoreNames) {
  auto r = parse_ok(chat, R"({"model":"m","messages":[
      {"role":"developer","content":"Be brief."},
      {"role":"user","name":"bob","content":[{"type":"text","text":"Hello, "},
                                             {"type":"text","text":"world"}]},
      {"role":"assistant","content":null},
      {"role":"system","content":[]}]})");
  ASSERT_EQ(r.submit.messages.size(), 4u);
  EXPECT_EQ(r.submit.messages[0].role, "system");
  EXPECT_EQ(r.submit.messages[0].content, "Be brief.");
  EXPECT_EQ(r.submit.messages[1].role, "user");
  EXPECT_EQ(r.submit.messages[1].content, "Hello, world");
  EXPECT_EQ(r.submit.messages[2].role, "assistant");
  EXPECT_EQ(r.submit.messages[2].content, "");
  EXPECT_EQ(r.submit.messages[3].content, "");
}

struct refusal_case {
  openai_endpoint endpoint;
  std::string body;
  std::string param;
  std::string message;
};

void expect_refusals(const std::vector<refusal_case>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    auto e = parse_refused(c.endpoint, c.body);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_EQ(e.message, c.message);
  }
}

TEST(OpenaiRequest, BadBodiesAreRefusedSayingWhy) {
  expect_refusals({
      {chat, "", "", "the body is not valid JSON"},
      {chat, "{\"model\":", "", "the body is not valid JSON"},
      {chat, "{\"model\":\"m\"} trailing", "", "the body is not valid JSON"},
      {chat, "[1,2]", "", "the body must be a JSON object, got an array"},
      {chat, "\"text\"", "", "the body must be a JSON object, got a string"},
      {chat, "null", "", "the body must be a JSON object, got null"},
      {chat, std::string("{\"model\":\"m\xff\"}"), "", "the body is not valid JSON"},
  });
}

TEST(OpenaiRequest, DeepNestingIsRefusedWithoutRecursion) {
  // 64 levels are fine (an unknown field); 65 are not; a million do not exhaust the stack.
  const auto nested = [](size_t depth) {
    return chat_body("\"x\":" + std::string(depth - 1, '[') + std::string(depth - 1, ']'));
  };
  parse_ok(chat, nested(64));
  auto e = parse_refused(chat, nested(65));
  EXPECT_EQ(e.message, "the body nests deeper than 64 levels");
  e = parse_refused(chat, "{\"x\":" + std::string(1000000, '['));
  EXPECT_EQ(e.message, "the body nests deeper than 64 levels");
}

TEST(OpenaiRequest, TheModelIsRequired) {
  expect_refusals({
      {chat, R"({"messages":[{"role":"user","content":"Hi"}]})", "model", "model is required"},
      {chat, R"({"model":"","messages":[{"role":"user","content":"Hi"}]})", "model",
       "model is required"},
      {chat, R"({"model":7,"messages":[{"role":"user","content":"Hi"}]})", "model",
       "model must be a string, got an integer"},
      {completions, R"({"prompt":"x"})", "model", "model is required"},
  });
}

TEST(OpenaiRequest, MessagesAreCheckedOneByOne) {
  const std::string m = R"({"model":"m","messages":)";
  expect_refusals({
      {chat, R"({"model":"m"})", "messages", "messages is required"},
      {chat, m + "[]}", "messages", "messages must not be empty"},
      {chat, m + R"("Hi"})", "messages", "messages must be an array, got a string"},
      {chat, m + "[3]}", "messages[0]", "messages[0] must be an object, got an integer"},
      {chat, m + R"([{"content":"Hi"}]})", "messages[0].role",
       "messages[0].role must be a string, got null"},
      {chat, m + R"([{"role":"user","content":"a"},{"role":"tool","content":"b"}]})",
       "messages[1].role",
       "messages[1].role 'tool' is not supported: system, developer, user or assistant (hearth "
       "runs no tools)"},
      {chat, m + R"([{"role":"user"}]})", "messages[0].content", "messages[0].content is required"},
      {chat, m + R"([{"role":"user","content":5}]})", "messages[0].content",
       "messages[0].content must be a string or an array of text parts, got an integer"},
      {chat,
       m + R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url",)"
           R"("image_url":{"url":"http://x"}}]}]})",
       "messages[0].content[1].type",
       "messages[0].content[1].type 'image_url' is not supported: hearth takes text parts only"},
      {chat, m + R"([{"role":"user","content":[{"text":"a"}]}]})", "messages[0].content[0].type",
       "messages[0].content[0].type must be the string \"text\""},
      {chat, m + R"([{"role":"user","content":[{"type":"text","text":3}]}]})",
       "messages[0].content[0].text",
       "messages[0].content[0].text must be a string, got an integer"},
      {chat, m + R"([{"role":"user","content":["a"]}]})", "messages[0].content[0]",
       "messages[0].content[0] must be an object, got a string"},
      {chat,
       m + R"([{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function"}]}]})",
       "messages[0].tool_calls", "messages[0].tool_calls is not supported: hearth runs no tools"},
  });
}

TEST(OpenaiRequest, ManyOrHugeMessagesAreBoundedByWhatTheWireCarries) {
  json body = {{"model", "m"}, {"messages", json::array()}};
  for (uint32_t i = 0; i <= wire::max_array_items; ++i) {
    body["messages"].push_back({{"role", "user"}, {"content", "x"}});
  }
  auto e = parse_refused(chat, body.dump());
  EXPECT_EQ(e.param, "messages");
  EXPECT_EQ(e.message, "the number of messages must be at most 4096, got 4097");

  const std::string half(wire::max_string_bytes / 2 + 1, 'a');
  body["messages"] = {{{"role", "user"}, {"content", half}}, {{"role", "user"}, {"content", half}}};
  e = parse_refused(chat, body.dump());
  EXPECT_EQ(e.param, "messages");
  EXPECT_EQ(e.message, "the messages' text in bytes must be at most 4194304, got 4194306");
}

TEST(OpenaiRequest, ACompletionTakesAStringOrAListOfOne) {
  EXPECT_EQ(parse_ok(completions, R"({"model":"m","prompt":"Once upon"})").submit.prompt,
            "Once upon");
  auto r = parse_ok(completions, R"({"model":"m","prompt":["Once upon"]})");
  EXPECT_EQ(r.submit.prompt, "Once upon");
  EXPECT_TRUE(r.submit.messages.empty());
  EXPECT_EQ(r.endpoint, completions);
  expect_refusals({
      {completions, R"({"model":"m"})", "prompt", "prompt is required"},
      {completions, R"({"model":"m","prompt":""})", "prompt", "prompt must not be empty"},
      {completions, R"({"model":"m","prompt":[1,2,3]})", "prompt",
       "prompt as token ids is not supported: send the prompt as text"},
      {completions, R"({"model":"m","prompt":[[1,2],[3]]})", "prompt",
       "prompt as lists of token ids is not supported: send one string"},
      {completions, R"({"model":"m","prompt":["a","b"]})", "prompt",
       "prompt must be a string or a list of one string, got a list of 2 items"},
      {completions, R"({"model":"m","prompt":[]})", "prompt",
       "prompt must be a string or a list of one string, got a list of 0 items"},
      {completions, R"({"model":"m","prompt":{"text":"a"}})", "prompt",
       "prompt must be a string, got an object"},
      // A chat's messages are not a completion's prompt.
      {completions, R"({"model":"m","messages":[{"role":"user","content":"Hi"}]})", "prompt",
       "prompt is required"},
  });
}

TEST(OpenaiRequest, NumbersAreCheckedForTypeAndRange) {
  expect_refusals({
      {chat, chat_body(R"("max_tokens":0)"), "max_tokens",
       "max_tokens must be in [1, 1048576], got 0"},
      {chat, chat_body(R"("max_tokens":-3)"), "max_tokens",
       "max_tokens must be in [1, 1048576], got -3"},
      {chat, chat_body(R"("max_tokens":1048577)"), "max_tokens",
       "max_tokens must be in [1, 1048576], got 1048577"},
      {chat, chat_body(R"("max_tokens":18446744073709551615)"), "max_tokens",
       "max_tokens must be in [1, 1048576], got 18446744073709551615"},
      {chat, chat_body(R"("max_tokens":10.5)"), "max_tokens",
       "max_tokens must be an integer, got a number"},
      {chat, chat_body(R"("max_tokens":"10")"), "max_tokens",
       "max_tokens must be an integer, got a string"},
      {chat, chat_body(R"("temperature":2.5)"), "temperature",
       "temperature must be in [0, 2], got 2.5"},
      {chat, chat_body(R"("temperature":-0.1)"), "temperature",
       "temperature must be in [0, 2], got -0.1"},
      {chat, chat_body(R"("temperature":"hot")"), "temperature",
       "temperature must be a number, got a string"},
      {chat, chat_body(R"("top_p":1.5)"), "top_p", "top_p must be in [0, 1], got 1.5"},
      {chat, chat_body(R"("presence_penalty":2.01)"), "presence_penalty",
       "presence_penalty must be in [-2, 2], got 2.01"},
      {chat, chat_body(R"("frequency_penalty":-3)"), "frequency_penalty",
       "frequency_penalty must be in [-2, 2], got -3"},
      {chat, chat_body(R"("frequency_penalty":true)"), "frequency_penalty",
       "frequency_penalty must be a number, got a boolean"},
      {chat, chat_body(R"("seed":-1)"), "seed", "seed must be in [0, 9223372036854775807], got -1"},
      {chat, chat_body(R"("seed":1.5)"), "seed", "seed must be an integer, got a number"},
      {chat, chat_body(R"("stream":"yes")"), "stream", "stream must be a boolean, got a string"},
      {chat, chat_body(R"("stream_options":true)"), "stream_options",
       "stream_options must be an object, got a boolean"},
      {chat, chat_body(R"("stream_options":{"include_usage":1})"), "stream_options.include_usage",
       "stream_options.include_usage must be a boolean, got an integer"},
      {chat, chat_body(R"("user":42)"), "user", "user must be a string, got an integer"},
  });
}

TEST(OpenaiRequest, TheEdgesOfEachRangeAreAccepted) {
  auto r = parse_ok(chat, chat_body(R"("temperature":0,"top_p":1,"max_tokens":1048576,)"
                                    R"("presence_penalty":-2,"frequency_penalty":2)"));
  EXPECT_EQ(r.submit.params.temperature, 0.0f);
  EXPECT_EQ(r.submit.params.max_tokens, 1048576);
  r = parse_ok(chat, chat_body(R"("temperature":2,"presence_penalty":2,"frequency_penalty":-2)"));
  EXPECT_EQ(r.submit.params.temperature, 2.0f);
  // OpenAI's top_p 0 keeps only the likeliest token: the smallest top_p the sampler takes.
  r = parse_ok(chat, chat_body(R"("top_p":0)"));
  EXPECT_GT(r.submit.params.top_p, 0.0f);
  EXPECT_EQ(r.submit.params.top_p, std::numeric_limits<float>::min());
}

TEST(OpenaiRequest, SeedZeroIsAFixedSeedNotTheBrokersChoice) {
  EXPECT_EQ(parse_ok(chat, chat_body(R"("seed":0)")).submit.params.seed, uint64_t(1) << 63);
  EXPECT_EQ(parse_ok(chat, chat_body(R"("seed":1)")).submit.params.seed, 1u);
  EXPECT_EQ(parse_ok(chat, chat_body(R"("seed":9223372036854775807)")).submit.params.seed,
            9223372036854775807u);
}

TEST(OpenaiRequest, StopIsAStringOrUpToFourStrings) {
  EXPECT_EQ(parse_ok(chat, chat_body(R"("stop":"END")")).submit.params.stop,
            (std::vector<std::string>{"END"}));
  EXPECT_EQ(parse_ok(chat, chat_body(R"("stop":["a","b","c","d"])")).submit.params.stop.size(), 4u);
  EXPECT_TRUE(parse_ok(chat, chat_body(R"("stop":[])")).submit.params.stop.empty());
  expect_refusals({
      {chat, chat_body(R"("stop":["a","b","c","d","e"])"), "stop",
       "the number of stop sequences must be at most 4, got 5"},
      {chat, chat_body(R"("stop":["a",1])"), "stop[1]", "stop[1] must be a string, got an integer"},
      {chat, chat_body(R"("stop":5)"), "stop",
       "stop must be a string or an array of strings, got an integer"},
      {chat, chat_body(R"("stop":"")"), "stop",
       "stop string 1's length must be 1 to 256 bytes, got 0"},
      {chat, chat_body("\"stop\":\"" + std::string(257, 's') + "\""), "stop",
       "stop string 1's length must be 1 to 256 bytes, got 257"},
  });
}

TEST(OpenaiRequest, WhatHearthCannotHonourIsRefusedClearly) {
  expect_refusals({
      {chat, chat_body(R"("n":2)"), "n",
       "n > 1 is not supported (hearth answers one choice), got 2"},
      {chat, chat_body(R"("n":0)"), "n", "n must be 1, got 0"},
      {chat, chat_body(R"("n":"2")"), "n", "n must be an integer, got a string"},
      {chat, chat_body(R"("logprobs":true)"), "logprobs", "logprobs is not supported"},
      {chat, chat_body(R"("top_logprobs":3)"), "top_logprobs", "top_logprobs is not supported"},
      {chat, chat_body(R"("tools":[{"type":"function","function":{"name":"f"}}])"), "tools",
       "tools is not supported: hearth runs no tools"},
      {chat, chat_body(R"("tool_choice":"required")"), "tool_choice",
       "tool_choice is not supported: hearth runs no tools"},
      {chat, chat_body(R"("functions":[{"name":"f"}])"), "functions",
       "functions is not supported: hearth runs no tools"},
      {chat, chat_body(R"("response_format":{"type":"json_object"})"), "response_format",
       "response_format is not supported but for {\"type\": \"text\"} (no JSON mode)"},
      {chat, chat_body(R"("logit_bias":{"50256":-100})"), "logit_bias",
       "logit_bias is not supported"},
      {chat, chat_body(R"("audio":{"voice":"alloy"})"), "audio",
       "audio is not supported: hearth answers text"},
      {chat, chat_body(R"("modalities":["text","audio"])"), "modalities",
       "modalities is not supported but for [\"text\"]"},
      {completions, R"({"model":"m","prompt":"a","echo":true})", "echo", "echo is not supported"},
      {completions, R"({"model":"m","prompt":"a","best_of":3})", "best_of",
       "best_of > 1 is not supported"},
      {completions, R"({"model":"m","prompt":"a","logprobs":2})", "logprobs",
       "logprobs is not supported"},
      {completions, R"({"model":"m","prompt":"a","suffix":"end"})", "suffix",
       "suffix is not supported"},
  });
  // ... and their "off" values pass.
  parse_ok(chat, chat_body(R"("logprobs":false,"top_logprobs":0,"tools":[],"tool_choice":"none",)"
                           R"("response_format":{"type":"text"},"logit_bias":{},)"
                           R"("modalities":["text"])"));
  parse_ok(completions, R"({"model":"m","prompt":"a","echo":false,"best_of":1,"logprobs":0,)"
                        R"("suffix":""})");
}

TEST(OpenaiRequest, FinishReasons) {
  EXPECT_EQ(openai_finish_reason("max_tokens"), "length");
  EXPECT_EQ(openai_finish_reason("context_full"), "length");
  EXPECT_EQ(openai_finish_reason("end_of_generation"), "stop");
  EXPECT_EQ(openai_finish_reason("stop_string"), "stop");
}

TEST(OpenaiRequest, ResponseIds) {
  EXPECT_EQ(openai_response_id(chat, 42), "chatcmpl-42");
  EXPECT_EQ(openai_response_id(completions, 7), "cmpl-7");
}

wire::job_done done_of(uint64_t job, const char* stop_reason, uint32_t n_prompt, uint32_t n_gen) {
  wire::job_done d;
  d.job_id = job;
  d.attempt = 1;
  d.state = wire::job_state::completed;
  d.stop_reason = stop_reason;
  d.n_prompt = n_prompt;
  d.n_gen = n_gen;
  return d;
}

TEST(OpenaiRequest, AChatResponseIsOpenaisObjectByteForByte) {
  auto r = parse_ok(chat, chat_body(""));
  EXPECT_EQ(
      openai_response_body(r, 12, 1700000000, "Hello \"you\"\n", done_of(12, "max_tokens", 9, 4)),
      R"({"id":"chatcmpl-12","object":"chat.completion","created":1700000000,"model":"m",)"
      R"("choices":[{"index":0,"message":{"role":"assistant","content":"Hello \"you\"\n"},)"
      R"("logprobs":null,"finish_reason":"length"}],)"
      R"("usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}})");
}

TEST(OpenaiRequest, ACompletionResponseIsOpenaisObjectByteForByte) {
  auto r = parse_ok(completions, R"({"model":"stories","prompt":"Once"})");
  EXPECT_EQ(openai_response_body(r, 3, 5, " upon a time", done_of(3, "end_of_generation", 2, 3)),
            R"({"id":"cmpl-3","object":"text_completion","created":5,"model":"stories",)"
            R"("choices":[{"text":" upon a time","index":0,"logprobs":null,)"
            R"("finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}})");
}

TEST(OpenaiRequest, TextThatIsNotUtf8IsReplacedNotThrownOn) {
  auto r = parse_ok(completions, R"({"model":"m","prompt":"x"})");
  const std::string body = openai_response_body(r, 1, 1,
                                                "a\xff"
                                                "b",
                                                done_of(1, "max_tokens", 1, 1));
  EXPECT_EQ(json::parse(body)["choices"][0]["text"],
            "a\xEF\xBF\xBD"
            "b");
}

json error_of(const http_response& r) {
  EXPECT_EQ(r.content_type, "application/json");
  return json::parse(r.body)["error"];
}

TEST(OpenaiRequest, AJobTheRequestWasAtFaultForIsA400WithTheNodesMessage) {
  wire::job_done d = done_of(5, "prompt_too_long", 0, 0);
  d.state = wire::job_state::failed;
  d.error = "the prompt has 700 tokens, more than the 512 of a slot's context";
  auto r = openai_job_error(d);
  EXPECT_EQ(r.status, 400);
  auto e = error_of(r);
  EXPECT_EQ(e["message"], d.error);
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_EQ(e["param"], nullptr);  // "messages" or "prompt": the job does not say which

  d.stop_reason = "invalid_request";
  d.error = "the model has no chat template";
  r = openai_job_error(d);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r)["message"], d.error);
  EXPECT_EQ(error_of(r)["param"], nullptr);
}

TEST(OpenaiRequest, OtherJobFailuresAre500s) {
  wire::job_done d = done_of(5, "", 0, 0);
  d.state = wire::job_state::failed;
  d.error = "decoding failed: out of memory";
  auto r = openai_job_error(d);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(error_of(r)["message"], "job 5 failed: decoding failed: out of memory");
  EXPECT_EQ(error_of(r)["type"], "server_error");
  d.state = wire::job_state::cancelled;
  r = openai_job_error(d);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(error_of(r)["message"], "job 5 was cancelled before it completed");
  EXPECT_EQ(error_of(r)["code"], "cancelled");
}

TEST(OpenaiRequest, BrokerRefusalsMapToOpenaisStatuses) {
  using wire::error_code;
  const struct {
    link_failure f;
    int status;
    const char* type;
    const char* code;
  } cases[] = {
      {{true, error_code::internal, "no reply in 10 s"}, 503, "server_error", "broker_unavailable"},
      {{true, error_code::internal, "the broker at tcp://h:5555 refused this gateway's key", true},
       503,
       "server_error",
       "broker_refused_gateway_key"},
      {{false, error_code::unknown_model, "unknown model 'x' (models: a, b)"},
       404,
       "invalid_request_error",
       "model_not_found"},
      {{false, error_code::queue_full, "the queue is full"}, 429, "rate_limit_error", "queue_full"},
      {{false, error_code::limit_reached, "too many queued jobs"},
       429,
       "rate_limit_error",
       "limit_reached"},
      {{false, error_code::unauthorized, "unknown or revoked API key"},
       401,
       "authentication_error",
       "invalid_api_key"},
      {{false, error_code::invalid_params, "max_tokens must be ..."},
       400,
       "invalid_request_error",
       "invalid_params"},
      {{false, error_code::no_chat_template, "model 'm' has no chat template its nodes can use"},
       400,
       "invalid_request_error",
       "no_chat_template"},
      {{false, error_code::storage_unavailable, "disk full"},
       503,
       "server_error",
       "storage_unavailable"},
      {{false, error_code::not_found, "no job 9"}, 404, "not_found_error", "not_found"},
      {{false, error_code::internal, "database error"}, 500, "server_error", "internal"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.f.message);
    auto r = openai_link_error(c.f);
    EXPECT_EQ(r.status, c.status);
    auto e = error_of(r);
    EXPECT_EQ(e["type"], c.type);
    EXPECT_EQ(e["code"], c.code);
    EXPECT_NE(e["message"].get<std::string>().find(c.f.message), std::string::npos);
  }
  EXPECT_EQ(error_of(openai_link_error({false, error_code::unknown_model, "m"}))["param"], "model");
  EXPECT_EQ(error_of(openai_link_error({false, error_code::no_chat_template, "m"}))["param"],
            "messages");
}

}  // namespace
}  // namespace hearth::gateway
