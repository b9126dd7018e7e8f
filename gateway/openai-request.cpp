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

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/think-filter.h"
#include "gateway/openai-json.h"
#include "schema/job-params.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

// Deeper JSON than any request needs is refused before it is turned into values.
constexpr int k_max_json_depth = 64;
// OpenAI's own limit on stop sequences.
constexpr size_t k_max_stop = 4;
// The text of one request must fit one wire string (and so one wire message, with room for the
// rest of the submit).
constexpr size_t k_max_text_bytes = wire::max_string_bytes;
constexpr uint64_t k_seed_zero = uint64_t(1) << 63;

// What a JSON value is, in the words of a message: "a string", "an integer", ...
std::string json_kind(const json& v) {
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

request_refusal refusal(std::string param, std::string message, std::string code = {}) {
  return request_refusal{400, std::move(message), std::move(param), std::move(code)};
}

request_refusal wrong_type(const std::string& param, std::string_view expected, const json& v) {
  return refusal(param, param + " must be " + std::string(expected) + ", got " + json_kind(v));
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

// messages -> the submit's conversation.
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
    std::string r = role->get<std::string>();
    // OpenAI's newer name for the system role.
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant") {
      return rr.refuse(refusal(p + ".role", p + ".role '" + r +
                                                "' is not supported: system, developer, user "
                                                "or assistant (hearth runs no tools)"));
    }
    if (auto tc = msg.find("tool_calls"); tc != msg.end() && !tc->is_null() && !tc->empty()) {
      return rr.refuse(
          refusal(p + ".tool_calls", p + ".tool_calls is not supported: hearth runs no tools"));
    }
    auto content = msg.find("content");
    std::string text;
    if (content == msg.end() || content->is_null()) {
      // Only an assistant turn may come without content (OpenAI's, for tool calls).
      if (r != "assistant") return rr.refuse(refusal(p + ".content", p + ".content is required"));
    } else {
      auto c = message_content(*content, p + ".content", rr);
      if (!c) return;
      text = std::move(*c);
    }
    bytes += text.size();
    if (bytes > k_max_text_bytes) {
      return rr.refuse(
          refusal("messages", param_error("the messages' text in bytes",
                                          "at most " + std::to_string(k_max_text_bytes), bytes)));
    }
    s.messages.push_back(wire::chat_message{std::move(r), std::move(text)});
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
  auto is_zero = [&](const char* n) {
    const json* v = rr.field(n);
    return !v || (v->is_number() && v->get<double>() == 0);
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
  if (const json* n = rr.field("n"); n && !(n->is_number_integer() && n->get<int64_t>() == 1)) {
    if (!n->is_number_integer()) return rr.refuse(wrong_type("n", "an integer", *n));
    const int64_t v = n->get<int64_t>();
    if (v < 1) return rr.refuse(refusal("n", param_error("n", "1", v)));
    return rr.refuse(refusal(
        "n", "n > 1 is not supported (hearth answers one choice), got " + std::to_string(v)));
  }
  if (endpoint == openai_endpoint::chat_completions) {
    rr.unsupported_unless("logprobs", is_false("logprobs"), "is not supported");
    rr.unsupported_unless("top_logprobs", is_zero("top_logprobs"), "is not supported");
  } else {
    rr.unsupported_unless("logprobs", is_zero("logprobs"), "is not supported");
    rr.unsupported_unless("echo", is_false("echo"), "is not supported");
    rr.unsupported_unless("best_of", is_one("best_of"), "> 1 is not supported");
    rr.unsupported_unless("suffix", is_empty("suffix"), "is not supported");
  }
  rr.unsupported_unless("tools", is_empty("tools"), "is not supported: hearth runs no tools");
  rr.unsupported_unless("functions", is_empty("functions"),
                        "is not supported: hearth runs no tools");
  for (const char* n : {"tool_choice", "function_call"}) {
    const json* v = rr.field(n);
    const bool off = !v || (v->is_string() && (*v == "none" || *v == "auto"));
    rr.unsupported_unless(n, off, "is not supported: hearth runs no tools");
  }
  rr.unsupported_unless("logit_bias", is_empty("logit_bias"), "is not supported");
  if (const json* f = rr.field("response_format")) {
    const bool text = f->is_object() && f->contains("type") && (*f)["type"] == "text";
    rr.unsupported_unless("response_format", text,
                          "is not supported but for {\"type\": \"text\"} (no JSON mode)");
  }
  const json* a = rr.field("audio");
  rr.unsupported_unless("audio", !a, "is not supported: hearth answers text");
  if (const json* m = rr.field("modalities")) {
    const bool text = m->is_array() && m->size() == 1 && (*m)[0] == "text";
    rr.unsupported_unless("modalities", text, "is not supported but for [\"text\"]");
  }
}

// Thinking models (Qwen3): `enable_thinking` at the top level or in `chat_template_kwargs` (as
// vLLM and llama.cpp's server take the template's variables), and `include_reasoning`.
void read_thinking(request_reader& rr, openai_request& r) {
  if (auto v = rr.boolean("enable_thinking")) r.submit.params.enable_thinking = *v;
  if (const json* kw = rr.field("chat_template_kwargs")) {
    if (!kw->is_object()) {
      rr.refuse(wrong_type("chat_template_kwargs", "an object", *kw));
    } else if (auto et = kw->find("enable_thinking"); et != kw->end() && !et->is_null()) {
      if (!et->is_boolean()) {
        rr.refuse(wrong_type("chat_template_kwargs.enable_thinking", "a boolean", *et));
      } else {
        r.submit.params.enable_thinking = et->get<bool>();
      }
    }
  }
  if (auto v = rr.boolean("include_reasoning")) {
    r.include_reasoning = *v;
    r.submit.params.show_thinking = *v;
  }
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
// invalid_request_error), naming the field the check names.
request_refusal refusal_of(const param_check& e) {
  return refusal(e.param, e.message);
}

}  // namespace

std::optional<openai_endpoint> openai_endpoint_of(std::string_view url) {
  if (url == "/v1/chat/completions") return openai_endpoint::chat_completions;
  if (url == "/v1/completions") return openai_endpoint::completions;
  return std::nullopt;
}

std::variant<openai_request, request_refusal> parse_openai_request(openai_endpoint endpoint,
                                                                   std::string_view body) {
  bool too_deep = false;
  const json::parser_callback_t depth_check = [&](int depth, json::parse_event_t, json&) {
    if (depth >= k_max_json_depth) too_deep = true;  // depth counts from 0
    return !too_deep;
  };
  json j = json::parse(body, depth_check, /*allow_exceptions=*/false);
  if (too_deep) {
    return refusal("",
                   "the body nests deeper than " + std::to_string(k_max_json_depth) + " levels");
  }
  if (j.is_discarded()) return refusal("", "the body is not valid JSON");
  if (!j.is_object()) return refusal("", "the body must be a JSON object, got " + json_kind(j));

  openai_request r;
  r.endpoint = endpoint;
  wire::submit& s = r.submit;
  wire::job_params& p = s.params;
  // OpenAI's defaults (see the top of this file).
  p.max_tokens = generation_max_tokens_limit;
  p.temperature = 1;
  p.top_p = 1;
  p.top_k = 0;
  p.min_p = 0;
  p.repeat_penalty = 1;
  p.repeat_last_n = -1;

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
  }
  if (rr.refused()) return *rr.refused();

  if (auto e = wire::job_params_check(p); !e.ok()) return refusal_of(e);
  return r;
}

std::string_view openai_finish_reason(std::string_view stop_reason) {
  if (stop_reason == "max_tokens" || stop_reason == "context_full") return "length";
  return "stop";
}

std::string openai_response_id(openai_endpoint endpoint, uint64_t job_id) {
  return (endpoint == openai_endpoint::chat_completions ? "chatcmpl-" : "cmpl-") +
         std::to_string(job_id);
}

std::string openai_response_body(const openai_request& r, uint64_t job_id, int64_t created,
                                 std::string_view text, const wire::job_done& done) {
  ojson choice;
  if (r.endpoint == openai_endpoint::chat_completions) {
    choice["index"] = 0;
    if (!r.include_reasoning) {
      choice["message"] = {{"role", "assistant"}, {"content", std::string(text)}};
    } else {
      think_filter f;
      think_filter::split part = f.push(text);
      think_filter::split rest = f.flush();
      part.answer += rest.answer;
      part.reasoning += rest.reasoning;
      // The newline the model writes before "</think>" is not part of the reasoning.
      while (!part.reasoning.empty() && part.reasoning.back() == '\n') part.reasoning.pop_back();
      choice["message"] = {{"role", "assistant"}, {"content", part.answer}};
      if (!part.reasoning.empty()) choice["message"]["reasoning_content"] = part.reasoning;
    }
  } else {
    choice["text"] = std::string(text);
    choice["index"] = 0;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = openai_finish_reason(done.stop_reason);
  ojson body = openai_object_head(r, job_id, created, false);
  body["choices"] = ojson::array({std::move(choice)});
  body["usage"] = openai_usage(done);
  return json_text(body);
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

}  // namespace hearth::gateway
