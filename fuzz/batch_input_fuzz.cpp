// libFuzzer target for batch_input_parse (gateway/batch-input.cpp): a batch's JSONL input file,
// uploaded by a client. Every input gives lines or errors (at least one of them); lines
// are numbered in order with unique custom_ids and bodies that are JSON objects; errors are
// bounded, point at a line of the file, and serialize as OpenAI's errors object.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "fuzz/fuzz-check.h"
#include "gateway/batch-input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::gateway;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const uint32_t file_lines = uint32_t(std::count(text.begin(), text.end(), '\n')) + 1;
  batch_input in = batch_input_parse(text, "/v1/chat/completions", 64);
  FUZZ_CHECK(!(in.lines.empty() && in.errors.empty()));
  FUZZ_CHECK(in.lines.size() <= 64);
  FUZZ_CHECK(in.errors.size() <= batch_max_errors);
  std::set<std::string> ids;
  for (size_t i = 0; i < in.lines.size(); ++i) {
    const batch_input_line& l = in.lines[i];
    FUZZ_CHECK(l.index == i);
    FUZZ_CHECK(l.line >= 1 && l.line <= file_lines);
    FUZZ_CHECK(!l.custom_id.empty() && l.custom_id.size() <= batch_max_custom_id_bytes);
    FUZZ_CHECK(ids.insert(l.custom_id).second);
    FUZZ_CHECK(nlohmann::json::parse(l.body, nullptr, false).is_object());
  }
  for (const batch_input_error& e : in.errors) {
    FUZZ_CHECK(!e.code.empty() && !e.message.empty());
    FUZZ_CHECK(e.line <= file_lines);
  }
  auto j = nlohmann::json::parse(batch_input_errors_json(in.errors), nullptr, false);
  FUZZ_CHECK(j.is_object() && j["data"].size() == in.errors.size());
  return 0;
}
