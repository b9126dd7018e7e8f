// /v1/messages: Anthropic's request -> the chat job (system, content blocks, tool_use and
// tool_result round trips, tools and tool_choice, thinking, stop_sequences, refusals naming the
// field), errors in Anthropic's shape, and the job's output -> a message of content blocks or
// Anthropic's stream of events, as @anthropic-ai/sdk's MessageStream reads them.
#include "gateway/anthropic-api.h"

#include <gtest/gtest.h>

#include "gateway/chat-answer-testing.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;
using namespace testing;

anthropic_request parsed(const std::string& body) {
  return parsed_by<anthropic_request>(parse_anthropic_request, body);
}

TEST(anthropic_request, system_blocks_and_a_tool_round_trip_become_chat_messages) {
  auto r = parsed(R"({"model":"m","max_tokens":64,
    "system":[{"type":"text","text":"You are terse."},{"type":"text","text":"Use tools."}],
    "messages":[
      {"role":"user","content":"Weather in Oslo?"},
      {"role":"assistant","content":[
        {"type":"thinking","thinking":"Need the tool.","signature":"sig"},
        {"type":"text","text":"Checking."},
        {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}}]},
      {"role":"user","content":[
        {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"12 C"}]},
        {"type":"text","text":"And tomorrow?"}]},
      {"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"down","is_error":true}]}]})");
  const auto& m = r.submit.messages;
  ASSERT_EQ(m.size(), 7u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "You are terse.\nUse tools.");
  EXPECT_EQ(m[1].role, "user");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Checking.");
  EXPECT_EQ(m[2].reasoning_content, "Need the tool.");
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[2].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(json::parse(m[2].tool_calls[0].arguments), json::parse(R"({"city":"Oslo"})"));
  // The tool's answer comes before the user's words of the same message.
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "toolu_1");
  EXPECT_EQ(m[3].name, "get_weather");
  EXPECT_EQ(m[3].content, "12 C");
  EXPECT_EQ(m[4].role, "user");
  EXPECT_EQ(m[4].content, "And tomorrow?");
  EXPECT_EQ(m[5].tool_calls[0].arguments, "{}");
  // A message of tool results alone adds no empty user turn; a failed tool says so.
  EXPECT_EQ(m[6].role, "tool");
  EXPECT_EQ(m[6].content, "Error: down");
  EXPECT_EQ(r.submit.params.max_tokens, 64);
  // Anthropic's default: no reasoning unless asked.
  EXPECT_FALSE(r.submit.params.enable_thinking);
  EXPECT_FALSE(r.submit.params.show_thinking);
}

TEST(anthropic_request, tools_choice_sampling_thinking_and_stops) {
  auto r = parsed(R"({"model":"m","max_tokens":10,"messages":[{"role":"user","content":"x"}],
    "tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object",
              "properties":{"city":{"type":"string"}},"required":["city"]}}],
    "tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
    "temperature":0.2,"top_p":0.9,"top_k":5,"stop_sequences":["END","STOP"],
    "thinking":{"type":"enabled","budget_tokens":2048},"stream":true})");
  const auto& p = r.submit.params;
  const json tools = json::parse(p.api.tools);
  EXPECT_EQ(tools[0]["type"], "function");
  EXPECT_EQ(tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(tools[0]["function"]["parameters"]["required"][0], "city");
  EXPECT_EQ(p.api.tool_choice, "function:get_weather");
  EXPECT_FALSE(p.api.parallel_tool_calls);
  EXPECT_TRUE(p.api.events);
  EXPECT_FLOAT_EQ(p.temperature, 0.2f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"END", "STOP"}));
  EXPECT_TRUE(p.enable_thinking);
  EXPECT_FALSE(p.show_thinking);  // events: the node sends reasoning itself
  EXPECT_TRUE(r.stream);

  auto choice = [](const std::string& c) {
    return parsed(R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],
                      "tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":)" +
                  c + "}")
        .submit.params.api.tool_choice;
  };
  EXPECT_EQ(choice(R"({"type":"any"})"), "required");
  EXPECT_EQ(choice(R"({"type":"auto"})"), "auto");
  EXPECT_EQ(choice(R"({"type":"none"})"), "none");
  // Without tools, thinking shows the think block of a plain-text job.
  auto t = parsed(R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],
                      "thinking":{"type":"adaptive"},"output_config":{"format":{"type":"json_schema",
                      "schema":{"type":"object"}}}})");
  EXPECT_TRUE(t.submit.params.show_thinking);
  EXPECT_EQ(json::parse(t.submit.params.api.json_schema), json::parse(R"({"type":"object"})"));
}

TEST(anthropic_request, what_cannot_be_honoured_is_refused_naming_the_field) {
  auto expect = [](const std::string& body, const std::string& param, const std::string& says) {
    expect_refused(parse_anthropic_request, body, param, says);
  };
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  expect(R"({"model":"m",)" + msgs + "}", "max_tokens", "required");
  expect(R"({"max_tokens":5,)" + msgs + "}", "model", "required");
  expect(R"({"model":"m","max_tokens":5})", "messages", "required");
  expect(R"({"model":"m","max_tokens":5,"messages":[]})", "messages", "empty");
  expect(R"({"model":"m","max_tokens":0,)" + msgs + "}", "max_tokens", "got 0");
  expect(R"({"model":"m","max_tokens":5,"temperature":1.5,)" + msgs + "}", "temperature", "[0, 1]");
  expect(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
           {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]}]})",
         "messages[0].content[0].type", "image");
  expect(R"({"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"x"}]})",
         "messages[0].role", "tool");
  expect(R"({"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[
           {"type":"tool_use","id":"t","name":"f","input":[1]}]}]})",
         "messages[0].content[0].input", "an object");
  expect(
      R"({"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],)" +
          msgs + "}",
      "tools[0].type", "server tools");
  expect(R"({"model":"m","max_tokens":5,"tools":[{"name":"f"}],)" + msgs + "}",
         "tools[0].input_schema", "required");
  expect(R"({"model":"m","max_tokens":5,"tool_choice":{"type":"any"},)" + msgs + "}", "tool_choice",
         "without tools");
  expect(R"({"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],
            "tool_choice":{"type":"tool","name":"g"},)" +
             msgs + "}",
         "tool_choice.name", "not one of the tools");
  expect(R"({"model":"m","max_tokens":5,"tool_choice":{"type":"sometimes"},)" + msgs + "}",
         "tool_choice.type", "sometimes");
  expect(R"({"model":"m","max_tokens":5,"thinking":{"type":"always"},)" + msgs + "}",
         "thinking.type", "always");
  expect(R"({"model":"m","max_tokens":5,"stop_sequences":[""],)" + msgs + "}", "stop_sequences",
         "stop");
  expect(R"({"model":"m","max_tokens":5,"stop_sequences":"END",)" + msgs + "}", "stop_sequences",
         "an array");
  expect("{", "", "not valid JSON");
}

TEST(anthropic_error, keeps_the_status_in_anthropic_s_shape) {
  const http_response e = anthropic_error(
      error_response(429, "the queue is full", "rate_limit_error", {}, "queue_full"));
  EXPECT_EQ(e.status, 429);
  const json j = json::parse(e.body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "rate_limit_error");
  EXPECT_EQ(j["error"]["message"], "the queue is full");
  for (auto [status, type] :
       std::vector<std::pair<int, std::string>>{{400, "invalid_request_error"},
                                                {401, "authentication_error"},
                                                {403, "permission_error"},
                                                {404, "not_found_error"},
                                                {413, "request_too_large"},
                                                {500, "api_error"},
                                                {503, "api_error"}}) {
    EXPECT_EQ(json::parse(anthropic_error(error_response(status, "m", "x")).body)["error"]["type"],
              type)
        << status;
  }
}

TEST(anthropic_stop_reason, of_finish_and_the_job_s_stop) {
  EXPECT_EQ(anthropic_stop_reason("tool_calls", "end_of_generation"), "tool_use");
  EXPECT_EQ(anthropic_stop_reason("length", "max_tokens"), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason("length", "context_full"), "model_context_window_exceeded");
  EXPECT_EQ(anthropic_stop_reason("stop", "stop_string"), "stop_sequence");
  EXPECT_EQ(anthropic_stop_reason("stop", "end_of_generation"), "end_turn");
}

anthropic_request request(bool stream, const std::string& extra = "") {
  return parsed(R"({"model":"m","max_tokens":50,"messages":[{"role":"user","content":"x"}],)"
                R"("tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"stream":)" +
                std::string(stream ? "true" : "false") + extra + "}");
}

std::shared_ptr<recording_responder> answer(bool stream, const std::vector<std::string>& lines,
                                            const wire::job_done& done) {
  return answered<anthropic_answer>(request(stream), lines, done);
}

TEST(anthropic_answer, a_whole_message_has_thinking_text_and_tool_use_blocks) {
  auto rec =
      answer(false,
             {reasoning_line("Hm."), content_line("Let me "), content_line("check."),
              call_line("call_1", "get_weather", R"({"city":"Oslo"})"), finish_line("tool_calls")},
             completed());
  ASSERT_EQ(rec->status, 200) << rec->body;
  const json m = rec->json_body();
  EXPECT_EQ(m["id"], "msg_7");
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "m");
  ASSERT_EQ(m["content"].size(), 3u);
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][0]["thinking"], "Hm.");
  EXPECT_EQ(m["content"][1]["type"], "text");
  EXPECT_EQ(m["content"][1]["text"], "Let me check.");
  EXPECT_EQ(m["content"][2]["type"], "tool_use");
  EXPECT_EQ(m["content"][2]["id"], "call_1");
  EXPECT_EQ(m["content"][2]["name"], "get_weather");
  EXPECT_EQ(m["content"][2]["input"], json::parse(R"({"city":"Oslo"})"));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["stop_sequence"], nullptr);
  EXPECT_EQ(m["usage"]["input_tokens"], 11);
  EXPECT_EQ(m["usage"]["output_tokens"], 5);
}

TEST(anthropic_answer, a_stop_at_the_one_stop_sequence_names_it) {
  auto rec = std::make_shared<recording_responder>();
  anthropic_answer a(request(false, R"(,"stop_sequences":["END"])"), 1, rec);
  a.accepted(7);
  a.event(tokens(1, 0, content_line("Done")));
  a.event(completed("stop_string"));
  const json m = rec->json_body();
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "END");
}

TEST(anthropic_answer, a_stream_sends_anthropic_s_events_in_order) {
  auto rec = answer(true,
                    {reasoning_line("Hm."), content_line("Hel"), content_line("lo"),
                     call_line("call_1", "get_weather", R"({"city":"Oslo"})")},
                    completed());
  const std::vector<std::string> expected = {"message_start",       "ping",
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  // thinking
                                             "content_block_start", "content_block_delta",
                                             "content_block_delta",
                                             "content_block_stop",  // text
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  // tool_use
                                             "message_delta",       "message_stop"};
  EXPECT_EQ(rec->names(), expected);
  for (const auto& e : rec->events) EXPECT_EQ(e.data["type"], e.name);
  const auto& ev = rec->events;
  EXPECT_EQ(ev[0].data["message"]["id"], "msg_7");
  EXPECT_EQ(ev[0].data["message"]["content"], json::array());
  EXPECT_EQ(ev[2].data["content_block"]["type"], "thinking");
  EXPECT_EQ(ev[3].data["delta"]["type"], "thinking_delta");
  EXPECT_EQ(ev[3].data["delta"]["thinking"], "Hm.");
  EXPECT_EQ(ev[5].data["index"], 1);
  EXPECT_EQ(ev[5].data["content_block"], json::parse(R"({"type":"text","text":""})"));
  EXPECT_EQ(ev[6].data["delta"]["type"], "text_delta");
  EXPECT_EQ(ev[6].data["delta"]["text"].get<std::string>() +
                ev[7].data["delta"]["text"].get<std::string>(),
            "Hello");
  EXPECT_EQ(ev[9].data["content_block"]["type"], "tool_use");
  EXPECT_EQ(ev[9].data["content_block"]["id"], "call_1");
  EXPECT_EQ(ev[9].data["content_block"]["input"], json::object());
  EXPECT_EQ(ev[10].data["delta"]["type"], "input_json_delta");
  EXPECT_EQ(json::parse(ev[10].data["delta"]["partial_json"].get<std::string>()),
            json::parse(R"({"city":"Oslo"})"));
  EXPECT_EQ(ev[11].data["index"], 2);
  EXPECT_EQ(ev[12].data["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(ev[12].data["usage"]["output_tokens"], 5);
  EXPECT_EQ(ev[12].data["usage"]["input_tokens"], 11);
  EXPECT_TRUE(rec->ended);
}

TEST(anthropic_answer, errors_are_in_anthropic_s_shape_before_and_after_the_stream_opened) {
  auto rec = std::make_shared<recording_responder>();
  anthropic_answer before(request(true), 1, rec);
  before.accepted(7);
  link_failure f;
  f.code = wire::error_code::queue_full;
  f.message = "the queue is full";
  before.refused(f);
  EXPECT_EQ(rec->status, 429);
  EXPECT_EQ(rec->json_body()["error"]["type"], "rate_limit_error");
  EXPECT_FALSE(rec->started);

  auto rec2 = std::make_shared<recording_responder>();
  anthropic_answer after(request(true), 1, rec2);
  after.accepted(7);
  after.event(tokens(1, 0, content_line("Once")));
  wire::job_done failed = completed("");
  failed.state = wire::job_state::failed;
  failed.error = "the node crashed";
  after.event(failed);
  ASSERT_FALSE(rec2->events.empty());
  EXPECT_EQ(rec2->events.back().name, "error");
  EXPECT_EQ(rec2->events.back().data["type"], "error");
  EXPECT_EQ(rec2->events.back().data["error"]["type"], "api_error");
  EXPECT_TRUE(rec2->ended);
}

}  // namespace
}  // namespace hearth::gateway
