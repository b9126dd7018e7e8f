#include "engine/tokenizer/chat-template.h"

#include <array>
#include <utility>

namespace hearth {
namespace {

constexpr std::array<std::pair<chat_template, std::string_view>, 14> k_names = {{
    {chat_template::chatml, "chatml"},
    {chat_template::qwen3, "qwen3"},
    {chat_template::llama2, "llama2"},
    {chat_template::llama2_sys, "llama2-sys"},
    {chat_template::llama2_sys_bos, "llama2-sys-bos"},
    {chat_template::llama2_sys_strip, "llama2-sys-strip"},
    {chat_template::mistral_v1, "mistral-v1"},
    {chat_template::mistral_v3, "mistral-v3"},
    {chat_template::mistral_v3_tekken, "mistral-v3-tekken"},
    {chat_template::mistral_v7, "mistral-v7"},
    {chat_template::phi3, "phi3"},
    {chat_template::phi4, "phi4"},
    {chat_template::gemma, "gemma"},
    {chat_template::llama3, "llama3"},
}};

// llama.cpp's trim(): ASCII whitespace (isspace in the C locale) at both ends.
std::string_view trim(std::string_view s) {
  constexpr std::string_view ws = " \t\n\v\f\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// What llm_chat_detect_template decides: one of ours, or the llama.cpp name of a family that
// hearth does not format (empty: nothing matched).
struct detection {
  bool found = false;
  chat_template tmpl = chat_template::chatml;
  std::string_view other;
};

detection found(chat_template t) {
  return {true, t, {}};
}
detection other(std::string_view name) {
  return {false, chat_template::chatml, name};
}

// llm_chat_detect_template's chain, in its order (the names it tries first are handled by the
// caller). The branches for families hearth does not format are kept so that a template with
// markers of several families resolves exactly as in llama.cpp.
detection detect(std::string_view t) {
  auto has = [t](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) {
    if (has("<|im_sep|>")) return found(chat_template::phi4);
    // Not in llama.cpp's build 4748 chain: Qwen3 templates, which write and strip think blocks.
    if (has("<think>") || has("enable_thinking")) return found(chat_template::qwen3);
    return found(chat_template::chatml);
  }
  if (t.starts_with("mistral") || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return found(chat_template::mistral_v7);
    // The official v1 template, or the v3 / v3-tekken ones (which all mention tools).
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return found(chat_template::mistral_v1);
      if (has("\"[INST]\"")) return found(chat_template::mistral_v3_tekken);
      return found(chat_template::mistral_v3);
    }
    if (has("content.strip()")) return found(chat_template::llama2_sys_strip);
    if (has("bos_token + '[INST]")) return found(chat_template::llama2_sys_bos);
    if (has("<<SYS>>")) return found(chat_template::llama2_sys);
    return found(chat_template::llama2);
  }
  if (has("<|assistant|>") && has("<|end|>")) return found(chat_template::phi3);
  if (has("<|assistant|>") && has("<|user|>")) return other(has("</s>") ? "falcon3" : "glmedge");
  if (has("<|user|>") && has("<|endoftext|>")) return other("zephyr");
  if (has("bos_token + message['role']")) return other("monarch");
  if (has("<start_of_turn>")) return found(chat_template::gemma);
  if (has("'\\n\\nAssistant: ' + eos_token")) return other("orion");
  if (has("GPT4 Correct ")) return other("openchat");
  if (has("USER: ") && has("ASSISTANT: ")) return other(has("SYSTEM: ") ? "vicuna-orca" : "vicuna");
  if (has("### Instruction:") && has("<|EOT|>")) return other("deepseek");
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return other("command-r");
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return found(chat_template::llama3);
  if (has("[gMASK]sop")) return other("chatglm3");
  if (has("[gMASK]<sop>")) return other("chatglm4");
  if (has("<\xE7\x94\xA8\xE6\x88\xB7>")) return other("minicpm");  // "<用户>"
  if (has("'Assistant: ' + message['content'] + eos_token")) return other("deepseek2");
  // "<｜Assistant｜>", "<｜User｜>", "<｜end▁of▁sentence｜>"
  if (has("<\xEF\xBD\x9C"
          "Assistant\xEF\xBD\x9C>") &&
      has("<\xEF\xBD\x9C"
          "User\xEF\xBD\x9C>") &&
      has("<\xEF\xBD\x9C"
          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>")) {
    return other("deepseek3");
  }
  if (has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]")) return other("exaone3");
  if (has("rwkv-world")) return other("rwkv-world");
  if (has("<|start_of_role|>")) return other("granite");
  if (has("message['role'] + additional_special_tokens[0] + message['content'] + "
          "additional_special_tokens[1]")) {
    return other("gigachat");
  }
  if (has("<|role_start|>")) return other("megrez");
  return {};
}

std::string role_error(size_t i, std::string_view role) {
  return "message " + std::to_string(i + 1) + " has the role '" + std::string(role) +
         "'; a chat template knows only system, user and assistant";
}

void apply_chatml(std::span<const chat_message> msgs, std::string& out) {
  for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  out += "<|im_start|>assistant\n";
}

// Python's str.strip / lstrip / rstrip of one character set, as the Jinja template calls them.
std::string_view lstrip(std::string_view s, std::string_view chars) {
  const size_t b = s.find_first_not_of(chars);
  return b == std::string_view::npos ? std::string_view{} : s.substr(b);
}
std::string_view rstrip(std::string_view s, std::string_view chars) {
  const size_t e = s.find_last_not_of(chars);
  return e == std::string_view::npos ? std::string_view{} : s.substr(0, e + 1);
}

// Qwen3's template without tools (tokenizer_config.json of Qwen/Qwen3-*; PROTOCOL.md has no
// tool messages): a system message first is a system turn like any other; assistant turns are
// split at "</think>" into reasoning and answer.
void apply_qwen3(std::span<const chat_message> msgs, const chat_template_options& opts,
                 std::string& out) {
  size_t last_query = msgs.size() - 1;
  for (size_t i = msgs.size(); i-- > 0;) {
    if (msgs[i].role == "user") {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const chat_message& m = msgs[i];
    if (m.role != "assistant") {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
      // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
      std::string_view before = rstrip(content.substr(0, close), "\n");
      if (const size_t open = before.rfind("<think>"); open != std::string_view::npos)
        before = before.substr(open + 7);
      reasoning = lstrip(before, "\n");
      // content.split('</think>')[-1].lstrip('\n')
      content = lstrip(content.substr(content.rfind("</think>") + 8), "\n");
    }
    out.append("<|im_start|>assistant\n");
    if (i > last_query && (i + 1 == msgs.size() || !reasoning.empty())) {
      out.append("<think>\n").append(rstrip(lstrip(reasoning, "\n"), "\n"));
      out.append("\n</think>\n\n").append(lstrip(content, "\n"));
    } else {
      out.append(content);
    }
    out.append("<|im_end|>\n");
  }
  out += "<|im_start|>assistant\n";
  if (!opts.enable_thinking) out += "<think>\n\n</think>\n\n";
}

void apply_mistral_v7(std::span<const chat_message> msgs, std::string& out) {
  for (const auto& m : msgs) {
    if (m.role == "system") {
      out += "[SYSTEM_PROMPT] " + m.content + "[/SYSTEM_PROMPT]";
    } else if (m.role == "user") {
      out += "[INST] " + m.content + "[/INST]";
    } else {
      out += " " + m.content + "</s>";
    }
  }
}

// v1, v3 and v3-tekken differ only in spaces and in trimming the assistant's text.
void apply_mistral(chat_template t, std::span<const chat_message> msgs, std::string& out) {
  const std::string_view leading = t == chat_template::mistral_v1 ? " " : "";
  const std::string_view trailing = t == chat_template::mistral_v3_tekken ? "" : " ";
  const bool trim_assistant = t == chat_template::mistral_v3;
  bool inside_turn = false;
  for (const auto& m : msgs) {
    if (!inside_turn) {
      out.append(leading).append("[INST]").append(trailing);
      inside_turn = true;
    }
    if (m.role == "system") {
      out.append(m.content).append("\n\n");
    } else if (m.role == "user") {
      out.append(m.content).append(leading).append("[/INST]");
    } else {
      out.append(trailing).append(trim_assistant ? trim(m.content) : m.content).append("</s>");
      inside_turn = false;
    }
  }
}

void apply_llama2(chat_template t, std::span<const chat_message> msgs, std::string& out) {
  const bool system_block = t != chat_template::llama2;
  const bool bos_inside_history = t == chat_template::llama2_sys_bos;
  const bool strip = t == chat_template::llama2_sys_strip;
  bool inside_turn = true;  // the first [INST] is written here, without BOS (the tokenizer's)
  out += "[INST] ";
  for (const auto& m : msgs) {
    const std::string_view content = strip ? trim(m.content) : std::string_view(m.content);
    if (!inside_turn) {
      inside_turn = true;
      out += bos_inside_history ? "<s>[INST] " : "[INST] ";
    }
    if (m.role == "system") {
      if (system_block) {
        out.append("<<SYS>>\n").append(content).append("\n<</SYS>>\n\n");
      } else {
        out.append(content).append("\n");
      }
    } else if (m.role == "user") {
      out.append(content).append(" [/INST]");
    } else {
      out.append(content).append("</s>");
      inside_turn = false;
    }
  }
}

void apply_phi3(std::span<const chat_message> msgs, std::string& out) {
  for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  out += "<|assistant|>\n";
}

void apply_phi4(std::span<const chat_message> msgs, std::string& out) {
  for (const auto& m : msgs)
    out += "<|im_start|>" + m.role + "<|im_sep|>" + m.content + "<|im_end|>";
  out += "<|im_start|>assistant<|im_sep|>";
}

void apply_gemma(std::span<const chat_message> msgs, std::string& out) {
  // Gemma has no system turn: the system text starts the next user turn.
  std::string_view system;
  for (const auto& m : msgs) {
    if (m.role == "system") {
      system = trim(m.content);
      continue;
    }
    const bool model = m.role == "assistant";
    out.append("<start_of_turn>").append(model ? "model" : m.role).append("\n");
    if (!system.empty() && !model) {
      out.append(system).append("\n\n");
      system = {};
    }
    out.append(trim(m.content)).append("<end_of_turn>\n");
  }
  out += "<start_of_turn>model\n";
}

void apply_llama3(std::span<const chat_message> msgs, std::string& out) {
  for (const auto& m : msgs) {
    out.append("<|start_header_id|>").append(m.role).append("<|end_header_id|>\n\n");
    out.append(trim(m.content)).append("<|eot_id|>");
  }
  out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

}  // namespace

std::string_view chat_template_name(chat_template t) {
  for (const auto& [tmpl, name] : k_names)
    if (tmpl == t) return name;
  return "unknown";
}

std::string chat_template_names() {
  std::string out;
  for (const auto& [tmpl, name] : k_names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

result<chat_template> chat_template_from_name(std::string_view name) {
  for (const auto& [tmpl, n] : k_names)
    if (n == name) return tmpl;
  return error{"unknown chat template '" + std::string(name) +
               "' (known: " + chat_template_names() + ")"};
}

result<chat_template> chat_template_detect(std::string_view jinja) {
  // As llama.cpp, a template that is just a name is that template.
  if (auto named = chat_template_from_name(jinja); named) return named;
  const detection d = detect(jinja);
  if (d.found) return d.tmpl;
  if (!d.other.empty()) {
    return error{"the chat template looks like llama.cpp's '" + std::string(d.other) +
                 "' format, which hearth does not support (templates that can be named: " +
                 chat_template_names() + ")"};
  }
  return error{"the chat template was not recognised (templates that can be named: " +
               chat_template_names() + ")"};
}

result<chat_template_choice> chat_template_for_model(const gguf_file& f, std::string_view name,
                                                     chat_template_problem* why) {
  auto fail = [&](chat_template_problem p, error e) {
    if (why) *why = p;
    return e;
  };
  if (!name.empty()) {
    auto t = chat_template_from_name(name);
    if (!t) return fail(chat_template_problem::unknown_name, t.err());
    return chat_template_choice{*t, false};
  }
  auto text = f.get_string(chat_template_key);
  if (!text) return fail(chat_template_problem::unreadable, text.err());
  if (!text->has_value() || (*text)->empty()) {
    return fail(chat_template_problem::missing,
                error{"the model has no chat template (no " + std::string(chat_template_key) +
                      " in its metadata)"});
  }
  auto t = chat_template_detect(**text);
  if (!t) return fail(chat_template_problem::unrecognised, t.err());
  return chat_template_choice{*t, true};
}

result<void> chat_messages_check(std::span<const chat_message> messages) {
  if (messages.empty()) return error{"the conversation has no messages"};
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant") return error{role_error(i, r)};
  }
  return {};
}

bool chat_template_thinks(chat_template t) {
  return t == chat_template::qwen3;
}

result<std::string> chat_template_apply(chat_template t, std::span<const chat_message> messages,
                                        const chat_template_options& opts) {
  if (auto ok = chat_messages_check(messages); !ok) return ok.err();
  std::string out;
  switch (t) {
    case chat_template::chatml:
      apply_chatml(messages, out);
      break;
    case chat_template::qwen3:
      apply_qwen3(messages, opts, out);
      break;
    case chat_template::mistral_v7:
      apply_mistral_v7(messages, out);
      break;
    case chat_template::mistral_v1:
    case chat_template::mistral_v3:
    case chat_template::mistral_v3_tekken:
      apply_mistral(t, messages, out);
      break;
    case chat_template::llama2:
    case chat_template::llama2_sys:
    case chat_template::llama2_sys_bos:
    case chat_template::llama2_sys_strip:
      apply_llama2(t, messages, out);
      break;
    case chat_template::phi3:
      apply_phi3(messages, out);
      break;
    case chat_template::phi4:
      apply_phi4(messages, out);
      break;
    case chat_template::gemma:
      apply_gemma(messages, out);
      break;
    case chat_template::llama3:
      apply_llama3(messages, out);
      break;
  }
  return out;
}

}  // namespace hearth
