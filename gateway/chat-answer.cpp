#include "gateway/chat-answer.h"

#include <chrono>
#include <cstdio>

#include "gateway/openai-request.h"
#include "schema/job-params.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

http_response malformed_output(uint64_t job_id, const std::string& why) {
  return error_response(
      500, "job " + std::to_string(job_id) + " wrote output it should not: " + why, "server_error");
}

}  // namespace

chat_answer::chat_answer(const wire::submit& submit, bool stream, int64_t created,
                         std::shared_ptr<responder> out)
    : stream_mode_(stream),
      created_(created),
      model_(submit.model),
      out_(std::move(out)),
      stream_(job_output_mode_of(submit.params), stream) {}

void chat_answer::tokens(const wire::job_tokens& t) {
  auto events = stream_.tokens(t);
  if (take(events)) add(*events);
}

bool chat_answer::take(result<std::vector<wire::output_event>>& events) {
  if (events) return true;
  fail(malformed_output(job_id_, events.message()));
  return false;
}

void chat_answer::send_event(std::string_view type, ojson fields) {
  ojson e = {{"type", std::string(type)}};
  for (auto& [k, v] : fields.items()) e[k] = std::move(v);
  out_->named_event(type, json_text(e));
}

void chat_answer::open() {
  if (started_) return;
  started_ = true;
  wrote_ = true;
  out_->start_events();
  opened();
}

void chat_answer::end_item() {
  if (!item_open_) return;
  item_open_ = false;
  if (stream_mode_) item_ended(items_.size() - 1);
}

void chat_answer::add(const std::vector<wire::output_event>& events) {
  for (const wire::output_event& e : events) {
    // These APIs answer one choice; logprobs are not asked for.
    if (e.choice != 0 || e.kind == wire::output_event_kind::logprobs) continue;
    if (e.kind == wire::output_event_kind::finish) {
      finish_ = e.text;
      continue;
    }
    if (stream_mode_) {
      open();
      wrote_ = true;
    }
    if (e.kind == wire::output_event_kind::tool_call) {
      end_item();
      items_.push_back(chat_item{chat_item::kind::tool_call, {}, e.call});
      if (stream_mode_) {
        item_began(items_.size() - 1);
        item_ended(items_.size() - 1);
      }
      continue;
    }
    if (e.text.empty()) continue;
    const auto k = e.kind == wire::output_event_kind::reasoning ? chat_item::kind::reasoning
                                                                : chat_item::kind::content;
    if (!item_open_ || items_.back().k != k) {
      end_item();
      items_.push_back(chat_item{k, {}, {}});
      item_open_ = true;
      if (stream_mode_) item_began(items_.size() - 1);
    }
    items_.back().text += e.text;
    if (stream_mode_) item_grew(items_.size() - 1, e.text);
  }
}

void chat_answer::done(const wire::job_done& d) {
  if (d.state != wire::job_state::completed) return fail(openai_job_error(d));
  auto rest = stream_.finish();
  if (!take(rest)) return;
  add(*rest);
  end_item();
  std::string finish = finish_;
  if (finish.empty()) {
    bool calls = false;
    for (const chat_item& i : items_) calls |= i.k == chat_item::kind::tool_call;
    finish = calls ? "tool_calls" : std::string(finish_reason_of_stop(d.stop_reason));
  }
  ended_ = true;
  if (stream_mode_) open();
  completed(d, finish);
  if (stream_mode_) out_->end_events();
}

void chat_answer::fail(const http_response& openai_error) {
  if (ended_) return;
  ended_ = true;
  if (!started_) return out_->reply(error_reply(openai_error));
  // The status line has gone: the API's error events, and the stream ends.
  error_events(openai_error);
  out_->end_events();
}

void chat_answer::keep_alive() {
  if (ended_ || !stream_mode_) return;
  if (!wrote_) {
    open();
    out_->comment("keep-alive");
  }
  wrote_ = false;
}

wire::submit submit_taken(wire::submit& kept) {
  wire::submit submit = std::move(kept);
  kept = wire::submit{};
  kept.model = submit.model;
  kept.params = submit.params;
  return submit;
}

int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string param_at(const std::string& param, size_t i) {
  return param + "[" + std::to_string(i) + "]";
}

void chat_turns_reader::read(const json& turns, const std::string& param) {
  for (size_t i = 0; i < turns.size() && !fr_.refused(); ++i) {
    const std::string p = param_at(param, i);
    if (!turns[i].is_object()) return fr_.wrong_type(p, "an object", turns[i]);
    turn(turns[i], p);
  }
}

void chat_turns_reader::add_call(wire::chat_message& turn, wire::tool_call call) {
  call_names_[call.id] = call.name;
  turn.tool_calls.push_back(std::move(call));
}

void chat_turns_reader::add_tool_answer(std::string call_id, std::string content) {
  wire::chat_message m{"tool", std::move(content)};
  if (auto n = call_names_.find(call_id); n != call_names_.end()) m.name = n->second;
  m.tool_call_id = std::move(call_id);
  out_.push_back(std::move(m));
}

void array_bounded(field_reader& fr, const json& a, const std::string& param, size_t max) {
  if (a.is_array() && a.size() > max) {
    fr.refuse(param, param + " holds " + std::to_string(a.size()) + " elements; at most " +
                         std::to_string(max));
  }
}

void chat_messages_bounded(field_reader& fr, const std::vector<wire::chat_message>& messages,
                           const std::string& param) {
  if (messages.size() > wire::max_array_items) {
    return fr.refuse(param, param + " makes " + std::to_string(messages.size()) +
                                " chat messages; at most " + std::to_string(wire::max_array_items));
  }
  size_t bytes = 0;
  for (const auto& m : messages) {
    bytes += m.content.size() + m.reasoning_content.size();
    for (const auto& c : m.tool_calls) bytes += c.arguments.size();
  }
  if (bytes > wire::max_string_bytes) {
    fr.refuse(param, param + "'s text is " + std::to_string(bytes) + " bytes; at most " +
                         std::to_string(wire::max_string_bytes));
  }
}

json chat_function_tool(field_reader& fr, const json& t, const std::string& p,
                        std::string_view schema_key, bool schema_required) {
  auto name = fr.required(t, "name", p + ".name");
  if (!name) return nullptr;
  json function = {{"name", *name}};
  if (auto d = fr.string(t, "description", p + ".description")) function["description"] = *d;
  const std::string schema_param = p + "." + std::string(schema_key);
  if (const json* schema = field_reader::field(t, schema_key)) {
    if (!schema->is_object()) return fr.wrong_type(schema_param, "an object", *schema), nullptr;
    function["parameters"] = *schema;
  } else if (schema_required) {
    return fr.refuse(schema_param, schema_param + " is required"), nullptr;
  }
  if (auto strict = fr.boolean(t, "strict", p + ".strict")) function["strict"] = *strict;
  if (fr.refused()) return nullptr;
  return {{"type", "function"}, {"function", std::move(function)}};
}

std::optional<request_refusal> field_refusal(const field_reader& fr) {
  if (!fr.refused()) return std::nullopt;
  return request_refusal{400, fr.refused()->message, fr.refused()->param, ""};
}

std::optional<request_refusal> job_params_refusal(
    const wire::job_params& p,
    std::initializer_list<std::pair<std::string_view, std::string_view>> renamed) {
  auto e = wire::job_params_check(p);
  if (e.ok()) return std::nullopt;
  std::string param = e.param;
  for (const auto& [job_name, api_name] : renamed) {
    if (param == job_name) param = api_name;
  }
  return request_refusal{400, e.message, std::move(param), ""};
}

std::string chat_tools(field_reader& fr, const json& body, const function_tool_shape& shape) {
  const json* tools = field_reader::field(body, "tools");
  if (!tools) return "";
  if (!tools->is_array()) return fr.wrong_type("tools", "an array", *tools), "";
  array_bounded(fr, *tools, "tools", wire::api_max_tools);
  json chat = json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string p = param_at("tools", i);
    if (!t.is_object()) return fr.wrong_type(p, "an object", t), "";
    auto type = shape.type_required ? fr.required(t, "type", p + ".type")
                                    : fr.string(t, "type", p + ".type");
    if (type && *type != shape.type) {
      return fr.refuse(p + ".type", p + ".type '" + *type +
                                        "' is not supported: " + std::string(shape.other_types)),
             "";
    }
    json tool = chat_function_tool(fr, t, p, shape.schema_key, shape.schema_required);
    if (tool.is_null()) return "";
    chat.push_back(std::move(tool));
  }
  if (chat.empty()) return "";
  return chat.dump(-1, ' ', false, json::error_handler_t::replace);
}

void named_tool_check(field_reader& fr, const wire::api_params& api, const std::string& param) {
  constexpr std::string_view prefix = "function:";
  if (!std::string_view(api.tool_choice).starts_with(prefix)) return;
  const std::string name = api.tool_choice.substr(prefix.size());
  const json tools = json::parse(api.tools, nullptr, false);
  if (tools.is_array()) {
    for (const json& t : tools) {
      if (t.is_object() && t.contains("function") && t["function"].value("name", "") == name)
        return;
    }
  }
  fr.refuse(param, param + " names the function '" + name + "', which is not one of the tools");
}

void field_reader::refuse(std::string param, std::string message) {
  if (!refused_) refused_ = refusal{std::move(param), std::move(message)};
}

void field_reader::wrong_type(const std::string& param, std::string_view expected, const json& v) {
  refuse(param, param + " must be " + std::string(expected) + ", got " + json_kind_text(v));
}

const json* field_reader::field(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const json* field_reader::object(const json& obj, std::string_view key, const std::string& param) {
  const json* v = field(obj, key);
  if (!v) return nullptr;
  if (!v->is_object()) return wrong_type(param, "an object", *v), nullptr;
  return v;
}

std::optional<std::string> field_reader::string(const json& obj, std::string_view key,
                                                const std::string& param) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) return wrong_type(param, "a string", *v), std::nullopt;
  return v->get<std::string>();
}

std::optional<std::string> field_reader::required(const json& obj, std::string_view key,
                                                  const std::string& param) {
  auto v = string(obj, key, param);
  if (!v && !refused_) refuse(param, param + " is required");
  return v;
}

std::optional<bool> field_reader::boolean(const json& obj, std::string_view key,
                                          const std::string& param) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(param, "a boolean", *v), std::nullopt;
  return v->get<bool>();
}

std::optional<double> field_reader::number(const json& obj, std::string_view key,
                                           const std::string& param, double lo, double hi) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong_type(param, "a number", *v), std::nullopt;
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " must be in [%g, %g], got %g", lo, hi, d);
    refuse(param, param + buf);
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> field_reader::integer(const json& obj, std::string_view key,
                                             const std::string& param, int64_t lo, int64_t hi) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) return wrong_type(param, "an integer", *v), std::nullopt;
  // An unsigned value past int64's range is out of range, not a wrapped negative.
  const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi);
  if (too_big || v->get<int64_t>() < lo || v->get<int64_t>() > hi) {
    refuse(param, param + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "], got " + v->dump());
    return std::nullopt;
  }
  return v->get<int64_t>();
}

}  // namespace hearth::gateway
