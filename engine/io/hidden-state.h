// The residual stream between pipeline stages (engine/layer-range.h) as bytes on the wire: rows
// of n_embd values as F32 (exact: a split model computes what the whole model computes), F16
// (half the bytes) or Q8_0 (34 bytes per 32 values, 27% of F32). F16 and Q8_0 trade exactness for
// bytes; what they cost in logits is measured in tests/pipeline_stages_test.cpp. Decoding takes
// bytes from another machine: their length must be exactly the rows', and every value finite.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hearth {

enum class hidden_encoding : uint8_t { f32, f16, q8_0 };

std::string_view hidden_encoding_name(hidden_encoding e);  // "f32", "f16", "q8_0"
std::optional<hidden_encoding> hidden_encoding_from_name(std::string_view name);

// Bytes of n_rows rows of n_embd values; 0 when the encoding cannot hold such rows (Q8_0 needs a
// multiple of 32 values) or the count is absurd.
uint64_t hidden_bytes(hidden_encoding e, int64_t n_embd, int64_t n_rows);

// `rows` (a multiple of n_embd F32 values) encoded; hidden_bytes() must not be 0 for them.
std::vector<uint8_t> hidden_encode(hidden_encoding e, std::span<const float> rows, int64_t n_embd);

// `bytes` decoded into `out` (out.size() / n_embd rows). An error, `out` then unspecified, when
// the length is not exactly those rows' or a value is not finite (a NaN or an infinity would
// spread through every later layer and sequence of the batch).
result<void> hidden_decode(hidden_encoding e, std::span<const uint8_t> bytes, int64_t n_embd,
                           std::span<float> out);

}  // namespace hearth
