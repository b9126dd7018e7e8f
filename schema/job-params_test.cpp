// The one check of generation parameters (common/generation-params.h) as jobs meet it: a table of
// values each rule accepts and refuses, the exact messages, and the one copy of the wire fields.
#include "schema/job-params.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>

namespace hearth::wire {
namespace {

constexpr float nan = std::numeric_limits<float>::quiet_NaN();
constexpr float inf = std::numeric_limits<float>::infinity();

struct param_case {
  const char* what;
  std::function<void(job_params&)> set;
  std::string error;  // "" when the value is good
};

TEST(JobParams, TheDefaultsPass) {
  EXPECT_EQ(job_params_check(job_params{}).message, "");
  EXPECT_EQ(generation_params_check(generation_params{}).message, "");
}

TEST(JobParams, EachRuleAcceptsItsRangeAndNamesTheParameterRangeAndValueOutsideIt) {
  const std::string long_stop(generation_max_stop_bytes, 's');
  const param_case cases[] = {
      {"max_tokens 1", [](job_params& p) { p.max_tokens = 1; }, ""},
      {"max_tokens 2^20", [](job_params& p) { p.max_tokens = 1 << 20; }, ""},
      {"max_tokens 0", [](job_params& p) { p.max_tokens = 0; },
       "max_tokens must be in [1, 1048576], got 0"},
      {"max_tokens -1", [](job_params& p) { p.max_tokens = -1; },
       "max_tokens must be in [1, 1048576], got -1"},
      {"max_tokens 2^20+1", [](job_params& p) { p.max_tokens = (1 << 20) + 1; },
       "max_tokens must be in [1, 1048576], got 1048577"},
      {"temperature 0", [](job_params& p) { p.temperature = 0; }, ""},
      {"temperature 100", [](job_params& p) { p.temperature = 100; }, ""},
      {"temperature -1", [](job_params& p) { p.temperature = -1; },
       "temperature must be finite and >= 0 (0 = greedy), got -1"},
      {"temperature -0.5", [](job_params& p) { p.temperature = -0.5f; },
       "temperature must be finite and >= 0 (0 = greedy), got -0.5"},
      {"temperature nan", [](job_params& p) { p.temperature = nan; },
       "temperature must be finite and >= 0 (0 = greedy), got nan"},
      {"temperature inf", [](job_params& p) { p.temperature = inf; },
       "temperature must be finite and >= 0 (0 = greedy), got inf"},
      {"top_k 0", [](job_params& p) { p.top_k = 0; }, ""},
      {"top_k -1", [](job_params& p) { p.top_k = -1; }, "top_k must be >= 0 (0 = off), got -1"},
      {"top_p 1", [](job_params& p) { p.top_p = 1; }, ""},
      {"top_p 1e-6", [](job_params& p) { p.top_p = 1e-6f; }, ""},
      {"top_p 0", [](job_params& p) { p.top_p = 0; }, "top_p must be in (0, 1], got 0"},
      {"top_p 1.5", [](job_params& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {"top_p nan", [](job_params& p) { p.top_p = nan; }, "top_p must be in (0, 1], got nan"},
      {"min_p 0", [](job_params& p) { p.min_p = 0; }, ""},
      {"min_p 1", [](job_params& p) { p.min_p = 1; }, ""},
      {"min_p -0.25", [](job_params& p) { p.min_p = -0.25f; },
       "min_p must be in [0, 1], got -0.25"},
      {"min_p 2", [](job_params& p) { p.min_p = 2; }, "min_p must be in [0, 1], got 2"},
      {"repeat_penalty 0.5", [](job_params& p) { p.repeat_penalty = 0.5f; }, ""},
      {"repeat_penalty 0", [](job_params& p) { p.repeat_penalty = 0; },
       "repeat_penalty must be finite and > 0 (1 = off), got 0"},
      {"repeat_penalty inf", [](job_params& p) { p.repeat_penalty = inf; },
       "repeat_penalty must be finite and > 0 (1 = off), got inf"},
      {"repeat_last_n -1", [](job_params& p) { p.repeat_last_n = -1; }, ""},
      {"repeat_last_n 0", [](job_params& p) { p.repeat_last_n = 0; }, ""},
      {"repeat_last_n -2", [](job_params& p) { p.repeat_last_n = -2; },
       "repeat_last_n must be >= -1 (0 = off, -1 = whole history), got -2"},
      {"presence_penalty -2", [](job_params& p) { p.presence_penalty = -2; }, ""},
      {"presence_penalty nan", [&](job_params& p) { p.presence_penalty = nan; },
       "presence_penalty must be finite, got nan"},
      {"frequency_penalty 2", [](job_params& p) { p.frequency_penalty = 2; }, ""},
      {"frequency_penalty inf", [&](job_params& p) { p.frequency_penalty = inf; },
       "frequency_penalty must be finite, got inf"},
      {"16 stop strings", [](job_params& p) { p.stop.assign(16, "x"); }, ""},
      {"17 stop strings", [](job_params& p) { p.stop.assign(17, "x"); },
       "the number of stop strings must be at most 16, got 17"},
      {"a 256-byte stop string",
       [&](job_params& p) {
         p.stop = {"a", long_stop};
       },
       ""},
      {"an empty stop string",
       [](job_params& p) {
         p.stop = {"a", ""};
       },
       "stop string 2's length must be 1 to 256 bytes, got 0"},
      {"a 257-byte stop string", [&](job_params& p) { p.stop = {long_stop + "s"}; },
       "stop string 1's length must be 1 to 256 bytes, got 257"},
  };
  for (const param_case& c : cases) {
    job_params p;
    c.set(p);
    EXPECT_EQ(job_params_check(p).message, c.error) << c.what;
  }
}

// Callers act on the code and the field, never on the message's words.
TEST(JobParams, ARefusalNamesItsFieldAndKind) {
  struct refusal_case {
    std::function<void(job_params&)> set;
    param_check_code code;
    const char* param;
  };
  const refusal_case cases[] = {
      {[](job_params& p) { p.max_tokens = 0; }, param_check_code::out_of_range, "max_tokens"},
      {[](job_params& p) { p.temperature = -1; }, param_check_code::out_of_range, "temperature"},
      {[](job_params& p) { p.top_k = -1; }, param_check_code::out_of_range, "top_k"},
      {[](job_params& p) { p.top_p = 0; }, param_check_code::out_of_range, "top_p"},
      {[](job_params& p) { p.presence_penalty = nan; }, param_check_code::out_of_range,
       "presence_penalty"},
      {[](job_params& p) { p.stop.assign(17, "s"); }, param_check_code::too_many, "stop"},
      {[](job_params& p) { p.stop = {""}; }, param_check_code::out_of_range, "stop"},
      {[](job_params& p) { p.chat_template = "Not A Name"; }, param_check_code::not_a_name,
       "chat_template"},
  };
  for (const refusal_case& c : cases) {
    job_params p;
    c.set(p);
    const param_check e = job_params_check(p);
    EXPECT_FALSE(e.ok()) << c.param;
    EXPECT_EQ(e.code, c.code) << c.param;
    EXPECT_EQ(e.param, c.param);
    EXPECT_FALSE(e.message.empty()) << c.param;
  }
  const param_check fine = job_params_check(job_params{});
  EXPECT_TRUE(fine.ok());
  EXPECT_EQ(fine.param, "");
}

TEST(JobParams, RequestsAreStricterThanTheSampler) {
  // The sampler runs a negative temperature as greedy and a negative top_k as off; a request
  // must say 0, so that `--temp -1` is an error rather than a silent greedy run.
  sampler_params s;
  s.temperature = -1;
  s.top_k = -1;
  EXPECT_EQ(sampler_params_check(s).message, "");
  EXPECT_NE(generation_params_check({.sampling = s}).message, "");
}

// api_params (issue 56): each rule's good and bad values, the exact messages and the field named.
TEST(JobParams, ApiParamsRulesNameTheFieldAndTheValue) {
  const std::string tool = R"({"type":"function","function":{"name":"get_weather"}})";
  const std::string tools = "[" + tool + "]";
  std::string many_tools = "[" + tool;
  for (int i = 1; i < 129; ++i) many_tools += "," + tool;
  many_tools += "]";
  struct api_case {
    const char* what;
    std::function<void(api_params&)> set;
    std::string param;  // "" when the value is good
    std::string error;
  };
  const api_case cases[] = {
      {"the defaults", [](api_params&) {}, "", ""},
      {"n 8 with events",
       [](api_params& a) {
         a.n = 8;
         a.events = true;
       },
       "", ""},
      {"n 0", [](api_params& a) { a.n = 0; }, "n", "n must be in [1, 8], got 0"},
      {"n 9", [](api_params& a) { a.n = 9; }, "n", "n must be in [1, 8], got 9"},
      {"n 2 without events", [](api_params& a) { a.n = 2; }, "events",
       "events must be on when tools, logprobs or n > 1 are asked for (their results are output "
       "events)"},
      {"top_logprobs 20",
       [](api_params& a) {
         a.logprobs = a.events = true;
         a.top_logprobs = 20;
       },
       "", ""},
      {"top_logprobs 21",
       [](api_params& a) {
         a.logprobs = a.events = true;
         a.top_logprobs = 21;
       },
       "top_logprobs", "top_logprobs must be in [0, 20], got 21"},
      {"top_logprobs -1", [](api_params& a) { a.top_logprobs = -1; }, "top_logprobs",
       "top_logprobs must be in [0, 20], got -1"},
      {"top_logprobs without logprobs",
       [](api_params& a) {
         a.events = true;
         a.top_logprobs = 3;
       },
       "top_logprobs", "top_logprobs must be 0 when logprobs is off, got 3"},
      {"logprobs without events", [](api_params& a) { a.logprobs = true; }, "events",
       "events must be on when tools, logprobs or n > 1 are asked for (their results are output "
       "events)"},
      {"logit_bias -100 and 100",
       [](api_params& a) {
         a.logit_bias = {{1, -100}, {2, 100}};
       },
       "", ""},
      {"logit_bias 100.5",
       [](api_params& a) {
         a.logit_bias = {{7, 100.5f}};
       },
       "logit_bias", "the logit_bias of token 7 must be in [-100, 100], got 100.5"},
      {"logit_bias nan",
       [](api_params& a) {
         a.logit_bias = {{7, nan}};
       },
       "logit_bias", "logit_bias must be finite, got nan"},  // the sampler's rule, checked first
      {"logit_bias token -1",
       [](api_params& a) {
         a.logit_bias = {{-1, 1}};
       },
       "logit_bias", "a logit_bias token must be >= 0, got -1"},
      {"logit_bias twice",
       [](api_params& a) {
         a.logit_bias = {{5, 1}, {3, 1}, {5, 2}};
       },
       "logit_bias", "logit_bias must name each token once, got token 5 twice"},
      {"300 logit_bias",
       [](api_params& a) {
         for (int32_t i = 0; i < 300; ++i) a.logit_bias.push_back({i, 1});
       },
       "", ""},
      {"301 logit_bias",
       [](api_params& a) {
         for (int32_t i = 0; i < 301; ++i) a.logit_bias.push_back({i, 1});
       },
       "logit_bias", "the number of logit_bias entries must be at most 300, got 301"},
      {"tools",
       [&](api_params& a) {
         a.tools = tools;
         a.events = true;
       },
       "", ""},
      {"tools without events", [&](api_params& a) { a.tools = tools; }, "events",
       "events must be on when tools, logprobs or n > 1 are asked for (their results are output "
       "events)"},
      {"tools not JSON", [](api_params& a) { a.tools = "[{\"type\": }]"; }, "tools",
       "tools must be JSON, got expected a value at byte 10"},
      {"tools an object", [&](api_params& a) { a.tools = tool; }, "tools",
       "tools must be an array, got an object"},
      {"tools of strings", [](api_params& a) { a.tools = R"([{}, "get_weather"])"; }, "tools",
       "tools must be an array of objects, got an element that is not"},
      {"129 tools", [&](api_params& a) { a.tools = many_tools; }, "tools",
       "the number of tools must be at most 128, got 129"},
      {"tools over 256 KiB",
       [](api_params& a) { a.tools = "[\"" + std::string(256 << 10, 'x') + "\"]"; }, "tools",
       "tools's length must be at most 262144 bytes, got 262148"},
      {"tool_choice required",
       [&](api_params& a) {
         a.tools = tools;
         a.events = true;
         a.tool_choice = "required";
       },
       "", ""},
      {"tool_choice named",
       [&](api_params& a) {
         a.tools = tools;
         a.events = true;
         a.tool_choice = "function:get_weather";
       },
       "", ""},
      {"tool_choice none without tools", [](api_params& a) { a.tool_choice = "none"; }, "", ""},
      {"tool_choice required without tools", [](api_params& a) { a.tool_choice = "required"; },
       "tool_choice", "tool_choice must be auto or none without tools, got 'required'"},
      {"tool_choice named, tools empty",
       [](api_params& a) {
         a.tools = "[]";
         a.events = true;
         a.tool_choice = "function:f";
       },
       "tool_choice", "tool_choice must be auto or none without tools, got 'function:f'"},
      {"tool_choice unknown", [](api_params& a) { a.tool_choice = "any\n\xff"; }, "tool_choice",
       "tool_choice must be auto, none, required or function:NAME, got 'any\\x0a\\xff'"},
      {"tool_choice bad name",
       [&](api_params& a) {
         a.tools = tools;
         a.events = true;
         a.tool_choice = "function:get weather";
       },
       "tool_choice",
       "tool_choice's function name must be 1 to 64 of a-z, A-Z, 0-9, '_', '-', got 'get "
       "weather'"},
      {"tool_choice empty name",
       [&](api_params& a) {
         a.tools = tools;
         a.events = true;
         a.tool_choice = "function:";
       },
       "tool_choice",
       "tool_choice's function name must be 1 to 64 of a-z, A-Z, 0-9, '_', '-', got ''"},
      {"json_schema", [](api_params& a) { a.json_schema = R"({"type":"object"})"; }, "", ""},
      {"json_schema an array", [](api_params& a) { a.json_schema = "[]"; }, "json_schema",
       "json_schema must be an object, got an array"},
      {"json_schema cut short", [](api_params& a) { a.json_schema = "{\"type\":\"obj"; },
       "json_schema", "json_schema must be JSON, got an unended string at byte 12"},
      {"json_schema too deep",
       [](api_params& a) { a.json_schema = std::string(65, '[') + std::string(65, ']'); },
       "json_schema", "json_schema must be JSON, got nested deeper than 64 at byte 64"},
      {"grammar", [](api_params& a) { a.grammar = "root ::= \"yes\" | \"no\""; }, "", ""},
      {"grammar over 256 KiB", [](api_params& a) { a.grammar = std::string((256 << 10) + 1, 'x'); },
       "grammar", "grammar's length must be at most 262144 bytes, got 262145"},
      {"grammar and json_schema",
       [](api_params& a) {
         a.grammar = "root ::= \"{}\"";
         a.json_schema = "{}";
       },
       "grammar", "grammar must be empty when json_schema is given (one constraint at a time)"},
      {"template_kwargs", [](api_params& a) { a.template_kwargs = R"({"enable_thinking":false})"; },
       "", ""},
      {"template_kwargs a string", [](api_params& a) { a.template_kwargs = R"("x")"; },
       "template_kwargs", "template_kwargs must be an object, got a string"},
  };
  for (const api_case& c : cases) {
    job_params p;
    c.set(p.api);
    const param_check e = job_params_check(p);
    EXPECT_EQ(e.param, c.param) << c.what;
    EXPECT_EQ(e.message, c.error) << c.what;
    EXPECT_EQ(e.ok(), c.param.empty()) << c.what;
  }
}

TEST(JobParams, AnAttemptStreamsMaxTokensPerChoice) {
  job_params p;
  p.max_tokens = 100;
  EXPECT_EQ(job_params_max_stream_tokens(p), 100u);
  p.api.n = 8;
  EXPECT_EQ(job_params_max_stream_tokens(p), 800u);
  p.max_tokens = 1 << 20;
  EXPECT_EQ(job_params_max_stream_tokens(p), 8u << 20);
  p.api.n = 0;  // refused by the check; counted as one choice
  EXPECT_EQ(job_params_max_stream_tokens(p), 1u << 20);
  p.max_tokens = -5;
  EXPECT_EQ(job_params_max_stream_tokens(p), 0u);
}

TEST(JobParams, EveryWireFieldIsCopiedOnce) {
  job_params p;
  p.max_tokens = 7;
  p.temperature = 0.25f;
  p.top_k = 3;
  p.top_p = 0.5f;
  p.min_p = 0.125f;
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 9;
  p.seed = 1234;
  p.stop = {"a", "b"};
  p.presence_penalty = -0.5f;
  p.frequency_penalty = 1.75f;
  p.api.logit_bias = {{5, -100}, {9, 2.5f}};
  const generation_params g = generation_params_of(p);
  EXPECT_EQ(g.max_tokens, 7);
  EXPECT_EQ(g.stop, p.stop);
  EXPECT_EQ(g.sampling.temperature, 0.25f);
  EXPECT_EQ(g.sampling.top_k, 3);
  EXPECT_EQ(g.sampling.top_p, 0.5f);
  EXPECT_EQ(g.sampling.min_p, 0.125f);
  EXPECT_EQ(g.sampling.repeat_penalty, 1.5f);
  EXPECT_EQ(g.sampling.repeat_last_n, 9);
  EXPECT_EQ(g.sampling.seed, 1234u);
  EXPECT_EQ(g.sampling.frequency_penalty, 1.75f);
  EXPECT_EQ(g.sampling.presence_penalty, -0.5f);
  ASSERT_EQ(g.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(g.sampling.logit_bias[0].token, 5);
  EXPECT_EQ(g.sampling.logit_bias[0].bias, -100.0f);
  EXPECT_EQ(g.sampling.logit_bias[1].token, 9);
  EXPECT_EQ(g.sampling.logit_bias[1].bias, 2.5f);
}

}  // namespace
}  // namespace hearth::wire
