// safetensors reader and writer: the weight files of Hugging Face model directories.
//
// File layout (https://huggingface.co/docs/safetensors, "Format"):
//   u64 little-endian N | N bytes of JSON header | data section
//   header: {"__metadata__": {string: string, ...}?,
//            "<name>": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
// Offsets count from the start of the data section; the tensors cover it exactly, without
// overlaps or holes (as the reference implementation requires). Shapes are outermost first
// (PyTorch order), so a [rows, cols] matrix is GGUF's ne = {cols, rows}.
//
// The bytes are untrusted: every length, offset, shape and size is checked, and a malformed file
// yields one error naming the file, the tensor and what is wrong; nothing throws.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "engine/io/tensor-type.h"

namespace hearth {

// Bytes of one element of a safetensors dtype ("F32" -> 4), or nothing for a name the format
// does not define.
std::optional<int64_t> safetensors_dtype_size(std::string_view dtype);
// The engine's type for a dtype: F32, F16 and BF16 only; nothing for the others (I64, F8_E4M3,
// ...).
std::optional<tensor_type> safetensors_dtype_type(std::string_view dtype);
// "F32", "F16", "BF16" for those types; empty for types safetensors cannot hold.
std::string_view safetensors_dtype_name(tensor_type t);

struct safetensors_tensor {
  std::string name;
  std::string dtype;                // as the header spells it: "BF16", "I64", ...
  std::optional<tensor_type> type;  // f32/f16/bf16; nothing for dtypes the engine does not read
  std::vector<int64_t> shape;       // outermost first; empty for a scalar
  uint64_t offset = 0;              // data_offsets[0], from the start of the data section
  uint64_t n_bytes = 0;             // data_offsets[1] - data_offsets[0] = elements × dtype size
  const uint8_t* data = nullptr;    // inside the mapping

  int64_t n_elements() const;
  std::string shape_string() const;  // "[512, 256]"
};

class safetensors_file {
 public:
  // Maps `path` read-only and parses it. Errors name the file and the problem.
  static result<safetensors_file> open(const std::string& path);
  // Parses bytes the caller keeps alive (fuzzing, in-memory tests).
  static result<safetensors_file> parse(std::span<const uint8_t> bytes);

  // Tensors in the order of their data (ascending offset).
  const std::vector<safetensors_tensor>& tensors() const { return tensors_; }
  const safetensors_tensor* find(std::string_view name) const;
  // The optional "__metadata__" object (string values only, as the format requires).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  uint64_t header_size() const { return header_size_; }
  size_t file_size() const { return bytes_.size(); }
  // Keeps the mapping alive; tensors' data stay valid while any copy of it lives.
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  std::shared_ptr<const void> owner_;
  std::span<const uint8_t> bytes_;
  uint64_t header_size_ = 0;
  std::vector<safetensors_tensor> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// Writes one safetensors file. Tensors are laid out in the order they are added; the header is
// padded with spaces to a multiple of 8 bytes (as the reference writer does), so every tensor's
// data starts at least at its element alignment when sizes keep it so.
//
// What is handed to the writer comes from our own code: a size that does not match dtype and
// shape, a duplicate name or an unsupported type is a programmer error and throws
// std::invalid_argument at the call. Writing is the fallible step and returns result<void>.
class safetensors_writer {
 public:
  // Fills exactly `out.size()` bytes of a tensor's data, called once while writing.
  using fill_fn = std::function<result<void>(std::span<uint8_t> out)>;

  void set_metadata(std::string key, std::string value);
  // Data the caller keeps alive until write_file returns.
  void add_tensor(std::string name, tensor_type type, std::vector<int64_t> shape,
                  std::span<const uint8_t> data);
  // Data produced while writing, one tensor at a time (keeps memory to the largest tensor).
  void add_tensor(std::string name, tensor_type type, std::vector<int64_t> shape, fill_fn fill);

  size_t tensor_count() const { return tensors_.size(); }
  uint64_t data_bytes() const { return data_bytes_; }

  // Writes `path`.tmp, then renames it over `path`. Errors name the path and the reason.
  result<void> write_file(const std::string& path) const;
  // The whole file in memory (tests, fuzzing).
  result<std::vector<uint8_t>> to_bytes() const;

 private:
  struct entry {
    std::string name;
    tensor_type type;
    std::vector<int64_t> shape;
    uint64_t n_bytes;
    fill_fn fill;
  };
  // The size `type` × `shape` takes; throws std::invalid_argument for a bad name, type or shape.
  uint64_t checked_bytes(const std::string& name, tensor_type type,
                         const std::vector<int64_t>& shape) const;
  std::string header() const;
  result<void> write_to(const std::function<bool(const void*, size_t)>& sink) const;

  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<entry> tensors_;
  uint64_t data_bytes_ = 0;
};

}  // namespace hearth
