#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "engine/utf8-stream.h"

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

std::string stop_string_filter::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  size_t first = std::string::npos;
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    first = std::min(first, held_.find(s));
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string stop_string_filter::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

result<generation> generate(context& ctx, std::span<const int32_t> prompt, sampler& smp,
                            const generate_params& gp,
                            const std::function<bool(const generated_piece&)>& on_piece) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) return error{"the prompt is empty (no tokens)"};
  if (gp.max_tokens < 0) return error{"max_tokens must not be negative"};
  const int32_t seq = gp.seq;
  ctx.seq_clear(seq);
  if (int64_t(prompt.size()) > ctx.n_free()) {
    return error{"the prompt has " + std::to_string(prompt.size()) +
                 " tokens but the context has room for " + std::to_string(ctx.n_free()) +
                 " (use a larger --ctx or a shorter prompt)"};
  }

  const vocab& voc = ctx.model().vocab();
  generation g;
  g.n_prompt = int32_t(prompt.size());

  const auto t0 = clock::now();
  std::vector<batch_token> batch(prompt.size());
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch[i] = {prompt[i], int32_t(i), seq, i + 1 == prompt.size()};
  }
  if (auto r = ctx.decode(batch); !r) return r.err();
  for (int32_t t : prompt) smp.accept(t);
  const auto t1 = clock::now();
  g.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();

  utf8_stream utf8;
  stop_string_filter stops(gp.stop);
  int32_t pos = int32_t(prompt.size());
  g.reason = stop_reason::max_tokens;
  for (int32_t n = 0; n < gp.max_tokens; ++n) {
    const int32_t tok = smp.sample(ctx.logits(0));
    smp.accept(tok);
    if (!gp.ignore_eog && voc.is_eog(tok)) {
      g.reason = stop_reason::end_of_generation;
      break;
    }
    g.tokens.push_back(tok);
    std::string text = stops.push(utf8.push(voc.token_to_piece(tok, false)));
    g.text += text;
    if (on_piece && !on_piece({tok, std::move(text)})) {
      g.reason = stop_reason::cancelled;
      break;
    }
    if (stops.stopped()) {
      g.reason = stop_reason::stop_string;
      break;
    }
    if (n + 1 == gp.max_tokens) break;
    if (ctx.n_free() == 0) {
      g.reason = stop_reason::context_full;
      break;
    }
    const batch_token next{tok, pos++, seq, true};
    if (auto r = ctx.decode({&next, 1}); !r) return r.err();
  }
  if (g.reason != stop_reason::stop_string && g.reason != stop_reason::cancelled) {
    std::string rest = stops.push(utf8.flush());
    rest += stops.stopped() ? "" : stops.flush();
    if (stops.stopped()) g.reason = stop_reason::stop_string;
    if (!rest.empty()) {
      g.text += rest;
      if (on_piece) on_piece({-1, std::move(rest)});
    }
  }
  g.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return g;
}

}  // namespace hearth
