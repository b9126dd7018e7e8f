// Chat templates: a conversation of {role, content} messages -> the prompt text a chat model was
// trained on, as llama.cpp (build 4748, src/llama-chat.cpp) formats it without a Jinja engine.
//
// The family is recognised from the model's Jinja template (GGUF `tokenizer.chat_template`, or
// the "chat_template" of a Hugging Face tokenizer_config.json) by llama.cpp's heuristics
// (llm_chat_detect_template: "<|im_start|>" -> chatml, "[INST]" -> a llama2 or mistral variant,
// ...), in llama.cpp's order, so a template naming several families' markers resolves the same
// way. A name given explicitly overrides detection. The output strings are llama.cpp's exactly
// (llm_chat_apply_template), and the generation prompt (the assistant turn's opener) is always
// added; the llama2 and mistral formats have none, their prompt ends with "[/INST]".
//
// Special tokens. The text is meant for vocab::tokenize(text, add_special = true,
// parse_special = true), as llama.cpp's common_chat_apply_template + common_tokenize(ctx, prompt,
// true, true) use it:
//  - No format writes BOS at the start: the tokenizer adds it when the vocabulary asks
//    (tokenizer.ggml.add_bos_token), so a template never doubles it. Inside the history the
//    llama2-sys-bos variant writes "<s>" before each later "[INST]", and the llama2 and mistral
//    formats close an assistant turn with "</s>"; these become BOS / EOS only because the text
//    is tokenized with parse_special (the text "<s>" and "</s>" is hard-coded, as in llama.cpp,
//    whatever the vocabulary calls its BOS and EOS).
//  - Turn markers ("<|im_start|>", "[INST]" in Mistral v3 vocabularies, "<start_of_turn>", ...)
//    become single tokens the same way. The flip side, shared with llama.cpp: marker text written
//    inside a message's content becomes that token too.
//  - SentencePiece vocabularies with add_space_prefix put a space before the text after every
//    special token (vocab::tokenize, as llama.cpp), and the formats do not compensate for it. For
//    Llama 2 that is Meta's own tokenization ("<s>▁[INST]"). The Mistral formats write the space
//    themselves ("[INST] What", " [INST]" after </s>), so on such a vocabulary each text after a
//    special token starts with one "▁" token more than mistral-common's reference ids (by
//    llama.cpp's rule, which vocab::tokenize follows; tests/chat_tokens_test.cpp pins both).
//
// Beyond llama.cpp's build 4748: qwen3 (detected before chatml, from "<think>" or
// "enable_thinking" in a ChatML template) formats as Qwen3's own template does, reasoning and
// `enable_thinking` included.
//
// What this is not: a Jinja interpreter. Templates that only differ in what they do with a system
// message, tools or reasoning text format as the family's llama.cpp format does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/io/gguf.h"

namespace hearth {

// A call an assistant message made (OpenAI's tool_calls[i]).
struct chat_tool_call {
  std::string id;         // "call_..." as the model or the server named it
  std::string name;       // the function's name
  std::string arguments;  // JSON text, as OpenAI sends it (a Jinja template gets it parsed)
};

// One message; the same fields as the wire's (schema/message-parts.h). The built-in formats read
// role and content only; a model's own Jinja template (engine/prompt.h) reads them all.
struct chat_message {
  std::string role;  // "system", "user", "assistant"; a Jinja template also takes "tool", ...
  std::string content;
  std::string name;               // a tool message's function name, or a participant's
  std::string tool_call_id;       // a tool message: the call it answers
  std::string reasoning_content;  // an assistant's reasoning, for templates that replay it
  std::vector<chat_tool_call> tool_calls;
};

// The formats hearth can write; the names are llama.cpp's (llama_chat_builtin_templates).
enum class chat_template {
  chatml,             // <|im_start|>role\ncontent<|im_end|>\n (Qwen, Hermes, ...)
  qwen3,              // chatml with <think>...</think> reasoning (Qwen3's own template)
  llama2,             // [INST] ... [/INST]; a system message is prefixed to the first turn
  llama2_sys,         // the same with a <<SYS>>\n...\n<</SYS>>\n\n system block
  llama2_sys_bos,     // ... and <s> before every later [INST]
  llama2_sys_strip,   // ... and every message stripped of surrounding whitespace
  mistral_v1,         // " [INST] ... [/INST]" (Mistral-7B v0.1/v0.2, Mixtral 8x7B)
  mistral_v3,         // "[INST] ...[/INST]", control-token [INST] (Mistral-7B v0.3, Large 2407)
  mistral_v3_tekken,  // "[INST]...[/INST]" (Mistral Nemo, Tekken vocabulary)
  mistral_v7,         // [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT][INST] ...[/INST] (Large 2411)
  phi3,               // <|role|>\ncontent<|end|>\n
  phi4,               // <|im_start|>role<|im_sep|>content<|im_end|>
  gemma,              // <start_of_turn>user\n...<end_of_turn>\n; system merged into the first turn
                      // (Gemma, Gemma 2 and Gemma 3)
  llama3,             // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
};

// The GGUF metadata key of a model's Jinja chat template.
inline constexpr std::string_view chat_template_key = "tokenizer.chat_template";

// "chatml", "llama2-sys-bos", "mistral-v3-tekken", ...
std::string_view chat_template_name(chat_template t);
// Every name, comma-separated, in the order of the enum (for error messages).
std::string chat_template_names();

// A name given explicitly (`--template chatml`). An unknown name is an error listing the known.
result<chat_template> chat_template_from_name(std::string_view name);

// The family of a Jinja template text (or of a bare name, as llama.cpp allows). A template that
// is not recognised, or recognised as a family llama.cpp knows and hearth does not format yet
// (zephyr, deepseek3, command-r, ...), is an error that lists the names that can be given.
result<chat_template> chat_template_detect(std::string_view jinja);

// How a model's template was chosen.
struct chat_template_choice {
  chat_template tmpl = chat_template::chatml;
  bool detected = false;  // from the model's metadata; false: named explicitly
};

// Why chat_template_for_model found no template, for callers to act on without reading the
// message.
enum class chat_template_problem : uint8_t {
  unknown_name,  // the name given is not a template hearth has (the message lists them)
  missing,       // no tokenizer.chat_template in the metadata
  unreadable,    // the metadata key is not text
  unrecognised,  // a template hearth does not recognise (the message lists the names)
};

// `name` when not empty, else detected from `tokenizer.chat_template` in the model's metadata.
// A model without that key is an error saying so (the caller suggests naming one). On an error,
// `why` (when given) is set to its kind.
result<chat_template_choice> chat_template_for_model(const gguf_file& f, std::string_view name,
                                                     chat_template_problem* why = nullptr);

// Messages come from users and the network: an empty conversation, or a role other than
// system/user/assistant, is an error naming the message. Any content is accepted.
result<void> chat_messages_check(std::span<const chat_message> messages);

// What a request may change in a template (the Jinja variables templates read besides messages).
struct chat_template_options {
  // Qwen3's `enable_thinking`: false ends the generation prompt with an empty think block
  // ("<think>\n\n</think>\n\n"), so the model answers without reasoning first. Other formats
  // ignore it.
  bool enable_thinking = true;
};

// Whether the format's model writes its reasoning between <think> and </think> before the answer
// (the text a think filter, engine/think-filter.h, keeps out of the answer).
bool chat_template_thinks(chat_template t);

// The prompt text for `messages`, the generation prompt included; chat_messages_check's errors.
//
// qwen3 follows Qwen3's tokenizer_config.json template (without tools): ChatML turns; an
// assistant turn before the last user message keeps only the text after its "</think>" (its
// reasoning is dropped, leading newlines too); an assistant turn after it is written with its
// think block ("<think>\n" reasoning "\n</think>\n\n" answer; an empty block for the last
// message when it has none).
result<std::string> chat_template_apply(chat_template t, std::span<const chat_message> messages,
                                        const chat_template_options& opts = {});

}  // namespace hearth
