// OpenAI request bodies as clients send them, good and hostile: every parameter applied or
// refused with a message naming it, the type expected and the one given; OpenAI's defaults;
// the response and error bodies byte for byte.
#include "gateway/openai-request.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "common/generation-params.h"
#include "gateway/job-events-testing.h"
#include "schema/output-events.h"

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
       "messages[1].tool_call_id",
       "messages[1].tool_call_id is required: the id of the call it answers"},
      {chat, m + R"([{"role":"function","content":"b"}]})", "messages[0].role",
       "messages[0].role 'function' is not supported: system, developer, user, assistant or "
       "tool"},
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
       "messages[0].tool_calls[0].function",
       "messages[0].tool_calls[0].function must be an object, got null"},
      {chat, m + R"([{"role":"assistant","tool_calls":{"id":"c"}}]})", "messages[0].tool_calls",
       "messages[0].tool_calls must be an array, got an object"},
      {chat, m + R"([{"role":"assistant","tool_calls":[{"id":"c","type":"code","function":{}}]}]})",
       "messages[0].tool_calls[0].type", "messages[0].tool_calls[0].type must be \"function\""},
      {chat, m + R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":""}}]}]})",
       "messages[0].tool_calls[0].function.name",
       "messages[0].tool_calls[0].function.name must be a function's name"},
      {chat,
       m + R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f",)"
           R"("arguments":"{\"a\": "}}]}]})",
       "messages[0].tool_calls[0].function.arguments",
       "messages[0].tool_calls[0].function.arguments must be JSON text (the call's arguments), "
       "got \"{\\\"a\\\": \""},
      {chat,
       m + R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f",)"
           R"("arguments":7}}]}]})",
       "messages[0].tool_calls[0].function.arguments",
       "messages[0].tool_calls[0].function.arguments must be a string of JSON, got an integer"},
      {chat, m + R"([{"role":"user","content":"a","tool_calls":[]}]})", "messages[0].tool_calls",
       "messages[0].tool_calls is for assistant messages only"},
      {chat, m + R"([{"role":"tool","tool_call_id":5,"content":"a"}]})", "messages[0].tool_call_id",
       "messages[0].tool_call_id must be a string, got an integer"},
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
      {chat, chat_body(R"("functions":[{"name":"f"}])"), "functions",
       "functions is not supported: send them as tools (type \"function\")"},
      {chat, chat_body(R"("function_call":{"name":"f"})"), "function_call",
       "function_call is not supported: use tool_choice"},
      {chat, chat_body(R"("audio":{"voice":"alloy"})"), "audio",
       "audio is not supported: hearth answers text"},
      {chat, chat_body(R"("modalities":["text","audio"])"), "modalities",
       "modalities is not supported but for [\"text\"]"},
      {completions, R"({"model":"m","prompt":"a","echo":true})", "echo", "echo is not supported"},
      {completions, R"({"model":"m","prompt":"a","best_of":3})", "best_of",
       "best_of > 1 is not supported"},
      {completions, R"({"model":"m","prompt":"a","suffix":"end"})", "suffix",
       "suffix is not supported"},
  });
  // ... and their "off" values pass, a plain job staying plain text.
  auto r = parse_ok(chat, chat_body(R"("logprobs":false,"top_logprobs":0,"tools":[],)"
                                    R"("tool_choice":"none","response_format":{"type":"text"},)"
                                    R"("logit_bias":{},"modalities":["text"],"n":1,)"
                                    R"("function_call":"auto")"));
  EXPECT_FALSE(r.submit.params.api.events);
  EXPECT_EQ(r.submit.params.api.tools, "");
  EXPECT_EQ(r.submit.params.api.tool_choice, "");
  EXPECT_EQ(r.submit.params.api.json_schema, "");
  parse_ok(completions, R"({"model":"m","prompt":"a","echo":false,"best_of":1,"suffix":""})");
}

// The assistant's calls and the tools' answers, as the official clients send them back.
TEST(OpenaiRequest, ToolCallsAndToolMessagesRoundTrip) {
  auto r = parse_ok(chat, R"({"model":"m","messages":[
      {"role":"user","content":"Weather in Oslo?"},
      {"role":"assistant","content":null,"tool_calls":[
         {"id":"call_1","type":"function",
          "function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}},
         {"id":"call_2","type":"function","function":{"name":"get_time","arguments":{"tz":"CET"}}},
         {"id":"call_3","type":"function","function":{"name":"noop"}}],
       "reasoning_content":"Two lookups."},
      {"role":"tool","tool_call_id":"call_1","name":"get_weather",
       "content":[{"type":"text","text":"12"},{"type":"text","text":" C"}]},
      {"role":"tool","tool_call_id":"call_2","content":null}]})");
  ASSERT_EQ(r.submit.messages.size(), 4u);
  const auto& a = r.submit.messages[1];
  EXPECT_EQ(a.role, "assistant");
  EXPECT_EQ(a.content, "");
  EXPECT_EQ(a.reasoning_content, "Two lookups.");
  ASSERT_EQ(a.tool_calls.size(), 3u);
  EXPECT_EQ(a.tool_calls[0].id, "call_1");
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(a.tool_calls[0].arguments, R"({"city": "Oslo"})");  // as sent
  EXPECT_EQ(a.tool_calls[1].arguments, R"({"tz":"CET"})");      // an object, leniently
  EXPECT_EQ(a.tool_calls[2].arguments, "{}");
  const auto& t = r.submit.messages[2];
  EXPECT_EQ(t.role, "tool");
  EXPECT_EQ(t.tool_call_id, "call_1");
  EXPECT_EQ(t.name, "get_weather");
  EXPECT_EQ(t.content, "12 C");
  EXPECT_EQ(r.submit.messages[3].content, "");
  // Messages alone ask for no events: the answer is text unless tools are offered again.
  EXPECT_FALSE(r.submit.params.api.events);
}

const char* k_weather_tool = R"({"type":"function","function":{"name":"get_weather",)"
                             R"("description":"The weather","parameters":{"type":"object",)"
                             R"("properties":{"city":{"type":"string"}},"required":["city"]},)"
                             R"("strict":true}})";

TEST(OpenaiRequest, ToolsAndToolChoiceGoToTheJob) {
  const std::string tools = std::string("\"tools\":[") + k_weather_tool + "]";
  auto r = parse_ok(chat, chat_body(tools));
  const wire::api_params& api = r.submit.params.api;
  EXPECT_EQ(json::parse(api.tools), json::parse("[" + std::string(k_weather_tool) + "]"));
  EXPECT_EQ(api.tool_choice, "");  // auto
  EXPECT_TRUE(api.parallel_tool_calls);
  EXPECT_TRUE(api.events) << "tool calls come back as events";
  for (auto [given, mapped] : {std::pair{R"("auto")", "auto"}, std::pair{R"("none")", "none"},
                               std::pair{R"("required")", "required"},
                               std::pair{R"({"type":"function","function":{"name":"get_weather"}})",
                                         "function:get_weather"}}) {
    SCOPED_TRACE(given);
    auto c = parse_ok(
        chat, chat_body(tools + ",\"tool_choice\":" + given + ",\"parallel_tool_calls\":false"));
    EXPECT_EQ(c.submit.params.api.tool_choice, mapped);
    EXPECT_FALSE(c.submit.params.api.parallel_tool_calls);
  }
  expect_refusals({
      {chat, chat_body(R"("tools":{"type":"function"})"), "tools",
       "tools must be an array of tools, got an object"},
      {chat, chat_body(R"("tools":[{"type":"code_interpreter"}])"), "tools[0].type",
       "tools[0].type must be \"function\" (the only kind hearth runs)"},
      {chat, chat_body(R"("tools":[{"type":"function"}])"), "tools[0].function",
       "tools[0].function must be an object, got null"},
      {chat, chat_body(R"("tools":[{"type":"function","function":{"name":"a b"}}])"),
       "tools[0].function.name",
       "tools[0].function.name must be a name of 1 to 64 of a-z, A-Z, 0-9, '_', '-'"},
      {chat,
       chat_body(R"("tools":[{"type":"function","function":{"name":"f"}},)"
                 R"({"type":"function","function":{"name":"f"}}])"),
       "tools[1].function.name", "tools[1].function.name 'f' is given twice"},
      {chat, chat_body(R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])"),
       "tools[0].function.parameters",
       "tools[0].function.parameters must be an object (a JSON Schema), got an array"},
      {chat, chat_body(R"("tools":[{"type":"function","function":{"name":"f","strict":1}}])"),
       "tools[0].function.strict", "tools[0].function.strict must be a boolean, got an integer"},
      {chat, chat_body(tools + R"(,"tool_choice":"any")"), "tool_choice",
       "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
       "\"function\": {\"name\": ...}}, got \"any\""},
      {chat, chat_body(tools + R"(,"tool_choice":{"type":"function","function":{"name":"g"}})"),
       "tool_choice", "tool_choice names 'g', which is not one of the tools"},
      {chat, chat_body(tools + R"(,"tool_choice":{"type":"function"})"), "tool_choice",
       "tool_choice must be {\"type\": \"function\", \"function\": {\"name\": NAME}} to name a "
       "tool"},
      {chat, chat_body(R"("tool_choice":"required")"), "tool_choice",
       "tool_choice \"required\" needs tools"},
      {chat, chat_body(tools + R"(,"parallel_tool_calls":"yes")"), "parallel_tool_calls",
       "parallel_tool_calls must be a boolean, got a string"},
  });
  // 128 tools at most, as OpenAI takes.
  json many = json::array();
  for (int i = 0; i < 129; ++i) {
    many.push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  }
  EXPECT_EQ(parse_refused(chat, chat_body("\"tools\":" + many.dump())).message,
            "the number of tools must be at most 128, got 129");
}

TEST(OpenaiRequest, ResponseFormatAndGrammarConstrainTheOutput) {
  auto schema_of = [](const std::string& extra) {
    return parse_ok(chat, chat_body(extra)).submit.params.api.json_schema;
  };
  EXPECT_EQ(schema_of(R"("response_format":{"type":"text"})"), "");
  EXPECT_EQ(schema_of(R"("response_format":{"type":"json_object"})"), R"({"type":"object"})");
  EXPECT_EQ(schema_of(R"("response_format":{"type":"json_object","schema":{"type":"array"}})"),
            R"({"type":"array"})");
  const char* person =
      R"({"type":"object","properties":{"name":{"type":"string"}},"required":["name"],)"
      R"("additionalProperties":false})";
  for (const char* strict : {"true", "false"}) {
    EXPECT_EQ(json::parse(schema_of(
                  std::string(R"("response_format":{"type":"json_schema","json_schema":)") +
                  R"({"name":"person","strict":)" + strict + R"(,"schema":)" + person + "}}")),
              json::parse(person));
  }
  EXPECT_EQ(schema_of(R"("response_format":{"type":"json_schema","json_schema":{"name":"x"}})"),
            "{}");
  auto g = parse_ok(completions, R"({"model":"m","prompt":"a","grammar":"root ::= \"yes\""})");
  EXPECT_EQ(g.submit.params.api.grammar, "root ::= \"yes\"");
  EXPECT_FALSE(g.submit.params.api.events) << "constrained text is still text";
  // llama.cpp's server's fields, completions too.
  auto s = parse_ok(completions, R"({"model":"m","prompt":"a","json_schema":{"type":"array"}})");
  EXPECT_EQ(s.submit.params.api.json_schema, R"({"type":"array"})");
  auto f = parse_ok(completions,
                    R"({"model":"m","prompt":"a","response_format":{"type":"json_object"}})");
  EXPECT_EQ(f.submit.params.api.json_schema, R"({"type":"object"})");
  expect_refusals({
      {chat, chat_body(R"("response_format":"json")"), "response_format",
       "response_format must be an object, got a string"},
      {chat, chat_body(R"("response_format":{"type":"xml"})"), "response_format.type",
       "response_format.type 'xml' is not supported: \"text\", \"json_object\" or "
       "\"json_schema\""},
      {chat, chat_body(R"("response_format":{"type":"json_schema"})"),
       "response_format.json_schema", "response_format.json_schema must be an object, got null"},
      {chat, chat_body(R"("response_format":{"type":"json_schema","json_schema":{"schema":3}})"),
       "response_format.json_schema.schema",
       "response_format.json_schema.schema must be an object (a JSON Schema), got an integer"},
      {chat, chat_body(R"("response_format":{"type":"json_object"},"grammar":"root ::= \"a\"")"),
       "grammar",
       "grammar and a JSON schema (response_format, json_schema) exclude each other: send one"},
      {chat, chat_body(R"("response_format":{"type":"json_object"},"json_schema":{})"),
       "json_schema", "json_schema and a JSON response_format exclude each other: send one"},
      {completions, R"({"model":"m","prompt":"a","json_schema":[]})", "json_schema",
       "json_schema must be an object (a JSON Schema), got an array"},
      {chat, chat_body(R"("grammar":5)"), "grammar", "grammar must be a string, got an integer"},
  });
}

TEST(OpenaiRequest, LogprobsNAndLogitBias) {
  auto r = parse_ok(chat, chat_body(R"("logprobs":true,"top_logprobs":5,"n":3,)"
                                    R"("logit_bias":{"15":-100,"2047":2.5})"));
  const wire::api_params& api = r.submit.params.api;
  EXPECT_TRUE(api.logprobs);
  EXPECT_EQ(api.top_logprobs, 5);
  EXPECT_EQ(api.n, 3);
  ASSERT_EQ(api.logit_bias.size(), 2u);
  EXPECT_EQ(api.logit_bias[0].token, 15);
  EXPECT_EQ(api.logit_bias[0].bias, -100.0f);
  EXPECT_EQ(api.logit_bias[1].token, 2047);
  EXPECT_EQ(api.logit_bias[1].bias, 2.5f);
  EXPECT_TRUE(api.events);
  // n alone and logprobs alone each need events; logit_bias alone does not.
  EXPECT_TRUE(parse_ok(chat, chat_body(R"("n":2)")).submit.params.api.events);
  EXPECT_TRUE(parse_ok(chat, chat_body(R"("logprobs":true)")).submit.params.api.events);
  EXPECT_FALSE(parse_ok(chat, chat_body(R"("logit_bias":{"1":1})")).submit.params.api.events);
  // Completions: logprobs is the number of alternatives.
  auto c = parse_ok(completions, R"({"model":"m","prompt":"a","logprobs":2,"n":8})");
  EXPECT_TRUE(c.submit.params.api.logprobs);
  EXPECT_EQ(c.submit.params.api.top_logprobs, 2);
  EXPECT_EQ(c.submit.params.api.n, 8);
  auto zero = parse_ok(completions, R"({"model":"m","prompt":"a","logprobs":0})");
  EXPECT_TRUE(zero.submit.params.api.logprobs) << "the sampled tokens' own, no alternatives";
  EXPECT_EQ(zero.submit.params.api.top_logprobs, 0);
  expect_refusals({
      {chat, chat_body(R"("n":0)"), "n", "n must be in [1, 8], got 0"},
      {chat, chat_body(R"("n":9)"), "n", "n must be in [1, 8], got 9"},
      {chat, chat_body(R"("n":"2")"), "n", "n must be an integer, got a string"},
      {chat, chat_body(R"("logprobs":1)"), "logprobs",
       "logprobs must be a boolean, got an integer"},
      {chat, chat_body(R"("top_logprobs":3)"), "top_logprobs", "top_logprobs needs logprobs: true"},
      {chat, chat_body(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs",
       "top_logprobs must be in [0, 20], got 21"},
      {completions, R"({"model":"m","prompt":"a","logprobs":true})", "logprobs",
       "logprobs must be an integer, got a boolean"},
      {chat, chat_body(R"("logit_bias":[1])"), "logit_bias",
       "logit_bias must be an object, got an array"},
      {chat, chat_body(R"("logit_bias":{"abc":1})"), "logit_bias",
       "logit_bias[\"abc\"]: the key must be a token id (a number)"},
      {chat, chat_body(R"("logit_bias":{"-1":1})"), "logit_bias",
       "logit_bias[\"-1\"]: the key must be a token id (a number)"},
      {chat, chat_body(R"("logit_bias":{"99999999999":1})"), "logit_bias",
       "logit_bias[\"99999999999\"]: the key must be a token id (a number)"},
      {chat, chat_body(R"("logit_bias":{"5":101})"), "logit_bias",
       "logit_bias[\"5\"] must be in [-100, 100], got 101"},
      {chat, chat_body(R"("logit_bias":{"5":"x"})"), "logit_bias[\"5\"]",
       "logit_bias[\"5\"] must be a number, got a string"},
  });
  json bias = json::object();
  for (int i = 0; i < 301; ++i) bias[std::to_string(i)] = 1;
  EXPECT_EQ(parse_refused(chat, chat_body("\"logit_bias\":" + bias.dump())).message,
            "the number of logit_bias entries must be at most 300, got 301");
}

// What job_params_check refuses (sizes, JSON shapes) names the request's own field.
TEST(OpenaiRequest, AJobParameterRefusalNamesTheRequestsField) {
  const std::string big(300 * 1024, 'x');
  auto e = parse_refused(
      chat, chat_body(R"("response_format":{"type":"json_schema","json_schema":{"schema":)"
                      R"({"description":")" +
                      big + R"("}}})"));
  EXPECT_EQ(e.param, "response_format") << e.message;
  e = parse_refused(chat, chat_body(R"("json_schema":{"description":")" + big + R"("})"));
  EXPECT_EQ(e.param, "json_schema") << e.message;
  e = parse_refused(chat, chat_body(R"("chat_template_kwargs":{"x":")" + big + R"("})"));
  EXPECT_EQ(e.param, "chat_template_kwargs") << e.message;
}

TEST(OpenaiRequest, ChatTemplateKwargsGoToTheTemplate) {
  auto r = parse_ok(chat, chat_body(R"("chat_template_kwargs":{"enable_thinking":false,"x":[1]})"));
  EXPECT_EQ(json::parse(r.submit.params.api.template_kwargs),
            json::parse(R"({"enable_thinking":false,"x":[1]})"));
  EXPECT_FALSE(r.submit.params.enable_thinking);
  EXPECT_EQ(
      parse_ok(chat, chat_body(R"("chat_template_kwargs":{})")).submit.params.api.template_kwargs,
      "");
}

// Reasoning with events comes as reasoning events: the job need not keep its think block in the
// text then.
TEST(OpenaiRequest, IncludeReasoningKeepsTheThinkBlockOnlyInAPlainJob) {
  auto plain = parse_ok(chat, chat_body(R"("include_reasoning":true)"));
  EXPECT_TRUE(plain.submit.params.show_thinking);
  auto events = parse_ok(chat, chat_body(R"("include_reasoning":true,"n":2)"));
  EXPECT_TRUE(events.include_reasoning);
  EXPECT_FALSE(events.submit.params.show_thinking);
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

// A job that completed at its first attempt.
constexpr auto done_of = testing::job_completed;

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

// Output events as the node writes them (schema/output-events.h).
std::string event_lines(const std::vector<wire::output_event>& events) {
  std::string s;
  for (const auto& e : events) s += wire::output_event_line(e);
  return s;
}

wire::output_event content_event(uint32_t choice, std::string text) {
  wire::output_event e;
  e.choice = choice;
  e.text = std::move(text);
  return e;
}

wire::output_event finish_event(uint32_t choice, std::string reason) {
  wire::output_event e = content_event(choice, std::move(reason));
  e.kind = wire::output_event_kind::finish;
  return e;
}

wire::output_event call_event(uint32_t choice, std::string id, std::string name, std::string args) {
  wire::output_event e;
  e.choice = choice;
  e.kind = wire::output_event_kind::tool_call;
  e.call = {std::move(id), std::move(name), std::move(args)};
  return e;
}

wire::output_event logprobs_event(uint32_t choice, std::string token, float lp,
                                  std::vector<std::pair<std::string, float>> top) {
  wire::output_event e;
  e.choice = choice;
  e.kind = wire::output_event_kind::logprobs;
  wire::sampled_logprob s;
  s.sampled = {token, std::vector<uint8_t>(token.begin(), token.end()), lp};
  for (auto& [t, l] : top) s.top.push_back({t, std::vector<uint8_t>(t.begin(), t.end()), l});
  e.probs.push_back(std::move(s));
  return e;
}

TEST(OpenaiRequest, AToolCallAnswerHasNullContentAndTheCalls) {
  auto r = parse_ok(chat, chat_body(std::string("\"tools\":[") + k_weather_tool + "]"));
  const std::string out = event_lines({
      call_event(0, "call_a", "get_weather", R"({"city":"Oslo"})"),
      call_event(0, "call_b", "get_weather", R"({"city":"Bergen"})"),
      finish_event(0, "tool_calls"),
  });
  EXPECT_EQ(openai_response_body(r, 4, 10, out, done_of(4, "end_of_generation", 5, 6)),
            R"({"id":"chatcmpl-4","object":"chat.completion","created":10,"model":"m",)"
            R"("choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[)"
            R"({"id":"call_a","type":"function","function":{"name":"get_weather",)"
            R"("arguments":"{\"city\":\"Oslo\"}"}},)"
            R"({"id":"call_b","type":"function","function":{"name":"get_weather",)"
            R"("arguments":"{\"city\":\"Bergen\"}"}}]},)"
            R"("logprobs":null,"finish_reason":"tool_calls"}],)"
            R"("usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}})");
  // Text beside a call keeps its content; calls without a finish event still finish as calls.
  const std::string both =
      event_lines({content_event(0, "Let me look."), call_event(0, "c", "get_weather", "{}")});
  json body =
      json::parse(openai_response_body(r, 4, 10, both, done_of(4, "end_of_generation", 1, 1)));
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Let me look.");
  EXPECT_EQ(body["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
}

TEST(OpenaiRequest, ChoicesLogprobsAndReasoningFromEvents) {
  auto r = parse_ok(chat, chat_body(R"("n":2,"logprobs":true,"top_logprobs":1)"));
  wire::output_event think = content_event(1, "Hmm.\n");
  think.kind = wire::output_event_kind::reasoning;
  const std::string out = event_lines({
      content_event(0, "Hi"),
      logprobs_event(0, "Hi", -0.5f, {{"Hi", -0.5f}}),
      think,
      content_event(1, "Yo"),
      logprobs_event(1, "Yo", -1.25f, {{"Hey", -0.75f}}),
      finish_event(1, "length"),
  });
  json body =
      json::parse(openai_response_body(r, 1, 1, out, done_of(1, "end_of_generation", 3, 4)));
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");  // the job's end, no finish event
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["message"]["content"], "Yo");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
  EXPECT_FALSE(body["choices"][1]["message"].contains("reasoning_content"))
      << "reasoning only when asked for";
  EXPECT_EQ(
      body["choices"][1]["logprobs"],
      json::parse(R"({"content":[{"token":"Yo","logprob":-1.25,"bytes":[89,111],)"
                  R"("top_logprobs":[{"token":"Hey","logprob":-0.75,"bytes":[72,101,121]}]}],)"
                  R"("refusal":null})"));
  auto asked = parse_ok(chat, chat_body(R"("n":2,"include_reasoning":true)"));
  body = json::parse(openai_response_body(asked, 1, 1, out, done_of(1, "end_of_generation", 3, 4)));
  EXPECT_EQ(body["choices"][1]["message"]["reasoning_content"], "Hmm.");
  EXPECT_EQ(body["choices"][0]["logprobs"], nullptr) << "logprobs only when asked for";
  // n choices are answered even when one wrote nothing.
  body = json::parse(openai_response_body(asked, 1, 1, "", done_of(1, "max_tokens", 3, 0)));
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["message"]["content"], "");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
}

TEST(OpenaiRequest, ACompletionsLogprobsHasTheLegacyShape) {
  auto r = parse_ok(completions, R"({"model":"m","prompt":"a","logprobs":2})");
  const std::string out = event_lines({
      content_event(0, " upon"),
      logprobs_event(0, " up", -0.25f, {{" up", -0.25f}, {" in", -2.0f}}),
      logprobs_event(0, "on", -0.5f, {{"on", -0.5f}, {"to", -1.5f}}),
  });
  json body = json::parse(openai_response_body(r, 2, 2, out, done_of(2, "max_tokens", 1, 2)));
  EXPECT_EQ(body["choices"][0]["text"], " upon");
  EXPECT_EQ(body["choices"][0]["logprobs"],
            json::parse(R"({"tokens":[" up","on"],"token_logprobs":[-0.25,-0.5],)"
                        R"("top_logprobs":[{" up":-0.25," in":-2.0},{"on":-0.5,"to":-1.5}],)"
                        R"("text_offset":[0,3]})"));
}

TEST(OpenaiRequest, OutputThatIsNotEventsIsAServerError) {
  auto r = parse_ok(chat, chat_body(R"("n":2)"));
  auto res = openai_response(r, 6, 1, "plain text\n", done_of(6, "max_tokens", 1, 1));
  EXPECT_EQ(res.status, 500);
  EXPECT_NE(res.body.find("job 6's output: output event plain text"), std::string::npos)
      << res.body;
  res = openai_response(r, 6, 1,
                        R"({"i":9,"content":"x"})"
                        "\n",
                        done_of(6, "max_tokens", 1, 1));
  EXPECT_EQ(res.status, 500);
  EXPECT_NE(res.body.find("choice 9"), std::string::npos) << res.body;
  res = openai_response(r, 6, 1, R"({"content":"x"})", done_of(6, "max_tokens", 1, 1));
  EXPECT_EQ(res.status, 500) << "an unended line";
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
