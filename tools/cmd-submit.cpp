// hearth submit: queue a generation on the broker and stream its text (or print its job id). With
// --chat the job carries messages, which the node formats with the model's chat template.

#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "client/broker-retry.h"
#include "engine/tokenizer/chat-template.h"
#include "schema/job-params.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"
#include "tools/follow-job.h"
#include "tools/interrupt.h"
#include "tools/prompt-arg.h"

namespace hearth::cli {
namespace {

struct submit_options {
  broker_options broker;
  std::string model;
  prompt_arg prompt;
  wire::job_params params;  // its defaults are the CLI's
  int32_t priority = 0;
  bool wait_model = false;
  bool stream = false;
  CLI::Option* stream_flag = nullptr;  // given or not: the default depends on stdout
  std::string chat;                    // a user message
  std::string system;                  // a system message before it
  CLI::Option* chat_flag = nullptr;
  CLI::Option* system_flag = nullptr;
  CLI::Option* template_flag = nullptr;       // --template NAME: params.chat_template
  CLI::Option* show_thinking_flag = nullptr;  // params.show_thinking
  CLI::Option* no_think_flag = nullptr;       // params.enable_thinking = false
  // Issue 56's API (job_params::api), from files and flags:
  std::string tools_file;               // --tools: OpenAI's tools array
  std::string tool_choice;              // --tool-choice auto|none|required|NAME
  std::string json_schema_file;         // --json-schema
  std::string grammar_file;             // --grammar (GBNF)
  std::string template_kwargs;          // --template-kwargs JSON
  int32_t logprobs = -1;                // --logprobs N: N alternatives per token; -1: not asked
  std::vector<std::string> logit_bias;  // --logit-bias TOKEN:BIAS
  bool json = false;
  bool detach = false;
  int retry_for_s = 60;
  CLI::Option* retry_flag = nullptr;
};

// 128 random bits in hex: the submit's idempotency key, the same on every try of this command.
std::string fresh_request_key() {
  std::random_device rd;
  std::string key;
  for (int i = 0; i < 4; ++i) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", unsigned(rd()));
    key += buf;
  }
  return key;
}

// TOKEN:BIAS, as --logit-bias takes it.
wire::token_bias logit_bias_of(const std::string& arg) {
  const size_t colon = arg.find(':');
  size_t token_end = 0, bias_end = 0;
  wire::token_bias b;
  try {
    if (colon == std::string::npos) throw std::invalid_argument(arg);
    b.token = std::stoi(arg.substr(0, colon), &token_end);
    b.bias = std::stof(arg.substr(colon + 1), &bias_end);
  } catch (const std::logic_error&) {
    token_end = 0;
  }
  if (token_end == 0 || token_end != colon || bias_end != arg.size() - colon - 1) {
    throw std::runtime_error("--logit-bias " + arg + ": expected TOKEN:BIAS, e.g. 13:-100");
  }
  return b;
}

// The api params the options ask for (job_params_check then checks them as the broker will).
// Events are asked for whenever what was asked needs them (tools, logprobs, several choices),
// and the output is then printed from them.
void api_params_fill(submit_options& o, bool chat) {
  wire::api_params& a = o.params.api;
  if (!chat && (!o.tools_file.empty() || !o.template_kwargs.empty()))
    throw std::runtime_error("--tools and --template-kwargs need --chat");
  if (!o.tools_file.empty())
    a.tools = request_file_read(o.tools_file, wire::api_max_text_bytes, "--tools");
  if (!o.json_schema_file.empty())
    a.json_schema =
        request_file_read(o.json_schema_file, wire::api_max_text_bytes, "--json-schema");
  if (!o.grammar_file.empty())
    a.grammar = request_file_read(o.grammar_file, wire::api_max_text_bytes, "--grammar");
  a.template_kwargs = o.template_kwargs;
  const std::string& c = o.tool_choice;
  a.tool_choice = c.empty() || c == "auto" || c == "none" || c == "required" ? c : "function:" + c;
  if (o.logprobs >= 0) {
    a.logprobs = true;
    a.top_logprobs = o.logprobs;
  }
  for (const auto& b : o.logit_bias) a.logit_bias.push_back(logit_bias_of(b));
  a.events = !a.tools.empty() || a.logprobs || a.n > 1;
}

int submit(submit_options& o) {
  const auto& p = o.params;
  const bool chat = o.chat_flag->count() > 0;
  if (chat && o.prompt.given()) {
    throw std::runtime_error(
        "--chat and a prompt cannot be used together: --chat MESSAGE is formatted with the "
        "model's chat template on the node, a prompt is used as it is");
  }
  if (!chat && !o.prompt.given()) {
    throw std::runtime_error(
        "no prompt: hearth submit -m MODEL TEXT (or -p TEXT, or - for stdin, or --chat MESSAGE)");
  }
  if (!chat && o.system_flag->count() > 0) throw std::runtime_error("--system needs --chat");
  if (!chat && o.template_flag->count() > 0) throw std::runtime_error("--template needs --chat");
  if (!chat && o.show_thinking_flag->count() + o.no_think_flag->count() > 0)
    throw std::runtime_error("--show-thinking and --no-think need --chat");
  // Known here (the CLI has the templates), so a misspelt name fails before the job exists.
  if (o.template_flag->count() > 0) {
    if (auto t = chat_template_from_name(p.chat_template); !t)
      throw std::runtime_error(t.message());
  }
  api_params_fill(o, chat);
  // The broker checks too; checking here refuses a bad job before a round trip, with the same
  // message.
  if (auto e = wire::job_params_check(p); !e.ok()) throw std::runtime_error(e.message);
  // The text, to a terminal or a pipe alike (as every CLI does); --id-only (or --no-stream)
  // prints just the job id, for scripts.
  const bool stream = o.stream_flag->count() > 0 ? o.stream : true;

  wire::submit s;
  s.model = o.model;
  if (chat) {
    if (o.system_flag->count() > 0) s.messages.push_back({"system", o.system});
    s.messages.push_back({"user", o.chat});
  } else {
    s.prompt = o.prompt.read();
  }
  s.params = o.params;
  s.priority = o.priority;
  s.wait_model = o.wait_model;
  s.watch = stream;
  s.request_key = fresh_request_key();
  // Ctrl-C cancels the job being streamed (or, with --detach, leaves it running).
  if (stream) catch_interrupt();
  broker_client client(o.broker);
  const std::chrono::seconds retry_for(o.retry_for_s);
  // A try that got no reply may still have made the job: the key makes the broker answer a
  // later try with that job instead of a second one.
  bool retried = false;
  const bool retry_for_given = o.retry_flag->count() > 0;
  const auto a = broker_retry(client, retry_for, write_err, retry_for_given).run([&](int n) {
    if (n > 0) {
      client.reconnect();
      // The watch of an earlier try belonged to its socket; follow_job watches on this one.
      s.watch = false;
      retried = true;
    }
    try {
      return client.request<wire::accepted>(s);
    } catch (const broker_error& e) {
      const std::string what = e.what();
      if (e.code() == wire::error_code::unknown_model)
        throw broker_error(e.code(), what + "; --wait-model queues it anyway");
      if (e.code() == wire::error_code::no_chat_template) {
        throw broker_error(e.code(),
                           what + "; --template NAME names one (" + chat_template_names() + ")");
      }
      throw;
    }
  });
  if (o.json) {
    print_json({{"event", "accepted"},
                {"job_id", a.job_id},
                {"position", a.position},
                {"waiting", a.waiting}});
  } else if (!stream) {
    std::printf("%llu\n", static_cast<unsigned long long>(a.job_id));
    if (!a.waiting.empty())
      write_err("hearth: job " + std::to_string(a.job_id) + ": " + a.waiting + "\n");
  } else {
    // Its id, to watch or cancel it from elsewhere; stdout is the text alone.
    write_err("job " + std::to_string(a.job_id) +
              (o.detach ? " (Ctrl-C leaves it running)\n" : " (Ctrl-C cancels it)\n"));
  }
  if (!stream) return 0;
  return follow_job(client, a.job_id,
                    {.json_lines = o.json,
                     .position = a.position,
                     .waiting = a.waiting,
                     .attach = retried,
                     .retry_for = retry_for,
                     .retry_for_given = retry_for_given,
                     .cancel_on_interrupt = !o.detach,
                     .output_events = p.api.events,
                     .show_reasoning = p.show_thinking});
}

}  // namespace

action add_submit(CLI::App& app) {
  auto o = std::make_shared<submit_options>();
  auto& p = o->params;
  CLI::App* cmd = app.add_subcommand(
      "submit", "Queue a generation on the broker; print its job id or stream its text");
  cmd->add_option("-m,--model", o->model, "Model name (as `hearth models` lists it)")->required();
  cmd->add_option("-n,--n-predict", p.max_tokens, "Tokens to generate at most")
      ->capture_default_str();
  cmd->add_option("--priority", o->priority, "Higher runs first")->capture_default_str();
  cmd->add_option("--temp", p.temperature, "Temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", p.top_k, "Keep the k most likely tokens; 0 = off")
      ->capture_default_str();
  cmd->add_option("--top-p", p.top_p, "Nucleus sampling threshold; 1 = off")->capture_default_str();
  cmd->add_option("--min-p", p.min_p, "Drop tokens below min-p × the top probability")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", p.repeat_penalty, "Penalty for repeated tokens; 1 = off")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", p.repeat_last_n, "Window of the penalty")
      ->capture_default_str();
  cmd->add_option("--seed", p.seed,
                  "Random seed (default: chosen by the broker, the same for every attempt)");
  cmd->add_option("--stop", p.stop, "Stop before this text (repeatable)");
  cmd->add_flag("--wait-model", o->wait_model,
                "Accept a model that no node has advertised yet and wait for one");
  o->stream_flag = cmd->add_flag(
      "--stream,!--no-stream,!--id-only", o->stream,
      "Stream the text (the default; the job id goes to stderr), or print only the job id "
      "(--id-only, for scripts)");
  cmd->add_flag("--detach", o->detach,
                "Ctrl-C stops streaming and leaves the job running (default: Ctrl-C cancels it)");
  cmd->add_flag("--json", o->json,
                "JSON lines: accepted, then (streaming) queued/running/tokens/restarted/done");
  add_broker_options(cmd, o->broker);
  o->retry_flag = add_retry_option(cmd, o->retry_for_s);
  o->prompt.add_to(cmd);
  o->chat_flag = cmd->add_option(
      "--chat", o->chat, "A message to a chat model (the node applies the model's chat template)");
  o->system_flag = cmd->add_option("--system", o->system, "A system message before --chat");
  o->template_flag = cmd->add_option(
      "--template", o->params.chat_template,
      "Chat template for --chat instead of the model's own: " + chat_template_names());
  o->show_thinking_flag =
      cmd->add_flag("--show-thinking", p.show_thinking,
                    "Stream a thinking model's <think>...</think> reasoning too; the job's text "
                    "then keeps it (hidden by default)");
  cmd->add_option("--tools", o->tools_file,
                  "A JSON file of OpenAI's tools array for --chat; the model's calls are printed "
                  "as lines 'tool call: NAME(ARGUMENTS)'");
  cmd->add_option("--tool-choice", o->tool_choice,
                  "auto (the model decides), none, required (at least one call), or a tool's NAME "
                  "(a call of that one)");
  cmd->add_option("--json-schema", o->json_schema_file,
                  "A JSON Schema file: the output is JSON valid against it");
  cmd->add_option("--grammar", o->grammar_file, "A GBNF grammar file the output matches");
  cmd->add_option("--template-kwargs", o->template_kwargs,
                  "A JSON object of more variables for the chat template, e.g. "
                  "'{\"enable_thinking\": false}'");
  cmd->add_option("--logprobs", o->logprobs,
                  "Record each token's log-probability and N most likely alternatives (0-20) "
                  "in the job's output events (--json, hearth job N --json)");
  cmd->add_option("--choices", p.api.n,
                  "Generate N choices from the one prompt (1-8); the first streams, the others "
                  "follow when the job ends")
      ->capture_default_str();
  // One value per --logit-bias (CLI11 would otherwise take the prompt after it as another).
  cmd->add_option("--logit-bias", o->logit_bias,
                  "TOKEN:BIAS: add BIAS (-100 to 100) to a token's logit (repeatable)")
      ->allow_extra_args(false);
  o->no_think_flag = cmd->add_flag(
      "--no-think", [o](int64_t) { o->params.enable_thinking = false; },
      "Ask a thinking model (Qwen3) to answer without reasoning first");
  return [o] { return submit(*o); };
}

}  // namespace hearth::cli
