// What derivation, parsing and grammars of tool calls share (engine/chat/tool-calls.h): matching a
// template's literal text against model output, and finding JSON values inside text. Internal to
// engine/chat.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hearth::tool_call_text {

// Nesting a JSON value in model output may have before it is not a call (nlohmann's parser
// recurses: the bound keeps hostile text from exhausting the stack).
inline constexpr int max_json_depth = 64;

enum class match { ok, more, no };

// Matches `lit` at text[pos]: a run of whitespace in `lit` matches any run of whitespace in the
// text (none included), as models put newlines where their templates do not; every other byte must
// be equal. `more`: the text ends before it can tell (never when `final`). On ok, *end is the
// position after the match (after the whitespace following a literal that ends in whitespace).
match match_literal(std::string_view text, size_t pos, std::string_view lit, bool final,
                    size_t* end);

// The first run of non-whitespace bytes of `lit` ("" when it has none).
std::string_view first_run(std::string_view lit);

// `s` without whitespace at either end.
std::string_view trim(std::string_view s);

bool is_space(char c);
// A byte of a function name (or a key, or an id) as the parser reads one: ASCII letters, digits,
// '_', '-', '.' (OpenAI's function names are [a-zA-Z0-9_-]).
bool is_name_byte(char c);

// The end of the JSON object or array starting at text[pos] ('{' or '['), by brackets outside
// strings: `more` when the text ends first, `no` when it nests deeper than max_json_depth or a
// bracket does not match.
match json_span(std::string_view text, size_t pos, bool final, size_t* end);

// text as JSON, or nothing (never throws).
std::optional<nlohmann::ordered_json> json_parse(std::string_view text);

}  // namespace hearth::tool_call_text
