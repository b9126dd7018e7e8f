// Deriving a template's tool-call format from probe renders (see tool-calls.h), and call ids.
#include "engine/chat/tool-calls.h"

#include <algorithm>
#include <cctype>

#include "engine/chat/jinja.h"
#include "engine/chat/tool-call-text.h"

namespace hearth {

using nlohmann::ordered_json;
namespace tct = tool_call_text;

const char* tool_call_shape_name(tool_call_shape s) {
  switch (s) {
    case tool_call_shape::json_object:
      return "json_object";
    case tool_call_shape::json_array:
      return "json_array";
    case tool_call_shape::name_args:
      return "name_args";
    case tool_call_shape::name_params:
      return "name_params";
  }
  return "?";
}

std::string tool_call_id(size_t n, tool_call_id_style style, uint64_t seed) {
  static constexpr char k_alnum[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  // splitmix64 over (seed, n): ids differ between calls and responses, repeat for the same pair.
  uint64_t x = seed ^ (0x9e3779b97f4a7c15ull * (n + 1));
  auto next = [&x] {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const size_t len = style == tool_call_id_style::alnum9 ? 9 : 24;
  std::string id = style == tool_call_id_style::alnum9 ? "" : "call_";
  for (size_t i = 0; i < len; ++i) id += k_alnum[next() % (sizeof(k_alnum) - 1)];
  return id;
}

namespace {

// The probes: distinctive names, keys and values that no template writes on its own.
constexpr std::string_view k_name1 = "probe_fn_alpha";
constexpr std::string_view k_name2 = "probe_fn_beta";
constexpr std::string_view k_name0 = "probe_fn_gamma";
constexpr std::string_view k_key1 = "pk_first";
constexpr std::string_view k_key2 = "pk_second";
constexpr std::string_view k_val1 = "pv_one";
constexpr std::string_view k_val2 = "pv_two";
constexpr std::string_view k_val3 = "pv_three";
constexpr std::string_view k_val4 = "pv_four";
// 9 letters and digits: what every template accepts (Mistral's refuse anything else).
constexpr std::string_view k_id1 = "Pr0beId01";
constexpr std::string_view k_id2 = "Pr0beId02";
constexpr size_t k_max_section_probe = 64 * 1024;

ordered_json probe_args(std::string_view v1, std::string_view v2) {
  ordered_json a = ordered_json::object();
  a[std::string(k_key1)] = v1;
  a[std::string(k_key2)] = v2;
  return a;
}

ordered_json probe_call(std::string_view id, std::string_view name, ordered_json args) {
  ordered_json c;
  c["id"] = id;
  c["type"] = "function";
  c["function"]["name"] = name;
  c["function"]["arguments"] = std::move(args);
  return c;
}

ordered_json probe_tool(std::string_view name, bool with_params) {
  ordered_json params = {{"type", "object"}, {"properties", ordered_json::object()}};
  if (with_params) {
    params["properties"][std::string(k_key1)] = {{"type", "string"}};
    params["properties"][std::string(k_key2)] = {{"type", "string"}};
    params["required"] = {k_key1, k_key2};
  }
  ordered_json t;
  t["type"] = "function";
  t["function"]["name"] = name;
  t["function"]["description"] = "probe";
  t["function"]["parameters"] = std::move(params);
  return t;
}

struct prober {
  const jinja::chat_template_program& program;
  const ordered_json& base;

  // The conversation [user, assistant(content, calls)] without a generation prompt.
  result<std::string> render(const ordered_json& calls, std::string_view content = "") const {
    ordered_json ctx = base.is_object() ? base : ordered_json::object();
    ordered_json user = {{"role", "user"}, {"content", "probe question"}};
    ordered_json assistant = {{"role", "assistant"}, {"content", content}};
    if (!calls.empty()) assistant["tool_calls"] = calls;
    ctx["messages"] = ordered_json::array({user, assistant});
    ctx["tools"] = ordered_json::array(
        {probe_tool(k_name1, true), probe_tool(k_name2, true), probe_tool(k_name0, false)});
    ctx["add_generation_prompt"] = false;
    jinja::render_options o;
    o.now = std::chrono::system_clock::time_point{};
    return jinja::render(program, ctx, o);
  }

  // The conversation [user] with the generation prompt: what the model's output follows.
  result<std::string> generation_prompt() const {
    ordered_json ctx = base.is_object() ? base : ordered_json::object();
    ctx["messages"] = ordered_json::array({{{"role", "user"}, {"content", "probe question"}}});
    ctx["tools"] = ordered_json::array(
        {probe_tool(k_name1, true), probe_tool(k_name2, true), probe_tool(k_name0, false)});
    ctx["add_generation_prompt"] = true;
    jinja::render_options o;
    o.now = std::chrono::system_clock::time_point{};
    return jinja::render(program, ctx, o);
  }
};

size_t common_prefix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

size_t common_suffix(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[a.size() - 1 - n] == b[b.size() - 1 - n]) ++n;
  return n;
}

// A prefix that ends inside a special token ("<|im_" of "<|im_end|>" shared with "<tool_call>")
// is cut back to the token's start: an opener starts at a token's start.
size_t prefix_back_off(std::string_view s, size_t n) {
  const std::string_view p = s.substr(0, n);
  for (char open : {'<', '['}) {
    const char close = open == '<' ? '>' : ']';
    const size_t o = p.rfind(open);
    if (o != std::string_view::npos) {
      const size_t c = p.rfind(close);
      if (c == std::string_view::npos || c < o) n = std::min(n, o);
    }
  }
  return n;
}

// The same for a suffix of length n of s that starts inside a token ("|>" of "<|call|>" shared
// with "<|return|>"): the suffix is shortened to start after that token.
size_t suffix_back_off(std::string_view s, size_t n) {
  const std::string_view q = s.substr(s.size() - n);
  size_t cut = 0;
  for (char close : {'>', ']'}) {
    const char open = close == '>' ? '<' : '[';
    const size_t c = q.find(close);
    if (c == std::string_view::npos) continue;
    const size_t o = q.find(open);
    if (o == std::string_view::npos || o > c) cut = std::max(cut, c + 1);
  }
  return n - std::min(cut, n);
}

// The part of `a` (rendered with calls) that differs from every baseline (the same turn without
// calls): the call section.
// The call section of `a`: what differs from every baseline, and not what the generation prompt
// already wrote (the model's output follows that).
std::string_view section_of(std::string_view a, const std::vector<std::string>& baselines,
                            std::string_view generation_prompt) {
  size_t p = a.size();
  size_t q = a.size();
  for (const auto& b : baselines) {
    p = std::min(p, common_prefix(a, b));
    q = std::min(q, common_suffix(a, b));
  }
  p = prefix_back_off(a, p);
  if (!generation_prompt.empty())
    p = std::max(p, prefix_back_off(a, common_prefix(a, generation_prompt)));
  if (p + q > a.size()) q = a.size() - p;
  q = suffix_back_off(a, q);
  std::string_view s = a.substr(p, a.size() - p - q);
  // Reasoning the template writes before the calls (<think></think>, Command R's
  // <|START_THINKING|><|END_THINKING|>) is the think filter's, not the call's: the section starts
  // after it.
  for (;;) {
    size_t b = 0;
    while (b < s.size() && tct::is_space(s[b])) ++b;
    if (b == s.size() || s[b] != '<') break;
    const size_t e = s.find('>', b);
    if (e == std::string_view::npos) break;
    std::string token(s.substr(b, e + 1 - b));
    for (char& c : token) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (token.find("think") == std::string::npos) break;
    s.remove_prefix(e + 1);
  }
  return s;
}

// The end-of-turn token the template writes after the calls is not part of them: the model's
// generation ends there and the engine does not hand it over as text.
void strip_end_of_turn(std::string& close, const ordered_json& base) {
  auto eos = base.find("eos_token");
  if (eos == base.end() || !eos->is_string() || eos->get<std::string>().empty()) return;
  const size_t at = close.find(eos->get<std::string>());
  if (at != std::string::npos) close.resize(at);
}

size_t find_from(std::string_view s, std::string_view what, size_t from) {
  return from > s.size() ? std::string_view::npos : s.find(what, from);
}

// The JSON value (object or array) that starts at s[i], with its end.
std::optional<ordered_json> json_at(std::string_view s, size_t i, size_t* end) {
  if (tct::json_span(s, i, true, end) != tct::match::ok) return std::nullopt;
  return tct::json_parse(s.substr(i, *end - i));
}

// A call object: a key whose value is the name and one whose value is the arguments, or
// {"NAME": ARGS}.
bool call_object_keys(const ordered_json& v, std::string_view name, const ordered_json& args,
                      std::string* name_key, std::string* args_key) {
  if (!v.is_object()) return false;
  if (v.size() == 1 && v.begin().key() == name && v.begin().value() == args) {
    name_key->clear();
    args_key->clear();
    return true;
  }
  std::string nk, ak;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it.value().is_string() && it.value().get<std::string>() == name && nk.empty())
      nk = it.key();
    if (it.value() == args && ak.empty()) ak = it.key();
  }
  if (nk.empty() || ak.empty()) return false;
  *name_key = nk;
  *args_key = ak;
  return true;
}

// What separates and closes calls, from the text after the first call in a one-call section
// (after1 = call_close + section_close) and between the calls of a two-call section
// (between = call_close + call_sep + call_open), with the text before the first call
// (before = section_open + call_open).
void split_literals(tool_call_format& f, std::string_view before, std::string_view after1,
                    std::optional<std::string_view> between) {
  if (!between) {
    f.section_open.clear();
    f.call_open = std::string(before);
    f.call_close = std::string(after1);
    return;
  }
  const std::string_view r = *between;
  size_t cc = common_prefix(r, after1);
  if (cc < after1.size()) cc = prefix_back_off(r, cc);
  f.call_close = std::string(r.substr(0, cc));
  f.section_close = std::string(after1.substr(cc));
  const std::string_view rest = r.substr(cc);
  const size_t co = common_suffix(before, rest);
  f.call_open = std::string(rest.substr(rest.size() - co));
  f.call_sep = std::string(rest.substr(0, rest.size() - co));
  f.section_open = std::string(before.substr(0, before.size() - co));
}

struct sections {
  std::string_view s1;                 // one call: probe_fn_alpha(pv_one, pv_two)
  std::optional<std::string_view> s2;  // two calls: and probe_fn_beta(pv_three, pv_four)
  std::optional<std::string_view> s0;  // one call without arguments: probe_fn_gamma()
};

result<tool_call_format> derive_json(tool_call_format f, const sections& s, size_t i, size_t end,
                                     const ordered_json& v) {
  const ordered_json args = probe_args(k_val1, k_val2);
  if (v.is_array()) {
    f.shape = tool_call_shape::json_array;
    call_object_keys(v[0], k_name1, args, &f.name_key, &f.args_key);
    f.section_open = std::string(s.s1.substr(0, i));
    f.section_close = std::string(s.s1.substr(end));
    return f;
  }
  f.shape = tool_call_shape::json_object;
  call_object_keys(v, k_name1, args, &f.name_key, &f.args_key);
  std::optional<std::string_view> between;
  size_t e1 = 0;
  size_t e2 = 0;
  if (s.s2 && s.s2->substr(0, i) == s.s1.substr(0, i) && json_at(*s.s2, i, &e1)) {
    const size_t j = s.s2->find('{', e1);
    if (j != std::string_view::npos && json_at(*s.s2, j, &e2)) between = s.s2->substr(e1, j - e1);
  }
  split_literals(f, s.s1.substr(0, i), s.s1.substr(end), between);
  return f;
}

result<tool_call_format> derive_name_args(tool_call_format f, const sections& s, size_t i,
                                          size_t end) {
  f.shape = tool_call_shape::name_args;
  const size_t n1 = s.s1.find(k_name1);
  const size_t n1e = n1 + k_name1.size();
  const std::string_view m1 = s.s1.substr(n1e, i - n1e);
  std::optional<std::string_view> between;
  std::optional<std::string_view> m2;
  size_t e1 = 0;
  if (s.s2 && s.s2->substr(0, i) == s.s1.substr(0, i) && json_at(*s.s2, i, &e1)) {
    const size_t n2 = find_from(*s.s2, k_name2, e1);
    const size_t j = find_from(*s.s2, "{", n2);
    if (n2 != std::string_view::npos && j != std::string_view::npos) {
      between = s.s2->substr(e1, n2 - e1);
      m2 = s.s2->substr(n2 + k_name2.size(), j - n2 - k_name2.size());
    }
  }
  split_literals(f, s.s1.substr(0, n1), s.s1.substr(end), between);
  // An id (Mistral's [CALL_ID]) or a counter (Kimi's functions.NAME:0) between the name and the
  // arguments is a slot: the probe's id where the template wrote it, else what differs between
  // the first call's text and the second's.
  if (const size_t d = m1.find(k_id1); d != std::string_view::npos) {
    f.has_id = true;
    f.name_to_args = std::string(m1.substr(0, d));
    f.args_after_id = std::string(m1.substr(d + k_id1.size()));
  } else if (m2 && *m2 != m1) {
    const size_t lp = common_prefix(m1, *m2);
    const size_t ls = std::min(common_suffix(m1, *m2), std::min(m1.size(), m2->size()) - lp);
    f.has_id = true;
    f.name_to_args = std::string(m1.substr(0, lp));
    f.args_after_id = std::string(m1.substr(m1.size() - ls));
  } else {
    f.name_to_args = std::string(m1);
  }
  return f;
}

result<tool_call_format> derive_name_params(tool_call_format f, const sections& s) {
  f.shape = tool_call_shape::name_params;
  const std::string_view s1 = s.s1;
  const size_t n1 = s1.find(k_name1);
  const size_t n1e = n1 + k_name1.size();
  const size_t k1 = find_from(s1, k_key1, n1e);
  const size_t v1 = find_from(s1, k_val1, k1 + k_key1.size());
  const size_t k2 = find_from(s1, k_key2, v1 + k_val1.size());
  const size_t v2 = find_from(s1, k_val2, k2 + k_key2.size());
  if (k1 == std::string_view::npos || v1 == std::string_view::npos ||
      k2 == std::string_view::npos || v2 == std::string_view::npos) {
    return error{"the template writes a call's arguments in no form known here: " +
                 std::string(s1.substr(0, 400))};
  }
  f.param_first = std::string(s1.substr(n1e, k1 - n1e));
  f.param_key_to_value = std::string(s1.substr(k1 + k_key1.size(), v1 - k1 - k_key1.size()));
  f.param_next = std::string(s1.substr(v1 + k_val1.size(), k2 - v1 - k_val1.size()));
  if (s1.substr(k2 + k_key2.size(), v2 - k2 - k_key2.size()) != f.param_key_to_value)
    return error{"the template writes its arguments' keys and values unevenly"};
  const size_t v2e = v2 + k_val2.size();
  std::optional<std::string_view> between;
  if (s.s2 && s.s2->substr(0, v2e) == s1.substr(0, v2e)) {
    const size_t n2 = find_from(*s.s2, k_name2, v2e);
    if (n2 != std::string_view::npos) between = s.s2->substr(v2e, n2 - v2e);
  }
  split_literals(f, s1.substr(0, n1), s1.substr(v2e), between);
  if (s.s0) {
    const size_t n0 = s.s0->find(k_name0);
    if (n0 != std::string_view::npos) {
      std::string_view z = s.s0->substr(n0 + k_name0.size());
      if (z.ends_with(f.section_close)) z.remove_suffix(f.section_close.size());
      f.name_no_params = std::string(z);
    }
  }
  return f;
}

}  // namespace

result<tool_call_format> tool_call_format_derive(const jinja::chat_template_program& program,
                                                 const nlohmann::ordered_json& base_context) {
  const prober p{program, base_context};
  const ordered_json call1 = probe_call(k_id1, k_name1, probe_args(k_val1, k_val2));
  const ordered_json call2 = probe_call(k_id2, k_name2, probe_args(k_val3, k_val4));
  const ordered_json call0 = probe_call(k_id1, k_name0, ordered_json::object());
  auto a1 = p.render(ordered_json::array({call1}));
  if (!a1) return error{"the template cannot render a tool call: " + a1.message()};
  std::vector<std::string> baselines;
  for (std::string_view content : {"", "Zq probe answer"}) {
    auto b = p.render(ordered_json::array(), content);
    if (b) baselines.push_back(std::move(*b));
  }
  if (baselines.empty()) return error{"the template cannot render an assistant message"};
  auto gp = p.generation_prompt();
  const std::string gen = gp ? *gp : std::string();
  sections s;
  s.s1 = section_of(*a1, baselines, gen);
  if (s.s1.find(k_name1) == std::string_view::npos)
    return error{"the template writes no tool calls"};
  // A real call section is a few hundred bytes; the search for its JSON below is quadratic in the
  // worst case, so a hostile template's megabytes are refused first.
  if (s.s1.size() > k_max_section_probe)
    return error{"the template writes " + std::to_string(s.s1.size()) +
                 " bytes for one tool call; at most " + std::to_string(k_max_section_probe) +
                 " are read"};
  auto a2 = p.render(ordered_json::array({call1, call2}));
  if (a2) {
    s.s2 = section_of(*a2, baselines, gen);
    if (s.s2->find(k_name2) == std::string_view::npos) s.s2.reset();
  }
  auto a0 = p.render(ordered_json::array({call0}));
  if (a0) {
    s.s0 = section_of(*a0, baselines, gen);
    if (s.s0->find(k_name0) == std::string_view::npos) s.s0.reset();
  }

  tool_call_format f;
  if (!p.render(
          ordered_json::array({probe_call("call_probe_1", k_name1, probe_args(k_val1, k_val2))})))
    f.id_style = tool_call_id_style::alnum9;

  // The leftmost JSON value that holds the call (name and arguments) or is the arguments.
  const ordered_json args = probe_args(k_val1, k_val2);
  const size_t n1 = s.s1.find(k_name1);
  result<tool_call_format> r = error{""};
  bool found = false;
  for (size_t i = 0; i < s.s1.size() && !found; ++i) {
    if (s.s1[i] != '{' && s.s1[i] != '[') continue;
    size_t end = 0;
    auto v = json_at(s.s1, i, &end);
    if (!v) continue;
    std::string nk, ak;
    const bool call = v->is_array()
                          ? !v->empty() && call_object_keys((*v)[0], k_name1, args, &nk, &ak)
                          : call_object_keys(*v, k_name1, args, &nk, &ak);
    if (call) {
      r = derive_json(f, s, i, end, *v);
      found = true;
    } else if (*v == args && i > n1) {
      r = derive_name_args(f, s, i, end);
      found = true;
    }
  }
  if (!found) r = derive_name_params(f, s);
  if (!r) return r;
  strip_end_of_turn(r->section_close, base_context);
  const std::string opener = r->section_open + r->call_open;
  r->trigger = std::string(tct::first_run(opener));
  r->trigger_at_start = r->trigger.empty();
  r->parallel_calls = s.s2.has_value();
  // The format must read back what the template wrote for the probe.
  const auto back = tool_calls_parse(*r, s.s1);
  if (back.calls.size() != 1 || back.calls[0].name != k_name1 ||
      tct::json_parse(back.calls[0].arguments) != std::optional<ordered_json>(args))
    return error{"the format derived from the template does not read back its own call: " +
                 std::string(s.s1.substr(0, 400))};
  return r;
}

}  // namespace hearth
