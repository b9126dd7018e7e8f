// The batch engine: attempts run on engine/ with continuous batching, on every backend (CPU,
// Vulkan, CUDA).
//
// All running attempts of one model share one context whose cache holds slots × n_ctx_per_slot
// cells; each choice of an attempt (one unless api.n asks for more) owns one sequence id and may
// fill at most n_ctx_per_slot cells, so one long job cannot starve the others. Each step is one
// decode() per model holding, for every attempt of that model, either its whole prompt once (an
// attempt that joined since the last step; logits for the last prompt token only; its other
// choices then get copies of those cells) or the one token each running choice sampled last.
// Attempts join and leave between steps; models with running attempts take steps in turn. Each
// attempt is one engine/sequence.h, the type generate() loops over (same sampler calls, end rule
// and text streaming), and a sequence's logits do not depend on the other rows of a batch, so an
// attempt's tokens are those generate() gives for it alone.
//
// Models load on the backend the configuration asks for (backends/select.h): the device is chosen
// once at start, and a model that device cannot run (a weight type without a kernel, too little
// device memory) loads on the CPU instead, with a warning saying why. All of that happens at
// load, so a job never fails half-way for want of a kernel.
//
// One worker thread does everything, model loading included, so submit() and cancel() only queue
// a message and return. Loaded models stay loaded until the memory budget needs their room for
// another model; then the least recently used idle ones are unloaded first.
#include <spdlog/spdlog.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "backends/select.h"
#include "common/think-filter.h"
#include "engine/chat/tool-calls.h"
#include "engine/context.h"
#include "engine/grammar/grammar-matcher.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json-schema.h"
#include "engine/io/mapped-file.h"
#include "engine/model.h"
#include "engine/prompt.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "engine/system-info.h"
#include "engine/tokenizer/chat-template.h"
#include "node/catalog-engine.h"
#include "node/job-engine.h"
#include "node/model-catalog.h"
#include "node/pipeline-link.h"
#include "schema/job-params.h"
#include "schema/output-events.h"

namespace hearth::node {
namespace {

using clock = std::chrono::steady_clock;

// How long a split model's last stage waits for the broker to plan its pipeline again after a
// step failed (a stage's node died: the broker notices within its liveness, a few seconds).
constexpr auto k_failover_wait = std::chrono::seconds(30);

double ms_since(clock::time_point t0, clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

bool same_ref(const wire::job_ref& a, const wire::job_ref& b) {
  return a.job_id == b.job_id && a.attempt == b.attempt;
}

// What a job's output is made of (schema/output-events.h): output events when the request set
// api.events, else the plain text of its one choice, streamed exactly as before issue 56.
//
// Events mode. Every choice is a sequence of its own; each step writes, per choice, the event
// lines its sampled token made complete: reasoning (a thinking model's think block, kept instead
// of dropped), content (the answer, without what the tool-call parser took as calls), tool_call
// (one whole call), logprobs (when asked), and finish once the choice ended. A chunk reports the
// tokens the step sampled, one per choice still running, the end-of-generation token included:
// so the closing lines of a choice (the text held back, its finish) always come with a token,
// and n_gen counts every sampled token of every choice (at most n × max_tokens).
struct batch_choice {
  batch_choice(uint32_t i, const sampler_params& sp, int32_t n_vocab)
      : index(i), smp(sp, n_vocab) {}

  uint32_t index;  // the choice's `i`
  sampler smp;     // seeded with the job's seed + index
  std::optional<sequence> gen;
  int32_t seq = -1;    // its sequence of the model's context, once placed
  int32_t row = -1;    // its logits row in the current step (-1: it reads choice 0's)
  bool ended = false;  // events mode: its finish line is written and its sequence freed
  // A split model's last stage: the tokens in its sequence's cells, by position, and where this
  // step's tokens are in the batch; what a failover replays on new stages.
  std::vector<int32_t> cells;
  size_t batch_from = 0, batch_to = 0;

  // Plain mode: the think block kept out of the text (a thinking model's chat job without
  // show_thinking). Events mode: the think block split off as reasoning events.
  std::optional<think_filter> think;
  // Events mode, with tools offered and tool_choice not "none": calls parsed out of the answer.
  std::optional<tool_call_parser> calls;
  uint32_t n_calls = 0;  // tool calls it made (events mode)

  // Plain mode: generated tokens not reported yet and their visible text (see holds_back).
  uint32_t held_tokens = 0;
  std::string held_text;
};

// One attempt from admission to its end. Owned by its model's waiting queue, then by its running
// list once every choice holds a sequence of the model's context.
struct batch_attempt {
  batch_attempt(const wire::job_ref& r, std::vector<int32_t> prompt_tokens, generation_params p,
                const wire::api_params& api_params, int32_t n_vocab)
      : ref(r), prompt(std::move(prompt_tokens)), params(std::move(p)), api(api_params) {
    const int32_t n = std::max(api.n, 1);
    for (int32_t i = 0; i < n; ++i) {
      sampler_params sp = params.sampling;
      // Each choice its own draw; choice 0 samples as n = 1 does. A random seed stays random.
      if (sp.seed != sampler_seed_random) sp.seed += uint64_t(i);
      choices.push_back(std::make_unique<batch_choice>(uint32_t(i), sp, n_vocab));
    }
  }

  bool events() const { return api.events; }
  // Choice 0 decodes the prompt; the others get copies of its cells (context::seq_copy).
  void place(const vocab& voc, batch_choice& c, int32_t seq, int32_t n_ctx) {
    c.seq = seq;
    c.gen.emplace(
        voc, c.smp, prompt,
        sequence_params{
            .seq = seq, .max_tokens = params.max_tokens, .stop = params.stop, .n_ctx = n_ctx});
  }
  bool started() const { return choices[0]->gen && choices[0]->gen->prompt_decoded(); }
  bool all_ended() const {
    return std::all_of(choices.begin(), choices.end(), [](const auto& c) { return c->ended; });
  }

  // Plain mode. Of the text the sequence streams, what the job's text gets: all of it, or
  // without the think block (the rest held back with it at the end, `last`).
  static std::string visible(batch_choice& c, std::string text, bool last) {
    if (!c.think) return text;
    std::string out = c.think->push(text).answer;
    if (last) out += c.think->flush().answer;
    return out;
  }
  // Plain mode. Text is held back after the last token (an unfinished character, a possible stop
  // string or think tag): that token is not reported yet, so the text it may end with has a token
  // to come with (a chunk with text and no tokens is refused, PROTOCOL.md section 11).
  static bool holds_back(const batch_choice& c, const generated_piece& p) {
    return p.holds_back || (c.think && c.think->holds_back());
  }

  wire::job_ref ref;
  std::vector<int32_t> prompt;  // what every choice's sequence starts from
  generation_params params;
  wire::api_params api;
  std::vector<std::unique_ptr<batch_choice>> choices;  // [max(api.n, 1)]

  int32_t top_logprobs = -1;  // events mode, api.logprobs: alternatives per token; -1: none
  tool_call_id_style id_style = tool_call_id_style::openai;
  size_t n_call_ids = 0;  // tool-call ids given so far, across choices

  uint64_t n_sent = 0;       // tokens reported so far (the next chunk's seq)
  uint32_t step_tokens = 0;  // events mode: tokens sampled in this step, not reported yet
  std::string step_lines;    // events mode: their event lines

  double load_ms = 0;  // the model was loaded for it, taking this long
  double prompt_ms = 0;
  clock::time_point t_gen;  // generation began (the prompt's logits were ready)
};

struct batch_model {
  std::string name;
  std::string path;                        // its file or folder
  std::unique_ptr<model_file_watch> file;  // that file, opened before it was read
  // Unloaded after this step (by run(), which holds no reference past it): its file changed under
  // it, or a pipeline step failed (the other stages' caches are unknown).
  bool stale = false;
  std::unique_ptr<model> weights;
  std::string backend;  // where it runs: "cpu", "cuda", "vulkan"
  std::unique_ptr<context> ctx;
  // A split model's last stage (node/pipeline-link.h): the stages before it run each decode's
  // batch first, and every cache change is made on theirs too. Null for a whole model.
  std::shared_ptr<pipeline_link> link;
  int32_t n_ctx_per_slot = 0;
  uint64_t bytes = 0;          // file size + context memory: what it counts against the budget
  uint64_t last_used = 0;      // a tick of the engine, for least-recently-used unloading
  std::vector<bool> seq_used;  // [slots]: held by a choice
  // What constrained jobs need of the model, made on first use: the vocabulary's byte trie for
  // grammar matchers, the tool-call format its own chat template writes (or why none).
  std::shared_ptr<const grammar_vocab> grammar_tokens;
  std::optional<result<tool_call_format>> tool_format;
  std::vector<std::unique_ptr<batch_attempt>> running;  // every choice holds a sequence
  // For free sequences, first come first served: an attempt of n choices waits for n of them.
  std::deque<std::unique_ptr<batch_attempt>> waiting;

  bool busy() const { return !waiting.empty() || !running.empty(); }
  uint64_t pipeline_id() const { return link ? link->assignment().pipeline_id : 0; }
  // The cache changes, made on every stage's cache.
  void seq_clear(int32_t seq) {
    ctx->seq_clear(seq);
    if (link) link->seq_clear(seq);
  }
  result<void> seq_copy(int32_t src, int32_t dst) {
    auto r = ctx->seq_copy(src, dst);
    if (r && link) link->seq_copy(src, dst);
    return r;
  }
  // decode() of the batch: through the stages before this one first, for a split model.
  result<void> decode(std::span<const batch_token> batch) {
    if (!link) return ctx->decode(batch);
    const model_hparams& hp = weights->hparams();
    auto rows = link->run(batch, uint32_t(hp.n_embd), context_params{}.n_batch);
    if (!rows) return error{rows.message()};
    return ctx->decode(batch, *rows);
  }
  int32_t n_free_seqs() const {
    return int32_t(std::count(seq_used.begin(), seq_used.end(), false));
  }
  // Takes `a` out of the running list.
  std::unique_ptr<batch_attempt> take(const batch_attempt* a) {
    for (auto it = running.begin(); it != running.end(); ++it) {
      if (it->get() != a) continue;
      std::unique_ptr<batch_attempt> out = std::move(*it);
      running.erase(it);
      return out;
    }
    return nullptr;
  }
};

class batch_engine final : public catalog_engine {
 public:
  batch_engine(const batch_engine_config& cfg, job_sink& sink)
      : catalog_engine(cfg, sink), cfg_(cfg), sink_(sink) {
    if (cfg_.slots < 1) cfg_.slots = 1;
    // A model file truncated or rewritten while loaded (CPU weights are mapped) costs the jobs
    // using it, not the node: see file_changed().
    mapped_file_survive_truncation();
    budget_ = cfg_.memory_budget > 0 ? cfg_.memory_budget : system_info_read().mem_available;
    plan_backend();
    worker_ = std::thread([this] { run(); });
  }
  ~batch_engine() override { stop(); }

  std::string name() const override { return plan_.backend_name; }

  std::vector<wire::model_info> models() const override {
    const std::shared_ptr<const model_catalog> catalog = catalog_.get();
    auto out = catalog->models();
    for (auto& m : out) {
      if (const model_catalog_entry* e = catalog->find(m.name); e && e->file)
        layout_needs(*e->file, m.layout);
    }
    std::lock_guard lk(loaded_mu_);
    for (auto& m : out) m.loaded = loaded_names_.contains(m.name);
    return out;
  }

  // What this node needs of a model with its settings (PROTOCOL.md 17): whole, as a job's load
  // counts it, and per stage, for the broker's split planner.
  void layout_needs(const model_file& f, wire::model_layout& l) const {
    const model_hparams& hp = f.hparams;
    if (hp.n_layer < 1) return;
    const context_params cp =
        gpu::device_context_params(hp, cfg_.n_ctx_per_slot, int32_t(cfg_.slots));
    l.whole_bytes = model_memory_budgeted(model_weights_counted(f.gguf, hp),
                                          plan_.backend == gpu::backend_kind::cpu, hp, cp);
    const memory_estimate whole = memory_needed(hp, 0, cp, {0, hp.n_layer});
    const memory_estimate first = memory_needed(hp, 0, cp, {0, 1});
    l.kv_bytes_per_layer = whole.cache / uint64_t(hp.n_layer);
    l.scratch_bytes = first.scratch;
    l.logits_bytes = whole.scratch > first.scratch ? whole.scratch - first.scratch : 0;
  }

  uint64_t prompt_tokens_decoded() const override { return prompt_tokens_decoded_.load(); }

  void set_stage_memory(uint64_t bytes) override { stage_memory_ = bytes; }

  void set_pipelines(pipeline_lookup lookup) override {
    std::lock_guard lk(pipelines_mu_);
    pipelines_ = std::move(lookup);
  }

  // On the stage host's thread: the catalog's entry (a snapshot) and the node's backend, as a
  // job's load takes them, with only the stage's layers bound.
  result<std::unique_ptr<model>> load_stage(const std::string& name, layer_range r) override {
    const std::shared_ptr<const model_catalog> catalog = catalog_.get();
    const model_catalog_entry* entry = catalog->find(name);
    if (!entry) return error{"model '" + name + "' is not in this node's models directory"};
    gpu::backend_choice choice;
    choice.kind = plan_.backend;
    choice.device = plan_.device;
    choice.threads = cfg_.threads;
    model_params mp;
    mp.layers = r;
    try {
      auto loaded = gpu::load_model_on(entry->path, choice, mp);
      if (!loaded.note.empty()) spdlog::warn("model {}: {}", name, loaded.note);
      return std::move(loaded.model);
    } catch (const std::exception& e) {
      return error{e.what()};
    }
  }

  void submit(const wire::job_assign& job) override {
    {
      std::lock_guard lk(mu_);
      if (!stopping_) {
        inbox_.push_back(job);
        cv_.notify_one();
        return;
      }
    }
    report_failed({job.job_id, job.attempt}, "the engine has stopped");
  }

  void cancel(const wire::job_ref& ref) override {
    std::lock_guard lk(mu_);
    if (stopping_) return;
    cancels_.push_back(ref);
    cv_.notify_one();
  }

  std::vector<wire::job_ref> stop() override {
    {
      std::lock_guard lk(mu_);
      if (stopping_) return {};
      stopping_ = true;
      stop_flag_.store(true);
      cv_.notify_one();
    }
    worker_.join();
    std::vector<wire::job_ref> out;
    for (const auto& cm : models_) {
      for (const auto& a : cm->running) out.push_back(a->ref);
      for (const auto& a : cm->waiting) out.push_back(a->ref);
    }
    for (const auto& j : inbox_) out.push_back({j.job_id, j.attempt});
    return out;
  }

 private:
  // job_sink::failed: "" when the node failed, else why the request itself cannot run.
  void report_failed(const wire::job_ref& ref, std::string error, std::string stop_reason = {}) {
    sink_.failed(ref, std::move(error), std::move(stop_reason));
  }
  void report_invalid(const wire::job_ref& ref, std::string error) {
    report_failed(ref, std::move(error), wire::stop_reason_invalid_request);
  }

  // Plain mode: reports the held tokens of the attempt's one choice and their text.
  void report_held(batch_attempt& a) {
    batch_choice& c = *a.choices[0];
    if (c.held_tokens == 0) return;
    sink_.tokens(a.ref, a.n_sent, c.held_tokens, std::move(c.held_text));
    a.n_sent += c.held_tokens;
    c.held_tokens = 0;
    c.held_text.clear();
  }
  // Events mode: reports the tokens the step sampled and their lines (never lines without a
  // token: every choice still running samples one each step).
  void report_step(batch_attempt& a) {
    if (a.step_tokens == 0) return;
    sink_.tokens(a.ref, a.n_sent, a.step_tokens, std::move(a.step_lines));
    a.n_sent += a.step_tokens;
    a.step_tokens = 0;
    a.step_lines.clear();
  }

  // Ends an attempt, frees the sequences its choices hold in `cm` and reports its end.
  void finish(batch_model& cm, std::unique_ptr<batch_attempt> a, wire::job_state state,
              std::string_view reason, std::string error = {}) {
    for (auto& c : a->choices) {
      if (c->seq < 0) continue;
      cm.seq_clear(c->seq);
      cm.seq_used[size_t(c->seq)] = false;
      c->seq = -1;
      c->cells.clear();
    }
    if (a->events()) {
      report_step(*a);
    } else {
      report_held(*a);  // n_gen counts them
    }
    wire::job_final f;
    f.job_id = a->ref.job_id;
    f.attempt = a->ref.attempt;
    f.state = state;
    f.stop_reason = std::string(reason);
    f.error = std::move(error);
    f.n_prompt = a->started() ? uint32_t(a->prompt.size()) : 0;
    f.n_gen = uint32_t(a->n_sent);
    f.prompt_ms = a->prompt_ms;
    f.gen_ms = a->started() ? ms_since(a->t_gen, clock::now()) : 0;
    sink_.finished(f);
  }
  // Ends a running attempt (see finish).
  void finish_running(batch_model& cm, const batch_attempt* a, wire::job_state state,
                      std::string_view reason, std::string error = {}) {
    finish(cm, cm.take(a), state, reason, std::move(error));
  }
  // Ends every running attempt of `cm` alike.
  void finish_all_running(batch_model& cm, wire::job_state state, std::string_view reason,
                          const std::string& error) {
    while (!cm.running.empty()) finish_running(cm, cm.running.front().get(), state, reason, error);
  }

  // A normal end. Plain mode: what the text streams still hold back (an unfinished character as
  // U+FFFD) goes with the held tokens, which exist whenever there is such text, as generate()
  // passes it on. Events mode: every choice wrote its closing lines when it ended.
  void complete(batch_model& cm, const batch_attempt* running) {
    std::unique_ptr<batch_attempt> a = cm.take(running);
    batch_choice& c0 = *a->choices[0];
    if (!a->events()) c0.held_text += batch_attempt::visible(c0, c0.gen->finish(), true);
    const stop_reason reason = c0.gen->reason();
    finish(cm, std::move(a), wire::job_state::completed, stop_reason_name(reason));
  }

  void unload(size_t index) {
    const std::string name = models_[index]->name;
    models_.erase(models_.begin() + ptrdiff_t(index));
    {
      std::lock_guard lk(loaded_mu_);
      loaded_names_.erase(name);
    }
    spdlog::info("unloaded model {}", name);
    sink_.models_changed();
  }

  // The device models load on, chosen once (the node advertises it as its engine).
  void plan_backend() {
    gpu::backend_choice choice;
    choice.kind = cfg_.backend;
    choice.device = cfg_.device;
    plan_ = gpu::backend_plan_for(choice, gpu::device_registry());
    if (plan_.backend != gpu::backend_kind::cpu) {
      spdlog::info("models load on {} device {}: {} ({} of device memory)", plan_.backend_name,
                   plan_.device, plan_.device_name, format_bytes(plan_.device_memory));
    } else if (!plan_.note.empty()) {
      // Asking for auto on a machine without a GPU is normal; asking for vulkan is not.
      if (choice.kind == gpu::backend_kind::automatic)
        spdlog::info("{}", plan_.note);
      else
        spdlog::warn("{}", plan_.note);
    }
  }

  uint64_t bytes_loaded() const {
    uint64_t n = 0;
    for (const auto& cm : models_) n += cm->bytes;
    return n;
  }

  // Unloads idle models, least recently used first, until `need` more bytes fit the budget.
  // Unloads nothing and returns an error when that cannot be done.
  std::string make_room(const std::string& name, uint64_t need) {
    // What the node's pipeline stages hold is not this engine's to give.
    const uint64_t stages = stage_memory_.load();
    const uint64_t budget = budget_ - std::min(budget_, stages);
    const std::string of_stages =
        stages > 0 ? " (" + format_bytes(stages) + " of it held by pipeline stages)" : "";
    if (need > budget) {
      return "model '" + name + "' needs " + format_bytes(need) +
             " (weights and context) but the memory budget is " + format_bytes(budget_) + of_stages;
    }
    uint64_t idle = 0;
    for (const auto& cm : models_)
      if (!cm->busy()) idle += cm->bytes;
    const uint64_t used = bytes_loaded();
    if (used - idle + need > budget) {
      std::string busy;
      for (const auto& cm : models_)
        if (cm->busy()) busy += (busy.empty() ? "" : ", ") + cm->name;
      return "model '" + name + "' needs " + format_bytes(need) + " but only " +
             format_bytes(budget - std::min(budget, used - idle)) + " of the memory budget of " +
             format_bytes(budget_) + of_stages + " can be freed while models in use (" + busy +
             ") stay loaded";
    }
    while (bytes_loaded() + need > budget) {
      size_t lru = models_.size();
      for (size_t i = 0; i < models_.size(); ++i) {
        if (models_[i]->busy()) continue;
        if (lru == models_.size() || models_[i]->last_used < models_[lru]->last_used) lru = i;
      }
      unload(lru);  // the check above guarantees an idle model is left
    }
    return {};
  }

  // Why the file the model was read from is not what was read any more ("" when it is): it was
  // rewritten or truncated in place (the mapped weights then read other bytes, or zeros past the
  // new end: mapped-file.h), so what the model computes from it is not the model's. A file put in
  // its place by a rename, or removed, leaves the mapped one intact: see ensure_loaded().
  static std::string file_changed(const batch_model& cm) {
    if (!cm.file->modified()) return {};
    return "model '" + cm.name + "': its file " + cm.path +
           " changed on disk (rewritten or truncated) while loaded; the model is unloaded and "
           "read again for the next job";
  }

  // Fails every attempt of `cm` (running or waiting) because its file changed, and marks it for
  // unloading.
  void fail_changed(batch_model& cm, const std::string& why) {
    size_t n = cm.running.size() + cm.waiting.size();
    finish_all_running(cm, wire::job_state::failed, wire::stop_reason_model_changed, why);
    for (auto& a : cm.waiting)
      finish(cm, std::move(a), wire::job_state::failed, wire::stop_reason_model_changed, why);
    cm.waiting.clear();
    cm.stale = true;
    // Read the directory now rather than at the next rescan: a file that no longer parses stops
    // being advertised, so the broker does not send more attempts here to fail on it.
    catalog_.rescan();
    if (n == 0) {
      spdlog::info("{}", why);
    } else {
      spdlog::error("{} ({} attempts using it failed; {} reads past a file's end survived)", why, n,
                    mapped_file_faults());
    }
  }

  void unload(const batch_model& cm) {
    for (size_t i = 0; i < models_.size(); ++i)
      if (models_[i].get() == &cm) return unload(i);
  }

  // The loaded model of that catalog entry, loading it first if needed; nullptr and `error` set
  // when it cannot be loaded.
  // `link`: the model's last stage of that pipeline, not the whole model.
  batch_model* ensure_loaded(const model_catalog_entry& entry, std::string& error,
                             const std::shared_ptr<pipeline_link>& link = nullptr) {
    const uint64_t pipeline_id = link ? link->assignment().pipeline_id : 0;
    for (auto& cm : models_) {
      if (cm->name != entry.info.name || cm->pipeline_id() != pipeline_id) continue;
      if (link && cm->link != link && !cm->busy()) {
        // Planned again while idle: the same layers go on with the new stages (fresh caches
        // everywhere); other layers are loaded anew.
        if (link->range() == cm->link->range()) {
          cm->link = link;
          cm->ctx->clear();
          link->open(int32_t(cfg_.slots), cm->n_ctx_per_slot);
          return cm.get();
        }
        unload(*cm);
        break;
      }
      if (const std::string why = file_changed(*cm); !why.empty()) {
        fail_changed(*cm, why);
      } else if (cm->file->replaced() && !cm->busy()) {
        // Another file under the model's name (renamed into place, or removed): the loaded one is
        // intact, so attempts already on it run to their end, and the new file is read once the
        // model is idle.
        spdlog::info("model {}: {} was replaced or removed; reading it again", cm->name, cm->path);
      } else {
        return cm.get();
      }
      unload(*cm);
      break;
    }

    auto cm = std::make_unique<batch_model>();
    cm->name = entry.info.name;
    cm->path = entry.path;
    cm->file = std::make_unique<model_file_watch>(entry.path);
    cm->link = link;
    int32_t fitted_ctx = 0;  // what the device has room for, when less than the default
    try {
      gpu::backend_choice choice;
      choice.kind = plan_.backend;
      choice.device = plan_.device;
      choice.threads = cfg_.threads;
      choice.n_ctx_per_seq = cfg_.n_ctx_per_slot;
      choice.n_seq = int32_t(cfg_.slots);
      // The CPU backend maps the weights and pages them in on use, so this is cheap enough to do
      // before knowing whether the model fits. The file is the catalog's handle while it is the
      // file the scan read (the same size and time as the one the watch holds open), so a load
      // opens it once; one changed since the scan is opened again, as it now is.
      model_params mp;
      if (link) mp.layers = link->range();
      auto loaded = entry.file && entry.stamp != 0 && cm->file->open_stamp() == entry.stamp
                        ? gpu::load_model_on(*entry.file, choice, mp)
                        : gpu::load_model_on(entry.path, choice, mp);
      if (!loaded.note.empty()) spdlog::warn("model {}: {}", cm->name, loaded.note);
      cm->backend = loaded.backend;
      cm->weights = std::move(loaded.model);
      fitted_ctx = loaded.n_ctx_per_seq;
    } catch (const std::exception& e) {
      error = e.what();
      return nullptr;
    }
    const model_hparams& hp = cm->weights->hparams();
    // fitted_ctx is set only when the configuration left the size to the model.
    cm->n_ctx_per_slot =
        gpu::context_per_seq(hp, fitted_ctx > 0 ? fitted_ctx : cfg_.n_ctx_per_slot);
    const int64_t n_ctx = int64_t(cm->n_ctx_per_slot) * cfg_.slots;
    if (n_ctx > INT32_MAX) {
      error = "a context of " + std::to_string(cfg_.slots) + " slots × " +
              std::to_string(cm->n_ctx_per_slot) + " tokens is too large";
      return nullptr;
    }
    const context_params cp =
        gpu::device_context_params(hp, cm->n_ctx_per_slot, int32_t(cfg_.slots));
    // A stage counts what it binds: its layers' weights and cache.
    cm->bytes = link ? memory_needed(hp, cm->weights->weight_bytes(), cp, link->range()).total()
                     : model_memory_budgeted(model_weights_counted(cm->weights->file(), hp),
                                             cm->backend == "cpu", hp, cp);
    error = make_room(cm->name, cm->bytes);
    if (!error.empty()) return nullptr;
    try {
      cm->ctx = std::make_unique<context>(*cm->weights, cp);
    } catch (const std::exception& e) {
      error = "model '" + cm->name + "': " + e.what();
      return nullptr;
    }
    // One token through the model now: what the backend prepares on first use is ready before
    // the first attempt's prompt, and a model whose forward pass fails fails here, at load.
    const auto warm_start = std::chrono::steady_clock::now();
    if (auto w = cm->ctx->warm_up(); !w) {
      error = "model '" + cm->name + "': " + w.message();
      return nullptr;
    }
    const double warm_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_start).count();
    cm->seq_used.assign(cfg_.slots, false);
    if (link) {
      link->open(int32_t(cfg_.slots), cm->n_ctx_per_slot);
      spdlog::info("model {}: {}", cm->name, link->describe());
    }
    spdlog::info("loaded model {} on {} ({} slots of {} tokens, {}; warm-up {:.2f} s)", cm->name,
                 cm->backend, cfg_.slots, cm->n_ctx_per_slot, format_bytes(cm->bytes), warm_s);
    models_.push_back(std::move(cm));
    ++loads_;
    {
      std::lock_guard lk(loaded_mu_);
      loaded_names_.insert(models_.back()->name);
    }
    sink_.models_changed();
    return models_.back().get();
  }

  // Checks a new attempt and queues it on its model, or reports it failed.
  void admit(const wire::job_assign& job) {
    const wire::job_ref ref{job.job_id, job.attempt};
    const std::shared_ptr<const model_catalog> catalog = catalog_.get();
    const model_catalog_entry* entry = catalog->find(job.model);
    if (!entry)
      return report_failed(ref, "model '" + job.model + "' is not in this node's models directory");
    catalog_.touch(job.model);  // a store model used: the last the store's limit evicts
    // The messages are checked where they are formatted (chat_prompt_prepare): a model's own
    // Jinja template takes roles the built-in formats refuse (tool results).
    const std::vector<chat_message> messages = engine_messages(job.messages);
    const bool chat = !messages.empty();
    if (chat && !job.prompt.empty()) {
      return report_invalid(ref, "the job has both a prompt and chat messages; send one of them");
    }
    if (auto e = wire::job_params_check(job.params); !e.ok()) return report_invalid(ref, e.message);
    const wire::api_params& api = job.params.api;
    const bool events = api.events;
    if (api.n < 1 || (api.n > 1 && !events)) {
      return report_invalid(ref, "n must be 1 without output events (api.events), and >= 1; got " +
                                     std::to_string(api.n));
    }
    if (uint32_t(api.n) > cfg_.slots) {
      // Its choices run side by side, one sequence each: it could never start here. Not the
      // request's fault (a node with more slots runs it), so the broker may try another.
      return report_failed(ref, "n = " + std::to_string(api.n) + " choices need " +
                                    std::to_string(api.n) + " sequences but this node runs " +
                                    std::to_string(cfg_.slots) + " at once (slots)");
    }
    if (!chat && job.prompt.empty()) return report_invalid(ref, "the prompt is empty");
    if (running(ref)) {
      return report_failed(ref, "attempt " + std::to_string(job.attempt) + " of job " +
                                    std::to_string(job.job_id) + " is already running");
    }

    std::shared_ptr<pipeline_link> link;
    if (job.pipeline_id != 0) {
      pipeline_lookup lookup;
      {
        std::lock_guard lk(pipelines_mu_);
        lookup = pipelines_;
      }
      link = lookup ? lookup(job.pipeline_id) : nullptr;
      if (!link) {
        return report_failed(
            ref, "this node holds no last stage of pipeline " + std::to_string(job.pipeline_id));
      }
      if (link->assignment().model != job.model) {
        return report_failed(ref, "pipeline " + std::to_string(job.pipeline_id) + " runs model '" +
                                      link->assignment().model + "', not '" + job.model + "'");
      }
    }
    std::string error;
    const uint64_t loads_before = loads_;
    const auto t_load = clock::now();
    batch_model* cm = ensure_loaded(*entry, error, link);
    if (!cm) return report_failed(ref, error);
    const double load_ms = loads_ != loads_before ? ms_since(t_load, clock::now()) : 0;
    cm->last_used = ++tick_;
    // As `hearth run` does (engine/prompt.h).
    std::vector<int32_t> prompt;
    std::optional<think_filter> think;
    if (chat) {
      // Tools are written into the prompt whatever tool_choice says ("none" included, as OpenAI
      // does); whether the output is parsed for calls is constrain()'s.
      auto prepared = chat_prompt_prepare(*cm->weights, messages,
                                          {.template_name = job.params.chat_template,
                                           .enable_thinking = job.params.enable_thinking,
                                           .tools_json = api.tools,
                                           .template_kwargs_json = api.template_kwargs});
      if (const auto* e = std::get_if<prompt_error>(&prepared)) {
        return report_invalid(ref, chat_prompt_error(cm->name, job.params, *e));
      }
      auto& p = std::get<chat_prompt>(prepared);
      prompt = std::move(p.tokens);
      // Events mode keeps the think block as reasoning events; plain text leaves it out unless
      // show_thinking asks for it.
      think = p.thinking_filter(events ? false : job.params.show_thinking);
    } else {
      prompt = text_prompt_tokens(*cm->weights, job.prompt, false);
    }
    if (prompt.empty()) return report_invalid(ref, "the prompt is empty (no tokens)");
    if (int64_t(prompt.size()) > cm->n_ctx_per_slot) {
      return report_failed(ref,
                           "the prompt has " + std::to_string(prompt.size()) +
                               " tokens but a slot holds " + std::to_string(cm->n_ctx_per_slot),
                           wire::stop_reason_prompt_too_long);
    }
    auto attempt = std::make_unique<batch_attempt>(ref, std::move(prompt),
                                                   wire::generation_params_of(job.params), api,
                                                   cm->weights->hparams().n_vocab);
    for (auto& c : attempt->choices) c->think = think;
    if (std::string why = constrain(*cm, *attempt); !why.empty()) return report_invalid(ref, why);
    attempt->load_ms = load_ms;
    cm->waiting.push_back(std::move(attempt));
  }

  // The tool-call format the model's own chat template writes (engine/chat/tool-calls.h), or why
  // it has none.
  static result<tool_call_format> tool_format_of(const model& m) {
    auto program = model_chat_program(m);
    if (!program) return program.err();
    const vocab& voc = m.vocab();
    auto token_text = [&](int32_t id) { return id >= 0 ? voc.text(id) : std::string(); };
    const nlohmann::ordered_json base = {{"bos_token", token_text(voc.bos())},
                                         {"eos_token", token_text(voc.eos())}};
    return tool_call_format_derive(**program, base);
  }

  // Sets up the request's constraints and parsers on every choice of `a`: the grammar its output
  // must match (a valid call for tool_choice "required" or a named function, which goes before
  // json_schema and grammar; else json_schema's; else the GBNF grammar), compiled once for all
  // its choices; the tool-call parser (events mode, tools offered, tool_choice not "none"); the
  // logprobs asked for. Returns why the request cannot run ("" when it can).
  std::string constrain(batch_model& cm, batch_attempt& a) {
    const wire::api_params& api = a.api;
    const bool offered = !api.tools.empty() && api.tool_choice != "none";
    const bool forced =
        offered && (api.tool_choice == "required" || api.tool_choice.starts_with("function:"));
    const tool_call_format* format = nullptr;
    if (offered && a.events()) {
      if (!cm.tool_format) cm.tool_format = tool_format_of(*cm.weights);
      if (cm.tool_format->ok()) {
        format = &cm.tool_format->value();
      } else if (forced) {
        return "tool_choice '" + api.tool_choice + "' asks for a tool call, but model '" + cm.name +
               "' cannot make one: " + cm.tool_format->message();
      }
    }
    std::string gbnf, what;
    if (forced && format) {
      const std::string_view choice = api.tool_choice == "required"
                                          ? std::string_view(api.tool_choice)
                                          : std::string_view(api.tool_choice).substr(9);
      auto g = tool_call_gbnf(*format, api.tools, choice, api.parallel_tool_calls);
      if (!g) return "tool_choice: " + g.message();
      gbnf = std::move(*g);
      what = "tool_choice";
    } else if (!api.json_schema.empty()) {
      auto g = json_schema_to_gbnf(api.json_schema);
      if (!g) return "json_schema: " + g.message();
      gbnf = std::move(*g);
      what = "json_schema";
    } else if (!api.grammar.empty()) {
      gbnf = api.grammar;
      what = "grammar";
    }
    std::shared_ptr<const grammar> compiled;
    if (!gbnf.empty()) {
      auto g = grammar_from_gbnf(gbnf);
      if (!g) return g.message().starts_with(what) ? g.message() : what + ": " + g.message();
      compiled = std::move(*g);
      if (!cm.grammar_tokens) cm.grammar_tokens = grammar_vocab::make(cm.weights->vocab());
    }
    for (auto& c : a.choices) {
      if (compiled) c->smp.set_grammar(compiled, cm.grammar_tokens);
      if (format) c->calls.emplace(*format, api.tools);
    }
    if (format) a.id_style = format->id_style;
    if (a.events() && api.logprobs) a.top_logprobs = api.top_logprobs;
    return {};
  }

  // The wire's messages as the engine's chat templates take them (every field).
  static std::vector<chat_message> engine_messages(const std::vector<wire::chat_message>& wire) {
    std::vector<chat_message> out;
    out.reserve(wire.size());
    for (const auto& m : wire) {
      chat_message e{.role = m.role,
                     .content = m.content,
                     .name = m.name,
                     .tool_call_id = m.tool_call_id,
                     .reasoning_content = m.reasoning_content,
                     .tool_calls = {}};
      for (const auto& c : m.tool_calls)
        e.tool_calls.push_back({.id = c.id, .name = c.name, .arguments = c.arguments});
      out.push_back(std::move(e));
    }
    return out;
  }

  // Why a chat job's messages could not be made a prompt, as its error says it: the messages'
  // fault, or the template's own refusal (its raise_exception message), as they say it.
  static std::string chat_prompt_error(const std::string& model, const wire::job_params& params,
                                       const prompt_error& e) {
    if (e.code == prompt_error_code::messages_invalid ||
        e.code == prompt_error_code::template_error) {
      return e.message;
    }
    return "cannot format the chat messages for model '" + model + "': " + e.message +
           (params.chat_template.empty() ? "; name a template or send a prompt instead" : "");
  }

  bool running(const wire::job_ref& ref) const {
    for (const auto& cm : models_) {
      for (const auto& a : cm->running)
        if (same_ref(a->ref, ref)) return true;
      for (const auto& a : cm->waiting)
        if (same_ref(a->ref, ref)) return true;
    }
    return false;
  }

  void cancel_now(const wire::job_ref& ref) {
    for (auto& cm : models_) {
      for (const auto& a : cm->running) {
        if (same_ref(a->ref, ref)) {
          finish_running(*cm, a.get(), wire::job_state::cancelled,
                         stop_reason_name(stop_reason::cancelled));
          return;
        }
      }
      for (auto it = cm->waiting.begin(); it != cm->waiting.end(); ++it) {
        if (same_ref((*it)->ref, ref)) {
          auto a = std::move(*it);
          cm->waiting.erase(it);
          finish(*cm, std::move(a), wire::job_state::cancelled,
                 stop_reason_name(stop_reason::cancelled));
          return;
        }
      }
    }
  }

  // Plain mode: one token of the attempt's one choice from `logits`, streamed.
  void advance_plain(batch_attempt& a, const float* logits) {
    batch_choice& c = *a.choices[0];
    if (auto piece = c.gen->step(logits)) {
      c.held_text += batch_attempt::visible(c, std::move(piece->text), false);
      ++c.held_tokens;
      if (!batch_attempt::holds_back(c, *piece)) report_held(a);
    }
  }

  // Events mode: the lines a choice's text makes: reasoning split off by the think filter, the
  // rest content. `last`: the choice ended, so what the filter holds back comes out too.
  static void write_text(batch_attempt& a, batch_choice& c, std::string_view text, bool last) {
    think_filter::split parts;
    if (c.think) {
      parts = c.think->push(text);
      if (last) {
        think_filter::split rest = c.think->flush();
        parts.reasoning += rest.reasoning;
        parts.answer += rest.answer;
      }
    } else {
      parts.answer = std::string(text);
    }
    auto line = [&](wire::output_event_kind kind, std::string body) {
      if (body.empty()) return;
      wire::output_event e;
      e.choice = c.index;
      e.kind = kind;
      e.text = std::move(body);
      a.step_lines += wire::output_event_line(e);
    };
    line(wire::output_event_kind::reasoning, std::move(parts.reasoning));
    if (!c.calls) return line(wire::output_event_kind::content, std::move(parts.answer));
    tool_call_parser::piece found = c.calls->feed(parts.answer);
    if (last) {
      tool_call_parser::piece rest = c.calls->finish();
      found.content += rest.content;
      for (auto& call : rest.calls) found.calls.push_back(std::move(call));
    }
    line(wire::output_event_kind::content, std::move(found.content));
    for (auto& call : found.calls) {
      wire::output_event e;
      e.choice = c.index;
      e.kind = wire::output_event_kind::tool_call;
      e.call.id = tool_call_id(a.n_call_ids++, a.id_style, a.params.sampling.seed);
      e.call.name = std::move(call.name);
      e.call.arguments = std::move(call.arguments);
      a.step_lines += wire::output_event_line(e);
      ++c.n_calls;
    }
  }

  // Events mode, api.logprobs: the line of the token `c` just sampled, its text and bytes from
  // the vocabulary.
  static void write_logprobs(batch_attempt& a, batch_choice& c, const vocab& voc) {
    const token_logprobs lp = c.smp.last_logprobs(a.top_logprobs);
    auto entry = [&](int32_t token, float logprob) {
      wire::token_logprob t;
      t.token = voc.token_to_piece(token, false);
      t.bytes.assign(t.token.begin(), t.token.end());
      t.logprob = logprob;
      return t;
    };
    wire::output_event e;
    e.choice = c.index;
    e.kind = wire::output_event_kind::logprobs;
    wire::sampled_logprob p;
    p.sampled = entry(lp.token, lp.logprob);
    for (const auto& [token, logprob] : lp.top) p.top.push_back(entry(token, logprob));
    e.probs.push_back(std::move(p));
    a.step_lines += wire::output_event_line(e);
  }

  // OpenAI's finish_reason of an ended choice.
  static std::string finish_reason_of(const batch_choice& c) {
    switch (c.gen->reason()) {
      case stop_reason::max_tokens:
      case stop_reason::context_full:
        return "length";
      default:
        return c.n_calls > 0 ? "tool_calls" : "stop";
    }
  }

  // Events mode: one token of choice `c` from `logits`, and its lines; a choice that ends writes
  // what its streams held back and its finish line, and frees its sequence.
  void advance_event(batch_model& cm, batch_attempt& a, batch_choice& c, const float* logits) {
    ++a.step_tokens;  // sampled: a generated token or the end-of-generation one
    if (auto piece = c.gen->step(logits)) {
      write_text(a, c, piece->text, false);
      // The end-of-generation token is no part of the answer, so it has no entry (as OpenAI).
      if (a.top_logprobs >= 0) write_logprobs(a, c, cm.weights->vocab());
    }
    if (!c.gen->done()) return;
    write_text(a, c, c.gen->finish(), true);
    wire::output_event e;
    e.choice = c.index;
    e.kind = wire::output_event_kind::finish;
    e.text = finish_reason_of(c);
    a.step_lines += wire::output_event_line(e);
    cm.seq_clear(c.seq);
    cm.seq_used[size_t(c.seq)] = false;
    c.seq = -1;
    c.cells.clear();
    c.ended = true;
  }

  // Waiting attempts take free sequences, in order: one per choice.
  void place_waiting(batch_model& cm) {
    while (!cm.waiting.empty()) {
      batch_attempt& a = *cm.waiting.front();
      if (cm.n_free_seqs() < int32_t(a.choices.size())) return;
      size_t s = 0;
      for (auto& c : a.choices) {
        while (cm.seq_used[s]) ++s;
        cm.seq_used[s] = true;
        a.place(cm.weights->vocab(), *c, int32_t(s), cm.n_ctx_per_slot);
      }
      cm.running.push_back(std::move(cm.waiting.front()));
      cm.waiting.pop_front();
    }
  }

  // One decode() for every attempt of the model: prompts of those that joined (once for all their
  // choices), else one token per choice still running.
  void step(batch_model& cm) {
    cm.last_used = ++tick_;
    place_waiting(cm);
    batch_.clear();
    int32_t n_rows = 0;
    for (const auto& a : cm.running) {
      const bool joining = !a->started();
      for (const auto& c : a->choices) {
        c->row = -1;
        if (c->ended || (joining && c->index > 0)) continue;
        c->batch_from = batch_.size();
        c->gen->append_batch(batch_);
        c->batch_to = batch_.size();
        c->row = n_rows++;
      }
      if (joining) prompt_tokens_decoded_ += a->prompt.size();
    }
    if (batch_.empty()) return;

    const auto t0 = clock::now();
    const uint64_t faults = mapped_file_faults();
    auto r = cm.decode(batch_);
    // A split model whose stages were planned again (a stage's node died or left: the new
    // version closed the link): the same sequences go on on the new stages, their tokens replayed
    // there first, and the step again. A stage's own error fails the step as any decode error.
    if (!r && cm.link && cm.link->closed()) {
      const auto t_failed = clock::now();
      while (!r && cm.link && cm.link->closed() && !stop_flag_.load()) {
        if (auto f = failover(cm); !f) {
          spdlog::warn("model {}: the step failed and cannot go on: {}", cm.name, f.message());
          r = error{r.message() + "; " + f.message()};
          break;
        }
        r = cm.decode(batch_);
      }
      if (r) {
        // The cluster tests read this line: when the step that failed ran again.
        spdlog::info(
            "model {}: the step failed {:.0f} ms after it began and ran again {:.0f} ms later",
            cm.name, ms_since(t0, t_failed), ms_since(t_failed, clock::now()));
      }
    }
    // Checked after the pass that read the weights: a change during it shows here, before any
    // of its tokens is streamed. A read that faulted without a change to see (an I/O error, or
    // the file put back as it was) read zeros all the same.
    if (const std::string why = file_changed(cm); !why.empty()) return fail_changed(cm, why);
    if (mapped_file_faults() != faults) {
      return fail_changed(cm, "model '" + cm.name + "': reading its file " + cm.path +
                                  " failed while loaded (an I/O error, or a truncation); the "
                                  "model is unloaded and read again for the next job");
    }
    if (!r) {
      finish_all_running(cm, wire::job_state::failed, "", "decoding failed: " + r.message());
      // A pipeline's step that failed leaves the other stages' caches unknown: the model's last
      // stage is loaded again, with a fresh link, for the next job.
      if (cm.link) cm.stale = true;
      return;
    }
    const auto t1 = clock::now();
    if (cm.link) {
      for (const auto& a : cm.running) {
        for (const auto& c : a->choices) {
          if (c->row < 0) continue;
          for (size_t i = c->batch_from; i < c->batch_to; ++i) c->cells.push_back(batch_[i].token);
        }
      }
    }
    std::vector<const batch_attempt*> ended;
    std::vector<std::pair<const batch_attempt*, std::string>> broken;
    for (const auto& ap : cm.running) {
      batch_attempt& a = *ap;
      const bool joined = !a.started();
      batch_choice& c0 = *a.choices[0];
      if (joined) {
        c0.gen->decoded();
        std::string copy_error;
        for (size_t i = 1; i < a.choices.size() && copy_error.empty(); ++i) {
          batch_choice& c = *a.choices[i];
          if (auto k = cm.seq_copy(c0.seq, c.seq); !k) {
            copy_error = "copying the prompt to choice " + std::to_string(i) + ": " + k.message();
          } else {
            c.cells = c0.cells;
            c.gen->prompt_copied();
          }
        }
        a.prompt_ms = ms_since(t0, clock::now());
        a.t_gen = t1;
        sink_.started(a.ref, uint32_t(a.prompt.size()), a.load_ms);
        if (!copy_error.empty()) {
          broken.emplace_back(&a, std::move(copy_error));
          continue;
        }
      } else {
        for (auto& c : a.choices)
          if (!c->ended) c->gen->decoded();
      }
      if (!a.events()) {
        advance_plain(a, cm.ctx->logits(c0.row));
        if (c0.gen->done()) ended.push_back(&a);
        continue;
      }
      for (auto& c : a.choices) {
        if (c->ended) continue;
        // A choice that joined samples from the prompt's logits, which choice 0's row holds.
        advance_event(cm, a, *c, cm.ctx->logits(joined ? c0.row : c->row));
      }
      report_step(a);
      if (a.all_ended()) ended.push_back(&a);
    }
    for (const batch_attempt* a : ended) complete(cm, a);
    for (auto& [a, why] : broken) finish_running(cm, a, wire::job_state::failed, "", why);
  }

  // A split model's pipeline failed a step: waits (k_failover_wait) for the broker to plan it
  // again (a newer assignment of the same pipeline), then opens the new stages and replays on
  // them every sequence's tokens so far, so that their caches hold what the old ones held. This
  // node's own cache is untouched (the failed step never reached it). A pipeline released, or
  // planned again without this node last, fails at once: the broker has taken its jobs back.
  result<void> failover(batch_model& cm) {
    const auto t0 = clock::now();
    const uint64_t id = cm.pipeline_id();
    const uint32_t old_version = cm.link->assignment().version;
    pipeline_lookup lookup;
    {
      std::lock_guard lk(pipelines_mu_);
      lookup = pipelines_;
    }
    std::shared_ptr<pipeline_link> link;
    while (!stop_flag_.load()) {
      link = lookup ? lookup(id) : nullptr;
      if (!link) {
        return error{"pipeline " + std::to_string(id) +
                     " was released, or planned again with another node last"};
      }
      if (link->assignment().version > old_version) break;
      link = nullptr;
      if (clock::now() - t0 > k_failover_wait) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!link) {
      return error{"pipeline " + std::to_string(id) + " was not planned again within " +
                   std::to_string(k_failover_wait.count()) + " s"};
    }
    if (link->range() != cm.link->range()) {
      return error{"pipeline " + std::to_string(id) + " was planned again with other layers on " +
                   "this node"};
    }
    cm.link = link;
    link->open(int32_t(cfg_.slots), cm.n_ctx_per_slot);
    std::vector<batch_token> replay;
    size_t n_seqs = 0;
    for (const auto& a : cm.running) {
      for (const auto& c : a->choices) {
        if (c->seq < 0 || c->cells.empty()) continue;
        ++n_seqs;
        for (size_t i = 0; i < c->cells.size(); ++i)
          replay.push_back({c->cells[i], int32_t(i), c->seq, false});
      }
    }
    const model_hparams& hp = cm.weights->hparams();
    if (!replay.empty()) {
      auto rows = link->run(replay, uint32_t(hp.n_embd), context_params{}.n_batch);
      // Planned again meanwhile (another stage's node died): the step's next decode fails at
      // once on the closed link, and the caller comes back here for the next version.
      if (!rows && link->closed()) return {};
      if (!rows) return error{"replaying on the new stages: " + rows.message()};
    }
    spdlog::info("model {}: {} (version {}): replayed {} tokens of {} sequences in {:.0f} ms",
                 cm.name, link->describe(), link->assignment().version, replay.size(), n_seqs,
                 ms_since(t0, clock::now()));
    return {};
  }

  // The next model with attempts, taking turns.
  batch_model* next_model() {
    for (size_t i = 0; i < models_.size(); ++i) {
      const size_t k = (rr_ + i) % models_.size();
      if (models_[k]->busy()) {
        rr_ = k + 1;
        return models_[k].get();
      }
    }
    return nullptr;
  }

  bool any_busy() const {
    return std::any_of(models_.begin(), models_.end(), [](const auto& cm) { return cm->busy(); });
  }

  void run() {
    for (;;) {
      std::vector<wire::job_assign> jobs;
      std::vector<wire::job_ref> cancels;
      {
        std::unique_lock lk(mu_);
        if (!any_busy()) {
          cv_.wait(lk, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty(); });
        }
        if (stopping_) return;
        jobs.swap(inbox_);
        cancels.swap(cancels_);
      }
      for (size_t i = 0; i < jobs.size(); ++i) {
        if (stop_flag_.load()) {
          // stop() reports what was never admitted from inbox_.
          std::lock_guard lk(mu_);
          inbox_.insert(inbox_.begin(), jobs.begin() + ptrdiff_t(i), jobs.end());
          return;
        }
        try {
          admit(jobs[i]);
        } catch (const std::exception& e) {
          report_failed({jobs[i].job_id, jobs[i].attempt}, e.what());
        }
      }
      for (const auto& r : cancels) cancel_now(r);
      batch_model* cm = next_model();
      if (!cm) continue;
      try {
        step(*cm);
      } catch (const std::exception& e) {
        spdlog::warn("model {}: {}", cm->name, e.what());
        finish_all_running(*cm, wire::job_state::failed, "", e.what());
      }
      if (cm->stale) unload(*cm);
    }
  }

  batch_engine_config cfg_;
  job_sink& sink_;
  uint64_t budget_ = 0;
  std::atomic<uint64_t> stage_memory_{0};  // set_stage_memory
  gpu::backend_plan plan_;                 // set before the worker starts, then only read

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> stop_flag_{false};  // stopping_, readable without mu_
  std::vector<wire::job_assign> inbox_;
  std::vector<wire::job_ref> cancels_;

  mutable std::mutex loaded_mu_;
  std::set<std::string> loaded_names_;

  std::mutex pipelines_mu_;
  pipeline_lookup pipelines_;

  // Worker state (read by stop() only after the worker has joined).
  std::vector<std::unique_ptr<batch_model>> models_;
  std::vector<batch_token> batch_;
  size_t rr_ = 0;
  uint64_t tick_ = 0;
  uint64_t loads_ = 0;  // models loaded so far
  std::atomic<uint64_t> prompt_tokens_decoded_{0};
  std::thread worker_;
};

}  // namespace

uint64_t model_memory_budgeted(const model_weights_count& w, bool mapped, const model_hparams& hp,
                               const context_params& cp) {
  const uint64_t weights =
      mapped ? w.bytes_touched(std::max(cp.n_seq_max, 1)) : w.bytes_other + w.bytes_experts;
  return memory_needed(hp, weights, cp).total();
}

std::unique_ptr<job_engine> make_batch_engine(const batch_engine_config& cfg, job_sink& sink) {
  return std::make_unique<batch_engine>(cfg, sink);
}

}  // namespace hearth::node
