#include "gateway/router.h"

#include <stdexcept>

namespace hearth::gateway {

namespace {

// "/v1/models/{id}" -> {"v1", "models", "{id}"}. Empty segments are kept, so "/a//b" and "/a/b"
// are different paths, as they are to any other server.
std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

bool is_parameter(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// How well `segments` (a route's pattern) matches `path`: -1 when it does not; else a score in
// which each exact segment, from the left, outranks every parameter after it, so
// "/v1/batches/export" wins over "/v1/batches/{id}" and "/a/x/{p}" over "/a/{q}/y".
long long match_score(const std::vector<std::string>& segments,
                      const std::vector<std::string_view>& path) {
  if (segments.size() != path.size()) return -1;
  long long score = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    score <<= 1;
    if (is_parameter(segments[i])) {
      // A parameter stands for one whole, non-empty segment.
      if (path[i].empty()) return -1;
    } else if (segments[i] == path[i]) {
      score |= 1;
    } else {
      return -1;
    }
  }
  return score;
}

}  // namespace

void router::add(std::string method, std::string pattern, handler h, route_options o) {
  if (pattern.empty() || pattern.front() != '/')
    throw std::invalid_argument("route pattern must start with '/': \"" + pattern + "\"");
  route r{std::move(method), {}, std::move(h), o};
  for (auto s : split_path(pattern)) r.segments.emplace_back(s);
  if (r.segments.size() > 60)
    throw std::invalid_argument("route pattern has more than 60 segments: \"" + pattern + "\"");
  for (const auto& existing : routes_)
    if (existing.method == r.method && existing.segments == r.segments)
      throw std::invalid_argument("route added twice: " + r.method + " " + pattern);
  routes_.push_back(std::move(r));
}

router::match router::find(std::string_view method, std::string_view path) const {
  match m;
  auto parts = split_path(path);
  const route* best = nullptr;
  long long best_score = -1;
  for (const auto& r : routes_) {
    long long score = match_score(r.segments, parts);
    if (score < 0) continue;
    if (r.method != method) {
      m.path_known = true;
      continue;
    }
    if (score > best_score) best = &r, best_score = score;
  }
  if (!best) return m;
  m.h = &best->h;
  m.options = best->options;
  m.path_known = true;
  for (size_t i = 0; i < best->segments.size(); ++i)
    if (is_parameter(best->segments[i]))
      m.params[best->segments[i].substr(1, best->segments[i].size() - 2)] = std::string(parts[i]);
  return m;
}

}  // namespace hearth::gateway
