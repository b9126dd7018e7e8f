#include "pull/source-spec.h"

#include <algorithm>
#include <cctype>

namespace hearth::pull {

namespace {

// The characters the Hub and Ollama allow in a repository or model name.
bool source_name_valid(std::string_view s) {
  if (s.empty() || s.size() > 96 || s[0] == '.' || s[0] == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(uint8_t(c)) || c == '.' || c == '_' || c == '-';
  });
}

// A revision: a branch, tag or commit ("refs/pr/1" too); no spaces, no "..", not empty.
bool source_revision_valid(std::string_view s) {
  if (s.empty() || s.size() > 200 || s.find("..") != std::string_view::npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(uint8_t(c)) || c == '.' || c == '_' || c == '-' || c == '/';
  });
}

result<source_spec> parse_hf(std::string_view rest) {
  source_spec s;
  s.kind = source_kind::hf;
  s.revision = "main";
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    s.revision = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
    if (!source_revision_valid(s.revision)) {
      return error{"hf: bad revision '" + s.revision + "'"};
    }
  }
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return error{"hf: expected hf:OWNER/REPO[:QUANT][@REV] or hf:OWNER/REPO/FILE.gguf"};
  }
  const auto second = rest.find('/', slash + 1);
  std::string_view repo = rest.substr(0, second);
  if (second != std::string_view::npos) {
    s.file = std::string(rest.substr(second + 1));
    if (s.file.empty()) return error{"hf: empty file path in '" + std::string(rest) + "'"};
  } else if (const auto colon = repo.find(':'); colon != std::string_view::npos) {
    s.quant = std::string(repo.substr(colon + 1));
    repo = repo.substr(0, colon);
    if (!source_name_valid(s.quant)) return error{"hf: bad quantization '" + s.quant + "'"};
  }
  const std::string_view owner = repo.substr(0, slash), name = repo.substr(slash + 1);
  if (!source_name_valid(owner) || !source_name_valid(name)) {
    return error{"hf: bad repository '" + std::string(repo) + "'"};
  }
  s.repo = std::string(repo);
  return s;
}

result<source_spec> parse_ollama(std::string_view rest) {
  source_spec s;
  s.kind = source_kind::ollama;
  s.ollama_tag = "latest";
  const auto slash = rest.rfind('/');
  const auto colon = rest.find(':', slash == std::string_view::npos ? 0 : slash);
  if (colon != std::string_view::npos) {
    s.ollama_tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
  }
  std::string ns = "library";
  std::string_view name = rest;
  if (slash != std::string_view::npos) {
    ns = std::string(rest.substr(0, slash));
    name = rest.substr(slash + 1);
  }
  if (!source_name_valid(ns) || !source_name_valid(name) || !source_name_valid(s.ollama_tag)) {
    return error{"ollama: expected ollama:[NAMESPACE/]NAME[:TAG], got '" + std::string(rest) + "'"};
  }
  s.ollama_repo = ns + "/" + std::string(name);
  return s;
}

}  // namespace

result<source_spec> parse_source(std::string_view source) {
  if (source.empty()) return error{"empty source"};
  if (source.rfind("hf:", 0) == 0) return parse_hf(source.substr(3));
  if (source.rfind("ollama:", 0) == 0) return parse_ollama(source.substr(7));
  std::string lower(source.substr(0, 8));
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](char c) { return char(std::tolower(uint8_t(c))); });
  if (lower.rfind("https://", 0) == 0 || lower.rfind("http://", 0) == 0) {
    if (source.find_first_of(" \t\r\n") != std::string_view::npos) {
      return error{"a URL with spaces: " + std::string(source)};
    }
    source_spec s;
    s.kind = source_kind::url;
    s.url = std::string(source);
    return s;
  }
  source_spec s;
  s.kind = source_kind::local;
  s.path = std::string(source);
  return s;
}

}  // namespace hearth::pull
