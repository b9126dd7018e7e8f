#include "gateway/http.h"

#include <nlohmann/json.hpp>

#include "gateway/url.h"

namespace hearth::gateway {

std::string http_request::header(std::string_view name) const {
  auto it = headers.find(std::string(name));
  return it == headers.end() ? std::string() : it->second;
}

std::string http_request::query_param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    size_t eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    if (percent_decode(key, true) != name) continue;
    return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true);
  }
  return {};
}

http_response error_response(int status, std::string_view message, std::string_view type,
                             std::string_view param, std::string_view code) {
  auto or_null = [](std::string_view v) {
    return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::string(v));
  };
  nlohmann::json body = {{"error",
                          {{"message", std::string(message)},
                           {"type", std::string(type)},
                           {"param", or_null(param)},
                           {"code", or_null(code)}}}};
  http_response r;
  r.status = status;
  // Replace invalid UTF-8 rather than throw: a message may quote bytes a client sent.
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

}  // namespace hearth::gateway
