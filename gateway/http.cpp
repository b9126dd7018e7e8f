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

std::string error_body_bounded(std::string body, size_t max) {
  if (body.size() <= max) return body;
  const size_t bytes = body.size();
  auto j = nlohmann::json::parse(body, nullptr, false);
  nlohmann::json* holder = &j;
  if (j.is_object() && j.contains("error") && j["error"].is_object()) holder = &j["error"];
  if (holder->is_object() && holder->contains("message") && (*holder)["message"].is_string()) {
    auto& m = (*holder)["message"].get_ref<std::string&>();
    size_t keep = std::min<size_t>(m.size(), 512);
    while (keep > 0 && keep < m.size() && (uint8_t(m[keep]) & 0xC0) == 0x80) --keep;
    m = m.substr(0, keep) + "... (cut from " + std::to_string(m.size()) + " bytes)";
    body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (body.size() <= max) return body;
  }
  return error_response(500,
                        "an error of " + std::to_string(bytes) + " bytes, more than " +
                            std::to_string(max) + " are kept",
                        "server_error")
      .body;
}

}  // namespace hearth::gateway
