// hearth eval: logits for a token sequence, in the format of ../shared/testdata/reference, and
// the forward pass's named intermediates (engine/eval-callback.h) for diffing against the
// reference engine's llama-eval-callback.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/context.h"
#include "engine/eval-record.h"
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
  std::vector<int32_t> dump_layers;
  std::vector<std::string> dump_names;
  std::string dump_dir;

  bool dumps() const { return !dump_layers.empty() || !dump_names.empty(); }
};

void write_file(const std::string& path, const void* data, size_t bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  bool ok = bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw std::runtime_error("writing " + path + " failed");
}

void write_logits(const context& ctx, const std::string& path) {
  // Row i holds the logits after token i: n_tokens × n_vocab little-endian float32.
  const size_t row = size_t(ctx.n_vocab());
  write_file(path, ctx.logits(0), size_t(ctx.n_logits()) * row * sizeof(float));
}

// Which intermediates --dump-layer and --dump ask for: the blocks named by --dump-layer (every
// block when none is) with the tensors outside the blocks, only the names --dump gives if any.
std::function<bool(std::string_view, int32_t)> dump_filter(const eval_options& o) {
  return [&o](std::string_view name, int32_t layer) {
    const auto& ls = o.dump_layers;
    const auto& ns = o.dump_names;
    const bool layer_ok =
        layer < 0 || ls.empty() || std::find(ls.begin(), ls.end(), layer) != ls.end();
    const bool name_ok = ns.empty() || std::find(ns.begin(), ns.end(), name) != ns.end();
    return layer_ok && name_ok;
  };
}

// A missing name or layer is a typo; saying so beats an empty dump.
void check_dump_found(const eval_options& o, const eval_record& rec) {
  for (const std::string& n : o.dump_names) {
    const auto& all = rec.intermediates();
    if (std::none_of(all.begin(), all.end(), [&](const auto& r) { return r.name == n; }))
      throw std::runtime_error("--dump " + n +
                               ": this model computes no intermediate of that name");
  }
}

// The layout of llama-eval-callback's output, so the two can be read side by side: the
// reference's tensor name ("attn_norm-0"), ne, the first and last 3 values along each
// dimension, and the sum of all values.
void print_intermediate(const recorded_intermediate& r) {
  constexpr int64_t n = 3;
  const char* pad = "                                     ";
  std::printf("hearth_dump: %24s = (f32) {%lld, %lld, %lld, %lld}\n", r.label().c_str(),
              (long long)r.ne[0], (long long)r.ne[1], (long long)r.ne[2], (long long)r.ne[3]);
  // Visits 0..len-1, skipping the middle of long dimensions (printing "..." there).
  auto next = [](int64_t i, int64_t len) { return (i + 1 == n && len > 2 * n) ? len - n : i + 1; };
  for (int64_t i3 = 0; i3 < r.ne[3]; i3 = next(i3, r.ne[3])) {
    std::printf("%s[\n", pad);
    for (int64_t i2 = 0; i2 < r.ne[2]; i2 = next(i2, r.ne[2])) {
      if (i2 == r.ne[2] - n && r.ne[2] > 2 * n) std::printf("%s ..., \n", pad);
      std::printf("%s [\n", pad);
      for (int64_t i1 = 0; i1 < r.ne[1]; i1 = next(i1, r.ne[1])) {
        if (i1 == r.ne[1] - n && r.ne[1] > 2 * n) std::printf("%s  ..., \n", pad);
        std::printf("%s  [", pad);
        for (int64_t i0 = 0; i0 < r.ne[0]; i0 = next(i0, r.ne[0])) {
          if (i0 == r.ne[0] - n && r.ne[0] > 2 * n) std::printf("..., ");
          const size_t at = size_t(((i3 * r.ne[2] + i2) * r.ne[1] + i1) * r.ne[0] + i0);
          std::printf("%12.4f%s", double(r.values[at]), i0 + 1 < r.ne[0] ? ", " : "");
        }
        std::printf("],\n");
      }
      std::printf("%s ],\n", pad);
    }
    std::printf("%s]\n", pad);
  }
  double sum = 0;
  for (float v : r.values) sum += double(v);
  std::printf("%ssum = %f\n", pad, sum);
}

// DIR/<label>.f32 (little-endian float32, ne[0] fastest) per intermediate and DIR/index.json
// naming each file with its name, layer and ne.
void write_dump_dir(const eval_options& o, const std::vector<int32_t>& ids,
                    const eval_record& rec) {
  std::filesystem::create_directories(o.dump_dir);
  nlohmann::json index = {
      {"model", o.model}, {"tokens", ids}, {"intermediates", nlohmann::json::array()}};
  for (const recorded_intermediate& r : rec.intermediates()) {
    const std::string file = r.label() + ".f32";
    write_file(o.dump_dir + "/" + file, r.values.data(), r.values.size() * sizeof(float));
    index["intermediates"].push_back({{"name", r.name},
                                      {"layer", r.layer},
                                      {"file", file},
                                      {"type", "f32"},
                                      {"ne", {r.ne[0], r.ne[1], r.ne[2], r.ne[3]}}});
  }
  const std::string text = index.dump(1) + "\n";
  write_file(o.dump_dir + "/index.json", text.data(), text.size());
}

int eval(const eval_options& o) {
  const auto ids = parse_token_list(o.tokens);
  if (ids.empty()) throw std::runtime_error("--tokens is empty");
  if (o.out.empty() && !o.dumps())
    throw std::runtime_error("nothing to write: give --logits-out, --dump-layer or --dump");
  const auto loaded = load_model(o.model, o.backend, o.threads, int32_t(ids.size()));
  const auto& m = loaded.model;
  for (int32_t l : o.dump_layers) {
    if (l < 0 || l >= m->hparams().n_layer)
      throw std::runtime_error("--dump-layer " + std::to_string(l) + ": the model has layers 0.." +
                               std::to_string(m->hparams().n_layer - 1));
  }
  context_params cp;
  cp.n_ctx = int32_t(ids.size());
  cp.n_batch = o.batch;
  context ctx(*m, cp);
  eval_record rec(dump_filter(o));
  if (o.dumps()) ctx.eval_callback_set(&rec.callback());
  std::vector<batch_token> batch(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) batch[i] = {ids[i], int32_t(i), 0, true};
  if (auto r = ctx.decode(batch); !r) throw std::runtime_error(r.message());

  if (!o.out.empty()) {
    write_logits(ctx, o.out);
    std::fprintf(stderr, "wrote %d × %d logits to %s (%s)\n", ctx.n_logits(), ctx.n_vocab(),
                 o.out.c_str(), backend_text(loaded).c_str());
  }
  if (o.dumps()) {
    check_dump_found(o, rec);
    if (o.dump_dir.empty()) {
      for (const recorded_intermediate& r : rec.intermediates()) print_intermediate(r);
    } else {
      write_dump_dir(o, ids, rec);
      std::fprintf(stderr, "wrote %zu intermediates to %s (%s)\n", rec.intermediates().size(),
                   o.dump_dir.c_str(), backend_text(loaded).c_str());
    }
  }
  return 0;
}

}  // namespace

action add_eval(CLI::App& app) {
  auto o = std::make_shared<eval_options>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Write the logits after each of a list of tokens, or the forward pass's intermediates");
  cmd->add_option("-m,--model", o->model, "GGUF model file or Hugging Face model directory")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--tokens", o->tokens, "Comma-separated token ids")->required();
  cmd->add_option("--logits-out", o->out, "Output file: float32, n_tokens × n_vocab");
  cmd->add_option("--dump-layer", o->dump_layers,
                  "Dump the named intermediates of this layer (repeatable), with those outside "
                  "the layers (inp_embd, result_norm, result_output)");
  cmd->add_option("--dump", o->dump_names,
                  "Dump only intermediates of this name (repeatable; e.g. l_out), of every layer "
                  "unless --dump-layer is given");
  cmd->add_option("--dump-dir", o->dump_dir,
                  "Write the dump as DIR/<name>-<layer>.f32 files and DIR/index.json instead of a "
                  "summary on stdout");
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all)");
  add_backend_options(cmd, o->backend);
  cmd->add_option("-b,--batch", o->batch, "Tokens per forward pass")->capture_default_str();
  return [o] { return eval(*o); };
}

}  // namespace hearth::cli
