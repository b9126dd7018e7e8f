// The CUDA kernels' shared math (attention-math.cuh) on the host, against the CPU backend: the
// mask, score and softmax pieces put together the way the decode and prompt kernels put
// them together (splits, warps, tiles), the split ranges, the rope angles and the reference GELU.
// Runs on any machine: nothing here needs a GPU.
#include "backends/cuda/attention-math.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/io/cpu-features.h"
#include "engine/io/tensor-type.h"

namespace hearth::cuda {
namespace {

constexpr float k_neg_inf = -std::numeric_limits<float>::infinity();

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

double nmse(const std::vector<float>& ref, const std::vector<float>& got) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return norm > 0 ? err / norm : err;
}

// A CPU-backend tensor holding `bytes` copied from src.
tensor cpu_tensor(backend& be, tensor_type type, int64_t ne0, int64_t ne1, const void* src) {
  tensor t = be.alloc(type, ne0, ne1, "t");
  be.upload(t, src, size_t(t.n_bytes()));
  return t;
}

// --- attention ----------------------------------------------------------------------------

// One attention problem; caches as F32 values already representable in the cache type.
struct attention_case {
  attention_params p;
  bool f16 = false;
  int32_t n_cells = 0;    // scanned
  int32_t max_cells = 0;  // the cache's size (sets the split count)
  int64_t n_tok = 0;
  std::vector<float> q, k, v;  // [n_tok, n_head*dk], [max_cells, n_head_kv*dk], [.., *dv]
  std::vector<int32_t> tok_seq, tok_pos, cell_seq, cell_pos;
};

attention_case make_case(std::mt19937& rng, attention_params p, bool f16, int32_t n_cells,
                         int32_t max_cells, int64_t n_tok) {
  attention_case c;
  c.p = p;
  c.f16 = f16;
  c.n_cells = n_cells;
  c.max_cells = max_cells;
  c.n_tok = n_tok;
  c.q = random_floats(rng, size_t(n_tok * p.n_head * p.head_dim_k), -2, 2);
  c.k = random_floats(rng, size_t(max_cells) * p.n_head_kv * p.head_dim_k, -2, 2);
  c.v = random_floats(rng, size_t(max_cells) * p.n_head_kv * p.head_dim_v, -1, 1);
  if (f16) {
    for (float& x : c.k) x = round_f16(x);
    for (float& x : c.v) x = round_f16(x);
  }
  for (int32_t i = 0; i < max_cells; ++i) {
    c.cell_seq.push_back(int32_t(rng() % 3) - 1);  // -1 empty, sequences 0 and 1
    c.cell_pos.push_back(int32_t(rng() % uint32_t(max_cells + 4)));
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    c.tok_seq.push_back(int32_t(rng() % 2));
    c.tok_pos.push_back(int32_t(rng() % uint32_t(max_cells + 8)));
  }
  // A token of a sequence no cell holds sees nothing: its output is zeros.
  if (n_tok > 2) c.tok_seq[1] = 7;
  return c;
}

std::vector<float> cpu_attention(const attention_case& c) {
  std::unique_ptr<backend> be = make_cpu_backend(1);
  const attention_params& p = c.p;
  const tensor_type kv_type = c.f16 ? tensor_type::f16 : tensor_type::f32;
  auto cache = [&](const std::vector<float>& x, int64_t cols) {
    if (!c.f16) return cpu_tensor(*be, kv_type, cols, c.max_cells, x.data());
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = fp32_to_fp16(x[i]);
    return cpu_tensor(*be, kv_type, cols, c.max_cells, h.data());
  };
  tensor q =
      cpu_tensor(*be, tensor_type::f32, int64_t(p.n_head) * p.head_dim_k, c.n_tok, c.q.data());
  tensor k = cache(c.k, int64_t(p.n_head_kv) * p.head_dim_k);
  tensor v = cache(c.v, int64_t(p.n_head_kv) * p.head_dim_v);
  tensor ts = cpu_tensor(*be, tensor_type::i32, c.n_tok, 1, c.tok_seq.data());
  tensor tp = cpu_tensor(*be, tensor_type::i32, c.n_tok, 1, c.tok_pos.data());
  tensor cs = cpu_tensor(*be, tensor_type::i32, c.max_cells, 1, c.cell_seq.data());
  tensor cp = cpu_tensor(*be, tensor_type::i32, c.max_cells, 1, c.cell_pos.data());
  tensor out = be->alloc(tensor_type::f32, int64_t(p.n_head) * p.head_dim_v, c.n_tok, "out");
  be->attention(q, k, v, ts, tp, cs, cp, c.n_cells, p, out);
  std::vector<float> result(size_t(out.n_elements()));
  be->download(out, result.data(), result.size() * sizeof(float));
  for (tensor* t : {&q, &k, &v, &ts, &tp, &cs, &cp, &out}) be->free(*t);
  return result;
}

// What one lane-independent piece of both kernels computes: the score of (token t, head h, cell).
float case_score(const attention_case& c, int64_t t, int32_t h, int32_t cell) {
  const attention_params& p = c.p;
  const int32_t hk = h / (p.n_head / p.n_head_kv);
  const float* q = c.q.data() + t * p.n_head * p.head_dim_k + int64_t(h) * p.head_dim_k;
  const float* k = c.k.data() + (int64_t(cell) * p.n_head_kv + hk) * p.head_dim_k;
  const float dot =
      attention_dot([&](int32_t d) { return k[d]; },
                    [&](int32_t d) { return c.f16 ? round_f16(q[d]) : q[d]; }, p.head_dim_k);
  return attention_score(dot, p.scale, p.softcap);
}

const float* case_v(const attention_case& c, int32_t h, int32_t cell) {
  const attention_params& p = c.p;
  const int32_t hk = h / (p.n_head / p.n_head_kv);
  return c.v.data() + (int64_t(cell) * p.n_head_kv + hk) * p.head_dim_v;
}

bool case_visible(const attention_case& c, int64_t t, int32_t cell) {
  return attention_visible(c.cell_seq[size_t(cell)], c.cell_pos[size_t(cell)], c.tok_seq[size_t(t)],
                           c.tok_pos[size_t(t)], c.p.window);
}

// The softmax's max and sum and each visible cell's weight, as both kernels compute them (their
// split of the work changes neither: a max is a max, the sum is in double).
struct case_softmax {
  float m = k_neg_inf;
  float inv = 0;
};

case_softmax softmax_of(const attention_case& c, int64_t t, int32_t h) {
  case_softmax sm;
  for (int32_t cell = 0; cell < c.n_cells; ++cell)
    if (case_visible(c, t, cell)) sm.m = std::max(sm.m, case_score(c, t, h, cell));
  double sum = 0;
  for (int32_t cell = 0; cell < c.n_cells; ++cell)
    if (case_visible(c, t, cell)) sum += attention_exp(case_score(c, t, h, cell) - sm.m);
  sm.inv = attention_inv_sum(sum);
  return sm;
}

// The decode kernels' output on the host: per split, 4 warps taking the cells of each 128-cell
// tile in turn, each Σ w·v over its cells; the warps' sums added; the splits' added (the combine
// kernel).
std::vector<float> simulate_decode(const attention_case& c) {
  constexpr int warps = 4, tile = 128;
  const attention_params& p = c.p;
  const int32_t dv = p.head_dim_v;
  const int32_t n_split = attention_split_count(c.max_cells);
  std::vector<float> out(size_t(c.n_tok * p.n_head * dv));
  for (int64_t t = 0; t < c.n_tok; ++t) {
    for (int32_t h = 0; h < p.n_head; ++h) {
      const case_softmax sm = softmax_of(c, t, h);
      std::vector<float> od(size_t(dv), 0.0f);
      for (int32_t s = 0; s < n_split; ++s) {
        const cell_range r = attention_split_range(c.n_cells, n_split, s);
        std::vector<float> o(size_t(warps * dv), 0.0f);
        for (int32_t c0 = r.begin; c0 < r.end; c0 += tile) {
          for (int32_t j = 0; j < std::min(tile, r.end - c0); ++j) {
            const int32_t cell = c0 + j, w = j % warps;
            if (!case_visible(c, t, cell)) continue;
            const float wt =
                attention_weight(attention_exp(case_score(c, t, h, cell) - sm.m), sm.inv, c.f16);
            for (int32_t d = 0; d < dv; ++d)
              o[size_t(w * dv + d)] = std::fma(wt, case_v(c, h, cell)[d], o[size_t(w * dv + d)]);
          }
        }
        for (int32_t d = 0; d < dv; ++d) {
          float sd = 0;
          for (int w = 0; w < warps; ++w) sd += o[size_t(w * dv + d)];
          od[size_t(d)] += sd;
        }
      }
      for (int32_t d = 0; d < dv; ++d) out[size_t((t * p.n_head + h) * dv + d)] = od[size_t(d)];
    }
  }
  return out;
}

// The prompt kernel's output on the host: Σ w·v over the cells in order, unseen cells (weight
// 0) left out.
std::vector<float> simulate_prompt(const attention_case& c) {
  const attention_params& p = c.p;
  const int32_t dv = p.head_dim_v;
  std::vector<float> out(size_t(c.n_tok * p.n_head * dv));
  for (int64_t t = 0; t < c.n_tok; ++t) {
    for (int32_t h = 0; h < p.n_head; ++h) {
      const case_softmax sm = softmax_of(c, t, h);
      std::vector<float> acc(size_t(dv), 0.0f);
      for (int32_t cell = 0; cell < c.n_cells; ++cell) {
        if (!case_visible(c, t, cell)) continue;
        const float w =
            attention_weight(attention_exp(case_score(c, t, h, cell) - sm.m), sm.inv, c.f16);
        if (w == 0.0f) continue;
        for (int32_t d = 0; d < dv; ++d)
          acc[size_t(d)] = std::fma(w, case_v(c, h, cell)[d], acc[size_t(d)]);
      }
      for (int32_t d = 0; d < dv; ++d) out[size_t((t * p.n_head + h) * dv + d)] = acc[size_t(d)];
    }
  }
  return out;
}

TEST(CudaAttentionMath, KernelAlgorithmsMatchCpuBackend) {
  std::mt19937 rng(7);
  int checked = 0;
  double worst[2] = {0, 0};  // F32, F16 caches
  for (bool f16 : {false, true}) {
    for (auto [n_head, n_head_kv] : {std::pair{4, 4}, std::pair{4, 1}}) {
      for (auto [dk, dv] : {std::pair{64, 64}, std::pair{80, 48}}) {
        for (int32_t window : {0, 5}) {
          for (float softcap : {0.0f, 2.0f}) {
            // One split (max 200 cells), several (max 1000, 700 scanned), and a cache mostly
            // empty (max 3000, 40 scanned: most splits see nothing).
            for (auto [n_cells, max_cells] :
                 {std::pair{150, 200}, std::pair{700, 1000}, std::pair{40, 3000}}) {
              attention_params p;
              p.n_head = n_head;
              p.n_head_kv = n_head_kv;
              p.head_dim_k = dk;
              p.head_dim_v = dv;
              p.scale = 1.0f / std::sqrt(float(dk));
              p.softcap = softcap;
              p.window = window;
              const attention_case c = make_case(rng, p, f16, n_cells, max_cells, 5);
              const std::vector<float> ref = cpu_attention(c);
              const std::vector<float> decode = simulate_decode(c), prompt = simulate_prompt(c);
              // The kernels follow the CPU's AVX-512 path operation for operation (attention-
              // math.cuh), so there only the order of Σ w·v's terms differs (measured: 7e-14).
              // Other paths use other exps and sums, and a weight can round to F16 the other way.
              const double bound = std::string_view(cpu_kernel_path()) == "avx512-vnni" ? 1e-12
                                   : f16                                                ? 1e-8
                                                                                        : 1e-9;
              worst[f16] = std::max({worst[f16], nmse(ref, decode), nmse(ref, prompt)});
              EXPECT_LE(nmse(ref, decode), bound)
                  << "decode f16=" << f16 << " heads " << n_head << "/" << n_head_kv << " dims "
                  << dk << "/" << dv << " window " << window << " cap " << softcap << " cells "
                  << n_cells << "/" << max_cells;
              EXPECT_LE(nmse(ref, prompt), bound)
                  << "prompt f16=" << f16 << " heads " << n_head << "/" << n_head_kv << " dims "
                  << dk << "/" << dv << " window " << window << " cap " << softcap << " cells "
                  << n_cells << "/" << max_cells;
              // The token of a sequence no cell holds: zeros on both.
              for (int32_t i = 0; i < n_head * dv; ++i) {
                ASSERT_EQ(ref[size_t(n_head * dv + i)], 0.0f);
                ASSERT_EQ(decode[size_t(n_head * dv + i)], 0.0f);
                ASSERT_EQ(prompt[size_t(n_head * dv + i)], 0.0f);
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 96);
  std::printf("worst NMSE against the CPU backend: F32 cache %.2e, F16 cache %.2e\n", worst[0],
              worst[1]);
}

TEST(CudaAttentionMath, MaskIsTheCpuRule) {
  // engine/backend.h: same sequence, cell_pos <= tok_pos, and with a window cell_pos > tok_pos -
  // window.
  for (int32_t window : {0, 1, 3}) {
    for (int32_t cs : {-1, 0, 1}) {
      for (int32_t cp = 0; cp < 12; ++cp) {
        for (int32_t tp = 0; tp < 12; ++tp) {
          const bool want = cs == 0 && cp <= tp && (window <= 0 || cp > tp - window);
          EXPECT_EQ(attention_visible(cs, cp, 0, tp, window), want)
              << cs << " " << cp << " " << tp << " " << window;
        }
      }
    }
  }
}

TEST(CudaAttentionMath, SplitsCoverTheCellsOnce) {
  for (int32_t max_cells : {0, 1, 255, 256, 257, 1000, 4096, 8191, 8192, 8193, 100000}) {
    const int32_t n_split = attention_split_count(max_cells);
    const int32_t want = std::clamp((max_cells + 255) / 256, 1, 32);
    ASSERT_EQ(n_split, want) << max_cells;
    for (int32_t n_cells : {0, 1, 2, 31, 32, 33, max_cells / 3, max_cells - 1, max_cells}) {
      if (n_cells < 0 || n_cells > max_cells) continue;
      int32_t next = 0;
      for (int32_t s = 0; s < n_split; ++s) {
        const cell_range r = attention_split_range(n_cells, n_split, s);
        ASSERT_EQ(r.begin, next) << max_cells << " " << n_cells << " " << s;
        ASSERT_LE(r.begin, r.end);
        next = r.end;
      }
      ASSERT_EQ(next, n_cells) << max_cells << " " << n_cells;
    }
  }
}

TEST(CudaAttentionMath, RopeAnglesMatchCpuBackend) {
  std::mt19937 rng(11);
  std::unique_ptr<backend> be = make_cpu_backend(1);
  for (bool neox : {false, true}) {
    for (bool with_ff : {false, true}) {
      for (int32_t n_dims : {64, 128}) {
        const int32_t head_dim = 128, n_head = 2, n_tok = 6, half = n_dims / 2;
        const int64_t row = int64_t(n_head) * head_dim;
        rope_params p;
        p.n_dims = n_dims;
        p.freq_base = with_ff ? 500000.0f : 10000.0f;
        p.freq_scale = with_ff ? 1.0f : 0.25f;
        p.neox = neox;
        std::vector<float> x = random_floats(rng, size_t(row * n_tok), -1, 1);
        std::vector<float> ff = random_floats(rng, size_t(half), 1, 8);
        std::vector<int32_t> pos;
        for (int t = 0; t < n_tok; ++t) pos.push_back(int32_t(rng() % 40000));
        tensor xt = cpu_tensor(*be, tensor_type::f32, row, n_tok, x.data());
        tensor pt = cpu_tensor(*be, tensor_type::i32, n_tok, 1, pos.data());
        tensor ft = cpu_tensor(*be, tensor_type::f32, half, 1, ff.data());
        be->rope(xt, n_head, head_dim, pt, p, with_ff ? &ft : nullptr);
        std::vector<float> ref(x.size());
        be->download(xt, ref.data(), ref.size() * sizeof(float));
        for (tensor* t : {&xt, &pt, &ft}) be->free(*t);

        // The kernel's per-pair computation (rope.cu).
        const float theta_scale = rope_theta_scale(p.freq_base, n_dims);
        for (int t = 0; t < n_tok; ++t) {
          for (int32_t i = 0; i < half; ++i) {
            const float th = rope_angle(pos[size_t(t)], theta_scale, i, p.freq_scale,
                                        with_ff ? ff.data() : nullptr);
            const float sn = std::sin(th), cs = std::cos(th);
            const int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            for (int32_t h = 0; h < n_head; ++h) {
              float* v = x.data() + t * row + h * head_dim;
              const float x0 = v[a], x1 = v[b];
              v[a] = x0 * cs - x1 * sn;
              v[b] = x0 * sn + x1 * cs;
            }
          }
        }
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_NEAR(x[i], ref[i], 1e-6)
              << "neox " << neox << " ff " << with_ff << " dims " << n_dims << " at " << i;
        }
      }
    }
  }
}

TEST(CudaAttentionMath, GeluAndSiluMatchCpuBackend) {
  std::mt19937 rng(5);
  std::vector<float> x = random_floats(rng, 20000, -12, 12);
  for (float e : {-10.0f, 10.0f, -9.99f, 9.99f, 0.0f, -0.0f, 1e-8f, -3.0f}) x.push_back(e);
  const std::vector<float> ones(x.size(), 1.0f);
  const int64_t n = int64_t(x.size());
  std::unique_ptr<backend> be = make_cpu_backend(1);
  tensor xt = cpu_tensor(*be, tensor_type::f32, n, 1, x.data());
  tensor ut = cpu_tensor(*be, tensor_type::f32, n, 1, ones.data());
  tensor ot = be->alloc(tensor_type::f32, n, 1, "out");
  std::vector<float> gelu(x.size()), silu(x.size());
  be->geglu(xt, ut, ot);
  be->download(ot, gelu.data(), gelu.size() * sizeof(float));
  be->swiglu(xt, ut, ot);
  be->download(ot, silu.data(), silu.size() * sizeof(float));
  for (tensor* t : {&xt, &ut, &ot}) be->free(*t);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(gelu_reference(x[i]), gelu[i]) << x[i];
    ASSERT_EQ(silu_mul(x[i], 1.0f), silu[i]) << x[i];
  }
}

}  // namespace
}  // namespace hearth::cuda
