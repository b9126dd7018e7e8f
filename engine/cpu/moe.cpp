// Mixture-of-experts ops: the router, the expert product grouped by expert, and the weighted sum
// of the chosen experts' outputs (engine/backend.h states each contract).
//
// The expert product sorts the (token, slot) rows by expert, converts each activation row once,
// gathers each expert's rows together, and then runs one parallel pass over (expert, tile of
// weight rows) items: an expert's weights stream from memory once for all its tokens, experts no
// token chose are never touched (decoding reads k of n_expert matrices: speed follows active,
// not total, parameters), and there is one thread-pool dispatch per product, not one per expert.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "engine/cpu/backend-cpu.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/vec-dot.h"

namespace hearth::cpu {

void op_moe_route(scratch& s, const tensor& logits, bool normalize, const tensor& ids,
                  const tensor& weights) {
  const int64_t n_expert = logits.ne[0], n_tok = logits.ne[1], k = ids.ne[0];
  assert(ids.ne[1] == n_tok && weights.ne[0] == k && weights.ne[1] == n_tok && k <= n_expert);
  const auto* lg = static_cast<const float*>(logits.data);
  auto* id = static_cast<int32_t*>(ids.data);
  auto* wt = static_cast<float*>(weights.data);
  // One thread: a step routes at most n_batch × n_expert values (65k for 512 tokens and 128
  // experts), far below what waking the pool costs back.
  s.route_probs.resize(size_t(n_expert));
  s.route_order.resize(size_t(n_expert));
  float* p = s.route_probs.data();
  int32_t* order = s.route_order.data();
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* l = lg + t * n_expert;
    // Softmax as the reference's soft_max: max subtracted, the sum in double, then one multiply
    // by its inverse.
    float mx = -INFINITY;
    for (int64_t e = 0; e < n_expert; ++e) mx = std::max(mx, l[e]);
    double sum = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
      p[e] = std::exp(l[e] - mx);
      sum += p[e];
    }
    const float inv = float(1.0 / sum);
    for (int64_t e = 0; e < n_expert; ++e) p[e] *= inv;
    for (int64_t e = 0; e < n_expert; ++e) order[e] = int32_t(e);
    std::partial_sort(order, order + k, order + n_expert,
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float chosen = 0;
    for (int64_t j = 0; j < k; ++j) {
      id[t * k + j] = order[j];
      wt[t * k + j] = p[order[j]];
      chosen += wt[t * k + j];
    }
    if (normalize) {
      // The reference clamps the sum away from 0 (all k probabilities underflowing).
      chosen = std::max(chosen, 6.103515625e-5f);
      for (int64_t j = 0; j < k; ++j) wt[t * k + j] /= chosen;
    }
  }
}

void op_mul_mat_id(thread_pool& pool, scratch& s, packed_weights& packed, const tensor& w,
                   const tensor& x, const tensor& ids, const tensor& out) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_expert = w.ne[2];
  const int64_t k = ids.ne[0], n_tok = ids.ne[1], n_rows = n_tok * k;
  const bool shared_x = x.ne[1] == n_tok;  // one row per token, read by each of its k slots
  assert(x.ne[0] == n_in && (shared_x || x.ne[1] == n_rows));
  assert(out.ne[0] == n_out && out.ne[1] == n_rows);
  const auto* id = static_cast<const int32_t*>(ids.data);

  // Rows grouped by expert (a counting sort, stable: tokens keep their order within an
  // expert): group_rows[start[e] .. start[e+1]) are the output rows expert e computes.
  std::vector<int32_t>& rows = s.group_rows;
  rows.resize(size_t(n_rows + n_expert + 1));
  int32_t* start = rows.data() + n_rows;
  std::fill(start, start + n_expert + 1, 0);
  for (int64_t r = 0; r < n_rows; ++r) {
    assert(id[r] >= 0 && id[r] < n_expert);
    ++start[id[r] + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) start[e + 1] += start[e];
  std::vector<int32_t>& fill = s.group_fill;
  fill.assign(start, start + n_expert);
  for (int64_t r = 0; r < n_rows; ++r) rows[size_t(fill[size_t(id[r])]++)] = int32_t(r);
  auto src_row = [&](int64_t r) { return shared_x ? r / k : r; };

  // As op_mul_mat (tiled_for in mul-mat.cpp): a packed layout's tiles, else the stored layout's,
  // for any count, so a row's outputs are those of mul_mat with its expert's matrix.
  const packed_view pk = packed.get(pool, w);
  const gemm_kernel* g = pk.format ? &pk.format->kernel : gemm_kernel_for(w.type);
  const type_kernels* kern = kernels_for(w.type);
  const int64_t x_row_bytes =
      g ? g->x_row_bytes(n_in) : tensor_type_row_bytes(kern->vec_dot_type, n_in);
  const from_float_fn convert = g ? g->x_from_float : kernels_for(kern->vec_dot_type)->from_float;

  // Activation rows converted once each (x's rows), then gathered in expert order.
  const int64_t n_x = x.ne[1];
  if (s.converted.size() < size_t(x_row_bytes * n_x)) s.converted.resize(size_t(x_row_bytes * n_x));
  if (s.grouped_x.size() < size_t(x_row_bytes * n_rows)) {
    s.grouped_x.resize(size_t(x_row_bytes * n_rows));
  }
  const auto* xf = static_cast<const float*>(x.data);
  pool.parallel_for(
      n_x,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          if (convert) {
            convert(xf + i * n_in, s.converted.data() + i * x_row_bytes, n_in);
          } else {  // F32 dot products read F32 rows as they are
            std::memcpy(s.converted.data() + i * x_row_bytes, xf + i * n_in, size_t(n_in) * 4);
          }
        }
      },
      n_in * 4);
  for (int64_t i = 0; i < n_rows; ++i) {
    std::memcpy(s.grouped_x.data() + i * x_row_bytes,
                s.converted.data() + src_row(rows[size_t(i)]) * x_row_bytes, size_t(x_row_bytes));
  }

  // Work items: (expert, band of weight rows), only for experts with rows.
  const int64_t band = g ? g->max_rows : 16;
  const int64_t bands = (n_out + band - 1) / band;
  std::vector<int32_t>& active = s.group_active;
  active.clear();
  for (int64_t e = 0; e < n_expert; ++e)
    if (start[e + 1] > start[e]) active.push_back(int32_t(e));
  const int64_t n_items = int64_t(active.size()) * bands;

  const int64_t w_row_bytes = w.row_bytes();
  const int64_t w_expert_bytes = w_row_bytes * n_out;
  const auto* wbase = static_cast<const uint8_t*>(w.data);
  if (g && s.grouped_y.size() < size_t(n_rows * n_out)) s.grouped_y.resize(size_t(n_rows * n_out));
  float* y = static_cast<float*>(out.data);
  float* gy = s.grouped_y.data();
  const uint8_t* gx = s.grouped_x.data();

  pool.parallel_for_dynamic(
      n_items, pool.tail_chunk(n_items),
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int32_t e = active[size_t(item / bands)];
          const int64_t r0 = (item % bands) * band, r1 = std::min(n_out, r0 + band);
          const uint8_t* we = wbase + e * w_expert_bytes;
          const int64_t first = start[e], count = start[e + 1] - start[e];
          if (g) {
            // Packed: the band is one group of expert e's matrix; stored: rows w_row_bytes apart.
            const uint8_t* wt = pk.format
                                    ? pk.data + e * pk.matrix_bytes + r0 / band * pk.group_bytes
                                    : we + r0 * w_row_bytes;
            for (int64_t c0 = 0; c0 < count; c0 += g->max_cols) {
              const int nc = int(std::min<int64_t>(g->max_cols, count - c0));
              g->tile(n_in, wt, w_row_bytes, gx + (first + c0) * x_row_bytes, x_row_bytes,
                      gy + (first + c0) * n_out + r0, n_out, int(r1 - r0), nc);
            }
          } else {
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t c = 0; c < count; ++c) {
                y[int64_t(rows[size_t(first + c)]) * n_out + r] =
                    kern->vec_dot(n_in, we + r * w_row_bytes, gx + (first + c) * x_row_bytes);
              }
            }
          }
        }
      },
      band * n_in * std::max<int64_t>(1, n_rows / std::max<int64_t>(1, int64_t(active.size()))));

  if (g) {  // tiles wrote the grouped order: each row to its place
    pool.parallel_for(
        n_rows,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            std::memcpy(y + int64_t(rows[size_t(i)]) * n_out, gy + i * n_out, size_t(n_out) * 4);
          }
        },
        n_out);
  }
}

void op_moe_combine(thread_pool& pool, const tensor& x, const tensor& weights, const tensor& out) {
  const int64_t cols = x.ne[0], k = weights.ne[0], n_tok = weights.ne[1];
  assert(x.ne[1] == n_tok * k && out.ne[0] == cols && out.ne[1] == n_tok);
  const auto* xs = static_cast<const float*>(x.data);
  const auto* wt = static_cast<const float*>(weights.data);
  auto* o = static_cast<float*>(out.data);
  pool.parallel_for(
      n_tok,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          float* ot = o + t * cols;
          const float* xt = xs + t * k * cols;
          // As the reference: each expert's output scaled by its weight, then added in order.
          for (int64_t c = 0; c < cols; ++c) ot[c] = xt[c] * wt[t * k];
          for (int64_t j = 1; j < k; ++j) {
            const float wj = wt[t * k + j];
            const float* xj = xt + j * cols;
            for (int64_t c = 0; c < cols; ++c) ot[c] += xj[c] * wj;
          }
        }
      },
      cols * k);
}

}  // namespace hearth::cpu
