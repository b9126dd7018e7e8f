// rope: a thread per rotated pair of one head, blocks of a token's n_head · half pairs in
// blockIdx.y and the token in blockIdx.x. Each thread computes its pair's angle itself (every
// head of a token computes the same floats): one token of TinyLlama's 32 heads of 64 is then 8
// blocks rather than one block whose threads loop over the heads (9 us a call on an H200, 13% of
// a decoding step, bench/README.md). The angle comes from attention-math.cuh (repeated
// multiplication in float, as the CPU computes it); sincosf is the full-range-reduced one (no fast
// math), so large positions keep their accuracy.
#include <cassert>

#include "backends/cuda/attention-math.cuh"
#include "backends/cuda/kernels.h"

namespace hearth::cuda {
namespace {

constexpr int k_block = 128;

// x: F32 [n_tok rows of row_len floats], head h at h * head_dim; pos: I32 [n_tok];
// freq_factors: F32 [half] or null. neox rotates (i, i + half), otherwise (2i, 2i + 1).
__global__ void __launch_bounds__(k_block)
    rope_kernel(float* x, int64_t row_len, int32_t n_head, int32_t head_dim, const int32_t* pos,
                int32_t half, float theta_scale, float freq_scale, bool neox,
                const float* freq_factors, float ext_factor, rope_yarn_terms yarn) {
  const int64_t j = int64_t(blockIdx.y) * k_block + threadIdx.x;  // h * half + i
  if (j >= int64_t(n_head) * half) return;
  const int32_t h = int32_t(j / half), i = int32_t(j % half);
  const int32_t p = pos[blockIdx.x];
  float th = rope_angle(p, theta_scale, i, freq_scale, freq_factors);
  if (ext_factor != 0.0f) {  // YaRN, as engine/cpu/rope.cpp
    const float extrap = rope_angle(p, theta_scale, i, 1.0f, freq_factors);
    const float y = (float(i) - yarn.corr_low) / fmaxf(0.001f, yarn.corr_high - yarn.corr_low);
    const float mix = (1 - fminf(1.0f, fmaxf(0.0f, y))) * ext_factor;
    th = th * (1 - mix) + extrap * mix;
  }
  float sn, cs;
  sincosf(th, &sn, &cs);
  sn *= yarn.mscale;
  cs *= yarn.mscale;
  float* v = x + int64_t(blockIdx.x) * row_len + int64_t(h) * head_dim;
  const int32_t a = neox ? i : 2 * i;
  const int32_t b = neox ? i + half : 2 * i + 1;
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * cs - x1 * sn;
  v[b] = x0 * sn + x1 * cs;
}

}  // namespace

void rope(cudaStream_t s, float* x, int64_t n_tok, int64_t row_len, int32_t n_head,
          int32_t head_dim, const int32_t* pos, const rope_params& p, const float* freq_factors) {
  const int32_t half = p.n_dims / 2;
  if (n_tok <= 0 || n_head <= 0 || half <= 0) return;
  const int64_t pair_blocks = (int64_t(n_head) * half + k_block - 1) / k_block;
  assert(n_tok <= 0x7fffffff && pair_blocks <= 65535 && p.n_dims <= head_dim);
  const float theta_scale = rope_theta_scale(p.freq_base, p.n_dims);
  const dim3 grid{unsigned(n_tok), unsigned(pair_blocks)};
  rope_kernel<<<grid, k_block, 0, s>>>(x, row_len, n_head, head_dim, pos, half, theta_scale,
                                       p.freq_scale, p.neox, freq_factors, p.ext_factor,
                                       rope_yarn_terms_of(p));
}

}  // namespace hearth::cuda
