// Pulling a model into the store (README.md): from Hugging Face, Ollama's registry, an http(s)
// URL with its digest, or a file or folder already on this machine. Blobs are downloaded with
// parallel Range requests into store partial blobs (resumable after a kill), verified by digest,
// checked as models (a GGUF's header) before they become one, and the manifest written last: a
// pull that fails at any point leaves no model (its partial blobs stay, for the next try).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>

#include "store/model-store.h"

namespace hearth::pull {

struct pull_request {
  // "hf:OWNER/REPO[:QUANT][@REV]", "hf:OWNER/REPO/PATH.gguf[@REV]", "ollama:NAME[:TAG]",
  // "https://..." (or "http://..."; `sha256` required), or a local file or folder.
  std::string source;
  std::string name;    // the model's name; "": the source's (a GGUF file's stem)
  std::string sha256;  // "sha256:<hex>" or "<hex>": a URL's digest, checked for a local file
};

struct pull_progress {
  uint64_t bytes_done = 0, bytes_total = 0;  // of the files still to download, resumed bytes done
  std::string from;                          // the host the bytes come from
};

struct pull_options {
  int connections = 4;                        // parallel Range requests per pull
  uint64_t piece_bytes = uint64_t(16) << 20;  // the size of one Range request
  // Written bytes are made durable (partial_blob::mark_done) at least this often, so a kill
  // loses at most this much per connection.
  uint64_t flush_bytes = uint64_t(4) << 20;
  uint64_t rate_limit = 0;  // bytes/s over all connections; 0: none
  int retries = 5;  // per request or piece without progress, on transient errors (connection
                    // lost, 5xx, 429, a truncated body)
  int retry_backoff_ms = 250;  // doubled each retry, at most 8 s
  int max_redirects = 10;
  // Environment, read by pull_options_from_env(): $HF_ENDPOINT, $HF_TOKEN,
  // $HEARTH_OLLAMA_REGISTRY.
  std::string hf_endpoint = "https://huggingface.co";
  std::string hf_token;  // sent as a bearer token to hf_endpoint's host only
  std::string ollama_registry = "https://registry.ollama.ai";
  // When the store lacks the space: evict least-recently-used models (never those in `in_use`,
  // never pinned ones) before refusing. Off for the CLI; the node turns it on.
  bool evict_lru = false;
  std::set<std::string> in_use;
};

// Defaults with HF_ENDPOINT, HF_TOKEN (else HUGGING_FACE_HUB_TOKEN) and HEARTH_OLLAMA_REGISTRY.
pull_options pull_options_from_env();

// Why a pull failed, for a caller to report without parsing the message (../shared/STYLE.md 9c).
enum class pull_error_kind {
  bad_source,   // the source string, or what it names does not exist (404), or is ambiguous
  unsafe_path,  // a file list with a `..` or absolute path
  not_a_model,  // not a GGUF / a malformed GGUF / no model files in a repository
  digest,       // the bytes did not hash to the source's digest
  no_space,     // the store cannot hold it (before anything was downloaded)
  http,         // a server error, a redirect loop, more bytes than announced, too many retries
  cancelled,    // the cancel flag was set (partial blobs kept: a later pull resumes)
  busy,         // another pull writes the same blob
};

struct pull_error : std::runtime_error {
  pull_error(pull_error_kind k, const std::string& message)
      : std::runtime_error(message), kind(k) {}
  pull_error_kind kind;
};

// Pulls `req` into `store` and returns the manifest stored. `progress` (may be empty) is called
// from the calling thread, at most ~10 times a second and once at the end. `cancel` (may be null)
// is polled; when set the pull stops with pull_error{cancelled}. Throws pull_error.
store::manifest pull_model(store::model_store& store, const pull_request& req,
                           const pull_options& options,
                           const std::function<void(const pull_progress&)>& progress,
                           const std::atomic<bool>* cancel);

}  // namespace hearth::pull
