// stage_batch on the wire (schema/PROTOCOL.md 17.2): the header (schema/messages.h) and, as a
// fourth frame, the hidden rows it carries, encoded by engine/io/hidden-state.h. What another node
// sends is checked whole before a stage computes anything with it: the token lists agree in
// length and stay within max_stage_tokens, the rows frame is there exactly when hidden_type says,
// is exactly as long as the rows it claims, within max_stage_rows_bytes, and finite.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/context.h"
#include "schema/messages.h"

namespace hearth::node {

// The largest n_embd a stage takes rows of (a 405B model has 16384).
inline constexpr uint32_t max_stage_embd = 65536;

struct stage_message {
  wire::stage_batch batch;
  std::vector<float> rows;  // batch.tokens.size() rows of batch.n_embd; empty without rows
};

// A stage_batch from its frames [signature][command][body][rows?] (a ROUTER's routing id removed).
result<stage_message> stage_message_read(std::span<const std::string_view> frames);
// The same in two steps, so that a receiver can decide on the header (who may send this step)
// before it decodes any rows: the header, checked whole (the rows frame's presence and exact
// size included), then its rows decoded.
result<wire::stage_batch> stage_header_read(std::span<const std::string_view> frames);
result<stage_message> stage_rows_read(wire::stage_batch header,
                                      std::span<const std::string_view> frames);

// The rows of `batch` encoded as `hidden_type` names ("f32", "f16", "q8_0"), or an error (an
// unknown type, rows Q8_0 cannot hold).
result<std::string> stage_rows_encode(std::string_view hidden_type, std::span<const float> rows,
                                      uint32_t n_embd);

// The step's tokens as the engine takes them.
std::vector<batch_token> stage_tokens(const wire::stage_batch& b);
// And the other way.
void stage_tokens_set(wire::stage_batch& b, std::span<const batch_token> tokens);

}  // namespace hearth::node
