// /v1/responses: request items -> the chat job (messages, tools in the chat shape, tool_choice,
// text.format, the stateful fields refused by name), and the job's output -> the response object
// and the Responses API's stream of typed, numbered events, as OpenAI's client accumulates them.
#include "gateway/responses-api.h"

#include <gtest/gtest.h>

#include "gateway/chat-answer-testing.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;
using namespace testing;

responses_request parsed(const std::string& body) {
  return parsed_by<responses_request>(parse_responses_request, body);
}

TEST(responses_request, text_input_and_instructions_are_a_system_and_a_user_message) {
  auto r = parsed(R"({"model":"m","input":"Hi","instructions":"Be brief","stream":true,
                      "max_output_tokens":20,"temperature":0.5,"store":true})");
  ASSERT_EQ(r.submit.messages.size(), 2u);
  EXPECT_EQ(r.submit.messages[0].role, "system");
  EXPECT_EQ(r.submit.messages[0].content, "Be brief");
  EXPECT_EQ(r.submit.messages[1].role, "user");
  EXPECT_EQ(r.submit.messages[1].content, "Hi");
  EXPECT_EQ(r.submit.model, "m");
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.submit.params.max_tokens, 20);
  EXPECT_FLOAT_EQ(r.submit.params.temperature, 0.5f);
  // OpenAI's defaults otherwise; no tools: plain text, a think block kept for a reasoning item.
  EXPECT_EQ(r.submit.params.top_k, 0);
  EXPECT_FLOAT_EQ(r.submit.params.top_p, 1);
  EXPECT_FALSE(r.submit.params.api.events);
  EXPECT_TRUE(r.submit.params.show_thinking);
  EXPECT_EQ(r.echo["instructions"], "Be brief");
  EXPECT_EQ(r.echo["max_output_tokens"], 20);
}

TEST(responses_request, items_become_messages_with_tool_calls_and_tool_answers) {
  auto r = parsed(R"({"model":"m","input":[
    {"role":"developer","content":"Use tools"},
    {"type":"message","role":"user","content":[{"type":"input_text","text":"Weather in "},
                                                 {"type":"input_text","text":"Oslo?"}]},
    {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"Call it."}]},
    {"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},
    {"type":"function_call","call_id":"call_2","name":"get_time","arguments":"{}"},
    {"type":"function_call_output","call_id":"call_1","output":"12 C"},
    {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"noon"}]},
    {"role":"assistant","content":[{"type":"output_text","text":"12 C at noon."}]},
    {"role":"user","content":"Thanks"}]})");
  const auto& m = r.submit.messages;
  ASSERT_EQ(m.size(), 7u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[1].content, "Weather in Oslo?");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "");
  EXPECT_EQ(m[2].reasoning_content, "Call it.");
  ASSERT_EQ(m[2].tool_calls.size(), 2u);
  EXPECT_EQ(m[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(m[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(m[2].tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "call_1");
  EXPECT_EQ(m[3].name, "get_weather");
  EXPECT_EQ(m[3].content, "12 C");
  EXPECT_EQ(m[4].name, "get_time");
  EXPECT_EQ(m[4].content, "noon");
  EXPECT_EQ(m[5].role, "assistant");
  EXPECT_EQ(m[5].content, "12 C at noon.");
  EXPECT_EQ(m[6].content, "Thanks");
}

TEST(responses_request, function_tools_go_in_the_chat_shape_with_choice_and_format) {
  auto r = parsed(R"({"model":"m","input":"x","parallel_tool_calls":false,
    "tools":[{"type":"function","name":"get_weather","description":"d",
              "parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}],
    "tool_choice":{"type":"function","name":"get_weather"},
    "text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}}})");
  const auto& api = r.submit.params.api;
  const json tools = json::parse(api.tools);
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0]["type"], "function");
  EXPECT_EQ(tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(tools[0]["function"]["description"], "d");
  EXPECT_EQ(tools[0]["function"]["parameters"]["properties"]["city"]["type"], "string");
  EXPECT_EQ(tools[0]["function"]["strict"], true);
  EXPECT_EQ(api.tool_choice, "function:get_weather");
  EXPECT_FALSE(api.parallel_tool_calls);
  EXPECT_TRUE(api.events);
  EXPECT_FALSE(r.submit.params.show_thinking);  // the node sends reasoning events itself
  EXPECT_EQ(json::parse(api.json_schema), json::parse(R"({"type":"object"})"));
  // The response repeats the tools as the client gave them.
  EXPECT_EQ(r.echo["tools"][0]["name"], "get_weather");
  EXPECT_EQ(r.echo["tool_choice"]["name"], "get_weather");
  EXPECT_EQ(parsed(R"({"model":"m","input":"x","tools":[{"type":"function","name":"f"}],
                       "tool_choice":"required"})")
                .submit.params.api.tool_choice,
            "required");
  EXPECT_EQ(parsed(R"({"model":"m","input":"x","text":{"format":{"type":"json_object"}}})")
                .submit.params.api.json_schema,
            R"({"type":"object"})");
}

TEST(responses_request, what_cannot_be_honoured_is_refused_naming_the_field) {
  auto expect = [](const std::string& body, const std::string& param, const std::string& says) {
    expect_refused(parse_responses_request, body, param, says);
  };
  expect(R"({"model":"m","input":"x","previous_response_id":"resp_1"})", "previous_response_id",
         "stateless");
  expect(R"({"model":"m","input":"x","conversation":"c"})", "conversation", "stateless");
  expect(R"({"model":"m","input":"x","background":true})", "background", "not supported");
  expect(R"({"model":"m"})", "input", "required");
  expect(R"({"input":"x"})", "model", "required");
  expect(R"({"model":"m","input":[]})", "input", "empty");
  expect(
      R"({"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]})",
      "input[0].content[0].type", "input_image");
  expect(R"({"model":"m","input":[{"type":"item_reference","id":"msg_1"}]})", "input[0].type",
         "stateless");
  expect(R"({"model":"m","input":[{"role":"tool","content":"x"}]})", "input[0].role", "tool");
  expect(R"({"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]})",
         "input[0].call_id", "required");
  expect(R"({"model":"m","input":"x","tools":[{"type":"web_search"}]})", "tools[0].type",
         "web_search");
  expect(R"({"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":[]}]})",
         "tools[0].parameters", "an object");
  expect(R"({"model":"m","input":"x","tool_choice":"required"})", "tool_choice", "without tools");
  expect(R"({"model":"m","input":"x","tools":[{"type":"function","name":"f"}],
            "tool_choice":{"type":"function","name":"g"}})",
         "tool_choice.name", "not one of the tools");
  expect(R"({"model":"m","input":"x","tool_choice":{"type":"file_search"}})", "tool_choice.type",
         "file_search");
  expect(R"({"model":"m","input":"x","temperature":3})", "temperature", "[0, 2]");
  expect(R"({"model":"m","input":"x","max_output_tokens":0})", "max_output_tokens", "got 0");
  expect(R"({"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n"}}})",
         "text.format.schema", "required");
  expect("[1]", "", "JSON object");
  expect("{\"model\":", "", "not valid JSON");
  expect(std::string(100, '[') + std::string(100, ']'), "", "nests deeper");
}

responses_request request(bool stream, const std::string& extra = "") {
  return parsed(R"({"model":"m","input":"x","stream":)" + std::string(stream ? "true" : "false") +
                extra + "}");
}

// An answer for a job whose output is events (tools were given).
std::shared_ptr<recording_responder> answer_events(bool stream,
                                                   const std::vector<std::string>& lines,
                                                   const wire::job_done& done) {
  return answered<responses_answer>(
      request(stream, R"(,"tools":[{"type":"function","name":"get_weather"}])"), lines, done);
}

TEST(responses_answer, a_whole_response_holds_reasoning_message_and_call_items_in_order) {
  auto rec = answer_events(
      false,
      {reasoning_line("Think"), reasoning_line("ing."), content_line("Let me "),
       content_line("check."), call_line("call_9", "get_weather", R"({"city":"Oslo"})"),
       finish_line("tool_calls")},
      completed());
  ASSERT_EQ(rec->status, 200) << rec->body;
  const json r = rec->json_body();
  EXPECT_EQ(r["id"], "resp_7");
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["created_at"], 100);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["model"], "m");
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "Thinking.");
  EXPECT_EQ(r["output"][1]["type"], "message");
  EXPECT_EQ(r["output"][1]["role"], "assistant");
  EXPECT_EQ(r["output"][1]["status"], "completed");
  EXPECT_EQ(r["output"][1]["content"][0]["type"], "output_text");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Let me check.");
  EXPECT_EQ(r["output"][2]["type"], "function_call");
  EXPECT_EQ(r["output"][2]["call_id"], "call_9");
  EXPECT_EQ(r["output"][2]["name"], "get_weather");
  EXPECT_EQ(r["output"][2]["arguments"], R"({"city":"Oslo"})");
  EXPECT_EQ(r["usage"]["input_tokens"], 11);
  EXPECT_EQ(r["usage"]["output_tokens"], 5);
  EXPECT_EQ(r["usage"]["total_tokens"], 16);
  EXPECT_EQ(r["tools"][0]["name"], "get_weather");
  EXPECT_EQ(r["tool_choice"], "auto");
  // Item ids are unique.
  EXPECT_NE(r["output"][0]["id"], r["output"][1]["id"]);
}

TEST(responses_answer, a_plain_text_job_is_one_message_and_its_think_block_a_reasoning_item) {
  auto rec = std::make_shared<recording_responder>();
  responses_answer a(request(false), 5, rec);
  a.accepted(7);
  a.event(tokens(1, 0, "<think>\nHm.\n</think>\n\nHello"));
  a.event(tokens(1, 1, " there"));
  a.event(completed("max_tokens"));
  const json r = rec->json_body();
  ASSERT_EQ(r["output"].size(), 2u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Hello there");
  // Stopped by the token limit: incomplete, saying why.
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["output"][1]["status"], "incomplete");
}

TEST(responses_answer, an_answer_without_text_or_calls_is_one_empty_message) {
  auto rec = answer_events(false, {}, completed());
  const json r = rec->json_body();
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "");
}

TEST(responses_answer, a_stream_sends_openai_s_event_sequence_numbered) {
  auto rec = answer_events(
      true,
      {reasoning_line("Hm."), content_line("Hel"), content_line("lo"),
       call_line("call_1", "get_weather", R"({"city":"Oslo"})"), finish_line("tool_calls")},
      completed());
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      // the reasoning item
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
      // the message
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      // the call
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(rec->names(), expected);
  EXPECT_TRUE(rec->started);
  EXPECT_TRUE(rec->ended);
  // Every event's data names its type as its SSE type does, numbered from 0 without gaps; the
  // deltas make the text the done events and the final response carry, as OpenAI's client
  // accumulates them.
  std::string text;
  for (size_t i = 0; i < rec->events.size(); ++i) {
    const json& e = rec->events[i].data;
    EXPECT_EQ(e["type"], rec->events[i].name);
    EXPECT_EQ(e["sequence_number"], i);
    if (e["type"] == "response.output_text.delta") {
      EXPECT_EQ(e["output_index"], 1);
      EXPECT_EQ(e["content_index"], 0);
      EXPECT_EQ(e["item_id"], rec->events[8].data["item"]["id"]);
      text += e["delta"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(rec->events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(rec->events[12].data["text"], "Hello");
  EXPECT_EQ(rec->events[15].data["item"]["type"], "function_call");
  EXPECT_EQ(rec->events[15].data["item"]["call_id"], "call_1");
  EXPECT_EQ(rec->events[17].data["arguments"], R"({"city":"Oslo"})");
  EXPECT_EQ(rec->events[17].data["name"], "get_weather");
  const json& done = rec->events.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["usage"]["output_tokens"], 5);
}

TEST(responses_answer, a_failover_streams_no_text_twice) {
  auto rec = std::make_shared<recording_responder>();
  responses_answer a(request(true), 5, rec);
  a.accepted(7);
  a.event(tokens(1, 0, "Once upon"));
  wire::job_restarted r;
  r.job_id = 7;
  r.attempt = 2;
  a.event(r);
  a.event(tokens(2, 0, "Once upon a time"));
  a.event(completed());
  std::string text;
  for (const auto& e : rec->events) {
    if (e.name == "response.output_text.delta") text += e.data["delta"].get<std::string>();
  }
  EXPECT_EQ(text, "Once upon a time");
  EXPECT_EQ(rec->events.back().data["response"]["output"][0]["content"][0]["text"],
            "Once upon a time");
}

TEST(responses_answer,
     an_error_before_the_stream_keeps_its_status_and_after_it_fails_the_response) {
  auto rec = std::make_shared<recording_responder>();
  responses_answer before(request(true), 5, rec);
  before.accepted(7);
  wire::job_done failed = completed("prompt_too_long");
  failed.state = wire::job_state::failed;
  failed.error = "the prompt has 9000 tokens";
  before.event(failed);
  EXPECT_EQ(rec->status, 400);
  EXPECT_FALSE(rec->started);
  EXPECT_EQ(rec->json_body()["error"]["code"], "context_length_exceeded");

  auto rec2 = std::make_shared<recording_responder>();
  responses_answer after(request(true), 5, rec2);
  after.accepted(7);
  after.event(tokens(1, 0, "Once"));
  failed.stop_reason = "";
  failed.error = "the node crashed";
  after.event(failed);
  ASSERT_GE(rec2->events.size(), 2u);
  const auto& err = rec2->events[rec2->events.size() - 2];
  EXPECT_EQ(err.name, "error");
  EXPECT_NE(err.data["message"].get<std::string>().find("the node crashed"), std::string::npos);
  EXPECT_EQ(rec2->events.back().name, "response.failed");
  EXPECT_EQ(rec2->events.back().data["response"]["status"], "failed");
  EXPECT_TRUE(rec2->ended);
  EXPECT_EQ(rec2->status, 0);
}

TEST(responses_answer, output_that_is_not_events_fails_the_answer) {
  auto rec = std::make_shared<recording_responder>();
  responses_answer a(request(false, R"(,"tools":[{"type":"function","name":"f"}])"), 5, rec);
  a.accepted(7);
  a.event(tokens(1, 0, "plain text, not JSON lines\n"));
  a.event(completed());
  EXPECT_EQ(rec->status, 500);
  EXPECT_NE(rec->body.find("job 7"), std::string::npos) << rec->body;
}

TEST(responses_answer, a_keep_alive_opens_a_waiting_stream) {
  auto rec = std::make_shared<recording_responder>();
  responses_answer a(request(true), 5, rec);
  a.accepted(7);
  a.keep_alive();
  EXPECT_TRUE(rec->started);
  EXPECT_EQ(rec->comments, 1);
  EXPECT_EQ(rec->names(), (std::vector<std::string>{"response.created", "response.in_progress"}));
}

}  // namespace
}  // namespace hearth::gateway
