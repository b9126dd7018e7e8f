// `hearth chat-template render` through the binary: a shared template/context pair printed byte
// for byte as transformers rendered it, a pair transformers refuses failing with the template's
// own message, and a model's own template with its BOS/EOS token texts.
#include <gtest/gtest.h>

#include <string>

#include "tests/hearth-cli.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth::testing {
namespace {

std::string pair_path(const std::string& relative) {
  return testdata_path("chat-templates/" + relative);
}

TEST(CliChatTemplate, PrintsTransformersRenderExactly) {
  const std::string tmpl = pair_path("templates/Qwen-Qwen3-0.6B.jinja");
  const std::string ctx = pair_path("contexts/c05_tool_round.json");
  const std::string want = pair_path("renders/Qwen-Qwen3-0.6B/c05_tool_round.txt");
  ASSERT_FALSE(tmpl.empty() || ctx.empty() || want.empty());
  auto r = hearth("chat-template render --template " + quote(tmpl) + " --context " + quote(ctx) +
                  " --now 2026-12-01T09:30:00");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file_text(want));
  // strftime_now reads --now (Llama 3.1's template writes today's date).
  const std::string llama = pair_path("templates/meta-llama-Llama-3.1-8B-Instruct.jinja");
  const std::string user = pair_path("contexts/c01_user.json");
  r = hearth("chat-template render --template " + quote(llama) + " --context " + quote(user) +
             " --now 2026-12-01T09:30");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            read_file_text(pair_path("renders/meta-llama-Llama-3.1-8B-Instruct/c01_user.txt")));
}

TEST(CliChatTemplate, ATemplatesRefusalExitsNonZeroWithItsMessage) {
  const std::string tmpl = pair_path("templates/google-gemma-2-2b-it.jinja");
  const std::string ctx = pair_path("contexts/c02_system.json");
  ASSERT_FALSE(tmpl.empty() || ctx.empty());
  auto r = hearth("chat-template render --template " + quote(tmpl) + " --context " + quote(ctx));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("System role not supported"), std::string::npos) << r.err;
}

TEST(CliChatTemplate, AModelsOwnTemplateWithItsBosAndEos) {
  const std::string model =
      write_stories_variant("chat_template_cli", {.metadata = [](gguf_writer& w) {
                              w.set_string("tokenizer.chat_template",
                                           "{{ bos_token }}|{{ eos_token }}|{% for m in messages "
                                           "%}{{ m.role }}: {{ m.content }}{% endfor %}"
                                           "{% if add_generation_prompt %}|go{% endif %}");
                            }});
  const std::string ctx = write_temp_file("chat_template_cli.json",
                                          R"({"messages": [{"role": "user", "content": "Hi"}]})");
  auto r = hearth("chat-template render -m " + quote(model) + " --context " + quote(ctx));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>|</s>|user: Hi|go");
  // A model without a template says so.
  const std::string plain = testdata_path("models/stories260K.gguf");
  r = hearth("chat-template render -m " + quote(plain) + " --context " + quote(ctx));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hearth::testing
