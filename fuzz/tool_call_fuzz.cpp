// libFuzzer target for tool calls in model output (engine/chat/tool-calls.h): the first byte picks
// one of five formats (one per shape, and Llama 3.x's bare object), the second how the rest is cut
// into streamed pieces. Model output is untrusted: the parser must never crash or hold more than
// its bound, must give every byte back as content when it finds no call, must find the same
// calls and content whatever the cut, and every call's arguments must be a JSON object.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "engine/chat/tool-calls.h"
#include "fuzz/fuzz-check.h"

namespace {

using hearth::tool_call_format;
using hearth::tool_call_shape;

tool_call_format format(uint8_t pick) {
  tool_call_format f;
  switch (pick % 5) {
    case 0:  // Hermes / Qwen
      f.shape = tool_call_shape::json_object;
      f.call_open = "<tool_call>\n";
      f.call_close = "\n</tool_call>";
      f.call_sep = "\n";
      f.name_key = "name";
      f.args_key = "arguments";
      f.trigger = "<tool_call>";
      break;
    case 1:  // Mistral Nemo
      f.shape = tool_call_shape::json_array;
      f.section_open = "[TOOL_CALLS]";
      f.name_key = "name";
      f.args_key = "arguments";
      f.trigger = "[TOOL_CALLS]";
      break;
    case 2:  // Mistral Small 3.2
      f.shape = tool_call_shape::name_args;
      f.call_open = "[TOOL_CALLS]";
      f.name_to_args = "[CALL_ID]";
      f.has_id = true;
      f.args_after_id = "[ARGS]";
      f.trigger = "[TOOL_CALLS]";
      break;
    case 3:  // GLM
      f.shape = tool_call_shape::name_params;
      f.call_open = "\n<tool_call>";
      f.call_close = "</arg_value>\n</tool_call>";
      f.param_first = "\n<arg_key>";
      f.param_key_to_value = "</arg_key>\n<arg_value>";
      f.param_next = "</arg_value>\n<arg_key>";
      f.name_no_params = "\n</tool_call>";
      f.trigger = "<tool_call>";
      break;
    default:  // Llama 3.x: a bare object at the start
      f.shape = tool_call_shape::json_object;
      f.name_key = "name";
      f.args_key = "parameters";
      f.trigger_at_start = true;
      break;
  }
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const tool_call_format f = format(data[0]);
  const size_t cut = 1 + data[1] % 13;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);

  const auto whole = hearth::tool_calls_parse(f, text);
  hearth::tool_call_parser p(f);
  hearth::tool_call_parser::piece streamed;
  for (size_t i = 0; i < text.size(); i += cut) {
    auto piece = p.feed(text.substr(i, cut));
    streamed.content += piece.content;
    for (auto& c : piece.calls) streamed.calls.push_back(std::move(c));
  }
  auto end = p.finish();
  streamed.content += end.content;
  for (auto& c : end.calls) streamed.calls.push_back(std::move(c));

  FUZZ_CHECK(streamed.content == whole.content);
  FUZZ_CHECK(streamed.calls.size() == whole.calls.size());
  if (whole.calls.empty()) FUZZ_CHECK(whole.content == text);
  FUZZ_CHECK(whole.content.size() <= text.size());
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    FUZZ_CHECK(whole.calls[i].name == streamed.calls[i].name);
    FUZZ_CHECK(whole.calls[i].arguments == streamed.calls[i].arguments);
    auto args = nlohmann::json::parse(whole.calls[i].arguments, nullptr, false);
    FUZZ_CHECK(args.is_object());
  }
  return 0;
}
