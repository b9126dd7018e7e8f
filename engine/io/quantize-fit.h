// The expensive step of the K-quant quantizers: fitting a scale (and min) to each sub-block of
// a 256-value super-block by trying candidate scales (ggml's make_qkx2_quants for Q4_K/Q5_K,
// make_qx_quants for Q6_K). Sub-blocks are independent, so the AVX2 versions fit 8 of them at
// once, one per lane, each lane doing exactly the scalar operations in the scalar order: the
// results are bit-identical to quantize-row.cpp's portable fits (tests compare them), which are
// ggml's. The AVX2 versions exist on x86 only. Internal to engine/io/quantize-row.cpp and its test.
#pragma once

#include <cstdint>

namespace hearth::quant {

// Q4_K/Q5_K: 8 sub-blocks of 32 values (x holds 256), weights av_x + |x| per sub-block; writes
// the levels L[256] in [0, nmax], and per sub-block the scale and the min (x ≈ scale·l - min).
void fit_k_subblocks_portable(const float* x, int nmax, float rmin, float rdelta, int nstep,
                              uint8_t* L, float* scales, float* mins);
void fit_k_subblocks_avx2(const float* x, int nmax, float rmin, float rdelta, int nstep, uint8_t* L,
                          float* scales, float* mins);

// Q6_K: 8 sub-blocks of 16 values (x holds 128), symmetric levels stored in L[128] as
// [0, 2·32), and per sub-block the (signed) scale.
void fit_q6_k_subblocks_portable(const float* x, int8_t* L, float* scales);
void fit_q6_k_subblocks_avx2(const float* x, int8_t* L, float* scales);

}  // namespace hearth::quant
