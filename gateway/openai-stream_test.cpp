// A completion answered from job events, as the client sees it: the whole response, or the SSE
// chunks in OpenAI's format (first chunk's role, one id, finish_reason only at the end, usage,
// [DONE]); errors before and after the status line; failover without repeated text; UTF-8 never
// cut; keep-alives. The responder here records what a client would receive.
#include "gateway/openai-stream.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "gateway/job-events-testing.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

// What went to the client, in order: "start", "event:<data>", "comment:<text>", "end", or
// "reply:<status>:<body>".
class recording_responder : public responder {
 public:
  std::vector<std::string> log;
  void reply(http_response r) override {
    log.push_back("reply:" + std::to_string(r.status) + ":" + r.body);
  }
  void start_events() override { log.push_back("start"); }
  void event(std::string_view data) override { log.push_back("event:" + std::string(data)); }
  void comment(std::string_view text) override { log.push_back("comment:" + std::string(text)); }
  void end_events() override { log.push_back("end"); }
  bool closed() const override { return false; }
  void on_close(std::function<void()>) override {}

  // The events' data parsed, [DONE] left out.
  std::vector<json> chunks() const {
    std::vector<json> out;
    for (const auto& l : log) {
      if (l.starts_with("event:") && l != "event:[DONE]") out.push_back(json::parse(l.substr(6)));
    }
    return out;
  }
  // The streamed text, joined.
  std::string text() const {
    std::string t;
    for (const auto& c : chunks()) {
      if (c["choices"].empty()) continue;
      const json& choice = c["choices"][0];
      if (choice.contains("text")) t += choice["text"].get<std::string>();
      if (choice.contains("delta") && choice["delta"].contains("content")) {
        t += choice["delta"]["content"].get<std::string>();
      }
    }
    return t;
  }
};

openai_request request_of(openai_endpoint e, bool stream, bool include_usage = false) {
  openai_request r;
  r.endpoint = e;
  r.submit.model = "stories";
  r.stream = stream;
  r.include_usage = include_usage;
  return r;
}

// A chat request with include_reasoning, for a plain job: the job keeps the think block in its
// text, as parse_openai_request sets show_thinking for it.
openai_request reasoning_request_of(bool stream) {
  auto r = request_of(openai_endpoint::chat_completions, stream);
  r.include_reasoning = true;
  r.submit.params.show_thinking = true;
  return r;
}

// Job 9's events.
wire::job_tokens tokens(uint32_t attempt, uint64_t seq, std::string text) {
  return testing::job_tokens_of(9, attempt, seq, std::move(text));
}

wire::job_done completed(const char* stop_reason = "max_tokens") {
  return testing::job_completed(9, stop_reason, 4, 3);
}

wire::job_done prompt_too_long() {
  wire::job_done d = testing::job_completed(9, "prompt_too_long", 0, 0);
  d.state = wire::job_state::failed;
  d.error = "the prompt has 600 tokens, more than the 512 of a slot's context";
  return d;
}

struct fixture {
  std::shared_ptr<recording_responder> out = std::make_shared<recording_responder>();
  openai_answer answer;
  explicit fixture(openai_request r) : answer(std::move(r), 1700000000, out) { answer.accepted(9); }
};

TEST(OpenaiStream, AWholeResponseWaitsForTheJobAndCarriesItsText) {
  fixture f(request_of(openai_endpoint::chat_completions, false));
  EXPECT_FALSE(f.answer.event(wire::job_queued{9, 0}));
  EXPECT_FALSE(f.answer.event(wire::job_running{9, 1, "desk"}));
  EXPECT_FALSE(f.answer.event(tokens(1, 0, "Once")));
  EXPECT_FALSE(f.answer.event(tokens(1, 1, " upon")));
  EXPECT_TRUE(f.out->log.empty());
  EXPECT_TRUE(f.answer.event(completed()));
  ASSERT_EQ(f.out->log.size(), 1u);
  ASSERT_TRUE(f.out->log[0].starts_with("reply:200:"));
  json body = json::parse(f.out->log[0].substr(10));
  EXPECT_EQ(body["id"], "chatcmpl-9");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Once upon");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
  // Nothing after the end.
  EXPECT_TRUE(f.answer.event(tokens(1, 2, "late")));
  EXPECT_EQ(f.out->log.size(), 1u);
}

TEST(OpenaiStream, AChatStreamIsOpenaisChunkSequence) {
  fixture f(request_of(openai_endpoint::chat_completions, true));
  f.answer.event(wire::job_queued{9, 0});
  EXPECT_TRUE(f.out->log.empty()) << "the status line waits for the first token";
  f.answer.event(tokens(1, 0, "Once"));
  f.answer.event(tokens(1, 1, " upon"));
  f.answer.event(completed("end_of_generation"));
  const auto& log = f.out->log;
  ASSERT_EQ(log.size(), 7u);
  EXPECT_EQ(log[0], "start");
  EXPECT_EQ(log[1],
            R"(event:{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,)"
            R"("model":"stories","choices":[{"index":0,"delta":{"role":"assistant","content":""},)"
            R"("logprobs":null,"finish_reason":null}]})");
  EXPECT_EQ(log[2],
            R"(event:{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,)"
            R"("model":"stories","choices":[{"index":0,"delta":{"content":"Once"},)"
            R"("logprobs":null,"finish_reason":null}]})");
  EXPECT_EQ(log[4],
            R"(event:{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,)"
            R"("model":"stories","choices":[{"index":0,"delta":{},)"
            R"("logprobs":null,"finish_reason":"stop"}]})");
  EXPECT_EQ(log[5], "event:[DONE]");
  EXPECT_EQ(log[6], "end");
  EXPECT_EQ(f.out->text(), "Once upon");
}

// include_reasoning: the job streams the think block (show_thinking), split off here; tags cut
// across tokens included.
TEST(OpenaiStream, ReasoningIsStreamedAsReasoningContent) {
  fixture f(reasoning_request_of(true));
  for (const char* t : {"<thi", "nk>\nThe user", " greets.\n</", "think>\n\nHel", "lo"})
    f.answer.event(tokens(1, 0, t));
  f.answer.event(completed("end_of_generation"));
  std::string reasoning, content;
  for (const auto& c : f.out->chunks()) {
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
    if (delta.contains("content")) content += delta["content"];
    EXPECT_EQ(delta.dump().find("think>"), std::string::npos) << delta.dump();
  }
  EXPECT_EQ(reasoning, "The user greets.\n");
  EXPECT_EQ(content, "Hello");
}

TEST(OpenaiStream, AWholeResponseCarriesTheReasoningApart) {
  fixture f(reasoning_request_of(false));
  f.answer.event(tokens(1, 0, "<think>\nHmm.\n</think>\n\n"));
  f.answer.event(tokens(1, 1, "Hi"));
  f.answer.event(completed());
  ASSERT_EQ(f.out->log.size(), 1u);
  json body = json::parse(f.out->log[0].substr(10));
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "Hmm.");
  // Without include_reasoning the text is passed on as the node sent it (the node hid it).
  fixture plain(request_of(openai_endpoint::chat_completions, false));
  plain.answer.event(tokens(1, 0, "Hi"));
  plain.answer.event(completed());
  body = json::parse(plain.out->log[0].substr(10));
  EXPECT_FALSE(body["choices"][0]["message"].contains("reasoning_content"));
}

// The think filter's held tail (an unfinished tag) is answer text at the end of a stream.
TEST(OpenaiStream, AnUnfinishedTagIsFlushedAtTheEnd) {
  fixture f(reasoning_request_of(true));
  f.answer.event(tokens(1, 0, "<thi"));
  f.answer.event(completed());
  EXPECT_EQ(f.out->text(), "<thi");
}

TEST(OpenaiStream, ACompletionStreamHasNoRoleChunkAndUsageWhenAsked) {
  fixture f(request_of(openai_endpoint::completions, true, true));
  f.answer.event(tokens(1, 0, " upon"));
  f.answer.event(completed());
  auto chunks = f.out->chunks();
  ASSERT_EQ(chunks.size(), 3u);
  for (const auto& c : chunks) {
    EXPECT_EQ(c["id"], "cmpl-9");
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_EQ(c["created"], 1700000000);
  }
  EXPECT_EQ(chunks[0]["choices"][0]["text"], " upon");
  EXPECT_EQ(chunks[0]["usage"], nullptr);
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[2]["choices"], json::array());
  EXPECT_EQ(chunks[2]["usage"],
            (json{{"prompt_tokens", 4}, {"completion_tokens", 3}, {"total_tokens", 7}}));
  EXPECT_EQ(f.out->log.back(), "end");
  EXPECT_EQ(f.out->log[f.out->log.size() - 2], "event:[DONE]");
}

TEST(OpenaiStream, AJobWithoutTextStillStreamsWholeChunks) {
  fixture f(request_of(openai_endpoint::chat_completions, true));
  f.answer.event(completed());
  ASSERT_EQ(f.out->log.size(), 5u);
  EXPECT_EQ(f.out->log[0], "start");
  EXPECT_EQ(f.out->chunks().size(), 2u);
}

TEST(OpenaiStream, AFailureBeforeAnyTextIsAnHttpError) {
  for (bool stream : {false, true}) {
    fixture f(request_of(openai_endpoint::chat_completions, stream));
    EXPECT_TRUE(f.answer.event(prompt_too_long()));
    ASSERT_EQ(f.out->log.size(), 1u);
    ASSERT_TRUE(f.out->log[0].starts_with("reply:400:"));
    EXPECT_EQ(json::parse(f.out->log[0].substr(10))["error"]["message"],
              "the prompt has 600 tokens, more than the 512 of a slot's context");
  }
}

TEST(OpenaiStream, ARefusedSubmitIsAnHttpError) {
  fixture f(request_of(openai_endpoint::completions, true));
  f.answer.refused({false, wire::error_code::queue_full, "the queue is full"});
  ASSERT_EQ(f.out->log.size(), 1u);
  EXPECT_TRUE(f.out->log[0].starts_with("reply:429:"));
  EXPECT_TRUE(f.answer.ended());
}

TEST(OpenaiStream, AFailureAfterTextIsAnErrorEventAndNoDone) {
  fixture f(request_of(openai_endpoint::completions, true));
  f.answer.event(tokens(1, 0, "Once"));
  wire::job_done d = completed();
  d.state = wire::job_state::failed;
  d.error = "the node died three times";
  EXPECT_TRUE(f.answer.event(d));
  const auto& log = f.out->log;
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(json::parse(log[2].substr(6))["error"]["message"],
            "job 9 failed: the node died three times");
  EXPECT_EQ(log[3], "end");
}

TEST(OpenaiStream, ALostFollowIsAnErrorToo) {
  fixture f(request_of(openai_endpoint::chat_completions, false));
  f.answer.event(tokens(1, 0, "Once"));
  EXPECT_TRUE(f.answer.event(link_failure{true, wire::error_code::internal, "broker gone"}));
  EXPECT_TRUE(f.out->log[0].starts_with("reply:503:"));
}

TEST(OpenaiStream, ARestartedAttemptDoesNotRepeatWhatWasStreamed) {
  fixture f(request_of(openai_endpoint::completions, true));
  f.answer.event(tokens(1, 0, "Once up"));
  f.answer.event(tokens(1, 1, "on a"));
  f.answer.event(wire::job_restarted{9, 2, "node lost"});
  // The same seed gives the same text: the first 11 bytes are the client's already.
  f.answer.event(tokens(2, 0, "Once"));
  f.answer.event(tokens(2, 1, " upon"));
  f.answer.event(tokens(2, 2, " a time"));
  f.answer.event(completed());
  EXPECT_EQ(f.out->text(), "Once upon a time");
}

TEST(OpenaiStream, AWholeResponseKeepsOnlyTheLastAttemptsText) {
  fixture f(request_of(openai_endpoint::completions, false));
  f.answer.event(tokens(1, 0, "Once up"));
  f.answer.event(wire::job_restarted{9, 2, "node lost"});
  f.answer.event(tokens(2, 0, "Once upon"));
  // ... and an attempt known only by its tokens (a watch taken up again) too.
  f.answer.event(tokens(3, 0, "Once upon a"));
  f.answer.event(completed());
  EXPECT_EQ(json::parse(f.out->log[0].substr(10))["choices"][0]["text"], "Once upon a");
}

TEST(OpenaiStream, AUtf8CharacterSplitAcrossTokensIsSentWhole) {
  fixture f(request_of(openai_endpoint::completions, true));
  f.answer.event(tokens(1, 0, "5 \xE2\x82"));
  f.answer.event(tokens(1, 1, "\xAC!"));
  f.answer.event(completed());
  auto chunks = f.out->chunks();
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "5 ");
  EXPECT_EQ(chunks[1]["choices"][0]["text"], "\xE2\x82\xAC!");
}

TEST(OpenaiStream, KeepAlivesStartAWaitingStreamAndStayQuietWhileTextFlows) {
  fixture f(request_of(openai_endpoint::chat_completions, true));
  f.answer.keep_alive();
  ASSERT_EQ(f.out->log.size(), 3u);
  EXPECT_EQ(f.out->log[0], "start");
  EXPECT_EQ(f.out->log[2], "comment:keep-alive");
  f.answer.keep_alive();
  EXPECT_EQ(f.out->log.size(), 4u);
  f.answer.event(tokens(1, 0, "Once"));
  f.answer.keep_alive();
  EXPECT_EQ(f.out->log.size(), 5u) << "text went out since the last one";
  // An error now is an event: the status line has gone.
  f.answer.event(prompt_too_long());
  EXPECT_TRUE(f.out->log[5].starts_with("event:{\"error\""));

  fixture whole(request_of(openai_endpoint::chat_completions, false));
  whole.answer.keep_alive();
  EXPECT_TRUE(whole.out->log.empty());
}

// Output events (a job with tools, logprobs or n > 1), cut anywhere across token messages.
std::string event_lines(const std::vector<std::string>& json_lines) {
  std::string s;
  for (const auto& l : json_lines) s += l + "\n";
  return s;
}

openai_request events_request(openai_endpoint e, bool stream, int32_t n = 1) {
  openai_request r = request_of(e, stream);
  r.submit.params.api.events = true;
  r.submit.params.api.n = n;
  return r;
}

// Feeds `output` in pieces of `step` bytes.
void feed(fixture& f, const std::string& output, size_t step) {
  uint64_t seq = 0;
  for (size_t at = 0; at < output.size(); at += step) {
    f.answer.event(tokens(1, seq++, output.substr(at, step)));
  }
}

TEST(OpenaiStream, AToolCallStreamsAsOpenaisToolCallChunks) {
  const std::string out = event_lines({
      R"({"content":"Checking."})",
      R"({"tool_call":{"id":"call_1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}})",
      R"({"tool_call":{"id":"call_2","name":"get_time","arguments":"{}"}})",
      R"({"finish":"tool_calls"})",
  });
  for (size_t step : {size_t(1), size_t(7), out.size()}) {
    SCOPED_TRACE(step);
    fixture f(events_request(openai_endpoint::chat_completions, true));
    feed(f, out, step);
    f.answer.event(completed("end_of_generation"));
    auto chunks = f.out->chunks();
    std::vector<json> calls;
    std::vector<json> finishes;
    for (const auto& c : chunks) {
      const json& choice = c["choices"][0];
      if (choice["delta"].contains("tool_calls")) {
        for (const auto& call : choice["delta"]["tool_calls"]) calls.push_back(call);
      }
      if (!choice["finish_reason"].is_null()) finishes.push_back(choice["finish_reason"]);
    }
    EXPECT_EQ(f.out->text(), "Checking.");
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0],
              json::parse(R"({"index":0,"id":"call_1","type":"function","function":)"
                          R"({"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}})"));
    EXPECT_EQ(calls[1]["index"], 1);
    EXPECT_EQ(calls[1]["function"]["name"], "get_time");
    EXPECT_EQ(finishes, std::vector<json>{"tool_calls"}) << "one finish, the node's";
    EXPECT_EQ(f.out->log[f.out->log.size() - 2], "event:[DONE]");
  }
}

TEST(OpenaiStream, ACallWithoutAFinishEventStillFinishesAsToolCalls) {
  fixture f(events_request(openai_endpoint::chat_completions, true));
  feed(f, event_lines({R"({"tool_call":{"id":"c","name":"f","arguments":"{}"}})"}), 1000);
  f.answer.event(completed("end_of_generation"));
  auto chunks = f.out->chunks();
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
}

TEST(OpenaiStream, SeveralChoicesStreamByIndexEachWithItsRoleAndFinish) {
  fixture f(events_request(openai_endpoint::chat_completions, true, 2));
  feed(f,
       event_lines({R"({"content":"A"})", R"({"i":1,"content":"B"})", R"({"content":"a"})",
                    R"({"i":1,"finish":"length"})"}),
       5);
  f.answer.event(completed("end_of_generation"));
  std::map<int, std::string> text;
  std::map<int, int> roles;
  std::map<int, std::vector<json>> finishes;
  for (const auto& c : f.out->chunks()) {
    const json& choice = c["choices"][0];
    const int i = choice["index"];
    if (choice["delta"].contains("role")) ++roles[i];
    if (choice["delta"].contains("content")) text[i] += choice["delta"]["content"];
    if (!choice["finish_reason"].is_null()) finishes[i].push_back(choice["finish_reason"]);
  }
  EXPECT_EQ(text[0], "Aa");
  EXPECT_EQ(text[1], "B");
  EXPECT_EQ(roles[0], 1);
  EXPECT_EQ(roles[1], 1);
  EXPECT_EQ(finishes[0], std::vector<json>{"stop"});
  EXPECT_EQ(finishes[1], std::vector<json>{"length"});
}

TEST(OpenaiStream, LogprobsGoWithTheirChunks) {
  auto r = events_request(openai_endpoint::chat_completions, true);
  r.submit.params.api.logprobs = true;
  fixture f(std::move(r));
  feed(f,
       event_lines({R"({"content":"Hi"})",
                    R"({"logprobs":[{"token":"Hi","bytes":[72,105],"logprob":-0.5,)"
                    R"("top":[{"token":"Hi","bytes":[72,105],"logprob":-0.5}]}]})"}),
       1000);
  f.answer.event(completed("end_of_generation"));
  auto chunks = f.out->chunks();
  ASSERT_EQ(chunks.size(), 3u);  // role, text with its logprobs, finish
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "Hi");
  EXPECT_EQ(chunks[1]["choices"][0]["logprobs"],
            json::parse(R"({"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],)"
                        R"("top_logprobs":[{"token":"Hi","logprob":-0.5,"bytes":[72,105]}]}],)"
                        R"("refusal":null})"));
  EXPECT_EQ(chunks[2]["choices"][0]["logprobs"], nullptr);
}

TEST(OpenaiStream, ACompletionStreamsLogprobsWithTextOffsets) {
  auto r = events_request(openai_endpoint::completions, true);
  r.submit.params.api.logprobs = true;
  fixture f(std::move(r));
  const std::string lp1 = R"({"logprobs":[{"token":"ab","bytes":[97,98],"logprob":-1}]})";
  const std::string lp2 = R"({"logprobs":[{"token":"c","bytes":[99],"logprob":-2}]})";
  f.answer.event(tokens(1, 0, event_lines({R"({"content":"ab"})", lp1})));
  f.answer.event(tokens(1, 1, event_lines({R"({"content":"c"})", lp2})));
  f.answer.event(completed());
  auto chunks = f.out->chunks();
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["text_offset"], json::array({0}));
  EXPECT_EQ(chunks[1]["choices"][0]["logprobs"]["text_offset"], json::array({2}));
  EXPECT_EQ(chunks[1]["choices"][0]["logprobs"]["tokens"], json::array({"c"}));
  EXPECT_EQ(chunks[1]["choices"][0]["logprobs"]["top_logprobs"], json::array({json::object()}));
}

TEST(OpenaiStream, ReasoningEventsAreShownOnlyWhenAskedFor) {
  const std::string out = event_lines({R"({"reasoning":"Think."})", R"({"content":"Answer."})"});
  for (bool asked : {false, true}) {
    auto r = events_request(openai_endpoint::chat_completions, true);
    r.include_reasoning = asked;
    fixture f(std::move(r));
    feed(f, out, 3);
    f.answer.event(completed("end_of_generation"));
    std::string reasoning;
    for (const auto& c : f.out->chunks()) {
      const json& delta = c["choices"][0]["delta"];
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
    }
    EXPECT_EQ(reasoning, asked ? "Think." : "");
    EXPECT_EQ(f.out->text(), "Answer.");
  }
}

TEST(OpenaiStream, ARestartedAttemptOfEventsIsNotRepeated) {
  fixture f(events_request(openai_endpoint::chat_completions, true));
  const std::string out = event_lines({R"({"content":"Once"})", R"({"content":" upon"})"});
  f.answer.event(tokens(1, 0, out.substr(0, 20)));
  f.answer.event(wire::job_restarted{9, 2, "node lost"});
  f.answer.event(tokens(2, 0, out.substr(0, 7)));
  f.answer.event(tokens(2, 1, out.substr(7)));
  f.answer.event(completed());
  EXPECT_EQ(f.out->text(), "Once upon");
}

TEST(OpenaiStream, OutputThatIsNotEventsEndsTheStreamWithAnError) {
  fixture f(events_request(openai_endpoint::chat_completions, true));
  f.answer.event(tokens(1, 0, event_lines({R"({"content":"Once"})"})));
  f.answer.event(tokens(1, 1, "garbage\n"));
  ASSERT_TRUE(f.answer.ended());
  const auto& log = f.out->log;
  EXPECT_EQ(log.back(), "end");
  EXPECT_NE(log[log.size() - 2].find("job 9's output"), std::string::npos) << log[log.size() - 2];
  // A whole answer is a 500.
  fixture whole(events_request(openai_endpoint::chat_completions, false));
  whole.answer.event(tokens(1, 0, R"({"content":"unended")"));
  whole.answer.event(completed());
  ASSERT_EQ(whole.out->log.size(), 1u);
  EXPECT_TRUE(whole.out->log[0].starts_with("reply:500:")) << whole.out->log[0];
}

TEST(OpenaiStream, AWholeAnswerOfEventsCarriesEveryChoice) {
  fixture f(events_request(openai_endpoint::chat_completions, false, 2));
  feed(f,
       event_lines(
           {R"({"content":"A"})", R"({"i":1,"tool_call":{"id":"c","name":"f","arguments":"{}"}})"}),
       4);
  f.answer.event(completed("end_of_generation"));
  json body = json::parse(f.out->log[0].substr(10));
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["message"]["content"], "A");
  EXPECT_EQ(body["choices"][1]["message"]["content"], nullptr);
  EXPECT_EQ(body["choices"][1]["message"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "tool_calls");
}

TEST(OpenaiStream, Utf8WholePrefix) {
  EXPECT_EQ(utf8_whole_prefix(""), 0u);
  EXPECT_EQ(utf8_whole_prefix("abc"), 3u);
  EXPECT_EQ(utf8_whole_prefix("a\xE2"), 1u);
  EXPECT_EQ(utf8_whole_prefix("a\xE2\x82"), 1u);
  EXPECT_EQ(utf8_whole_prefix("a\xE2\x82\xAC"), 4u);
  EXPECT_EQ(utf8_whole_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_whole_prefix("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(utf8_whole_prefix("\xC3"), 0u);
  // Stray continuation bytes are not waited for.
  EXPECT_EQ(utf8_whole_prefix("a\x80\x80\x80\x80"), 5u);
}

}  // namespace
}  // namespace hearth::gateway
