// The CPU backend: the reference implementation of every op (engine/backend.h). Each op lives in
// its own file under engine/cpu/; this header is what they share.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/packed-weights.h"
#include "engine/thread-pool.h"

namespace hearth::cpu {

// Per-thread scratch memory, grown on demand and then reused: no allocation per token once the
// largest batch has been seen.
struct scratch {
  std::vector<std::vector<float>> per_thread;  // attention scores, dequantized rows
  std::vector<uint8_t> converted;              // activations in a weight's dot-product type
  // mul_mats: the activations in each format its products' tile kernels take.
  std::vector<std::vector<uint8_t>> converted_sets;
  // mul_mat_id: converted activation rows gathered by expert, their products, the order.
  std::vector<uint8_t> grouped_x;
  std::vector<float> grouped_y;
  std::vector<int32_t> group_rows, group_fill, group_active;
  std::vector<float> route_probs;  // moe_route: one token's probabilities and their order
  std::vector<int32_t> route_order;

  // Grows every thread's floats (per_thread) to n before a shared job: a worker may join only
  // some of the jobs (thread_pool::share), so growing only the ones that ran would leave another
  // to grow during a later step.
  void grow_thread_floats(size_t n) {
    for (auto& v : per_thread)
      if (v.size() < n) v.resize(n);
  }
};

void op_get_rows(thread_pool& pool, const tensor& table, const tensor& ids, const tensor& out);
void op_mul_mat(thread_pool& pool, scratch& s, packed_weights& packed, const tensor& w,
                const tensor& x, const tensor* bias, const tensor& out);
void op_mul_mats(thread_pool& pool, scratch& s, packed_weights& packed, const tensor& x,
                 std::span<const backend::product> products);
void op_rms_norm(thread_pool& pool, const tensor& x, const tensor& weight, float eps,
                 const tensor& out);
void op_rope(thread_pool& pool, const tensor& x, int32_t n_head, int32_t head_dim,
             const tensor& pos, const rope_params& p, const tensor* freq_factors);
void op_kv_store(thread_pool& pool, const tensor& src, const tensor& cells, const tensor& cache);
void op_attention(thread_pool& pool, scratch& s, const tensor& q, const tensor& k_cache,
                  const tensor& v_cache, const tensor& tok_seq, const tensor& tok_pos,
                  const tensor& cell_seq, const tensor& cell_pos, int32_t n_cells,
                  const attention_params& p, const tensor& out);
void op_swiglu(thread_pool& pool, const tensor& gate, const tensor& up, const tensor& out);
void op_geglu(thread_pool& pool, const tensor& gate, const tensor& up, const tensor& out);
void op_add(thread_pool& pool, const tensor& a, const tensor& b, const tensor& out);
void op_scale(thread_pool& pool, const tensor& x, float s, const tensor& out);
void op_softcap(thread_pool& pool, const tensor& x, float cap, const tensor& out);
void op_moe_route(scratch& s, const tensor& logits, bool normalize, const tensor& ids,
                  const tensor& weights);
void op_mul_mat_id(thread_pool& pool, scratch& s, packed_weights& packed, const tensor& w,
                   const tensor& x, const tensor& ids, const tensor& out);
void op_moe_combine(thread_pool& pool, const tensor& x, const tensor& weights, const tensor& out);

}  // namespace hearth::cpu
