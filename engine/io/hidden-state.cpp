#include "engine/io/hidden-state.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "engine/io/tensor-type.h"
#include "engine/io/type-traits.h"

namespace hearth {
namespace {

tensor_type type_of(hidden_encoding e) {
  switch (e) {
    case hidden_encoding::f16:
      return tensor_type::f16;
    case hidden_encoding::q8_0:
      return tensor_type::q8_0;
    case hidden_encoding::f32:
      break;
  }
  return tensor_type::f32;
}

// Bytes of one row, or 0 when the type's blocks do not divide n_embd.
uint64_t row_bytes(hidden_encoding e, int64_t n_embd) {
  if (n_embd <= 0 || n_embd > (int64_t(1) << 24)) return 0;
  if (e == hidden_encoding::q8_0 && n_embd % 32 != 0) return 0;
  return uint64_t(tensor_type_row_bytes(type_of(e), n_embd));
}

}  // namespace

std::string_view hidden_encoding_name(hidden_encoding e) {
  switch (e) {
    case hidden_encoding::f16:
      return "f16";
    case hidden_encoding::q8_0:
      return "q8_0";
    case hidden_encoding::f32:
      break;
  }
  return "f32";
}

std::optional<hidden_encoding> hidden_encoding_from_name(std::string_view name) {
  for (auto e : {hidden_encoding::f32, hidden_encoding::f16, hidden_encoding::q8_0}) {
    if (name == hidden_encoding_name(e)) return e;
  }
  return std::nullopt;
}

uint64_t hidden_bytes(hidden_encoding e, int64_t n_embd, int64_t n_rows) {
  const uint64_t row = row_bytes(e, n_embd);
  if (row == 0 || n_rows < 0 || uint64_t(n_rows) > UINT64_MAX / row) return 0;
  return row * uint64_t(n_rows);
}

std::vector<uint8_t> hidden_encode(hidden_encoding e, std::span<const float> rows, int64_t n_embd) {
  const uint64_t row = row_bytes(e, n_embd);
  if (row == 0) return {};
  const size_t n_rows = rows.size() / size_t(n_embd);
  std::vector<uint8_t> out(n_rows * row);
  const auto from_float = tensor_type_traits_of(type_of(e)).from_float;
  for (size_t r = 0; r < n_rows; ++r) {
    from_float(rows.data() + r * size_t(n_embd), out.data() + r * row, n_embd);
  }
  return out;
}

result<void> hidden_decode(hidden_encoding e, std::span<const uint8_t> bytes, int64_t n_embd,
                           std::span<float> out) {
  const uint64_t row = row_bytes(e, n_embd);
  if (row == 0) {
    return error{"hidden states of " + std::to_string(n_embd) + " values a row cannot be " +
                 std::string(hidden_encoding_name(e))};
  }
  const size_t n_rows = out.size() / size_t(n_embd);
  if (out.size() % size_t(n_embd) != 0 || bytes.size() != n_rows * row) {
    return error{"hidden states: " + std::to_string(bytes.size()) + " bytes where " +
                 std::to_string(n_rows) + " rows of " + std::to_string(n_embd) + " " +
                 std::string(hidden_encoding_name(e)) + " values take " +
                 std::to_string(n_rows * row)};
  }
  // The conversions read 2- and 4-byte fields; a message's bytes may start anywhere (found by
  // fuzz/hidden_state_fuzz.cpp: a Q8_0 block at an odd address), so those are copied first.
  std::vector<uint8_t> aligned;
  const uint8_t* src = bytes.data();
  if (reinterpret_cast<uintptr_t>(src) % alignof(float) != 0) {
    aligned.assign(bytes.begin(), bytes.end());
    src = aligned.data();
  }
  const auto to_float = tensor_type_traits_of(type_of(e)).to_float;
  for (size_t r = 0; r < n_rows; ++r) {
    to_float(src + r * row, out.data() + r * size_t(n_embd), n_embd);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      return error{"hidden states: value " + std::to_string(i) + " is not finite"};
    }
  }
  return {};
}

}  // namespace hearth
