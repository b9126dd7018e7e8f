// A generation's prompt as the model reads it, prepared one way for `hearth run` and the node:
// raw text, or chat messages formatted by a chat template (the one the caller names, else the
// model's own), tokenized with BOS as the vocabulary asks (the templates never write it first, as
// llama.cpp's chat mode), special-token text turned into tokens in a chat prompt (its turn
// markers are special tokens) and left as text in a raw one unless asked; and, for a thinking
// model, the filter that keeps its reasoning out of the answer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/think-filter.h"
#include "engine/model.h"
#include "engine/tokenizer/chat-template.h"

namespace hearth {

struct chat_prompt_options {
  std::string_view template_name;  // a template's name instead of the model's own; "": its own
  bool enable_thinking = true;     // chat_template_options::enable_thinking
};

// Why chat messages could not be made a prompt. The message says it for people; callers add
// their own advice by the code.
enum class prompt_error_code : uint8_t {
  template_unknown,       // the named template is not one hearth has (the message lists them)
  template_missing,       // the model has no chat template and none was named
  template_unreadable,    // the model's tokenizer.chat_template is not text
  template_unrecognised,  // the model's template is not one hearth knows (the message lists them)
  messages_invalid,       // no messages, or a role the templates do not know
};

struct prompt_error {
  prompt_error_code code;
  std::string message;
};

struct chat_prompt {
  std::vector<int32_t> tokens;
  chat_template_choice choice;  // the template applied, and whether it was the model's own
  bool thinks = false;          // its model writes a think block first (chat_template_thinks)

  // What keeps the think block out of the answer: a filter for a thinking model's chat unless
  // `show_thinking`, else none (the text is the answer as it comes).
  std::optional<think_filter> thinking_filter(bool show_thinking) const;
};

// `messages` through the template and the tokenizer of `m`.
std::variant<chat_prompt, prompt_error> chat_prompt_prepare(const model& m,
                                                            std::span<const chat_message> messages,
                                                            const chat_prompt_options& options);

// A raw prompt's tokens: BOS as the vocabulary asks; special-token text ("<s>") made tokens only
// with `parse_special`.
std::vector<int32_t> text_prompt_tokens(const model& m, std::string_view text, bool parse_special);

}  // namespace hearth
