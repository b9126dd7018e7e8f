// hearth mkmodel: a random-weight GGUF model with a real model's shapes, metadata and vocabulary
// (fixtures/random-model.h), for benchmarks that need the real model's size but not its weights.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "engine/system-info.h"
#include "fixtures/random-model.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct mkmodel_options {
  std::string shape;
  std::string type;
  std::string out;
  uint64_t seed = 0;
  int32_t layers = 0;
  int threads = 0;
  bool dry_run = false;
  bool dense_active = false;
  std::string testdata;
};

std::string default_testdata() {
  const char* env = std::getenv("HEARTH_TESTDATA");
  return env && *env ? std::string(env) : std::string(HEARTH_DEFAULT_TESTDATA);
}

int mkmodel(const mkmodel_options& o) {
  const model_shape* shape = model_shape_find(o.shape);
  if (!shape) {
    throw std::runtime_error("unknown shape '" + o.shape + "' (shapes: " + model_shape_names() +
                             ")");
  }
  const auto type = file_type_from_name(o.type);
  if (!type) {
    throw std::runtime_error("unknown type '" + o.type + "' (types: " + file_type_names() + ")");
  }
  if (o.out.empty() && !o.dry_run) throw std::runtime_error("-o FILE is required (or --dry-run)");
  if (o.layers < 0) throw std::runtime_error("--layers must be positive");

  random_model_options ro;
  ro.type = *type;
  ro.seed = o.seed;
  ro.n_layer = o.layers;
  ro.n_threads = o.threads;
  ro.testdata_root = o.testdata.empty() ? default_testdata() : o.testdata;
  ro.dense_active = o.dense_active;

  const bool show_progress = !o.dry_run && isatty(STDERR_FILENO);
  auto progress = [&](size_t done, size_t n) {
    std::fprintf(stderr, "\rtensor %zu/%zu", done, n);
    if (done == n) std::fprintf(stderr, "\n");
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto r = random_model_write(*shape, ro, o.dry_run ? std::string() : o.out,
                              show_progress ? std::function<void(size_t, size_t)>(progress)
                                            : std::function<void(size_t, size_t)>());
  if (!r) throw std::runtime_error(r.message());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("%s %s: %d layers, %zu tensors, %llu parameters (%.3f B), %llu bytes (%s)\n",
              std::string(shape->name).c_str(), std::string(file_type_name(*type)).c_str(),
              r->n_layer, r->n_tensors, static_cast<unsigned long long>(r->n_params),
              double(r->n_params) / 1e9, static_cast<unsigned long long>(r->file_bytes),
              format_bytes(r->file_bytes).c_str());
  if (shape->n_expert > 0 && !o.dense_active) {
    std::printf("per token: %llu active parameters (%.3f B), %llu bytes of weights (%s)\n",
                static_cast<unsigned long long>(r->n_active_params),
                double(r->n_active_params) / 1e9, static_cast<unsigned long long>(r->active_bytes),
                format_bytes(r->active_bytes).c_str());
  }
  if (!o.dry_run) {
    std::printf("wrote %s in %.1f s (%.0f MB/s)\n", o.out.c_str(), seconds,
                double(r->file_bytes) / 1e6 / seconds);
  }
  return 0;
}

}  // namespace

action add_mkmodel(CLI::App& app) {
  auto o = std::make_shared<mkmodel_options>();
  CLI::App* cmd = app.add_subcommand(
      "mkmodel", "Write a random-weight GGUF model with a real model's shapes and vocabulary");
  cmd->add_option("--shape", o->shape, "Model shape: " + model_shape_names())->required();
  cmd->add_option("--type", o->type, "File type: " + file_type_names())->required();
  cmd->add_option("-o,--output", o->out, "GGUF file to write (replaced atomically)");
  cmd->add_option("--seed", o->seed, "Seed of the weights (same seed, same file)")
      ->capture_default_str();
  cmd->add_option("--layers", o->layers,
                  "Blocks to write instead of the shape's (recorded in general.name)");
  cmd->add_option("-t,--threads", o->threads, "Threads making the weights (default: all)");
  cmd->add_flag("--dry-run", o->dry_run, "Print the parameter count and file size only");
  cmd->add_flag("--dense-active", o->dense_active,
                "Mixture-of-experts shapes: write the experts a token uses as one dense "
                "feed-forward (the active parameters as a dense model, for speed comparisons)");
  cmd->add_option("--testdata", o->testdata,
                  "Shared test data folder holding the vocabularies (default: $HEARTH_TESTDATA, "
                  "else the one beside the source tree)");
  return [o] { return mkmodel(*o); };
}

}  // namespace hearth::cli
