#include "engine/prompt.h"

namespace hearth {
namespace {

prompt_error_code code_of(chat_template_problem p) {
  switch (p) {
    case chat_template_problem::unknown_name:
      return prompt_error_code::template_unknown;
    case chat_template_problem::missing:
      return prompt_error_code::template_missing;
    case chat_template_problem::unreadable:
      return prompt_error_code::template_unreadable;
    case chat_template_problem::unrecognised:
      break;
  }
  return prompt_error_code::template_unrecognised;
}

}  // namespace

std::optional<think_filter> chat_prompt::thinking_filter(bool show_thinking) const {
  if (!thinks || show_thinking) return std::nullopt;
  return think_filter{};
}

std::variant<chat_prompt, prompt_error> chat_prompt_prepare(const model& m,
                                                            std::span<const chat_message> messages,
                                                            const chat_prompt_options& options) {
  chat_template_problem why{};
  auto choice = chat_template_for_model(m.file(), options.template_name, &why);
  if (!choice) return prompt_error{code_of(why), choice.message()};
  auto text =
      chat_template_apply(choice->tmpl, messages, {.enable_thinking = options.enable_thinking});
  if (!text) return prompt_error{prompt_error_code::messages_invalid, text.message()};
  chat_prompt p;
  p.tokens = m.vocab().tokenize(*text, true, true);
  p.choice = *choice;
  p.thinks = chat_template_thinks(choice->tmpl);
  return p;
}

std::vector<int32_t> text_prompt_tokens(const model& m, std::string_view text, bool parse_special) {
  return m.vocab().tokenize(text, true, parse_special);
}

}  // namespace hearth
