// The Jinja engine for chat templates: renders a model's tokenizer.chat_template exactly as Hugging
// Face transformers' apply_chat_template does (jinja2 3.1, ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loopcontrols; tojson as json.dumps with ensure_ascii=False;
// raise_exception; strftime_now). Templates are untrusted input: parsing and rendering bound their
// depth, output size and work and return an error, never throw or crash.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hearth::jinja {

struct render_options {
  // strftime_now's instant; nullopt = the system clock now (local time as Python's datetime.now()).
  std::optional<std::chrono::system_clock::time_point> now;
};

// "2026-12-01T09:30[:SS]" as local time (Python's naive datetime), for render_options::now: a
// fixed clock for tests and `hearth chat-template render --now`. An error for other text.
result<std::chrono::system_clock::time_point> parse_local_time(std::string_view iso);

// A parsed template: immutable, shared by every render of the model's chats (thread-safe to render
// concurrently).
class chat_template_program;

// Parses a template; a syntax error is an error "TemplateSyntaxError: ... (line N)".
result<std::shared_ptr<const chat_template_program>> parse(std::string_view source);

// Renders with `context` (a JSON object: every key a variable). Errors: the template's own
// raise_exception message as is (e.g. "Conversation roles must alternate user/assistant/..."), else
// "<jinja2 error class>: detail" (UndefinedError, TypeError, SecurityError, ...).
result<std::string> render(const chat_template_program& t, const nlohmann::ordered_json& context,
                           const render_options& opts = {});

}  // namespace hearth::jinja
