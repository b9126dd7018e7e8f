#include "engine/generate.h"

#include <chrono>

namespace hearth {

result<generation> generate(context& ctx, std::span<const int32_t> prompt, sampler& smp,
                            const generate_params& gp,
                            const std::function<bool(const generated_piece&)>& on_piece) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) return error{"the prompt is empty (no tokens)"};
  if (gp.max_tokens < 1) return error{param_error("max_tokens", ">= 1", gp.max_tokens)};
  ctx.seq_clear(gp.seq);
  if (int64_t(prompt.size()) > ctx.n_free()) {
    return error{"the prompt has " + std::to_string(prompt.size()) +
                 " tokens but the context has room for " + std::to_string(ctx.n_free()) +
                 " (use a larger --ctx or a shorter prompt)"};
  }
  // Alone in the context, the sequence may fill every free cell.
  sequence s(ctx.model().vocab(), smp, {prompt.begin(), prompt.end()},
             {.seq = gp.seq,
              .max_tokens = gp.max_tokens,
              .stop = gp.stop,
              .ignore_eog = gp.ignore_eog,
              .n_ctx = ctx.n_free()});
  generation g;
  g.n_prompt = s.n_prompt();

  const auto t0 = clock::now();
  std::vector<batch_token> batch;
  s.append_batch(batch);
  if (auto r = ctx.decode(batch); !r) return r.err();
  s.decoded();
  const auto t1 = clock::now();
  g.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();

  std::vector<generated_piece> held;  // pieces whose callback waits for the held-back text
  auto pass_on = [&] {
    for (const auto& p : held)
      if (on_piece && !on_piece(p)) s.cancel();
    held.clear();
  };
  for (;;) {
    if (auto piece = s.step(ctx.logits(0))) {
      g.tokens.push_back(piece->token);
      g.text += piece->text;
      const bool wait = piece->holds_back;
      held.push_back(std::move(*piece));
      if (!wait) pass_on();
    }
    if (s.done()) break;
    batch.clear();
    s.append_batch(batch);
    if (auto r = ctx.decode(batch); !r) return r.err();
    s.decoded();
  }
  // Text is held back only after a held piece, so the rest always has a token to go with.
  std::string rest = s.finish();
  g.text += rest;
  if (!held.empty()) held.back().text += rest;
  pass_on();
  g.reason = s.reason();
  g.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return g;
}

}  // namespace hearth
