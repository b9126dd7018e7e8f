// Attention over the device-resident KV cache (engine/backend.h: backend::attention), in float,
// with the mask, score and softmax math of attention-math.cuh. The cell count is read from
// device memory when the kernels run and only bounds loops: every launch configuration depends
// on n_tok, the params and max_cells alone, so a captured graph stays valid as the cache grows.
//
// Both kernels compute the CPU's softmax (attention-math.cuh): scores summed in the CPU's order,
// the max, the sum of the CPU's exp in double, each weight rounded to F16 for an F16 V cache,
// in three passes over the cells (max, sum, weights with Σ w·v). An online softmax (one pass)
// never holds a final weight to round; attention-math.cuh says what that cost.
//
// Decoding (n_tok <= k_attention_decode_max_tokens): flash-decoding. Grid (split, head, token);
// split s scans its share of the cells (attention_split_range). The first pass scores each cell
// (one warp per cell) and keeps the score in the scratch, so K is read once and the other two
// passes read a float per cell; the last reads each seen cell's V row. With several splits the
// decode kernel runs once per pass (each split's max; its sum from the splits' max; its share
// of the output) and attention_combine_kernel adds the shares up; with one split one launch
// takes all three passes and writes the output.
//
// Prompts: tiled attention. A block takes 16 tokens of one head (4 warps of 4 tokens) and scans
// the cells in tiles of 32 (one per lane): the tile's K rows go to shared memory as float, each
// lane scores its cell against the warp's 4 tokens; in the last pass the tile's V rows then
// replace the K rows and each lane accumulates its output dimensions over the cells in order.
// Tiles no token of the block sees are skipped. Tokens of one block may belong to different
// sequences; the mask sorts them out.
//
// A cell a token does not see never reaches its output, not even as 0 × v: cells of other
// sequences and empty cells may hold anything (NaN included), as on the CPU, which skips them.
#include <cuda_fp16.h>

#include <algorithm>
#include <cassert>
#include <cmath>

#include "backends/cuda/attention-math.cuh"
#include "backends/cuda/kernels.h"

namespace hearth::cuda {
namespace {

constexpr unsigned k_full_mask = 0xffffffffu;
constexpr int k_warp = 32;
// Head dimensions per lane when lane l holds dimensions l, l + 32, l + 64, ...
constexpr int k_dims_per_lane = k_attention_max_head_dim / k_warp;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(k_full_mask, v, o));
  return v;
}

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}

// q as the CPU takes it: rounded to the cache's type (F16) before the K·Q product.
template <typename T>
__device__ __forceinline__ float q_value(float v) {
  if constexpr (sizeof(T) == 2) {
    return round_f16(v);
  } else {
    return v;
  }
}

// The cell count the kernels scan: *n_cells, clamped to the cache.
__device__ __forceinline__ int32_t cells_to_scan(const attention_args& a) {
  const int32_t n = *a.n_cells;
  return n < 0 ? 0 : (n > a.max_cells ? a.max_cells : n);
}

// --- decoding ---------------------------------------------------------------------------

constexpr int k_decode_warps = 4;
constexpr int k_decode_block = k_decode_warps * k_warp;  // also the cells per mask tile
constexpr int k_combine_block = 128;

// The decode kernel's scratch, per (token, head): the scores of every cell, F32 [max_cells]
// (-inf for a cell the token does not see); with several splits, per (token, head, split) also
// part_o F32 [head_dim_v], part_m F32 and (8-aligned) part_l F64.
struct decode_scratch {
  float* scores;
  float* part_o;
  float* part_m;
  double* part_l;
};

size_t decode_scratch_bytes(int64_t n_tok, const attention_params& p, int32_t max_cells,
                            int32_t n_split, decode_scratch* out = nullptr, void* base = nullptr) {
  const size_t heads = size_t(n_tok) * size_t(p.n_head);
  const size_t slots = n_split > 1 ? heads * size_t(n_split) : 0;
  const size_t scores = heads * size_t(max_cells) * sizeof(float);
  const size_t part_o = scores, part_m = part_o + slots * size_t(p.head_dim_v) * sizeof(float);
  const size_t part_l = (part_m + slots * sizeof(float) + 7) / 8 * 8;
  if (out) {
    auto* b = static_cast<unsigned char*>(base);
    *out = {reinterpret_cast<float*>(b), reinterpret_cast<float*>(b + part_o),
            reinterpret_cast<float*>(b + part_m), reinterpret_cast<double*>(b + part_l)};
  }
  return part_l + slots * sizeof(double);
}

// What a launch of the decode kernel computes, one (split, head, token) per block.
enum class decode_phase : int {
  all,     // one split: the scores and max, the sum, the output
  max,     // the split's scores (kept) and their max, to part_m
  sum,     // the split's sum from the splits' max, to part_l
  output,  // the split's share of the output from the splits' max and sum, to part_o
};

// T: the caches' element type (float or __half). The softmax is the CPU's (attention-math.cuh),
// in three passes; only the first reads K, the scores it keeps serve the other two. With several
// splits the kernel runs once per phase and attention_combine_kernel adds the splits' shares.
//
// Scores: one warp per cell in turn. The dot product is attention_dot's: q16 holds, on lane
// l < 16, q's dimensions l, l + 16, ...; the 16 partial sums are added by shuffles in its
// pairwise order.
template <typename T>
__global__ void __launch_bounds__(k_decode_block)
    attention_decode_kernel(const attention_args a, int32_t n_split, decode_phase phase,
                            decode_scratch ds) {
  __shared__ unsigned char visible[k_decode_block];
  __shared__ float warp_m[k_decode_warps];
  __shared__ double warp_l[k_decode_warps];
  __shared__ float warp_o[k_decode_warps][k_attention_max_head_dim];
  const attention_params& p = a.p;
  const int32_t split = int32_t(blockIdx.x);
  const int32_t h = int32_t(blockIdx.y);
  const int64_t t = blockIdx.z;
  const int warp = int(threadIdx.x) / k_warp;
  const int lane = int(threadIdx.x) % k_warp;
  const int32_t dk = p.head_dim_k, dv = p.head_dim_v;
  const int32_t hk = h / (p.n_head / p.n_head_kv);
  const cell_range range = attention_split_range(cells_to_scan(a), n_split, split);
  const int64_t slot0 = (t * p.n_head + h) * n_split;
  float* scores = ds.scores + (t * p.n_head + h) * int64_t(a.max_cells);

  float m = -INFINITY;
  if (phase == decode_phase::all || phase == decode_phase::max) {
    const int32_t whole = dk / 16;  // whole 16s of dimensions
    const float* q_head = a.q + t * p.n_head * dk + int64_t(h) * dk;
    float q16[k_attention_max_head_dim / 16];
#pragma unroll
    for (int i = 0; i < k_attention_max_head_dim / 16; ++i)
      q16[i] = i < whole ? q_value<T>(q_head[16 * i + (lane & 15)]) : 0.0f;
    const int64_t k_row = int64_t(p.n_head_kv) * dk;
    const T* k_head = static_cast<const T*>(a.k) + int64_t(hk) * dk;
    const int32_t tok_seq = a.tok_seq[t], tok_pos = a.tok_pos[t];
    for (int32_t c0 = range.begin; c0 < range.end; c0 += k_decode_block) {
      const int32_t c = c0 + int32_t(threadIdx.x);
      visible[threadIdx.x] = c < range.end && attention_visible(a.cell_seq[c], a.cell_pos[c],
                                                                tok_seq, tok_pos, p.window);
      __syncthreads();
      const int32_t n_here = min(k_decode_block, range.end - c0);
      for (int32_t j = warp; j < n_here; j += k_decode_warps) {
        if (!visible[j]) {  // uniform over the warp
          if (lane == 0) scores[c0 + j] = -INFINITY;
          continue;
        }
        const T* k_cell = k_head + int64_t(c0 + j) * k_row;
        float part = 0.0f;
        if (lane < 16 && whole > 0) {
          part = to_float(k_cell[lane]) * q16[0];
#pragma unroll
          for (int i = 1; i < k_attention_max_head_dim / 16; ++i)
            if (i < whole) part = fmaf(to_float(k_cell[16 * i + lane]), q16[i], part);
        }
#pragma unroll
        for (int w = 8; w >= 1; w /= 2) part += __shfl_down_sync(k_full_mask, part, w);
        float dot = __shfl_sync(k_full_mask, part, 0);
        if (whole * 16 < dk) {  // dimensions past the last whole 16, summed apart (rare)
          float tail = 0.0f;
          for (int32_t d = whole * 16; d < dk; ++d)
            tail = fmaf(to_float(k_cell[d]), q_value<T>(q_head[d]), tail);
          dot += tail;
        }
        const float sc = attention_score(dot, p.scale, p.softcap);
        if (lane == 0) scores[c0 + j] = sc;
        m = fmaxf(m, sc);
      }
      __syncthreads();  // before the next tile's mask overwrites this one's
    }
    if (lane == 0) warp_m[warp] = m;
    __syncthreads();  // also makes the scores written above visible to the whole block
    for (int w = 0; w < k_decode_warps; ++w) m = fmaxf(m, warp_m[w]);
    if (phase == decode_phase::max) {
      if (threadIdx.x == 0) ds.part_m[slot0 + split] = m;
      return;
    }
  } else {
    for (int32_t s = 0; s < n_split; ++s) m = fmaxf(m, ds.part_m[slot0 + s]);
  }

  double sum = 0.0;
  if (phase == decode_phase::all || phase == decode_phase::sum) {
    double l = 0.0;
    for (int32_t c = range.begin + int32_t(threadIdx.x); c < range.end; c += k_decode_block) {
      const float sc = scores[c];
      if (sc != -INFINITY) l += attention_exp(sc - m);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(k_full_mask, l, o);
    if (lane == 0) warp_l[warp] = l;
    __syncthreads();
    for (int w = 0; w < k_decode_warps; ++w) sum += warp_l[w];
    if (phase == decode_phase::sum) {
      if (threadIdx.x == 0) ds.part_l[slot0 + split] = sum;
      return;
    }
  } else {
    for (int32_t s = 0; s < n_split; ++s) sum += ds.part_l[slot0 + s];
  }
  const float inv = attention_inv_sum(sum);  // 0 when no cell is visible: zeros, as the CPU

  // Σ w·v: one warp per cell in turn, lane l holding dimensions l, l + 32, ...
  const int64_t v_row = int64_t(p.n_head_kv) * dv;
  const T* v_head = static_cast<const T*>(a.v) + int64_t(hk) * dv;
  float o[k_dims_per_lane] = {};
  for (int32_t c = range.begin + warp; c < range.end; c += k_decode_warps) {
    const float sc = scores[c];
    if (sc == -INFINITY) continue;  // unseen: its V never read, as on the CPU
    const float w = attention_weight(attention_exp(sc - m), inv, sizeof(T) == 2);
    const T* v_cell = v_head + int64_t(c) * v_row;
#pragma unroll
    for (int k = 0; k < k_dims_per_lane; ++k) {
      const int d = lane + k * k_warp;
      if (d < dv) o[k] = fmaf(w, to_float(v_cell[d]), o[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < k_dims_per_lane; ++k) {
    const int d = lane + k * k_warp;
    if (d < dv) warp_o[warp][d] = o[k];
  }
  __syncthreads();
  for (int d = int(threadIdx.x); d < dv; d += k_decode_block) {
    float od = 0.0f;
    for (int w = 0; w < k_decode_warps; ++w) od += warp_o[w][d];
    if (n_split == 1) {
      a.out[t * p.n_head * dv + int64_t(h) * dv + d] = od;
    } else {
      ds.part_o[(slot0 + split) * dv + d] = od;
    }
  }
}

// Adds the n_split shares of one (head, token)'s output: grid (head, token).
__global__ void __launch_bounds__(k_combine_block)
    attention_combine_kernel(const float* part_o, int32_t n_split, int32_t n_head, int32_t dv,
                             float* out) {
  const int32_t h = int32_t(blockIdx.x);
  const int64_t t = blockIdx.y;
  const int64_t slot0 = (t * n_head + h) * n_split;
  for (int d = int(threadIdx.x); d < dv; d += k_combine_block) {
    float od = 0.0f;
    for (int s = 0; s < n_split; ++s) od += part_o[(slot0 + s) * dv + d];
    out[t * n_head * dv + int64_t(h) * dv + d] = od;
  }
}

// --- prompts ----------------------------------------------------------------------------

constexpr int k_prompt_warps = 4;
constexpr int k_prompt_block = k_prompt_warps * k_warp;
constexpr int k_prompt_rows = 4;                                 // tokens per warp
constexpr int k_prompt_tokens = k_prompt_warps * k_prompt_rows;  // tokens per block
constexpr int k_prompt_cells = k_warp;                           // cells per tile: one per lane

// Dynamic shared memory of the prompt kernel: the Q tile, F32 [k_prompt_tokens, dk], then one
// K-or-V tile, F32 [k_prompt_cells rows of attention_tile_stride floats]. At most 48 KiB (for
// head dims of 256), so no opt-in attribute is needed.
size_t prompt_shared_bytes(int32_t dk, int32_t dv) {
  const int32_t stride = std::max(attention_tile_stride(dk), attention_tile_stride(dv));
  return (size_t(k_prompt_tokens) * dk + size_t(k_prompt_cells) * stride) * sizeof(float);
}

// Rows [0, k_prompt_cells) of a K or V tile (cells c0 + j of one kv head, d values each) into
// shared memory as float; rows past n_cells as zeros.
template <typename T>
__device__ __forceinline__ void load_tile(float* tile, const T* head, int64_t row, int32_t d_n,
                                          int32_t c0, int32_t n_cells) {
  const int32_t stride = attention_tile_stride(d_n), x = attention_tile_xor(d_n);
  for (int32_t i = int32_t(threadIdx.x); i < k_prompt_cells * d_n; i += k_prompt_block) {
    const int32_t j = i / d_n, d = i - j * d_n;
    const int32_t c = c0 + j;
    tile[j * stride + (d ^ (j & x))] = c < n_cells ? to_float(head[int64_t(c) * row + d]) : 0.0f;
  }
}

// One block per (16 tokens, head): grid (ceil(n_tok / 16), n_head). T: the caches' element type.
template <typename T>
__global__ void __launch_bounds__(k_prompt_block) attention_prompt_kernel(const attention_args a) {
  extern __shared__ float shared[];
  const attention_params& p = a.p;
  const int32_t dk = p.head_dim_k, dv = p.head_dim_v;
  float* q_tile = shared;                          // [k_prompt_tokens, dk]
  float* kv_tile = shared + k_prompt_tokens * dk;  // [k_prompt_cells, stride]

  const int64_t t0 = int64_t(blockIdx.x) * k_prompt_tokens;
  const int32_t h = int32_t(blockIdx.y);
  const int warp = int(threadIdx.x) / k_warp;
  const int lane = int(threadIdx.x) % k_warp;
  const int32_t hk = h / (p.n_head / p.n_head_kv);
  const int64_t k_row = int64_t(p.n_head_kv) * dk, v_row = int64_t(p.n_head_kv) * dv;
  const T* k_head = static_cast<const T*>(a.k) + int64_t(hk) * dk;
  const T* v_head = static_cast<const T*>(a.v) + int64_t(hk) * dv;
  const int32_t n_cells = cells_to_scan(a);

  for (int32_t i = int32_t(threadIdx.x); i < k_prompt_tokens * dk; i += k_prompt_block) {
    const int32_t r = i / dk, d = i - r * dk;
    const int64_t t = t0 + r;
    q_tile[i] = t < a.n_tok ? q_value<T>(a.q[t * p.n_head * dk + int64_t(h) * dk + d]) : 0.0f;
  }

  // This warp's tokens; rows past n_tok see nothing and write nothing.
  bool valid[k_prompt_rows];
  int32_t tok_seq[k_prompt_rows], tok_pos[k_prompt_rows];
#pragma unroll
  for (int r = 0; r < k_prompt_rows; ++r) {
    const int64_t t = t0 + warp * k_prompt_rows + r;
    valid[r] = t < a.n_tok;
    tok_seq[r] = valid[r] ? a.tok_seq[t] : 0;
    tok_pos[r] = valid[r] ? a.tok_pos[t] : 0;
  }
  const float* q_rows = q_tile + warp * k_prompt_rows * dk;
  const int32_t k_stride = attention_tile_stride(dk), k_x = attention_tile_xor(dk) & lane;
  const int32_t v_stride = attention_tile_stride(dv), v_xor = attention_tile_xor(dv);

  // Three passes over the cells' tiles, the CPU's softmax (attention-math.cuh): each row's max
  // (uniform over the warp), its sum (this lane's cells in double, then the warp's), then the
  // weights and Σ w·v, each lane accumulating dimensions lane + 32 k over the cells in order.
  float m[k_prompt_rows], inv[k_prompt_rows];
  double l[k_prompt_rows];
  float acc[k_prompt_rows][k_dims_per_lane];
#pragma unroll
  for (int r = 0; r < k_prompt_rows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0;
    inv[r] = 0.0f;
#pragma unroll
    for (int k = 0; k < k_dims_per_lane; ++k) acc[r][k] = 0.0f;
  }

  for (int pass = 0; pass < 3; ++pass) {
    for (int32_t c0 = 0; c0 < n_cells; c0 += k_prompt_cells) {
      const int32_t c = c0 + lane;
      bool visible[k_prompt_rows];
      bool any = false;
      const int32_t cell_seq = c < n_cells ? a.cell_seq[c] : -1;
      const int32_t cell_pos = c < n_cells ? a.cell_pos[c] : 0;
#pragma unroll
      for (int r = 0; r < k_prompt_rows; ++r) {
        visible[r] = valid[r] && c < n_cells &&
                     attention_visible(cell_seq, cell_pos, tok_seq[r], tok_pos[r], p.window);
        any = any || visible[r];
      }
      // Also the barrier that orders this tile's K stores after the previous tile's K or V
      // reads (and the first tile's after the Q tile's stores).
      if (!__syncthreads_or(any)) continue;

      load_tile(kv_tile, k_head, k_row, dk, c0, n_cells);
      __syncthreads();
      float s[k_prompt_rows];
      const float* k_cell = kv_tile + lane * k_stride;
#pragma unroll
      for (int r = 0; r < k_prompt_rows; ++r) {
        const float* q_row = q_rows + r * dk;
        const float dot = attention_dot([&](int32_t d) { return k_cell[d ^ k_x]; },
                                        [&](int32_t d) { return q_row[d]; }, dk);
        s[r] = visible[r] ? attention_score(dot, p.scale, p.softcap) : -INFINITY;
      }
      if (pass == 0) {
#pragma unroll
        for (int r = 0; r < k_prompt_rows; ++r) m[r] = fmaxf(m[r], warp_max(s[r]));
        continue;  // the next tile's __syncthreads_or orders these K reads before its stores
      }
      if (pass == 1) {
#pragma unroll
        for (int r = 0; r < k_prompt_rows; ++r)
          if (visible[r]) l[r] += attention_exp(s[r] - m[r]);
        continue;
      }
      __syncthreads();  // all K reads done before V overwrites the tile
      load_tile(kv_tile, v_head, v_row, dv, c0, n_cells);
      // e: this lane's cell's weight per row (0 where unseen), while V loads.
      float e[k_prompt_rows];
#pragma unroll
      for (int r = 0; r < k_prompt_rows; ++r) {
        e[r] = visible[r] ? attention_weight(attention_exp(s[r] - m[r]), inv[r], sizeof(T) == 2)
                          : 0.0f;
      }
      __syncthreads();

      for (int j = 0; j < k_prompt_cells; ++j) {
        float ej[k_prompt_rows];
        bool used = false;
#pragma unroll
        for (int r = 0; r < k_prompt_rows; ++r) {
          ej[r] = __shfl_sync(k_full_mask, e[r], j);
          used = used || ej[r] != 0.0f;
        }
        if (!used) continue;  // uniform over the warp
        const float* v_cell = kv_tile + j * v_stride;
        const int32_t x = j & v_xor;
        float vv[k_dims_per_lane];
#pragma unroll
        for (int k = 0; k < k_dims_per_lane; ++k) {
          const int d = lane + k * k_warp;
          vv[k] = d < dv ? v_cell[d ^ x] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < k_prompt_rows; ++r) {
          if (ej[r] == 0.0f) continue;  // uniform; keeps an unseen cell's V out, as the CPU
#pragma unroll
          for (int k = 0; k < k_dims_per_lane; ++k) acc[r][k] = fmaf(ej[r], vv[k], acc[r][k]);
        }
      }
    }
    if (pass == 1) {
#pragma unroll
      for (int r = 0; r < k_prompt_rows; ++r) {
        double sum = l[r];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(k_full_mask, sum, o);
        inv[r] = attention_inv_sum(sum);  // 0 when no cell is visible: zeros, as the CPU
      }
    }
  }

#pragma unroll
  for (int r = 0; r < k_prompt_rows; ++r) {
    if (!valid[r]) continue;
    const int64_t t = t0 + warp * k_prompt_rows + r;
    float* out = a.out + t * p.n_head * dv + int64_t(h) * dv;
#pragma unroll
    for (int k = 0; k < k_dims_per_lane; ++k) {
      const int d = lane + k * k_warp;
      if (d < dv) out[d] = acc[r][k];
    }
  }
}

template <typename T>
void launch(cudaStream_t s, const attention_args& a) {
  const attention_params& p = a.p;
  if (a.n_tok <= k_attention_decode_max_tokens) {
    const int32_t n_split = attention_split_count(a.max_cells);
    decode_scratch ds;
    decode_scratch_bytes(a.n_tok, p, a.max_cells, n_split, &ds, a.scratch);
    const dim3 grid(unsigned(n_split), unsigned(p.n_head), unsigned(a.n_tok));
    if (n_split == 1) {
      attention_decode_kernel<T><<<grid, k_decode_block, 0, s>>>(a, 1, decode_phase::all, ds);
      return;
    }
    for (decode_phase ph : {decode_phase::max, decode_phase::sum, decode_phase::output})
      attention_decode_kernel<T><<<grid, k_decode_block, 0, s>>>(a, n_split, ph, ds);
    attention_combine_kernel<<<dim3(unsigned(p.n_head), unsigned(a.n_tok)), k_combine_block, 0,
                               s>>>(ds.part_o, n_split, p.n_head, p.head_dim_v, a.out);
  } else {
    const dim3 grid(unsigned((a.n_tok + k_prompt_tokens - 1) / k_prompt_tokens),
                    unsigned(p.n_head));
    attention_prompt_kernel<T>
        <<<grid, k_prompt_block, prompt_shared_bytes(p.head_dim_k, p.head_dim_v), s>>>(a);
  }
}

}  // namespace

size_t attention_scratch_bytes(int64_t n_tok, const attention_params& p, int32_t max_cells) {
  if (n_tok <= 0 || n_tok > k_attention_decode_max_tokens) return 0;
  return decode_scratch_bytes(n_tok, p, max_cells, attention_split_count(max_cells));
}

void attention(cudaStream_t s, const attention_args& a) {
  const attention_params& p = a.p;
  if (a.n_tok <= 0 || p.n_head <= 0) return;
  assert(p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0);
  assert(p.head_dim_k > 0 && p.head_dim_k <= k_attention_max_head_dim);
  assert(p.head_dim_v > 0 && p.head_dim_v <= k_attention_max_head_dim);
  assert(a.n_tok <= 0x7fffffff && p.n_head <= 65535);
  assert(attention_scratch_bytes(a.n_tok, p, a.max_cells) == 0 || a.scratch);
  if (a.kv_f16) {
    launch<__half>(s, a);
  } else {
    launch<float>(s, a);
  }
}

}  // namespace hearth::cuda
