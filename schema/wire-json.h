// Wire structs as JSON, one member per field under its wire name and in wire order: what
// `hearth ... --json` prints and what hearth-gateway's /v1/hearth/... routes answer, so that
// both show a job, a node or a model alike. Header-only over nlohmann-json: only targets that
// link it include this (the schema libraries themselves do not).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "schema/messages.h"

namespace hearth {

template <class T>
nlohmann::ordered_json wire_json(const T& v);

namespace wire_json_detail {
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

// 0.8f as 0.8, not 0.800000011920929.
inline double float_for_json(float f) {
  if (!std::isfinite(f)) return double(f);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", double(f));
  return std::strtod(buf, nullptr);
}

struct json_writer {
  nlohmann::ordered_json& j;
  template <class U>
  void operator()(const char* name, U& u) {
    j[name] = wire_json(u);
  }
  template <class U>
  void optional(const char* name, U& u) {
    j[name] = wire_json(u);
  }
};
}  // namespace wire_json_detail

template <class T>
nlohmann::ordered_json wire_json(const T& v) {
  using json = nlohmann::ordered_json;
  if constexpr (std::is_same_v<T, wire::job_state>) {
    return std::string(wire::job_state_name(v));
  } else if constexpr (std::is_same_v<T, wire::error_code>) {
    return std::string(wire::error_code_name(v));
  } else if constexpr (std::is_same_v<T, float>) {
    return wire_json_detail::float_for_json(v);
  } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (wire_json_detail::is_vector<T>::value) {
    json a = json::array();
    for (const auto& item : v) a.push_back(wire_json(item));
    return a;
  } else {
    json j = json::object();
    wire_json_detail::json_writer w{j};
    // fields() is not const (one list serves encoding and decoding); the writer only reads.
    const_cast<T&>(v).fields(w);
    return j;
  }
}

}  // namespace hearth
