// The 8-bit dot products of vec-dot-neon.cpp, written once and compiled twice there: inside
// namespace `plain` with dot_s8x16 made of widening multiplies (every arm64 CPU), and inside
// namespace `dotprod` under `#pragma GCC target("arch=armv8.2-a+dotprod")` with dot_s8x16 as one
// SDOT. Each kernel sums a block's (or sub-block's) integer products exactly, then scales in F32
// exactly as the portable kernel does. Include only from vec-dot-neon.cpp, after dot_s8x16:
//   int32x4_t dot_s8x16(int32x4_t acc, int8x16_t a, int8x16_t b);  // acc + Σ a·b over 4 lanes
// (no include guard on purpose).

// Σ w·x over 32 bytes.
inline int32_t dot_s8x32(int8x16_t w0, int8x16_t w1, const int8_t* x) {
  const int32x4_t acc = dot_s8x16(vdupq_n_s32(0), w0, vld1q_s8(x));
  return vaddvq_s32(dot_s8x16(acc, w1, vld1q_s8(x + 16)));
}

inline float q8_0(int64_t n, const void* wv, const void* xv) {
  const block_q8_0* w = static_cast<const block_q8_0*>(wv);
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_q8_0_block; ++b) {
    const int32_t s = dot_s8x32(vld1q_s8(w[b].qs), vld1q_s8(w[b].qs + 16), x[b].qs);
    sum += float(s) * (t[w[b].d] * t[x[b].d]);
  }
  return sum;
}

// Q4_0: value j of a block is its low nibble - 8, value j + 16 its high nibble - 8.
inline float q4_0(int64_t n, const void* wv, const void* xv) {
  const block_q4_0* w = static_cast<const block_q4_0*>(wv);
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  const auto& t = fp16_table();
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  const int8x16_t eight = vdupq_n_s8(8);
  float sum = 0;
  for (int64_t b = 0; b < n / k_q4_0_block; ++b) {
    const uint8x16_t q = vld1q_u8(w[b].qs);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
    sum += float(dot_s8x32(lo, hi, x[b].qs)) * (t[w[b].d] * t[x[b].d]);
  }
  return sum;
}

// Q4_K: chunk c of 64 values is 32 bytes of nibbles, the low ones sub-block 2c, the high ones
// sub-block 2c + 1; the mins meet the activations' 16-value sums (bsums).
inline float q4_k(int64_t n, const void* wv, const void* xv) {
  const block_q4_k* w = static_cast<const block_q4_k*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  const auto& t = fp16_table();
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  float sum = 0;
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    uint8_t sm[16];
    k_scales_mins(w[b].scales, sm);
    int32_t sumi = 0;
    for (int c = 0; c < k_qk_k / 64; ++c) {
      const uint8x16_t q0 = vld1q_u8(w[b].qs + 32 * c), q1 = vld1q_u8(w[b].qs + 32 * c + 16);
      const int8_t* q8 = x[b].qs + 64 * c;
      const int32_t lo = dot_s8x32(vreinterpretq_s8_u8(vandq_u8(q0, m4)),
                                   vreinterpretq_s8_u8(vandq_u8(q1, m4)), q8);
      const int32_t hi = dot_s8x32(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)),
                                   vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), q8 + 32);
      sumi += sm[2 * c] * lo + sm[2 * c + 1] * hi;
    }
    // Σ min[s] · Σ q8 over sub-block s: pairs of 16-value sums make the 8 sub-block sums.
    const int16x8_t sub_sums = vpaddq_s16(vld1q_s16(x[b].bsums), vld1q_s16(x[b].bsums + 8));
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sm + 8)));
    int32x4_t m = vmull_s16(vget_low_s16(sub_sums), vget_low_s16(mins));
    m = vmlal_s16(m, vget_high_s16(sub_sums), vget_high_s16(mins));
    const int32_t summ = vaddvq_s32(m);
    const float d = x[b].d * t[w[b].d], dmin = x[b].d * t[w[b].dmin];
    sum += d * float(sumi) - dmin * float(summ);
  }
  return sum;
}

// Q6_K: each half of 128 values is 64 bytes of low nibbles (ql) and 32 of high bit pairs (qh);
// group g of 32 values takes the low or high nibbles of ql's first or second 32 bytes and bit
// pair g of qh, and its two 16-value sub-blocks have their own signed scales.
inline float q6_k(int64_t n, const void* wv, const void* xv) {
  const block_q6_k* w = static_cast<const block_q6_k*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  const auto& t = fp16_table();
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
  const int8x16_t m32 = vdupq_n_s8(32);
  float sum = 0;
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    int32_t sumi = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      const int8_t* sc = w[b].scales + 8 * h;
      const int8_t* q8 = x[b].qs + 128 * h;
      for (int g = 0; g < 4; ++g) {
        const int shift = 4 * (g >> 1);
        for (int k = 0; k < 2; ++k) {  // the two sub-blocks of 16
          const uint8x16_t low = vld1q_u8(ql + 32 * (g & 1) + 16 * k);
          const uint8x16_t high =
              vandq_u8(vshlq_u8(vld1q_u8(qh + 16 * k), vdupq_n_s8(int8_t(-2 * g))), m3);
          const uint8x16_t l4 = shift ? vshrq_n_u8(low, 4) : vandq_u8(low, m4);
          const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l4, vshlq_n_u8(high, 4))), m32);
          const int32_t s =
              vaddvq_s32(dot_s8x16(vdupq_n_s32(0), q, vld1q_s8(q8 + 32 * g + 16 * k)));
          sumi += sc[2 * g + k] * s;
        }
      }
    }
    sum += x[b].d * t[w[b].d] * float(sumi);
  }
  return sum;
}
