#include "engine/io/gguf.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "engine/io/mapped-file.h"

namespace hearth {
namespace {

constexpr uint64_t k_max_array_depth = 4;
constexpr int k_max_dims = 4;

// Reads little-endian values from an untrusted buffer. Every read is bounds-checked; the first
// failure is recorded with its offset and all later reads fail too, so parsing code can read a
// record and check once.
class reader {
 public:
  explicit reader(std::span<const uint8_t> b) : b_(b) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return b_.size() - pos_; }
  bool failed() const { return !err_.empty(); }
  const std::string& error_text() const { return err_; }

  void fail(const std::string& what) { fail_at(pos_, what); }
  void fail_at(size_t at, const std::string& what) {
    if (err_.empty()) err_ = "at byte " + std::to_string(at) + ": " + what;
  }

  template <typename T>
  T read(const char* what) {
    T v{};
    if (failed()) return v;
    if (remaining() < sizeof(T)) {
      fail(std::string(what) + " runs past the end of the file (needs " +
           std::to_string(sizeof(T)) + " bytes, " + std::to_string(remaining()) + " left)");
      return v;
    }
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const size_t at = pos_;
    const uint64_t n = read<uint64_t>(what);
    if (failed()) return {};
    if (n > remaining()) {
      fail_at(at, std::string(what) + " length " + std::to_string(n) +
                      " runs past the end of the file (" + std::to_string(remaining()) +
                      " bytes left)");
      return {};
    }
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  std::string err_;
};

size_t scalar_size(gguf_value_type t) {
  switch (t) {
    case gguf_value_type::u8:
    case gguf_value_type::i8:
    case gguf_value_type::boolean:
      return 1;
    case gguf_value_type::u16:
    case gguf_value_type::i16:
      return 2;
    case gguf_value_type::u32:
    case gguf_value_type::i32:
    case gguf_value_type::f32:
      return 4;
    case gguf_value_type::u64:
    case gguf_value_type::i64:
    case gguf_value_type::f64:
      return 8;
    case gguf_value_type::string:
      return 8;  // at least its length field
    case gguf_value_type::array:
      return 12;  // at least its element type and count
  }
  return 0;
}

bool valid_value_type(uint32_t t) {
  return t <= uint32_t(gguf_value_type::f64);
}

void read_value(reader& r, gguf_value_type type, gguf_value& out, uint64_t depth,
                const std::string& key) {
  out.type = type;
  switch (type) {
    case gguf_value_type::u8:
      out.u = r.read<uint8_t>("u8 value");
      break;
    case gguf_value_type::i8:
      out.i = r.read<int8_t>("i8 value");
      break;
    case gguf_value_type::u16:
      out.u = r.read<uint16_t>("u16 value");
      break;
    case gguf_value_type::i16:
      out.i = r.read<int16_t>("i16 value");
      break;
    case gguf_value_type::u32:
      out.u = r.read<uint32_t>("u32 value");
      break;
    case gguf_value_type::i32:
      out.i = r.read<int32_t>("i32 value");
      break;
    case gguf_value_type::u64:
      out.u = r.read<uint64_t>("u64 value");
      break;
    case gguf_value_type::i64:
      out.i = r.read<int64_t>("i64 value");
      break;
    case gguf_value_type::f32:
      out.f = r.read<float>("f32 value");
      break;
    case gguf_value_type::f64:
      out.f = r.read<double>("f64 value");
      break;
    case gguf_value_type::boolean: {
      const size_t at = r.pos();
      const uint8_t b = r.read<uint8_t>("bool value");
      if (b > 1)
        r.fail_at(at, "bool value of key '" + key + "' is " + std::to_string(b) + ", not 0 or 1");
      out.u = b;
      break;
    }
    case gguf_value_type::string:
      out.str = r.read_string("string value");
      break;
    case gguf_value_type::array: {
      const size_t at = r.pos();
      if (depth >= k_max_array_depth) {
        r.fail_at(at, "arrays nested deeper than " + std::to_string(k_max_array_depth) +
                          " in key '" + key + "'");
        return;
      }
      const uint32_t et = r.read<uint32_t>("array element type");
      const uint64_t n = r.read<uint64_t>("array length");
      if (r.failed()) return;
      if (!valid_value_type(et)) {
        r.fail_at(at, "array of key '" + key + "' has unknown element type " + std::to_string(et));
        return;
      }
      out.elem_type = gguf_value_type(et);
      // Each element takes at least scalar_size bytes: a count the file cannot hold is rejected
      // before anything is allocated for it.
      if (n > r.remaining() / scalar_size(out.elem_type)) {
        r.fail_at(at, "array of key '" + key + "' claims " + std::to_string(n) +
                          " elements of type " + std::string(gguf_value_type_name(out.elem_type)) +
                          ", more than the " + std::to_string(r.remaining()) +
                          " bytes left can hold");
        return;
      }
      out.items.resize(n);
      for (uint64_t k = 0; k < n && !r.failed(); ++k) {
        read_value(r, out.elem_type, out.items[k], depth + 1, key);
      }
      break;
    }
  }
}

bool mul_overflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

std::string_view gguf_value_type_name(gguf_value_type t) {
  switch (t) {
    case gguf_value_type::u8:
      return "u8";
    case gguf_value_type::i8:
      return "i8";
    case gguf_value_type::u16:
      return "u16";
    case gguf_value_type::i16:
      return "i16";
    case gguf_value_type::u32:
      return "u32";
    case gguf_value_type::i32:
      return "i32";
    case gguf_value_type::f32:
      return "f32";
    case gguf_value_type::boolean:
      return "bool";
    case gguf_value_type::string:
      return "string";
    case gguf_value_type::array:
      return "array";
    case gguf_value_type::u64:
      return "u64";
    case gguf_value_type::i64:
      return "i64";
    case gguf_value_type::f64:
      return "f64";
  }
  return "unknown";
}

bool gguf_value::is_integer() const {
  switch (type) {
    case gguf_value_type::u8:
    case gguf_value_type::i8:
    case gguf_value_type::u16:
    case gguf_value_type::i16:
    case gguf_value_type::u32:
    case gguf_value_type::i32:
    case gguf_value_type::u64:
    case gguf_value_type::i64:
      return true;
    default:
      return false;
  }
}

std::string gguf_tensor::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) {
    if (d) s += ", ";
    s += std::to_string(ne[d]);
  }
  return s + "]";
}

result<gguf_file> gguf_file::open(const std::string& path) {
  return mapped_file_parse<gguf_file>(
      path, [](gguf_file& f, std::shared_ptr<const mapped_file> m) { f.owner_ = std::move(m); });
}

result<gguf_file> gguf_file::from_parts(std::vector<gguf_kv> kv, std::vector<gguf_tensor> tensors,
                                        std::shared_ptr<const void> owner) {
  std::unordered_set<std::string_view> seen;
  for (const auto& e : kv) {
    if (!seen.insert(e.key).second) return error{"duplicate metadata key '" + e.key + "'"};
  }
  seen.clear();
  for (const auto& t : tensors) {
    if (!seen.insert(t.name).second) return error{"duplicate tensor '" + t.name + "'"};
    const auto layout = tensor_type_layout_of(uint32_t(t.type));
    if (!layout || t.ne[0] % layout->block_elems != 0 ||
        t.n_bytes !=
            uint64_t(tensor_type_row_bytes(t.type, t.ne[0]) * t.ne[1] * t.ne[2] * t.ne[3])) {
      return error{"tensor '" + t.name + "': size does not match its type and shape"};
    }
  }
  gguf_file g;
  g.version_ = 3;
  g.kv_ = std::move(kv);
  g.tensors_ = std::move(tensors);
  g.owner_ = std::move(owner);
  return g;
}

result<gguf_file> gguf_file::parse(std::span<const uint8_t> bytes) {
  gguf_file g;
  g.bytes_ = bytes;
  reader r(bytes);

  const uint32_t magic = r.read<uint32_t>("magic");
  if (r.failed()) return error{"not a GGUF file: " + r.error_text()};
  if (magic != 0x46554747) {  // "GGUF" little-endian
    return error{"not a GGUF file: the first 4 bytes are not \"GGUF\""};
  }
  g.version_ = r.read<uint32_t>("version");
  if (r.failed()) return error{r.error_text()};
  if (g.version_ == 1) return error{"GGUF version 1 is not supported (only 2 and 3)"};
  if (g.version_ != 2 && g.version_ != 3) {
    if ((g.version_ & 0xffff) == 0) {
      return error{"GGUF version " + std::to_string(g.version_) +
                   " looks byte-swapped: big-endian GGUF files are not supported"};
    }
    return error{"unsupported GGUF version " + std::to_string(g.version_) + " (only 2 and 3)"};
  }

  const uint64_t n_tensors = r.read<uint64_t>("tensor count");
  const uint64_t n_kv = r.read<uint64_t>("metadata count");
  if (r.failed()) return error{r.error_text()};
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor description
  // at least 8 + 4 + 8 + 4 + 8. Counts the file cannot hold are rejected before allocating.
  if (n_kv > r.remaining() / 13) {
    return error{"metadata count " + std::to_string(n_kv) + " is more than the file can hold"};
  }
  if (n_tensors > r.remaining() / 32) {
    return error{"tensor count " + std::to_string(n_tensors) + " is more than the file can hold"};
  }

  std::unordered_set<std::string> keys;
  g.kv_.resize(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    auto& kv = g.kv_[k];
    const size_t at = r.pos();
    kv.key = r.read_string("metadata key");
    const uint32_t type = r.read<uint32_t>("metadata value type");
    if (r.failed()) return error{"metadata entry " + std::to_string(k) + ": " + r.error_text()};
    if (!valid_value_type(type)) {
      return error{"at byte " + std::to_string(at) + ": metadata key '" + kv.key +
                   "' has unknown value type " + std::to_string(type)};
    }
    if (!keys.insert(kv.key).second) {
      return error{"at byte " + std::to_string(at) + ": duplicate metadata key '" + kv.key + "'"};
    }
    read_value(r, gguf_value_type(type), kv.value, 0, kv.key);
    if (r.failed()) return error{"metadata key '" + kv.key + "': " + r.error_text()};
  }

  if (const gguf_value* a = g.find("general.alignment")) {
    if (a->type != gguf_value_type::u32 || !gguf_alignment_valid(a->u)) {
      return error{"general.alignment must be a power of two from 1 to " +
                   std::to_string(gguf_max_alignment) + " stored as u32, got " +
                   (a->type == gguf_value_type::u32 ? std::to_string(a->u) : "another type")};
    }
    g.alignment_ = a->u;
  }

  std::unordered_set<std::string> names;
  g.tensors_.resize(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    auto& t = g.tensors_[k];
    const size_t at = r.pos();
    t.name = r.read_string("tensor name");
    const uint32_t n_dims = r.read<uint32_t>("tensor dimension count");
    if (r.failed()) return error{"tensor " + std::to_string(k) + ": " + r.error_text()};
    const std::string where = "at byte " + std::to_string(at) + ": tensor '" + t.name + "'";
    if (!names.insert(t.name).second) return error{where + " appears twice"};
    if (n_dims == 0 || n_dims > uint32_t(k_max_dims)) {
      return error{where + " has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)"};
    }
    t.n_dims = int(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = r.read<uint64_t>("tensor dimension");
      if (!r.failed() && (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max()))) {
        return error{where + " has dimension " + std::to_string(d) + " of size " +
                     std::to_string(ne)};
      }
      t.ne[d] = int64_t(ne);
    }
    const uint32_t type = r.read<uint32_t>("tensor type");
    t.offset = r.read<uint64_t>("tensor data offset");
    if (r.failed()) return error{where + ": " + r.error_text()};

    auto layout = tensor_type_layout_of(type);
    if (!layout) return error{where + " has unknown tensor type id " + std::to_string(type)};
    t.type = tensor_type(type);
    if (t.ne[0] % layout->block_elems != 0) {
      return error{where + " of type " + std::string(layout->name) + " has row length " +
                   std::to_string(t.ne[0]) + ", not a multiple of its block size " +
                   std::to_string(layout->block_elems)};
    }
    int64_t n_el = 1;
    for (int d = 0; d < k_max_dims; ++d) {
      if (mul_overflows(n_el, t.ne[d], &n_el))
        return error{where + " has a shape " + t.shape_string() + " that overflows"};
    }
    int64_t n_bytes = 0;
    if (mul_overflows(n_el / layout->block_elems, layout->block_bytes, &n_bytes)) {
      return error{where + " has a byte size that overflows"};
    }
    t.n_bytes = uint64_t(n_bytes);
    if (t.offset % g.alignment_ != 0) {
      return error{where + " has data offset " + std::to_string(t.offset) +
                   ", not a multiple of the alignment " + std::to_string(g.alignment_)};
    }
  }

  // The data section starts at the next multiple of the alignment after the descriptions.
  const uint64_t header_end = r.pos();
  g.data_offset_ = (header_end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  const uint64_t size = bytes.size();
  if (n_tensors > 0 && g.data_offset_ > size) {
    return error{"tensor data would start at byte " + std::to_string(g.data_offset_) +
                 ", past the end of the file (" + std::to_string(size) + " bytes)"};
  }
  const uint64_t data_size = size > g.data_offset_ ? size - g.data_offset_ : 0;

  std::vector<const gguf_tensor*> by_offset;
  for (auto& t : g.tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return error{"tensor '" + t.name + "' (" + std::string(tensor_type_name(t.type)) + " " +
                   t.shape_string() + ", " + std::to_string(t.n_bytes) + " bytes at data offset " +
                   std::to_string(t.offset) + ") runs past the end of the file (" +
                   std::to_string(data_size) + " bytes of tensor data)"};
    }
    t.data = bytes.data() + g.data_offset_ + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const gguf_tensor* a, const gguf_tensor* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const gguf_tensor* prev = by_offset[k - 1];
    if (prev->offset + prev->n_bytes > by_offset[k]->offset) {
      return error{"tensors '" + prev->name + "' and '" + by_offset[k]->name +
                   "' overlap in the file"};
    }
  }
  return g;
}

const gguf_value* gguf_file::find(std::string_view key) const {
  for (const auto& kv : kv_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const gguf_tensor* gguf_file::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

error wrong_type(std::string_view key, const gguf_value& v, const char* wanted) {
  // An array is described by its element type: "is array, expected an array of integers"
  // would not say what is wrong.
  const std::string is = v.type == gguf_value_type::array
                             ? "an array of " + std::string(gguf_value_type_name(v.elem_type))
                             : std::string(gguf_value_type_name(v.type));
  return error{"metadata key '" + std::string(key) + "' is " + is + ", expected " + wanted};
}

bool as_float(const gguf_value& v, double* out) {
  if (v.is_float()) {
    *out = v.f;
  } else if (v.is_integer()) {
    *out = v.type == gguf_value_type::i8 || v.type == gguf_value_type::i16 ||
                   v.type == gguf_value_type::i32 || v.type == gguf_value_type::i64
               ? double(v.i)
               : double(v.u);
  } else {
    return false;
  }
  return true;
}

bool as_int(const gguf_value& v, int64_t* out) {
  switch (v.type) {
    case gguf_value_type::i8:
    case gguf_value_type::i16:
    case gguf_value_type::i32:
    case gguf_value_type::i64:
      *out = v.i;
      return true;
    case gguf_value_type::u8:
    case gguf_value_type::u16:
    case gguf_value_type::u32:
      *out = int64_t(v.u);
      return true;
    case gguf_value_type::u64:
      if (v.u > uint64_t(std::numeric_limits<int64_t>::max())) return false;
      *out = int64_t(v.u);
      return true;
    default:
      return false;
  }
}

}  // namespace

result<std::optional<uint64_t>> gguf_file::get_uint(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::optional<uint64_t>{};
  int64_t x = 0;
  if (v->type == gguf_value_type::u64) return std::optional<uint64_t>{v->u};
  if (!as_int(*v, &x)) return wrong_type(key, *v, "an unsigned integer");
  if (x < 0)
    return error{"metadata key '" + std::string(key) + "' is negative (" + std::to_string(x) + ")"};
  return std::optional<uint64_t>{uint64_t(x)};
}

result<std::optional<double>> gguf_file::get_float(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::optional<double>{};
  double x = 0;
  if (!as_float(*v, &x)) return wrong_type(key, *v, "a number");
  return std::optional<double>{x};
}

result<std::optional<bool>> gguf_file::get_bool(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::optional<bool>{};
  if (v->type != gguf_value_type::boolean) return wrong_type(key, *v, "bool");
  return std::optional<bool>{v->u != 0};
}

result<std::optional<std::string>> gguf_file::get_string(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::optional<std::string>{};
  if (v->type != gguf_value_type::string) return wrong_type(key, *v, "string");
  return std::optional<std::string>{v->str};
}

result<std::optional<std::vector<std::string>>> gguf_file::get_string_array(
    std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::optional<std::vector<std::string>>{};
  if (v->type != gguf_value_type::array || v->elem_type != gguf_value_type::string) {
    return wrong_type(key, *v, "an array of strings");
  }
  std::vector<std::string> out;
  out.reserve(v->items.size());
  for (const auto& item : v->items) out.push_back(item.str);
  return std::optional<std::vector<std::string>>{std::move(out)};
}

result<std::optional<std::vector<double>>> gguf_file::get_float_array(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::optional<std::vector<double>>{};
  if (v->type != gguf_value_type::array) return wrong_type(key, *v, "an array of numbers");
  std::vector<double> out(v->items.size());
  for (size_t k = 0; k < out.size(); ++k) {
    if (!as_float(v->items[k], &out[k])) return wrong_type(key, *v, "an array of numbers");
  }
  return std::optional<std::vector<double>>{std::move(out)};
}

result<std::optional<std::vector<int64_t>>> gguf_file::get_int_array(std::string_view key) const {
  const gguf_value* v = find(key);
  if (!v) return std::optional<std::vector<int64_t>>{};
  if (v->type != gguf_value_type::array) return wrong_type(key, *v, "an array of integers");
  std::vector<int64_t> out(v->items.size());
  for (size_t k = 0; k < out.size(); ++k) {
    if (!as_int(v->items[k], &out[k])) return wrong_type(key, *v, "an array of integers");
  }
  return std::optional<std::vector<int64_t>>{std::move(out)};
}

void gguf_file::prefetch(const std::function<void(uint64_t, uint64_t)>& progress) const {
  constexpr uint64_t k_chunk = 16u << 20;
  constexpr uint64_t k_page = 4096;
  volatile uint8_t sink = 0;
  // One span of a file, touched a page at a time, `progress` called every k_chunk bytes.
  auto touch = [&](const uint8_t* base, uint64_t size, uint64_t before, uint64_t total) {
    for (uint64_t done = 0; done < size;) {
      const uint64_t n = std::min(k_chunk, size - done);
      for (uint64_t p = 0; p < n; p += k_page) sink = sink + base[done + p];
      done += n;
      if (progress) progress(before + done, total);
    }
  };
  if (!bytes_.empty()) {
    if (bytes_.size() > data_offset_) {
      const uint64_t total = bytes_.size() - data_offset_;
      touch(bytes_.data() + data_offset_, total, 0, total);
    }
    return;
  }
  // A file assembled from parts (a split model's files, an import) has no bytes of its own: its
  // tensors, in whichever mapping holds each.
  uint64_t total = 0;
  for (const auto& t : tensors_) total += t.n_bytes;
  uint64_t before = 0;
  for (const auto& t : tensors_) {
    if (t.data) touch(t.data, t.n_bytes, before, total);
    before += t.n_bytes;
  }
}

}  // namespace hearth
