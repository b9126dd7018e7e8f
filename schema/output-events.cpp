#include "schema/output-events.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

namespace hearth::wire {
namespace {

using json = nlohmann::ordered_json;

const char* kind_key(output_event_kind k) {
  switch (k) {
    case output_event_kind::content:
      return "content";
    case output_event_kind::reasoning:
      return "reasoning";
    case output_event_kind::tool_call:
      return "tool_call";
    case output_event_kind::logprobs:
      return "logprobs";
    case output_event_kind::finish:
      return "finish";
  }
  return "content";
}

json bytes_json(const std::vector<uint8_t>& b) {
  json a = json::array();
  for (uint8_t c : b) a.push_back(c);
  return a;
}

// PROTOCOL.md 10.8: a logprob is finite; an impossible token's (a grammar masked it) is -9999.
// JSON has no infinity (nlohmann writes null, which readers refuse).
constexpr float impossible_logprob = -9999;
float finite_logprob(float lp) {
  return std::isfinite(lp) ? lp : impossible_logprob;
}

json logprob_json(const token_logprob& t) {
  return json{
      {"token", t.token}, {"bytes", bytes_json(t.bytes)}, {"logprob", finite_logprob(t.logprob)}};
}

// A string field, or an error naming it.
result<std::string> string_of(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return error{std::string("'") + key + "' is not text"};
  return it->get<std::string>();
}

result<token_logprob> logprob_of(const json& o) {
  if (!o.is_object()) return error{"a logprob is not an object"};
  token_logprob t;
  auto tok = string_of(o, "token");
  if (!tok) return tok.err();
  t.token = std::move(*tok);
  auto lp = o.find("logprob");
  if (lp == o.end() || !lp->is_number()) return error{"'logprob' is not a number"};
  t.logprob = finite_logprob(lp->get<float>());  // 1e300 does not fit a float
  auto b = o.find("bytes");
  if (b != o.end()) {
    if (!b->is_array()) return error{"'bytes' is not an array"};
    for (const auto& v : *b) {
      if (!v.is_number_unsigned() || v.get<uint64_t>() > 255)
        return error{"'bytes' holds a non-byte"};
      t.bytes.push_back(uint8_t(v.get<uint64_t>()));
    }
  }
  return t;
}

result<output_event> event_of(std::string_view line) {
  json o = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object()) return error{"not a JSON object"};
  output_event e;
  if (auto i = o.find("i"); i != o.end()) {
    if (!i->is_number_unsigned() || i->get<uint64_t>() > 0xffffffffu)
      return error{"'i' is not a choice index"};
    e.choice = uint32_t(i->get<uint64_t>());
  }
  for (auto k :
       {output_event_kind::content, output_event_kind::reasoning, output_event_kind::finish}) {
    if (o.contains(kind_key(k))) {
      auto s = string_of(o, kind_key(k));
      if (!s) return s.err();
      e.kind = k;
      e.text = std::move(*s);
      return e;
    }
  }
  if (auto c = o.find("tool_call"); c != o.end()) {
    if (!c->is_object()) return error{"'tool_call' is not an object"};
    e.kind = output_event_kind::tool_call;
    for (auto [key, dst] : {std::pair{"id", &e.call.id}, std::pair{"name", &e.call.name},
                            std::pair{"arguments", &e.call.arguments}}) {
      auto s = string_of(*c, key);
      if (!s) return s.err();
      *dst = std::move(*s);
    }
    return e;
  }
  if (auto l = o.find("logprobs"); l != o.end()) {
    if (!l->is_array()) return error{"'logprobs' is not an array"};
    e.kind = output_event_kind::logprobs;
    for (const auto& p : *l) {
      sampled_logprob s;
      auto t = logprob_of(p);
      if (!t) return t.err();
      s.sampled = std::move(*t);
      if (auto top = p.find("top"); top != p.end()) {
        if (!top->is_array()) return error{"'top' is not an array"};
        for (const auto& q : *top) {
          auto u = logprob_of(q);
          if (!u) return u.err();
          s.top.push_back(std::move(*u));
        }
      }
      e.probs.push_back(std::move(s));
    }
    return e;
  }
  return error{"an event of no known kind"};
}

}  // namespace

std::string output_event_line(const output_event& e) {
  json o = json::object();
  if (e.choice != 0) o["i"] = e.choice;
  switch (e.kind) {
    case output_event_kind::content:
    case output_event_kind::reasoning:
    case output_event_kind::finish:
      o[kind_key(e.kind)] = e.text;
      break;
    case output_event_kind::tool_call:
      o["tool_call"] =
          json{{"id", e.call.id}, {"name", e.call.name}, {"arguments", e.call.arguments}};
      break;
    case output_event_kind::logprobs: {
      json a = json::array();
      for (const auto& p : e.probs) {
        json j = logprob_json(p.sampled);
        if (!p.top.empty()) {
          json top = json::array();
          for (const auto& t : p.top) top.push_back(logprob_json(t));
          j["top"] = std::move(top);
        }
        a.push_back(std::move(j));
      }
      o["logprobs"] = std::move(a);
      break;
    }
  }
  return o.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

result<std::vector<output_event>> output_event_reader::feed(std::string_view bytes) {
  if (!error_.empty()) return error{error_};
  std::vector<output_event> out;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t nl = bytes.find('\n', start);
    std::string_view piece =
        bytes.substr(start, nl == std::string_view::npos ? bytes.npos : nl - start);
    if (partial_.size() + piece.size() > max_line_bytes) {
      error_ = "an output event line is longer than " + std::to_string(max_line_bytes) + " bytes";
      return error{error_};
    }
    partial_.append(piece);
    if (nl == std::string_view::npos) break;
    auto e = event_of(partial_);
    if (!e) {
      error_ = "output event " + partial_.substr(0, 80) + ": " + e.message();
      return error{error_};
    }
    out.push_back(std::move(*e));
    partial_.clear();
    start = nl + 1;
  }
  return out;
}

result<std::vector<output_event>> output_events_parse(std::string_view stream) {
  output_event_reader r;
  auto events = r.feed(stream);
  if (!events) return events;
  if (r.pending() != 0) return error{"the output events end inside a line"};
  return events;
}

void choice_output_add(choice_output& c, const output_event& e) {
  switch (e.kind) {
    case output_event_kind::content:
      c.content += e.text;
      break;
    case output_event_kind::reasoning:
      c.reasoning += e.text;
      break;
    case output_event_kind::tool_call:
      c.tool_calls.push_back(e.call);
      break;
    case output_event_kind::logprobs:
      c.logprobs.insert(c.logprobs.end(), e.probs.begin(), e.probs.end());
      break;
    case output_event_kind::finish:
      c.finish = e.text;
      break;
  }
}

}  // namespace hearth::wire
