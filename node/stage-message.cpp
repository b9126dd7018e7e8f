#include "node/stage-message.h"

#include "engine/io/hidden-state.h"
#include "schema/codec.h"

namespace hearth::node {

result<stage_message> stage_message_read(std::span<const std::string_view> frames) {
  auto head = stage_header_read(frames);
  if (!head) return head.err();
  return stage_rows_read(std::move(*head), frames);
}

result<wire::stage_batch> stage_header_read(std::span<const std::string_view> frames) {
  if (frames.size() != 3 && frames.size() != 4)
    return error{"a stage_batch has 3 or 4 frames, not " + std::to_string(frames.size())};
  const auto env = wire::open_envelope(frames.first(3));
  if (!env.ok) return error{env.err.message};
  if (env.env.cmd != wire::command::stage_batch) {
    return error{"the stage socket takes stage_batch only, not " +
                 std::string(wire::command_name(env.env.cmd))};
  }
  auto b = wire::decode<wire::stage_batch>(env.env.body);
  if (!b) return error{b.message()};
  const size_t n = b->tokens.size();
  if (b->pos.size() != n || b->seqs.size() != n || b->logits.size() != n)
    return error{"stage_batch: tokens, pos, seqs and logits differ in length"};
  if (n > wire::max_stage_tokens) {
    return error{"stage_batch: " + std::to_string(n) + " tokens, more than " +
                 std::to_string(wire::max_stage_tokens)};
  }
  const bool has_rows = !b->hidden_type.empty();
  if (has_rows != (frames.size() == 4))
    return error{"stage_batch: a rows frame goes with hidden_type, and only with it"};
  if (!has_rows) return b;
  const auto enc = hidden_encoding_from_name(b->hidden_type);
  if (!enc) return error{"stage_batch: unknown hidden_type '" + b->hidden_type + "'"};
  const uint32_t n_embd = b->n_embd;
  if (n_embd == 0 || n_embd > max_stage_embd)
    return error{"stage_batch: n_embd " + std::to_string(n_embd) + " is out of range"};
  const uint64_t want = hidden_bytes(*enc, n_embd, int64_t(n));
  if (want == 0 || want > wire::max_stage_rows_bytes || frames[3].size() != want) {
    return error{"stage_batch: a rows frame of " + std::to_string(frames[3].size()) +
                 " bytes for " + std::to_string(n) + " rows of " + std::to_string(n_embd) + " " +
                 b->hidden_type + " values (" + std::to_string(want) + " bytes)"};
  }
  return b;
}

result<stage_message> stage_rows_read(wire::stage_batch header,
                                      std::span<const std::string_view> frames) {
  stage_message out{std::move(header), {}};
  if (out.batch.hidden_type.empty()) return out;
  // stage_header_read checked the type and the frame's size.
  const auto enc = hidden_encoding_from_name(out.batch.hidden_type);
  const uint32_t n_embd = out.batch.n_embd;
  out.rows.resize(out.batch.tokens.size() * n_embd);
  const auto* p = reinterpret_cast<const uint8_t*>(frames[3].data());
  if (auto r = hidden_decode(*enc, {p, frames[3].size()}, n_embd, out.rows); !r)
    return error{"stage_batch: " + r.message()};
  return out;
}

result<std::string> stage_rows_encode(std::string_view hidden_type, std::span<const float> rows,
                                      uint32_t n_embd) {
  const auto enc = hidden_encoding_from_name(hidden_type);
  if (!enc) return error{"unknown hidden_type '" + std::string(hidden_type) + "'"};
  if (n_embd == 0 || rows.size() % n_embd != 0 ||
      hidden_bytes(*enc, n_embd, int64_t(rows.size() / n_embd)) == 0) {
    return error{"rows of " + std::to_string(n_embd) + " values cannot be sent as " +
                 std::string(hidden_type)};
  }
  const std::vector<uint8_t> bytes = hidden_encode(*enc, rows, n_embd);
  return std::string(bytes.begin(), bytes.end());
}

std::vector<batch_token> stage_tokens(const wire::stage_batch& b) {
  std::vector<batch_token> out(b.tokens.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = {b.tokens[i], b.pos[i], b.seqs[i], b.logits[i] != 0};
  return out;
}

void stage_tokens_set(wire::stage_batch& b, std::span<const batch_token> tokens) {
  b.tokens.clear(), b.pos.clear(), b.seqs.clear(), b.logits.clear();
  for (const batch_token& t : tokens) {
    b.tokens.push_back(t.token);
    b.pos.push_back(t.pos);
    b.seqs.push_back(t.seq);
    b.logits.push_back(t.logits ? 1 : 0);
  }
}

}  // namespace hearth::node
