// A generation's prompt as the model reads it, prepared one way for `hearth run` and the node:
// raw text, or chat messages formatted by a chat template, tokenized with BOS as the vocabulary
// asks, special-token text turned into tokens in a chat prompt (its turn markers are special
// tokens) and left as text in a raw one unless asked; and, for a thinking model, the filter that
// keeps its reasoning out of the answer.
//
// Which template: a built-in format the caller names (`chat_template`), else the model's own
// Jinja template (tokenizer.chat_template) rendered by engine/chat/jinja.h as Hugging Face
// transformers' apply_chat_template renders it (messages with their tool calls, tools, the
// request's template arguments, bos_token/eos_token, add_generation_prompt), else, where the
// model's template does not parse, the built-in format detected from it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/think-filter.h"
#include "engine/chat/jinja.h"
#include "engine/model.h"
#include "engine/tokenizer/chat-template.h"

namespace hearth {

struct chat_prompt_options {
  std::string_view
      template_name;            // a built-in format's name instead of the model's own; "": its own
  bool enable_thinking = true;  // chat_template_options::enable_thinking; the Jinja variable too
  std::string_view tools_json;  // OpenAI's tools array as JSON text; "": none
  std::string_view template_kwargs_json;  // a JSON object of more template variables; "": none
  jinja::render_options render;           // strftime_now's clock
};

// Why chat messages could not be made a prompt. The message says it for people; callers add
// their own advice by the code.
enum class prompt_error_code : uint8_t {
  template_unknown,       // the named template is not one hearth has (the message lists them)
  template_missing,       // the model has no chat template and none was named
  template_unreadable,    // the model's tokenizer.chat_template is not text
  template_unrecognised,  // the model's template is not one hearth knows (the message lists them)
  messages_invalid,       // no messages, or a role the templates do not know
  template_error,         // the model's Jinja template failed (its raise_exception message, or
                          // jinja2's error): a request the template refuses, the caller's 400
};

struct prompt_error {
  prompt_error_code code;
  std::string message;
};

struct chat_prompt {
  std::vector<int32_t> tokens;
  // The built-in format applied (or, when `jinja`, the family recognised in the model's template,
  // chatml when none), and whether it was the model's own.
  chat_template_choice choice;
  bool jinja = false;  // rendered by the model's own Jinja template, not a built-in format
  std::string text;    // the prompt text: the render, before a doubled BOS is dropped
  // The model's parsed Jinja template when `jinja` (shared with the per-model cache).
  std::shared_ptr<const jinja::chat_template_program> program;
  bool thinks = false;  // its model writes a think block first

  // What keeps the think block out of the answer: a filter for a thinking model's chat unless
  // `show_thinking`, else none (the text is the answer as it comes).
  std::optional<think_filter> thinking_filter(bool show_thinking) const;
};

// `messages` through the template and the tokenizer of `m`.
std::variant<chat_prompt, prompt_error> chat_prompt_prepare(const model& m,
                                                            std::span<const chat_message> messages,
                                                            const chat_prompt_options& options);

// The model's own Jinja template (tokenizer.chat_template), parsed once per distinct text: a
// process-wide cache, so every chat of a model (and every model with the same template) reuses the
// program. An error when the model has none or it does not parse.
result<std::shared_ptr<const jinja::chat_template_program>> model_chat_program(const model& m);

// The variables a Jinja chat template is rendered with, as transformers builds them: `messages`
// (each message's fields; tool calls' arguments parsed from JSON text into objects, an
// unparsable one left a string), `tools` (when tools_json is given), add_generation_prompt true,
// bos_token and eos_token (the vocabulary's BOS and EOS text), enable_thinking, and the
// template_kwargs_json object's keys over them. Errors: tools or kwargs that are not valid JSON.
result<nlohmann::ordered_json> chat_template_context(const model& m,
                                                     std::span<const chat_message> messages,
                                                     const chat_prompt_options& options);

// A raw prompt's tokens: BOS as the vocabulary asks; special-token text ("<s>") made tokens only
// with `parse_special`.
std::vector<int32_t> text_prompt_tokens(const model& m, std::string_view text, bool parse_special);

}  // namespace hearth
