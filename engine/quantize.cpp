#include "engine/quantize.h"

#include <stdexcept>

#include "engine/cpu/vec-dot.h"

namespace hearth {

// FIRST CUT (to be completed): F32, F16, BF16 and Q8_0 only, through the CPU kernels' row
// converters; the K-quants, Q4_0 and llama.cpp's mix rules come next.

bool can_quantize(tensor_type t) {
  return t == tensor_type::f32 || t == tensor_type::f16 || t == tensor_type::bf16 ||
         t == tensor_type::q8_0;
}

void quantize_rows(tensor_type t, const float* src, void* dst, int64_t n_rows, int64_t n_per_row) {
  if (!can_quantize(t))
    throw std::invalid_argument("cannot quantize to " + std::string(tensor_type_name(t)));
  const auto* k = cpu::kernels_for(t);
  const int64_t row_bytes = tensor_type_row_bytes(t, n_per_row);
  for (int64_t r = 0; r < n_rows; ++r)
    k->from_float(src + r * n_per_row, static_cast<uint8_t*>(dst) + r * row_bytes, n_per_row);
}

std::optional<file_type> file_type_from_name(std::string_view name) {
  std::string s(name);
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "f32") return file_type::f32;
  if (s == "f16") return file_type::f16;
  if (s == "bf16") return file_type::bf16;
  if (s == "q8_0") return file_type::q8_0;
  return std::nullopt;
}

std::string_view file_type_name(file_type ft) {
  switch (ft) {
    case file_type::f32: return "f32";
    case file_type::f16: return "f16";
    case file_type::bf16: return "bf16";
    case file_type::q8_0: return "q8_0";
    default: return "?";
  }
}

std::string file_type_names() {
  return "f32, f16, bf16, q8_0";
}

uint32_t file_type_id(file_type ft) {
  switch (ft) {
    case file_type::f32: return 0;
    case file_type::f16: return 1;
    case file_type::bf16: return 32;
    case file_type::q8_0: return 7;
    default: return 0;
  }
}

tensor_type tensor_type_for(file_type ft, const quant_model_info&, std::string_view,
                            std::span<const int64_t> ne) {
  if (ne.size() < 2) return tensor_type::f32;
  switch (ft) {
    case file_type::f16: return tensor_type::f16;
    case file_type::bf16: return tensor_type::bf16;
    case file_type::q8_0: return tensor_type::q8_0;
    default: return tensor_type::f32;
  }
}

}  // namespace hearth
