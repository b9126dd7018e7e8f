// libFuzzer target for chat templates (engine/chat/jinja.h): arbitrary bytes as a Jinja template,
// parsed and, when it parses, rendered twice with a small conversation (tools, a tool call and
// its result). A template is a model file's untrusted text: parse and render must return a value
// or an error, never crash, hang or exhaust memory (the renderer's own bounds: output size, work,
// call depth, nesting), and the same program must render the same result again.
#include <cstdint>
#include <string_view>

#include "engine/chat/jinja.h"
#include "fuzz/fuzz-check.h"

namespace {

const nlohmann::ordered_json& context() {
  static const auto ctx = nlohmann::ordered_json::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris? é 😀"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"location": "Paris", "n": 1.5}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
      {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}]
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto program = hearth::jinja::parse(source);
  if (!program) {
    FUZZ_CHECK(!program.message().empty());
    return 0;
  }
  hearth::jinja::render_options opts;
  opts.now = std::chrono::system_clock::time_point(std::chrono::seconds(1'796'117'400));
  auto first = hearth::jinja::render(**program, context(), opts);
  auto second = hearth::jinja::render(**program, context(), opts);
  FUZZ_CHECK(first.ok() == second.ok());
  if (first.ok()) {
    FUZZ_CHECK(*first == *second);
    FUZZ_CHECK(first->size() <= (16u << 20));
  } else {
    FUZZ_CHECK(!first.message().empty());
  }
  return 0;
}
