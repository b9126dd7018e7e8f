// GGUF reader (versions 2 and 3): metadata of every value type, tensor descriptions, and tensor
// data memory-mapped in place. Every count, length, offset and shape is checked against the file
// before use; a malformed file yields one error naming what is wrong and at which byte.
//
// File layout (https://github.com/ggerganov/ggml/blob/master/docs/gguf.md):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv × (string key, u32 type, value)
//   | n_tensors × (string name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset)
//   | padding to general.alignment | tensor data (each tensor at data_start + offset)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/io/tensor-type.h"

namespace hearth {

// Metadata value types; the values are the on-disk ids.
enum class gguf_value_type : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

std::string_view gguf_value_type_name(gguf_value_type t);

// One metadata value. Scalars are widened into `u`/`i`/`f`; arrays keep their element type and
// hold either strings, scalars (as values) or nested arrays.
struct gguf_value {
  gguf_value_type type = gguf_value_type::u8;
  uint64_t u = 0;  // u8/u16/u32/u64/bool
  int64_t i = 0;   // i8/i16/i32/i64
  double f = 0;    // f32/f64
  std::string str;
  gguf_value_type elem_type = gguf_value_type::u8;  // for arrays
  std::vector<gguf_value> items;                    // for arrays

  bool is_integer() const;
  bool is_float() const { return type == gguf_value_type::f32 || type == gguf_value_type::f64; }
};

struct gguf_kv {
  std::string key;
  gguf_value value;
};

// One tensor as the file describes it. `ne[0]` is the fastest-varying (row) dimension.
struct gguf_tensor {
  std::string name;
  tensor_type type = tensor_type::f32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t offset = 0;            // from the start of the data section
  uint64_t n_bytes = 0;           // exact size implied by type and shape
  const uint8_t* data = nullptr;  // inside the mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;  // "[256, 512]"
};

// general.alignment: a power of two, at most this. Files use 32 (sometimes 64 or 4096); a huge
// one is refused because padding to it would make a writer (or a converter) allocate gigabytes.
inline constexpr uint64_t gguf_max_alignment = uint64_t(1) << 20;
inline bool gguf_alignment_valid(uint64_t a) {
  return a != 0 && (a & (a - 1)) == 0 && a <= gguf_max_alignment;
}

class gguf_file {
 public:
  // Maps `path` read-only and parses it. Errors name the file and the problem.
  static result<gguf_file> open(const std::string& path);
  // Parses bytes the caller keeps alive (fuzzing, in-memory tests).
  static result<gguf_file> parse(std::span<const uint8_t> bytes);
  // A file assembled in memory by an importer (safetensors + Hugging Face files, tokenizer.json):
  // the rest of the engine reads it exactly like a parsed GGUF. Each tensor's `data` must stay
  // valid while `owner` (shared by every copy of the result) lives; its n_bytes must match its
  // type and shape. Keys and tensor names must be unique (checked: an error names the duplicate).
  static result<gguf_file> from_parts(std::vector<gguf_kv> kv, std::vector<gguf_tensor> tensors,
                                      std::shared_ptr<const void> owner);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return bytes_.size(); }
  uint64_t data_offset() const { return data_offset_; }

  const std::vector<gguf_kv>& metadata() const { return kv_; }
  const std::vector<gguf_tensor>& tensors() const { return tensors_; }

  const gguf_value* find(std::string_view key) const;
  const gguf_tensor* find_tensor(std::string_view name) const;

  // Typed lookups: nothing when the key is absent. A present key of the wrong type is an error
  // (returned, not thrown) so that a bad file is reported rather than silently defaulted.
  result<std::optional<uint64_t>> get_uint(std::string_view key) const;
  result<std::optional<double>> get_float(std::string_view key) const;
  result<std::optional<bool>> get_bool(std::string_view key) const;
  result<std::optional<std::string>> get_string(std::string_view key) const;
  // An array of the given element kind; scalars widen to the requested C++ type.
  result<std::optional<std::vector<std::string>>> get_string_array(std::string_view key) const;
  result<std::optional<std::vector<double>>> get_float_array(std::string_view key) const;
  result<std::optional<std::vector<int64_t>>> get_int_array(std::string_view key) const;

  // Pre-faults the tensor data pages (so a load is paid once, not in the first forward pass),
  // calling `progress(done_bytes, total_bytes)` as it goes. Safe to skip.
  void prefetch(const std::function<void(uint64_t, uint64_t)>& progress) const;

 private:
  std::shared_ptr<const void> owner_;  // keeps the mapping (or an importer's buffers) alive
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<gguf_kv> kv_;
  std::vector<gguf_tensor> tensors_;
};

}  // namespace hearth
