// The ops of the Vulkan backend, one file each (or per op group): each checks what its shader
// assumes and records one dispatch on the device. Tensors' data point to vk::buffer.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/vulkan/device.h"
#include "engine/backend.h"

namespace hearth::vk {

inline const buffer* buf(const tensor& t) {
  return static_cast<const buffer*>(t.data);
}
inline const buffer* buf_or_null(const tensor* t) {
  return t && t->present() ? buf(*t) : nullptr;
}

// Calls f(part, first_row, n_rows) for each buffer holding rows of weight w, in row order: one
// call unless w is larger than one buffer (buffer::next_part). Rows past w.ne[1] (a view of fewer
// rows) are left out.
template <class F>
void for_each_row_part(const tensor& w, F&& f) {
  const buffer* b = buf(w);
  if (b->n_rows == 0) {  // not a weight: the tensor's own buffer
    f(b, int64_t(0), w.ne[1]);
    return;
  }
  for (; b && b->first_row < w.ne[1]; b = b->next_part)
    f(b, b->first_row, std::min(b->n_rows, w.ne[1] - b->first_row));
}

// n workgroups spread over x and y (65535 at most per dimension); shaders use group_index().
struct groups {
  uint32_t x, y;
};
inline groups groups_for(int64_t n) {
  const int64_t x = std::min<int64_t>(std::max<int64_t>(n, 1), 65535);
  return {uint32_t(x), uint32_t((n + x - 1) / x)};
}

// A device buffer an op reuses from call to call (the expert product's row groups), grown when a
// call needs more. Only growing waits for the device (work recorded earlier may still use the old
// buffer), so a forward pass of a size seen before records without a host sync.
class scratch {
 public:
  const buffer* at_least(device& d, VkDeviceSize bytes, const char* what) {
    if (!b_ || b_->size < bytes) {
      d.submit_and_wait();
      d.free(b_);
      b_ = nullptr;
      b_ = d.alloc(bytes, what);
    }
    return b_;
  }
  void release(device& d) {
    d.free(b_);
    b_ = nullptr;
  }

 private:
  buffer* b_ = nullptr;
};

// The name of a weight type's shader variants ("q8_0"), or nullptr when there is none.
const char* weight_variant(tensor_type t);

void op_get_rows(device& d, const tensor& table, const tensor& ids, const tensor& out);
// Matrix products round the activations first as the reference engine does (round_x.comp), into
// `rounded`.
void op_mul_mat(device& d, scratch& rounded, const tensor& w, const tensor& x, const tensor* bias,
                const tensor& out);
// The expert product, x rounded as op_mul_mat rounds it: on GPUs the matrix-vector shader for few
// tokens, else rows grouped by expert into `group_rows` (moe_group.comp) and the tiled shader over
// (expert, tile of its rows).
void op_mul_mat_id(device& d, scratch& rounded, scratch& group_rows, const tensor& w,
                   const tensor& x, const tensor& ids, const tensor& out);
void op_moe_route(device& d, const tensor& logits, bool normalize, const tensor& ids,
                  const tensor& weights);
void op_moe_combine(device& d, const tensor& x, const tensor& weights, const tensor& out);
void op_rms_norm(device& d, const tensor& x, const tensor& weight, float eps, const tensor& out);
void op_rope(device& d, const tensor& x, int32_t n_head, int32_t head_dim, const tensor& pos,
             const rope_params& p, const tensor* freq_factors);
void op_kv_store(device& d, const tensor& src, const tensor& cells, const tensor& cache);
void op_attention(device& d, const tensor& q, const tensor& k_cache, const tensor& v_cache,
                  const tensor& tok_seq, const tensor& tok_pos, const tensor& cell_seq,
                  const tensor& cell_pos, int32_t n_cells, const attention_params& p,
                  const tensor& out);
// op: "add", "swiglu", "geglu", "scale", "softcap"; b may be null; params as the shader reads.
void op_elementwise(device& d, const char* op, const tensor& a, const tensor* b, float param0,
                    float param1, const tensor& out);

}  // namespace hearth::vk
