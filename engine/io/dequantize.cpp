// Dequantization: a row of each block type into F32, as ggml's dequantize_row_* computes it
// (ggml-quants.c): every reader of weights (the converters, the quantizer, the CPU backend's
// get_rows and tests) goes through these, via tensor_type_traits_of(t).to_float. Block
// layouts and their bit accessors are in engine/io/tensor-type.h.
#include "engine/io/tensor-type.h"
#include "engine/io/type-rows.h"

namespace hearth {
namespace {

constexpr int k_block = 32;          // Q4_0 ... Q8_1
constexpr int k_half = k_block / 2;  // values j and j + 16 share byte j
constexpr int k_chunk = 64;          // Q4_K/Q5_K: 64 values share 32 bytes of nibbles

}  // namespace

// --- 32-value blocks ------------------------------------------------------------------------

void q4_0_to_float(const void* xv, float* y, int64_t n) {
  const block_q4_0* x = static_cast<const block_q4_0*>(xv);
  const auto& t = fp16_table();
  constexpr int half = k_q4_0_block / 2;
  for (int64_t b = 0; b < n / k_q4_0_block; ++b, y += k_q4_0_block) {
    const float d = t[x[b].d];
    for (int j = 0; j < half; ++j) {
      y[j] = float((x[b].qs[j] & 0xF) - 8) * d;
      y[j + half] = float((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void q4_1_to_float(const void* xv, float* y, int64_t n) {
  const block_q4_1* x = static_cast<const block_q4_1*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_block; ++b, y += k_block) {
    const float d = t[x[b].d], m = t[x[b].m];
    for (int j = 0; j < k_half; ++j) {
      y[j] = float(x[b].qs[j] & 0x0F) * d + m;
      y[j + k_half] = float(x[b].qs[j] >> 4) * d + m;
    }
  }
}

void q5_0_to_float(const void* xv, float* y, int64_t n) {
  const block_q5_0* x = static_cast<const block_q5_0*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_block; ++b, y += k_block) {
    const float d = t[x[b].d];
    const uint32_t qh = q5_high_bits(x[b].qh);
    for (int j = 0; j < k_half; ++j) {
      y[j] = float(q5_low(x[b].qs, qh, j) - 16) * d;
      y[j + k_half] = float(q5_high(x[b].qs, qh, j) - 16) * d;
    }
  }
}

void q5_1_to_float(const void* xv, float* y, int64_t n) {
  const block_q5_1* x = static_cast<const block_q5_1*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_block; ++b, y += k_block) {
    const float d = t[x[b].d], m = t[x[b].m];
    const uint32_t qh = q5_high_bits(x[b].qh);
    for (int j = 0; j < k_half; ++j) {
      y[j] = float(q5_low(x[b].qs, qh, j)) * d + m;
      y[j + k_half] = float(q5_high(x[b].qs, qh, j)) * d + m;
    }
  }
}

void q8_0_to_float(const void* xv, float* y, int64_t n) {
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_q8_0_block; ++b) {
    const float d = t[x[b].d];
    for (int i = 0; i < k_q8_0_block; ++i) y[b * k_q8_0_block + i] = d * float(x[b].qs[i]);
  }
}

void q8_1_to_float(const void* xv, float* y, int64_t n) {
  const block_q8_1* x = static_cast<const block_q8_1*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_block; ++b, y += k_block) {
    const float d = t[x[b].d];
    for (int j = 0; j < k_block; ++j) y[j] = float(x[b].qs[j]) * d;
  }
}

// --- K-quants -----------------------------------------------------------------------------

void q4_k_to_float(const void* xv, float* y, int64_t n) {
  const block_q4_k* x = static_cast<const block_q4_k*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    const float d = t[x[b].d], dmin = t[x[b].dmin];
    uint8_t sm[16];
    k_scales_mins(x[b].scales, sm);
    for (int c = 0; c < k_qk_k / k_chunk; ++c, y += k_chunk) {
      const uint8_t* q = x[b].qs + 32 * c;
      const float d1 = d * sm[2 * c], m1 = dmin * sm[8 + 2 * c];
      const float d2 = d * sm[2 * c + 1], m2 = dmin * sm[8 + 2 * c + 1];
      for (int l = 0; l < 32; ++l) y[l] = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) y[32 + l] = d2 * float(q[l] >> 4) - m2;
    }
  }
}

void q5_k_to_float(const void* xv, float* y, int64_t n) {
  const block_q5_k* x = static_cast<const block_q5_k*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    const float d = t[x[b].d], dmin = t[x[b].dmin];
    uint8_t sm[16];
    k_scales_mins(x[b].scales, sm);
    const uint8_t* qh = x[b].qh;
    for (int c = 0; c < k_qk_k / k_chunk; ++c, y += k_chunk) {
      const uint8_t* q = x[b].qs + 32 * c;
      const float d1 = d * sm[2 * c], m1 = dmin * sm[8 + 2 * c];
      const float d2 = d * sm[2 * c + 1], m2 = dmin * sm[8 + 2 * c + 1];
      for (int l = 0; l < 32; ++l)
        y[l] = d1 * float((q[l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4)) - m1;
      for (int l = 0; l < 32; ++l)
        y[32 + l] = d2 * float((q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4)) - m2;
    }
  }
}

void q6_k_to_float(const void* xv, float* y, int64_t n) {
  const block_q6_k* x = static_cast<const block_q6_k*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    const float d = t[x[b].d];
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q0);
        y[l + 32] = d * float(sc[is + 2]) * float(q1);
        y[l + 64] = d * float(sc[is + 4]) * float(q2);
        y[l + 96] = d * float(sc[is + 6]) * float(q3);
      }
    }
  }
}

void q8_k_to_float(const void* xv, float* y, int64_t n) {
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  for (int64_t b = 0; b < n / k_qk_k; ++b, y += k_qk_k) {
    for (int i = 0; i < k_qk_k; ++i) y[i] = x[b].d * float(x[b].qs[i]);
  }
}

}  // namespace hearth
