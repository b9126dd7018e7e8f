#include "gateway/batch-input.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/json-nesting.h"

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

// Serializing JSON recurses once per level: a line of a million '[' must be refused before.
constexpr uint32_t max_json_depth = 64;

// A value as a short JSON text for an error message.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

}  // namespace

batch_input batch_input_parse(std::string_view content, std::string_view endpoint,
                              uint32_t max_lines) {
  batch_input in;
  std::unordered_map<std::string, uint32_t> seen;  // custom_id -> its 1-based line
  auto refuse = [&](std::string code, std::string message, std::string param, uint32_t line) {
    if (in.errors.size() < batch_max_errors) {
      in.errors.push_back({std::move(code), std::move(message), std::move(param), line});
    }
  };
  uint32_t line_no = 0;
  size_t pos = 0;
  while (pos < content.size() && in.errors.size() < batch_max_errors) {
    size_t eol = content.find('\n', pos);
    std::string_view text = content.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
    pos = eol == std::string_view::npos ? content.size() : eol + 1;
    ++line_no;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank
    uint32_t index = uint32_t(in.lines.size());
    if (index == max_lines) {
      refuse("too_many_requests",
             "the input file has more than " + std::to_string(max_lines) + " requests", "",
             line_no);
      break;
    }
    if (size_t d = json_nesting_depth(text); d > max_json_depth) {
      refuse(
          "invalid_json_line",
          "nested " + std::to_string(d) + " levels deep, at most " + std::to_string(max_json_depth),
          "", line_no);
      continue;
    }
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      refuse("invalid_json_line", "this line is not valid JSON", "", line_no);
      continue;
    }
    if (!j.is_object()) {
      refuse("invalid_json_line", "expected a JSON object, got " + shown(j), "", line_no);
      continue;
    }
    auto field = [&](const char* name) -> const json* {
      auto it = j.find(name);
      return it == j.end() ? nullptr : &*it;
    };
    const json* custom_id = field("custom_id");
    const json* method = field("method");
    const json* url = field("url");
    const json* body = field("body");
    if (!custom_id || !custom_id->is_string() || custom_id->get_ref<const std::string&>().empty()) {
      refuse("missing_required_parameter",
             custom_id ? "custom_id must be a non-empty string, got " + shown(*custom_id)
                       : "custom_id is missing",
             "custom_id", line_no);
      continue;
    }
    const std::string& id = custom_id->get_ref<const std::string&>();
    if (id.size() > batch_max_custom_id_bytes) {
      refuse("invalid_custom_id",
             "custom_id has " + std::to_string(id.size()) + " bytes, at most " +
                 std::to_string(batch_max_custom_id_bytes),
             "custom_id", line_no);
      continue;
    }
    if (!method || *method != "POST") {
      refuse("invalid_method",
             "method must be \"POST\", got " + (method ? shown(*method) : "nothing"), "method",
             line_no);
      continue;
    }
    if (!url || !url->is_string()) {
      refuse("missing_required_parameter",
             "url must be a string, got " + (url ? shown(*url) : "nothing"), "url", line_no);
      continue;
    }
    if (*url != endpoint) {
      refuse(
          *url == "/v1/chat/completions" || *url == "/v1/completions" ? "mismatched_endpoint"
                                                                      : "invalid_url",
          "url " + shown(*url) + " is not the batch's endpoint \"" + std::string(endpoint) + "\"",
          "url", line_no);
      continue;
    }
    if (!body || !body->is_object()) {
      refuse("missing_required_parameter",
             "body must be an object, got " + (body ? shown(*body) : "nothing"), "body", line_no);
      continue;
    }
    if (auto [it, fresh] = seen.emplace(id, line_no); !fresh) {
      refuse("duplicate_custom_id",
             "the custom_id \"" + id + "\" is a duplicate of line " + std::to_string(it->second) +
                 "; each request of a batch needs its own",
             "custom_id", line_no);
      continue;
    }
    in.lines.push_back(
        {index, line_no, id, body->dump(-1, ' ', false, json::error_handler_t::replace)});
  }
  if (in.lines.empty() && in.errors.empty()) {
    refuse("empty_file", "the input file has no requests", "", 0);
  }
  return in;
}

std::string batch_input_errors_json(const std::vector<batch_input_error>& errors) {
  json data = json::array();
  for (const batch_input_error& e : errors) {
    data.push_back({{"code", e.code},
                    {"message", e.message},
                    {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                    {"line", e.line ? json(e.line) : json(nullptr)}});
  }
  return json{{"object", "list"}, {"data", data}}.dump(-1, ' ', false,
                                                       json::error_handler_t::replace);
}

}  // namespace hearth::gateway
