// Constrained decoding's cost (issue 56: constrained generation at >= 90% of unconstrained
// tokens/s): the same model, prompt, sampler settings and seeds generated unconstrained, under a
// JSON Schema of an object with a few typed properties, and under json_object; tokens/s of each,
// the ratio, and the matcher's own time per token (its masks replayed on a fresh matcher, cold as
// in a real request: a mask computed per new state, then served from the cache).
//
//   grammar_bench --model FILE [--tokens N] [--threads T]
//
// Each mode runs generations with seeds 1, 2, ... until N tokens are generated (a constrained
// document ends when its grammar does). Nothing is asserted on timing.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/grammar/grammar-matcher.h"
#include "engine/grammar/json-schema.h"
#include "engine/model.h"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

constexpr const char* schema = R"({"type": "object", "additionalProperties": false,
  "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer",
  "minimum": 0, "maximum": 150}, "email": {"type": "string", "maxLength": 40},
  "admin": {"type": "boolean"}, "score": {"type": "number"},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4}},
  "required": ["name", "age", "email", "admin", "score", "tags"]})";

struct mode_result {
  long tokens = 0;
  double seconds = 0;
  double mask_seconds = 0;
  size_t masks_computed = 0, masks_cached = 0;
  int documents = 0, complete = 0;
};

mode_result run_mode(hearth::context& ctx, const std::vector<int32_t>& prompt, long n_tokens,
                     std::shared_ptr<const hearth::grammar> g,
                     std::shared_ptr<const hearth::grammar_vocab> gv) {
  mode_result r;
  for (uint64_t seed = 1; r.tokens < n_tokens; ++seed) {
    hearth::sampler_params p;  // the defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
    p.seed = seed;
    hearth::sampler smp(p, ctx.n_vocab());
    if (g) smp.set_grammar(g, gv);
    const int32_t left = int32_t(n_tokens - r.tokens);
    auto out = hearth::generate(ctx, prompt, smp, {.max_tokens = left, .ignore_eog = !g}, nullptr);
    if (!out.ok()) {
      std::fprintf(stderr, "generate: %s\n", out.message().c_str());
      std::exit(1);
    }
    r.tokens += long(out->tokens.size());
    r.seconds += out->generate_seconds;
    ++r.documents;
    if (!g) continue;
    r.complete += out->reason == hearth::stop_reason::end_of_generation;
    // The matcher's work for this document, alone: the same tokens on a fresh (cold) matcher.
    hearth::grammar_matcher m(g, gv);
    const auto t0 = clock_type::now();
    for (int32_t t : out->tokens) {
      (void)m.allowed();
      m.accept(t);
    }
    (void)m.allowed();  // the step that chose EOG
    r.mask_seconds += seconds_since(t0);
    r.masks_computed += m.masks_computed();
    r.masks_cached += m.masks_cached();
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  long n_tokens = 128;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      path = argv[++i];
    } else if (a == "--tokens" && i + 1 < argc) {
      n_tokens = std::atol(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: grammar_bench --model FILE [--tokens N] [--threads T]\n");
      return 2;
    }
  }
  if (path.empty() || n_tokens < 1) {
    std::fprintf(stderr, "usage: grammar_bench --model FILE [--tokens N] [--threads T]\n");
    return 2;
  }
  auto model = hearth::model::load(path, {.n_threads = threads});
  auto t0 = clock_type::now();
  auto gv = hearth::grammar_vocab::make(model->vocab());
  const double vocab_s = seconds_since(t0);
  auto schema_gbnf = hearth::json_schema_to_gbnf(schema);
  if (!schema_gbnf.ok()) {
    std::fprintf(stderr, "%s\n", schema_gbnf.message().c_str());
    return 1;
  }
  auto schema_g = hearth::grammar_from_gbnf(*schema_gbnf);
  auto object_g = hearth::grammar_from_gbnf(hearth::json_object_gbnf());
  if (!schema_g.ok() || !object_g.ok()) {
    std::fprintf(stderr, "grammar: %s\n",
                 (schema_g.ok() ? object_g.message() : schema_g.message()).c_str());
    return 1;
  }
  hearth::context ctx(*model, {.n_ctx = 2048});
  const auto prompt = model->vocab().tokenize("Here is the user record as JSON:\n", true, false);
  std::printf("model %s: %d tokens in the vocabulary, trie of %zu nodes built in %.0f ms\n",
              path.c_str(), model->vocab().n_tokens(), gv->byte.size(), vocab_s * 1e3);
  run_mode(ctx, prompt, 8, nullptr, gv);  // warm-up: weights paged in, packed
  // Unconstrained both first and last, so that a machine that speeds up or slows down during the
  // run (a shared one) moves the baseline too: the ratio is against their mean.
  const mode_result first = run_mode(ctx, prompt, n_tokens, nullptr, gv);
  const struct {
    const char* name;
    std::shared_ptr<const hearth::grammar> g;
  } modes[] = {{"json_schema", *schema_g}, {"json_object", *object_g}};
  mode_result results[2];
  for (size_t i = 0; i < 2; ++i) results[i] = run_mode(ctx, prompt, n_tokens, modes[i].g, gv);
  const mode_result last = run_mode(ctx, prompt, n_tokens, nullptr, gv);
  const double base_tps = double(first.tokens + last.tokens) / (first.seconds + last.seconds);
  std::printf("%-13s %6ld tokens %8.2f tok/s (first %.2f, last %.2f)\n", "unconstrained",
              first.tokens + last.tokens, base_tps, double(first.tokens) / first.seconds,
              double(last.tokens) / last.seconds);
  for (size_t i = 0; i < 2; ++i) {
    const mode_result& r = results[i];
    const double tps = double(r.tokens) / r.seconds;
    std::printf(
        "%-13s %6ld tokens %8.2f tok/s  ratio %.3f  mask %.3f ms/token (%zu computed, %zu "
        "cached)  %d/%d documents complete\n",
        modes[i].name, r.tokens, tps, tps / base_tps, r.mask_seconds * 1e3 / double(r.tokens),
        r.masks_computed, r.masks_cached, r.complete, r.documents);
  }
  return 0;
}
