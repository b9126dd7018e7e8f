// The Hub's API as huggingface_hub uses it: GET /api/models/{repo}/revision/{rev} (the commit),
// GET /api/models/{repo}/tree/{commit}?recursive=true (paths, sizes, LFS SHA-256; pages linked by
// a Link header), GET /{repo}/resolve/{commit}/{path} (the content, redirected to a CDN for LFS
// files). Resolving by the commit, not the branch, makes every file of one pull one revision.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "pull/pull-plan.h"
#include "pull/pull.h"
#include "store/manifest.h"
#include "store/sha256.h"

namespace hearth::pull {

namespace {

constexpr size_t k_hf_api_max_bytes = size_t(32) << 20;
constexpr int k_hf_tree_max_pages = 100;

std::string hf_lower(std::string s) {
  for (char& c : s) c = char(std::tolower(uint8_t(c)));
  return s;
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         hf_lower(s.substr(s.size() - suffix.size())) == std::string(suffix);
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A path a server may list but never one a model may hold: absolute, or with a ".." step.
bool hf_path_unsafe(const std::string& p) {
  if (p.empty() || p[0] == '/' || p.find('\\') != std::string::npos) return true;
  size_t at = 0;
  while (at <= p.size()) {
    const auto next = std::min(p.find('/', at), p.size());
    if (p.compare(at, next - at, "..") == 0) return true;
    at = next + 1;
  }
  return false;
}

// The Hub's own error word (X-Error-Code: RepoNotFound, GatedRepo, RevisionNotFound...) or the
// status, for a message.
[[noreturn]] void hf_fail(const http_response& r, const std::string& what) {
  std::string code = r.header("x-error-code");
  std::string msg = what + ": HTTP " + std::to_string(r.status) + (code.empty() ? "" : " " + code);
  if (r.status == 401 || r.status == 403 || code == "GatedRepo") {
    msg += " (a private or gated repository needs HF_TOKEN)";
  }
  const bool source_fault = r.status == 401 || r.status == 403 || r.status == 404;
  throw pull_error(source_fault ? pull_error_kind::bad_source : pull_error_kind::http, msg);
}

nlohmann::json hf_json(const http_response& r, const std::string& what) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded()) throw pull_error(pull_error_kind::http, what + ": not JSON");
  return j;
}

// The next page of a listing: Link: <URL>; rel="next".
std::string link_next(const std::string& link) {
  size_t at = 0;
  while ((at = link.find('<', at)) != std::string::npos) {
    const auto close = link.find('>', at);
    if (close == std::string::npos) return "";
    const auto end = link.find(',', close);
    const std::string params = link.substr(close, end == std::string::npos ? end : end - close);
    if (params.find("rel=\"next\"") != std::string::npos)
      return link.substr(at + 1, close - at - 1);
    at = close;
  }
  return "";
}

struct hf_entry {
  std::string path, git_oid, digest;
  uint64_t size = 0;
};

std::vector<hf_entry> hf_tree(http_client& http, const std::string& endpoint,
                              const std::string& repo, const std::string& commit) {
  std::vector<hf_entry> files;
  std::string url = endpoint + "/api/models/" + repo + "/tree/" + url_escape(commit) +
                    "?recursive=true&expand=false";
  for (int page = 0; !url.empty(); ++page) {
    if (page == k_hf_tree_max_pages) {
      throw pull_error(
          pull_error_kind::http,
          repo + ": more than " + std::to_string(k_hf_tree_max_pages) + " pages of files");
    }
    const auto r = http.get(url, k_hf_api_max_bytes);
    if (r.status != 200) hf_fail(r, repo + " at " + commit);
    const auto j = hf_json(r, "the file list of " + repo);
    if (!j.is_array())
      throw pull_error(pull_error_kind::http, repo + ": the file list is not a list");
    for (const auto& e : j) {
      if (!e.is_object() || e.value("type", "") != "file") continue;
      hf_entry f;
      f.path = e.value("path", "");
      if (hf_path_unsafe(f.path)) {
        throw pull_error(pull_error_kind::unsafe_path,
                         repo + " lists an unsafe path '" + f.path + "' (refused)");
      }
      const auto size = e.find("size");
      if (size == e.end() || !size->is_number_unsigned()) continue;
      f.size = size->get<uint64_t>();
      f.git_oid = e.value("oid", "");
      if (const auto lfs = e.find("lfs"); lfs != e.end() && lfs->is_object()) {
        f.digest = "sha256:" + lfs->value("oid", "");
        if (!store::sha256_digest_valid(f.digest)) {
          throw pull_error(pull_error_kind::http, repo + ": bad LFS oid for " + f.path);
        }
        if (const auto ls = lfs->find("size"); ls != lfs->end() && ls->is_number_unsigned())
          f.size = ls->get<uint64_t>();
      }
      files.push_back(std::move(f));
    }
    url = link_next(r.header("link"));
    if (!url.empty()) url = url_resolve(r.url, url);
  }
  return files;
}

// Whether `path` names quantization `quant` ("Q4_K_M" in "Model-Q4_K_M.gguf" or
// "Q4_K_M/Model-00001-of-00002.gguf"), case-insensitive, not inside a longer word ("IQ4_K_M").
bool names_quant(const std::string& path, const std::string& quant) {
  const std::string p = hf_lower(path), q = hf_lower(quant);
  for (size_t at = p.find(q); at != std::string::npos; at = p.find(q, at + 1)) {
    const bool left = at == 0 || !std::isalnum(uint8_t(p[at - 1]));
    const size_t e = at + q.size();
    const bool right = e == p.size() || !(std::isalnum(uint8_t(p[e])) || p[e] == '_');
    if (left && right) return true;
  }
  return false;
}

// GGUF files grouped as models: one file, or the parts of a split file under their prefix.
std::map<std::string, std::vector<const hf_entry*>> gguf_groups(
    const std::vector<const hf_entry*>& ggufs) {
  std::map<std::string, std::vector<const hf_entry*>> groups;
  for (const auto* f : ggufs) {
    std::string prefix;
    int count = 0;
    groups[gguf_split_part(f->path, &prefix, &count) ? prefix : f->path].push_back(f);
  }
  return groups;
}

std::string group_list(const std::map<std::string, std::vector<const hf_entry*>>& groups) {
  std::string s;
  for (const auto& [k, v] : groups) s += (s.empty() ? "" : ", ") + base_name(v.front()->path);
  return s;
}

}  // namespace

bool gguf_split_part(const std::string& path, std::string* prefix, int* count) {
  // "-00001-of-00003.gguf": 20 characters.
  if (!ends_with_ci(path, ".gguf") || path.size() <= 20) return false;
  const std::string t = path.substr(path.size() - 20, 15);  // "-00001-of-00003"
  if (t[0] != '-' || t.substr(6, 4) != "-of-") return false;
  for (size_t i : {1, 2, 3, 4, 5, 10, 11, 12, 13, 14})
    if (!std::isdigit(uint8_t(t[i]))) return false;
  if (prefix) *prefix = path.substr(0, path.size() - 20);
  if (count) *count = std::stoi(t.substr(10, 5));
  return true;
}

std::string gguf_model_stem(const std::string& path) {
  std::string name = base_name(path);
  std::string prefix;
  if (gguf_split_part(name, &prefix, nullptr)) return prefix;
  if (ends_with_ci(name, ".gguf")) name.resize(name.size() - 5);
  return name;
}

pull_plan hf_plan(http_client& http, const source_spec& s) {
  const pull_options& o = http.options();
  std::string endpoint = o.hf_endpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  http.set_token(o.hf_token, endpoint);

  const auto info =
      http.get(endpoint + "/api/models/" + s.repo + "/revision/" + url_escape(s.revision),
               k_hf_api_max_bytes);
  if (info.status != 200) hf_fail(info, s.repo + "@" + s.revision);
  const auto ij = hf_json(info, s.repo);
  const std::string commit = ij.is_object() ? ij.value("sha", "") : "";
  if (commit.empty() || commit.size() > 64 ||
      !std::all_of(commit.begin(), commit.end(),
                   [](char c) { return std::isxdigit(uint8_t(c)); })) {
    throw pull_error(pull_error_kind::http,
                     s.repo + "@" + s.revision + ": no commit in the answer");
  }
  const auto files = hf_tree(http, endpoint, s.repo, commit);

  std::vector<const hf_entry*> pick;
  pull_plan plan;
  plan.revision = commit;
  plan.from = url_host(endpoint);
  std::vector<const hf_entry*> ggufs;
  for (const auto& f : files) {
    if (ends_with_ci(f.path, ".gguf") && hf_lower(base_name(f.path)).rfind("mmproj", 0) != 0)
      ggufs.push_back(&f);
  }
  if (!s.file.empty()) {
    auto it = std::find_if(files.begin(), files.end(),
                           [&](const hf_entry& f) { return f.path == s.file; });
    if (it == files.end()) {
      throw pull_error(pull_error_kind::bad_source,
                       s.repo + "@" + s.revision + " has no file " + s.file);
    }
    std::string prefix;
    int count = 0;
    if (gguf_split_part(it->path, &prefix, &count)) {
      pick = gguf_groups(ggufs)[prefix];
    } else {
      pick = {&*it};
    }
  } else {
    std::vector<const hf_entry*> candidates;
    for (const auto* f : ggufs)
      if (s.quant.empty() || names_quant(f->path, s.quant)) candidates.push_back(f);
    const auto groups = gguf_groups(candidates);
    if (groups.size() == 1) {
      pick = groups.begin()->second;
    } else if (groups.size() > 1) {
      throw pull_error(pull_error_kind::bad_source,
                       s.repo + " has several GGUF models" +
                           (s.quant.empty() ? "" : " of quantization " + s.quant) + ": " +
                           group_list(groups) + " (name one: hf:" + s.repo + "/FILE.gguf" +
                           (s.quant.empty() ? " or hf:" + s.repo + ":QUANT)" : ")"));
    } else if (!s.quant.empty()) {
      throw pull_error(pull_error_kind::bad_source,
                       s.repo + " has no GGUF file of quantization " + s.quant +
                           (ggufs.empty() ? "" : "; it has " + group_list(gguf_groups(ggufs))));
    } else {
      // A Hugging Face folder: config.json, the tokenizer's files, the safetensors (and index).
      static const std::set<std::string> keep = {
          "config.json",       "generation_config.json",
          "tokenizer.json",    "tokenizer_config.json",
          "tokenizer.model",   "special_tokens_map.json",
          "vocab.json",        "merges.txt",
          "added_tokens.json", "model.safetensors.index.json"};
      bool config = false, weights = false;
      for (const auto& f : files) {
        if (f.path.find('/') != std::string::npos) continue;
        if (keep.count(f.path) || ends_with_ci(f.path, ".safetensors")) pick.push_back(&f);
        config = config || f.path == "config.json";
        weights = weights || ends_with_ci(f.path, ".safetensors");
      }
      if (!config || !weights) {
        throw pull_error(pull_error_kind::not_a_model,
                         s.repo + " has neither a GGUF file nor config.json with safetensors");
      }
    }
  }
  if (pick.empty()) throw pull_error(pull_error_kind::bad_source, s.repo + ": nothing to pull");
  std::string prefix;
  int count = 0;
  const bool split = gguf_split_part(pick.front()->path, &prefix, &count);
  if (split && int(pick.size()) != count) {
    throw pull_error(pull_error_kind::bad_source,
                     s.repo + ": " + std::to_string(pick.size()) + " of the " +
                         std::to_string(count) + " parts of " + base_name(prefix) + " are listed");
  }
  const bool gguf = ends_with_ci(pick.front()->path, ".gguf");
  plan.kind = std::string(!gguf   ? store::manifest_kind_hf_folder
                          : split ? store::manifest_kind_gguf_split
                                  : store::manifest_kind_gguf);
  plan.name = gguf ? gguf_model_stem(pick.front()->path) : base_name(s.repo);
  plan.source = "hf:" + s.repo + (gguf ? "/" + pick.front()->path : "");
  for (const auto* f : pick) {
    plan_file pf;
    pf.path = base_name(f->path);
    pf.digest = f->digest;
    pf.size = f->size;
    pf.git_oid = f->git_oid;
    std::string escaped;
    size_t at = 0;
    while (at <= f->path.size()) {
      const auto next = std::min(f->path.find('/', at), f->path.size());
      escaped += (escaped.empty() ? "" : "/") + url_escape(f->path.substr(at, next - at));
      at = next + 1;
    }
    pf.url = endpoint + "/" + s.repo + "/resolve/" + commit + "/" + escaped;
    plan.files.push_back(std::move(pf));
  }
  return plan;
}

}  // namespace hearth::pull
