// One running generation on one sequence id of a context: its prompt, sampler, text streams
// (whole UTF-8 characters; text that may start a stop string held back), token limit and end.
// Callers own the context and its forward passes: generate() runs one sequence alone, the node's
// batch engine decodes many in one batch, `hearth bench` decodes S together. All of them take
// their tokens, their text and their end from here, so the same prompt, parameters and seed give
// the same tokens wherever they run.
//
// Life of a sequence:
//   append_batch() (the prompt), decode, decoded();
//   then per token: step(logits of its last batch row); while !done(): append_batch() (the token
//   just sampled), decode, decoded(), step() ...
//   and at the end finish(): the text the streams still hold back.
//
// The end rule, one for every caller; after each sampled token, in this order:
//   1. an end-of-generation token (unless ignore_eog) ends it; it is not a generated token;
//   2. else the token is generated and its text streamed, and a completed stop string ends it;
//   3. the token limit: it ends once max_tokens tokens were generated (the last one is not
//      decoded). max_tokens >= 1, so the limit is checked after sampling, never before, and
//      every sequence samples at least once;
//   4. a full context: it ends when it holds n_ctx cells and has no room to decode its token.
// cancel() ends it at any point, over any other reason.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/context.h"
#include "engine/sampler.h"
#include "engine/stop-string-filter.h"
#include "engine/tokenizer/utf8-stream.h"
#include "engine/tokenizer/vocab.h"

namespace hearth {

enum class stop_reason { end_of_generation, max_tokens, stop_string, cancelled, context_full };

std::string_view stop_reason_name(stop_reason r);

// One step of streaming: the token just sampled and the text it makes printable now. `text`
// may be empty (an incomplete UTF-8 character, or text that might start a stop string).
// `holds_back`: the streams hold text back after this token, so if no other token is generated,
// finish()'s text (an unfinished character as U+FFFD, a stop string's possible start) is this
// token's. A caller whose every text must come with a token (a node's chunks, PROTOCOL.md
// section 11) holds such a piece back until the next piece or the end; generate() does.
struct generated_piece {
  int32_t token;
  std::string text;
  bool holds_back = false;
};

struct sequence_params {
  int32_t seq = 0;                // sequence id in the context
  int32_t max_tokens = 128;       // generated tokens at most, >= 1
  std::vector<std::string> stop;  // stop strings: text stops before the first one found
  bool ignore_eog = false;        // keep going past end-of-generation tokens
  int32_t n_ctx = 0;              // cells the sequence may hold, prompt included
  // Cells the context already holds for this sequence (positions 0..n_past-1, a prefix decoded
  // earlier): the prompt continues at position n_past. They count towards n_ctx.
  int32_t n_past = 0;
};

class sequence {
 public:
  // `smp` must outlive the sequence; it is used as it is (its history and random state go on).
  // Throws std::invalid_argument for an empty prompt or max_tokens < 1.
  sequence(const vocab& voc, sampler& smp, std::vector<int32_t> prompt, sequence_params p);

  // Appends what the next decode computes for this sequence: the whole prompt (logits for its
  // last token only), or the token sampled last. Not after done().
  void append_batch(std::vector<batch_token>& batch) const;
  // The batch of append_batch() was decoded: the prompt's tokens go into the sampler's penalty
  // history (the first time), the cells held grow.
  void decoded();
  // Instead of append_batch() and decoded() for the prompt: the context got this sequence's
  // prompt cells by a copy from another sequence that decoded the same prompt at the same
  // positions (context::seq_copy), so it continues from them; it then samples from that
  // sequence's prompt logits.
  void prompt_copied();

  // Samples the next token from `logits` (F32 [n_vocab], this sequence's row of the last
  // decode), accepts it, and applies the end rule. Returns the generated token and the text to
  // stream now; nothing when the token ended generation without being generated.
  std::optional<generated_piece> step(const float* logits);

  // Ends the generation now, as cancelled.
  void cancel();

  // Once done(): the text the streams still hold back (an incomplete UTF-8 character, a possible
  // stop string's start), to stream last; "" after a stop string or cancel. Completing a stop
  // string with it makes the reason stop_string.
  std::string finish();

  bool done() const { return done_; }
  stop_reason reason() const { return reason_; }
  bool prompt_decoded() const { return prompt_done_; }
  int32_t seq() const { return params_.seq; }
  int32_t n_prompt() const { return int32_t(prompt_.size()); }
  int32_t n_generated() const { return n_generated_; }

 private:
  void end(stop_reason r) {
    done_ = true;
    reason_ = r;
  }

  const vocab& voc_;
  sampler& smp_;
  std::vector<int32_t> prompt_;
  sequence_params params_;
  utf8_stream utf8_;
  stop_string_filter stops_;

  int32_t n_cells_ = 0;      // cells the sequence holds: the position of the next token
  int32_t next_token_ = -1;  // sampled, not yet decoded
  int32_t n_generated_ = 0;
  bool prompt_done_ = false;
  bool done_ = false;
  stop_reason reason_ = stop_reason::max_tokens;
};

}  // namespace hearth
