#include "engine/prompt.h"

#include <list>
#include <mutex>
#include <utility>

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

// Parsed templates by their text, most recently used first. A node serves a handful of models;
// the bound keeps a process that loads many from keeping every program.
class program_cache {
 public:
  result<std::shared_ptr<const jinja::chat_template_program>> get(const std::string& text) {
    std::lock_guard lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->text != text) continue;
      entries_.splice(entries_.begin(), entries_, it);
      if (!it->program) return error{it->error};
      return it->program;
    }
    auto parsed = jinja::parse(text);
    entries_.push_front(entry{text, parsed ? *parsed : nullptr, parsed ? "" : parsed.message()});
    if (entries_.size() > k_max_entries) entries_.pop_back();
    return parsed;
  }

 private:
  static constexpr size_t k_max_entries = 16;
  struct entry {
    std::string text;
    std::shared_ptr<const jinja::chat_template_program> program;
    std::string error;  // why it does not parse, when program is null
  };
  std::mutex mu_;
  std::list<entry> entries_;
};

program_cache& programs() {
  static program_cache cache;
  return cache;
}

// A tool call's arguments as the template sees them: the object the JSON text holds, as
// transformers' callers pass it; text that is not JSON stays text.
nlohmann::ordered_json arguments_json(const std::string& text) {
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) return text;
  return j;
}

nlohmann::ordered_json message_json(const chat_message& m) {
  nlohmann::ordered_json j = {{"role", m.role}, {"content", m.content}};
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
  if (!m.tool_calls.empty()) {
    auto calls = nlohmann::ordered_json::array();
    for (const auto& c : m.tool_calls) {
      nlohmann::ordered_json call;
      if (!c.id.empty()) call["id"] = c.id;
      call["type"] = "function";
      call["function"] = {{"name", c.name}, {"arguments", arguments_json(c.arguments)}};
      calls.push_back(std::move(call));
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

// Whether the model's template makes it reason in a think block first: a family hearth knows to
// (qwen3), or a template that writes or strips "<think>" itself.
bool template_thinks(std::string_view text, const result<chat_template>& family) {
  if (family && chat_template_thinks(family.value())) return true;
  return text.find("<think>") != std::string_view::npos;
}

}  // namespace

std::optional<think_filter> chat_prompt::thinking_filter(bool show_thinking) const {
  if (!thinks || show_thinking) return std::nullopt;
  return think_filter{};
}

result<std::shared_ptr<const jinja::chat_template_program>> model_chat_program(const model& m) {
  auto text = m.file().get_string(chat_template_key);
  if (!text) return text.err();
  if (!text->has_value() || (*text)->empty()) return error{"the model has no chat template"};
  return programs().get(**text);
}

result<nlohmann::ordered_json> chat_template_context(const model& m,
                                                     std::span<const chat_message> messages,
                                                     const chat_prompt_options& options) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  auto list = nlohmann::ordered_json::array();
  for (const auto& msg : messages) list.push_back(message_json(msg));
  ctx["messages"] = std::move(list);
  if (!options.tools_json.empty()) {
    auto tools = nlohmann::ordered_json::parse(options.tools_json, nullptr, false);
    if (tools.is_discarded()) return error{"the tools are not valid JSON"};
    ctx["tools"] = std::move(tools);
  }
  ctx["add_generation_prompt"] = true;
  const vocab& v = m.vocab();
  ctx["bos_token"] = v.bos() >= 0 ? v.text(v.bos()) : std::string();
  ctx["eos_token"] = v.eos() >= 0 ? v.text(v.eos()) : std::string();
  ctx["enable_thinking"] = options.enable_thinking;
  if (!options.template_kwargs_json.empty()) {
    auto kwargs = nlohmann::ordered_json::parse(options.template_kwargs_json, nullptr, false);
    if (kwargs.is_discarded() || !kwargs.is_object())
      return error{"the chat template arguments are not a JSON object"};
    for (auto& [k, x] : kwargs.items()) ctx[k] = std::move(x);
  }
  return ctx;
}

std::variant<chat_prompt, prompt_error> chat_prompt_prepare(const model& m,
                                                            std::span<const chat_message> messages,
                                                            const chat_prompt_options& options) {
  if (options.template_name.empty()) {
    auto text = m.file().get_string(chat_template_key);
    if (text && text->has_value() && !(*text)->empty()) {
      auto program = programs().get(**text);
      // A template the engine cannot parse falls back to the built-in format detected below.
      if (program) {
        if (messages.empty())
          return prompt_error{prompt_error_code::messages_invalid,
                              "the conversation has no messages"};
        auto ctx = chat_template_context(m, messages, options);
        if (!ctx) return prompt_error{prompt_error_code::messages_invalid, ctx.message()};
        auto rendered = jinja::render(**program, *ctx, options.render);
        if (!rendered) return prompt_error{prompt_error_code::template_error, rendered.message()};
        chat_prompt p;
        p.text = std::move(*rendered);
        // The tokenizer adds BOS where the vocabulary asks; a template that writes it too would
        // double it (llama.cpp strips it the same way).
        const vocab& v = m.vocab();
        std::string_view body = p.text;
        if (v.add_bos() && v.bos() >= 0) {
          const std::string& bos = v.text(v.bos());
          if (!bos.empty() && body.starts_with(bos)) body.remove_prefix(bos.size());
        }
        p.tokens = v.tokenize(body, true, true);
        auto family = chat_template_detect(**text);
        p.choice = {family ? *family : chat_template::chatml, true};
        p.jinja = true;
        p.program = std::move(*program);
        p.thinks = template_thinks(**text, family);
        return p;
      }
    }
  }
  chat_template_problem why{};
  auto choice = chat_template_for_model(m.file(), options.template_name, &why);
  if (!choice) return prompt_error{code_of(why), choice.message()};
  auto text =
      chat_template_apply(choice->tmpl, messages, {.enable_thinking = options.enable_thinking});
  if (!text) return prompt_error{prompt_error_code::messages_invalid, text.message()};
  chat_prompt p;
  p.text = std::move(*text);
  p.tokens = m.vocab().tokenize(p.text, true, true);
  p.choice = *choice;
  p.thinks = chat_template_thinks(choice->tmpl);
  return p;
}

std::vector<int32_t> text_prompt_tokens(const model& m, std::string_view text, bool parse_special) {
  return m.vocab().tokenize(text, true, parse_special);
}

}  // namespace hearth
