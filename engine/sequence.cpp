#include "engine/sequence.h"

#include <cassert>
#include <stdexcept>

namespace hearth {

std::string_view stop_reason_name(stop_reason r) {
  switch (r) {
    case stop_reason::end_of_generation:
      return "end_of_generation";
    case stop_reason::max_tokens:
      return "max_tokens";
    case stop_reason::stop_string:
      return "stop_string";
    case stop_reason::cancelled:
      return "cancelled";
    case stop_reason::context_full:
      return "context_full";
  }
  return "unknown";
}

sequence::sequence(const vocab& voc, sampler& smp, std::vector<int32_t> prompt, sequence_params p)
    : voc_(voc),
      smp_(smp),
      prompt_(std::move(prompt)),
      params_(std::move(p)),
      stops_(params_.stop) {
  if (prompt_.empty()) throw std::invalid_argument("the prompt is empty (no tokens)");
  if (params_.max_tokens < 1) {
    throw std::invalid_argument(param_error("max_tokens", ">= 1", params_.max_tokens));
  }
  if (params_.n_past < 0) {
    throw std::invalid_argument(param_error("n_past", ">= 0", params_.n_past));
  }
  n_cells_ = params_.n_past;
}

void sequence::append_batch(std::vector<batch_token>& batch) const {
  assert(!done_);
  if (!prompt_decoded()) {
    const int32_t n = n_prompt();
    for (int32_t i = 0; i < n; ++i)
      batch.push_back({prompt_[size_t(i)], params_.n_past + i, params_.seq, i + 1 == n});
  } else {
    batch.push_back({next_token_, n_cells_, params_.seq, true});
  }
}

void sequence::decoded() {
  if (!prompt_decoded()) {
    for (int32_t t : prompt_) smp_.accept(t);
    n_cells_ = params_.n_past + n_prompt();
    prompt_done_ = true;
  } else {
    ++n_cells_;
  }
}

void sequence::prompt_copied() {
  assert(!prompt_done_);
  decoded();
}

std::optional<generated_piece> sequence::step(const float* logits) {
  assert(!done_ && prompt_decoded());
  // A grammar finishes its document within the token limit (engine/sampler.h).
  smp_.set_grammar_tokens_left(params_.max_tokens - n_generated_);
  const int32_t tok = smp_.sample(logits);
  smp_.accept(tok);
  if (!params_.ignore_eog && voc_.is_eog(tok)) {
    end(stop_reason::end_of_generation);
    return std::nullopt;
  }
  ++n_generated_;
  next_token_ = tok;
  std::string text = stops_.push(utf8_.push(voc_.token_to_piece(tok, false)));
  if (stops_.stopped()) {
    end(stop_reason::stop_string);
  } else if (n_generated_ >= params_.max_tokens) {
    end(stop_reason::max_tokens);
  } else if (n_cells_ >= params_.n_ctx) {
    end(stop_reason::context_full);
  }
  return generated_piece{tok, std::move(text), utf8_.holds_back() || stops_.holds_back()};
}

void sequence::cancel() {
  end(stop_reason::cancelled);
}

std::string sequence::finish() {
  assert(done_);
  if (reason_ == stop_reason::stop_string || reason_ == stop_reason::cancelled) return {};
  std::string rest = stops_.push(utf8_.flush());
  rest += stops_.stopped() ? "" : stops_.flush();
  if (stops_.stopped()) reason_ = stop_reason::stop_string;
  return rest;
}

}  // namespace hearth
