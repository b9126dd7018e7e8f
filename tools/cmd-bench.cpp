// hearth bench: prompt-processing and generation speed, as llama-bench measures them: pp = one
// forward pass over a P-token prompt, tg = N single-token passes, each from an empty cache,
// repeated and averaged. tg generates as generate() and a node do, through engine/sequence.h:
// each pass decodes the token sampled (greedily) from the previous pass's logits, so the figure
// includes sampling and detokenizing. With --sequences S, tg decodes S sequences together (one
// token of each per pass, as a node's continuous batching does) and reports the aggregate
// tokens/s. With --depth D, the cache holds D tokens of each sequence before every pp and tg run,
// as llama-bench -d: the D tokens are decoded once, untimed, and each run starts from them.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "engine/context.h"
#include "engine/kv-cache.h"
#include "engine/sequence.h"
#include "engine/system-info.h"
#include "tools/commands.h"
#include "tools/load.h"

namespace hearth::cli {
namespace {

struct bench_options {
  std::string model;
  int32_t n_prompt = 128;
  int32_t n_gen = 64;
  int threads = 0;
  backend_options backend;
  int reps = 3;
  int32_t sequences = 1;
  int32_t depth = 0;
  bool json = false;
};

struct stats {
  double mean = 0, stdev = 0;
};

stats summarize(const std::vector<double>& v) {
  stats s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  for (double x : v) s.stdev += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(s.stdev / double(v.size() - 1)) : 0;
  return s;
}

// Multiply-adds of one prompt token in the layers' matrix products: each weight matrix once, an
// expert stack's n_expert_used matrices of n_expert. The ceiling bench/cpu-speed.sh divides the
// multiply-add peak by (the output product runs for the prompt's last token only, and attention's
// products are counted apart, by attention_macs).
uint64_t layer_product_macs(const model& m) {
  const model_hparams& hp = m.hparams();
  uint64_t macs = 0;
  for (const layer_weights& l : m.weights().layers) {
    for (const tensor* t :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.ffn_gate_inp})
      if (t->present()) macs += uint64_t(t->ne[0] * t->ne[1]);
    for (const tensor* t : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps})
      if (t->present()) macs += uint64_t(t->ne[0] * t->ne[1]) * uint64_t(hp.n_expert_used);
  }
  return macs;
}

// Multiply-adds of attention's two products (q·k and the weighted sum of v) for one token that
// sees `cells` cache cells, summed over layers (sliding windows not subtracted: a bound).
double attention_macs(const model_hparams& hp, double cells) {
  return double(hp.n_layer) * hp.n_head * (hp.head_dim_k + hp.head_dim_v) * cells;
}

// Multiply-adds of one generated token's products: the layers' and the output product's.
uint64_t token_product_macs(const model& m) {
  const tensor& out = m.weights().output;
  return layer_product_macs(m) + uint64_t(out.ne[0] * out.ne[1]);
}

// Weight bytes one decoding step of n_seq tokens reads (the ceiling bench/cpu-speed.sh divides
// bandwidth by): every tensor, the used experts' share of expert stacks (more of them with more
// tokens), less the embedding table (a token reads one row of it) unless it is tied to the
// output product.
uint64_t decode_bytes(const model& m, int32_t n_seq) {
  const uint64_t touched = model_weights_counted(m.file(), m.hparams()).bytes_touched(n_seq);
  const model_weights& w = m.weights();
  const bool tied = w.output.data == w.tok_embd.data;
  return tied ? touched : touched - uint64_t(w.tok_embd.n_bytes());
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int bench(const bench_options& o) {
  if (o.n_prompt < 0 || o.n_gen < 0 || o.reps < 1 || o.sequences < 1 || o.sequences > 1024 ||
      o.depth < 0 || o.depth > (1 << 20))
    throw std::runtime_error(
        "-p, -n must be >= 0, -r >= 1, --sequences in [1, 1024] and --depth in [0, 1048576]");
  // Greedy: the cheapest draw, so tg stays a measure of the forward pass.
  const generation_params gen{.max_tokens = o.n_gen, .sampling = {.temperature = 0}};
  if (o.n_gen > 0) {
    if (auto e = generation_params_check(gen); !e.ok()) throw std::runtime_error(e.message);
  }
  // A tg run holds depth + 1 + n_gen cells per sequence: the prefix, the first token, and the
  // tokens generated (the last one is not decoded).
  const int32_t per_seq = o.depth + std::max({1, o.n_prompt, o.n_gen + 1});
  const auto loaded = load_model(o.model, o.backend, o.threads, per_seq);
  const auto& m = loaded.model;
  context_params cp;
  cp.n_ctx = std::max(per_seq, (o.depth + o.n_gen + 1) * o.sequences);
  cp.n_batch = std::max({1, o.n_prompt, o.sequences, std::min(o.depth, 512)});
  cp.n_seq_max = o.sequences;
  context ctx(*m, cp);

  // Speed does not depend on which tokens: random ids, fixed seed.
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(0, m->hparams().n_vocab - 1);
  std::vector<batch_token> prompt(size_t(o.n_prompt));
  for (int32_t i = 0; i < o.n_prompt; ++i)
    prompt[size_t(i)] = {pick(rng), o.depth + i, 0, i + 1 == o.n_prompt};

  // The prefix of --depth: decoded once for every sequence; each run cuts the cache back to it.
  if (o.depth > 0) {
    std::vector<batch_token> prefix;
    prefix.reserve(size_t(o.depth) * size_t(o.sequences));
    for (int32_t s = 0; s < o.sequences; ++s)
      for (int32_t i = 0; i < o.depth; ++i) prefix.push_back({pick(rng), i, s, false});
    prefix.back().logits = true;
    if (auto r = ctx.decode(prefix); !r) throw std::runtime_error(r.message());
  }
  auto reset = [&] {
    for (int32_t s = 0; s < o.sequences; ++s) ctx.seq_truncate(s, o.depth);
  };

  auto run_pp = [&] {
    reset();
    const auto t = std::chrono::steady_clock::now();
    if (auto r = ctx.decode(prompt); !r) throw std::runtime_error(r.message());
    return seconds_since(t);
  };
  // Each sequence starts from one random token at position `depth` and ignores end-of-generation
  // tokens, so all end together after n_gen passes.
  std::vector<batch_token> step;
  auto run_tg = [&] {
    reset();
    std::vector<sampler> samplers(size_t(o.sequences), sampler(gen.sampling, m->hparams().n_vocab));
    std::vector<sequence> seqs;
    seqs.reserve(size_t(o.sequences));
    for (int32_t s = 0; s < o.sequences; ++s) {
      seqs.emplace_back(m->vocab(), samplers[size_t(s)], std::vector<int32_t>{pick(rng)},
                        sequence_params{.seq = s,
                                        .max_tokens = gen.max_tokens,
                                        .ignore_eog = true,
                                        .n_ctx = o.depth + o.n_gen,
                                        .n_past = o.depth});
    }
    const auto t = std::chrono::steady_clock::now();
    while (!seqs.front().done()) {
      step.clear();
      for (const sequence& q : seqs) q.append_batch(step);
      if (auto r = ctx.decode(step); !r) throw std::runtime_error(r.message());
      for (size_t s = 0; s < seqs.size(); ++s) {
        seqs[s].decoded();
        seqs[s].step(ctx.logits(int32_t(s)));
      }
    }
    return seconds_since(t);
  };

  // One untimed warm-up of each, as llama-bench does.
  if (o.n_prompt > 0) run_pp();
  if (o.n_gen > 0) run_tg();
  std::vector<double> pp, tg;
  for (int r = 0; r < o.reps; ++r) {
    if (o.n_prompt > 0) pp.push_back(o.n_prompt / run_pp());
    if (o.n_gen > 0) tg.push_back(double(o.n_gen) * o.sequences / run_tg());
  }
  const stats pps = pp.empty() ? stats{} : summarize(pp);
  const stats tgs = tg.empty() ? stats{} : summarize(tg);
  const int threads = o.threads > 0 ? o.threads : system_info_read().n_threads;

  if (o.json) {
    nlohmann::json j = {
        {"model", o.model},
        {"type", m->dominant_type()},
        {"weight_bytes", m->weight_bytes()},
        {"decode_bytes", decode_bytes(*m, 1)},
        // For the ceilings of --sequences and --depth runs: a step's weight bytes at this many
        // sequences, the cache bytes and attention multiply-adds per token and cell it sees, a
        // generated token's product multiply-adds.
        {"step_bytes", decode_bytes(*m, o.sequences)},
        {"kv_bytes_per_cell", kv_cache::bytes_per_cell(m->hparams())},
        {"attention_macs_per_cell", attention_macs(m->hparams(), 1)},
        {"tg_token_macs", token_product_macs(*m)},
        {"threads", threads},
        {"backend", loaded.backend},
        {"device", loaded.device_name},
        {"device_index", loaded.device},
        {"requested_backend", o.backend.backend},
        {"fallback", loaded.note},
        {"n_prompt", o.n_prompt},
        {"n_gen", o.n_gen},
        {"sequences", o.sequences},
        {"depth", o.depth},
        {"reps", o.reps},
        {"pp_tps", pps.mean},
        {"pp_tps_stdev", pps.stdev},
        {"tg_tps", tgs.mean},
        {"tg_tps_stdev", tgs.stdev},
        // Per prompt token of a pp run: token i sees depth + i + 1 cells.
        {"pp_layer_macs", layer_product_macs(*m)},
        {"pp_attention_macs", attention_macs(m->hparams(), o.depth + (o.n_prompt + 1) / 2.0)}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "| model | type | size | backend | threads | test | t/s |\n| --- | --- | ---: | --- | ---: "
        "| --- | ---: |\n");
    const std::string size = format_bytes(m->weight_bytes());
    // " @ d2048" after a test run at depth 2048, as llama-bench writes it.
    const std::string at = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
    if (o.n_prompt > 0) {
      std::printf("| %s | %s | %s | %s | %d | pp%d%s | %.2f ± %.2f |\n", m->hparams().name.c_str(),
                  m->dominant_type().c_str(), size.c_str(), backend_text(loaded).c_str(), threads,
                  o.n_prompt, at.c_str(), pps.mean, pps.stdev);
    }
    if (o.n_gen > 0) {
      // "tg64" for one sequence, "tg64 x16" for sixteen decoded together (aggregate t/s).
      const std::string test = "tg" + std::to_string(o.n_gen) +
                               (o.sequences > 1 ? " x" + std::to_string(o.sequences) : "") + at;
      std::printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f |\n", m->hparams().name.c_str(),
                  m->dominant_type().c_str(), size.c_str(), backend_text(loaded).c_str(), threads,
                  test.c_str(), tgs.mean, tgs.stdev);
    }
  }
  return 0;
}

}  // namespace

action add_bench(CLI::App& app) {
  auto o = std::make_shared<bench_options>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prompt-processing and generation tokens/s");
  cmd->add_option("-m,--model", o->model, "GGUF model file or Hugging Face model directory")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens per pp run")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "Generated tokens per tg run")->capture_default_str();
  cmd->add_option("-r,--reps", o->reps, "Repetitions")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all)");
  cmd->add_option("-s,--sequences", o->sequences,
                  "Sequences decoded together in tg (aggregate tokens/s)")
      ->capture_default_str();
  add_backend_options(cmd, o->backend);
  cmd->add_option("-d,--depth", o->depth,
                  "Tokens each sequence's cache holds before every run (llama-bench -d)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print one JSON object with pp_tps and tg_tps");
  return [o] { return bench(*o); };
}

}  // namespace hearth::cli
