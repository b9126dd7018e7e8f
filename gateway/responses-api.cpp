// The Responses API's request items -> a chat job's messages:
//   instructions                         a system message, first
//   input "text"                         a user message
//   {type "message", role, content}      a message (developer is system); content a string or
//                                        input_text / output_text / refusal parts, joined
//   {type "reasoning", content|summary}  the reasoning_content of the assistant turn that follows
//   {type "function_call", call_id, name, arguments}
//                                        a tool call of the assistant turn (several in a row are
//                                        one turn, after its text if the turn had any)
//   {type "function_call_output", call_id, output}
//                                        a tool message answering call_id (named after its call)
// Function tools ({type "function", name, description, parameters, strict}) go to the job in the
// chat shape ({type "function", function: {...}}), as the node and the templates take them.
// OpenAI's sampling defaults apply, as for /v1/chat/completions: temperature 1, top_p 1, no
// top_k, min_p or repeat penalty, no token limit of the gateway's own.
#include "gateway/responses-api.h"

#include <limits>

#include "schema/job-params.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

// The text of a message's content: a string, or parts of text joined.
std::optional<std::string> content_text(field_reader& fr, const json& content,
                                        const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    fr.wrong_type(param, "a string or an array of content parts", content);
    return std::nullopt;
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string p = param_at(param, i);
    if (!part.is_object()) return fr.wrong_type(p, "an object", part), std::nullopt;
    auto type = fr.required(part, "type", p + ".type");
    if (!type) return std::nullopt;
    // A refusal part (an assistant's, sent back) carries its text under "refusal".
    const char* key = *type == "refusal" ? "refusal" : "text";
    if (*type != "input_text" && *type != "output_text" && *type != "text" && *type != "refusal") {
      fr.refuse(p + ".type", p + ".type '" + *type +
                                 "' is not supported: hearth takes text (input_text, "
                                 "output_text)");
      return std::nullopt;
    }
    auto t = fr.required(part, key, p + "." + key);
    if (!t) return std::nullopt;
    text += *t;
  }
  return text;
}

class input_reader : public chat_turns_reader {
 public:
  using chat_turns_reader::chat_turns_reader;

 private:
  void turn(const json& it, const std::string& p) override {
    std::string type = "message";  // an item without a type is a message (EasyInputMessage)
    if (auto t = fr_.string(it, "type", p + ".type")) type = *t;
    if (fr_.refused()) return;
    if (type == "message") return message(it, p);
    if (type == "function_call") return function_call(it, p);
    if (type == "function_call_output") return function_call_output(it, p);
    if (type == "reasoning") return reasoning(it, p);
    if (type == "item_reference") {
      return fr_.refuse(p + ".type",
                        p + ".type 'item_reference' is not supported: hearth's /v1/responses is "
                            "stateless, send the items themselves");
    }
    fr_.refuse(p + ".type", p + ".type '" + type +
                                "' is not supported: message, function_call, "
                                "function_call_output or reasoning");
  }

  void message(const json& it, const std::string& p) {
    auto role = fr_.required(it, "role", p + ".role");
    if (!role) return;
    if (*role == "developer") *role = "system";
    if (*role != "user" && *role != "assistant" && *role != "system") {
      return fr_.refuse(p + ".role", p + ".role '" + *role +
                                         "' is not supported: user, assistant, system or "
                                         "developer");
    }
    const json* content = field_reader::field(it, "content");
    if (!content) return fr_.refuse(p + ".content", p + ".content is required");
    auto text = content_text(fr_, *content, p + ".content");
    if (!text) return;
    wire::chat_message m{*role, std::move(*text)};
    if (*role == "assistant") m.reasoning_content = std::move(reasoning_);
    reasoning_.clear();
    out_.push_back(std::move(m));
  }

  void function_call(const json& it, const std::string& p) {
    auto call_id = fr_.required(it, "call_id", p + ".call_id");
    auto name = fr_.required(it, "name", p + ".name");
    auto arguments = fr_.required(it, "arguments", p + ".arguments");
    if (fr_.refused()) return;
    // Calls follow the text of their turn, or open a turn of their own.
    if (out_.empty() || out_.back().role != "assistant") {
      out_.push_back(wire::chat_message{"assistant", ""});
      out_.back().reasoning_content = std::move(reasoning_);
    }
    reasoning_.clear();
    add_call(out_.back(), wire::tool_call{*call_id, *name, *arguments});
  }

  void function_call_output(const json& it, const std::string& p) {
    auto call_id = fr_.required(it, "call_id", p + ".call_id");
    if (!call_id) return;
    const json* output = field_reader::field(it, "output");
    if (!output) return fr_.refuse(p + ".output", p + ".output is required");
    auto text = content_text(fr_, *output, p + ".output");
    if (!text) return;
    reasoning_.clear();
    add_tool_answer(*call_id, std::move(*text));
  }

  // The reasoning text (reasoning_text parts; else the summary's) for the next assistant turn.
  void reasoning(const json& it, const std::string& p) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
      const json* parts = field_reader::field(it, key);
      if (!parts) continue;
      if (!parts->is_array()) return fr_.wrong_type(p + "." + key, "an array", *parts);
      for (size_t i = 0; i < parts->size(); ++i) {
        auto t = fr_.string((*parts)[i], "text", param_at(p + "." + key, i) + ".text");
        if (fr_.refused()) return;
        if (t) text += *t;
      }
      if (!text.empty()) break;
    }
    reasoning_ = std::move(text);
  }

  std::string reasoning_;
};

void read_input(field_reader& fr, const json& body, wire::submit& s) {
  const json* input = field_reader::field(body, "input");
  if (!input) return fr.refuse("input", "input is required");
  if (input->is_string()) {
    s.messages.push_back(wire::chat_message{"user", input->get<std::string>()});
  } else if (!input->is_array()) {
    return fr.wrong_type("input", "a string or an array of items", *input);
  } else {
    if (input->empty()) return fr.refuse("input", "input must not be empty");
    array_bounded(fr, *input, "input", wire::max_array_items);
    if (fr.refused()) return;
    input_reader(fr, s.messages).read(*input, "input");
    if (fr.refused()) return;
  }
  chat_messages_bounded(fr, s.messages, "input");
}

// tools: the Responses API's flat function tools -> api.tools in the chat shape; the echo keeps
// them as given.
void read_tools(field_reader& fr, const json& body, wire::api_params& api, ojson& echo) {
  constexpr function_tool_shape flat_function = {
      "function", true, "hearth runs function tools (the client runs them)", "parameters", false};
  api.tools = chat_tools(fr, body, flat_function);
  if (fr.refused()) return;
  if (const json* tools = field_reader::field(body, "tools")) {
    echo["tools"] = ojson::parse(tools->dump(-1, ' ', false, json::error_handler_t::replace));
  }
}

void read_tool_choice(field_reader& fr, const json& body, wire::api_params& api, ojson& echo) {
  const json* c = field_reader::field(body, "tool_choice");
  if (!c) return;
  if (c->is_string()) {
    const std::string v = c->get<std::string>();
    if (v != "auto" && v != "none" && v != "required") {
      return fr.refuse("tool_choice",
                       "tool_choice must be auto, none, required or {\"type\": \"function\", "
                       "\"name\": ...}, got '" +
                           v + "'");
    }
    api.tool_choice = v;
    echo["tool_choice"] = v;
    return;
  }
  if (!c->is_object()) return fr.wrong_type("tool_choice", "a string or an object", *c);
  auto type = fr.required(*c, "type", "tool_choice.type");
  if (!type) return;
  if (*type != "function") {
    return fr.refuse("tool_choice.type", "tool_choice.type '" + *type +
                                             "' is not supported: function (a named function "
                                             "tool), or the strings auto, none, required");
  }
  auto name = fr.required(*c, "name", "tool_choice.name");
  if (!name) return;
  api.tool_choice = "function:" + *name;
  echo["tool_choice"] = {{"type", "function"}, {"name", *name}};
}

// text.format: text (nothing to do), json_object (any JSON object) or json_schema (its schema).
void read_text_format(field_reader& fr, const json& body, wire::api_params& api, ojson& echo) {
  const json* text = fr.object(body, "text", "text");
  if (!text) return;
  const json* format = fr.object(*text, "format", "text.format");
  if (!format) return;
  auto type = fr.required(*format, "type", "text.format.type");
  if (!type) return;
  if (*type == "json_object") {
    api.json_schema = R"({"type":"object"})";
  } else if (*type == "json_schema") {
    const json* schema = field_reader::field(*format, "schema");
    if (!schema) return fr.refuse("text.format.schema", "text.format.schema is required");
    if (!schema->is_object()) return fr.wrong_type("text.format.schema", "an object", *schema);
    api.json_schema = schema->dump(-1, ' ', false, json::error_handler_t::replace);
  } else if (*type != "text") {
    return fr.refuse("text.format.type", "text.format.type '" + *type +
                                             "' is not supported: text, json_object or "
                                             "json_schema");
  }
  echo["text"] = {
      {"format", ojson::parse(format->dump(-1, ' ', false, json::error_handler_t::replace))}};
}

// The fields of a stateful or hosted Responses API that a stateless gateway cannot honour.
void refuse_stateful(field_reader& fr, const json& body) {
  if (field_reader::field(body, "previous_response_id")) {
    fr.refuse("previous_response_id",
              "previous_response_id is not supported: hearth's /v1/responses is stateless (send "
              "the whole conversation as input items)");
  }
  if (field_reader::field(body, "conversation")) {
    fr.refuse("conversation",
              "conversation is not supported: hearth's /v1/responses is stateless (send the "
              "whole conversation as input items)");
  }
  if (auto b = fr.boolean(body, "background", "background"); b && *b) {
    fr.refuse("background",
              "background is not supported: a response is answered while the "
              "client waits (stream it for long answers)");
  }
  if (field_reader::field(body, "prompt")) {
    fr.refuse("prompt",
              "prompt (a stored prompt template) is not supported: send instructions "
              "and input");
  }
  if (auto n = fr.integer(body, "top_logprobs", "top_logprobs", 0, 20); n && *n > 0) {
    fr.refuse("top_logprobs",
              "top_logprobs is not supported on /v1/responses (use "
              "/v1/chat/completions' logprobs)");
  }
}

ojson usage_json(const wire::job_done& d) {
  return {{"input_tokens", d.n_prompt},
          {"input_tokens_details", {{"cached_tokens", 0}}},
          {"output_tokens", d.n_gen},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", uint64_t(d.n_prompt) + d.n_gen}};
}

std::string item_id(const char* prefix, uint64_t job_id, size_t i) {
  return std::string(prefix) + std::to_string(job_id) + "_" + std::to_string(i);
}

ojson output_text_part(std::string_view text) {
  return {{"type", "output_text"},
          {"annotations", ojson::array()},
          {"logprobs", ojson::array()},
          {"text", std::string(text)}};
}

ojson reasoning_part(std::string_view text) {
  return {{"type", "reasoning_text"}, {"text", std::string(text)}};
}

}  // namespace

std::variant<responses_request, request_refusal> parse_responses_request(std::string_view body) {
  auto parsed = request_body_json(body);
  if (!parsed) return request_refusal{400, parsed.message(), "", ""};
  const json& j = *parsed;
  responses_request r;
  wire::submit& s = r.submit;
  wire::job_params& p = s.params;
  p = openai_default_params();
  ojson& echo = r.echo;
  echo = {{"instructions", nullptr},
          {"max_output_tokens", nullptr},
          {"parallel_tool_calls", true},
          {"temperature", 1.0},
          {"text", {{"format", {{"type", "text"}}}}},
          {"tool_choice", "auto"},
          {"tools", ojson::array()},
          {"top_p", 1.0},
          {"metadata", ojson::object()}};

  field_reader fr;
  if (auto m = fr.string(j, "model", "model")) s.model = std::move(*m);
  if (auto e = field_refusal(fr)) return *e;
  if (s.model.empty()) return request_refusal{400, "model is required", "model", ""};
  refuse_stateful(fr, j);
  if (auto instructions = fr.string(j, "instructions", "instructions")) {
    echo["instructions"] = *instructions;
    s.messages.push_back(wire::chat_message{"system", std::move(*instructions)});
  }
  read_input(fr, j, s);
  if (auto e = field_refusal(fr)) return *e;
  read_tools(fr, j, p.api, echo);
  read_tool_choice(fr, j, p.api, echo);
  named_tool_check(fr, p.api, "tool_choice.name");
  read_text_format(fr, j, p.api, echo);
  if (auto v = fr.boolean(j, "parallel_tool_calls", "parallel_tool_calls")) {
    p.api.parallel_tool_calls = *v;
    echo["parallel_tool_calls"] = *v;
  }
  if (auto v =
          fr.integer(j, "max_output_tokens", "max_output_tokens", 1, generation_max_tokens_limit)) {
    p.max_tokens = int32_t(*v);
    echo["max_output_tokens"] = *v;
  }
  if (auto v = fr.number(j, "temperature", "temperature", 0, 2)) {
    p.temperature = float(*v);
    echo["temperature"] = *v;
  }
  if (auto v = fr.number(j, "top_p", "top_p", 0, 1)) {
    // The sampler keeps at least one token: the smallest positive top_p is OpenAI's top_p 0.
    p.top_p = *v > 0 ? float(*v) : std::numeric_limits<float>::min();
    echo["top_p"] = *v;
  }
  if (auto v = fr.boolean(j, "stream", "stream")) r.stream = *v;
  fr.boolean(j, "store", "store");  // nothing is stored for later either way
  if (const json* reasoning = field_reader::field(j, "reasoning")) {
    // effort "none" asks a thinking model to answer without reasoning; other efforts leave the
    // model as it is (hearth has no reasoning budget).
    if (!reasoning->is_object()) {
      fr.wrong_type("reasoning", "an object", *reasoning);
    } else if (auto effort = fr.string(*reasoning, "effort", "reasoning.effort");
               effort && *effort == "none") {
      p.enable_thinking = false;
    }
  }
  if (const json* metadata = field_reader::field(j, "metadata")) {
    if (!metadata->is_object()) {
      fr.wrong_type("metadata", "an object", *metadata);
    } else {
      echo["metadata"] =
          ojson::parse(metadata->dump(-1, ' ', false, json::error_handler_t::replace));
    }
  }
  // hearth's: one of its templates by name, for a model whose file has none (as chat
  // completions take it).
  if (auto t = fr.string(j, "chat_template", "chat_template")) p.chat_template = std::move(*t);
  if (auto e = field_refusal(fr)) return *e;

  // Tool calls come back as output events; without tools a thinking model's think block comes
  // in the text (show_thinking) and becomes a reasoning item.
  p.api.events = !p.api.tools.empty();
  p.show_thinking = !p.api.events;
  if (auto e = job_params_refusal(
          p, {{"max_tokens", "max_output_tokens"}, {"json_schema", "text.format.schema"}})) {
    return *e;
  }
  return r;
}

std::string responses_id(uint64_t job_id) {
  return "resp_" + std::to_string(job_id);
}

responses_answer::responses_answer(responses_request r, int64_t created,
                                   std::shared_ptr<responder> out)
    : chat_answer(r.submit, r.stream, created, std::move(out)), echo_(std::move(r.echo)) {}

ojson responses_answer::response(std::string_view status, const ojson& output,
                                 const ojson& usage) const {
  ojson j = {{"id", responses_id(job_id())},  {"object", "response"}, {"created_at", created()},
             {"status", std::string(status)}, {"background", false},  {"error", nullptr},
             {"incomplete_details", nullptr}};
  j["instructions"] = echo_["instructions"];
  j["max_output_tokens"] = echo_["max_output_tokens"];
  j["model"] = model();
  j["output"] = output;
  j["parallel_tool_calls"] = echo_["parallel_tool_calls"];
  j["previous_response_id"] = nullptr;
  j["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  j["store"] = false;
  for (const char* k : {"temperature", "text", "tool_choice", "tools", "top_p"}) j[k] = echo_[k];
  j["truncation"] = "disabled";
  j["usage"] = usage;
  j["user"] = nullptr;
  j["metadata"] = echo_["metadata"];
  return j;
}

ojson responses_answer::output_item(size_t i, std::string_view status) const {
  const std::string st(status);
  if (i >= items().size()) {
    // The message of an answer that wrote no text and made no call.
    return {{"id", item_id("msg_", job_id(), i)},
            {"type", "message"},
            {"status", st},
            {"role", "assistant"},
            {"content", ojson::array({output_text_part("")})}};
  }
  const chat_item& it = items()[i];
  switch (it.k) {
    case chat_item::kind::reasoning:
      return {{"id", item_id("rs_", job_id(), i)},
              {"type", "reasoning"},
              {"summary", ojson::array()},
              {"content", ojson::array({reasoning_part(it.text)})},
              {"status", st}};
    case chat_item::kind::tool_call:
      return {
          {"id", item_id("fc_", job_id(), i)}, {"type", "function_call"}, {"status", st},
          {"arguments", it.call.arguments},    {"call_id", it.call.id},   {"name", it.call.name}};
    case chat_item::kind::content:
      break;
  }
  return {{"id", item_id("msg_", job_id(), i)},
          {"type", "message"},
          {"status", st},
          {"role", "assistant"},
          {"content", ojson::array({output_text_part(it.text)})}};
}

void responses_answer::send(std::string_view type, ojson fields) {
  fields["sequence_number"] = sequence_++;
  send_event(type, std::move(fields));
}

void responses_answer::opened() {
  const ojson head = response("in_progress", ojson::array(), nullptr);
  send("response.created", {{"response", head}});
  send("response.in_progress", {{"response", head}});
}

void responses_answer::item_began(size_t i) {
  ojson item = output_item(i, "in_progress");
  const std::string id = item["id"];
  const chat_item& it = items()[i];
  if (it.k == chat_item::kind::tool_call) {
    item["arguments"] = "";
  } else {
    item["content"] = ojson::array();
  }
  send("response.output_item.added", {{"output_index", i}, {"item", std::move(item)}});
  if (it.k == chat_item::kind::tool_call) {
    // A call comes whole: its arguments in one delta.
    send("response.function_call_arguments.delta",
         {{"item_id", id}, {"output_index", i}, {"delta", it.call.arguments}});
    send("response.function_call_arguments.done", {{"item_id", id},
                                                   {"output_index", i},
                                                   {"name", it.call.name},
                                                   {"arguments", it.call.arguments}});
    return;
  }
  send("response.content_part.added",
       {{"item_id", id},
        {"output_index", i},
        {"content_index", 0},
        {"part", it.k == chat_item::kind::reasoning ? reasoning_part("") : output_text_part("")}});
}

void responses_answer::item_grew(size_t i, std::string_view delta) {
  const bool reasoning = items()[i].k == chat_item::kind::reasoning;
  ojson f = {{"item_id", item_id(reasoning ? "rs_" : "msg_", job_id(), i)},
             {"output_index", i},
             {"content_index", 0},
             {"delta", std::string(delta)}};
  if (!reasoning) f["logprobs"] = ojson::array();
  send(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", std::move(f));
}

void responses_answer::item_ended(size_t i) {
  const ojson item = output_item(i, "completed");
  if (i >= items().size() || items()[i].k != chat_item::kind::tool_call) {
    const bool reasoning = i < items().size() && items()[i].k == chat_item::kind::reasoning;
    const ojson& part = item["content"][0];
    ojson f = {
        {"item_id", item["id"]}, {"output_index", i}, {"content_index", 0}, {"text", part["text"]}};
    if (!reasoning) f["logprobs"] = ojson::array();
    send(reasoning ? "response.reasoning_text.done" : "response.output_text.done", std::move(f));
    send("response.content_part.done",
         {{"item_id", item["id"]}, {"output_index", i}, {"content_index", 0}, {"part", part}});
  }
  send("response.output_item.done", {{"output_index", i}, {"item", item}});
}

void responses_answer::completed(const wire::job_done& done, std::string_view finish) {
  // "length": the token limit or the context ended the answer.
  const bool incomplete = finish == "length";
  bool answered = false;
  for (const chat_item& it : items()) answered |= it.k != chat_item::kind::reasoning;
  const size_t n = items().size() + (answered ? 0 : 1);
  if (!answered && streaming()) {
    // The empty message of an answer without text or calls, as its stream would have sent it.
    ojson item = output_item(n - 1, "in_progress");
    item["content"] = ojson::array();
    send("response.output_item.added", {{"output_index", n - 1}, {"item", std::move(item)}});
    send("response.content_part.added", {{"item_id", item_id("msg_", job_id(), n - 1)},
                                         {"output_index", n - 1},
                                         {"content_index", 0},
                                         {"part", output_text_part("")}});
    item_ended(n - 1);
  }
  ojson output = ojson::array();
  for (size_t i = 0; i < n; ++i) {
    output.push_back(output_item(i, incomplete && i + 1 == n ? "incomplete" : "completed"));
  }
  ojson body = response(incomplete ? "incomplete" : "completed", output, usage_json(done));
  if (incomplete) {
    const bool context = done.stop_reason == "context_full";
    body["incomplete_details"] = {{"reason", context ? "max_input_tokens" : "max_output_tokens"}};
  }
  if (!streaming()) {
    http_response r;
    r.body = json_text(body);
    return out().reply(std::move(r));
  }
  send(incomplete ? "response.incomplete" : "response.completed", {{"response", std::move(body)}});
}

void responses_answer::error_events(const http_response& openai_error) {
  const ojson e = ojson::parse(openai_error.body, nullptr, false);
  const ojson err = e.is_object() && e.contains("error") ? e["error"] : ojson::object();
  const ojson message = err.value("message", ojson("the job failed"));
  send("error", {{"code", err.value("code", ojson(nullptr))},
                 {"message", message},
                 {"param", err.value("param", ojson(nullptr))}});
  ojson body = response("failed", ojson::array(), nullptr);
  body["error"] = {{"code", "server_error"}, {"message", message}};
  send("response.failed", {{"response", std::move(body)}});
}

}  // namespace hearth::gateway
