// What the Responses API (responses-api.*) and Anthropic's Messages API (anthropic-api.*) share:
// a chat job's output turned into the items both APIs are made of — reasoning, answer text, tool
// calls — in the order the model wrote them, and the reading of their request bodies. Each API
// derives from chat_answer and writes only its JSON: the events of its stream as items begin,
// grow and end, or its whole object at the end. The bookkeeping is here, once: the job's output
// read as events whatever the job wrote (gateway/job-output.h: failover without repeats), the
// status line held until the first item so that a job that fails early still gets its HTTP
// status, keep-alives, and errors before or after the stream started. The routes that submit the
// jobs are chat-api-routes.*.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "gateway/http.h"
#include "gateway/job-answer.h"
#include "gateway/job-output.h"
#include "gateway/openai-json.h"
#include "gateway/openai-request.h"

namespace hearth::gateway {

// One part of an answer, in the order the model wrote them.
struct chat_item {
  enum class kind : uint8_t { reasoning, content, tool_call };
  kind k = kind::content;
  std::string text;      // reasoning, content
  wire::tool_call call;  // tool_call (arguments as JSON text)
};

class chat_answer : public job_answer {
 public:
  // `submit`: the submitted job's model and parameters (how to read its output).
  chat_answer(const wire::submit& submit, bool stream, int64_t created,
              std::shared_ptr<responder> out);

  void accepted(uint64_t job_id) override { job_id_ = job_id; }
  // A stream that wrote nothing since the last one gets a comment (opening the stream if it had
  // not opened).
  void keep_alive() override;
  bool ended() const override { return ended_; }
  uint64_t job_id() const override { return job_id_; }
  bool streaming() const override { return stream_mode_; }

  // The answer fails with `openai_error` (OpenAI's shape), in the API's own words.
  void fail(const http_response& openai_error) override;

 protected:
  // Streaming only: the status line went out; the API's opening events.
  virtual void opened() = 0;
  // Streaming only: items()[i] began (a tool call begins whole), grew by `delta` (text), ended.
  virtual void item_began(size_t i) = 0;
  virtual void item_grew(size_t i, std::string_view delta) = 0;
  virtual void item_ended(size_t i) = 0;
  // The job completed with items() and `finish` ("stop", "length" or "tool_calls"): the
  // stream's closing events, or the whole answer through out().reply().
  virtual void completed(const wire::job_done& done, std::string_view finish) = 0;
  // An error in OpenAI's shape (openai_link_error, openai_job_error, ...) as the API's HTTP
  // error (before the stream opened), or as its closing events (after: the stream then ends).
  // error_reply is optional: by default the error goes as it is, in OpenAI's shape.
  virtual http_response error_reply(const http_response& openai_error) { return openai_error; }
  virtual void error_events(const http_response& openai_error) = 0;

  // Streaming: an event of `type` (the SSE event's name, and the object's first field), then
  // `fields`.
  void send_event(std::string_view type, ojson fields);

  const std::vector<chat_item>& items() const { return items_; }
  responder& out() { return *out_; }
  int64_t created() const { return created_; }
  const std::string& model() const { return model_; }

 private:
  void add(const std::vector<wire::output_event>& events);
  void end_item();
  void open();
  void tokens(const wire::job_tokens& t) override;
  void restarted(uint32_t attempt) override { stream_.restarted(attempt); }
  void done(const wire::job_done& d) override;
  // The events, or the failure for output that is not what the job should have written.
  bool take(result<std::vector<wire::output_event>>& events);

  bool stream_mode_;
  int64_t created_;
  std::string model_;
  std::shared_ptr<responder> out_;
  job_stream stream_;
  uint64_t job_id_ = 0;
  std::vector<chat_item> items_;
  bool item_open_ = false;  // the last item may still grow
  std::string finish_;      // the node's finish event; "" when none came
  bool started_ = false;    // the stream's status line went out
  bool ended_ = false;
  bool wrote_ = false;  // something was written since the last keep_alive()
};

// The submit to send, moved out of `kept`, which keeps what the answer needs of it (model and
// parameters: how to read the job's output), not the conversation.
wire::submit submit_taken(wire::submit& kept);

// Seconds since the Unix epoch: a response's created time.
int64_t unix_seconds_now();

// "param[i]": an element's name in a refusal.
std::string param_at(const std::string& param, size_t i);

// Reading one request's fields: the first refusal wins, naming the field (a path such as
// "messages[2].content[0].text") and what was wrong.
class field_reader {
 public:
  struct refusal {
    std::string param;
    std::string message;
  };

  // The refusal so far, if any.
  const std::optional<refusal>& refused() const { return refused_; }
  void refuse(std::string param, std::string message);
  // "<param> must be <expected>, got <what v is>".
  void wrong_type(const std::string& param, std::string_view expected, const nlohmann::json& v);

  // `obj[key]`, or nullptr when absent or null (both mean "not given").
  static const nlohmann::json* field(const nlohmann::json& obj, std::string_view key);
  // obj[key] when it is an object; nullptr when absent or refused (not an object). `param`
  // names it.
  const nlohmann::json* object(const nlohmann::json& obj, std::string_view key,
                               const std::string& param);
  // obj[key] as the type asked for; nullopt when absent or refused. `param` names it.
  std::optional<std::string> string(const nlohmann::json& obj, std::string_view key,
                                    const std::string& param);
  // A string field that must be there: refused when absent.
  std::optional<std::string> required(const nlohmann::json& obj, std::string_view key,
                                      const std::string& param);
  std::optional<bool> boolean(const nlohmann::json& obj, std::string_view key,
                              const std::string& param);
  std::optional<double> number(const nlohmann::json& obj, std::string_view key,
                               const std::string& param, double lo, double hi);
  std::optional<int64_t> integer(const nlohmann::json& obj, std::string_view key,
                                 const std::string& param, int64_t lo, int64_t hi);

 private:
  std::optional<refusal> refused_;
};

// The base of an API's reader of its conversation into chat messages, with what every such
// reader keeps: the request's field_reader, the messages so far, and each tool call's function by
// its call id, because templates name a tool's answer after the function it answers.
class chat_turns_reader {
 public:
  chat_turns_reader(field_reader& fr, std::vector<wire::chat_message>& out) : fr_(fr), out_(out) {}
  virtual ~chat_turns_reader() = default;

  // Reads the elements of `turns` (an array named `param`), each an object, into messages until
  // one is refused.
  void read(const nlohmann::json& turns, const std::string& param);

 protected:
  // One element of the conversation (a message, an item), an object named `p`.
  virtual void turn(const nlohmann::json& t, const std::string& p) = 0;

  // A tool call made in `turn` (an assistant message), remembered for the answer to it.
  void add_call(wire::chat_message& turn, wire::tool_call call);
  // The answer to the call `call_id` as a tool message, named after the call's function when the
  // call came earlier in this conversation (a call of an earlier request is unknown).
  void add_tool_answer(std::string call_id, std::string content);

  field_reader& fr_;
  std::vector<wire::chat_message>& out_;

 private:
  std::map<std::string, std::string> call_names_;
};

// The 400 for the reader's refusal, if it refused.
std::optional<request_refusal> field_refusal(const field_reader& fr);
// The 400 for job_params_check's refusal of `p`, if it refuses, naming the request's field:
// `renamed` pairs each job parameter the API calls otherwise with the API's name for it.
std::optional<request_refusal> job_params_refusal(
    const wire::job_params& p,
    std::initializer_list<std::pair<std::string_view, std::string_view>> renamed);

// What an API calls a function tool: its `type` (required, or optional), the words after "is not
// supported: " that a tool of another type is refused with, and the key of its JSON Schema.
struct function_tool_shape {
  std::string_view type;
  bool type_required = false;
  std::string_view other_types;
  std::string_view schema_key;
  bool schema_required = false;
};
// The request's `tools` (absent: none), at most api_max_tools function tools of the API's shape,
// as OpenAI's chat tools in JSON text for api_params::tools ("" when none, or refused).
std::string chat_tools(field_reader& fr, const nlohmann::json& body,
                       const function_tool_shape& shape);

// Refuses `a` (an array named `param`) when it holds more than `max` elements.
void array_bounded(field_reader& fr, const nlohmann::json& a, const std::string& param, size_t max);
// Refuses a conversation that the wire cannot carry: more messages than a submit holds, or more
// text (contents, reasoning, tool arguments) than one wire string. `param` names it.
void chat_messages_bounded(field_reader& fr, const std::vector<wire::chat_message>& messages,
                           const std::string& param);
// One function tool in OpenAI's chat shape ({"type": "function", "function": {name,
// description, parameters, strict}}) from an API's tool object `t` (named `p`) whose schema is
// under `schema_key`; null (and refused) when `t` is not one.
nlohmann::json chat_function_tool(field_reader& fr, const nlohmann::json& t, const std::string& p,
                                  std::string_view schema_key, bool schema_required);

// Refuses a tool_choice that names a function ("function:NAME") none of api.tools is (`param`
// names the field as the API calls it).
void named_tool_check(field_reader& fr, const wire::api_params& api, const std::string& param);

}  // namespace hearth::gateway
