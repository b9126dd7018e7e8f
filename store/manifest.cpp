#include "store/manifest.h"

#include <algorithm>
#include <set>

#include "store/sha256.h"

namespace hearth::store {

std::string model_digest(const std::vector<store_file>& files) {
  if (files.size() == 1) return files[0].digest;
  std::vector<const store_file*> sorted;
  for (const auto& f : files) sorted.push_back(&f);
  std::sort(sorted.begin(), sorted.end(),
            [](const store_file* a, const store_file* b) { return a->path < b->path; });
  sha256 h;
  for (const auto* f : sorted) {
    std::string line = f->path + " " + f->digest + "\n";
    h.update(line.data(), line.size());
  }
  return h.finish();
}

namespace {

bool manifest_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':' || c == '+' || c == '@';
}

bool manifest_component_valid(std::string_view s) {
  if (s.empty() || s.size() > 200 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), manifest_name_char);
}

}  // namespace

bool model_name_valid(std::string_view name) {
  return manifest_component_valid(name) && name[0] != '.';
}

bool model_file_path_valid(std::string_view path) {
  if (path.empty() || path.size() > 1000) return false;
  size_t start = 0;
  for (;;) {
    size_t slash = path.find('/', start);
    if (!manifest_component_valid(path.substr(start, slash - start))) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

result<void> manifest_check(const manifest& m) {
  if (!model_name_valid(m.name)) return error{"name: not a model name: \"" + m.name + "\""};
  for (const auto& a : m.aliases)
    if (!model_name_valid(a)) return error{"aliases: not a model name: \"" + a + "\""};
  if (m.kind != manifest_kind_gguf && m.kind != manifest_kind_gguf_split &&
      m.kind != manifest_kind_hf_folder)
    return error{"kind: unknown kind \"" + m.kind + "\""};
  if (m.files.empty()) return error{"files: a model has at least one file"};
  if (m.kind == manifest_kind_gguf && m.files.size() != 1)
    return error{"files: a \"gguf\" model is one file"};
  std::set<std::string_view> paths;
  for (const auto& f : m.files) {
    if (!model_file_path_valid(f.path))
      return error{"files: not a relative path inside the model: \"" + f.path + "\""};
    if (!paths.insert(f.path).second) return error{"files: \"" + f.path + "\" twice"};
    if (!sha256_digest_valid(f.digest))
      return error{"files: \"" + f.path + "\" has no valid digest"};
  }
  // A directory view cannot hold both "a" and "a/b".
  for (const auto& f : m.files)
    if (paths.lower_bound(f.path + "/") != paths.end() &&
        paths.lower_bound(f.path + "/")->starts_with(f.path + "/"))
      return error{"files: \"" + f.path + "\" is both a file and a folder"};
  if (!m.digest.empty() && m.digest != model_digest(m.files))
    return error{"digest: " + m.digest + " is not the digest of the files"};
  return {};
}

nlohmann::json manifest_to_json(const manifest& m) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : m.files)
    files.push_back({{"path", f.path}, {"digest", f.digest}, {"size", f.size}});
  return {{"name", m.name},
          {"aliases", m.aliases},
          {"source", m.source},
          {"revision", m.revision},
          {"kind", m.kind},
          {"files", files},
          {"digest", m.digest.empty() ? model_digest(m.files) : m.digest},
          {"metadata", m.metadata},
          {"pinned", m.pinned},
          {"created_ms", m.created_ms}};
}

result<manifest> manifest_from_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return error{"not a JSON object"};
  manifest m;
  try {
    m.name = j.at("name").get<std::string>();
    m.aliases = j.value("aliases", std::vector<std::string>{});
    m.source = j.value("source", "");
    m.revision = j.value("revision", "");
    m.kind = j.at("kind").get<std::string>();
    for (const auto& f : j.at("files")) {
      m.files.push_back({f.at("path").get<std::string>(), f.at("digest").get<std::string>(),
                         f.at("size").get<uint64_t>()});
    }
    m.digest = j.at("digest").get<std::string>();
    m.metadata = j.value("metadata", nlohmann::json::object());
    m.pinned = j.value("pinned", false);
    m.created_ms = j.value("created_ms", int64_t(0));
  } catch (const nlohmann::json::exception& e) {
    return error{std::string("a field is missing or of the wrong type: ") + e.what()};
  }
  if (m.digest.empty()) return error{"digest: missing"};
  if (auto ok = manifest_check(m); !ok) return ok.err();
  return m;
}

}  // namespace hearth::store
