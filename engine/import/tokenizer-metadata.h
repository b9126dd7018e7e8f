// Building tokenizer.ggml.* metadata in memory, for importers that turn another format
// (tokenizer.json, tokenizer.model) into the keys vocab::from_gguf reads; the result goes through
// gguf_file::from_parts. Keys and value types are those llama.cpp's converters write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/io/gguf.h"

namespace hearth {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class gguf_token_type : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

gguf_value gguf_string_value(std::string s);
gguf_value gguf_bool_value(bool b);
gguf_value gguf_u32_value(uint32_t v);
gguf_value gguf_i32_value(int32_t v);
gguf_value gguf_string_array_value(std::vector<std::string> items);
gguf_value gguf_f32_array_value(const std::vector<float>& items);
gguf_value gguf_i32_array_value(const std::vector<int32_t>& items);

}  // namespace hearth
