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
}

}  // namespace
}  // namespace hearth::wire
