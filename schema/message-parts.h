// The parts that stand inside several messages of the wire protocol (schema/messages.h,
// PROTOCOL.md section 7.1): a node's hardware, a model as a node describes it, a chat message, a
// job's parameters. Plain structs with one fields() list each, as the messages are; kept apart from
// the messages so that schema/messages.h stays one list of what crosses the wire, command by
// command.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::wire {

// One memory heap of a GPU as its driver describes it.
struct gpu_heap {
  uint64_t size = 0;  // bytes
  bool device_local = false;
  template <class F>
  void fields(F& f) {
    f("size", size);
    f("device_local", device_local);
  }
};

struct gpu_info {
  std::string backend;  // "cuda", "vulkan"
  std::string name;
  uint64_t memory_total = 0;  // bytes
  uint64_t memory_free = 0;   // bytes
  std::string vendor;         // "NVIDIA", "AMD", "Intel", ... ("" when not known)
  std::string type;           // "discrete", "integrated", "virtual", "other" ("" when not known)
  std::vector<gpu_heap> heaps;
  std::string compute_capability;  // CUDA devices: "8.6", "9.0" ("" otherwise)
  double utilization = -1;         // busy share 0..1 where the driver says (NVML); -1 unknown
  template <class F>
  void fields(F& f) {
    f("backend", backend);
    f("name", name);
    f("memory_total", memory_total);
    f("memory_free", memory_free);
    f.optional("vendor", vendor);
    f.optional("type", type);
    f.optional("heaps", heaps);
    f.optional("compute_capability", compute_capability);
    f.optional("utilization", utilization);
  }
};

struct hardware_info {
  std::string cpu_model;
  uint32_t cpu_threads = 0;
  uint64_t memory_total = 0;      // bytes
  uint64_t memory_available = 0;  // bytes
  std::vector<gpu_info> gpus;
  // Bytes the node offers for models and their contexts (its memory_limit); 0: no limit, what
  // is available. The broker plans a model split across nodes within it (issue 55).
  uint64_t memory_limit = 0;
  template <class F>
  void fields(F& f) {
    f("cpu_model", cpu_model);
    f("cpu_threads", cpu_threads);
    f("memory_total", memory_total);
    f("memory_available", memory_available);
    f.optional("gpus", gpus);
    f.optional("memory_limit", memory_limit);
  }
};

// Digests on the wire: "sha256:" and 64 lower-case hex digits (a blob's SHA-256).
inline constexpr uint32_t max_model_files = 256;  // files of one model (a split GGUF, a folder)

// One file of a model (a GGUF file, a part of a split GGUF, a file of a Hugging Face folder).
struct model_file {
  std::string path;    // relative to the model: "m.gguf", "config.json", "m-00001-of-00003.gguf"
  std::string digest;  // "sha256:<hex>"
  uint64_t size = 0;   // bytes
  template <class F>
  void fields(F& f) {
    f("path", path);
    f("digest", digest);
    f("size", size);
  }
};

// What a pipeline split weighs of a model (issue 55; engine/model-file.h model_layer_bytes_of):
// the broker plans stages from it (broker/split-plan.h). Empty layer_bytes: not known (an older
// node, a Hugging Face folder).
struct model_layout {
  std::vector<uint64_t> layer_bytes;  // each layer's weights, by layer index
  uint64_t input_bytes = 0;           // token embeddings (the first stage)
  uint64_t output_bytes = 0;          // output norm and head (the last stage)
  uint64_t shared_bytes = 0;          // what every stage holds
  uint64_t kv_bytes_per_token = 0;    // one token's keys and values in one layer's cache
  // What the advertising node needs with its own settings (slots, context per slot, backend):
  // the model whole (weights, cache, scratch: more than its memory limit and it cannot run it
  // alone), one layer's cache, a stage's activations and scratch, and the last stage's logits.
  uint64_t whole_bytes = 0;
  uint64_t kv_bytes_per_layer = 0;
  uint64_t scratch_bytes = 0;
  uint64_t logits_bytes = 0;
  template <class F>
  void fields(F& f) {
    f("layer_bytes", layer_bytes);
    f("input_bytes", input_bytes);
    f("output_bytes", output_bytes);
    f("shared_bytes", shared_bytes);
    f("kv_bytes_per_token", kv_bytes_per_token);
    f.optional("whole_bytes", whole_bytes);
    f.optional("kv_bytes_per_layer", kv_bytes_per_layer);
    f.optional("scratch_bytes", scratch_bytes);
    f.optional("logits_bytes", logits_bytes);
  }
};

struct model_info {
  std::string name;  // the file name without .gguf
  std::string architecture;
  std::string quantization;  // "Q8_0", "F16", "mixed" ...
  uint64_t size_bytes = 0;
  uint32_t context_length = 0;
  bool loaded = false;
  // The chat template the node formats chat jobs with when they name none ("chatml", ...); ""
  // when the file has none it can use (the broker then refuses such chat jobs at submit).
  std::string chat_template;
  // Parameters (weights) counted from the tensors' shapes, and those one token uses: fewer for a
  // mixture of experts (only n_expert_used experts run), equal for a dense model. 0: unknown (an
  // older node, a Hugging Face folder described without its weights).
  uint64_t params_total = 0;
  uint64_t params_active = 0;
  // The model's digest: a one-file model's file digest; a model of several files the SHA-256 of
  // its files' "path digest" lines, sorted by path (store/README.md). "": not hashed yet (a
  // large file of the models directory is hashed once, in the background; node_status follows).
  std::string digest;
  std::vector<model_file> files;  // with their digests; empty while not hashed
  // Where it came from ("hf:OWNER/REPO@COMMIT/PATH", "ollama:NAME:TAG", "https://...", "peer:NODE",
  // "local": a file of the models directory).
  std::string source;
  bool pinned = false;  // never evicted by the store's size limit
  model_layout layout;  // what each layer weighs, for a pipeline split
  template <class F>
  void fields(F& f) {
    f("name", name);
    f("architecture", architecture);
    f("quantization", quantization);
    f("size_bytes", size_bytes);
    f("context_length", context_length);
    f("loaded", loaded);
    f.optional("chat_template", chat_template);
    f.optional("params_total", params_total);
    f.optional("params_active", params_active);
    f.optional("digest", digest);
    f.optional("files", files);
    f.optional("source", source);
    f.optional("pinned", pinned);
    f.optional("layout", layout);
  }
};

// A file of a node's models directory that it does not serve, and why (a truncated download, an
// unsupported architecture, a dangling symbolic link). Shown by `hearth models --all`.
struct skipped_model {
  std::string file;   // its name in the models directory
  std::string error;  // why, as the node logged it
  template <class F>
  void fields(F& f) {
    f("file", file);
    f("error", error);
  }
};

// A tool call an assistant made (OpenAI's tool_calls[i] of type "function").
struct tool_call {
  std::string id;    // "call_..." as the model or the server named it
  std::string name;  // the function's name
  std::string
      arguments;  // the arguments as JSON text (OpenAI sends a string; templates get an object)
  template <class F>
  void fields(F& f) {
    f("id", id);
    f("name", name);
    f("arguments", arguments);
  }
};

struct chat_message {
  std::string role;  // "system", "user", "assistant", "tool" (and "developer", read as system)
  std::string content;
  // Beyond role and content (issue 56; all optional on the wire, empty when absent):
  std::string name;                   // a tool message's function name, or a participant's
  std::string tool_call_id;           // a tool message: the call it answers
  std::string reasoning_content;      // an assistant's reasoning, for templates that replay it
  std::vector<tool_call> tool_calls;  // an assistant's calls
  template <class F>
  void fields(F& f) {
    f("role", role);
    f("content", content);
    f.optional("name", name);
    f.optional("tool_call_id", tool_call_id);
    f.optional("reasoning_content", reasoning_content);
    f.optional("tool_calls", tool_calls);
  }
};

// logit_bias: `bias` added to token `token`'s logit before sampling (OpenAI's -100..100).
struct token_bias {
  int32_t token = 0;
  float bias = 0;
  template <class F>
  void fields(F& f) {
    f("token", token);
    f("bias", bias);
  }
};

// What the OpenAI-style APIs ask of a job beyond text generation (issue 56): tools, constrained
// output, log-probabilities, several choices. The defaults ask for none of it, and a job that
// asks for none is generated and streamed exactly as before.
struct api_params {
  std::string tools;  // OpenAI's `tools` array as JSON text; "" = none
  // "" (auto when tools are given), "auto", "none", "required", or "function:NAME" (that one)
  std::string tool_choice;
  bool parallel_tool_calls = true;
  std::string json_schema;      // the output must be JSON valid against this JSON Schema (text); ""
  std::string grammar;          // the output must match this GBNF grammar; "" = none
  std::string template_kwargs;  // a JSON object: more variables for the chat template; "" = none
  bool logprobs = false;        // report each sampled token's log-probability
  int32_t top_logprobs = 0;     // and that many most likely alternatives (0..20)
  int32_t n = 1;                // choices generated from the one prompt (its KV computed once)
  std::vector<token_bias> logit_bias;
  // The job's output is output events (schema/output-events.h, JSON lines) instead of plain
  // text. Tool calls, reasoning kept apart, logprobs and n > 1 need it; the gateway sets it.
  bool events = false;
  template <class F>
  void fields(F& f) {
    f.optional("tools", tools);
    f.optional("tool_choice", tool_choice);
    f.optional("parallel_tool_calls", parallel_tool_calls);
    f.optional("json_schema", json_schema);
    f.optional("grammar", grammar);
    f.optional("template_kwargs", template_kwargs);
    f.optional("logprobs", logprobs);
    f.optional("top_logprobs", top_logprobs);
    f.optional("n", n);
    f.optional("logit_bias", logit_bias);
    f.optional("events", events);
  }
};

// What to generate and how. Defaults are the CLI's defaults.
struct job_params {
  int32_t max_tokens = 128;
  float temperature = 0.8f;  // <= 0: greedy
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  uint64_t seed = 0;  // chosen by the broker at submit when 0, so every attempt samples alike
  std::vector<std::string> stop;
  float presence_penalty = 0;   // OpenAI's: logit -= presence_penalty if the token occurred
  float frequency_penalty = 0;  // OpenAI's: logit -= frequency_penalty * its count
  // A chat job's template by name ("chatml", "llama3", ...; engine/tokenizer/chat-template.h)
  // instead of the one the model file names; "" = the model's.
  std::string chat_template;
  // For thinking models (chat template qwen3): false asks the model to answer without reasoning
  // (Qwen3's enable_thinking); show_thinking streams the "<think>...</think>" block as the model
  // wrote it, which the node otherwise keeps out of the job's text.
  bool enable_thinking = true;
  bool show_thinking = false;
  api_params api;  // tools, constrained output, logprobs, n (issue 56)
  template <class F>
  void fields(F& f) {
    f("max_tokens", max_tokens);
    f("temperature", temperature);
    f("top_k", top_k);
    f("top_p", top_p);
    f("min_p", min_p);
    f("repeat_penalty", repeat_penalty);
    f("repeat_last_n", repeat_last_n);
    f("seed", seed);
    f.optional("stop", stop);
    f.optional("presence_penalty", presence_penalty);
    f.optional("frequency_penalty", frequency_penalty);
    f.optional("chat_template", chat_template);
    f.optional("enable_thinking", enable_thinking);
    f.optional("show_thinking", show_thinking);
    f.optional("api", api);
  }
};

// A job's attempt: the pair that names one run of a job on one node.
struct job_ref {
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
  }
};

// One stage of a pipeline (issue 55, PROTOCOL.md section 17): the node holding layers
// [first, end) of a split model, and where its stage socket is.
struct pipeline_stage {
  std::string node;
  int32_t first = 0;
  int32_t end = 0;
  std::string endpoint;    // "tcp://ADDRESS:PORT": its stage socket ("" in models_reply)
  std::string public_key;  // its CURVE public key (Z85); "" for a node without keys
  template <class F>
  void fields(F& f) {
    f("node", node);
    f("first", first);
    f("end", end);
    f.optional("endpoint", endpoint);
    f.optional("public_key", public_key);
  }
};

// A change to every stage's KV cache, applied before a stage_batch's tokens, in order, so that
// all stages' caches stay what one context's would be: "open" (a fresh cache of seq sequences of
// arg cells each), "seq_clear" (seq), "seq_copy" (seq's cells into sequence arg).
struct stage_op {
  std::string op;
  int32_t seq = 0;
  int32_t arg = 0;
  template <class F>
  void fields(F& f) {
    f("op", op);
    f("seq", seq);
    f("arg", arg);
  }
};

}  // namespace hearth::wire
