// Every message of the hearth wire protocol (schema/PROTOCOL.md) as a plain struct. Each struct
// names its command code and lists its fields once, in fields(); schema/codec.* turns that list
// into the msgpack encoder and the strict decoder, so a field cannot be encoded under one name and
// decoded under another. Field names on the wire are the member names.
//
// f(name, member) is a required field, f.optional(name, member) keeps the default when absent (used
// only for fields added after version 1 and for lists that are often empty).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/message-parts.h"

namespace hearth::wire {

// The first frame of every message. It carries the protocol version and never changes meaning:
// a peer that sends another signature is answered with error_code::version_mismatch.
inline constexpr std::string_view signature = "HEARTH/1";
inline constexpr uint32_t protocol_version = 1;

// ZMQ_MAXMSGSIZE of every socket, and the largest body a decoder accepts.
inline constexpr int64_t max_message_bytes = 8 << 20;
// Limits inside a body, checked while decoding (a few bytes of msgpack can claim huge arrays).
inline constexpr uint32_t max_string_bytes = 4 << 20;
inline constexpr uint32_t max_array_items = 4096;
inline constexpr uint32_t max_depth = 8;

// Command codes: frame 2. Node commands 0x1_, broker-to-node 0x2_, client 0x4_, broker-to-client
// 0x6_, both directions 0x0_.
enum class command : uint8_t {
  heartbeat = 0x01,  // node <-> broker, empty body
  error = 0x02,      // broker -> node or client
  // node -> broker
  node_hello = 0x10,
  node_pull = 0x11,
  node_status = 0x12,
  job_started = 0x13,
  job_tokens = 0x14,  // also broker -> client, relayed unchanged
  job_final = 0x15,
  job_handback = 0x16,
  node_bye = 0x17,
  transfer_status = 0x18,
  // broker -> node
  node_welcome = 0x20,
  job_assign = 0x21,
  job_cancel = 0x22,
  job_resume = 0x23,
  model_fetch = 0x24,
  transfer_allow = 0x25,
  model_evict = 0x26,
  stage_assign = 0x27,
  stage_release = 0x28,
  // client -> broker
  submit = 0x40,
  watch = 0x41,
  cancel = 0x42,
  list_jobs = 0x43,
  get_job = 0x44,
  list_nodes = 0x45,
  list_models = 0x46,
  forget_node = 0x47,     // admin keys only
  prune_jobs = 0x48,      // admin keys only
  whoami = 0x49,          // who the peer (or the API key it presents) is
  create_api_key = 0x4a,  // admin keys only
  list_api_keys = 0x4b,   // admin keys only
  revoke_api_key = 0x4c,  // admin keys only
  get_metrics = 0x4d,
  release_node = 0x4e,  // admin keys only
  // client -> broker, continued (0x5_): models (PROTOCOL.md section 16)
  pull_model = 0x50,   // admin keys only
  place_model = 0x51,  // admin keys only
  evict_model = 0x52,  // admin keys only
  // broker -> client
  accepted = 0x60,
  job_queued = 0x61,
  job_running = 0x62,
  job_restarted = 0x63,
  job_done = 0x64,
  jobs_reply = 0x65,
  job_reply = 0x66,
  nodes_reply = 0x67,
  models_reply = 0x68,
  ok = 0x69,
  pruned = 0x6a,
  identity = 0x6b,
  api_key_created = 0x6c,
  api_keys_reply = 0x6d,
  metrics_reply = 0x6e,
  transfers_started = 0x6f,
  // node <-> node, on a node's transfer socket (0x8_, PROTOCOL.md section 16.4)
  blob_request = 0x80,
  blob_chunk = 0x81,
  // node <-> node, on a node's stage socket (PROTOCOL.md section 17)
  stage_batch = 0x82,
};

std::string_view command_name(command c);
// Commands a node sends the broker (codes 0x1_, and heartbeat): the node protocol.
inline bool command_from_node(command c) {
  return (uint8_t(c) & 0xf0) == 0x10 || c == command::heartbeat;
}
// The command for a code, or nullopt for an unknown code.
std::optional<command> command_from_byte(uint8_t b);

// --- enumerations (on the wire as their names) ---

enum class job_state : uint8_t { queued, running, completed, failed, cancelled };
std::string_view job_state_name(job_state s);
std::optional<job_state> job_state_from_name(std::string_view name);
inline bool job_state_is_final(job_state s) {
  return s >= job_state::completed;
}

enum class error_code : uint8_t {
  malformed,            // a frame or body that does not decode
  version_mismatch,     // another protocol signature
  unknown_node,         // a node command from a peer that has not said hello (say hello again)
  name_taken,           // another live node has this name
  unknown_model,        // no node has ever advertised the model
  invalid_params,       // a request that decodes but asks for something impossible
  not_found,            // no such job
  queue_full,           // the queue limit is reached
  not_cancellable,      // the job has already finished
  internal,             // the broker failed (the database, ...)
  unauthorized,         // the peer's key (its role) may not send this command, or not for this job
  limit_reached,        // a per-peer or per-client limit (queued jobs or bytes, registrations, ...)
  storage_unavailable,  // the job database could not be written (disk full, I/O error): nothing
                        // of the request was kept; retry later (a submit with its request_key)
  no_chat_template,     // chat messages, no chat_template named, and no node of the model has a
                        // template it can use: name one or send a prompt
};
std::string_view error_code_name(error_code c);
std::optional<error_code> error_code_from_name(std::string_view name);

// --- shared parts: schema/message-parts.h ---

// --- node -> broker ---

struct node_hello {
  static constexpr command cmd = command::node_hello;
  uint32_t version = protocol_version;
  std::string name;  // unique among live nodes
  std::string hostname;
  std::string engine;  // "cpu", "null"
  uint32_t slots = 1;  // jobs it runs at once
  hardware_info hardware;
  std::vector<model_info> models;
  // After a reconnect: attempts it still runs, and finished ones whose job_final the broker may
  // not have recorded (the broker answers each of its own with job_resume, the others with
  // job_cancel; PROTOCOL.md section 9.5).
  std::vector<job_ref> running;
  std::vector<skipped_model> skipped;  // files of its models directory it does not serve
  // Random, chosen once per node process and kept across its reconnects: a hello for a live
  // node's name with another instance is a second process (0: an older node, which sends none).
  uint64_t instance = 0;
  // The node's transfer socket (PROTOCOL.md 16.4): the TCP port peers fetch blobs from (on the
  // address the broker sees the node connect from); 0: it serves no copies. Its CURVE public key
  // (Z85, "" for a node without keys).
  uint32_t transfer_port = 0;
  std::string transfer_key;
  // Bytes the node's model store may still take (free disk, less what its store_limit leaves);
  // 0: it keeps no store.
  uint64_t store_capacity = 0;
  // The node's stage socket (PROTOCOL.md 17): the TCP port where the stage before it in a
  // pipeline sends stage_batch (its CURVE key is transfer_key); 0: it runs no pipeline stages.
  uint32_t stage_port = 0;
  template <class F>
  void fields(F& f) {
    f("version", version);
    f("name", name);
    f("hostname", hostname);
    f("engine", engine);
    f("slots", slots);
    f("hardware", hardware);
    f("models", models);
    f.optional("running", running);
    f.optional("skipped", skipped);
    f.optional("instance", instance);
    f.optional("transfer_port", transfer_port);
    f.optional("transfer_key", transfer_key);
    f.optional("store_capacity", store_capacity);
    f.optional("stage_port", stage_port);
  }
};

// Credit: the node can take `credit` more jobs (added to what it granted before).
struct node_pull {
  static constexpr command cmd = command::node_pull;
  uint32_t credit = 0;
  template <class F>
  void fields(F& f) {
    f("credit", credit);
  }
};

// The node's models changed (one was loaded or unloaded), or its free memory did.
struct node_status {
  static constexpr command cmd = command::node_status;
  std::vector<model_info> models;
  std::vector<skipped_model> skipped;
  // What the node has now (free RAM and GPU memory, GPU utilisation change while it runs); a
  // node sends it at most every few seconds. cpu_threads 0: absent (an older node), the hello's
  // stays.
  hardware_info hardware;
  uint64_t store_capacity = 0;  // as node_hello's
  template <class F>
  void fields(F& f) {
    f("models", models);
    f.optional("skipped", skipped);
    f.optional("hardware", hardware);
    f.optional("store_capacity", store_capacity);
  }
};

// How a transfer onto this node goes (PROTOCOL.md 16.2): sent when it starts, about every
// second while it runs, and when it ends.
struct transfer_status {
  static constexpr command cmd = command::transfer_status;
  uint64_t transfer_id = 0;
  std::string state;  // "running", "done", "failed"
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  uint64_t bytes_from_peers = 0;  // of bytes_done, copied from other nodes (the rest: the source)
  std::string from;               // where bytes come from now: "internet", "peer:NODE", "local"
  std::string digest;             // done: the model's digest
  std::string error;              // failed: why, as the node logged it
  template <class F>
  void fields(F& f) {
    f("transfer_id", transfer_id);
    f("state", state);
    f("bytes_done", bytes_done);
    f("bytes_total", bytes_total);
    f.optional("bytes_from_peers", bytes_from_peers);
    f.optional("from", from);
    f.optional("digest", digest);
    f.optional("error", error);
  }
};

struct job_started {
  static constexpr command cmd = command::job_started;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  uint32_t n_prompt = 0;  // prompt tokens
  double load_ms = 0;     // loading the model for this attempt took this long (0: it was loaded)
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("n_prompt", n_prompt);
    f.optional("load_ms", load_ms);
  }
};

// A chunk of one attempt's stream: tokens [seq, seq + n_tokens) of the attempt and their text.
// (job_id, attempt, seq) tell a restarted or duplicated stream apart.
struct job_tokens {
  static constexpr command cmd = command::job_tokens;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  uint64_t seq = 0;
  uint32_t n_tokens = 0;
  std::string text;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("seq", seq);
    f("n_tokens", n_tokens);
    f("text", text);
  }
};

struct job_final {
  static constexpr command cmd = command::job_final;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  job_state state = job_state::completed;  // completed, failed or cancelled
  std::string stop_reason;                 // "end_of_generation", "max_tokens", ...
  std::string error;                       // when failed
  uint32_t n_prompt = 0;
  uint32_t n_gen = 0;
  double prompt_ms = 0;
  double gen_ms = 0;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("state", state);
    f("stop_reason", stop_reason);
    f("error", error);
    f("n_prompt", n_prompt);
    f("n_gen", n_gen);
    f("prompt_ms", prompt_ms);
    f("gen_ms", gen_ms);
  }
};

// The node gives an attempt back unfinished (it is shutting down); the job is queued again.
struct job_handback {
  static constexpr command cmd = command::job_handback;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  std::string reason;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("reason", reason);
  }
};

struct node_bye {
  static constexpr command cmd = command::node_bye;
  template <class F>
  void fields(F&) {}
};

struct heartbeat {
  static constexpr command cmd = command::heartbeat;
  template <class F>
  void fields(F&) {}
};

// --- broker -> node ---

struct node_welcome {
  static constexpr command cmd = command::node_welcome;
  uint32_t version = protocol_version;
  uint32_t heartbeat_ms = 1000;  // send a heartbeat at least this often
  uint32_t liveness = 3;         // missed intervals before the peer is considered dead
  template <class F>
  void fields(F& f) {
    f("version", version);
    f("heartbeat_ms", heartbeat_ms);
    f("liveness", liveness);
  }
};

struct job_assign {
  static constexpr command cmd = command::job_assign;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  std::string model;
  std::string prompt;                  // raw text, or
  std::vector<chat_message> messages;  // a conversation (the node applies the chat template)
  job_params params;
  // Run it on this pipeline (stage_assign), whose last stage the node is; 0: on the whole model.
  uint64_t pipeline_id = 0;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("model", model);
    f("prompt", prompt);
    f.optional("messages", messages);
    f("params", params);
    f.optional("pipeline_id", pipeline_id);
  }
};

struct job_cancel {
  static constexpr command cmd = command::job_cancel;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
  }
};

// The broker has tokens [0, seq) of the attempt: the node sends the rest of the stream again from
// token `seq` (what it already sent included) and, when the attempt has finished, its job_final
// again. Sent after the broker restarted or lost a part of the stream (PROTOCOL.md section 9.5).
struct job_resume {
  static constexpr command cmd = command::job_resume;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  uint64_t seq = 0;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("seq", seq);
  }
};

// A node holding blobs a transfer may copy (model_fetch.peers).
struct transfer_peer {
  std::string node;
  std::string endpoint;    // "tcp://ADDRESS:PORT": its transfer socket
  std::string public_key;  // its CURVE public key (Z85); "" for a node without keys
  template <class F>
  void fields(F& f) {
    f("node", node);
    f("endpoint", endpoint);
    f.optional("public_key", public_key);
  }
};

// Get a model into the node's store (PROTOCOL.md 16.2): from `source` on the internet
// ("hf:...", "ollama:...", "https://..." with `sha256`), or, when `peers` is not empty, by copying
// `files` from those nodes (in the order given; the next one when one fails). The node answers with
// transfer_status; when done it advertises the model (node_status) as `name`.
struct model_fetch {
  static constexpr command cmd = command::model_fetch;
  uint64_t transfer_id = 0;
  std::string name;
  std::string source;
  std::string sha256;  // an https source's digest ("sha256:<hex>")
  std::vector<model_file> files;
  std::vector<transfer_peer> peers;
  std::string origin;  // a copy: the source the holder recorded (kept in the copy's manifest)
  template <class F>
  void fields(F& f) {
    f("transfer_id", transfer_id);
    f("name", name);
    f("source", source);
    f.optional("sha256", sha256);
    f.optional("files", files);
    f.optional("peers", peers);
    f.optional("origin", origin);
  }
};

// A ticket: the node `node` (CURVE key `public_key`) may fetch these blobs from this node's
// transfer socket until ttl_ms has passed without a request (PROTOCOL.md 16.4).
struct transfer_allow {
  static constexpr command cmd = command::transfer_allow;
  uint64_t transfer_id = 0;
  std::string node;
  std::string public_key;
  std::vector<std::string> digests;
  uint32_t ttl_ms = 60000;
  template <class F>
  void fields(F& f) {
    f("transfer_id", transfer_id);
    f("node", node);
    f.optional("public_key", public_key);
    f("digests", digests);
    f.optional("ttl_ms", ttl_ms);
  }
};

// Remove a model from the node's store (a blob another model still uses stays); a model of the
// models directory (source "local") is not deleted, only no longer advertised until restart.
struct model_evict {
  static constexpr command cmd = command::model_evict;
  std::string name;
  template <class F>
  void fields(F& f) {
    f("name", name);
  }
};

// Hold stage `index` of pipeline `pipeline_id` (PROTOCOL.md 17.1): load layers
// [stages[index].first, stages[index].end) of `model`, take stage_batch from the stage before it
// (the last stage for the first: the pipeline is a ring) and send what it computes to the one
// after it (the first, from the last). The last stage runs the pipeline's jobs (job_assign with
// its pipeline_id): it samples and streams. A later stage_assign of the same pipeline with a
// higher version replaces it (a re-plan); the node answers nothing (its node_status says).
struct stage_assign {
  static constexpr command cmd = command::stage_assign;
  uint64_t pipeline_id = 0;
  uint32_t version = 0;
  std::string model;
  std::vector<pipeline_stage> stages;  // in pipeline order
  uint32_t index = 0;                  // this node's stage
  std::string hidden_type = "f32";     // the residual stream on the wire: "f32", "f16", "q8_0"
  template <class F>
  void fields(F& f) {
    f("pipeline_id", pipeline_id);
    f("version", version);
    f("model", model);
    f("stages", stages);
    f("index", index);
    f.optional("hidden_type", hidden_type);
  }
};

// Drop the pipeline's stage: its context and, when nothing else uses them, its weights.
struct stage_release {
  static constexpr command cmd = command::stage_release;
  uint64_t pipeline_id = 0;
  template <class F>
  void fields(F& f) {
    f("pipeline_id", pipeline_id);
  }
};

// --- node <-> node, on a node's transfer socket (PROTOCOL.md section 16.4) ---

// The most bytes one blob_request may ask for: a chunk and its envelope fit max_message_bytes.
inline constexpr uint32_t max_blob_chunk = 4 << 20;

// A fetching node asks a holder for bytes [offset, offset + length) of a blob, under the ticket
// of `transfer_id` (transfer_allow). Several are in flight at once; the holder answers each with
// blob_chunk or error_reply, both carrying its request_id.
struct blob_request {
  static constexpr command cmd = command::blob_request;
  uint64_t request_id = 0;  // chosen by the fetcher, echoed in the answer
  uint64_t transfer_id = 0;
  std::string digest;  // "sha256:<hex>"
  uint64_t offset = 0;
  uint32_t length = 0;  // 1 .. max_blob_chunk
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("transfer_id", transfer_id);
    f("digest", digest);
    f("offset", offset);
    f("length", length);
  }
};

// The holder's answer: the bytes follow as a fourth frame of exactly `length` bytes (no msgpack
// copy of them); fewer than asked only at the blob's end.
struct blob_chunk {
  static constexpr command cmd = command::blob_chunk;
  uint64_t request_id = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  uint64_t size = 0;  // the whole blob's
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("offset", offset);
    f("length", length);
    f("size", size);
  }
};

// --- node <-> node, on a node's stage socket (PROTOCOL.md section 17.2) ---

// The most tokens one stage_batch carries (a longer decode is sent as several), and the most
// bytes of its hidden-state frame.
inline constexpr uint32_t max_stage_tokens = 1024;
inline constexpr uint32_t max_stage_rows_bytes = 32 << 20;

// One step of a pipeline going round its ring: the last stage sends the step's batch to the
// first (ops and tokens, no rows); each stage applies the ops, runs the tokens through its layers
// and sends the same batch on with the residual stream leaving its last layer, as a fourth frame
// of tokens.size() rows of n_embd in hidden_type (engine/io/hidden-state.h); the last stage
// computes the logits. Steps arrive in order (`step` counts them per pipeline and version).
struct stage_batch {
  static constexpr command cmd = command::stage_batch;
  uint64_t pipeline_id = 0;
  uint32_t version = 0;
  uint64_t step = 0;
  std::vector<stage_op> ops;
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<int32_t> seqs;
  std::vector<uint8_t> logits;  // 1: the last stage keeps the token's logits
  std::string hidden_type;  // "" : no rows (the last stage to the first), else as stage_assign's
  uint32_t n_embd = 0;
  std::string error;  // a stage failed the step: passed on to the last stage, nothing computed
  template <class F>
  void fields(F& f) {
    f("pipeline_id", pipeline_id);
    f("version", version);
    f("step", step);
    f.optional("ops", ops);
    f("tokens", tokens);
    f("pos", pos);
    f("seqs", seqs);
    f("logits", logits);
    f.optional("hidden_type", hidden_type);
    f.optional("n_embd", n_embd);
    f.optional("error", error);
  }
};

// --- client -> broker ---
// request_id is chosen by the client and echoed in the reply, so replies match requests.

struct submit {
  static constexpr command cmd = command::submit;
  uint64_t request_id = 0;
  std::string model;
  std::string prompt;
  std::vector<chat_message> messages;
  job_params params;
  int32_t priority = 0;     // higher first
  bool wait_model = false;  // accept a model no node has advertised yet
  bool watch = false;       // stream this job's events to the submitter
  // Idempotency key, chosen by the client (at most max_request_key_bytes): a submit whose key this
  // client has used before is answered with that job (accepted) instead of making a new one, so a
  // retry after a lost reply cannot duplicate a job. "" = none.
  std::string request_key;
  std::string api_key;  // an API key to act as (see whoami below)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("model", model);
    f("prompt", prompt);
    f.optional("messages", messages);
    f("params", params);
    f("priority", priority);
    f("wait_model", wait_model);
    f("watch", watch);
    f.optional("request_key", request_key);
    f.optional("api_key", api_key);
  }
};

inline constexpr uint32_t max_request_key_bytes = 128;

// Follow a job. A watcher that re-attaches (after a broker restart) says what it already has of
// attempt `attempt`: tokens [0, seq), which are output bytes [0, output_offset). When that attempt
// is still the job's latest, the stream resumes from there; otherwise it starts at the beginning
// of the latest attempt. attempt 0: nothing yet.
struct watch {
  static constexpr command cmd = command::watch;
  uint64_t request_id = 0;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  uint64_t seq = 0;
  uint64_t output_offset = 0;
  std::string api_key;  // an API key to act as (see whoami below)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("job_id", job_id);
    f.optional("attempt", attempt);
    f.optional("seq", seq);
    f.optional("output_offset", output_offset);
    f.optional("api_key", api_key);
  }
};

struct cancel {
  static constexpr command cmd = command::cancel;
  uint64_t request_id = 0;
  uint64_t job_id = 0;
  std::string api_key;  // an API key to act as (see whoami below)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("job_id", job_id);
    f.optional("api_key", api_key);
  }
};

struct list_jobs {
  static constexpr command cmd = command::list_jobs;
  uint64_t request_id = 0;
  std::string state;  // "" = any
  std::string model;  // "" = any
  uint32_t limit = 20;
  std::string api_key;  // an API key to act as (see whoami below)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("state", state);
    f("model", model);
    f("limit", limit);
    f.optional("api_key", api_key);
  }
};

// The reply carries one page of the output and of the prompt (job_reply); a client reads a long
// one page by page. 0 as a page size means the default page.
inline constexpr uint32_t job_page_bytes_default = 256 << 10;
inline constexpr uint32_t job_page_bytes_max = 512 << 10;

struct get_job {
  static constexpr command cmd = command::get_job;
  uint64_t request_id = 0;
  uint64_t job_id = 0;
  uint64_t output_offset = 0;     // first byte of the output page
  uint32_t max_output_bytes = 0;  // page size: 0 = default, capped at job_page_bytes_max
  uint64_t prompt_offset = 0;     // first byte of the prompt page
  uint32_t max_prompt_bytes = 0;  // as max_output_bytes
  std::string api_key;            // an API key to act as (see whoami below)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("job_id", job_id);
    f.optional("output_offset", output_offset);
    f.optional("max_output_bytes", max_output_bytes);
    f.optional("prompt_offset", prompt_offset);
    f.optional("max_prompt_bytes", max_prompt_bytes);
    f.optional("api_key", api_key);
  }
};

struct list_nodes {
  static constexpr command cmd = command::list_nodes;
  uint64_t request_id = 0;
  std::string api_key;  // an API key to act as (see whoami below)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f.optional("api_key", api_key);
  }
};

struct list_models {
  static constexpr command cmd = command::list_models;
  uint64_t request_id = 0;
  std::string api_key;  // an API key to act as (see whoami below)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f.optional("api_key", api_key);
  }
};

// Removes an offline node and the models only it advertised from the registry (admin only).
struct forget_node {
  static constexpr command cmd = command::forget_node;
  uint64_t request_id = 0;
  std::string name;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("name", name);
  }
};

// Ends a node's quarantine now and forgets its recent losses (admin only); the reply is ok.
struct release_node {
  static constexpr command cmd = command::release_node;
  uint64_t request_id = 0;
  std::string name;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("name", name);
  }
};

// Deletes finished jobs (with their messages, events and output) older than max_age_ms, and all
// but the newest keep_last finished jobs; 0 turns a rule off (admin only). Queued and running
// jobs are never pruned. The reply (pruned) says how many jobs went.
struct prune_jobs {
  static constexpr command cmd = command::prune_jobs;
  uint64_t request_id = 0;
  uint64_t max_age_ms = 0;
  uint64_t keep_last = 0;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("max_age_ms", max_age_ms);
    f("keep_last", keep_last);
  }
};

// API keys (HTTP clients of hearth-gateway, PROTOCOL.md section 13). Every client request above
// may carry `api_key`: the secret an HTTP client presented (Authorization: Bearer). A peer that
// may send client requests (a client or admin key, or any peer of a broker without auth) may
// present one; the broker then handles the request as that API key's client: it sees and
// cancels only the key's own jobs, and the key's limits apply. An unknown or revoked key is
// answered error_code::unauthorized. "" = the peer itself.
inline constexpr uint32_t max_api_key_bytes = 256;
inline constexpr uint32_t max_api_key_name_bytes = 64;

// Who the peer is, or the API key it presents (the gateway checks a key once, then caches it).
struct whoami {
  static constexpr command cmd = command::whoami;
  uint64_t request_id = 0;
  std::string api_key;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f.optional("api_key", api_key);
  }
};

// Creates an API key named `name` (letters, digits, '-', '_', '.'; unique among keys not revoked);
// the reply carries its secret, which the broker stores only as a hash (admin only).
struct create_api_key {
  static constexpr command cmd = command::create_api_key;
  uint64_t request_id = 0;
  std::string name;
  // An admin key: its requests see and cancel every owner's jobs (the dashboard's view of the
  // whole homelab); a client key only its own. Admin-only commands still need an admin
  // certificate on the connection.
  bool admin = false;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("name", name);
    f.optional("admin", admin);
  }
};

struct list_api_keys {
  static constexpr command cmd = command::list_api_keys;
  uint64_t request_id = 0;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
  }
};

// Revokes the key named `name`: requests presenting it are refused from the next turn on; its
// jobs stay in the history (admin only).
struct revoke_api_key {
  static constexpr command cmd = command::revoke_api_key;
  uint64_t request_id = 0;
  std::string name;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("name", name);
  }
};

// Models (PROTOCOL.md section 16; admin keys only). Pull `source` onto the node `to`, or onto
// every online node whose store can hold it (`all`); reply transfers_started.
struct pull_model {
  static constexpr command cmd = command::pull_model;
  uint64_t request_id = 0;
  std::string source;  // "hf:OWNER/REPO[:QUANT][@REV]", "ollama:NAME[:TAG]", "https://..."
  std::string name;    // the name to serve it as; "": the source's (a GGUF file's stem)
  std::string sha256;  // an https source's digest
  std::string to;
  bool all = false;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("source", source);
    f.optional("name", name);
    f.optional("sha256", sha256);
    f.optional("to", to);
    f.optional("all", all);
  }
};

// Copy the model `name` from the nodes holding it onto `to`, or onto every online node that can
// hold it and lacks it (`all`); reply transfers_started.
struct place_model {
  static constexpr command cmd = command::place_model;
  uint64_t request_id = 0;
  std::string name;
  std::string to;
  bool all = false;
  // Split the model over these nodes, in this order (a pipeline, PROTOCOL.md 17), instead of
  // copying it: each loads its share of the layers from its own copy of the file.
  std::vector<std::string> split;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("name", name);
    f.optional("to", to);
    f.optional("all", all);
    f.optional("split", split);
  }
};

// Remove the model `name` from the node `from`'s store; reply ok.
struct evict_model {
  static constexpr command cmd = command::evict_model;
  uint64_t request_id = 0;
  std::string name;
  std::string from;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("name", name);
    f("from", from);
  }
};

// --- broker -> client ---

struct accepted {
  static constexpr command cmd = command::accepted;
  uint64_t request_id = 0;
  uint64_t job_id = 0;
  uint32_t position = 0;  // jobs ahead of it in the queue for its model
  std::string waiting;    // why it cannot run now ("" when a node could take it)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("job_id", job_id);
    f("position", position);
    f.optional("waiting", waiting);
  }
};

struct job_queued {
  static constexpr command cmd = command::job_queued;
  uint64_t job_id = 0;
  uint32_t position = 0;
  std::string waiting;  // as in accepted
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("position", position);
    f.optional("waiting", waiting);
  }
};

struct job_running {
  static constexpr command cmd = command::job_running;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  std::string node;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("node", node);
  }
};

// The attempt the client was watching ended without finishing the job; attempt `attempt` follows
// and its stream starts again at seq 0.
struct job_restarted {
  static constexpr command cmd = command::job_restarted;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  std::string reason;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("reason", reason);
  }
};

struct job_done {
  static constexpr command cmd = command::job_done;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  job_state state = job_state::completed;
  std::string stop_reason;
  std::string error;
  uint32_t n_prompt = 0;
  uint32_t n_gen = 0;
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("attempt", attempt);
    f("state", state);
    f("stop_reason", stop_reason);
    f("error", error);
    f("n_prompt", n_prompt);
    f("n_gen", n_gen);
  }
};

// One row of job history. Times are milliseconds since the Unix epoch (0: not yet).
struct job_summary {
  uint64_t job_id = 0;
  std::string model;
  job_state state = job_state::queued;
  int32_t priority = 0;
  std::string node;  // of the latest attempt
  uint32_t attempts = 0;
  int64_t created_ms = 0;
  int64_t started_ms = 0;
  int64_t finished_ms = 0;
  uint32_t n_prompt = 0;
  uint32_t n_gen = 0;
  std::string stop_reason;
  std::string error;
  std::string owner;  // the submitting client key's name (its certificate file); "" without auth
  template <class F>
  void fields(F& f) {
    f("job_id", job_id);
    f("model", model);
    f("state", state);
    f("priority", priority);
    f("node", node);
    f("attempts", attempts);
    f("created_ms", created_ms);
    f("started_ms", started_ms);
    f("finished_ms", finished_ms);
    f("n_prompt", n_prompt);
    f("n_gen", n_gen);
    f("stop_reason", stop_reason);
    f("error", error);
    f.optional("owner", owner);
  }
};

// A state change of a job: "queued", "assigned", "running", "requeued", "completed", ...
struct job_event {
  int64_t time_ms = 0;
  std::string event;
  uint32_t attempt = 0;
  std::string node;
  std::string detail;
  template <class F>
  void fields(F& f) {
    f("time_ms", time_ms);
    f("event", event);
    f("attempt", attempt);
    f("node", node);
    f("detail", detail);
  }
};

struct job_detail {
  job_summary summary;
  std::string prompt;
  std::vector<chat_message> messages;
  job_params params;
  std::string output;
  std::vector<job_event> events;
  std::string waiting;  // a queued job: why it cannot run now, as in accepted
  template <class F>
  void fields(F& f) {
    f("summary", summary);
    f("prompt", prompt);
    f.optional("messages", messages);
    f("params", params);
    f("output", output);
    f("events", events);
    f.optional("waiting", waiting);
  }
};

struct jobs_reply {
  static constexpr command cmd = command::jobs_reply;
  uint64_t request_id = 0;
  std::vector<job_summary> jobs;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("jobs", jobs);
  }
};

// job.output holds bytes [output_offset, output_offset + job.output.size()) of output_total_bytes,
// job.prompt the same of the prompt; pages end on UTF-8 character boundaries.
struct job_reply {
  static constexpr command cmd = command::job_reply;
  uint64_t request_id = 0;
  job_detail job;
  uint64_t output_offset = 0;
  uint64_t output_total_bytes = 0;
  uint64_t prompt_offset = 0;
  uint64_t prompt_total_bytes = 0;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("job", job);
    f.optional("output_offset", output_offset);
    f.optional("output_total_bytes", output_total_bytes);
    f.optional("prompt_offset", prompt_offset);
    f.optional("prompt_total_bytes", prompt_total_bytes);
  }
};

// An attempt a node lost (PROTOCOL.md section 9.7): when, which, and what happened.
struct node_loss {
  int64_t time_ms = 0;
  uint64_t job_id = 0;
  uint32_t attempt = 0;
  std::string reason;  // at most 512 bytes
  template <class F>
  void fields(F& f) {
    f("time_ms", time_ms);
    f("job_id", job_id);
    f("attempt", attempt);
    f("reason", reason);
  }
};

struct node_summary {
  std::string name;
  std::string hostname;
  std::string engine;
  bool online = false;
  int64_t last_seen_ms = 0;
  uint32_t slots = 0;
  uint32_t running = 0;  // attempts running there now
  hardware_info hardware;
  std::vector<model_info> models;
  std::string key;                   // the node's Z85 public key; "" on a broker without auth
  int64_t quarantined_until_ms = 0;  // gets no jobs until then (0: not quarantined)
  uint32_t lost = 0;                 // attempts it lost since the broker started
  std::vector<node_loss> losses;     // the last few of them, oldest first
  template <class F>
  void fields(F& f) {
    f("name", name);
    f("hostname", hostname);
    f("engine", engine);
    f("online", online);
    f("last_seen_ms", last_seen_ms);
    f("slots", slots);
    f("running", running);
    f("hardware", hardware);
    f("models", models);
    f.optional("key", key);
    f.optional("quarantined_until_ms", quarantined_until_ms);
    f.optional("lost", lost);
    f.optional("losses", losses);
  }
};

struct nodes_reply {
  static constexpr command cmd = command::nodes_reply;
  uint64_t request_id = 0;
  std::vector<node_summary> nodes;
  uint32_t total = 0;      // nodes the broker knows (more than listed when truncated)
  bool truncated = false;  // the list was capped to fit one message
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("nodes", nodes);
    f.optional("total", total);
    f.optional("truncated", truncated);
  }
};

struct model_summary {
  std::string name;
  std::string architecture;
  std::string quantization;
  uint64_t size_bytes = 0;
  uint32_t context_length = 0;
  std::vector<std::string> nodes;      // online nodes that serve it
  std::vector<std::string> loaded_on;  // ... and have it loaded
  uint32_t queued = 0;                 // jobs waiting for it
  uint64_t params_total = 0;           // model_info's; 0: unknown
  uint64_t params_active = 0;
  std::string digest;                  // model_info's ("" not known yet)
  std::vector<std::string> holders;    // online nodes whose store holds it (serving it or not)
  std::vector<pipeline_stage> stages;  // its pipeline's stages when it runs split; else empty
  template <class F>
  void fields(F& f) {
    f("name", name);
    f("architecture", architecture);
    f("quantization", quantization);
    f("size_bytes", size_bytes);
    f("context_length", context_length);
    f("nodes", nodes);
    f("loaded_on", loaded_on);
    f("queued", queued);
    f.optional("params_total", params_total);
    f.optional("params_active", params_active);
    f.optional("digest", digest);
    f.optional("holders", holders);
    f.optional("stages", stages);
  }
};

// The files an online node skipped (models_reply).
struct node_skipped_models {
  std::string node;
  std::vector<skipped_model> files;
  template <class F>
  void fields(F& f) {
    f("node", node);
    f("files", files);
  }
};

// A transfer of a model onto a node, as the broker knows it (models_reply, transfers_started).
struct transfer_info {
  uint64_t transfer_id = 0;
  std::string model;
  std::string node;    // where it goes
  std::string source;  // "hf:...", "ollama:...", "https://...", "peer:NODE"
  std::string state;   // "starting", "running", "done", "failed"
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  uint64_t started_ms = 0;  // unix ms
  std::string error;
  template <class F>
  void fields(F& f) {
    f("transfer_id", transfer_id);
    f("model", model);
    f("node", node);
    f("source", source);
    f("state", state);
    f("bytes_done", bytes_done);
    f("bytes_total", bytes_total);
    f("started_ms", started_ms);
    f.optional("error", error);
  }
};

struct transfers_started {
  static constexpr command cmd = command::transfers_started;
  uint64_t request_id = 0;
  std::vector<transfer_info> transfers;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("transfers", transfers);
  }
};

struct models_reply {
  static constexpr command cmd = command::models_reply;
  uint64_t request_id = 0;
  std::vector<model_summary> models;
  uint32_t total = 0;                        // models known (more than listed when truncated)
  bool truncated = false;                    // the list was capped to fit one message
  std::vector<node_skipped_models> skipped;  // online nodes' skipped files, capped
  std::vector<transfer_info> transfers;      // running ones and the last finished, capped
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("models", models);
    f.optional("total", total);
    f.optional("truncated", truncated);
    f.optional("skipped", skipped);
    f.optional("transfers", transfers);
  }
};

struct ok {
  static constexpr command cmd = command::ok;
  uint64_t request_id = 0;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
  }
};

struct pruned {
  static constexpr command cmd = command::pruned;
  uint64_t request_id = 0;
  uint64_t jobs = 0;  // jobs deleted
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("jobs", jobs);
  }
};

// The answer to whoami. `owner` is what jobs of this identity record as their owner (a key's Z85
// public key, "api:" and the API key's id, or "" without auth); `name` its certificate or API
// key name; `role` "client" or "admin".
struct identity {
  static constexpr command cmd = command::identity;
  uint64_t request_id = 0;
  std::string owner;
  std::string name;
  std::string role;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("owner", owner);
    f("name", name);
    f("role", role);
  }
};

// The broker's counters, gauges and histograms (hearth-gateway serves them as Prometheus's
// /metrics). Any client may ask: they hold counts, model and node names, never a prompt, an
// output or an owner.
struct get_metrics {
  static constexpr command cmd = command::get_metrics;
  uint64_t request_id = 0;
  std::string api_key;  // an API key to act as (see whoami above)
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f.optional("api_key", api_key);
  }
};

// One series of a metric family: its label values (in the family's label_names order) and its
// value; a histogram's cumulative bucket counts (one per bound; +Inf is `count`), sum and count.
struct metric_sample {
  std::vector<std::string> labels;
  double value = 0;
  std::vector<uint64_t> buckets;
  double sum = 0;
  uint64_t count = 0;
  template <class F>
  void fields(F& f) {
    f("labels", labels);
    f("value", value);
    f.optional("buckets", buckets);
    f.optional("sum", sum);
    f.optional("count", count);
  }
};

// A metric as Prometheus names it: "hearth_jobs_submitted_total", type "counter", "gauge" or
// "histogram" (`bounds`: the buckets' upper bounds, ascending).
struct metric_family {
  std::string name;
  std::string help;
  std::string type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;
  std::vector<metric_sample> samples;
  template <class F>
  void fields(F& f) {
    f("name", name);
    f("help", help);
    f("type", type);
    f("label_names", label_names);
    f.optional("bounds", bounds);
    f("samples", samples);
  }
};

struct metrics_reply {
  static constexpr command cmd = command::metrics_reply;
  uint64_t request_id = 0;
  std::vector<metric_family> families;
  bool truncated = false;  // series were left out to fit one message
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("families", families);
    f.optional("truncated", truncated);
  }
};

// The new key: `key` is its secret, shown this once.
struct api_key_created {
  static constexpr command cmd = command::api_key_created;
  uint64_t request_id = 0;
  std::string name;
  std::string key;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("name", name);
    f("key", key);
  }
};

struct api_key_info {
  std::string name;
  std::string prefix;  // the first characters of the secret, to tell keys apart
  int64_t created_ms = 0;
  int64_t revoked_ms = 0;    // 0: in force
  int64_t last_used_ms = 0;  // 0: never (updated at most once a minute)
  bool admin = false;
  template <class F>
  void fields(F& f) {
    f("name", name);
    f("prefix", prefix);
    f("created_ms", created_ms);
    f("revoked_ms", revoked_ms);
    f("last_used_ms", last_used_ms);
    f.optional("admin", admin);
  }
};

struct api_keys_reply {
  static constexpr command cmd = command::api_keys_reply;
  uint64_t request_id = 0;
  std::vector<api_key_info> keys;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("keys", keys);
  }
};

// The body of this message never changes across versions, so a peer of any version can read why
// it was refused.
struct error_reply {
  static constexpr command cmd = command::error;
  uint64_t request_id = 0;  // 0 when not a reply to a request
  error_code code = error_code::malformed;
  std::string message;
  template <class F>
  void fields(F& f) {
    f("request_id", request_id);
    f("code", code);
    f("message", message);
  }
};

}  // namespace hearth::wire

// X-macro over every message type, for the codec's explicit instantiations and its tests.
// clang-format off
#define HEARTH_WIRE_MESSAGES(X) \
  X(heartbeat) \
  X(error_reply) \
  X(node_hello) \
  X(node_pull) \
  X(node_status) \
  X(job_started) \
  X(job_tokens) \
  X(job_final) \
  X(job_handback) \
  X(node_bye) \
  X(transfer_status) \
  X(node_welcome) \
  X(job_assign) \
  X(job_cancel) \
  X(job_resume) \
  X(model_fetch) \
  X(transfer_allow) \
  X(model_evict) \
  X(stage_assign) \
  X(stage_release) \
  X(submit) \
  X(watch) \
  X(cancel) \
  X(list_jobs) \
  X(get_job) \
  X(list_nodes) \
  X(list_models) \
  X(forget_node) \
  X(prune_jobs) \
  X(whoami) \
  X(create_api_key) \
  X(list_api_keys) \
  X(revoke_api_key) \
  X(get_metrics) \
  X(release_node) \
  X(pull_model) \
  X(place_model) \
  X(evict_model) \
  X(accepted) \
  X(job_queued) \
  X(job_running) \
  X(job_restarted) \
  X(job_done) \
  X(jobs_reply) \
  X(job_reply) \
  X(nodes_reply) \
  X(models_reply) \
  X(ok) \
  X(pruned) \
  X(identity) \
  X(api_key_created) \
  X(api_keys_reply) \
  X(metrics_reply) \
  X(transfers_started) \
  X(blob_request) \
  X(blob_chunk) \
  X(stage_batch)
// clang-format on
