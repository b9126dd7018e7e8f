#include "gateway/multipart.h"

#include <algorithm>
#include <cctype>

namespace hearth::gateway {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The parameters after the first ';' of a header value (`type; a=b; c="d"`), as name -> value;
// quoted values lose their quotes and backslash escapes. Returns an error for an unterminated
// quoted string.
result<std::vector<std::pair<std::string, std::string>>> header_params(std::string_view value) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = value.find(';');
  while (i != std::string_view::npos && i < value.size()) {
    ++i;  // past ';'
    size_t eq = value.find('=', i);
    size_t semi = value.find(';', i);
    if (eq == std::string_view::npos || (semi != std::string_view::npos && semi < eq)) {
      i = semi;  // a parameter without a value: skipped
      continue;
    }
    std::string name(trim(value.substr(i, eq - i)));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    size_t j = eq + 1;
    while (j < value.size() && (value[j] == ' ' || value[j] == '\t')) ++j;
    std::string v;
    if (j < value.size() && value[j] == '"') {
      ++j;
      bool closed = false;
      for (; j < value.size(); ++j) {
        if (value[j] == '\\' && j + 1 < value.size()) {
          v += value[++j];
        } else if (value[j] == '"') {
          closed = true;
          ++j;
          break;
        } else {
          v += value[j];
        }
      }
      if (!closed) return error{"parameter " + name + ": unterminated quoted string"};
      i = value.find(';', j);
    } else {
      size_t end = value.find(';', j);
      v = std::string(trim(value.substr(j, end == std::string_view::npos ? end : end - j)));
      i = end;
    }
    out.emplace_back(std::move(name), std::move(v));
  }
  return out;
}

std::string part_where(size_t n) {
  return "multipart part " + std::to_string(n + 1);
}

}  // namespace

result<std::string> multipart_boundary(std::string_view content_type) {
  std::string_view type = trim(content_type.substr(0, content_type.find(';')));
  if (!iequals(type, "multipart/form-data")) {
    return error{"Content-Type: expected multipart/form-data, got \"" +
                 std::string(type.substr(0, 100)) + "\""};
  }
  auto params = header_params(content_type);
  if (!params) return error{"Content-Type: " + params.message()};
  for (auto& [name, value] : *params) {
    if (name != "boundary") continue;
    // RFC 2046: 1 to 70 characters.
    if (value.empty() || value.size() > 70) {
      return error{"Content-Type: the boundary must have 1 to 70 characters, it has " +
                   std::to_string(value.size())};
    }
    return value;
  }
  return error{"Content-Type: multipart/form-data without a boundary"};
}

result<std::vector<form_part>> multipart_parse(std::string_view body, std::string_view boundary,
                                               const multipart_limits& limits) {
  if (boundary.empty()) return error{"multipart: empty boundary"};
  const std::string dash = "--" + std::string(boundary);
  // Every delimiter after the first is preceded by CRLF (RFC 2046 5.1.1).
  const std::string delimiter = "\r\n" + dash;
  size_t pos;
  if (body.substr(0, dash.size()) == dash) {
    pos = dash.size();
  } else {
    // A preamble comes before the first delimiter.
    size_t first = body.find(delimiter);
    if (first == std::string_view::npos) return error{"multipart: no boundary line in the body"};
    pos = first + delimiter.size();
  }
  std::vector<form_part> parts;
  for (;;) {
    // After a delimiter: "--" ends the body; else optional whitespace and CRLF.
    if (body.substr(pos, 2) == "--") return parts;
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    if (body.substr(pos, 2) != "\r\n") {
      return error{"multipart: expected CRLF after the boundary of " + part_where(parts.size())};
    }
    pos += 2;
    if (parts.size() == limits.max_parts) {
      return error{"multipart: more than " + std::to_string(limits.max_parts) + " parts"};
    }
    size_t header_end = body.find("\r\n\r\n", pos);
    // A part with no header at all starts with the blank line right away.
    size_t headers_size;
    size_t content_start;
    if (body.substr(pos, 2) == "\r\n") {
      headers_size = 0;
      content_start = pos + 2;
    } else {
      if (header_end == std::string_view::npos) {
        return error{part_where(parts.size()) + ": its headers do not end"};
      }
      headers_size = header_end - pos;
      content_start = header_end + 4;
    }
    if (headers_size > limits.max_part_header_bytes) {
      return error{part_where(parts.size()) + ": headers of " + std::to_string(headers_size) +
                   " bytes, at most " + std::to_string(limits.max_part_header_bytes)};
    }
    form_part part;
    bool has_disposition = false;
    std::string_view headers = body.substr(pos, headers_size);
    while (!headers.empty()) {
      size_t eol = headers.find("\r\n");
      std::string_view line = headers.substr(0, eol);
      headers.remove_prefix(eol == std::string_view::npos ? headers.size() : eol + 2);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) {
        return error{part_where(parts.size()) + ": a header line without ':'"};
      }
      std::string_view name = trim(line.substr(0, colon));
      std::string_view value = trim(line.substr(colon + 1));
      if (iequals(name, "content-disposition")) {
        if (!iequals(trim(value.substr(0, value.find(';'))), "form-data")) {
          return error{part_where(parts.size()) + ": Content-Disposition is not form-data"};
        }
        auto params = header_params(value);
        if (!params) return error{part_where(parts.size()) + ": " + params.message()};
        for (auto& [n, v] : *params) {
          if (n == "name") part.name = v;
          if (n == "filename") part.filename = v;
        }
        has_disposition = true;
      } else if (iequals(name, "content-type")) {
        part.content_type = std::string(value);
      }
    }
    if (!has_disposition || part.name.empty()) {
      return error{part_where(parts.size()) + ": no Content-Disposition with a name"};
    }
    size_t end = body.find(delimiter, content_start);
    if (end == std::string_view::npos) {
      return error{part_where(parts.size()) + " (\"" + part.name +
                   "\"): no closing boundary (the body was cut short?)"};
    }
    part.content = body.substr(content_start, end - content_start);
    parts.push_back(std::move(part));
    pos = end + delimiter.size();
  }
}

}  // namespace hearth::gateway
