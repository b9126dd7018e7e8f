// A job's output read as events whatever it wrote: plain text as content (a UTF-8 character cut
// across pieces held until whole, a think block as reasoning when the job kept it), output events
// cut anywhere, bad lines and choices past the bound refused for good, failover without repeats,
// choices gathered for a whole answer and their finish reasons.
#include "gateway/job-output.h"

#include <gtest/gtest.h>

namespace hearth::gateway {
namespace {

using wire::output_event;
using wire::output_event_kind;

// The events as "kind@choice:text" strings, for comparing.
std::vector<std::string> shown(const std::vector<output_event>& events) {
  static const char* kinds[] = {"content", "reasoning", "tool_call", "logprobs", "finish"};
  std::vector<std::string> out;
  for (const auto& e : events) {
    std::string text =
        e.kind == output_event_kind::tool_call ? e.call.name + e.call.arguments : e.text;
    out.push_back(std::string(kinds[int(e.kind)]) + "@" + std::to_string(e.choice) + ":" + text);
  }
  return out;
}

std::vector<std::string> feed_all(job_output_reader& r, const std::vector<std::string>& pieces) {
  std::vector<output_event> all;
  for (const auto& p : pieces) {
    auto e = r.feed(p);
    EXPECT_TRUE(e.ok()) << e.message();
    if (e) all.insert(all.end(), e->begin(), e->end());
  }
  auto rest = r.finish();
  EXPECT_TRUE(rest.ok()) << rest.message();
  if (rest) all.insert(all.end(), rest->begin(), rest->end());
  return shown(all);
}

TEST(JobOutput, PlainTextIsContentAndNeverCutsACharacter) {
  job_output_reader r({});
  auto first = r.feed("5 \xE2\x82");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(shown(*first), std::vector<std::string>{"content@0:5 "});
  auto second = r.feed("\xAC!");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(shown(*second), std::vector<std::string>{"content@0:\xE2\x82\xAC!"});
  // A cut character at the very end is given as it is.
  job_output_reader cut({});
  EXPECT_EQ(feed_all(cut, {"a\xE2\x82"}),
            (std::vector<std::string>{"content@0:a", "content@0:\xE2\x82"}));
}

TEST(JobOutput, AKeptThinkBlockIsReasoning) {
  job_output_reader r({.events = false, .split_reasoning = true});
  EXPECT_EQ(feed_all(r, {"<thi", "nk>\nWhy.\n</th", "ink>\n\nBecause."}),
            (std::vector<std::string>{"reasoning@0:Why.\n", "content@0:Because."}));
  EXPECT_EQ(job_output_mode_of(wire::job_params{}).split_reasoning, false);
  wire::job_params p;
  p.show_thinking = true;
  EXPECT_TRUE(job_output_mode_of(p).split_reasoning);
  p.api.events = true;  // the node then sends reasoning events itself
  EXPECT_FALSE(job_output_mode_of(p).split_reasoning);
  EXPECT_TRUE(job_output_mode_of(p).events);
}

TEST(JobOutput, EventsCutAnywhereReadWhole) {
  const std::string out =
      "{\"content\":\"H\\u00e9\"}\n{\"i\":1,\"tool_call\":{\"id\":\"c\",\"name\":\"f\","
      "\"arguments\":\"{}\"}}\n{\"i\":1,\"finish\":\"tool_calls\"}\n";
  for (size_t step = 1; step <= out.size(); ++step) {
    SCOPED_TRACE(step);
    job_output_reader r({.events = true});
    std::vector<std::string> pieces;
    for (size_t at = 0; at < out.size(); at += step) pieces.push_back(out.substr(at, step));
    EXPECT_EQ(feed_all(r, pieces),
              (std::vector<std::string>{"content@0:H\xC3\xA9", "tool_call@1:f{}",
                                        "finish@1:tool_calls"}));
  }
}

TEST(JobOutput, BadEventsAreRefusedForGood) {
  job_output_reader r({.events = true});
  EXPECT_FALSE(r.feed("not json\n").ok());
  auto after = r.feed("{\"content\":\"x\"}\n");
  EXPECT_FALSE(after.ok()) << "the reader is spent";
  EXPECT_FALSE(r.finish().ok());

  job_output_reader past({.events = true});
  auto e = past.feed("{\"i\":8,\"content\":\"x\"}\n");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "an output event names choice 8, past the most an answer holds (8)");
  EXPECT_FALSE(past.feed("{\"content\":\"x\"}\n").ok());

  job_output_reader unended({.events = true});
  ASSERT_TRUE(unended.feed("{\"content\":").ok());
  auto end = unended.finish();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.message(), "the job's output events end inside a line");
}

wire::job_tokens tokens(uint32_t attempt, std::string text) {
  wire::job_tokens t;
  t.attempt = attempt;
  t.text = std::move(text);
  return t;
}

TEST(JobOutput, AStreamSkipsWhatARestartedAttemptRepeats) {
  const std::string out = "{\"content\":\"Once\"}\n{\"content\":\" upon\"}\n";
  job_stream s({.events = true}, /*streaming=*/true);
  std::vector<output_event> got;
  auto take = [&](result<std::vector<output_event>> e) {
    ASSERT_TRUE(e.ok()) << e.message();
    got.insert(got.end(), e->begin(), e->end());
  };
  take(s.tokens(tokens(1, out.substr(0, 25))));
  s.restarted(2);
  take(s.tokens(tokens(2, out.substr(0, 10))));  // all had already
  take(s.tokens(tokens(2, out.substr(10))));
  take(s.finish());
  EXPECT_EQ(shown(got), (std::vector<std::string>{"content@0:Once", "content@0: upon"}));
}

TEST(JobOutput, AWholeAnswerReadsTheLastAttemptAlone) {
  job_stream s({}, /*streaming=*/false);
  EXPECT_TRUE(s.tokens(tokens(1, "Once up"))->empty());
  s.restarted(2);
  EXPECT_TRUE(s.tokens(tokens(2, "Once upon"))->empty());
  EXPECT_TRUE(s.tokens(tokens(3, "Twice"))->empty());  // an attempt known by its tokens
  auto e = s.finish();
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(shown(*e), std::vector<std::string>{"content@0:Twice"});
}

TEST(JobOutput, ChoicesAndTheirFinishReasons) {
  auto out = job_output_of(
      "{\"content\":\"a\"}\n{\"i\":2,\"tool_call\":{\"id\":\"c\",\"name\":\"f\",\"arguments\":"
      "\"{}\"}}\n{\"i\":1,\"finish\":\"length\"}\n{\"content\":\"b\"}\n",
      {.events = true}, 2);
  ASSERT_TRUE(out.ok()) << out.message();
  ASSERT_EQ(out->choices.size(), 3u);
  EXPECT_EQ(out->choices[0].content, "ab");
  EXPECT_EQ(choice_finish_reason(out->choices[0], "max_tokens"), "length");
  EXPECT_EQ(choice_finish_reason(out->choices[0], "end_of_generation"), "stop");
  EXPECT_EQ(choice_finish_reason(out->choices[1], "end_of_generation"), "length");
  EXPECT_EQ(choice_finish_reason(out->choices[2], "end_of_generation"), "tool_calls");
  EXPECT_EQ(out->choices[2].tool_calls[0].name, "f");
  // At least n choices, each empty when it wrote nothing.
  auto none = job_output_of("", {.events = true}, 3);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->choices.size(), 3u);
  EXPECT_FALSE(job_output_of("{\"content\"", {.events = true}).ok());
}

}  // namespace
}  // namespace hearth::gateway
