// A batch's input file (JSONL, one request per line) checked as OpenAI checks it when a batch is
// created: each line an object {"custom_id", "method": "POST", "url", "body": {...}}, the url the
// batch's endpoint, custom_ids unique, the number of lines bounded. Every problem becomes an
// entry of the batch's `errors` list (code, message, param, 1-based line), as OpenAI reports
// them. Whether each body is a request the endpoint takes is parse_openai_request's to say (the
// batch service asks it for each line).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::gateway {

// At most this many lines in one batch (OpenAI's limit).
inline constexpr uint32_t batch_max_lines = 50000;
// A custom_id is at most this long.
inline constexpr uint32_t batch_max_custom_id_bytes = 512;
// Validation stops after this many errors (the list stays readable and bounded).
inline constexpr uint32_t batch_max_errors = 100;

struct batch_input_line {
  uint32_t index = 0;  // 0-based, blank lines not counted
  uint32_t line = 0;   // 1-based line of the file, for errors
  std::string custom_id;
  std::string body;  // the "body" object, as JSON
};

struct batch_input_error {
  std::string code;  // "invalid_json_line", "duplicate_custom_id", "invalid_url", ...
  std::string message;
  std::string param;  // "" = null
  uint32_t line = 0;  // 1-based; 0 = the whole file
};

struct batch_input {
  std::vector<batch_input_line> lines;
  std::vector<batch_input_error> errors;  // empty when the file is a valid batch
};

// Reads `content` for a batch of `endpoint` ("/v1/chat/completions" or "/v1/completions").
batch_input batch_input_parse(std::string_view content, std::string_view endpoint,
                              uint32_t max_lines = batch_max_lines);

// OpenAI's `errors` object of a batch: {"object": "list", "data": [{code, message, param, line}]}.
std::string batch_input_errors_json(const std::vector<batch_input_error>& errors);

}  // namespace hearth::gateway
