// OpenAI's request bodies checked field by field into a wire::submit, and a finished job turned
// into OpenAI's response or error. Where OpenAI's defaults differ from hearth's (the CLI's), a
// request gets OpenAI's, so that a client written for OpenAI samples as it expects:
//   temperature 1, top_p 1, top_k and min_p off (0), repeat_penalty off (1); the presence and
//   frequency penalties count every token of the sequence so far (repeat_last_n -1), as OpenAI's
//   "the text so far" does.
//   max_tokens: OpenAI has no default limit (generation ends at the end of generation or when
//   the context is full); neither has the gateway: a request without one asks for
//   generation_max_tokens_limit tokens, so the slot's context bounds it (stop_reason
//   "context_full", finish_reason "length").
//   seed: the wire's seed 0 means "the broker chooses", so OpenAI's seed 0 is sent as 2^63,
//   which no other seed the gateway accepts ([0, 2^63 - 1]) maps to.
#include "gateway/openai-request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "gateway/openai-json.h"
#include "schema/job-params.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

// OpenAI's own limit on stop sequences.
constexpr size_t k_max_stop = 4;
// The text of one request must fit one wire string (and so one wire message, with room for the
// rest of the submit).
constexpr size_t k_max_text_bytes = wire::max_string_bytes;
constexpr uint64_t k_seed_zero = uint64_t(1) << 63;
// OpenAI's own limits: top_logprobs 0..20, 128 tools, logit_bias entries (300, as llama.cpp's
// server and schema/job-params.cpp take).
constexpr int64_t k_max_top_logprobs = 20;
constexpr size_t k_max_tools = 128;
constexpr size_t k_max_logit_bias = 300;

request_refusal refusal(std::string param, std::string message, std::string code = {}) {
  return request_refusal{400, std::move(message), std::move(param), std::move(code)};
}

request_refusal wrong_type(const std::string& param, std::string_view expected, const json& v) {
  return refusal(param, param + " must be " + std::string(expected) + ", got " + json_kind_text(v));
}

// The number's text as a message shows it.
std::string number_text(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

// Reads the request's fields one by one; the first refusal wins.
class request_reader {
 public:
  explicit request_reader(const json& body) : body_(body) {}

  const std::optional<request_refusal>& refused() const { return refused_; }
  void refuse(request_refusal r) {
    if (!refused_) refused_ = std::move(r);
  }

  // The field, or nullptr when absent or null (OpenAI treats both as "not given").
  const json* field(const char* name) const {
    auto it = body_.find(name);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<std::string> string(const char* name) {
    const json* v = field(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) return refuse(wrong_type(name, "a string", *v)), std::nullopt;
    return v->get<std::string>();
  }

  std::optional<bool> boolean(const char* name) {
    const json* v = field(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) return refuse(wrong_type(name, "a boolean", *v)), std::nullopt;
    return v->get<bool>();
  }

  // A number in [lo, hi].
  std::optional<double> number(const char* name, double lo, double hi) {
    const json* v = field(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) return refuse(wrong_type(name, "a number", *v)), std::nullopt;
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi)) {
      refuse(refusal(
          name, param_error(name, "in [" + number_text(lo) + ", " + number_text(hi) + "]", d)));
      return std::nullopt;
    }
    return d;
  }

  // An integer in [lo, hi].
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) {
    const json* v = field(name);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) return refuse(wrong_type(name, "an integer", *v)), std::nullopt;
    // An unsigned value past int64's range reads as out of range, not as a wrapped negative.
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi)) {
      refuse(refusal(name, std::string(name) + " must be in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "], got " + v->dump()));
      return std::nullopt;
    }
    const int64_t i = v->get<int64_t>();
    if (i < lo || i > hi) {
      refuse(refusal(
          name,
          param_error(name, "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", i)));
      return std::nullopt;
    }
    return i;
  }

  // A parameter hearth cannot honour: refused unless absent or set to its "off" value.
  void unsupported_unless(const char* name, bool off, const std::string& why) {
    if (field(name) && !off) refuse(refusal(name, std::string(name) + " " + why));
  }

 private:
  const json& body_;
  std::optional<request_refusal> refused_;
};

// Content of a chat message: a string, or an array of text parts joined.
std::optional<std::string> message_content(const json& content, const std::string& param,
                                           request_reader& rr) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    rr.refuse(wrong_type(param, "a string or an array of text parts", content));
    return std::nullopt;
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return rr.refuse(wrong_type(p, "an object", part)), std::nullopt;
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      rr.refuse(refusal(p + ".type", p + ".type must be the string \"text\""));
      return std::nullopt;
    }
    if (*type != "text") {
      rr.refuse(refusal(p + ".type", p + ".type '" + type->get<std::string>() +
                                         "' is not supported: hearth takes text parts only"));
      return std::nullopt;
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) {
      rr.refuse(wrong_type(p + ".text", "a string", t == part.end() ? json() : *t));
      return std::nullopt;
    }
    text += t->get_ref<const std::string&>();
  }
  return text;
}

// A JSON value given as text (a tool call's arguments): parsed within the depth bound, or
// nullopt.
std::optional<json> json_of_text(std::string_view text) {
  auto j = json_parse_bounded(text);
  if (!j) return std::nullopt;
  return std::move(*j);
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}],
// arguments as JSON text (OpenAI's) or, leniently, as the object itself. The text must be JSON:
// the template gets it as a value.
void read_tool_calls(const json& calls, const std::string& param, wire::chat_message& m,
                     request_reader& rr) {
  if (!calls.is_array()) return rr.refuse(wrong_type(param, "an array", calls));
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& call = calls[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!call.is_object()) return rr.refuse(wrong_type(p, "an object", call));
    wire::tool_call tc;
    auto id = call.find("id");
    if (id != call.end() && !id->is_null()) {
      if (!id->is_string()) return rr.refuse(wrong_type(p + ".id", "a string", *id));
      tc.id = id->get<std::string>();
    }
    auto type = call.find("type");
    if (type != call.end() && !type->is_null() && *type != "function") {
      return rr.refuse(refusal(p + ".type", p + ".type must be \"function\""));
    }
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) {
      return rr.refuse(wrong_type(p + ".function", "an object", fn == call.end() ? json() : *fn));
    }
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return rr.refuse(
          refusal(p + ".function.name", p + ".function.name must be a function's name"));
    }
    tc.name = name->get<std::string>();
    auto args = fn->find("arguments");
    const std::string ap = p + ".function.arguments";
    if (args == fn->end() || args->is_null()) {
      tc.arguments = "{}";
    } else if (args->is_string()) {
      tc.arguments = args->get<std::string>();
      if (!json_of_text(tc.arguments)) {
        return rr.refuse(refusal(ap, ap + " must be JSON text (the call's arguments), got " +
                                         args->dump().substr(0, 80)));
      }
    } else if (args->is_object()) {
      tc.arguments = args->dump();
    } else {
      return rr.refuse(wrong_type(ap, "a string of JSON", *args));
    }
    m.tool_calls.push_back(std::move(tc));
  }
}

// messages -> the submit's conversation: system (developer), user, assistant (with tool_calls),
// tool (answering a call by tool_call_id).
void read_messages(request_reader& rr, wire::submit& s) {
  const json* m = rr.field("messages");
  if (!m) return rr.refuse(refusal("messages", "messages is required"));
  if (!m->is_array()) return rr.refuse(wrong_type("messages", "an array", *m));
  if (m->empty()) return rr.refuse(refusal("messages", "messages must not be empty"));
  if (m->size() > wire::max_array_items) {
    return rr.refuse(refusal(
        "messages", param_error("the number of messages",
                                "at most " + std::to_string(wire::max_array_items), m->size())));
  }
  size_t bytes = 0;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return rr.refuse(wrong_type(p, "an object", msg));
    auto role = msg.find("role");
    if (role == msg.end() || !role->is_string()) {
      return rr.refuse(wrong_type(p + ".role", "a string", role == msg.end() ? json() : *role));
    }
    wire::chat_message out;
    out.role = role->get<std::string>();
    // OpenAI's newer name for the system role.
    if (out.role == "developer") out.role = "system";
    if (out.role != "system" && out.role != "user" && out.role != "assistant" &&
        out.role != "tool") {
      return rr.refuse(refusal(p + ".role", p + ".role '" + out.role +
                                                "' is not supported: system, developer, user, "
                                                "assistant or tool"));
    }
    for (auto [key, dst] :
         {std::pair{"name", &out.name}, std::pair{"tool_call_id", &out.tool_call_id},
          std::pair{"reasoning_content", &out.reasoning_content}}) {
      auto v = msg.find(key);
      if (v == msg.end() || v->is_null()) continue;
      if (!v->is_string()) return rr.refuse(wrong_type(p + "." + key, "a string", *v));
      *dst = v->get<std::string>();
    }
    if (out.role == "tool" && out.tool_call_id.empty()) {
      return rr.refuse(refusal(p + ".tool_call_id",
                               p + ".tool_call_id is required: the id of the call it answers"));
    }
    if (auto tc = msg.find("tool_calls"); tc != msg.end() && !tc->is_null()) {
      if (out.role != "assistant") {
        return rr.refuse(
            refusal(p + ".tool_calls", p + ".tool_calls is for assistant messages only"));
      }
      read_tool_calls(*tc, p + ".tool_calls", out, rr);
      if (rr.refused()) return;
    }
    auto content = msg.find("content");
    if (content == msg.end()) {
      // An assistant turn that made calls comes without content (OpenAI's).
      if (out.role != "assistant")
        return rr.refuse(refusal(p + ".content", p + ".content is required"));
    } else if (!content->is_null()) {
      // content null reads as "", as llama.cpp's server takes it.
      auto c = message_content(*content, p + ".content", rr);
      if (!c) return;
      out.content = std::move(*c);
    }
    bytes += out.content.size() + out.name.size() + out.tool_call_id.size() +
             out.reasoning_content.size();
    for (const auto& tc : out.tool_calls)
      bytes += tc.id.size() + tc.name.size() + tc.arguments.size();
    if (bytes > k_max_text_bytes) {
      return rr.refuse(
          refusal("messages", param_error("the messages' text in bytes",
                                          "at most " + std::to_string(k_max_text_bytes), bytes)));
    }
    s.messages.push_back(std::move(out));
  }
}

// prompt -> the submit's prompt: a string, or a list of one string.
void read_prompt(request_reader& rr, wire::submit& s) {
  const json* p = rr.field("prompt");
  if (!p) return rr.refuse(refusal("prompt", "prompt is required"));
  const json* text = p;
  if (p->is_array()) {
    if (p->size() == 1 && (*p)[0].is_string()) {
      text = &(*p)[0];
    } else if (!p->empty() && (*p)[0].is_number()) {
      return rr.refuse(
          refusal("prompt", "prompt as token ids is not supported: send the prompt as text"));
    } else if (!p->empty() && (*p)[0].is_array()) {
      return rr.refuse(
          refusal("prompt", "prompt as lists of token ids is not supported: send one string"));
    } else {
      return rr.refuse(refusal("prompt",
                               "prompt must be a string or a list of one string, got a "
                               "list of " +
                                   std::to_string(p->size()) + " items"));
    }
  }
  if (!text->is_string()) return rr.refuse(wrong_type("prompt", "a string", *text));
  s.prompt = text->get<std::string>();
  if (s.prompt.empty()) return rr.refuse(refusal("prompt", "prompt must not be empty"));
  if (s.prompt.size() > k_max_text_bytes) {
    return rr.refuse(refusal(
        "prompt", param_error("prompt's length in bytes",
                              "at most " + std::to_string(k_max_text_bytes), s.prompt.size())));
  }
}

// stop: a string or a list of at most 4.
void read_stop(request_reader& rr, std::vector<std::string>& stop) {
  const json* v = rr.field("stop");
  if (!v) return;
  if (v->is_string()) {
    stop.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > k_max_stop) {
      return rr.refuse(
          refusal("stop", param_error("the number of stop sequences", "at most 4", v->size())));
    }
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        return rr.refuse(wrong_type("stop[" + std::to_string(i) + "]", "a string", (*v)[i]));
      }
      stop.push_back((*v)[i].get<std::string>());
    }
  } else {
    return rr.refuse(wrong_type("stop", "a string or an array of strings", *v));
  }
}

// The parameters hearth cannot honour, refused unless set to what means "off".
void refuse_unsupported(request_reader& rr, openai_endpoint endpoint) {
  auto is_false = [&](const char* n) {
    const json* v = rr.field(n);
    return !v || (v->is_boolean() && !v->get<bool>());
  };
  auto is_empty = [&](const char* n) {
    const json* v = rr.field(n);
    if (v && v->is_string()) return v->get_ref<const std::string&>().empty();
    return !v || ((v->is_array() || v->is_object()) && v->empty());
  };
  auto is_one = [&](const char* n) {
    const json* v = rr.field(n);
    return !v || (v->is_number() && v->get<double>() == 1);
  };
  if (endpoint == openai_endpoint::completions) {
    rr.unsupported_unless("echo", is_false("echo"), "is not supported");
    rr.unsupported_unless("best_of", is_one("best_of"), "> 1 is not supported");
    rr.unsupported_unless("suffix", is_empty("suffix"), "is not supported");
  }
  // The deprecated forms of tools and tool_choice, whose answers (message.function_call) differ.
  rr.unsupported_unless("functions", is_empty("functions"),
                        "is not supported: send them as tools (type \"function\")");
  if (const json* v = rr.field("function_call")) {
    const bool off = v->is_string() && (*v == "none" || *v == "auto");
    rr.unsupported_unless("function_call", off, "is not supported: use tool_choice");
  }
  const json* a = rr.field("audio");
  rr.unsupported_unless("audio", !a, "is not supported: hearth answers text");
  if (const json* m = rr.field("modalities")) {
    const bool text = m->is_array() && m->size() == 1 && (*m)[0] == "text";
    rr.unsupported_unless("modalities", text, "is not supported but for [\"text\"]");
  }
}

// tools, tool_choice, parallel_tool_calls (chat).
void read_tools(request_reader& rr, wire::api_params& api) {
  std::vector<std::string> names;
  if (const json* t = rr.field("tools")) {
    auto text = openai_tools_text(*t, "tools", &names);
    if (auto* r = std::get_if<request_refusal>(&text)) return rr.refuse(std::move(*r));
    api.tools = std::move(std::get<std::string>(text));
  }
  if (const json* c = rr.field("tool_choice")) {
    auto choice = openai_tool_choice(*c, "tool_choice", names);
    if (auto* r = std::get_if<request_refusal>(&choice)) return rr.refuse(std::move(*r));
    api.tool_choice = std::move(std::get<std::string>(choice));
  }
  if (auto v = rr.boolean("parallel_tool_calls")) api.parallel_tool_calls = *v;
}

// response_format, and llama.cpp's server's `json_schema` and `grammar` (for completions too, as
// that server takes them): one constraint at a time.
void read_constraints(request_reader& rr, wire::api_params& api) {
  if (const json* f = rr.field("response_format")) {
    auto schema = openai_response_format_schema(*f, "response_format");
    if (auto* r = std::get_if<request_refusal>(&schema)) return rr.refuse(std::move(*r));
    api.json_schema = std::move(std::get<std::string>(schema));
  }
  if (const json* s = rr.field("json_schema")) {
    if (!s->is_object())
      return rr.refuse(wrong_type("json_schema", "an object (a JSON Schema)", *s));
    if (!api.json_schema.empty()) {
      return rr.refuse(refusal("json_schema",
                               "json_schema and a JSON response_format exclude each other: "
                               "send one"));
    }
    api.json_schema = s->dump();
  }
  if (auto g = rr.string("grammar")) {
    if (!api.json_schema.empty()) {
      return rr.refuse(refusal("grammar",
                               "grammar and a JSON schema (response_format, json_schema) exclude "
                               "each other: send one"));
    }
    api.grammar = std::move(*g);
  }
}

// logprobs and top_logprobs (chat: a boolean and a count; completions: logprobs is the count),
// n, logit_bias ({"token id": bias}).
void read_sampling_extras(request_reader& rr, openai_endpoint endpoint, wire::api_params& api) {
  if (endpoint == openai_endpoint::chat_completions) {
    if (auto v = rr.boolean("logprobs")) api.logprobs = *v;
    if (auto v = rr.integer("top_logprobs", 0, k_max_top_logprobs)) {
      if (*v > 0 && !api.logprobs) {
        return rr.refuse(refusal("top_logprobs", "top_logprobs needs logprobs: true"));
      }
      api.top_logprobs = int32_t(*v);
    }
  } else if (auto v = rr.integer("logprobs", 0, k_max_top_logprobs)) {
    api.logprobs = true;
    api.top_logprobs = int32_t(*v);
  }
  if (auto v = rr.integer("n", 1, k_max_choices)) api.n = int32_t(*v);
  if (const json* b = rr.field("logit_bias")) {
    if (!b->is_object()) return rr.refuse(wrong_type("logit_bias", "an object", *b));
    if (b->size() > k_max_logit_bias) {
      return rr.refuse(refusal(
          "logit_bias", param_error("the number of logit_bias entries",
                                    "at most " + std::to_string(k_max_logit_bias), b->size())));
    }
    for (const auto& [key, value] : b->items()) {
      const std::string p = "logit_bias[\"" + key.substr(0, 32) + "\"]";
      // A token id in decimal, as OpenAI's keys are.
      const bool digits = !key.empty() && key.size() <= 10 &&
                          key.find_first_not_of("0123456789") == std::string::npos;
      if (!digits || std::stoull(key) > uint64_t(std::numeric_limits<int32_t>::max())) {
        return rr.refuse(refusal("logit_bias", p + ": the key must be a token id (a number)"));
      }
      if (!value.is_number()) return rr.refuse(wrong_type(p, "a number", value));
      const double bias = value.get<double>();
      if (!(bias >= -100 && bias <= 100)) {
        return rr.refuse(refusal("logit_bias", param_error(p, "in [-100, 100]", bias)));
      }
      api.logit_bias.push_back(wire::token_bias{int32_t(std::stoul(key)), float(bias)});
    }
  }
}

// Thinking models (Qwen3): `enable_thinking` at the top level or in `chat_template_kwargs` (as
// vLLM and llama.cpp's server take the template's variables), and `include_reasoning`.
void read_thinking(request_reader& rr, openai_request& r) {
  if (auto v = rr.boolean("enable_thinking")) r.submit.params.enable_thinking = *v;
  if (const json* kw = rr.field("chat_template_kwargs")) {
    if (!kw->is_object()) {
      rr.refuse(wrong_type("chat_template_kwargs", "an object", *kw));
    } else {
      // Every variable goes to the template (api.template_kwargs); enable_thinking is also the
      // job's own switch, which templates without the variable honour too.
      if (!kw->empty()) r.submit.params.api.template_kwargs = kw->dump();
      if (auto et = kw->find("enable_thinking"); et != kw->end() && !et->is_null()) {
        if (!et->is_boolean()) {
          rr.refuse(wrong_type("chat_template_kwargs.enable_thinking", "a boolean", *et));
        } else {
          r.submit.params.enable_thinking = et->get<bool>();
        }
      }
    }
  }
  if (auto v = rr.boolean("include_reasoning")) r.include_reasoning = *v;
}

// `chat_template`: one of hearth's template names instead of the model's own (as the CLI's
// --template), for a model whose file has none or one hearth does not recognise; the broker
// names this field when it refuses a chat job for want of a template. A name, not Jinja text
// (vLLM's field of the same name takes a template's text): job_params_check refuses what is not
// shaped as a name, and the node a name it does not know (a 400 with the names there are; the
// gateway does not depend on the engine, which knows them).
void read_chat_template(request_reader& rr, wire::job_params& p) {
  if (auto name = rr.string("chat_template")) p.chat_template = std::move(*name);
}

// A refused job parameter as OpenAI's error: whatever its code, the request's fault (HTTP 400,
// invalid_request_error), naming the request's field where the check names a job parameter of
// another name (api_params' json_schema came from response_format, template_kwargs from
// chat_template_kwargs, a completion's top_logprobs from logprobs).
request_refusal refusal_of(const param_check& e, const request_reader& rr,
                           openai_endpoint endpoint) {
  std::string param = e.param;
  if (param == "json_schema" && rr.field("response_format")) param = "response_format";
  if (param == "template_kwargs") param = "chat_template_kwargs";
  if (param == "top_logprobs" && endpoint == openai_endpoint::completions) param = "logprobs";
  return refusal(std::move(param), e.message);
}

}  // namespace

static bool tool_name_ok(std::string_view name) {
  // OpenAI's rule (a-z, A-Z, 0-9, '_', '-', at most 64), which job_params_check holds
  // tool_choice's name to as well.
  return !name.empty() && name.size() <= 64 &&
         name.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
             std::string_view::npos;
}

std::variant<std::string, request_refusal> openai_tools_text(const nlohmann::json& tools,
                                                             const std::string& param,
                                                             std::vector<std::string>* names) {
  if (!tools.is_array()) return wrong_type(param, "an array of tools", tools);
  if (tools.size() > k_max_tools) {
    return refusal(param, param_error("the number of " + param,
                                      "at most " + std::to_string(k_max_tools), tools.size()));
  }
  std::vector<std::string> seen;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!t.is_object()) return wrong_type(p, "an object", t);
    auto type = t.find("type");
    if (type == t.end() || *type != "function") {
      return refusal(p + ".type", p + ".type must be \"function\" (the only kind hearth runs)");
    }
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) {
      return wrong_type(p + ".function", "an object", fn == t.end() ? json() : *fn);
    }
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() ||
        !tool_name_ok(name->get_ref<const std::string&>())) {
      return refusal(p + ".function.name",
                     p + ".function.name must be a name of 1 to 64 of a-z, A-Z, 0-9, '_', '-'");
    }
    const std::string n = name->get<std::string>();
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) {
      return refusal(p + ".function.name", p + ".function.name '" + n + "' is given twice");
    }
    seen.push_back(n);
    if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string()) {
      return wrong_type(p + ".function.description", "a string", *d);
    }
    if (auto s = fn->find("parameters"); s != fn->end() && !s->is_null() && !s->is_object()) {
      return wrong_type(p + ".function.parameters", "an object (a JSON Schema)", *s);
    }
    if (auto s = fn->find("strict"); s != fn->end() && !s->is_null() && !s->is_boolean()) {
      return wrong_type(p + ".function.strict", "a boolean", *s);
    }
  }
  if (names) *names = seen;
  return tools.empty() ? std::string() : tools.dump();
}

std::variant<std::string, request_refusal> openai_tool_choice(
    const nlohmann::json& v, const std::string& param, const std::vector<std::string>& names) {
  std::string choice;
  if (v.is_string()) {
    choice = v.get<std::string>();
    if (choice != "auto" && choice != "none" && choice != "required") {
      return refusal(param, param +
                                " must be \"auto\", \"none\", \"required\" or "
                                "{\"type\": \"function\", \"function\": {\"name\": ...}}, got \"" +
                                choice.substr(0, 64) + "\"");
    }
  } else if (v.is_object()) {
    auto type = v.find("type");
    auto fn = v.find("function");
    auto name = fn != v.end() && fn->is_object() ? fn->find("name") : v.end();
    if (type == v.end() || *type != "function" || fn == v.end() || !fn->is_object() ||
        name == fn->end() || !name->is_string()) {
      return refusal(param, param +
                                " must be {\"type\": \"function\", \"function\": {\"name\": "
                                "NAME}} to name a tool");
    }
    const std::string n = name->get<std::string>();
    if (std::find(names.begin(), names.end(), n) == names.end()) {
      return refusal(param,
                     param + " names '" + n.substr(0, 64) + "', which is not one of the tools");
    }
    choice = "function:" + n;
  } else {
    return wrong_type(param, "a string or an object", v);
  }
  if (names.empty()) {
    // Without tools only "no call" makes sense, which is what a job without tools does.
    if (choice == "auto" || choice == "none") return std::string();
    return refusal(param, param + " \"" + choice + "\" needs tools");
  }
  return choice;
}

std::variant<std::string, request_refusal> openai_response_format_schema(const nlohmann::json& f,
                                                                         const std::string& param) {
  if (!f.is_object()) return wrong_type(param, "an object", f);
  auto type = f.find("type");
  if (type == f.end() || !type->is_string()) {
    return refusal(param + ".type", param +
                                        ".type must be \"text\", \"json_object\" or "
                                        "\"json_schema\"");
  }
  if (*type == "text") return std::string();
  if (*type == "json_object") {
    // llama.cpp's server takes a schema here too.
    if (auto s = f.find("schema"); s != f.end() && !s->is_null()) {
      if (!s->is_object()) return wrong_type(param + ".schema", "an object (a JSON Schema)", *s);
      return s->dump();
    }
    return std::string(R"({"type":"object"})");
  }
  if (*type == "json_schema") {
    auto js = f.find("json_schema");
    if (js == f.end() || !js->is_object()) {
      return wrong_type(param + ".json_schema", "an object", js == f.end() ? json() : *js);
    }
    if (auto n = js->find("name"); n != js->end() && !n->is_null() && !n->is_string()) {
      return wrong_type(param + ".json_schema.name", "a string", *n);
    }
    if (auto s = js->find("strict"); s != js->end() && !s->is_null() && !s->is_boolean()) {
      return wrong_type(param + ".json_schema.strict", "a boolean", *s);
    }
    auto s = js->find("schema");
    // Without a schema any JSON value is valid (strict or not: the output is always held to it).
    if (s == js->end() || s->is_null()) return std::string("{}");
    if (!s->is_object() && !s->is_boolean()) {
      return wrong_type(param + ".json_schema.schema", "an object (a JSON Schema)", *s);
    }
    return s->dump();
  }
  return refusal(param + ".type", param + ".type '" + type->get<std::string>().substr(0, 64) +
                                      "' is not supported: \"text\", \"json_object\" or "
                                      "\"json_schema\"");
}

wire::job_params openai_default_params() {
  wire::job_params p;
  p.max_tokens = generation_max_tokens_limit;
  p.temperature = 1;
  p.top_p = 1;
  p.top_k = 0;
  p.min_p = 0;
  p.repeat_penalty = 1;
  p.repeat_last_n = -1;
  return p;
}

std::optional<openai_endpoint> openai_endpoint_of(std::string_view url) {
  if (url == "/v1/chat/completions") return openai_endpoint::chat_completions;
  if (url == "/v1/completions") return openai_endpoint::completions;
  return std::nullopt;
}

std::variant<openai_request, request_refusal> parse_openai_request(openai_endpoint endpoint,
                                                                   std::string_view body) {
  auto parsed = request_body_json(body);
  if (!parsed) return refusal("", parsed.message());
  const json& j = *parsed;

  openai_request r;
  r.endpoint = endpoint;
  wire::submit& s = r.submit;
  wire::job_params& p = s.params;
  p = openai_default_params();

  request_reader rr(j);
  if (auto m = rr.string("model")) s.model = std::move(*m);
  if (rr.refused()) return *rr.refused();
  if (s.model.empty()) return refusal("model", "model is required");
  if (endpoint == openai_endpoint::chat_completions) {
    read_messages(rr, s);
  } else {
    read_prompt(rr, s);
  }
  if (rr.refused()) return *rr.refused();

  refuse_unsupported(rr, endpoint);
  const int64_t max_limit = generation_max_tokens_limit;
  for (const char* n : {"max_tokens", "max_completion_tokens"}) {
    // max_completion_tokens is OpenAI's newer name: it wins when both are given.
    if (auto v = rr.integer(n, 1, max_limit)) p.max_tokens = int32_t(*v);
  }
  if (auto v = rr.number("temperature", 0, 2)) p.temperature = float(*v);
  if (auto v = rr.number("top_p", 0, 1)) {
    // The sampler keeps at least one token: the smallest positive top_p is OpenAI's top_p 0.
    p.top_p = *v > 0 ? float(*v) : std::numeric_limits<float>::min();
  }
  if (auto v = rr.number("presence_penalty", -2, 2)) p.presence_penalty = float(*v);
  if (auto v = rr.number("frequency_penalty", -2, 2)) p.frequency_penalty = float(*v);
  if (auto v = rr.integer("seed", 0, std::numeric_limits<int64_t>::max())) {
    p.seed = *v == 0 ? k_seed_zero : uint64_t(*v);
  }
  read_stop(rr, p.stop);
  if (auto v = rr.boolean("stream")) r.stream = *v;
  if (const json* so = rr.field("stream_options")) {
    if (!so->is_object()) {
      rr.refuse(wrong_type("stream_options", "an object", *so));
    } else if (auto iu = so->find("include_usage"); iu != so->end() && !iu->is_null()) {
      if (!iu->is_boolean()) {
        rr.refuse(wrong_type("stream_options.include_usage", "a boolean", *iu));
      } else {
        r.include_usage = iu->get<bool>();
      }
    }
  }
  if (auto u = rr.string("user")) r.user = std::move(*u);
  if (endpoint == openai_endpoint::chat_completions) {
    read_thinking(rr, r);
    read_chat_template(rr, p);
    read_tools(rr, p.api);
  }
  read_constraints(rr, p.api);
  read_sampling_extras(rr, endpoint, p.api);
  if (rr.refused()) return *rr.refused();
  // The job writes output events when the answer needs more than text: tool calls, logprobs,
  // several choices. A plain job stays plain text, as batches, the history and older nodes
  // read it; its think block then comes in the text (show_thinking) for the answer to split.
  p.api.events = !p.api.tools.empty() || p.api.logprobs || p.api.n > 1;
  p.show_thinking = r.include_reasoning && !p.api.events;

  if (auto e = wire::job_params_check(p); !e.ok()) return refusal_of(e, rr, endpoint);
  return r;
}

std::string_view openai_finish_reason(std::string_view stop_reason) {
  return finish_reason_of_stop(stop_reason);
}

std::string openai_response_id(openai_endpoint endpoint, uint64_t job_id) {
  return (endpoint == openai_endpoint::chat_completions ? "chatcmpl-" : "cmpl-") +
         std::to_string(job_id);
}

http_response openai_response(const openai_request& r, uint64_t job_id, int64_t created,
                              std::string_view output, const wire::job_done& done) {
  const wire::job_params& p = r.submit.params;
  auto out = job_output_of(output, job_output_mode_of(p), uint32_t(std::max(p.api.n, 1)));
  if (!out) {
    return error_response(500, "job " + std::to_string(job_id) + "'s output: " + out.message(),
                          "server_error");
  }
  return openai_response(r, job_id, created, *out, done);
}

http_response openai_response(const openai_request& r, uint64_t job_id, int64_t created,
                              const job_output& out, const wire::job_done& done) {
  ojson choices = ojson::array();
  for (uint32_t i = 0; i < out.choices.size(); ++i) {
    choices.push_back(openai_choice_json(r, i, out.choices[i], done.stop_reason));
  }
  ojson body = openai_object_head(r, job_id, created, false);
  body["choices"] = std::move(choices);
  body["usage"] = openai_usage(done);
  http_response res;
  res.body = json_text(body);
  return res;
}

std::string openai_response_body(const openai_request& r, uint64_t job_id, int64_t created,
                                 std::string_view output, const wire::job_done& done) {
  return openai_response(r, job_id, created, output, done).body;
}

http_response openai_job_error(const wire::job_done& done) {
  const std::string job = "job " + std::to_string(done.job_id);
  if (done.state == wire::job_state::failed) {
    // The node says so when the request was at fault (PROTOCOL.md): the client can fix it.
    if (done.stop_reason == "prompt_too_long") {
      return error_response(400, done.error, "invalid_request_error", {},
                            "context_length_exceeded");
    }
    if (done.stop_reason == "invalid_request") {
      return error_response(400, done.error, "invalid_request_error");
    }
    return error_response(500, job + " failed: " + done.error, "server_error");
  }
  if (done.state == wire::job_state::cancelled) {
    return error_response(500, job + " was cancelled before it completed", "server_error", {},
                          "cancelled");
  }
  return error_response(
      500, job + " ended " + std::string(wire::job_state_name(done.state)) + " without an answer",
      "server_error");
}

http_response broker_unavailable(const link_failure& f) {
  // A refused key is no outage to wait out: the message names it alone.
  if (f.handshake_refused) {
    return error_response(503, f.message, "server_error", {}, "broker_refused_gateway_key");
  }
  return error_response(503, "the broker did not answer (" + f.message + "); try again shortly",
                        "server_error", {}, "broker_unavailable");
}

http_response openai_link_error(const link_failure& f) {
  if (f.no_reply) return broker_unavailable(f);
  using wire::error_code;
  const std::string code(wire::error_code_name(f.code));
  switch (f.code) {
    case error_code::unknown_model:
      return error_response(404, f.message, "invalid_request_error", "model", "model_not_found");
    case error_code::not_found:
      return error_response(404, f.message, "not_found_error", {}, code);
    case error_code::queue_full:
    case error_code::limit_reached:
      return error_response(429, f.message, "rate_limit_error", {}, code);
    case error_code::unauthorized:
      return error_response(401, f.message, "authentication_error", {}, "invalid_api_key");
    case error_code::invalid_params:
      return error_response(400, f.message, "invalid_request_error", {}, code);
    case error_code::no_chat_template:
      // The request can be fixed by naming a template (hearth's chat_template) or by sending
      // a prompt: a 400 about the messages.
      return error_response(400, f.message, "invalid_request_error", "messages", code);
    case error_code::not_cancellable:
      return error_response(409, f.message, "invalid_request_error", {}, code);
    case error_code::storage_unavailable:
      return error_response(503, f.message, "server_error", {}, code);
    default:
      return error_response(500, "the broker refused the request (" + code + "): " + f.message,
                            "server_error", {}, code);
  }
}

result<json> json_parse_bounded(std::string_view text) {
  bool too_deep = false;
  const json::parser_callback_t depth_check = [&](int depth, json::parse_event_t, json&) {
    if (depth >= k_max_json_depth) too_deep = true;  // depth counts from 0
    return !too_deep;
  };
  json j = json::parse(text, depth_check, /*allow_exceptions=*/false);
  if (too_deep) return error{"nests deeper than " + std::to_string(k_max_json_depth) + " levels"};
  if (j.is_discarded()) return error{"is not valid JSON"};
  return j;
}

result<json> request_body_json(std::string_view body) {
  auto j = json_parse_bounded(body);
  if (!j) return error{"the body " + j.message()};
  if (!j->is_object()) return error{"the body must be a JSON object, got " + json_kind_text(*j)};
  return j;
}

std::string json_kind_text(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "a value of another kind";
  }
}

}  // namespace hearth::gateway
