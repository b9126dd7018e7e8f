// Tool calls in a model's own format: derived from what its chat template writes for an assistant
// message carrying tool calls, parsed back out of the model's output as it streams, and a GBNF
// grammar that makes a model write a valid call (tool_choice "required" or a named function).
//
// Derivation renders probe conversations through the template (engine/chat/jinja.h): an assistant
// message with one call (a distinctive name, two string arguments), with two calls, with a call
// without arguments, and the same turn without calls; the differences locate the call section, the
// name, the arguments and the literal text around them. Every format found in the 31 shared
// templates is one of four shapes, parameterised by those literals:
//   json_object   each call a JSON object naming the function and holding its arguments
//                 (Hermes/Qwen <tool_call>{"name":..,"arguments":..}</tool_call>, Llama 3.x
//                 {"name":..,"parameters":..}, GigaChat, Apertus {"NAME": {...}}), between the
//                 call's own open/close literals
//   json_array    the section one JSON array of such objects (Mistral [TOOL_CALLS][...], Command R
//                 <|START_ACTION|>[...], Nemotron <TOOLCALL>[...], Apriel <tool_calls>[...])
//   name_args     the name, literal text, then the arguments as a JSON object (DeepSeek
//                 <｜tool▁call▁begin｜>, Functionary <function=NAME>{...}, harmony
//                 to=functions.NAME<|channel|>commentary json<|message|>{...}, Kimi, Mistral
//                 [TOOL_CALLS]NAME[ARGS]{...}); an id the template writes in that text is a slot
//   name_params   the name, then each argument as key and value between literals (Qwen3-Coder and
//                 Seed <function=NAME><parameter=K>V</parameter>, GLM and Hy3
//                 <arg_key>/<arg_value>, MiniMax <invoke name=..><parameter name="K">, MiniCPM
//                 <param name="K">, Gemma 4 call:NAME{K:<|"|>V<|"|>}); a string value is written as
//                 is, any other as JSON
// A template that writes nothing for tool calls (or that cannot render them) gives an error saying
// so: such a model is offered tools in its prompt, but its output is not parsed for calls.
//
// Reasoning: the parser expects text after the node's think filter has taken the reasoning out
// (<think>...</think>). For harmony (gpt-oss) the template writes a call as an assistant message
// headed " to=functions.NAME<|channel|>commentary json<|message|>"; the derived trigger is
// "to=functions." and the parser skips the rest of the header up to "<|message|>" (the model
// writes "<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>" too), so the filter
// should pass commentary-channel text on as content, not as reasoning.
//
// All input here (templates, model output, tools JSON) is untrusted: every step is bounded and
// returns an error or gives the text back as content; nothing throws out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hearth {

namespace jinja {
class chat_template_program;
}

enum class tool_call_shape {
  json_object,
  json_array,
  name_args,
  name_params,
};

// "json_object", "json_array", "name_args", "name_params".
const char* tool_call_shape_name(tool_call_shape s);

// The ids a template accepts for tool calls: OpenAI's "call_..." or, where the template refuses
// those (Mistral's: "Tool call IDs should be alphanumeric strings with length 9!"), 9 letters and
// digits.
enum class tool_call_id_style {
  openai,
  alnum9,
};

// A derived tool-call format: the shape and the literal text the template writes around the
// parts of a call. The literals are exactly what the template wrote (whitespace included).
struct tool_call_format {
  tool_call_shape shape = tool_call_shape::json_object;
  std::string section_open;  // before the first call ("<｜tool▁calls▁begin｜>", "[TOOL_CALLS]")
  std::string call_open;     // before each call ("<tool_call>\n", "<function=")
  std::string call_close;    // after each call's arguments (after the last value: name_params)
  std::string call_sep;      // between a call's close and the next call's open
  std::string section_close;  // after the last call
  // json_object / json_array: the keys of a call object; name_key "" = the object's one key is
  // the function's name and its value the arguments (Apertus).
  std::string name_key;
  std::string args_key;
  // name_args: the text between the name and the arguments; with an id (has_id) the text before
  // and after it (name_to_args then ends where the id starts, args_after_id follows it).
  std::string name_to_args;
  bool has_id = false;
  std::string args_after_id;
  // name_params: name -> first key, key -> value, value -> next key, and name -> end of a call
  // without arguments (call_close follows a value).
  std::string param_first;
  std::string param_key_to_value;
  std::string param_next;
  std::string name_no_params;
  // Where a call starts in the output: the literal the parser watches for. When it is empty (Llama
  // 3.x writes the bare object), a call is only recognised at the start of the output.
  std::string trigger;
  bool trigger_at_start = false;
  tool_call_id_style id_style = tool_call_id_style::openai;
  // The template writes several calls in one message (Llama 3.x's refuse: "This model only
  // supports single tool-calls at once!").
  bool parallel_calls = true;
};

// The call's format as `program` writes it. `base_context` holds the variables every render needs
// (bos_token, eos_token; anything else the model's chats pass). Errors: the template does not
// render tool calls ("the template writes no tool calls"), or writes them in a way none of the
// shapes describes (the error says what was seen).
result<tool_call_format> tool_call_format_derive(const jinja::chat_template_program& program,
                                                 const nlohmann::ordered_json& base_context);

// One call parsed out of the model's output. `arguments` is the arguments object re-serialised
// compactly by nlohmann::json (dump(), keys in the order written), which OpenAI clients
// JSON.parse; a name_params value is a JSON value where the text is one (and the tool's schema
// does not say string), else a string.
struct parsed_tool_call {
  std::string name;
  std::string arguments;
};

// Splits streamed model output into content and complete tool calls. Text that may be the start
// of a call is held back (as a stop-string filter holds back a possible stop string) until it is
// surely content or a whole call; text that looked like a call but does not parse is given back
// as content, never lost. A call section is held in memory up to tool_call_max_section bytes; past
// that it is content.
inline constexpr size_t tool_call_max_section = 256 * 1024;

class tool_call_parser {
 public:
  struct piece {
    std::string content;
    std::vector<parsed_tool_call> calls;
  };

  // `tools_json`: the request's OpenAI tools array ("" none); name_params values are typed by
  // their parameter's schema when it is given.
  explicit tool_call_parser(const tool_call_format& format, std::string_view tools_json = {});

  piece feed(std::string_view text);
  // The end of the output: what is held back is resolved (a call whose section is not closed but
  // whose arguments are complete is a call; anything else is content).
  piece finish();

 private:
  struct state;
  std::shared_ptr<state> s_;
};

// Parses a whole output at once (feed + finish).
tool_call_parser::piece tool_calls_parse(const tool_call_format& format, std::string_view text,
                                         std::string_view tools_json = {});

// The n-th id (0-based) of a response's calls in `style`: "call_" + 24 letters and digits, or 9
// letters and digits; random, except that the same (n, seed) gives the same id.
std::string tool_call_id(size_t n, tool_call_id_style style, uint64_t seed);

// A GBNF grammar (engine/grammar/grammar.h) that accepts exactly a call in `format` of the
// function named `choice`, or of any function of `tools_json` when choice is "required", whose
// arguments validate against that function's `parameters` schema; several calls when `parallel`.
// Errors: a named function not in tools, tools not an array of functions, a schema the JSON Schema
// compiler refuses.
result<std::string> tool_call_gbnf(const tool_call_format& format, std::string_view tools_json,
                                   std::string_view choice, bool parallel);

}  // namespace hearth
