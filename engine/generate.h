// Generating a continuation for one sequence of a context alone: the prompt in one batch, then
// one token per forward pass, a loop over one engine/sequence.h (which samples, streams and says
// when it ends: an end-of-generation token, the token limit, a stop string, a full context).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/context.h"
#include "engine/sampler.h"
#include "engine/sequence.h"

namespace hearth {

struct generate_params {
  int32_t max_tokens = 128;       // generated tokens at most, >= 1
  std::vector<std::string> stop;  // stop strings: text stops before the first one found
  bool ignore_eog = false;        // keep going past end-of-generation tokens
  int32_t seq = 0;                // sequence of the context to use (cleared first)
};

struct generation {
  std::vector<int32_t> tokens;  // generated tokens (the end-of-generation token excluded)
  std::string text;             // their text, cut before a stop string
  stop_reason reason = stop_reason::max_tokens;
  int32_t n_prompt = 0;
  double prompt_seconds = 0;    // prompt processing, including the first token's logits
  double generate_seconds = 0;  // sampling and decoding the generated tokens
};

// Runs prompt + generation on `ctx` sequence gp.seq. `on_piece` is called once per generated
// token, in order; returning false cancels (reason cancelled). A token after which the streams
// hold text back (generated_piece::holds_back) is passed on with the next token, or at the end
// with what the streams held back appended (an unfinished UTF-8 character as U+FFFD): all the
// text comes with a token. Errors (prompt too long for the context, max_tokens < 1, ...) are
// returned before any token is generated.
result<generation> generate(context& ctx, std::span<const int32_t> prompt, sampler& smp,
                            const generate_params& gp,
                            const std::function<bool(const generated_piece&)>& on_piece);

}  // namespace hearth
