// GGUF v3 writer: metadata in insertion order, tensor descriptions, and tensor data padded to
// general.alignment, in the layout engine/io/gguf.h reads (and llama.cpp writes: the header and
// every tensor's data, the last included, are zero-padded to the alignment).
//
// Everything handed to the writer comes from our own code, so inconsistent input (a data size
// that does not match the type and shape, a value out of its type's range, a duplicate tensor
// name) is a programmer error and throws std::invalid_argument at the call that caused it.
// Writing to disk is the one fallible step and returns result<void>.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "engine/io/gguf.h"
#include "engine/io/tensor-type.h"

namespace hearth {

// Values for gguf_writer::set, of any type (an out-of-range one too, which set() refuses): a number
// in the field its type reads (u: u8/u16/u32/u64/bool, i: i8/i16/i32/i64, f: f32/f64), a string,
// and an array of `elem` items.
inline gguf_value gguf_value_of_u(gguf_value_type t, uint64_t u) {
  gguf_value v;
  v.type = t;
  v.u = u;
  return v;
}
inline gguf_value gguf_value_of_i(gguf_value_type t, int64_t i) {
  gguf_value v;
  v.type = t;
  v.i = i;
  return v;
}
inline gguf_value gguf_value_of_f(gguf_value_type t, double f) {
  gguf_value v;
  v.type = t;
  v.f = f;
  return v;
}
inline gguf_value gguf_value_of_string(std::string s) {
  gguf_value v;
  v.type = gguf_value_type::string;
  v.str = std::move(s);
  return v;
}
inline gguf_value gguf_value_of_array(gguf_value_type elem, std::vector<gguf_value> items) {
  gguf_value v;
  v.type = gguf_value_type::array;
  v.elem_type = elem;
  v.items = std::move(items);
  return v;
}

class gguf_writer {
 public:
  // Setting a key that is already present replaces its value in place (it keeps its position).
  void set_u8(std::string key, uint8_t v);
  void set_i8(std::string key, int8_t v);
  void set_u16(std::string key, uint16_t v);
  void set_i16(std::string key, int16_t v);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_i64(std::string key, int64_t v);
  void set_f32(std::string key, float v);
  void set_f64(std::string key, double v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_string_array(std::string key, std::vector<std::string> v);
  void set_f32_array(std::string key, const std::vector<float>& v);
  void set_i32_array(std::string key, const std::vector<int32_t>& v);
  // Any value, nested arrays included (gguf_value_of_* below make them). Scalars must fit their
  // type (a u8 holding 300 throws), bools must be 0 or 1, and every array item must have the
  // array's element type.
  void set(std::string key, gguf_value v);

  // Stores general.alignment (u32); `alignment` must be a power of two up to gguf_max_alignment.
  // Without it the GGUF default of 32 applies. Setting general.alignment through set()/set_u32() is
  // the same.
  void set_alignment(uint32_t alignment);
  uint32_t alignment() const;

  // Copies every key-value pair of `src` in its order (replacing keys already set here).
  void copy_metadata_from(const gguf_file& src);

  // `ne[0]` is the row (fastest-varying) dimension, 1 to 4 dimensions of at least 1 element,
  // ne[0] a multiple of the type's block size, and data exactly the size the type and shape
  // imply. Names are unique and shorter than 64 bytes (llama.cpp's GGML_MAX_NAME).
  void add_tensor(std::string name, tensor_type type, std::vector<int64_t> ne,
                  std::span<const uint8_t> data);
  // Same, taking ownership of the bytes instead of copying them.
  void add_tensor(std::string name, tensor_type type, std::vector<int64_t> ne,
                  std::vector<uint8_t>&& data);
  // Same, but the data is made while the file is written: `fill` gets a zeroed buffer of exactly
  // the tensor's size. A multi-gigabyte model (a quantization, a random-weight model) is then
  // written holding one tensor in memory at a time. to_bytes() calls it too. An exception from
  // `fill` leaves no file behind and propagates.
  using tensor_filler = std::function<void(std::span<uint8_t> out)>;
  void add_tensor_lazy(std::string name, tensor_type type, std::vector<int64_t> ne,
                       tensor_filler fill);

  const std::vector<gguf_kv>& metadata() const { return kv_; }
  size_t tensor_count() const { return tensors_.size(); }

  // Bytes the file will take (header, metadata, tensor descriptions and padded data), without
  // making any tensor's data.
  uint64_t file_size() const;

  // The whole file in memory.
  std::vector<uint8_t> to_bytes() const;
  // Writes `path`.tmp, syncs it, then renames it over `path`, so a reader never sees half a
  // file. Errors name the path and the system's reason.
  result<void> write_file(const std::string& path) const;

 private:
  struct tensor {
    std::string name;
    tensor_type type;
    std::vector<int64_t> ne;
    uint64_t n_bytes = 0;
    std::vector<uint8_t> data;  // empty when `fill` makes it
    tensor_filler fill;
  };

  // Checks name, type and shape; returns the byte size the type and shape imply.
  uint64_t checked_size(const std::string& name, tensor_type type,
                        const std::vector<int64_t>& ne) const;

  // Header, metadata and tensor descriptions, padded to the alignment; tensor data follows.
  std::vector<uint8_t> header_bytes() const;
  void put(std::string key, gguf_value v);

  std::vector<gguf_kv> kv_;
  std::vector<tensor> tensors_;
};

}  // namespace hearth
