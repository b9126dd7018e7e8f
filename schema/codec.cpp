#include "schema/codec.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <msgpack.hpp>
#include <type_traits>

namespace hearth::wire {
namespace {

// Entries of one msgpack map: far more than any message has fields, so that later versions can
// add some, and few enough that looking fields up by scanning stays cheap.
constexpr uint32_t max_map_entries = 256;

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

// --- encoding ---

using packer = msgpack::packer<msgpack::sbuffer>;

struct field_counter {
  uint32_t n = 0;
  template <class T>
  void operator()(const char*, T&) {
    ++n;
  }
  template <class T>
  void optional(const char*, T&) {
    ++n;
  }
};

// A float as msgpack float 32, a double as float 64, big-endian. Not packer::pack: msgpack-cxx 4
// writes whole numbers as integers, and on the way converts 2^64 to uint64_t (undefined
// behaviour that UBSan reports).
template <class T>
void pack_float(packer& pk, T v) {
  using bits_type = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  bits_type bits;
  std::memcpy(&bits, &v, sizeof bits);
  char bytes[1 + sizeof bits];
  bytes[0] = sizeof(T) == 4 ? char(0xca) : char(0xcb);
  for (size_t i = 0; i < sizeof bits; ++i) bytes[1 + i] = char(bits >> (8 * (sizeof bits - 1 - i)));
  pk.pack_bin_body(bytes, sizeof bytes);  // appends the bytes as they are
}

template <class T>
void pack_value(packer& pk, const T& v);

struct field_packer {
  packer& pk;
  template <class T>
  void operator()(const char* name, T& v) {
    pk.pack_str(uint32_t(std::char_traits<char>::length(name)));
    pk.pack_str_body(name, uint32_t(std::char_traits<char>::length(name)));
    pack_value(pk, v);
  }
  template <class T>
  void optional(const char* name, T& v) {
    (*this)(name, v);
  }
};

template <class T>
void pack_value(packer& pk, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    v ? pk.pack_true() : pk.pack_false();
  } else if constexpr (std::is_integral_v<T>) {
    pk.pack(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    pack_float(pk, v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    pk.pack_str(uint32_t(v.size()));
    pk.pack_str_body(v.data(), uint32_t(v.size()));
  } else if constexpr (std::is_same_v<T, job_state>) {
    const auto name = job_state_name(v);
    pk.pack_str(uint32_t(name.size()));
    pk.pack_str_body(name.data(), uint32_t(name.size()));
  } else if constexpr (std::is_same_v<T, error_code>) {
    const auto name = error_code_name(v);
    pk.pack_str(uint32_t(name.size()));
    pk.pack_str_body(name.data(), uint32_t(name.size()));
  } else if constexpr (is_vector<T>::value) {
    pk.pack_array(uint32_t(v.size()));
    for (const auto& item : v) pack_value(pk, item);
  } else {
    // fields() is not const (one list serves encoding and decoding); it does not modify.
    T& m = const_cast<T&>(v);
    field_counter count;
    m.fields(count);
    pk.pack_map(count.n);
    field_packer fp{pk};
    m.fields(fp);
  }
}

// --- decoding ---

// Reads one value into `out`; returns an error message ("" on success). `path` names the field.
template <class T>
std::string read_value(const msgpack::object& o, T& out, const std::string& path, int depth);

std::string type_error(const std::string& path, const char* expected) {
  return "field '" + path + "' must be " + expected;
}

template <class T>
std::string read_integer(const msgpack::object& o, T& out, const std::string& path) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > uint64_t(std::numeric_limits<T>::max())) {
      return "field '" + path + "' is out of range (" + std::to_string(o.via.u64) + ")";
    }
    out = T(o.via.u64);
    return {};
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    if constexpr (std::is_signed_v<T>) {
      if (o.via.i64 < int64_t(std::numeric_limits<T>::min())) {
        return "field '" + path + "' is out of range (" + std::to_string(o.via.i64) + ")";
      }
      out = T(o.via.i64);
      return {};
    } else {
      return "field '" + path + "' must not be negative";
    }
  }
  return type_error(path, "an integer");
}

std::string read_string(const msgpack::object& o, std::string& out, const std::string& path) {
  if (o.type != msgpack::type::STR) return type_error(path, "a string");
  out.assign(o.via.str.ptr, o.via.str.size);
  return {};
}

struct field_reader {
  const msgpack::object_map& map;
  const std::string& prefix;
  int depth;
  std::string err;

  // The value of key `name`, or nullptr when absent. A key given twice is an error (`err` is
  // set): two readers that took the first and the last value would see different messages.
  const msgpack::object* find(const char* name) {
    const size_t len = std::char_traits<char>::length(name);
    const msgpack::object* found = nullptr;
    for (uint32_t i = 0; i < map.size; ++i) {
      const auto& k = map.ptr[i].key;
      if (k.type == msgpack::type::STR && k.via.str.size == len &&
          std::char_traits<char>::compare(k.via.str.ptr, name, len) == 0) {
        if (found) {
          err = "field '" + path(name) + "' appears twice";
          return nullptr;
        }
        found = &map.ptr[i].val;
      }
    }
    return found;
  }
  std::string path(const char* name) const { return prefix.empty() ? name : prefix + "." + name; }

  template <class T>
  void operator()(const char* name, T& v) {
    if (!err.empty()) return;
    const msgpack::object* o = find(name);
    if (!err.empty()) return;
    if (!o) {
      err = "missing field '" + path(name) + "'";
      return;
    }
    err = read_value(*o, v, path(name), depth);
  }
  template <class T>
  void optional(const char* name, T& v) {
    if (!err.empty()) return;
    const msgpack::object* o = find(name);
    if (o) err = read_value(*o, v, path(name), depth);
  }
};

template <class T>
std::string read_value(const msgpack::object& o, T& out, const std::string& path, int depth) {
  if (depth > int(max_depth)) return "field '" + path + "' is nested too deeply";
  if constexpr (std::is_same_v<T, bool>) {
    if (o.type != msgpack::type::BOOLEAN) return type_error(path, "a boolean");
    out = o.via.boolean;
    return {};
  } else if constexpr (std::is_integral_v<T>) {
    return read_integer(o, out, path);
  } else if constexpr (std::is_floating_point_v<T>) {
    double d = 0;
    if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64) {
      d = o.via.f64;
    } else if (o.type == msgpack::type::POSITIVE_INTEGER) {
      d = double(o.via.u64);
    } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
      d = double(o.via.i64);
    } else {
      return type_error(path, "a number");
    }
    if (!std::isfinite(d)) return "field '" + path + "' must be a finite number";
    // A double beyond the float range would become infinity (and a body that does not encode).
    if (std::fabs(d) > double(std::numeric_limits<T>::max())) {
      return "field '" + path + "' is out of range for a 32-bit float";
    }
    out = T(d);
    return {};
  } else if constexpr (std::is_same_v<T, std::string>) {
    return read_string(o, out, path);
  } else if constexpr (std::is_same_v<T, job_state>) {
    std::string name;
    if (auto e = read_string(o, name, path); !e.empty()) return e;
    auto s = job_state_from_name(name);
    if (!s) return "field '" + path + "' has unknown job state '" + name + "'";
    out = *s;
    return {};
  } else if constexpr (std::is_same_v<T, error_code>) {
    std::string name;
    if (auto e = read_string(o, name, path); !e.empty()) return e;
    auto c = error_code_from_name(name);
    if (!c) return "field '" + path + "' has unknown error code '" + name + "'";
    out = *c;
    return {};
  } else if constexpr (is_vector<T>::value) {
    if (o.type != msgpack::type::ARRAY) return type_error(path, "an array");
    out.clear();
    out.resize(o.via.array.size);
    for (uint32_t i = 0; i < o.via.array.size; ++i) {
      auto e =
          read_value(o.via.array.ptr[i], out[i], path + "[" + std::to_string(i) + "]", depth + 1);
      if (!e.empty()) return e;
    }
    return {};
  } else {
    if (o.type != msgpack::type::MAP) return type_error(path.empty() ? "body" : path, "a map");
    field_reader r{o.via.map, path, depth + 1, {}};
    out.fields(r);
    return r.err;
  }
}

}  // namespace

template <class M>
std::string encode(const M& m) {
  msgpack::sbuffer buf;
  packer pk(buf);
  pack_value(pk, m);
  return std::string(buf.data(), buf.size());
}

template <class M>
result<M> decode(std::string_view body) {
  const std::string what = std::string(command_name(M::cmd));
  if (int64_t(body.size()) > max_message_bytes) {
    return hearth::error{what + ": body of " + std::to_string(body.size()) + " bytes is too large"};
  }
  // The limits stop a few bytes that claim a huge array from allocating before they are checked.
  // Depth counts containers: the body's map is level 1, so max_depth bounds every value, the
  // ones of unknown fields included.
  const msgpack::unpack_limit limit(max_array_items, max_map_entries, max_string_bytes,
                                    max_string_bytes, 0, max_depth);
  msgpack::object_handle handle;
  size_t offset = 0;
  try {
    handle = msgpack::unpack(body.data(), body.size(), offset, nullptr, nullptr, limit);
  } catch (const std::exception& e) {
    return hearth::error{what + ": body is not valid msgpack (" + e.what() + ")"};
  }
  if (offset != body.size()) {
    return hearth::error{what + ": " + std::to_string(body.size() - offset) +
                         " trailing bytes after the body"};
  }
  M m;
  const std::string err = read_value(handle.get(), m, "", 0);
  if (!err.empty()) return hearth::error{what + ": " + err};
  return m;
}

namespace {
// Events of msgpack's parser up to the top map's "request_id" value. Stops (returns false) there,
// and past max_depth levels, so the rest of the body is never looked at.
struct request_id_visitor : msgpack::null_visitor {
  uint32_t depth = 0;
  bool in_key = false;
  bool is_id_key = false;  // the value now being read is the top map's "request_id"
  std::optional<uint64_t> id;
  bool start_array(uint32_t) { return ++depth <= max_depth; }
  bool end_array() { return --depth, true; }
  bool start_map(uint32_t) { return ++depth <= max_depth; }
  bool end_map() { return --depth, true; }
  bool start_map_key() {
    if (depth == 1) in_key = true, is_id_key = false;
    return true;
  }
  bool end_map_key() {
    if (depth == 1) in_key = false;
    return true;
  }
  bool visit_str(const char* v, uint32_t size) {
    if (depth == 1 && in_key) is_id_key = std::string_view(v, size) == "request_id";
    return true;
  }
  bool visit_positive_integer(uint64_t v) {
    if (depth != 1 || in_key || !is_id_key) return true;
    id = v;
    return false;
  }
  bool end_map_value() {
    if (depth == 1) is_id_key = false;
    return true;
  }
  void parse_error(size_t, size_t) {}
  void insufficient_bytes(size_t, size_t) {}
};
}  // namespace

std::optional<uint64_t> peek_request_id(std::string_view body) {
  request_id_visitor v;
  size_t offset = 0;
  try {
    msgpack::parse(body.data(), body.size(), offset, v);
  } catch (const std::exception&) {
    // What was read before the error stands.
  }
  return v.id;
}

envelope_result open_envelope(std::span<const std::string_view> frames) {
  envelope_result r;
  // The signature first: another version may frame its messages differently, and must still
  // hear why it is refused.
  if (!frames.empty() && frames[0] != signature && frames[0].substr(0, 7) == "HEARTH/") {
    r.err = {error_code::version_mismatch, "protocol " + std::string(frames[0].substr(0, 16)) +
                                               " is not supported (this broker speaks " +
                                               std::string(signature) + ")"};
    return r;
  }
  if (frames.size() != 3) {
    r.err = {error_code::malformed,
             "expected 3 frames (signature, command, body), got " + std::to_string(frames.size())};
    return r;
  }
  if (frames[0] != signature) {
    r.err = {error_code::malformed, "the first frame is not the hearth signature"};
    return r;
  }
  if (frames[1].size() != 1) {
    r.err = {error_code::malformed, "the command frame must be one byte"};
    return r;
  }
  auto cmd = command_from_byte(uint8_t(frames[1][0]));
  if (!cmd) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", unsigned(uint8_t(frames[1][0])));
    r.err = {error_code::malformed, std::string("unknown command ") + hex};
    return r;
  }
  if (int64_t(frames[2].size()) > max_message_bytes) {
    r.err = {error_code::malformed, "the body is larger than the message limit"};
    return r;
  }
  r.ok = true;
  r.env = {*cmd, frames[2]};
  return r;
}

#define HEARTH_WIRE_INSTANTIATE(M)          \
  template std::string encode<M>(const M&); \
  template result<M> decode<M>(std::string_view body);
HEARTH_WIRE_MESSAGES(HEARTH_WIRE_INSTANTIATE)
#undef HEARTH_WIRE_INSTANTIATE

}  // namespace hearth::wire
