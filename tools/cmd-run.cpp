// hearth run: generate a continuation locally and stream it to stdout; with --chat, the reply to
// a message formatted by the model's chat template.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <variant>

#include "common/think-filter.h"
#include "engine/generate.h"
#include "engine/prompt.h"
#include "tools/commands.h"
#include "tools/load.h"
#include "tools/prompt-arg.h"

namespace hearth::cli {
namespace {

struct run_options {
  std::string model;
  prompt_arg prompt;
  std::string chat;           // a user message, formatted with the chat template
  std::string system;         // a system message before it
  std::string template_name;  // instead of the model's own template
  CLI::Option* chat_opt = nullptr;
  CLI::Option* system_opt = nullptr;
  CLI::Option* template_opt = nullptr;
  int threads = 0;
  backend_options backend;
  int32_t ctx = 0;
  bool json = false;
  bool parse_special = false;
  bool show_thinking = false;  // a thinking model's <think> block printed as it came
  bool no_think = false;       // the model asked to answer without thinking (Qwen3)
  generation_params gen;       // -n, --stop and the sampling flags
};

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The flags that choose between a raw prompt and a chat message, checked before the model loads.
void check_prompt_flags(const run_options& o) {
  const bool chat = o.chat_opt->count() > 0;
  if (chat && o.prompt.given()) {
    throw std::runtime_error(
        "--chat and a prompt cannot be used together: --chat MESSAGE formats a message with the "
        "model's chat template, a prompt is used as it is");
  }
  if (!chat && !o.prompt.given()) {
    throw std::runtime_error(
        "no prompt: hearth run -m MODEL TEXT (or -p TEXT, or - for stdin, or --chat MESSAGE to "
        "talk to a chat model)");
  }
  if (!chat && o.system_opt->count() > 0) throw std::runtime_error("--system needs --chat");
  if (!chat && o.template_opt->count() > 0) throw std::runtime_error("--template needs --chat");
  if (!chat && (o.show_thinking || o.no_think))
    throw std::runtime_error("--show-thinking and --no-think need --chat");
  if (o.template_opt->count() > 0 && o.template_name.empty()) {
    throw std::runtime_error("--template needs a name: " + chat_template_names());
  }
}

// The chat prompt: [system?, user] through the model's template (or the one named), with a note
// on stderr saying which template that was.
chat_prompt chat_prompt_of(const run_options& o, const model& m) {
  std::vector<chat_message> messages;
  if (o.system_opt->count() > 0) messages.push_back({"system", o.system});
  messages.push_back({"user", o.chat});
  auto prepared = chat_prompt_prepare(
      m, messages, {.template_name = o.template_name, .enable_thinking = !o.no_think});
  if (const auto* e = std::get_if<prompt_error>(&prepared)) {
    std::string msg = e->message;
    if (e->code != prompt_error_code::messages_invalid && o.template_name.empty()) {
      msg += "; name one with --template NAME";
      // An unrecognised template's message lists the names already.
      if (e->code != prompt_error_code::template_unrecognised)
        msg += " (" + chat_template_names() + ")";
    }
    throw std::runtime_error(msg);
  }
  auto& p = std::get<chat_prompt>(prepared);
  if (!o.json && p.jinja) {
    // The family recognised in it says which built-in format stands in for a named template.
    std::fprintf(stderr, "chat template: the model's own (Jinja; %s family)\n",
                 std::string(chat_template_name(p.choice.tmpl)).c_str());
  } else if (!o.json) {
    std::fprintf(stderr, "chat template: %s (%s)\n",
                 std::string(chat_template_name(p.choice.tmpl)).c_str(),
                 p.choice.detected ? "detected" : "named");
  }
  return std::move(p);
}

int run(run_options& o) {
  if (auto e = generation_params_check(o.gen); !e.ok()) throw std::runtime_error(e.message);
  check_prompt_flags(o);
  const bool chat = o.chat_opt->count() > 0;
  if (!chat) o.prompt.read();

  const auto loaded = load_model(o.model, o.backend, o.threads, o.ctx);
  const auto& m = loaded.model;
  std::optional<chat_prompt> chat_in;
  if (chat) chat_in = chat_prompt_of(o, *m);
  const std::vector<int32_t> prompt =
      chat ? std::move(chat_in->tokens) : text_prompt_tokens(*m, o.prompt.text, o.parse_special);
  // A thinking model's reasoning is not part of the answer unless asked for (as the node does).
  std::optional<think_filter> hide_thinking;
  if (chat) hide_thinking = chat_in->thinking_filter(o.show_thinking);
  context_params cp;
  cp.n_ctx = o.ctx;
  context ctx(*m, cp);
  // Untimed: the prompt's figure is the engine's steady speed, as a node's warmed model runs.
  if (auto w = ctx.warm_up(); !w) throw std::runtime_error(w.message());
  sampler smp(o.gen.sampling, m->hparams().n_vocab);

  generate_params gp;
  gp.max_tokens = o.gen.max_tokens;
  gp.stop = o.gen.stop;
  auto print_piece = [&](const generated_piece& p) {
    if (o.json) {
      std::printf("%s\n", dump({{"token", p.token}, {"text", p.text}}).c_str());
    } else {
      std::fwrite(p.text.data(), 1, p.text.size(), stdout);
    }
    std::fflush(stdout);
  };
  // generate() passes on every text with its token; the think filter may hold some back too, so
  // a token after which it does waits for the next one or the filter's rest (an unfinished tag is
  // answer text): every line of --json has its token.
  std::optional<generated_piece> held;
  auto g = generate(ctx, prompt, smp, gp, [&](const generated_piece& p) {
    if (!hide_thinking) {
      print_piece(p);
      return true;
    }
    if (held) print_piece(*held);
    held = generated_piece{p.token, hide_thinking->push(p.text).answer};
    if (!hide_thinking->holds_back()) {
      print_piece(*held);
      held.reset();
    }
    return true;
  });
  if (held) {
    held->text += hide_thinking->flush().answer;
    print_piece(*held);
  }
  if (!g) throw std::runtime_error(g.message());

  const double pp_tps = g->prompt_seconds > 0 ? g->n_prompt / g->prompt_seconds : 0;
  const double tg_tps =
      g->generate_seconds > 0 ? double(g->tokens.size()) / g->generate_seconds : 0;
  if (o.json) {
    nlohmann::json summary = {{"done", true},
                              {"stop_reason", std::string(stop_reason_name(g->reason))},
                              {"n_prompt", g->n_prompt},
                              {"n_generated", g->tokens.size()},
                              {"prompt_tps", pp_tps},
                              {"generate_tps", tg_tps},
                              {"seed", smp.seed()},
                              {"backend", loaded.backend},
                              {"device", loaded.device_name}};
    if (chat) summary["chat_template"] = std::string(chat_template_name(chat_in->choice.tmpl));
    std::printf("%s\n", dump(summary).c_str());
  } else {
    std::printf("\n");
    std::fflush(stdout);  // the summary on stderr must follow the text, not interleave with it
    std::fprintf(stderr,
                 "[prompt %d tokens, %.1f t/s | generated %zu tokens, %.1f t/s | %s | %s]\n",
                 g->n_prompt, pp_tps, g->tokens.size(), tg_tps,
                 std::string(stop_reason_name(g->reason)).c_str(), backend_text(loaded).c_str());
  }
  return 0;
}

}  // namespace

action add_run(CLI::App& app) {
  auto o = std::make_shared<run_options>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text with a local model (no broker)");
  cmd->add_option("-m,--model", o->model, "GGUF model file or Hugging Face model directory")
      ->required()
      ->check(CLI::ExistingPath);
  o->prompt.add_to(cmd);
  o->chat_opt = cmd->add_option("--chat", o->chat,
                                "A message to a chat model, formatted with its chat template");
  o->system_opt = cmd->add_option("--system", o->system, "A system message before --chat");
  o->template_opt =
      cmd->add_option("--template", o->template_name,
                      "Chat template instead of the model's own: " + chat_template_names());
  cmd->add_option("-n,--n-predict", o->gen.max_tokens, "Tokens to generate at most")
      ->capture_default_str();
  cmd->add_option("--temp", o->gen.sampling.temperature, "Temperature; 0 = greedy")
      ->capture_default_str();
  cmd->add_option("--top-k", o->gen.sampling.top_k, "Keep the k most likely tokens; 0 = off")
      ->capture_default_str();
  cmd->add_option("--top-p", o->gen.sampling.top_p, "Nucleus sampling threshold; 1 = off")
      ->capture_default_str();
  cmd->add_option("--min-p", o->gen.sampling.min_p, "Drop tokens below min-p × the top probability")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", o->gen.sampling.repeat_penalty,
                  "Penalty for repeated tokens; 1 = off")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", o->gen.sampling.repeat_last_n, "Window of the penalties")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", o->gen.sampling.frequency_penalty, "Frequency penalty")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", o->gen.sampling.presence_penalty, "Presence penalty")
      ->capture_default_str();
  cmd->add_option("--seed", o->gen.sampling.seed, "Random seed (default: random)");
  cmd->add_option("--stop", o->gen.stop, "Stop before this text (repeatable)");
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all)");
  add_backend_options(cmd, o->backend);
  cmd->add_option("-c,--ctx", o->ctx,
                  "Context size in tokens (default: the model's, at most 4096)");
  cmd->add_flag("--json", o->json, "One JSON object per token, then a summary");
  cmd->add_flag("--show-thinking", o->show_thinking,
                "Print a thinking model's <think>...</think> reasoning too (hidden by default)");
  cmd->add_flag("--no-think", o->no_think,
                "Ask a thinking model (Qwen3) to answer without reasoning first");
  cmd->add_flag("--parse-special", o->parse_special,
                "Turn special-token text such as <s> in the prompt into tokens");
  return [o] { return run(*o); };
}

}  // namespace hearth::cli
