// engine/prompt.h's chat path on a real model (stories260K with a chat template written into a
// copy): the model's own Jinja template renders the conversation as transformers would (tool
// calls with parsed arguments, tools, template arguments, bos/eos), a BOS the template writes is
// not doubled by the tokenizer, a template's refusal is a template_error with its message, and a
// named built-in format still wins over the model's template.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "engine/model.h"
#include "engine/prompt.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

std::unique_ptr<model> model_with_template(const std::string& name, const std::string& tmpl) {
  const std::string path = testing::write_stories_variant(
      name, {.metadata = [&](gguf_writer& w) { w.set_string("tokenizer.chat_template", tmpl); }});
  return model::load(path, {});
}

const chat_prompt& ok(const std::variant<chat_prompt, prompt_error>& r) {
  if (const auto* e = std::get_if<prompt_error>(&r)) ADD_FAILURE() << e->message;
  return std::get<chat_prompt>(r);
}

TEST(ChatPrompt, TheModelsJinjaTemplateSeesWhatTransformersPasses) {
  auto m = model_with_template(
      "chat_prompt_tools",
      "{{ bos_token }}{% if tools %}T={{ tools | tojson }}\n{% endif %}"
      "{% for msg in messages %}<{{ msg.role }}>{{ msg.content }}"
      "{% if msg.tool_calls %}{% for c in msg.tool_calls %}[{{ c.id }} {{ c.function.name }} "
      "{{ c.function.arguments | tojson }} {{ c.function.arguments is mapping }}]{% endfor %}{% "
      "endif %}"
      "{% if msg.tool_call_id %}({{ msg.tool_call_id }}){% endif %}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token if flag is defined }}"
      "{{ enable_thinking }}");
  ASSERT_TRUE(m);
  std::vector<chat_message> msgs(3);
  msgs[0] = {"user", "Weather?"};
  msgs[1] = {"assistant", ""};
  msgs[1].tool_calls = {{"call_1", "get_weather", R"({"location": "Paris"})"},
                        {"call_2", "f", "not json"}};
  msgs[2] = {"tool", "18 C"};
  msgs[2].tool_call_id = "call_1";
  const std::string tools = R"([{"type": "function", "function": {"name": "get_weather"}}])";
  auto r = chat_prompt_prepare(
      *m, msgs,
      {.enable_thinking = false, .tools_json = tools, .template_kwargs_json = R"({"flag": 1})"});
  const chat_prompt& p = ok(r);
  EXPECT_TRUE(p.jinja);
  EXPECT_TRUE(p.program);
  EXPECT_EQ(p.text,
            "<s>T=[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]\n"
            "<user>Weather?<assistant>[call_1 get_weather {\"location\": \"Paris\"} True]"
            "[call_2 f \"not json\" False]<tool>18 C(call_1)<assistant></s>False");
  // stories260K's vocabulary adds BOS itself: the template's "<s>" is dropped, not doubled.
  const vocab& v = m->vocab();
  ASSERT_TRUE(v.add_bos());
  EXPECT_EQ(p.tokens.front(), v.bos());
  EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), v.bos()), 1);
  EXPECT_EQ(p.tokens, v.tokenize(p.text.substr(3), true, true));
}

TEST(ChatPrompt, ATemplatesRefusalIsATemplateError) {
  auto m = model_with_template(
      "chat_prompt_refuse",
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}{% for msg in messages %}{{ msg.content }}{% endfor %}");
  ASSERT_TRUE(m);
  std::vector<chat_message> msgs = {{"system", "Be brief."}, {"user", "Hi"}};
  auto r = chat_prompt_prepare(*m, msgs, {});
  const auto* e = std::get_if<prompt_error>(&r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, prompt_error_code::template_error);
  EXPECT_EQ(e->message, "System role not supported");
  // Invalid tools JSON is the request's fault too, before any render.
  r = chat_prompt_prepare(*m, std::vector<chat_message>{{"user", "Hi"}}, {.tools_json = "[{"});
  ASSERT_TRUE(std::holds_alternative<prompt_error>(r));
  EXPECT_EQ(std::get<prompt_error>(r).code, prompt_error_code::messages_invalid);
}

TEST(ChatPrompt, ANamedFormatOrAnUnparsableTemplateUsesTheBuiltInFormats) {
  auto m = model_with_template("chat_prompt_named",
                               "{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(m);
  std::vector<chat_message> msgs = {{"user", "Hi"}};
  const auto named_r = chat_prompt_prepare(*m, msgs, {.template_name = "chatml"});
  const chat_prompt& named = ok(named_r);
  EXPECT_FALSE(named.jinja);
  EXPECT_EQ(named.text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A chatml-looking template that the engine cannot parse falls back to the detected format.
  auto broken = model_with_template("chat_prompt_broken", "<|im_start|>{% for m in messages %}");
  ASSERT_TRUE(broken);
  const auto fallback_r = chat_prompt_prepare(*broken, msgs, {});
  const chat_prompt& fallback = ok(fallback_r);
  EXPECT_FALSE(fallback.jinja);
  EXPECT_EQ(fallback.choice.tmpl, chat_template::chatml);
}

}  // namespace
}  // namespace hearth
