// hearth tokenize: text -> token ids as one JSON array. Needs only the vocabulary, so vocab-only
// GGUF files work.
#include <cstdio>
#include <stdexcept>

#include "engine/model-file.h"
#include "engine/tokenizer/vocab.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct tokenize_options {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool parse_special = false;
};

int tokenize(const tokenize_options& o) {
  auto file = model_file::open(o.model, {.weights = false, .hparams = false});
  if (!file) throw std::runtime_error(file.message());
  auto voc = vocab::from_gguf(file->gguf);
  if (!voc) throw std::runtime_error("loading vocabulary of " + o.model + ": " + voc.message());
  const auto ids = voc->tokenize(o.text, !o.no_bos, o.parse_special);
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  std::printf("%s]\n", out.c_str());
  return 0;
}

}  // namespace

action add_tokenize(CLI::App& app) {
  auto o = std::make_shared<tokenize_options>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array");
  cmd->add_option("-m,--model", o->model,
                  "GGUF model or vocabulary file, or Hugging Face model directory")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_flag("--no-bos", o->no_bos,
                "Do not add the beginning-of-sequence token (nor end-of-sequence)");
  cmd->add_flag("--parse-special", o->parse_special,
                "Turn special-token text such as <s> into tokens");
  cmd->add_option("text", o->text, "Text to tokenize")->required();
  return [o] { return tokenize(*o); };
}

}  // namespace hearth::cli
