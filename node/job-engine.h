// The node's side of inference: something that runs job attempts and reports their progress.
// Two implementations: the batch engine (engine/ on any backend, continuous batching) and the null
// engine (deterministic tokens at a fixed rate, no weights; for broker tests and benchmarks).
//
// Threading: submit(), cancel() and stop() are called from the node's network thread and return
// at once; the engine works on its own thread(s) and reports through job_sink from there. The
// sink must therefore be thread-safe and must not block for long.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/device.h"
#include "common/result.h"
#include "engine/context.h"
#include "engine/layer-range.h"
#include "engine/model-file.h"
#include "schema/messages.h"

namespace hearth::node {

class pipeline_link;
// The link of a pipeline whose last stage the node holds (node/stage-host.h), or null.
using pipeline_lookup = std::function<std::shared_ptr<pipeline_link>(uint64_t pipeline_id)>;

// Progress of attempts, reported by the engine from its own threads.
class job_sink {
 public:
  virtual ~job_sink() = default;
  // The prompt is tokenized and accepted; generation begins. `load_ms`: the model was loaded for
  // this attempt first, taking that long (0 when it was loaded already).
  virtual void started(const wire::job_ref& ref, uint32_t n_prompt, double load_ms) = 0;
  // Generated tokens [seq, seq + n_tokens) of the attempt and the text they make printable now
  // (possibly empty: an incomplete UTF-8 character or the start of a stop string is held back).
  virtual void tokens(const wire::job_ref& ref, uint64_t seq, uint32_t n_tokens,
                      std::string text) = 0;
  // The attempt ended: completed, failed (error says why) or cancelled. Exactly once per
  // submitted attempt, also for attempts that fail before starting (unknown model, bad params,
  // prompt too long ...). Not called for attempts returned by stop().
  virtual void finished(const wire::job_final& final) = 0;
  // finished() of a failed attempt. `stop_reason`: "" when the node failed (the broker tries
  // another node), or why the request itself cannot run (wire::stop_reason_invalid_request,
  // wire::stop_reason_prompt_too_long).
  void failed(const wire::job_ref& ref, std::string error, std::string stop_reason = {}) {
    wire::job_final f;
    f.job_id = ref.job_id;
    f.attempt = ref.attempt;
    f.state = wire::job_state::failed;
    f.stop_reason = std::move(stop_reason);
    f.error = std::move(error);
    finished(f);
  }
  // The set of loaded models changed (load on first use, least-recently-used unload), or a rescan
  // of the models directory found a change. Called from the engine's or the rescan's thread.
  virtual void models_changed() {}
};

class job_engine {
 public:
  virtual ~job_engine() = default;
  // "null", or the backend the batch engine loads models on: "cpu", "cuda" or "vulkan".
  virtual std::string name() const = 0;
  // The models it serves (every valid GGUF file in the models directory), with `loaded` set for
  // those in memory now.
  virtual std::vector<wire::model_info> models() const = 0;
  // Files of the models directory it does not serve, and why.
  virtual std::vector<wire::skipped_model> skipped() const = 0;
  // Starts an attempt. Never blocks on model loading or generation.
  virtual void submit(const wire::job_assign& job) = 0;
  // Stops an attempt within one token; it then finishes as cancelled. Unknown refs are ignored.
  virtual void cancel(const wire::job_ref& ref) = 0;
  // Stops every attempt without reporting them and returns those that had not finished, for the
  // node to hand back to the broker. The engine accepts no more work afterwards.
  virtual std::vector<wire::job_ref> stop() = 0;
  // Prompt tokens run through forward passes so far (all models): n choices of one prompt count
  // it once (their prompt cells are copied). For tests and metrics; any thread.
  virtual uint64_t prompt_tokens_decoded() const { return 0; }
  // Reads the models directory now instead of at the next periodic rescan (a transfer just put
  // a model into the store's views, or one was evicted); models_changed() when it changed.
  virtual void rescan_models() {}
  // A file of a model it serves with that digest (a store blob, or a file of the models
  // directory once hashed), for another node's copy; any thread.
  virtual std::optional<std::filesystem::path> file_by_digest(std::string_view digest) const {
    (void)digest;
    return std::nullopt;
  }
  // Stops serving a model of the models directory until restart (model_evict of a "local"
  // model: the user's file is never deleted); false when it serves no such model.
  virtual bool hide_model(std::string_view name) {
    (void)name;
    return false;
  }
  // Pipelines (schema/PROTOCOL.md 17). Where the engine finds the link of a job_assign's
  // pipeline_id; set once, before the first job. An engine without it fails such jobs.
  virtual void set_pipelines(pipeline_lookup lookup) { (void)lookup; }
  // What the node's pipeline stages (node/stage-host.h) hold now, weights and caches: the
  // engine's own models fit the rest of its memory budget. Any thread.
  virtual void set_stage_memory(uint64_t bytes) { (void)bytes; }
  // Layers `r` of a model it serves, loaded as a stage that is not the last (the stage host
  // computes with it); any thread.
  virtual result<std::unique_ptr<model>> load_stage(const std::string& name, layer_range r) {
    (void)r;
    return error{"this node's engine cannot hold a stage of model '" + name + "'"};
  }
};

struct batch_engine_config {
  std::string models_dir;
  uint32_t models_rescan_ms = 0;  // 0: the directory is scanned only at construction
  uint32_t slots = 1;             // attempts running at once (sequences of one batched context)
  uint64_t memory_budget = 0;     // bytes for loaded models and their contexts; 0: MemAvailable
  int32_t threads = 0;            // 0: all cores
  int32_t n_ctx_per_slot = 0;     // context cells per slot; 0: the model's (at most 4096)
  gpu::backend_kind backend = gpu::backend_kind::cpu;  // where models load (backends/select.h)
  int32_t device = -1;                                 // Vulkan device index; -1: the best
  // The model store's root, whose models are served too (model_catalog_options); "": none.
  std::string store_dir;
  std::vector<std::string> pinned;  // advertised as pinned
};

struct null_engine_config {
  std::string models_dir;
  double tokens_per_s = 1000;     // per attempt; <= 0: as fast as possible
  uint32_t models_rescan_ms = 0;  // 0: the directory is scanned only at construction
  std::string store_dir;          // as batch_engine_config's
  std::vector<std::string> pinned;
};

// Scans the models directory at construction; throws std::runtime_error if it cannot be read.
// What a model with a context of `cp` counts against the memory budget (batch_engine_config):
// memory_needed (engine/context.h) of its weights and context. Weights the CPU backend maps
// (`mapped`) are paged in on use, and of a mixture of experts a decoding step touches only the
// experts its tokens are routed to: those count as w.bytes_touched(cp.n_seq_max) (every other
// tensor and n_seq_max × n_expert_used experts' share), so a node serves an MoE model whose file
// is larger than its budget when that active set and the context fit (node/README.md). A dense
// model, or weights a GPU backend uploads, count whole.
uint64_t model_memory_budgeted(const model_weights_count& w, bool mapped, const model_hparams& hp,
                               const context_params& cp);

std::unique_ptr<job_engine> make_batch_engine(const batch_engine_config& cfg, job_sink& sink);
std::unique_ptr<job_engine> make_null_engine(const null_engine_config& cfg, job_sink& sink);

}  // namespace hearth::node
