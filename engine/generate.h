// Generating a continuation for one sequence of a context: the prompt in batches, then one token
// per forward pass, sampled, streamed as whole UTF-8 characters, until an end-of-generation token,
// the token limit or a stop string.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/context.h"
#include "engine/sampler.h"

namespace hearth {

struct generate_params {
  int32_t max_tokens = 128;       // generated tokens at most
  std::vector<std::string> stop;  // stop strings: text stops before the first one found
  bool ignore_eog = false;        // keep going past end-of-generation tokens
  int32_t seq = 0;                // sequence of the context to use (cleared first)
};

enum class stop_reason { end_of_generation, max_tokens, stop_string, cancelled, context_full };

std::string_view stop_reason_name(stop_reason r);

// One step of streaming: the token just sampled and the text it makes printable now. `text`
// may be empty (an incomplete UTF-8 character, or text that might start a stop string).
struct generated_piece {
  int32_t token;
  std::string text;
};

struct generation {
  std::vector<int32_t> tokens;  // generated tokens (the end-of-generation token excluded)
  std::string text;             // their text, cut before a stop string
  stop_reason reason = stop_reason::max_tokens;
  int32_t n_prompt = 0;
  double prompt_seconds = 0;    // prompt processing, including the first token's logits
  double generate_seconds = 0;  // sampling and decoding the generated tokens
};

// Runs prompt + generation on `ctx` sequence gp.seq. `on_piece` is called per generated token;
// returning false cancels (reason cancelled). Errors (prompt too long for the context, ...) are
// returned before any token is generated.
result<generation> generate(context& ctx, std::span<const int32_t> prompt, sampler& smp,
                            const generate_params& gp,
                            const std::function<bool(const generated_piece&)>& on_piece);

// Holds back streamed text that might be the start of a stop string, and finds stop strings that
// span token boundaries.
class stop_string_filter {
 public:
  explicit stop_string_filter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Adds text; returns what can be shown now. Sets stopped() when a stop string completed (the
  // returned text then ends right before it).
  std::string push(std::string_view text);
  // What is still held back, once generation ended without a stop string.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace hearth
