// Parsing tool calls out of streamed model output in a derived format (tool-calls.h).
#include <algorithm>
#include <map>

#include "engine/chat/tool-call-text.h"
#include "engine/chat/tool-calls.h"

namespace hearth {

using nlohmann::ordered_json;
namespace tct = tool_call_text;
using tct::match;

namespace {

// Bounds on what one section may hold, beside its size (tool_call_max_section).
constexpr size_t k_max_calls = 128;
constexpr size_t k_max_params = 256;
constexpr size_t k_max_name = 256;
// How far past a name the parser looks for the end of a header it does not match exactly
// (harmony's " <|constrain|>json<|message|>" where the template wrote "<|channel|>commentary
// json<|message|>").
constexpr size_t k_header_slack = 160;

struct section_parse {
  match m = match::no;
  size_t consumed = 0;
  std::vector<parsed_tool_call> calls;
};

// The last run of non-whitespace bytes of `lit`.
std::string_view last_run(std::string_view lit) {
  size_t e = lit.size();
  while (e > 0 && tct::is_space(lit[e - 1])) --e;
  size_t b = e;
  while (b > 0 && !tct::is_space(lit[b - 1])) --b;
  return lit.substr(b, e - b);
}

std::string dump(const ordered_json& v) {
  return v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

class section_parser {
 public:
  section_parser(const tool_call_format& f, const std::map<std::string, ordered_json>& params,
                 std::string_view text, bool final)
      : f_(f), params_(params), t_(text), final_(final) {}

  section_parse run() {
    section_parse out;
    out.m = f_.shape == tool_call_shape::json_array ? array_section() : call_section();
    out.consumed = pos_;
    out.calls = std::move(calls_);
    return out;
  }

 private:
  const tool_call_format& f_;
  const std::map<std::string, ordered_json>& params_;
  std::string_view t_;
  bool final_;
  size_t pos_ = 0;
  std::vector<parsed_tool_call> calls_;

  // Whitespace before a literal is insignificant (a grammar's JSON may end in a space, a model
  // may put a newline where the template did not).
  size_t after_space() const {
    size_t p = pos_;
    while (p < t_.size() && tct::is_space(t_[p])) ++p;
    return p;
  }

  match lit(std::string_view l) {
    if (l.empty()) return match::ok;
    size_t e = 0;
    const match m = tct::match_literal(t_, after_space(), l, final_, &e);
    if (m == match::ok) pos_ = e;
    return m;
  }

  // A closing literal: at the very end of the output, a close the model did not finish writing
  // (it stopped at its end-of-turn token) counts as written.
  match close(std::string_view l) {
    if (l.empty()) return match::ok;
    size_t e = 0;
    const match m = tct::match_literal(t_, after_space(), l, false, &e);
    if (m == match::ok) pos_ = e;
    if (m == match::more && final_) {
      pos_ = t_.size();
      return match::ok;
    }
    return m;
  }

  match skip_space() {
    while (pos_ < t_.size() && tct::is_space(t_[pos_])) ++pos_;
    if (pos_ == t_.size()) return final_ ? match::no : match::more;
    return match::ok;
  }

  match word(std::string* out, size_t max) {
    const size_t b = pos_;
    while (pos_ < t_.size() && tct::is_name_byte(t_[pos_]) && pos_ - b < max) ++pos_;
    if (pos_ == t_.size() && !final_) return match::more;
    if (pos_ == b || pos_ - b >= max) return match::no;
    *out = std::string(t_.substr(b, pos_ - b));
    return match::ok;
  }

  match json_value(ordered_json* out) {
    if (const match m = skip_space(); m != match::ok) return m;
    if (t_[pos_] != '{' && t_[pos_] != '[') return match::no;
    size_t end = 0;
    if (const match m = tct::json_span(t_, pos_, final_, &end); m != match::ok) return m;
    auto v = tct::json_parse(t_.substr(pos_, end - pos_));
    if (!v) return match::no;
    *out = std::move(*v);
    pos_ = end;
    return match::ok;
  }

  // A call object as the template writes it (a model may write "arguments" as a JSON string).
  bool call_from_object(const ordered_json& v) {
    if (!v.is_object()) return false;
    std::string name;
    ordered_json args;
    if (f_.name_key.empty()) {
      if (v.size() != 1) return false;
      name = v.begin().key();
      args = v.begin().value();
    } else {
      auto n = v.find(f_.name_key);
      auto a = v.find(f_.args_key);
      if (n == v.end() || !n->is_string() || a == v.end()) return false;
      name = n->get<std::string>();
      args = *a;
    }
    if (args.is_string()) {
      auto parsed = tct::json_parse(args.get<std::string>());
      if (!parsed) return false;
      args = std::move(*parsed);
    }
    if (!args.is_object() || name.empty() || name.size() > k_max_name) return false;
    calls_.push_back({std::move(name), dump(args)});
    return true;
  }

  match array_section() {
    if (const match m = lit(f_.section_open); m != match::ok) return m;
    ordered_json v;
    if (const match m = json_value(&v); m != match::ok) return m;
    if (!v.is_array() || v.empty() || v.size() > k_max_calls) return match::no;
    for (const auto& c : v)
      if (!call_from_object(c)) return match::no;
    return section_end();
  }

  // After the last call: the section's close, or (the model went on otherwise) the calls as they
  // are, the rest being content.
  match section_end() {
    const size_t before = pos_;
    const match m = close(f_.section_close);
    if (m == match::no) pos_ = before;
    return m == match::more ? match::more : match::ok;
  }

  match call_section() {
    if (const match m = lit(f_.section_open); m != match::ok) return m;
    if (const match m = lit(f_.call_open); m != match::ok) return m;
    for (size_t n = 0;; ++n) {
      if (n == k_max_calls) return match::no;
      bool closed = false;
      if (const match m = call(&closed); m != match::ok) return m;
      if (!closed)
        if (const match m = close(f_.call_close); m != match::ok) return m;
      // Another call follows when its separator and opener do; an empty opener (Llama 3.x's bare
      // objects) needs the next object's brace.
      const std::string next = f_.call_sep + f_.call_open;
      size_t e = 0;
      match m = match::no;
      if (!next.empty()) {
        m = tct::match_literal(t_, pos_, next, final_, &e);
      } else if (f_.shape == tool_call_shape::json_object) {
        size_t q = pos_;
        while (q < t_.size() && tct::is_space(t_[q])) ++q;
        m = q == t_.size() ? (final_ ? match::no : match::more)
                           : (t_[q] == '{' ? match::ok : match::no);
        e = pos_;
      }
      if (m == match::more) return match::more;
      if (m == match::no) return section_end();
      pos_ = e;
    }
  }

  match call(bool* closed) {
    switch (f_.shape) {
      case tool_call_shape::json_object: {
        ordered_json v;
        if (const match m = json_value(&v); m != match::ok) return m;
        return call_from_object(v) ? match::ok : match::no;
      }
      case tool_call_shape::name_args:
        return name_args_call();
      case tool_call_shape::name_params:
        return name_params_call(closed);
      case tool_call_shape::json_array:
        break;
    }
    return match::no;
  }

  // The header between name and arguments, exactly or (a model that writes it otherwise, as
  // gpt-oss does) up to its last run of text within k_header_slack bytes.
  match header(std::string_view l) {
    const size_t before = pos_;
    const match m = lit(l);
    if (m != match::no) return m;
    pos_ = before;
    const std::string_view tail = last_run(l);
    if (tail.empty()) return match::no;
    const std::string_view window = t_.substr(pos_, k_header_slack + tail.size());
    const size_t at = window.find(tail);
    if (at == std::string_view::npos)
      return window.size() < k_header_slack + tail.size() && !final_ ? match::more : match::no;
    pos_ += at + tail.size();
    return match::ok;
  }

  match name_args_call() {
    std::string name;
    if (const match m = word(&name, k_max_name); m != match::ok) return m;
    if (f_.has_id) {
      if (const match m = lit(f_.name_to_args); m != match::ok) return m;
      std::string id;
      if (const match m = word(&id, 64); m != match::ok) return m;
      if (const match m = header(f_.args_after_id); m != match::ok) return m;
    } else if (const match m = header(f_.name_to_args); m != match::ok) {
      return m;
    }
    ordered_json args;
    if (const match m = json_value(&args); m != match::ok) return m;
    if (!args.is_object()) return match::no;
    calls_.push_back({std::move(name), dump(args)});
    return match::ok;
  }

  // A parameter's value: text, typed by the tool's schema when given (a plain string stays the
  // text; any other schema reads the text as JSON where it is JSON), else JSON where the text is a
  // non-string JSON value.
  ordered_json typed_value(const std::string& fn, const std::string& key, std::string_view text) {
    auto v = tct::json_parse(text);
    auto p = params_.find(fn);
    if (p != params_.end()) {
      auto s = p->second.find(key);
      if (s != p->second.end() && s->is_object()) {
        auto type = s->find("type");
        if (type != s->end() && type->is_string() && *type == "string") return std::string(text);
        if (v) return std::move(*v);
        return std::string(text);
      }
    }
    if (v && !v->is_string()) return std::move(*v);
    return std::string(text);
  }

  // The end of a value: the earliest place where the next parameter (param_next) or the call's
  // close (call_close) is written. Whitespace before either belongs to neither: the value is
  // trimmed.
  match value_end(size_t* value_end, bool* last) {
    const std::string_view terms[2] = {f_.param_next, f_.call_close};
    std::string_view runs[2];
    std::string_view tails[2];
    for (int k = 0; k < 2; ++k) {
      runs[k] = tct::first_run(terms[k]);
      if (!runs[k].empty()) tails[k] = terms[k].substr(terms[k].find(runs[k]));
    }
    for (size_t from = pos_;;) {
      size_t best = std::string_view::npos;
      for (int k = 0; k < 2; ++k)
        if (!runs[k].empty()) best = std::min(best, t_.find(runs[k], from));
      if (best == std::string_view::npos) return final_ ? match::no : match::more;
      for (int k = 0; k < 2; ++k) {
        if (runs[k].empty() || t_.compare(best, runs[k].size(), runs[k]) != 0) continue;
        size_t e = 0;
        match m = tct::match_literal(t_, best, tails[k], k == 0 && final_, &e);
        if (k == 1 && final_ && m == match::more) m = match::ok;
        if (m == match::more) return match::more;
        if (m == match::ok) {
          *value_end = best;
          *last = k == 1;
          if (k == 0) pos_ = e;
          return match::ok;
        }
      }
      from = best + 1;
    }
  }

  match name_params_call(bool* closed) {
    std::string name;
    if (const match m = word(&name, k_max_name); m != match::ok) return m;
    ordered_json args = ordered_json::object();
    const size_t before = pos_;
    match m = lit(f_.param_first);
    if (m == match::more) return m;
    if (m == match::no) {
      pos_ = before;
      if (f_.name_no_params.empty()) return match::no;
      if (const match z = close(f_.name_no_params); z != match::ok) return z;
      *closed = true;
      calls_.push_back({std::move(name), dump(args)});
      return match::ok;
    }
    for (size_t n = 0;; ++n) {
      if (n == k_max_params) return match::no;
      std::string key;
      if (const match k = word(&key, k_max_name); k != match::ok) return k;
      if (const match k = lit(f_.param_key_to_value); k != match::ok) return k;
      const size_t vb = pos_;
      size_t ve = 0;
      bool last = false;
      if (const match v = value_end(&ve, &last); v != match::ok) return v;
      args[key] = typed_value(name, key, tct::trim(t_.substr(vb, ve - vb)));
      if (last) {
        pos_ = ve;
        break;
      }
    }
    calls_.push_back({std::move(name), dump(args)});
    return match::ok;
  }
};

}  // namespace

struct tool_call_parser::state {
  tool_call_format f;
  std::map<std::string, ordered_json> params;  // function name -> its parameters' properties
  std::string buf;
  bool in_section = false;
  bool at_start = true;        // only whitespace has come so far
  bool after_section = false;  // whitespace right after a call section is not content
  // Llama 3.x: the "<|python_tag|>" (and the whitespace before it) read before a bare call, given
  // back as content if no call follows.
  std::string python_tag_seen;

  // A new piece can complete a section only if it holds a byte of a closing literal (or a
  // bracket): trying again only then keeps a long section from being parsed once per token.
  bool may_complete(std::string_view piece) const {
    for (char c : piece) {
      if (c == '}' || c == ']' || c == '>' || tct::is_space(c)) return true;
      for (const std::string* l : {&f.call_close, &f.section_close, &f.param_next})
        if (l->find(c) != std::string::npos) return true;
    }
    return false;
  }

  static constexpr std::string_view python_tag = "<|python_tag|>";

  void give_back_python_tag(piece& out) {
    if (python_tag_seen.empty()) return;
    std::string tag = std::move(python_tag_seen);
    python_tag_seen.clear();
    emit(out, tag);
  }

  void emit(piece& out, std::string_view text) {
    if (after_section) {
      while (!text.empty() && tct::is_space(text.front())) text.remove_prefix(1);
      if (text.empty()) return;
      after_section = false;
    }
    for (char c : text)
      if (!tct::is_space(c)) at_start = false;
    out.content += text;
  }

  piece run(bool final, std::string_view fresh) {
    piece out;
    bool retry = final || may_complete(fresh);
    for (;;) {
      if (!in_section) {
        if (f.trigger.empty()) {
          if (!at_start) {
            emit(out, buf);
            buf.clear();
            break;
          }
          const size_t k = buf.find_first_not_of(" \t\r\n");
          if (k == std::string::npos) {
            if (final) {
              give_back_python_tag(out);
              emit(out, buf);
              buf.clear();
            }
            break;
          }
          // Formats whose calls are a bare object at the start (Llama 3.x) may also open them with
          // Llama's <|python_tag|> (its templates write it before built-in tools' calls, and
          // models trained on them write it before JSON calls too).
          const std::string_view rest = std::string_view(buf).substr(k);
          const size_t m = std::min(rest.size(), python_tag.size());
          if (python_tag_seen.empty() && rest.substr(0, m) == python_tag.substr(0, m)) {
            if (m < python_tag.size() && !final) break;  // it may become the tag
            if (m == python_tag.size()) {
              python_tag_seen = buf.substr(0, k + m);
              buf.erase(0, k + m);
              continue;
            }
          }
          if (buf[k] == '{' || buf[k] == '[') {
            in_section = true;
            retry = true;
            continue;
          }
          give_back_python_tag(out);
          emit(out, buf);
          buf.clear();
          break;
        }
        const size_t p = buf.find(f.trigger);
        if (p != std::string::npos && (!f.trigger_at_start || at_start)) {
          emit(out, std::string_view(buf).substr(0, p));
          buf.erase(0, p);
          in_section = true;
          retry = true;
          continue;
        }
        // Hold back the longest tail that may begin the trigger.
        size_t hold = 0;
        if (!final) {
          for (size_t n = std::min(buf.size(), f.trigger.size() - 1); n > 0; --n) {
            if (std::string_view(buf).substr(buf.size() - n) ==
                std::string_view(f.trigger).substr(0, n)) {
              hold = n;
              break;
            }
          }
        }
        emit(out, std::string_view(buf).substr(0, buf.size() - hold));
        buf.erase(0, buf.size() - hold);
        break;
      }
      if (!retry && buf.size() <= tool_call_max_section) break;
      section_parse r = section_parser(f, params, buf, final).run();
      if (r.m == match::ok) {
        python_tag_seen.clear();
        for (auto& c : r.calls) out.calls.push_back(std::move(c));
        buf.erase(0, r.consumed);
        in_section = false;
        after_section = true;
        at_start = false;
        continue;
      }
      if (r.m == match::more && buf.size() <= tool_call_max_section) break;
      // Not a call after all: its first bytes are content, and the search goes on after them.
      size_t n = f.trigger.size();
      if (f.trigger.empty()) {
        const size_t k = buf.find_first_not_of(" \t\r\n");
        n = k == std::string::npos ? buf.size() : k + 1;
      }
      after_section = false;
      give_back_python_tag(out);
      emit(out, std::string_view(buf).substr(0, n));
      at_start = false;
      buf.erase(0, n);
      in_section = false;
    }
    return out;
  }
};

tool_call_parser::tool_call_parser(const tool_call_format& format, std::string_view tools_json)
    : s_(std::make_shared<state>()) {
  s_->f = format;
  if (tools_json.empty()) return;
  auto tools = tool_call_text::json_parse(tools_json);
  if (!tools || !tools->is_array()) return;
  for (const auto& t : *tools) {
    if (!t.is_object()) continue;
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) continue;
    auto name = fn->find("name");
    auto params = fn->find("parameters");
    if (name == fn->end() || !name->is_string() || params == fn->end() || !params->is_object())
      continue;
    auto props = params->find("properties");
    if (props != params->end() && props->is_object()) s_->params[name->get<std::string>()] = *props;
  }
}

tool_call_parser::piece tool_call_parser::feed(std::string_view text) {
  s_->buf += text;
  return s_->run(false, text);
}

tool_call_parser::piece tool_call_parser::finish() {
  return s_->run(true, {});
}

tool_call_parser::piece tool_calls_parse(const tool_call_format& format, std::string_view text,
                                         std::string_view tools_json) {
  tool_call_parser p(format, tools_json);
  tool_call_parser::piece a = p.feed(text);
  tool_call_parser::piece b = p.finish();
  a.content += b.content;
  for (auto& c : b.calls) a.calls.push_back(std::move(c));
  return a;
}

}  // namespace hearth
