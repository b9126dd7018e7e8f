// The CUDA backend's kernels as host functions: each enqueues one or a few kernel launches on a
// stream and returns at once (never synchronizes, never allocates), so every one of them can be
// recorded into a CUDA graph. Pointers are device pointers. This header is plain C++: the
// backend (backend-cuda.cpp, compiled by the host compiler) calls it; the .cu files implement it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend.h"
#include "engine/io/tensor-type.h"

namespace hearth::cuda {

// --- weights ----------------------------------------------------------------------------

// Whether get_rows, mul_mat_vec and dequantize_rows have kernels for weights of type t: F32,
// F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
bool has_weight_kernels(tensor_type t);

// out[i, :] = table[ids[i], :] as F32. table: n_rows rows of `cols` values of type t.
void get_rows(cudaStream_t s, tensor_type t, const void* table, int64_t cols, const int32_t* ids,
              int64_t n, float* out);

// The most tokens mul_mat_vec takes at once; larger batches take it that many at a time or go
// through dequantize_rows and a cuBLAS GEMM (backend-cuda.cpp's on_mmv says which).
constexpr int k_mmv_max_tokens = 8;

// out[t, o] = Σ_i w[o, i] · x[t, i] (+ bias[o]) for n_tok <= k_mmv_max_tokens: the decoding
// product. Streams each weight row once for all tokens, dequantizing in registers; activations
// stay F32. w: n_out rows of n_in values of type t; x: F32 [n_tok, n_in]; bias: F32 [n_out] or
// null; out: F32 [n_tok, n_out].
void mul_mat_vec(cudaStream_t s, tensor_type t, const void* w, int64_t n_in, int64_t n_out,
                 const float* x, int64_t n_tok, const float* bias, float* out);

// Rows [row0, row0 + n_rows) of w (rows of n_in values of quantized type t) as F32 into out
// [n_rows, n_in]: the prompt path's weights for cuBLAS's SGEMM, so a prompt's products are the
// CPU's to F32 rounding. F32, F16 and BF16 weights are multiplied as they are (refused here).
void dequantize_rows(cudaStream_t s, tensor_type t, const void* w, int64_t n_in, int64_t row0,
                     int64_t n_rows, float* out);

// n floats to F16 (bf16 == false) or BF16 (bf16 == true), rounded to nearest even, as the CPU
// rounds activations for F16/BF16 weights.
void convert_f32(cudaStream_t s, const float* x, int64_t n, bool bf16, uint16_t* out);

// Whether products with weights of type w round their activations first (round-math.cuh: F16,
// BF16 and the quantized types; not F32).
bool rounds_activations(tensor_type w);

// x (F32 [rows, n_in]) rounded to the dot-product type of weights of type w and written back as
// F32 into out (not overlapping x), as the CPU backend converts activations before a product with
// w. n_in must be a whole number of the rounding's blocks (32 values for Q8_0, 256 for Q8_K).
void round_activations(cudaStream_t s, tensor_type w, const float* x, int64_t n_in, int64_t rows,
                       float* out);

// Activations as the CPU's Q8_K blocks hold them, for the integer decoding product: rows of n_in
// values (a multiple of 256) in three arrays, qs int8 [rows, n_in], d F32 [rows, n_in / 256] (a
// block's scale) and sums I32 [rows, n_in / 16] (Σ qs over each 16 values: the CPU's bsums). One
// allocation of q8k_bytes(n_in, rows) bytes (256-aligned) holds them; q8k_at says where each array
// starts.
struct q8k_rows {
  int8_t* qs;
  float* d;
  int32_t* sums;
};
size_t q8k_bytes(int64_t n_in, int64_t rows);
q8k_rows q8k_at(void* p, int64_t n_in, int64_t rows);

// x (F32 [rows, n_in]) rounded as the CPU's q8_k from_float rounds it (round-math.cuh's Q8_K),
// into out.
void quantize_q8k(cudaStream_t s, const float* x, int64_t n_in, int64_t rows, const q8k_rows& out);

// Whether mul_mat_vec_q8k takes weights of type t (Q4_K, Q6_K).
bool has_q8k_kernel(tensor_type t);

// mul_mat_vec for weights of a type has_q8k_kernel takes, over activations quantize_q8k wrote:
// integer products, each 256-value block's term as the CPU computes it (mmvq-math.cuh).
void mul_mat_vec_q8k(cudaStream_t s, tensor_type t, const void* w, int64_t n_in, int64_t n_out,
                     const q8k_rows& x, int64_t n_tok, const float* bias, float* out);

// out[t, o] += bias[o] for t < n_tok.
void add_bias(cudaStream_t s, float* out, const float* bias, int64_t n_out, int64_t n_tok);

// The expert product (backend::mul_mat_id) with its rows grouped by expert: for each expert e,
// each of rows[start[e] .. start[e + 1]) (from moe_group) is an output row r, computed as
// out[r, :] = x[r / x_div, :] · w[e]ᵀ (x_div = k when x has a row per token, 1 when a row per
// product row). w: n_expert matrices of n_out rows of n_in values of type t, one after the
// other. The matrix-vector kernel of mul_mat_vec, one block column per expert, taking the
// expert's rows up to k_mmv_max_tokens at a time: an expert no row chose is never read, one
// with up to k_mmv_max_tokens rows is read once. out: F32 [n_rows, n_out].
void mul_mat_id(cudaStream_t s, tensor_type t, const void* w, int64_t n_in, int64_t n_out,
                int32_t n_expert, const float* x, int64_t x_div, const int32_t* rows,
                const int32_t* start, float* out);

// --- mixture of experts (engine/backend.h states each op; moe.cu) ---------------------------

// ids: I32 [n_tok, k]; weights: F32 [n_tok, k]; logits: F32 [n_tok, n_expert].
void moe_route(cudaStream_t s, const float* logits, int32_t n_expert, int64_t n_tok, int32_t k,
               bool normalize, int32_t* ids, float* weights);

// The rows of ids (I32, n_rows values in [0, n_expert)) grouped by the id they hold: rows (I32,
// n_rows) lists the rows of expert 0 in increasing order, then those of expert 1, ...; start (I32,
// n_expert + 1) says where each expert's list begins. One block: a few microseconds for a
// decoding step, tens for a prompt of thousands of rows.
void moe_group(cudaStream_t s, const int32_t* ids, int64_t n_rows, int32_t n_expert, int32_t* rows,
               int32_t* start);

// x: F32 [n_tok*k, cols]; weights: F32 [n_tok, k]; out: F32 [n_tok, cols].
void moe_combine(cudaStream_t s, const float* x, const float* weights, int64_t cols, int64_t n_tok,
                 int32_t k, float* out);

// --- the other ops (engine/backend.h says what each computes) -----------------------------

// weight may be null (no scale). x and out may alias.
void rms_norm(cudaStream_t s, const float* x, const float* weight, int64_t cols, int64_t rows,
              float eps, float* out);

// In place on x [n_tok, n_head * head_dim] (row stride row_len floats). freq_factors: F32
// [n_dims / 2] or null.
void rope(cudaStream_t s, float* x, int64_t n_tok, int64_t row_len, int32_t n_head,
          int32_t head_dim, const int32_t* pos, const rope_params& p, const float* freq_factors);

// cache[cells[i], :] = src[i, :] for i < n_tok, converted to F16 when cache_f16, else F32.
void kv_store(cudaStream_t s, const float* src, int64_t cols, int64_t n_tok, const int32_t* cells,
              void* cache, bool cache_f16);

// Attention over the cache (engine/backend.h: backend::attention). `n_cells` is read from
// device memory when the kernels run, so a captured graph stays valid as the cache grows;
// `max_cells` (the cache's size) bounds it and sizes the work split.
struct attention_args {
  const float* q = nullptr;  // F32 [n_tok, n_head * head_dim_k]
  const void* k = nullptr;   // [cache cells, n_head_kv * head_dim_k], F16 or F32
  const void* v = nullptr;   // [cache cells, n_head_kv * head_dim_v], F16 or F32
  bool kv_f16 = true;
  const int32_t* tok_seq = nullptr;   // [n_tok]
  const int32_t* tok_pos = nullptr;   // [n_tok]
  const int32_t* cell_seq = nullptr;  // [cache cells], -1 empty
  const int32_t* cell_pos = nullptr;  // [cache cells]
  const int32_t* n_cells = nullptr;   // device scalar: cells [0, *n_cells) are scanned
  int32_t max_cells = 0;              // >= *n_cells
  int64_t n_tok = 0;
  attention_params p;
  float* out = nullptr;  // F32 [n_tok, n_head * head_dim_v]
  // Scratch for decoding (each cell's score, and the splits' partial results):
  // attention_scratch_bytes() bytes.
  void* scratch = nullptr;
};

// Scratch bytes attention() needs for these shapes (0 for prompts, which keep no scores).
size_t attention_scratch_bytes(int64_t n_tok, const attention_params& p, int32_t max_cells);

void attention(cudaStream_t s, const attention_args& a);

enum class elementwise_op { add, swiglu, geglu, scale, softcap };

// out = op(a, b) elementwise over n floats: add a + b; swiglu silu(a) * b; geglu gelu_tanh(a) * b;
// scale a * p0; softcap p0 * tanh(a * p1). b is null for scale and softcap. out may alias a or b.
void elementwise(cudaStream_t s, elementwise_op op, const float* a, const float* b, float p0,
                 float p1, int64_t n, float* out);

}  // namespace hearth::cuda
