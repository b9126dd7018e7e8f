// What a source resolves to before any model byte is fetched: the model's files (path inside
// the model, digest, size, where to get them) and what the manifest will say of it. Made by
// hf_plan and ollama_plan from the servers' file lists; carried out by pull_model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pull/http-client.h"
#include "pull/source-spec.h"

namespace hearth::pull {

struct plan_file {
  std::string path;    // inside the model: checked with store::model_file_path_valid
  std::string digest;  // "sha256:<hex>"; "" for a small Hub file outside LFS (git_oid checks it)
  uint64_t size = 0;
  std::string url;      // where to GET it
  std::string git_oid;  // a small Hub file's git blob SHA-1
};

struct pull_plan {
  std::string name;      // the model's name (the request's, else the source's)
  std::string source;    // as the manifest records it
  std::string revision;  // the Hub's commit, Ollama's manifest digest
  std::string kind;      // store::manifest_kind_*
  std::vector<plan_file> files;
  nlohmann::json metadata = nlohmann::json::object();
  std::vector<std::string> aliases;
  std::string from;  // the host, for progress
};

// A repository's files at a revision through the Hub's API (README.md, "Hugging Face"). The
// token (options.hf_token) goes to the Hub's host only. Throws pull_error.
pull_plan hf_plan(http_client& http, const source_spec& s);

// A model's manifest in Ollama's registry (README.md, "Ollama"); its small layers (template,
// params, system, license) are fetched here, verified, into the plan's metadata. Throws
// pull_error.
pull_plan ollama_plan(http_client& http, const source_spec& s);

// A GGUF file name's stem: "a/Model-Q4_K_M.gguf" -> "Model-Q4_K_M"; a split file's without its
// "-00001-of-00003" ("Model-Q4_K_M").
std::string gguf_model_stem(const std::string& path);

// Whether a path is part N of a split GGUF ("...-0000N-of-0000M.gguf"); the shared prefix and M.
bool gguf_split_part(const std::string& path, std::string* prefix, int* count);

}  // namespace hearth::pull
