#include "engine/io/gguf-writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace hearth {
namespace {

constexpr uint32_t k_gguf_version = 3;
constexpr uint32_t k_default_alignment = 32;
constexpr size_t k_max_tensor_name = 63;  // GGML_MAX_NAME (64) less the terminating NUL
constexpr std::string_view k_alignment_key = "general.alignment";

uint64_t pad_to(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

[[noreturn]] void invalid(const std::string& what) {
  throw std::invalid_argument("gguf_writer: " + what);
}

// Throws unless `v` can be written as it claims to be: a known type, scalars within their
// type's range, and arrays whose items all have the element type.
void check_value(const std::string& key, const gguf_value& v) {
  auto out_of_range = [&](const std::string& value) {
    invalid("value " + value + " of key '" + key + "' does not fit its type " +
            std::string(gguf_value_type_name(v.type)));
  };
  switch (v.type) {
    case gguf_value_type::u8:
      if (v.u > std::numeric_limits<uint8_t>::max()) out_of_range(std::to_string(v.u));
      return;
    case gguf_value_type::u16:
      if (v.u > std::numeric_limits<uint16_t>::max()) out_of_range(std::to_string(v.u));
      return;
    case gguf_value_type::u32:
      if (v.u > std::numeric_limits<uint32_t>::max()) out_of_range(std::to_string(v.u));
      return;
    case gguf_value_type::boolean:
      if (v.u > 1) out_of_range(std::to_string(v.u));
      return;
    case gguf_value_type::i8:
      if (v.i < std::numeric_limits<int8_t>::min() || v.i > std::numeric_limits<int8_t>::max()) {
        out_of_range(std::to_string(v.i));
      }
      return;
    case gguf_value_type::i16:
      if (v.i < std::numeric_limits<int16_t>::min() || v.i > std::numeric_limits<int16_t>::max()) {
        out_of_range(std::to_string(v.i));
      }
      return;
    case gguf_value_type::i32:
      if (v.i < std::numeric_limits<int32_t>::min() || v.i > std::numeric_limits<int32_t>::max()) {
        out_of_range(std::to_string(v.i));
      }
      return;
    case gguf_value_type::u64:
    case gguf_value_type::i64:
    case gguf_value_type::f32:
    case gguf_value_type::f64:
    case gguf_value_type::string:
      return;
    case gguf_value_type::array:
      if (uint32_t(v.elem_type) > uint32_t(gguf_value_type::f64)) {
        invalid("array of key '" + key + "' has unknown element type " +
                std::to_string(uint32_t(v.elem_type)));
      }
      for (const auto& item : v.items) {
        if (item.type != v.elem_type) {
          invalid("array of key '" + key + "' holds " +
                  std::string(gguf_value_type_name(v.elem_type)) + " but an item is " +
                  std::string(gguf_value_type_name(item.type)));
        }
        check_value(key, item);
      }
      return;
  }
  invalid("key '" + key + "' has unknown value type " + std::to_string(uint32_t(v.type)));
}

class byte_sink {
 public:
  explicit byte_sink(std::vector<uint8_t>& out) : out_(out) {}

  // resize + memcpy rather than insert(): GCC 12 misreads small inserts as overflows
  // (-Wstringop-overflow false positive).
  template <typename T>
  void put(T v) {
    append(&v, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    append(s.data(), s.size());
  }
  // The value alone, without its type tag (the caller or the enclosing array wrote it).
  void put_value(const gguf_value& v) {
    switch (v.type) {
      case gguf_value_type::u8:
        put<uint8_t>(uint8_t(v.u));
        break;
      case gguf_value_type::i8:
        put<int8_t>(int8_t(v.i));
        break;
      case gguf_value_type::u16:
        put<uint16_t>(uint16_t(v.u));
        break;
      case gguf_value_type::i16:
        put<int16_t>(int16_t(v.i));
        break;
      case gguf_value_type::u32:
        put<uint32_t>(uint32_t(v.u));
        break;
      case gguf_value_type::i32:
        put<int32_t>(int32_t(v.i));
        break;
      case gguf_value_type::u64:
        put<uint64_t>(v.u);
        break;
      case gguf_value_type::i64:
        put<int64_t>(v.i);
        break;
      case gguf_value_type::f32:
        put<float>(float(v.f));
        break;
      case gguf_value_type::f64:
        put<double>(v.f);
        break;
      case gguf_value_type::boolean:
        put<uint8_t>(uint8_t(v.u));
        break;
      case gguf_value_type::string:
        put_string(v.str);
        break;
      case gguf_value_type::array:
        put<uint32_t>(uint32_t(v.elem_type));
        put<uint64_t>(v.items.size());
        for (const auto& item : v.items) put_value(item);
        break;
    }
  }

 private:
  void append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }

  std::vector<uint8_t>& out_;
};

gguf_value scalar(gguf_value_type type) {
  gguf_value v;
  v.type = type;
  return v;
}

gguf_value array_of(gguf_value_type elem_type, size_t n) {
  gguf_value v;
  v.type = gguf_value_type::array;
  v.elem_type = elem_type;
  v.items.reserve(n);
  return v;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool write_zeros(int fd, uint64_t n) {
  static const uint8_t k_zeros[4096] = {};
  while (n > 0) {
    const size_t k = size_t(std::min<uint64_t>(n, sizeof(k_zeros)));
    if (!write_all(fd, k_zeros, k)) return false;
    n -= k;
  }
  return true;
}

}  // namespace

void gguf_writer::put(std::string key, gguf_value v) {
  check_value(key, v);
  if (key == k_alignment_key && (v.type != gguf_value_type::u32 || !gguf_alignment_valid(v.u))) {
    invalid("general.alignment must be a power of two from 1 to " +
            std::to_string(gguf_max_alignment) + " stored as u32");
  }
  for (auto& kv : kv_) {
    if (kv.key == key) {
      kv.value = std::move(v);
      return;
    }
  }
  kv_.push_back({std::move(key), std::move(v)});
}

void gguf_writer::set_u8(std::string key, uint8_t v) {
  gguf_value x = scalar(gguf_value_type::u8);
  x.u = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_i8(std::string key, int8_t v) {
  gguf_value x = scalar(gguf_value_type::i8);
  x.i = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_u16(std::string key, uint16_t v) {
  gguf_value x = scalar(gguf_value_type::u16);
  x.u = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_i16(std::string key, int16_t v) {
  gguf_value x = scalar(gguf_value_type::i16);
  x.i = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_u32(std::string key, uint32_t v) {
  gguf_value x = scalar(gguf_value_type::u32);
  x.u = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_i32(std::string key, int32_t v) {
  gguf_value x = scalar(gguf_value_type::i32);
  x.i = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_u64(std::string key, uint64_t v) {
  gguf_value x = scalar(gguf_value_type::u64);
  x.u = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_i64(std::string key, int64_t v) {
  gguf_value x = scalar(gguf_value_type::i64);
  x.i = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_f32(std::string key, float v) {
  gguf_value x = scalar(gguf_value_type::f32);
  x.f = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_f64(std::string key, double v) {
  gguf_value x = scalar(gguf_value_type::f64);
  x.f = v;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_bool(std::string key, bool v) {
  gguf_value x = scalar(gguf_value_type::boolean);
  x.u = v ? 1 : 0;
  put(std::move(key), std::move(x));
}

void gguf_writer::set_string(std::string key, std::string v) {
  gguf_value x = scalar(gguf_value_type::string);
  x.str = std::move(v);
  put(std::move(key), std::move(x));
}

void gguf_writer::set_string_array(std::string key, std::vector<std::string> v) {
  gguf_value x = array_of(gguf_value_type::string, v.size());
  for (auto& s : v) {
    gguf_value item = scalar(gguf_value_type::string);
    item.str = std::move(s);
    x.items.push_back(std::move(item));
  }
  put(std::move(key), std::move(x));
}

void gguf_writer::set_f32_array(std::string key, const std::vector<float>& v) {
  gguf_value x = array_of(gguf_value_type::f32, v.size());
  for (float f : v) {
    gguf_value item = scalar(gguf_value_type::f32);
    item.f = f;
    x.items.push_back(std::move(item));
  }
  put(std::move(key), std::move(x));
}

void gguf_writer::set_i32_array(std::string key, const std::vector<int32_t>& v) {
  gguf_value x = array_of(gguf_value_type::i32, v.size());
  for (int32_t i : v) {
    gguf_value item = scalar(gguf_value_type::i32);
    item.i = i;
    x.items.push_back(std::move(item));
  }
  put(std::move(key), std::move(x));
}

void gguf_writer::set(std::string key, gguf_value v) {
  put(std::move(key), std::move(v));
}

void gguf_writer::set_alignment(uint32_t alignment) {
  if (!gguf_alignment_valid(alignment)) {
    invalid("alignment " + std::to_string(alignment) + " is not a power of two from 1 to " +
            std::to_string(gguf_max_alignment));
  }
  set_u32(std::string(k_alignment_key), alignment);
}

uint32_t gguf_writer::alignment() const {
  for (const auto& kv : kv_) {
    if (kv.key == k_alignment_key) return uint32_t(kv.value.u);  // checked by put()
  }
  return k_default_alignment;
}

void gguf_writer::copy_metadata_from(const gguf_file& src) {
  for (const auto& kv : src.metadata()) put(kv.key, kv.value);
}

void gguf_writer::add_tensor(std::string name, tensor_type type, std::vector<int64_t> ne,
                             std::span<const uint8_t> data) {
  add_tensor(std::move(name), type, std::move(ne), std::vector<uint8_t>(data.begin(), data.end()));
}

uint64_t gguf_writer::checked_size(const std::string& name, tensor_type type,
                                   const std::vector<int64_t>& ne) const {
  if (name.empty() || name.size() > k_max_tensor_name) {
    invalid("tensor name '" + name + "' must be 1 to " + std::to_string(k_max_tensor_name) +
            " bytes long");
  }
  for (const auto& t : tensors_) {
    if (t.name == name) invalid("tensor '" + name + "' added twice");
  }
  const auto layout = tensor_type_layout_of(uint32_t(type));
  if (!layout)
    invalid("tensor '" + name + "' has unknown type id " + std::to_string(uint32_t(type)));
  if (ne.empty() || ne.size() > 4) {
    invalid("tensor '" + name + "' has " + std::to_string(ne.size()) +
            " dimensions (1 to 4 allowed)");
  }
  int64_t n_el = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 1) {
      invalid("tensor '" + name + "' has dimension " + std::to_string(d) + " of size " +
              std::to_string(ne[d]));
    }
    if (__builtin_mul_overflow(n_el, ne[d], &n_el))
      invalid("tensor '" + name + "' shape overflows");
  }
  if (ne[0] % layout->block_elems != 0) {
    invalid("tensor '" + name + "' of type " + std::string(layout->name) + " has row length " +
            std::to_string(ne[0]) + ", not a multiple of its block size " +
            std::to_string(layout->block_elems));
  }
  int64_t n_bytes = 0;
  if (__builtin_mul_overflow(n_el / layout->block_elems, layout->block_bytes, &n_bytes)) {
    invalid("tensor '" + name + "' byte size overflows");
  }
  return uint64_t(n_bytes);
}

void gguf_writer::add_tensor(std::string name, tensor_type type, std::vector<int64_t> ne,
                             std::vector<uint8_t>&& data) {
  const uint64_t n_bytes = checked_size(name, type, ne);
  if (n_bytes != data.size()) {
    const auto layout = tensor_type_layout_of(uint32_t(type));
    invalid("tensor '" + name + "' of type " + std::string(layout->name) + " needs " +
            std::to_string(n_bytes) + " bytes of data, got " + std::to_string(data.size()));
  }
  tensors_.push_back({std::move(name), type, std::move(ne), n_bytes, std::move(data), {}});
}

void gguf_writer::add_tensor_lazy(std::string name, tensor_type type, std::vector<int64_t> ne,
                                  tensor_filler fill) {
  if (!fill) invalid("tensor '" + name + "' has no filler");
  const uint64_t n_bytes = checked_size(name, type, ne);
  tensors_.push_back({std::move(name), type, std::move(ne), n_bytes, {}, std::move(fill)});
}

std::vector<uint8_t> gguf_writer::header_bytes() const {
  const uint64_t align = alignment();
  std::vector<uint8_t> out;
  byte_sink s(out);
  s.put<uint32_t>(0x46554747);  // "GGUF"
  s.put<uint32_t>(k_gguf_version);
  s.put<uint64_t>(tensors_.size());
  s.put<uint64_t>(kv_.size());
  for (const auto& kv : kv_) {
    s.put_string(kv.key);
    s.put<uint32_t>(uint32_t(kv.value.type));
    s.put_value(kv.value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    s.put_string(t.name);
    s.put<uint32_t>(uint32_t(t.ne.size()));
    for (int64_t n : t.ne) s.put<uint64_t>(uint64_t(n));
    s.put<uint32_t>(uint32_t(t.type));
    s.put<uint64_t>(offset);
    offset = pad_to(offset + t.n_bytes, align);
  }
  out.resize(pad_to(out.size(), align), 0);
  return out;
}

uint64_t gguf_writer::file_size() const {
  uint64_t n = header_bytes().size();
  for (const auto& t : tensors_) n += pad_to(t.n_bytes, alignment());
  return n;
}

std::vector<uint8_t> gguf_writer::to_bytes() const {
  const uint64_t align = alignment();
  std::vector<uint8_t> out = header_bytes();
  for (const auto& t : tensors_) {
    const size_t at = out.size();
    out.resize(at + t.n_bytes, 0);
    if (t.fill) {
      t.fill(std::span<uint8_t>(out.data() + at, t.n_bytes));
    } else {
      std::memcpy(out.data() + at, t.data.data(), t.n_bytes);
    }
    out.resize(pad_to(out.size(), align), 0);
  }
  return out;
}

result<void> gguf_writer::write_file(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error{"cannot create " + tmp + ": " + std::strerror(errno)};
  auto fail = [&](const char* what, bool close_fd) {
    const int e = errno;
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    return error{std::string(what) + " " + tmp + ": " + std::strerror(e)};
  };

  const uint64_t align = alignment();
  const std::vector<uint8_t> header = header_bytes();
  if (!write_all(fd, header.data(), header.size())) return fail("cannot write", true);
  std::vector<uint8_t> made;  // one lazily made tensor at a time
  for (const auto& t : tensors_) {
    const uint8_t* data = t.data.data();
    if (t.fill) {
      made.assign(t.n_bytes, 0);
      try {
        t.fill(std::span<uint8_t>(made));
      } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
      }
      data = made.data();
    }
    if (!write_all(fd, data, t.n_bytes) || !write_zeros(fd, pad_to(t.n_bytes, align) - t.n_bytes)) {
      return fail("cannot write", true);
    }
  }
  if (::fsync(fd) != 0) return fail("cannot sync", true);
  if (::close(fd) != 0) return fail("cannot close", false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return error{"cannot rename " + tmp + " to " + path + ": " + std::strerror(e)};
  }
  return {};
}

}  // namespace hearth
