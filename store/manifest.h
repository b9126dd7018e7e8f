// A model in the store: STORE/manifests/<name>.json. What it is made of (files, each a blob by
// digest), where it came from, and how it is kept (pinned, last used). Read back from disk it is
// untrusted: manifest_decode checks every field, names and paths before anything becomes a path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace hearth::store {

// One file of a model: its path inside the model ("model.gguf", "tokenizer.json",
// "model-00001-of-00002.gguf"), its blob's digest and size.
struct store_file {
  std::string path, digest;
  uint64_t size = 0;
  bool operator==(const store_file&) const = default;
};

// The kinds of models: one GGUF file, a split GGUF, a Hugging Face folder.
inline constexpr std::string_view manifest_kind_gguf = "gguf";
inline constexpr std::string_view manifest_kind_gguf_split = "gguf-split";
inline constexpr std::string_view manifest_kind_hf_folder = "hf-folder";

struct manifest {
  std::string name;                  // what jobs ask for
  std::vector<std::string> aliases;  // other names that find it (an Ollama tag, a repo id)
  std::string source;  // where it came from: "hf:org/repo/file.gguf", "ollama:...", a URL, "local"
  std::string revision;  // the source's revision (a commit, an etag), when it has one
  std::string kind;      // manifest_kind_*
  std::vector<store_file> files;
  std::string digest;       // model_digest(files)
  nlohmann::json metadata;  // what the source said besides the files (Ollama's template, params)
  bool pinned = false;      // never evicted
  int64_t created_ms = 0;
  int64_t last_used_ms = 0;  // the manifest file's mtime (README.md: touch is one utimensat)
};

// A model's digest: one file -> that file's digest; several -> "sha256:" + SHA-256 of the lines
// "PATH DIGEST\n" sorted by path.
std::string model_digest(const std::vector<store_file>& files);

// Whether a name may name a model (and so a file under manifests/ and models/): 1-200 bytes of
// letters, digits and "._-:+@", not starting with '.'.
bool model_name_valid(std::string_view name);

// Whether a file path inside a model is safe: relative, '/'-separated components that are
// neither empty, "." nor "..", of the characters model_name_valid allows.
bool model_file_path_valid(std::string_view path);

// Every check of a manifest but the blobs' presence: name, aliases, kind, paths (unique), digests,
// and its digest against its files. The message names the field.
result<void> manifest_check(const manifest& m);

nlohmann::json manifest_to_json(const manifest& m);
// A manifest from JSON (a file's bytes: untrusted), checked with manifest_check.
result<manifest> manifest_from_json(std::string_view text);

}  // namespace hearth::store
