// hearth run: generate a continuation locally and stream it to stdout.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/generate.h"
#include "tools/commands.h"
#include "tools/load.h"

namespace hearth::cli {
namespace {

struct run_options {
  std::string model;
  std::string prompt;
  int32_t n_predict = 128;
  int threads = 0;
  int32_t ctx = 0;
  bool json = false;
  bool parse_special = false;
  sampler_params sampling;
  std::vector<std::string> stop;
};

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int run(const run_options& o) {
  if (auto msg = sampler_params_check(o.sampling); !msg.empty()) throw std::runtime_error(msg);
  if (o.n_predict < 0) throw std::runtime_error("-n must not be negative");

  auto m = load_model(o.model, o.threads);
  const auto prompt = m->vocab().tokenize(o.prompt, true, o.parse_special);
  context_params cp;
  cp.n_ctx = o.ctx;
  context ctx(*m, cp);
  sampler smp(o.sampling, m->hparams().n_vocab);

  generate_params gp;
  gp.max_tokens = o.n_predict;
  gp.stop = o.stop;
  auto g = generate(ctx, prompt, smp, gp, [&](const generated_piece& p) {
    if (o.json) {
      if (p.token >= 0)
        std::printf("%s\n", dump({{"token", p.token}, {"text", p.text}}).c_str());
      else if (!p.text.empty())
        std::printf("%s\n", dump({{"text", p.text}}).c_str());
    } else {
      std::fwrite(p.text.data(), 1, p.text.size(), stdout);
    }
    std::fflush(stdout);
    return true;
  });
  if (!g) throw std::runtime_error(g.message());

  const double pp_tps = g->prompt_seconds > 0 ? g->n_prompt / g->prompt_seconds : 0;
  const double tg_tps =
      g->generate_seconds > 0 ? double(g->tokens.size()) / g->generate_seconds : 0;
  if (o.json) {
    std::printf("%s\n", dump({{"done", true},
                              {"stop_reason", std::string(stop_reason_name(g->reason))},
                              {"n_prompt", g->n_prompt},
                              {"n_generated", g->tokens.size()},
                              {"prompt_tps", pp_tps},
                              {"generate_tps", tg_tps},
                              {"seed", smp.seed()}})
                            .c_str());
  } else {
    std::printf("\n");
    std::fflush(stdout);  // the summary on stderr must follow the text, not interleave with it
    std::fprintf(stderr, "[prompt %d tokens, %.1f t/s | generated %zu tokens, %.1f t/s | %s]\n",
                 g->n_prompt, pp_tps, g->tokens.size(), tg_tps,
                 std::string(stop_reason_name(g->reason)).c_str());
  }
  return 0;
}

}  // namespace

action add_run(CLI::App& app) {
  auto o = std::make_shared<run_options>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text with a local model (no broker)");
  cmd->add_option("-m,--model", o->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate at most")
      ->capture_default_str();
  cmd->add_option("--temp", o->sampling.temperature, "Temperature; 0 = greedy")
      ->capture_default_str();
  cmd->add_option("--top-k", o->sampling.top_k, "Keep the k most likely tokens; 0 = off")
      ->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p, "Nucleus sampling threshold; 1 = off")
      ->capture_default_str();
  cmd->add_option("--min-p", o->sampling.min_p, "Drop tokens below min-p × the top probability")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", o->sampling.repeat_penalty,
                  "Penalty for repeated tokens; 1 = off")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", o->sampling.repeat_last_n, "Window of the penalties")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "Frequency penalty")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "Presence penalty")
      ->capture_default_str();
  cmd->add_option("--seed", o->sampling.seed, "Random seed (default: random)");
  cmd->add_option("--stop", o->stop, "Stop before this text (repeatable)");
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all)");
  cmd->add_option("-c,--ctx", o->ctx,
                  "Context size in tokens (default: the model's, at most 4096)");
  cmd->add_flag("--json", o->json, "One JSON object per token, then a summary");
  cmd->add_flag("--parse-special", o->parse_special,
                "Turn special-token text such as <s> in the prompt into tokens");
  return [o] { return run(*o); };
}

}  // namespace hearth::cli
