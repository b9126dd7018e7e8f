// hearth eval: logits for a token sequence, in the format of ../shared/testdata/reference.
#include <cstdio>
#include <stdexcept>

#include "engine/context.h"
#include "tools/commands.h"
#include "tools/load.h"

namespace hearth::cli {
namespace {

struct eval_options {
  std::string model;
  std::string tokens;
  std::string out;
  int threads = 0;
  backend_options backend;
  int32_t batch = 512;
};

int eval(const eval_options& o) {
  const auto ids = parse_token_list(o.tokens);
  if (ids.empty()) throw std::runtime_error("--tokens is empty");
  const auto loaded = load_model(o.model, o.backend, o.threads, int32_t(ids.size()));
  const auto& m = loaded.model;
  context_params cp;
  cp.n_ctx = int32_t(ids.size());
  cp.n_batch = o.batch;
  context ctx(*m, cp);
  std::vector<batch_token> batch(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) batch[i] = {ids[i], int32_t(i), 0, true};
  if (auto r = ctx.decode(batch); !r) throw std::runtime_error(r.message());

  FILE* f = std::fopen(o.out.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + o.out);
  // Row i holds the logits after token i: n_tokens × n_vocab little-endian float32.
  const size_t row = size_t(ctx.n_vocab());
  bool ok = true;
  for (int32_t i = 0; i < ctx.n_logits(); ++i)
    ok = ok && std::fwrite(ctx.logits(i), 4, row, f) == row;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw std::runtime_error("writing " + o.out + " failed");
  std::fprintf(stderr, "wrote %d × %zu logits to %s (%s)\n", ctx.n_logits(), row, o.out.c_str(),
               backend_text(loaded).c_str());
  return 0;
}

}  // namespace

action add_eval(CLI::App& app) {
  auto o = std::make_shared<eval_options>();
  CLI::App* cmd = app.add_subcommand("eval", "Write the logits after each of a list of tokens");
  cmd->add_option("-m,--model", o->model, "GGUF model file or Hugging Face model directory")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--tokens", o->tokens, "Comma-separated token ids")->required();
  cmd->add_option("--logits-out", o->out, "Output file: float32, n_tokens × n_vocab")->required();
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all)");
  add_backend_options(cmd, o->backend);
  cmd->add_option("-b,--batch", o->batch, "Tokens per forward pass")->capture_default_str();
  return [o] { return eval(*o); };
}

}  // namespace hearth::cli
