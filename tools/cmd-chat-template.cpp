// hearth chat-template render: a chat template rendered with a context, as Hugging Face
// transformers' apply_chat_template renders it (engine/chat/jinja.h): the template of a file
// (--template) or a model's own (-m: GGUF tokenizer.chat_template or a Hugging Face folder's, with
// its BOS/EOS token texts). Prints the text exactly (no newline added); the template's error on
// stderr and exit 1 when it fails.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/chat/jinja.h"
#include "engine/model-file.h"
#include "engine/tokenizer/vocab.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct chat_template_options {
  std::string template_path;
  std::string model;
  std::string context_path;
  std::string now;
};

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

int render_template(const chat_template_options& o) {
  if (o.template_path.empty() == o.model.empty())
    throw std::runtime_error("give one of --template FILE and -m MODEL");
  auto ctx = nlohmann::ordered_json::parse(read_text(o.context_path), nullptr, false);
  if (ctx.is_discarded() || !ctx.is_object())
    throw std::runtime_error(o.context_path + " is not a JSON object");
  if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = true;

  std::string source;
  if (!o.template_path.empty()) {
    source = read_text(o.template_path);
  } else {
    auto file = model_file::open(o.model, {.weights = false, .hparams = false});
    if (!file) throw std::runtime_error(file.message());
    auto text = file->gguf.get_string("tokenizer.chat_template");
    if (!text) throw std::runtime_error(text.message());
    if (!*text) throw std::runtime_error("the model " + o.model + " has no chat template");
    source = **text;
    auto voc = vocab::from_gguf(file->gguf);
    if (!voc) throw std::runtime_error("loading vocabulary of " + o.model + ": " + voc.message());
    auto token_text = [&](int32_t id) { return id >= 0 ? voc->text(id) : std::string(); };
    if (!ctx.contains("bos_token")) ctx["bos_token"] = token_text(voc->bos());
    if (!ctx.contains("eos_token")) ctx["eos_token"] = token_text(voc->eos());
  }

  auto program = jinja::parse(source);
  if (!program) throw std::runtime_error(program.message());
  jinja::render_options opts;
  if (!o.now.empty()) {
    auto now = jinja::parse_local_time(o.now);
    if (!now) throw std::runtime_error("--now: " + now.message());
    opts.now = *now;
  }
  auto text = jinja::render(**program, ctx, opts);
  if (!text) throw std::runtime_error(text.message());
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

}  // namespace

action add_chat_template(CLI::App& app) {
  auto o = std::make_shared<chat_template_options>();
  CLI::App* cmd = app.add_subcommand("chat-template",
                                     "Chat templates as Hugging Face transformers renders them");
  cmd->require_subcommand(1);
  CLI::App* render = cmd->add_subcommand(
      "render", "Print a chat template rendered with a context (exactly, no newline added)");
  render->add_option("--template", o->template_path, "Jinja template file")
      ->check(CLI::ExistingFile);
  render
      ->add_option("-m,--model", o->model,
                   "GGUF model or Hugging Face model directory: its own template, BOS and EOS")
      ->check(CLI::ExistingPath);
  render
      ->add_option("--context", o->context_path,
                   "JSON object of the template's variables (messages, tools, ...); "
                   "add_generation_prompt is true unless it says otherwise")
      ->required()
      ->check(CLI::ExistingFile);
  render->add_option("--now", o->now,
                     "strftime_now's instant, local time YYYY-MM-DDTHH:MM[:SS] (default: now)");
  return [o] { return render_template(*o); };
}

}  // namespace hearth::cli
