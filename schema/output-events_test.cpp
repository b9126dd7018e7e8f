// Output events: every kind survives a write and a read, the stream may be cut anywhere (even
// inside a UTF-8 character), and a malformed line is an error that spends the reader.
#include "schema/output-events.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace hearth::wire {
namespace {

std::vector<output_event> sample_events() {
  std::vector<output_event> v;
  v.push_back({.choice = 0, .kind = output_event_kind::reasoning, .text = "think \"hard\"\n"});
  v.push_back({.choice = 0, .kind = output_event_kind::content, .text = "Grüße, 世界"});
  output_event call{.choice = 1, .kind = output_event_kind::tool_call};
  call.call = {"call_1", "get_weather", R"({"city": "Oslo"})"};
  v.push_back(call);
  output_event lp{.choice = 2, .kind = output_event_kind::logprobs};
  lp.probs.push_back({{"Hel", {72, 101, 108}, -0.25f},
                      {{"Hel", {72, 101, 108}, -0.25f}, {"Hi", {72, 105}, -2.5f}}});
  lp.probs.push_back({{"\xe4", {0xe4}, -1.0f}, {}});
  v.push_back(lp);
  v.push_back({.choice = 1, .kind = output_event_kind::finish, .text = "tool_calls"});
  return v;
}

void expect_same(const output_event& a, const output_event& b) {
  EXPECT_EQ(a.choice, b.choice);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.call.id, b.call.id);
  EXPECT_EQ(a.call.name, b.call.name);
  EXPECT_EQ(a.call.arguments, b.call.arguments);
  ASSERT_EQ(a.probs.size(), b.probs.size());
  for (size_t i = 0; i < a.probs.size(); ++i) {
    EXPECT_EQ(a.probs[i].sampled.bytes, b.probs[i].sampled.bytes);
    EXPECT_FLOAT_EQ(a.probs[i].sampled.logprob, b.probs[i].sampled.logprob);
    EXPECT_EQ(a.probs[i].top.size(), b.probs[i].top.size());
  }
}

TEST(OutputEvents, EveryKindRoundTripsWhateverWhereTheStreamIsCut) {
  auto events = sample_events();
  std::string stream;
  for (const auto& e : events) stream += output_event_line(e);
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    output_event_reader r;
    auto a = r.feed(stream.substr(0, cut));
    ASSERT_TRUE(a) << a.message();
    auto b = r.feed(stream.substr(cut));
    ASSERT_TRUE(b) << b.message();
    a->insert(a->end(), b->begin(), b->end());
    ASSERT_EQ(a->size(), events.size()) << "cut at " << cut;
    for (size_t i = 0; i < events.size(); ++i) expect_same((*a)[i], events[i]);
    EXPECT_EQ(r.pending(), 0u);
  }
}

TEST(OutputEvents, ALineIsOneEventEvenWhenTheTextHasNewlines) {
  std::string line = output_event_line({.kind = output_event_kind::content, .text = "a\nb\n"});
  EXPECT_EQ(line.find('\n'), line.size() - 1);
}

TEST(OutputEvents, InvalidUtf8TextIsReplacedNotRefused) {
  std::string line = output_event_line({.kind = output_event_kind::content, .text = "a\xff"});
  auto e = output_events_parse(line);
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ((*e)[0].text, "a\xef\xbf\xbd");
}

TEST(OutputEvents, AnImpossibleTokensLogprobIsWrittenAsMinus9999) {
  output_event lp{.kind = output_event_kind::logprobs};
  lp.probs.push_back({{"a", {97}, -INFINITY}, {}});
  auto e = output_events_parse(output_event_line(lp));
  ASSERT_TRUE(e) << e.message();
  EXPECT_EQ((*e)[0].probs[0].sampled.logprob, -9999.0f);
  auto big = output_events_parse("{\"logprobs\":[{\"token\":\"a\",\"logprob\":-1e300}]}\n");
  ASSERT_TRUE(big) << big.message();
  EXPECT_EQ((*big)[0].probs[0].sampled.logprob, -9999.0f);
}

TEST(OutputEvents, AMalformedLineIsAnErrorAndSpendsTheReader) {
  for (std::string bad : {"not json\n", "[1]\n", "{\"i\":-1,\"content\":\"x\"}\n", "{\"what\":1}\n",
                          "{\"tool_call\":{\"id\":\"x\"}}\n", "{\"logprobs\":[{\"token\":1}]}\n",
                          "{\"logprobs\":[{\"token\":\"a\",\"logprob\":0,\"bytes\":[256]}]}\n"}) {
    output_event_reader r;
    EXPECT_FALSE(r.feed(bad)) << bad;
    EXPECT_FALSE(r.feed(output_event_line({.text = "fine"}))) << "a spent reader stays spent";
  }
  EXPECT_FALSE(output_events_parse("{\"content\":\"unended\"}")) << "no final newline";
}

TEST(OutputEvents, ALineOverTheLimitIsRefusedWithoutWaitingForItsEnd) {
  output_event_reader r;
  std::string chunk(1 << 20, 'x');
  bool refused = false;
  for (int i = 0; i < 6 && !refused; ++i) refused = !r.feed(chunk);
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace hearth::wire
