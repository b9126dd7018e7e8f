// Constrained decoding's cost (issue 56: constrained generation at >= 90% of unconstrained
// tokens/s): the same model, prompt, sampler settings and seeds generated unconstrained, under a
// JSON Schema of an object with a few typed properties, and under json_object; tokens/s of each,
// the ratio, and the matcher's own time per token (its masks replayed on a fresh matcher, cold as
// in a real request: a mask computed per new state, then served from the cache).
//
//   grammar_bench --model FILE [--tokens N] [--rounds R] [--threads T]
//
// R rounds (default 5); in each, every mode runs generations from the round's seeds until N
// tokens (default 64) are generated (a constrained document ends when its grammar does), the
// modes in a rotated order; a mode's ratio is the median over rounds of its tokens/s over the
// round's unconstrained tokens/s. Nothing is asserted on timing.
#include <time.h>
#include <algorithm>
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

// CPU time of the whole process (every thread): on a machine shared with builds, a run that
// waits for a core loses wall time but not CPU time, so CPU ms per token is the steadier figure.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
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
  double cpu_seconds = 0;  // the generations' process CPU time (prompts included)
  double mask_seconds = 0;
  size_t masks_computed = 0, masks_cached = 0;
  int documents = 0, complete = 0;
};

mode_result run_mode(hearth::context& ctx, const std::vector<int32_t>& prompt, long n_tokens,
                     std::shared_ptr<const hearth::grammar> g,
                     std::shared_ptr<const hearth::grammar_vocab> gv, uint64_t first_seed) {
  mode_result r;
  for (uint64_t seed = first_seed; r.tokens < n_tokens; ++seed) {
    hearth::sampler_params p;  // the defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
    p.seed = seed;
    hearth::sampler smp(p, ctx.n_vocab());
    if (g) smp.set_grammar(g, gv);
    const int32_t left = int32_t(n_tokens - r.tokens);
    const double cpu0 = process_cpu_seconds();
    auto out = hearth::generate(ctx, prompt, smp, {.max_tokens = left, .ignore_eog = !g}, nullptr);
    if (!out.ok()) {
      std::fprintf(stderr, "generate: %s\n", out.message().c_str());
      std::exit(1);
    }
    r.cpu_seconds += process_cpu_seconds() - cpu0;
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
  long n_tokens = 64;
  int threads = 0;
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      path = argv[++i];
    } else if (a == "--tokens" && i + 1 < argc) {
      n_tokens = std::atol(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: grammar_bench --model FILE [--tokens N] [--rounds R] [--threads T]\n");
      return 2;
    }
  }
  if (path.empty() || n_tokens < 1) {
    std::fprintf(stderr,
                 "usage: grammar_bench --model FILE [--tokens N] [--rounds R] [--threads T]\n");
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
  run_mode(ctx, prompt, 8, nullptr, gv, 1000);  // warm-up: weights paged in, packed
  // Rounds of the three modes, in a rotated order, each mode's tokens/s compared with the
  // unconstrained run of its round: a shared machine's drift hits a round's runs alike.
  const struct {
    const char* name;
    std::shared_ptr<const hearth::grammar> g;
  } modes[] = {{"unconstrained", nullptr}, {"json_schema", *schema_g}, {"json_object", *object_g}};
  mode_result total[3];
  std::vector<double> ratios[3];
  for (int round = 0; round < rounds; ++round) {
    double tps[3];
    for (int k = 0; k < 3; ++k) {
      const int i = (round + k) % 3;
      const mode_result r =
          run_mode(ctx, prompt, n_tokens, modes[i].g, gv, uint64_t(round) * 100 + 1);
      tps[i] = double(r.tokens) / r.seconds;
      mode_result& t = total[i];
      t.tokens += r.tokens;
      t.seconds += r.seconds;
      t.cpu_seconds += r.cpu_seconds;
      t.mask_seconds += r.mask_seconds;
      t.masks_computed += r.masks_computed;
      t.masks_cached += r.masks_cached;
      t.documents += r.documents;
      t.complete += r.complete;
    }
    for (int i = 0; i < 3; ++i) ratios[i].push_back(tps[i] / tps[0]);
    std::printf("round %d: %.2f / %.2f / %.2f tok/s (unconstrained / json_schema / json_object)\n",
                round + 1, tps[0], tps[1], tps[2]);
  }
  for (int i = 0; i < 3; ++i) {
    const mode_result& r = total[i];
    std::vector<double> v = ratios[i];
    std::sort(v.begin(), v.end());
    const double median =
        v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    const double cpu_ms = r.cpu_seconds * 1e3 / double(r.tokens);
    std::printf("%-13s %6ld tokens %8.2f tok/s  median ratio %.3f  cpu %.2f ms/token (ratio %.3f)",
                modes[i].name, r.tokens, double(r.tokens) / r.seconds, median, cpu_ms,
                total[0].cpu_seconds / double(total[0].tokens) / (cpu_ms / 1e3));
    if (modes[i].g) {
      std::printf("  mask %.3f ms/token (%zu computed, %zu cached)  %d/%d documents complete",
                  r.mask_seconds * 1e3 / double(r.tokens), r.masks_computed, r.masks_cached,
                  r.complete, r.documents);
    }
    std::printf("\n");
  }
  return 0;
}
