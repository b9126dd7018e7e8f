// Anthropic's request -> a chat job's messages:
//   system (a string or text blocks)          a system message, first
//   {role "user", content}                    its tool_result blocks as tool messages (each
//                                             answering its tool_use_id, named after the call),
//                                             then its text blocks as a user message
//   {role "assistant", content}               one assistant message: text blocks joined, thinking
//                                             as reasoning_content, tool_use blocks as tool calls
//                                             (input, an object, as JSON text)
// tools ({name, description, input_schema}) go to the job in OpenAI's chat shape, as the node and
// the templates take them; tool_choice auto / any / tool / none is auto / required /
// function:NAME / none, disable_parallel_tool_use turns parallel_tool_calls off. Sampling as
// Anthropic's: temperature 1 unless given, no top_p, top_k, min_p or repeat penalty.
// `thinking` {type: enabled | adaptive} lets a thinking model reason (its reasoning comes back as
// thinking blocks); without it, or disabled, the model is asked to answer without reasoning, as
// Anthropic's models do.
#include "gateway/anthropic-api.h"

#include <limits>

#include "gateway/openai-request.h"
#include "schema/job-params.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

// Not `dump`: the asan preset's unity build compiles this file beside batch-service.cpp's.
std::string compact_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The type of a content block, or nullopt (refused) when it has none.
std::optional<std::string> block_type(field_reader& fr, const json& block, const std::string& p) {
  if (!block.is_object()) return fr.wrong_type(p, "an object", block), std::nullopt;
  auto type = fr.string(block, "type", p + ".type");
  if (!type && !fr.refused()) fr.refuse(p + ".type", p + ".type is required");
  return type;
}

void refuse_block(field_reader& fr, const std::string& p, const std::string& type,
                  std::string_view allowed) {
  fr.refuse(p + ".type", p + ".type '" + type + "' is not supported here: " + std::string(allowed) +
                             " (hearth takes text)");
}

// Calls each(type, block, p) for the content blocks of `blocks` (named `param`), each with its
// type and name, until one is refused.
template <class Each>
void each_block(field_reader& fr, const json& blocks, const std::string& param, Each each) {
  for (size_t i = 0; i < blocks.size() && !fr.refused(); ++i) {
    const std::string p = param_at(param, i);
    auto type = block_type(fr, blocks[i], p);
    if (!type) return;
    each(*type, blocks[i], p);
  }
}

// Text blocks (system, a tool_result's content): a string, or text blocks joined.
std::optional<std::string> text_blocks(field_reader& fr, const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array())
    return fr.wrong_type(param, "a string or an array of text blocks", v), std::nullopt;
  std::string text;
  each_block(fr, v, param, [&](const std::string& type, const json& b, const std::string& p) {
    if (type != "text") return refuse_block(fr, p, type, "text");
    auto t = fr.required(b, "text", p + ".text");
    if (!t) return;
    if (!text.empty()) text += "\n";
    text += *t;
  });
  if (fr.refused()) return std::nullopt;
  return text;
}

class messages_reader : public chat_turns_reader {
 public:
  using chat_turns_reader::chat_turns_reader;

 private:
  void turn(const json& m, const std::string& p) override {
    auto role = fr_.required(m, "role", p + ".role");
    if (!role) return;
    if (*role != "user" && *role != "assistant" && *role != "system") {
      return fr_.refuse(p + ".role",
                        p + ".role '" + *role + "' is not supported: user or assistant");
    }
    const json* content = field_reader::field(m, "content");
    if (!content) return fr_.refuse(p + ".content", p + ".content is required");
    if (content->is_string()) {
      out_.push_back(wire::chat_message{*role, content->get<std::string>()});
      return;
    }
    if (!content->is_array()) {
      return fr_.wrong_type(p + ".content", "a string or an array of content blocks", *content);
    }
    if (*role == "assistant") return assistant(*content, p + ".content");
    if (*role == "system") {
      auto text = text_blocks(fr_, *content, p + ".content");
      if (text) out_.push_back(wire::chat_message{"system", std::move(*text)});
      return;
    }
    user(*content, p + ".content");
  }

  void assistant(const json& blocks, const std::string& param) {
    wire::chat_message m{"assistant", ""};
    each_block(fr_, blocks, param,
               [&](const std::string& type, const json& b, const std::string& p) {
                 if (type == "text") {
                   if (auto t = fr_.required(b, "text", p + ".text")) m.content += *t;
                 } else if (type == "thinking") {
                   if (auto t = fr_.required(b, "thinking", p + ".thinking"))
                     m.reasoning_content += *t;
                 } else if (type == "redacted_thinking") {
                   // Encrypted reasoning of another provider's model: nothing a template can show.
                 } else if (type == "tool_use") {
                   auto id = fr_.required(b, "id", p + ".id");
                   auto name = fr_.required(b, "name", p + ".name");
                   if (fr_.refused()) return;
                   const json* input = field_reader::field(b, "input");
                   if (input && !input->is_object())
                     return fr_.wrong_type(p + ".input", "an object", *input);
                   add_call(m, wire::tool_call{*id, *name, input ? compact_json(*input) : "{}"});
                 } else {
                   refuse_block(fr_, p, type, "text, thinking, redacted_thinking or tool_use");
                 }
               });
    if (fr_.refused()) return;
    out_.push_back(std::move(m));
  }

  // Tool results answer the calls of the turn before, so they come first, then the user's text.
  void user(const json& blocks, const std::string& param) {
    std::string text;
    bool has_text = false;
    size_t results = 0;
    each_block(fr_, blocks, param,
               [&](const std::string& type, const json& b, const std::string& p) {
                 if (type == "text") {
                   auto t = fr_.required(b, "text", p + ".text");
                   if (!t) return;
                   text += *t;
                   has_text = true;
                 } else if (type == "tool_result") {
                   auto id = fr_.required(b, "tool_use_id", p + ".tool_use_id");
                   if (!id) return;
                   std::string content;
                   if (const json* c = field_reader::field(b, "content")) {
                     auto t = text_blocks(fr_, *c, p + ".content");
                     if (!t) return;
                     content = std::move(*t);
                   }
                   // A template has no field for a failed tool: the model learns it from the text.
                   if (auto e = fr_.boolean(b, "is_error", p + ".is_error"); e && *e) {
                     content = "Error: " + content;
                   }
                   if (fr_.refused()) return;
                   add_tool_answer(*id, std::move(content));
                   ++results;
                 } else {
                   refuse_block(fr_, p, type, "text or tool_result");
                 }
               });
    if (fr_.refused()) return;
    if (has_text || results == 0) {
      out_.push_back(wire::chat_message{"user", std::move(text)});
    }
  }
};

void read_messages(field_reader& fr, const json& body, wire::submit& s) {
  if (const json* system = field_reader::field(body, "system")) {
    auto text = text_blocks(fr, *system, "system");
    if (!text) return;
    s.messages.push_back(wire::chat_message{"system", std::move(*text)});
  }
  const json* messages = field_reader::field(body, "messages");
  if (!messages) return fr.refuse("messages", "messages is required");
  if (!messages->is_array()) return fr.wrong_type("messages", "an array", *messages);
  if (messages->empty()) return fr.refuse("messages", "messages must not be empty");
  array_bounded(fr, *messages, "messages", wire::max_array_items);
  messages_reader(fr, s.messages).read(*messages, "messages");
  if (fr.refused()) return;
  chat_messages_bounded(fr, s.messages, "messages");
}

// Anthropic's tools: {name, description, input_schema}, of type custom when it says.
constexpr function_tool_shape k_anthropic_tool = {
    "custom", false, "hearth runs the client's own tools (custom), not Anthropic's server tools",
    "input_schema", true};

void read_tool_choice(field_reader& fr, const json& body, wire::api_params& api) {
  const json* c = fr.object(body, "tool_choice", "tool_choice");
  if (!c) return;
  auto type = fr.required(*c, "type", "tool_choice.type");
  if (!type) return;
  if (*type == "auto") {
    api.tool_choice = "auto";
  } else if (*type == "any") {
    api.tool_choice = "required";
  } else if (*type == "none") {
    api.tool_choice = "none";
  } else if (*type == "tool") {
    auto name = fr.required(*c, "name", "tool_choice.name");
    if (!name) return;
    api.tool_choice = "function:" + *name;
  } else {
    return fr.refuse("tool_choice.type",
                     "tool_choice.type must be auto, any, tool or none, got '" + *type + "'");
  }
  if (auto d =
          fr.boolean(*c, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use")) {
    api.parallel_tool_calls = !*d;
  }
}

void read_stop_sequences(field_reader& fr, const json& body, std::vector<std::string>& stop) {
  const json* v = field_reader::field(body, "stop_sequences");
  if (!v) return;
  if (!v->is_array()) return fr.wrong_type("stop_sequences", "an array of strings", *v);
  if (v->size() > generation_max_stop_strings) {
    return fr.refuse("stop_sequences", "stop_sequences holds " + std::to_string(v->size()) +
                                           "; at most " +
                                           std::to_string(generation_max_stop_strings));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      return fr.wrong_type(param_at("stop_sequences", i), "a string", (*v)[i]);
    stop.push_back((*v)[i].get<std::string>());
  }
}

// thinking {type: enabled | adaptive | disabled}; absent: no reasoning, as Anthropic's default.
void read_thinking(field_reader& fr, const json& body, wire::job_params& p) {
  p.enable_thinking = false;
  const json* t = fr.object(body, "thinking", "thinking");
  if (!t) return;
  auto type = fr.required(*t, "type", "thinking.type");
  if (!type) return;
  if (*type == "enabled" || *type == "adaptive") {
    // budget_tokens has no counterpart: a thinking model reasons as long as it does.
    fr.integer(*t, "budget_tokens", "thinking.budget_tokens", 0,
               std::numeric_limits<int64_t>::max());
    p.enable_thinking = true;
  } else if (*type != "disabled") {
    fr.refuse("thinking.type",
              "thinking.type must be enabled, adaptive or disabled, got '" + *type + "'");
  }
}

// output_config.format (or the older output_format): {type: json_schema, schema}.
void read_output_format(field_reader& fr, const json& body, wire::api_params& api) {
  const json* format = nullptr;
  std::string param = "output_format";
  if (const json* config = field_reader::field(body, "output_config")) {
    if (!config->is_object()) return fr.wrong_type("output_config", "an object", *config);
    format = field_reader::field(*config, "format");
    param = "output_config.format";
  }
  if (!format) format = field_reader::field(body, "output_format");
  if (!format) return;
  if (!format->is_object()) return fr.wrong_type(param, "an object", *format);
  auto type = fr.required(*format, "type", param + ".type");
  if (!type) return;
  if (*type != "json_schema") {
    return fr.refuse(param + ".type", param + ".type must be json_schema, got '" + *type + "'");
  }
  const json* schema = field_reader::field(*format, "schema");
  if (!schema) return fr.refuse(param + ".schema", param + ".schema is required");
  if (!schema->is_object()) return fr.wrong_type(param + ".schema", "an object", *schema);
  api.json_schema = compact_json(*schema);
}

ojson usage_json(uint32_t input_tokens, uint32_t output_tokens) {
  return {{"input_tokens", input_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", 0},
          {"output_tokens", output_tokens}};
}

// A tool call's input: its arguments as JSON (an object, as the node writes them); arguments
// that are not JSON are passed on as the string they are rather than lost.
ojson tool_input(const std::string& arguments) {
  if (arguments.empty()) return ojson::object();
  ojson v = ojson::parse(arguments, nullptr, false);
  return v.is_discarded() ? ojson(arguments) : v;
}

std::string_view anthropic_error_type(int status) {
  switch (status) {
    case 400:
    case 409:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
  }
}

// The message of an error in OpenAI's shape (or its whole body when it has none).
std::string error_message(const http_response& openai_error) {
  const json e = json::parse(openai_error.body, nullptr, false);
  if (e.is_object() && e.contains("error") && e["error"].is_object()) {
    const json& err = e["error"];
    if (err.contains("message") && err["message"].is_string()) return err["message"];
  }
  return openai_error.body;
}

}  // namespace

std::variant<anthropic_request, request_refusal> parse_anthropic_request(std::string_view body) {
  auto parsed = request_body_json(body);
  if (!parsed) return request_refusal{400, parsed.message(), "", ""};
  const json& j = *parsed;
  anthropic_request r;
  wire::submit& s = r.submit;
  wire::job_params& p = s.params;
  p = openai_default_params();  // Anthropic's are the same: temperature 1, nothing else

  field_reader fr;
  if (auto m = fr.string(j, "model", "model")) s.model = std::move(*m);
  if (auto e = field_refusal(fr)) return *e;
  if (s.model.empty()) return request_refusal{400, "model: field required", "model", ""};
  auto max_tokens = fr.integer(j, "max_tokens", "max_tokens", 1, generation_max_tokens_limit);
  if (auto e = field_refusal(fr)) return *e;
  if (!max_tokens) return request_refusal{400, "max_tokens: field required", "max_tokens", ""};
  p.max_tokens = int32_t(*max_tokens);
  read_messages(fr, j, s);
  if (auto e = field_refusal(fr)) return *e;
  p.api.tools = chat_tools(fr, j, k_anthropic_tool);
  read_tool_choice(fr, j, p.api);
  named_tool_check(fr, p.api, "tool_choice.name");
  read_stop_sequences(fr, j, p.stop);
  read_thinking(fr, j, p);
  read_output_format(fr, j, p.api);
  if (auto v = fr.number(j, "temperature", "temperature", 0, 1)) p.temperature = float(*v);
  if (auto v = fr.number(j, "top_p", "top_p", 0, 1)) {
    p.top_p = *v > 0 ? float(*v) : std::numeric_limits<float>::min();
  }
  if (auto v = fr.integer(j, "top_k", "top_k", 0, std::numeric_limits<int32_t>::max())) {
    p.top_k = int32_t(*v);
  }
  if (auto v = fr.boolean(j, "stream", "stream")) r.stream = *v;
  if (const json* mcp = field_reader::field(j, "mcp_servers"); mcp && !mcp->empty()) {
    fr.refuse("mcp_servers", "mcp_servers is not supported: the client runs its tools");
  }
  // hearth's: one of its templates by name, for a model whose file has none.
  if (auto t = fr.string(j, "chat_template", "chat_template")) p.chat_template = std::move(*t);
  if (auto e = field_refusal(fr)) return *e;

  // Tool calls come back as output events; without tools a thinking model's think block comes
  // in the text (show_thinking) when thinking was asked for.
  p.api.events = !p.api.tools.empty();
  p.show_thinking = !p.api.events && p.enable_thinking;
  if (auto e = job_params_refusal(
          p, {{"stop", "stop_sequences"}, {"json_schema", "output_config.format.schema"}})) {
    return *e;
  }
  return r;
}

http_response anthropic_error(const http_response& openai_error) {
  ojson body = {{"type", "error"},
                {"error",
                 {{"type", std::string(anthropic_error_type(openai_error.status))},
                  {"message", error_message(openai_error)}}}};
  http_response r;
  r.status = openai_error.status;
  r.headers = openai_error.headers;
  r.body = json_text(body);
  return r;
}

std::string_view anthropic_stop_reason(std::string_view finish, std::string_view job_stop_reason) {
  if (finish == "tool_calls") return "tool_use";
  if (finish == "length") {
    return job_stop_reason == "context_full" ? "model_context_window_exceeded" : "max_tokens";
  }
  return job_stop_reason == "stop_string" ? "stop_sequence" : "end_turn";
}

std::string anthropic_message_id(uint64_t job_id) {
  return "msg_" + std::to_string(job_id);
}

anthropic_answer::anthropic_answer(anthropic_request r, int64_t created,
                                   std::shared_ptr<responder> out)
    : chat_answer(r.submit, r.stream, created, std::move(out)),
      stop_sequence_(r.submit.params.stop.size() == 1 ? r.submit.params.stop[0] : "") {}

ojson anthropic_answer::message(ojson content, ojson stop_reason, ojson stop_sequence,
                                ojson usage) const {
  return {{"id", anthropic_message_id(job_id())},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model()},
          {"content", std::move(content)},
          {"stop_reason", std::move(stop_reason)},
          {"stop_sequence", std::move(stop_sequence)},
          {"usage", std::move(usage)}};
}

void anthropic_answer::opened() {
  send_event("message_start",
             {{"message", message(ojson::array(), nullptr, nullptr, usage_json(0, 0))}});
  send_event("ping", ojson::object());
}

void anthropic_answer::item_began(size_t i) {
  const chat_item& it = items()[i];
  ojson block;
  switch (it.k) {
    case chat_item::kind::reasoning:
      block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
      break;
    case chat_item::kind::content:
      block = {{"type", "text"}, {"text", ""}};
      break;
    case chat_item::kind::tool_call:
      block = {{"type", "tool_use"},
               {"id", it.call.id},
               {"name", it.call.name},
               {"input", ojson::object()}};
      break;
  }
  send_event("content_block_start", {{"index", i}, {"content_block", std::move(block)}});
  if (it.k == chat_item::kind::tool_call) {
    // A call comes whole: its input in one delta.
    const std::string& args = it.call.arguments.empty() ? "{}" : it.call.arguments;
    send_event("content_block_delta",
               {{"index", i}, {"delta", {{"type", "input_json_delta"}, {"partial_json", args}}}});
  }
}

void anthropic_answer::item_grew(size_t i, std::string_view delta) {
  const bool thinking = items()[i].k == chat_item::kind::reasoning;
  ojson d = thinking ? ojson{{"type", "thinking_delta"}, {"thinking", std::string(delta)}}
                     : ojson{{"type", "text_delta"}, {"text", std::string(delta)}};
  send_event("content_block_delta", {{"index", i}, {"delta", std::move(d)}});
}

void anthropic_answer::item_ended(size_t i) {
  send_event("content_block_stop", {{"index", i}});
}

void anthropic_answer::completed(const wire::job_done& done, std::string_view finish) {
  const std::string stop_reason(anthropic_stop_reason(finish, done.stop_reason));
  const ojson stop_sequence = stop_reason == "stop_sequence" && !stop_sequence_.empty()
                                  ? ojson(stop_sequence_)
                                  : ojson(nullptr);
  if (streaming()) {
    send_event("message_delta",
               {{"delta", {{"stop_reason", stop_reason}, {"stop_sequence", stop_sequence}}},
                {"usage", usage_json(done.n_prompt, done.n_gen)}});
    send_event("message_stop", ojson::object());
    return;
  }
  ojson content = ojson::array();
  for (const chat_item& it : items()) {
    switch (it.k) {
      case chat_item::kind::reasoning:
        content.push_back({{"type", "thinking"}, {"thinking", it.text}, {"signature", ""}});
        break;
      case chat_item::kind::content:
        content.push_back({{"type", "text"}, {"text", it.text}});
        break;
      case chat_item::kind::tool_call:
        content.push_back({{"type", "tool_use"},
                           {"id", it.call.id},
                           {"name", it.call.name},
                           {"input", tool_input(it.call.arguments)}});
        break;
    }
  }
  http_response r;
  r.body = json_text(message(std::move(content), stop_reason, stop_sequence,
                             usage_json(done.n_prompt, done.n_gen)));
  out().reply(std::move(r));
}

http_response anthropic_answer::error_reply(const http_response& openai_error) {
  return anthropic_error(openai_error);
}

void anthropic_answer::error_events(const http_response& openai_error) {
  const ojson body = ojson::parse(anthropic_error(openai_error).body);
  out().named_event("error", json_text(body));
}

}  // namespace hearth::gateway
