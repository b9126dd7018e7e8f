// Tool calls (tool-calls.h) case by case: derivation from small templates, the streaming parser's
// hold-back, give-back and bounds, typed parameters, ids and grammar errors. The 31 real templates
// are tests/tool_call_templates_test.cpp's.
#include <gtest/gtest.h>

#include <string>

#include "engine/chat/jinja.h"
#include "engine/chat/tool-calls.h"
#include "engine/grammar/grammar.h"

namespace hearth {
namespace {

using nlohmann::ordered_json;

const ordered_json k_base = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};

// A ChatML template that writes calls as Hermes does.
constexpr const char* k_hermes = R"({% for m in messages %}<|im_start|>{{ m.role }}
{% if m.content %}{{ m.content }}{% endif %}{% for c in m.tool_calls or [] %}
<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %})";

result<tool_call_format> derive(const char* tmpl) {
  auto p = jinja::parse(tmpl);
  if (!p) return error{p.message()};
  return tool_call_format_derive(**p, k_base);
}

TEST(ToolCalls, DerivesHermesFromItsTemplate) {
  auto f = derive(k_hermes);
  ASSERT_TRUE(f) << f.message();
  EXPECT_EQ(f->shape, tool_call_shape::json_object);
  // trim_blocks takes the newline after "{% for ... %}": calls follow each other directly.
  EXPECT_EQ(f->call_open, "<tool_call>\n");
  EXPECT_EQ(f->call_close, "\n</tool_call>");
  EXPECT_EQ(f->call_sep, "");
  EXPECT_EQ(f->name_key, "name");
  EXPECT_EQ(f->args_key, "arguments");
  EXPECT_EQ(f->trigger, "<tool_call>");
  EXPECT_TRUE(f->parallel_calls);
  EXPECT_EQ(f->id_style, tool_call_id_style::openai);
}

TEST(ToolCalls, TemplatesWithoutCallsOrThatRaiseAreErrors) {
  auto none = derive("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("writes no tool calls"), std::string::npos) << none.message();
  auto raises = derive(
      "{% for m in messages %}{% if m.tool_calls %}{{ raise_exception('no tools here') }}"
      "{% endif %}{{ m.content }}{% endfor %}");
  ASSERT_FALSE(raises);
  EXPECT_NE(raises.message().find("no tools here"), std::string::npos) << raises.message();
  // A section of megabytes is refused before the search for its JSON.
  auto huge = derive(
      "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ '{\"' * 50000 }}"
      "{{ c.function.name }}{% endfor %}{% endfor %}");
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.message().find("bytes for one tool call"), std::string::npos) << huge.message();
}

TEST(ToolCalls, MistralStyleIdsAndNameArgsSlots) {
  // Ids of 9 alphanumerics only, written between the name and the arguments.
  auto f = derive(
      R"({% for m in messages %}{% for c in m.tool_calls or [] %}{% if c.id | length != 9 %}{{ raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}{% endif %}[TOOL_CALLS]{{ c.function.name }}[CALL_ID]{{ c.id }}[ARGS]{{ c.function.arguments | tojson }}{% endfor %}{% if not m.tool_calls %}{{ m.content }}{% endif %}</s>{% endfor %})");
  ASSERT_TRUE(f) << f.message();
  EXPECT_EQ(f->shape, tool_call_shape::name_args);
  EXPECT_EQ(f->id_style, tool_call_id_style::alnum9);
  EXPECT_TRUE(f->has_id);
  EXPECT_EQ(f->name_to_args, "[CALL_ID]");
  EXPECT_EQ(f->args_after_id, "[ARGS]");
  auto r = tool_calls_parse(*f, "[TOOL_CALLS]get_time[CALL_ID]a1B2c3D4e[ARGS]{\"zone\": \"UTC\"}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_time");
  EXPECT_EQ(r.calls[0].arguments, R"({"zone":"UTC"})");
  EXPECT_EQ(r.content, "");
}

tool_call_format hermes() {
  auto f = derive(k_hermes);
  EXPECT_TRUE(f);
  return *f;
}

TEST(ToolCalls, StreamingHoldsBackWhatMayStartACall) {
  tool_call_parser p(hermes());
  EXPECT_EQ(p.feed("Sure. <tool").content, "Sure. ");
  // "<tool" might still become "<tool_call>": nothing more is content yet.
  auto a = p.feed("_call>\n{\"name\": \"get_time\", ");
  EXPECT_EQ(a.content, "");
  EXPECT_TRUE(a.calls.empty());
  // Whether another call follows is not known yet.
  auto b = p.feed("\"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>");
  EXPECT_TRUE(b.calls.empty());
  auto c = p.feed("\nDone <tooltip>");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_time");
  EXPECT_EQ(c.calls[0].arguments, R"({"zone":"UTC"})");
  EXPECT_EQ(c.content, "Done <tooltip>");
  EXPECT_EQ(p.finish().content, "");
}

TEST(ToolCalls, TextThatLooksLikeACallButIsNotIsContent) {
  const std::string bad = "a <tool_call>\n{\"name\": oops}\n</tool_call> b <tool_call> c";
  auto r = tool_calls_parse(hermes(), bad);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, bad);
  // A call whose object lacks the arguments key is not a call either.
  const std::string no_args = "<tool_call>\n{\"name\": \"f\"}\n</tool_call>";
  EXPECT_EQ(tool_calls_parse(hermes(), no_args).content, no_args);
}

// Llama 3.x writes a bare call object at the start of its answer; its models also open one with
// <|python_tag|>. The tag before something else is content, as it came.
TEST(ToolCalls, LlamaCallsMayOpenWithThePythonTag) {
  constexpr const char* k_llama =
      R"({% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{% if m.tool_calls %}{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "parameters": {{ c.function.arguments | tojson }}}{% endfor %}{% else %}{{ m.content }}{% endif %}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %})";
  auto f = derive(k_llama);
  ASSERT_TRUE(f) << f.message();
  ASSERT_TRUE(f->trigger.empty());
  const std::string call = R"(<|python_tag|>{"name": "get_time", "parameters": {"zone": "UTC"}})";
  auto r = tool_calls_parse(*f, call);
  ASSERT_EQ(r.calls.size(), 1u) << r.content;
  EXPECT_EQ(r.calls[0].name, "get_time");
  EXPECT_EQ(r.calls[0].arguments, R"({"zone":"UTC"})");
  EXPECT_EQ(r.content, "");
  // Streamed a byte at a time, the tag is held back until it is known.
  tool_call_parser p(*f);
  std::string content;
  size_t calls = 0;
  for (char c : call) {
    auto piece = p.feed(std::string(1, c));
    content += piece.content;
    calls += piece.calls.size();
  }
  auto last = p.finish();
  EXPECT_EQ(calls + last.calls.size(), 1u);
  EXPECT_EQ(content + last.content, "");
  for (const std::string text : {"<|python_tag|>print(1)", "<|python_tag|>", " <|python_t"}) {
    auto t = tool_calls_parse(*f, text);
    EXPECT_TRUE(t.calls.empty()) << text;
    EXPECT_EQ(t.content, text);
  }
}

TEST(ToolCalls, ACallCutAtTheEndOfTheOutputStillCounts) {
  // The model stopped at its end-of-turn token before writing the close.
  auto r = tool_calls_parse(
      hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n</tool_");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a":[1,2]})");
  // An object cut short is not.
  auto cut = tool_calls_parse(hermes(), "<tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

TEST(ToolCalls, ArgumentsWrittenAsAStringAreParsed) {
  auto r = tool_calls_parse(
      hermes(), "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x":1})");
}

TEST(ToolCalls, HostileOutputIsBounded) {
  // An endless section: given back as content once past the bound, never held forever.
  tool_call_parser p(hermes());
  std::string content;
  const std::string head = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"";
  content += p.feed(head).content;
  const std::string chunk(4096, 'x');
  for (size_t n = 0; n * chunk.size() < 2 * tool_call_max_section; ++n)
    content += p.feed(chunk).content;
  EXPECT_GT(content.size(), tool_call_max_section);
  content += p.finish().content;
  EXPECT_EQ(content.size(), head.size() + 2 * tool_call_max_section);
  // Deep nesting is refused before a recursive parser sees it.
  const std::string deep = "<tool_call>\n" + std::string(100000, '[') + std::string(100000, ']');
  auto r = tool_calls_parse(hermes(), deep);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, deep);
}

tool_call_format qwen3_coder() {
  tool_call_format f;
  f.shape = tool_call_shape::name_params;
  f.call_open = "<tool_call>\n<function=";
  f.call_close = "\n</parameter>\n</function>\n</tool_call>";
  f.call_sep = "\n";
  f.param_first = ">\n<parameter=";
  f.param_key_to_value = ">\n";
  f.param_next = "\n</parameter>\n<parameter=";
  f.name_no_params = ">\n</function>\n</tool_call>";
  f.trigger = "<tool_call>";
  return f;
}

TEST(ToolCalls, ParameterValuesAreTypedByTheToolSchema) {
  const std::string out =
      "<tool_call>\n<function=f>\n<parameter=code>\n5\n</parameter>\n<parameter=n>\n5\n"
      "</parameter>\n<parameter=tags>\n[\"a\"]\n</parameter>\n</function>\n</tool_call>";
  const char* tools = R"([{"type": "function", "function": {"name": "f", "parameters": {
      "type": "object", "properties": {"code": {"type": "string"}, "n": {"type": "integer"},
      "tags": {"type": "array"}}}}}])";
  auto typed = tool_calls_parse(qwen3_coder(), out, tools);
  ASSERT_EQ(typed.calls.size(), 1u);
  EXPECT_EQ(typed.calls[0].arguments, R"({"code":"5","n":5,"tags":["a"]})");
  // Without a schema a value that is JSON (and not a string) is JSON.
  auto untyped = tool_calls_parse(qwen3_coder(), out);
  ASSERT_EQ(untyped.calls.size(), 1u);
  EXPECT_EQ(untyped.calls[0].arguments, R"({"code":5,"n":5,"tags":["a"]})");
  // A call without parameters.
  auto none =
      tool_calls_parse(qwen3_coder(), "<tool_call>\n<function=g>\n</function>\n</tool_call>");
  ASSERT_EQ(none.calls.size(), 1u);
  EXPECT_EQ(none.calls[0].arguments, "{}");
}

TEST(ToolCalls, HarmonyHeadersWrittenOtherwiseStillParse) {
  // As gpt-oss's template writes a call, and as the model writes it.
  tool_call_format f;
  f.shape = tool_call_shape::name_args;
  f.call_open = " to=functions.";
  f.name_to_args = "<|channel|>commentary json<|message|>";
  f.call_close = "<|call|>";
  f.trigger = "to=functions.";
  auto r = tool_calls_parse(f,
                            "<|channel|>commentary to=functions.get_weather "
                            "<|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.content, "<|channel|>commentary ");
}

TEST(ToolCalls, IdsHaveTheTemplatesForm) {
  const std::string a = tool_call_id(0, tool_call_id_style::alnum9, 7);
  EXPECT_EQ(a.size(), 9u);
  for (char c : a) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << a;
  EXPECT_EQ(a, tool_call_id(0, tool_call_id_style::alnum9, 7));
  EXPECT_NE(a, tool_call_id(1, tool_call_id_style::alnum9, 7));
  const std::string o = tool_call_id(0, tool_call_id_style::openai, 7);
  EXPECT_EQ(o.substr(0, 5), "call_");
  EXPECT_EQ(o.size(), 29u);
}

TEST(ToolCalls, GrammarErrorsNameTheProblem) {
  const char* tools =
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])";
  auto named = tool_call_gbnf(hermes(), tools, "g", false);
  ASSERT_FALSE(named);
  EXPECT_NE(named.message().find("'g'"), std::string::npos) << named.message();
  EXPECT_FALSE(tool_call_gbnf(hermes(), "{}", "required", false));
  EXPECT_FALSE(tool_call_gbnf(hermes(), R"([{"type": "function", "function": {"name": "a b"}}])",
                              "required", false));
  auto ok = tool_call_gbnf(hermes(), tools, "f", true);
  ASSERT_TRUE(ok) << ok.message();
  EXPECT_TRUE(grammar_from_gbnf(*ok)) << *ok;
}

}  // namespace
}  // namespace hearth
