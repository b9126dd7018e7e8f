#include "engine/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>

#include "engine/io/mapped-file.h"

namespace hearth {
namespace {

using json = nlohmann::json;

struct dtype_info {
  std::string_view name;
  int64_t size;
};

// Every dtype of the format (safetensors 0.4: src/tensor.rs Dtype), with its element size.
constexpr dtype_info k_dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8},
};

constexpr uint64_t k_max_header = 100u << 20;  // the reference reader's limit (100 MB)

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

// Short, printable form of an untrusted name for error messages.
std::string printable(std::string_view s) {
  std::string out = "'";
  for (const char c : s.substr(0, 120)) out += (c >= 32 && c < 127) ? c : '?';
  return out + (s.size() > 120 ? "...'" : "'");
}

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

}  // namespace

std::optional<int64_t> safetensors_dtype_size(std::string_view dtype) {
  for (const auto& d : k_dtypes) {
    if (d.name == dtype) return d.size;
  }
  return std::nullopt;
}

std::optional<tensor_type> safetensors_dtype_type(std::string_view dtype) {
  if (dtype == "F32") return tensor_type::f32;
  if (dtype == "F16") return tensor_type::f16;
  if (dtype == "BF16") return tensor_type::bf16;
  return std::nullopt;
}

std::string_view safetensors_dtype_name(tensor_type t) {
  switch (t) {
    case tensor_type::f32:
      return "F32";
    case tensor_type::f16:
      return "F16";
    case tensor_type::bf16:
      return "BF16";
    default:
      return "";
  }
}

int64_t safetensors_tensor::n_elements() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;  // checked against overflow when parsed
  return n;
}

std::string safetensors_tensor::shape_string() const {
  return shape_text(shape);
}

// --- reading ------------------------------------------------------------------------------------

result<safetensors_file> safetensors_file::open(const std::string& path) {
  return mapped_file_parse<safetensors_file>(
      path,
      [](safetensors_file& f, std::shared_ptr<const mapped_file> m) { f.owner_ = std::move(m); });
}

result<safetensors_file> safetensors_file::parse(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8) {
    return error{"not a safetensors file: " + std::to_string(bytes.size()) +
                 " bytes, shorter than the 8-byte header length"};
  }
  uint64_t n_header = 0;
  for (int k = 7; k >= 0; --k) n_header = (n_header << 8) | bytes[size_t(k)];
  const uint64_t after = bytes.size() - 8;
  if (n_header > after) {
    return error{"header length " + std::to_string(n_header) + " is more than the " +
                 std::to_string(after) + " bytes after it (truncated file?)"};
  }
  if (n_header > k_max_header) {
    return error{"header length " + std::to_string(n_header) + " is over the 100 MB limit"};
  }
  if (n_header < 2 || bytes[8] != '{') {
    return error{"not a safetensors file: the header does not start with '{'"};
  }

  // Duplicate top-level names would silently replace each other in the parsed object.
  std::string duplicate;
  std::unordered_set<std::string> names;
  json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!names.insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  const auto* text = reinterpret_cast<const char*>(bytes.data() + 8);
  json header;
  try {
    header = json::parse(text, text + n_header, on_event);
  } catch (const json::exception& e) {
    return error{std::string("header is not valid JSON: ") + e.what()};
  }
  if (!duplicate.empty()) return error{"tensor " + printable(duplicate) + " is listed twice"};
  if (!header.is_object()) return error{"header is not a JSON object"};

  safetensors_file f;
  f.bytes_ = bytes;
  f.header_size_ = n_header;
  const uint64_t data_size = after - n_header;
  const uint8_t* data = bytes.data() + 8 + n_header;

  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) return error{"__metadata__ is not an object"};
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string())
          return error{"__metadata__ value " + printable(key) + " is not a string"};
        f.metadata_.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    const std::string where = "tensor " + printable(name);
    if (!info.is_object()) return error{where + ": its description is not an object"};
    const auto dtype = info.find("dtype");
    const auto shape = info.find("shape");
    const auto offsets = info.find("data_offsets");
    if (dtype == info.end() || !dtype->is_string()) return error{where + ": no dtype string"};
    if (shape == info.end() || !shape->is_array()) return error{where + ": no shape array"};
    if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
      return error{where + ": data_offsets is not a pair of non-negative integers"};
    }

    safetensors_tensor t;
    t.name = name;
    t.dtype = dtype->get<std::string>();
    const auto size = safetensors_dtype_size(t.dtype);
    if (!size) return error{where + ": unknown dtype " + printable(t.dtype)};
    t.type = safetensors_dtype_type(t.dtype);
    if (shape->size() > 8)
      return error{where + ": " + std::to_string(shape->size()) + " dimensions"};
    int64_t n_el = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned() ||
          d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
        return error{where + ": shape " + d.dump() + " is not a list of non-negative integers"};
      }
      t.shape.push_back(int64_t(d.get<uint64_t>()));
      if (__builtin_mul_overflow(n_el, t.shape.back(), &n_el)) {
        return error{where + ": shape " + shape->dump() + " has too many elements"};
      }
    }
    int64_t n_bytes = 0;
    if (__builtin_mul_overflow(n_el, *size, &n_bytes)) {
      return error{where + ": shape " + shape_text(t.shape) + " has too many elements"};
    }
    const uint64_t begin = (*offsets)[0].get<uint64_t>();
    const uint64_t end = (*offsets)[1].get<uint64_t>();
    if (end < begin) {
      return error{where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] end before they begin"};
    }
    if (end - begin != uint64_t(n_bytes)) {
      return error{where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] hold " + std::to_string(end - begin) + " bytes but " + t.dtype + " " +
                   shape_text(t.shape) + " needs " + std::to_string(n_bytes)};
    }
    if (end > data_size) {
      return error{where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] run past the data section of " + std::to_string(data_size) +
                   " bytes (truncated file?)"};
    }
    t.offset = begin;
    t.n_bytes = end - begin;
    t.data = data + begin;
    f.tensors_.push_back(std::move(t));
  }

  // The tensors must cover the data section exactly: no overlaps, no holes, nothing after.
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const auto& a, const auto& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.n_bytes < b.n_bytes;
  });
  uint64_t covered = 0;
  const safetensors_tensor* prev = nullptr;
  for (const auto& t : f.tensors_) {
    if (t.offset < covered) {
      return error{"tensors " + printable(prev->name) + " and " + printable(t.name) + " overlap"};
    }
    if (t.offset > covered) {
      return error{"bytes [" + std::to_string(covered) + ", " + std::to_string(t.offset) +
                   ") of the data section belong to no tensor (before " + printable(t.name) + ")"};
    }
    covered = t.offset + t.n_bytes;
    prev = &t;
  }
  if (covered != data_size) {
    return error{"the data section has " + std::to_string(data_size - covered) +
                 " bytes after the last tensor"};
  }
  return f;
}

const safetensors_tensor* safetensors_file::find(std::string_view name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// --- writing ------------------------------------------------------------------------------------

void safetensors_writer::set_metadata(std::string key, std::string value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void safetensors_writer::add_tensor(std::string name, tensor_type type, std::vector<int64_t> shape,
                                    std::span<const uint8_t> data) {
  const uint64_t need = checked_bytes(name, type, shape);
  if (data.size() != need) {
    throw std::invalid_argument("safetensors_writer: tensor '" + name + "' has " +
                                std::to_string(data.size()) +
                                " bytes of data, its dtype and shape need " + std::to_string(need));
  }
  add_tensor(std::move(name), type, std::move(shape), [data](std::span<uint8_t> out) {
    if (!data.empty()) std::memcpy(out.data(), data.data(), data.size());
    return result<void>{};
  });
}

void safetensors_writer::add_tensor(std::string name, tensor_type type, std::vector<int64_t> shape,
                                    fill_fn fill) {
  const uint64_t n_bytes = checked_bytes(name, type, shape);
  tensors_.push_back({std::move(name), type, std::move(shape), n_bytes, std::move(fill)});
  data_bytes_ += n_bytes;
}

uint64_t safetensors_writer::checked_bytes(const std::string& name, tensor_type type,
                                           const std::vector<int64_t>& shape) const {
  if (name.empty() || name == "__metadata__") {
    throw std::invalid_argument("safetensors_writer: invalid tensor name '" + name + "'");
  }
  for (const auto& t : tensors_) {
    if (t.name == name)
      throw std::invalid_argument("safetensors_writer: duplicate tensor '" + name + "'");
  }
  if (safetensors_dtype_name(type).empty()) {
    throw std::invalid_argument("safetensors_writer: tensor '" + name + "' has type " +
                                std::string(tensor_type_name(type)) +
                                ", which safetensors cannot hold");
  }
  int64_t n_el = 1;
  for (const int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n_el, d, &n_el)) {
      throw std::invalid_argument("safetensors_writer: tensor '" + name + "' has an invalid shape");
    }
  }
  return uint64_t(n_el) * uint64_t(*safetensors_dtype_size(safetensors_dtype_name(type)));
}

std::string safetensors_writer::header() const {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    auto& m = h["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
  }
  uint64_t at = 0;
  for (const auto& t : tensors_) {
    h[t.name] = {{"dtype", safetensors_dtype_name(t.type)},
                 {"shape", t.shape},
                 {"data_offsets", {at, at + t.n_bytes}}};
    at += t.n_bytes;
  }
  std::string text = h.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  return text;
}

result<void> safetensors_writer::write_to(
    const std::function<bool(const void*, size_t)>& sink) const {
  const std::string h = header();
  uint8_t len[8];
  for (int k = 0; k < 8; ++k) len[k] = uint8_t(uint64_t(h.size()) >> (8 * k));
  if (!sink(len, 8) || !sink(h.data(), h.size())) return error{"write failed"};
  std::vector<uint8_t> buf;
  for (const auto& t : tensors_) {
    buf.assign(t.n_bytes, 0);
    if (auto r = t.fill(buf); !r) return error{"tensor '" + t.name + "': " + r.message()};
    if (!sink(buf.data(), buf.size())) return error{"write failed"};
  }
  return {};
}

result<void> safetensors_writer::write_file(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error{"cannot create " + tmp + ": " + std::strerror(errno)};
  int write_errno = 0;
  auto r = write_to([&](const void* p, size_t n) {
    if (write_all(fd, p, n)) return true;
    write_errno = errno;
    return false;
  });
  if (r && ::fsync(fd) != 0) r = error{std::string("cannot sync: ") + std::strerror(errno)};
  if (!r) {
    ::close(fd);
    ::unlink(tmp.c_str());
    const std::string why = write_errno ? std::string(": ") + std::strerror(write_errno) : "";
    return error{"writing " + tmp + ": " + r.message() + why};
  }
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return error{"cannot close " + tmp + ": " + std::strerror(e)};
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return error{"cannot rename " + tmp + " to " + path + ": " + std::strerror(e)};
  }
  return {};
}

result<std::vector<uint8_t>> safetensors_writer::to_bytes() const {
  std::vector<uint8_t> out;
  auto r = write_to([&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
    return true;
  });
  if (!r) return r.err();
  return out;
}

}  // namespace hearth
