// Causal attention over the KV cache for a batch of tokens from any number of sequences.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/cpu/backend-cpu.h"
#include "engine/cpu/vec-dot.h"

namespace hearth::cpu {

void op_attention(thread_pool& pool, scratch& s, const tensor& q, const tensor& k_cache,
                  const tensor& v_cache, const tensor& tok_seq, const tensor& tok_pos,
                  const tensor& cell_seq, const tensor& cell_pos, int32_t n_cells,
                  const attention_params& p, const tensor& out) {
  const int64_t n_tok = q.ne[1];
  const type_kernels* kk = kernels_for(k_cache.type);
  const type_kernels* vk = kernels_for(v_cache.type);
  const int32_t* tseq = static_cast<const int32_t*>(tok_seq.data);
  const int32_t* tpos = static_cast<const int32_t*>(tok_pos.data);
  const int32_t* cseq = static_cast<const int32_t*>(cell_seq.data);
  const int32_t* cpos = static_cast<const int32_t*>(cell_pos.data);
  const int32_t group = p.n_head / p.n_head_kv;
  const int64_t k_row_bytes = k_cache.row_bytes();
  const int64_t v_row_bytes = v_cache.row_bytes();
  const int64_t k_head_bytes = tensor_type_row_bytes(k_cache.type, p.head_dim_k);
  const int64_t v_head_bytes = tensor_type_row_bytes(v_cache.type, p.head_dim_v);
  const float neg_inf = -std::numeric_limits<float>::infinity();

  // The cells each token sees, in position order. Sums then run in the same order however the
  // cache laid the cells out, so a sequence sharing a busy cache with others gets bit-for-bit
  // the results it gets alone (cells are handed out round the cache and reused as sequences
  // end, so cell order is not position order in general).
  // (Reused across calls; bound to references because the workers below must read the calling
  // thread's lists, not their own thread_local instances.)
  thread_local std::vector<int32_t> tl_visible;
  thread_local std::vector<int64_t> tl_first;
  std::vector<int32_t>& visible = tl_visible;
  std::vector<int64_t>& first = tl_first;
  visible.clear();
  first.assign(size_t(n_tok) + 1, 0);
  for (int64_t t = 0; t < n_tok; ++t) {
    const size_t begin = visible.size();
    for (int32_t c = 0; c < n_cells; ++c) {
      if (cseq[c] == tseq[t] && cpos[c] <= tpos[t] &&
          (p.window <= 0 || tpos[t] - cpos[c] < p.window)) {
        visible.push_back(c);
      }
    }
    auto by_pos = [&](int32_t a, int32_t b) { return cpos[a] < cpos[b]; };
    if (!std::is_sorted(visible.begin() + ptrdiff_t(begin), visible.end(), by_pos)) {
      std::sort(visible.begin() + ptrdiff_t(begin), visible.end(), by_pos);
    }
    first[size_t(t) + 1] = int64_t(visible.size());
  }

  const int64_t work = n_tok * p.n_head * int64_t(n_cells) * (p.head_dim_k + p.head_dim_v);
  pool.run_sized(work, [&](int ith, int nth) {
    // Scratch: scores for every cell, q and a dequantized V row in the cache's type/F32.
    float* buf = s.thread_floats(
        ith, size_t(n_cells) + size_t(p.head_dim_k) * 2 + size_t(p.head_dim_v) * 2 + 64);
    float* scores = buf;
    float* q_conv = scores + n_cells;         // q of one head in the K cache type (room for F32)
    float* vrow = q_conv + p.head_dim_k * 2;  // one V head as F32
    float* acc = vrow + p.head_dim_v;         // output accumulator

    for (int64_t job = ith; job < n_tok * p.n_head; job += nth) {
      const int64_t t = job / p.n_head;
      const int32_t h = int32_t(job % p.n_head);
      const int32_t hk = h / group;
      const float* qh = static_cast<const float*>(q.data) + t * q.ne[0] + int64_t(h) * p.head_dim_k;
      // q rounded to the cache's type, as the reference's K·Q product does for an F16 cache.
      kk->from_float(qh, q_conv, p.head_dim_k);

      const int32_t* cells = visible.data() + first[size_t(t)];
      const int32_t n_vis = int32_t(first[size_t(t) + 1] - first[size_t(t)]);
      float max_score = neg_inf;
      for (int32_t i = 0; i < n_vis; ++i) {
        const auto* kr = static_cast<const uint8_t*>(k_cache.data) +
                         int64_t(cells[i]) * k_row_bytes + hk * k_head_bytes;
        float sc = kk->vec_dot(p.head_dim_k, kr, q_conv) * p.scale;
        if (p.softcap > 0) sc = p.softcap * std::tanh(sc / p.softcap);
        scores[i] = sc;
        max_score = std::max(max_score, sc);
      }

      std::fill(acc, acc + p.head_dim_v, 0.0f);
      if (n_vis == 0) {  // no visible cell: cannot happen for a token stored before use
        std::copy(acc, acc + p.head_dim_v,
                  static_cast<float*>(out.data) + t * out.ne[0] + int64_t(h) * p.head_dim_v);
        continue;
      }
      double sum = 0;
      for (int32_t i = 0; i < n_vis; ++i) {
        const float e = scores[i] == neg_inf ? 0.0f : std::exp(scores[i] - max_score);
        scores[i] = e;
        sum += e;
      }
      const float inv = float(1.0 / sum);
      for (int32_t i = 0; i < n_vis; ++i) {
        if (scores[i] == 0.0f) continue;
        // The weight is rounded to the cache's type before the V product, as the reference does.
        float wgt = scores[i] * inv;
        if (v_cache.type == tensor_type::f16) wgt = fp16_to_fp32(fp32_to_fp16(wgt));
        const auto* vr = static_cast<const uint8_t*>(v_cache.data) +
                         int64_t(cells[i]) * v_row_bytes + hk * v_head_bytes;
        vk->to_float(vr, vrow, p.head_dim_v);
        for (int32_t j = 0; j < p.head_dim_v; ++j) acc[j] += wgt * vrow[j];
      }
      std::copy(acc, acc + p.head_dim_v,
                static_cast<float*>(out.data) + t * out.ne[0] + int64_t(h) * p.head_dim_v);
    }
  });
}

}  // namespace hearth::cpu
