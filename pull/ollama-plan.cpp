// Ollama's registry (a Docker registry v2): GET /v2/{namespace}/{name}/manifests/{tag} (a
// manifest v2 whose layers are typed by media type), then GET /v2/{namespace}/{name}/blobs/{digest}
// per layer (redirected to a CDN). The model layer is the GGUF file; the template, system prompt,
// parameters and license layers become the manifest's metadata.
#include "pull/pull-plan.h"
#include "pull/pull.h"
#include "store/manifest.h"
#include "store/sha256.h"

namespace hearth::pull {

namespace {

constexpr size_t k_ollama_manifest_max_bytes = size_t(4) << 20;
constexpr size_t k_ollama_small_layer_max_bytes = size_t(1) << 20;
constexpr std::string_view k_ollama_layer_prefix = "application/vnd.ollama.image.";

}  // namespace

pull_plan ollama_plan(http_client& http, const source_spec& s) {
  std::string registry = http.options().ollama_registry;
  while (!registry.empty() && registry.back() == '/') registry.pop_back();
  const std::string what = "ollama:" + s.ollama_repo + ":" + s.ollama_tag;
  const auto r = http.get(registry + "/v2/" + s.ollama_repo + "/manifests/" + s.ollama_tag,
                          k_ollama_manifest_max_bytes,
                          {"Accept: application/vnd.docker.distribution.manifest.v2+json"});
  if (r.status == 404)
    throw pull_error(pull_error_kind::bad_source, what + ": no such model or tag");
  if (r.status != 200) {
    throw pull_error(pull_error_kind::http, what + ": HTTP " + std::to_string(r.status));
  }
  const auto m = nlohmann::json::parse(r.body, nullptr, false);
  if (!m.is_object() || !m.contains("layers") || !m["layers"].is_array()) {
    throw pull_error(pull_error_kind::http, what + ": not a manifest");
  }
  pull_plan plan;
  const std::string name = s.ollama_repo.substr(s.ollama_repo.find('/') + 1);
  plan.name = name + "-" + s.ollama_tag;
  plan.aliases = {name + ":" + s.ollama_tag};
  plan.source = "ollama:" + (s.ollama_repo.rfind("library/", 0) == 0 ? name : s.ollama_repo) + ":" +
                s.ollama_tag;
  plan.revision = store::sha256_bytes(r.body);
  plan.kind = std::string(store::manifest_kind_gguf);
  plan.from = url_host(registry);
  for (const auto& layer : m["layers"]) {
    if (!layer.is_object()) continue;
    const std::string type = layer.value("mediaType", "");
    const std::string digest = layer.value("digest", "");
    const auto size = layer.find("size");
    if (!store::sha256_digest_valid(digest) || size == layer.end() || !size->is_number_unsigned()) {
      throw pull_error(pull_error_kind::http, what + ": a layer without a valid digest and size");
    }
    if (type.rfind(k_ollama_layer_prefix, 0) != 0) continue;
    const std::string kind = type.substr(k_ollama_layer_prefix.size());
    const std::string url = registry + "/v2/" + s.ollama_repo + "/blobs/" + digest;
    if (kind == "model") {
      if (!plan.files.empty()) {
        throw pull_error(pull_error_kind::not_a_model, what + ": several model layers");
      }
      plan.files.push_back({plan.name + ".gguf", digest, size->get<uint64_t>(), url, ""});
      continue;
    }
    if (kind != "template" && kind != "system" && kind != "params" && kind != "license") continue;
    if (size->get<uint64_t>() > k_ollama_small_layer_max_bytes) {
      throw pull_error(pull_error_kind::http, what + ": a " + kind + " layer over 1 MiB");
    }
    const auto body = http.get(url, k_ollama_small_layer_max_bytes);
    if (body.status != 200) {
      throw pull_error(pull_error_kind::http,
                       what + ": its " + kind + " layer: HTTP " + std::to_string(body.status));
    }
    if (const auto got = store::sha256_bytes(body.body); got != digest) {
      throw pull_error(pull_error_kind::digest,
                       what + ": its " + kind + " layer is " + got + ", not " + digest);
    }
    if (kind == "params") {
      auto j = nlohmann::json::parse(body.body, nullptr, false);
      if (j.is_discarded()) throw pull_error(pull_error_kind::http, what + ": params are not JSON");
      plan.metadata["params"] = std::move(j);
    } else {
      // Text in the manifest's JSON: it must be UTF-8 (nlohmann's dump refuses anything else).
      try {
        (void)nlohmann::json(body.body).dump();
      } catch (const nlohmann::json::exception&) {
        throw pull_error(pull_error_kind::http, what + ": its " + kind + " layer is not UTF-8");
      }
      plan.metadata[kind] = body.body;
    }
  }
  if (plan.files.empty()) {
    throw pull_error(pull_error_kind::not_a_model, what + ": no model layer");
  }
  return plan;
}

}  // namespace hearth::pull
