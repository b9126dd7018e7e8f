#include "pull/pull.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "engine/io/gguf.h"
#include "engine/io/safetensors.h"
#include "pull/blob-download.h"
#include "pull/http-client.h"
#include "pull/pull-plan.h"
#include "pull/source-spec.h"

namespace hearth::pull {

namespace fs = std::filesystem;

namespace {

// A Hub file outside LFS (config.json, tokenizer files) is fetched into memory: they are small,
// and one that is not is refused.
constexpr uint64_t k_small_file_max_bytes = uint64_t(64) << 20;

std::string pull_env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool pull_ends_with(const std::string& s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(uint8_t(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
  return true;
}

// "sha256:<hex>" from "sha256:<HEX>" or "<hex>"; "" stays "".
std::string digest_form(const std::string& s) {
  if (s.empty()) return s;
  std::string d = s.rfind("sha256:", 0) == 0 ? s : "sha256:" + s;
  std::transform(d.begin(), d.end(), d.begin(),
                 [](char c) { return char(std::tolower(uint8_t(c))); });
  if (!store::sha256_digest_valid(d)) {
    throw pull_error(pull_error_kind::bad_source, "not a SHA-256 digest: " + s);
  }
  return d;
}

// The git blob id of bytes ("blob <size>\0" + bytes, SHA-1): what the Hub lists for a file
// outside LFS.
std::string git_blob_oid(const std::string& bytes) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  const std::string head = "blob " + std::to_string(bytes.size()) + std::string(1, '\0');
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestInit_ex(ctx.get(), EVP_sha1(), nullptr);
  EVP_DigestUpdate(ctx.get(), head.data(), head.size());
  EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size());
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

// The checks a file must pass before it may become part of a model (its bytes are the server's):
// a GGUF file's header and tensor table, a safetensors header, a JSON file's syntax. The
// message names the file.
void check_model_file(const fs::path& file, const std::string& path_in_model) {
  std::string why;
  if (pull_ends_with(path_in_model, ".gguf")) {
    auto g = gguf_file::open(file.string());
    if (!g) why = g.message();
  } else if (pull_ends_with(path_in_model, ".safetensors")) {
    auto st = safetensors_file::open(file.string());
    if (!st) why = st.message();
  } else if (pull_ends_with(path_in_model, ".json")) {
    std::ifstream in(file, std::ios::binary);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || (path_in_model == "config.json" && !j.is_object())) why = "not JSON";
  }
  if (!why.empty()) {
    // The partial's path says nothing to a user: the message is about the model's file.
    const auto at = why.find(file.string());
    if (at != std::string::npos) why.replace(at, file.string().size(), path_in_model);
    throw pull_error(pull_error_kind::not_a_model,
                     path_in_model + " is not a valid model file (" + why + ")");
  }
}

// Where a partial blob of `digest` lives (store/README.md's layout): one there with the same
// size is resumed, so its space is taken already.
bool partial_exists(const store::model_store& store, const std::string& digest, uint64_t size) {
  std::error_code ec;
  const auto part = store.root() / "partial" /
                    ("sha256-" + std::string(store::sha256_digest_hex(digest)) + ".part");
  return fs::file_size(part, ec) == size && !ec;
}

std::unique_ptr<store::partial_blob> open_blob(store::model_store& store, const std::string& digest,
                                               uint64_t size) {
  try {
    return store.open_partial(digest, size);
  } catch (const store::blob_busy& e) {
    throw pull_error(pull_error_kind::busy, e.what());
  } catch (const store::no_space& e) {
    throw pull_error(pull_error_kind::no_space, e.what());
  }
}

// The file checked as what it is in the model, then committed: a file that is not a model file
// never becomes a blob.
void check_and_commit(store::partial_blob& blob, const std::string& path_in_model) {
  try {
    check_model_file(blob.part_path(), path_in_model);
  } catch (...) {
    blob.discard();
    throw;
  }
  try {
    blob.commit();
  } catch (const store::digest_mismatch& e) {
    throw pull_error(pull_error_kind::digest, path_in_model + ": " + e.what() + " (refused)");
  }
}

// A Hub file outside LFS: into memory, checked against its git id, then a blob.
void pull_small_file(store::model_store& store, http_client& http, plan_file& f) {
  if (f.size > k_small_file_max_bytes) {
    throw pull_error(pull_error_kind::http, f.path + ": over 64 MiB and not in LFS");
  }
  const auto r = http.get(f.url, size_t(f.size) + 1);
  if (r.status != 200) {
    throw pull_error(r.status == 404 ? pull_error_kind::bad_source : pull_error_kind::http,
                     f.url + ": HTTP " + std::to_string(r.status));
  }
  if (r.body.size() != f.size || (!f.git_oid.empty() && git_blob_oid(r.body) != f.git_oid)) {
    throw pull_error(pull_error_kind::digest, f.path + ": the bytes do not match the file list (" +
                                                  std::to_string(r.body.size()) + " bytes)");
  }
  f.digest = store::sha256_bytes(r.body);
  if (store.has_blob(f.digest)) return;
  auto blob = open_blob(store, f.digest, f.size);
  if (!r.body.empty()) blob->write(0, r.body.data(), r.body.size());
  blob->mark_done(0, r.body.size());
  check_and_commit(*blob, f.path);
}

pull_plan url_plan(const source_spec& s, const pull_request& req) {
  if (req.sha256.empty()) {
    throw pull_error(pull_error_kind::bad_source,
                     "a URL needs its digest: --sha256 DIGEST (" + s.url + ")");
  }
  pull_plan plan;
  std::string path = s.url.substr(0, s.url.find_first_of("?#"));
  path = path.substr(path.rfind('/') + 1);
  if (path.empty() || !store::model_file_path_valid(path)) path = "model.gguf";
  plan.name = gguf_model_stem(path);
  plan.source = s.url;
  plan.kind = std::string(store::manifest_kind_gguf);
  plan.from = url_host(s.url);
  plan.files.push_back({path, digest_form(req.sha256), 0, s.url, ""});
  return plan;
}

// Files of a folder on this machine that make a model: a Hugging Face folder's, or the parts of
// a split GGUF.
pull_plan local_folder_plan(const fs::path& dir) {
  pull_plan plan;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  const bool hf = std::find(names.begin(), names.end(), "config.json") != names.end();
  for (const auto& n : names) {
    const bool take = hf ? (pull_ends_with(n, ".safetensors") || pull_ends_with(n, ".json") ||
                            n == "tokenizer.model" || n == "merges.txt")
                         : gguf_split_part(n, nullptr, nullptr);
    if (take) plan.files.push_back({n, "", fs::file_size(dir / n), (dir / n).string(), ""});
  }
  if (plan.files.empty()) {
    throw pull_error(pull_error_kind::not_a_model,
                     dir.string() + " holds neither config.json nor a split GGUF's parts");
  }
  plan.kind = std::string(hf ? store::manifest_kind_hf_folder : store::manifest_kind_gguf_split);
  plan.name = hf ? dir.filename().string() : gguf_model_stem(plan.files.front().path);
  return plan;
}

// A file or folder already on this machine: checked, then imported (a hard link where the
// store is on the same filesystem: no second copy).
pull_plan local_plan(store::model_store& store, const source_spec& s, const pull_request& req) {
  std::error_code ec;
  fs::path src = fs::absolute(s.path, ec);
  if (!fs::exists(src, ec)) {
    throw pull_error(
        pull_error_kind::bad_source,
        "no such file or folder: " + s.path +
            " (sources: hf:OWNER/REPO[:QUANT][@REV], ollama:NAME[:TAG], https://..., a path)");
  }
  pull_plan plan;
  if (fs::is_directory(src, ec)) {
    while (src.filename().empty() && src.has_parent_path() && src != src.parent_path())
      src = src.parent_path();
    plan = local_folder_plan(src);
  } else {
    plan.files.push_back({src.filename().string(), "", fs::file_size(src), src.string(), ""});
    plan.kind = std::string(store::manifest_kind_gguf);
    plan.name = gguf_model_stem(src.filename().string());
    if (!pull_ends_with(plan.files[0].path, ".gguf")) plan.files[0].path = plan.name + ".gguf";
  }
  plan.source = src.string();
  plan.from = "local";
  for (auto& f : plan.files) {
    check_model_file(f.url, f.path);
    const std::string want = plan.files.size() == 1 ? digest_form(req.sha256) : "";
    try {
      f.digest = "sha256:" + store.import_file(f.url, want).filename().string().substr(7);
    } catch (const store::digest_mismatch& e) {
      throw pull_error(pull_error_kind::digest, f.url + ": " + e.what());
    } catch (const store::no_space& e) {
      throw pull_error(pull_error_kind::no_space, e.what());
    }
  }
  return plan;
}

// Refuses up front what the store cannot hold; with evict_lru, makes room first.
void check_space(store::model_store& store, const pull_plan& plan, const pull_options& o) {
  uint64_t need = 0;
  for (const auto& f : plan.files) {
    if (f.digest.empty() || (!store.has_blob(f.digest) && !partial_exists(store, f.digest, f.size)))
      need += f.size;
  }
  if (need == 0 || store.capacity() >= need) return;
  if (o.evict_lru) store.make_room(need, o.in_use);
  if (const uint64_t cap = store.capacity(); cap < need) {
    throw pull_error(pull_error_kind::no_space,
                     plan.name + " needs " + std::to_string(need) + " more bytes; the store at " +
                         store.root().string() + " can take " + std::to_string(cap));
  }
}

}  // namespace

pull_options pull_options_from_env() {
  pull_options o;
  if (auto e = pull_env("HF_ENDPOINT"); !e.empty()) o.hf_endpoint = e;
  o.hf_token = pull_env("HF_TOKEN");
  if (o.hf_token.empty()) o.hf_token = pull_env("HUGGING_FACE_HUB_TOKEN");
  if (auto e = pull_env("HEARTH_OLLAMA_REGISTRY"); !e.empty()) o.ollama_registry = e;
  return o;
}

store::manifest pull_model(store::model_store& store, const pull_request& req,
                           const pull_options& options,
                           const std::function<void(const pull_progress&)>& progress,
                           const std::atomic<bool>* cancel) {
  auto spec = parse_source(req.source);
  if (!spec) throw pull_error(pull_error_kind::bad_source, spec.message());
  http_client http(options);
  pull_plan plan;
  switch (spec->kind) {
    case source_kind::hf:
      plan = hf_plan(http, *spec);
      break;
    case source_kind::ollama:
      plan = ollama_plan(http, *spec);
      break;
    case source_kind::url:
      plan = url_plan(*spec, req);
      break;
    case source_kind::local:
      plan = local_plan(store, *spec, req);
      break;
  }
  if (!req.name.empty()) plan.name = req.name;
  if (!store::model_name_valid(plan.name)) {
    throw pull_error(
        pull_error_kind::bad_source,
        "'" + plan.name + "' cannot name a model (letters, digits and ._-:+@; --name)");
  }
  for (const auto& f : plan.files) {
    if (!store::model_file_path_valid(f.path)) {
      throw pull_error(pull_error_kind::unsafe_path, "refused file path '" + f.path + "'");
    }
  }

  // A URL's size is what its server says (checked against the digest at the end).
  if (spec->kind == source_kind::url && !store.has_blob(plan.files[0].digest)) {
    const auto src = http.probe(plan.files[0].url);
    if (!src.size_known) {
      throw pull_error(pull_error_kind::http, plan.files[0].url + " does not say its size");
    }
    plan.files[0].size = src.size;
  }
  check_space(store, plan, options);

  pull_progress p;
  p.from = plan.from;
  for (const auto& f : plan.files)
    if (f.digest.empty() || !store.has_blob(f.digest)) p.bytes_total += f.size;
  auto report = [&] {
    if (progress) progress(p);
  };
  report();
  for (auto& f : plan.files) {
    if (cancel && cancel->load()) throw pull_error(pull_error_kind::cancelled, "cancelled");
    if (!f.digest.empty() && store.has_blob(f.digest)) continue;
    if (f.digest.empty()) {
      pull_small_file(store, http, f);
      p.bytes_done += f.size;
      report();
      continue;
    }
    if (f.size == 0) {  // nothing to fetch (a Range request of nothing is a 416)
      auto blob = open_blob(store, f.digest, 0);
      check_and_commit(*blob, f.path);
      continue;
    }
    auto src = http.probe(f.url);
    const std::string linked =
        src.first_headers.count("x-linked-size") ? src.first_headers.at("x-linked-size") : "";
    if ((src.size_known && src.size != f.size) ||
        (!linked.empty() && linked != std::to_string(f.size))) {
      throw pull_error(pull_error_kind::http, f.url + " announces " + std::to_string(src.size) +
                                                  " bytes where the list says " +
                                                  std::to_string(f.size));
    }
    auto blob = open_blob(store, f.digest, f.size);
    if (!src.ranges && blob->bytes_done() > 0) {
      // A server without Range requests: nothing to resume from.
      blob->discard();
      blob = open_blob(store, f.digest, f.size);
    }
    const uint64_t base = p.bytes_done;
    download_blob(
        http, *blob, src,
        [&](uint64_t done) {
          p.bytes_done = base + done;
          report();
        },
        cancel);
    check_and_commit(*blob, f.path);
    p.bytes_done = base + f.size;
  }
  report();

  store::manifest m;
  m.name = plan.name;
  m.aliases = plan.aliases;
  m.source = plan.source;
  m.revision = plan.revision;
  m.kind = plan.kind;
  m.metadata = plan.metadata;
  for (const auto& f : plan.files) m.files.push_back({f.path, f.digest, f.size});
  try {
    store.put_manifest(m);
  } catch (const store::bad_manifest& e) {
    throw pull_error(pull_error_kind::not_a_model, e.what());
  }
  auto stored = store.find(m.name);
  return stored ? *stored : m;
}

}  // namespace hearth::pull
