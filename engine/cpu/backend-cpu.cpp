#include "engine/cpu/backend-cpu.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "engine/cpu/vec-dot.h"
#include "engine/io/gguf.h"

namespace hearth {
namespace {

class cpu_backend final : public backend {
 public:
  explicit cpu_backend(int n_threads)
      : pool_(n_threads <= 0 ? thread_pool::hardware_threads() : n_threads) {
    scratch_.per_thread.resize(size_t(pool_.n_threads()));
  }

  std::string name() const override { return "cpu"; }
  // Every weight type with a tile kernel takes it at every token count (cpu/mul-mat.cpp tiled_for).
  bool batch_invariant() const override { return true; }

  bool supports_weight_type(tensor_type t) const override { return cpu::kernels_for(t) != nullptr; }

  tensor weight(const gguf_tensor& g) override {
    tensor t;
    t.type = g.type;
    for (int d = 0; d < 4; ++d) t.ne[d] = g.ne[d];
    // The mapping is read-only; ops never write to weights.
    t.data = const_cast<uint8_t*>(g.data);
    t.name = g.name.c_str();
    return t;
  }

  tensor alloc(tensor_type type, int64_t ne0, int64_t ne1, const char* name) override {
    tensor t;
    t.type = type;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.name = name;
    const size_t bytes = (size_t(t.n_bytes()) + 63) / 64 * 64;
    t.data = std::aligned_alloc(64, bytes);
    if (!t.data) throw std::bad_alloc();
    return t;
  }

  void free(tensor& t) override {
    packed_.forget(t.data);
    std::free(t.data);
    t.data = nullptr;
  }

  void upload(const tensor& dst, const void* src, size_t bytes) override {
    packed_.forget(dst.data);  // new weights, if these were: repacked at their next product
    std::memcpy(dst.data, src, bytes);
  }
  void download(const tensor& src, void* dst, size_t bytes) override {
    std::memcpy(dst, src.data, bytes);
  }

  void get_rows(const tensor& table, const tensor& ids, const tensor& out) override {
    cpu::op_get_rows(pool_, table, ids, out);
  }
  void mul_mat(const tensor& w, const tensor& x, const tensor* bias, const tensor& out) override {
    cpu::op_mul_mat(pool_, scratch_, packed_, w, x, bias, out);
  }
  void mul_mats(const tensor& x, std::span<const product> products) override {
    cpu::op_mul_mats(pool_, scratch_, packed_, x, products);
  }
  void rms_norm(const tensor& x, const tensor& weight, float eps, const tensor& out) override {
    cpu::op_rms_norm(pool_, x, weight, eps, out);
  }
  void rope(const tensor& x, int32_t n_head, int32_t head_dim, const tensor& pos,
            const rope_params& p, const tensor* freq_factors) override {
    cpu::op_rope(pool_, x, n_head, head_dim, pos, p, freq_factors);
  }
  void kv_store(const tensor& src, const tensor& cells, const tensor& cache) override {
    cpu::op_kv_store(pool_, src, cells, cache);
  }
  void attention(const tensor& q, const tensor& k_cache, const tensor& v_cache,
                 const tensor& tok_seq, const tensor& tok_pos, const tensor& cell_seq,
                 const tensor& cell_pos, int32_t n_cells, const attention_params& p,
                 const tensor& out) override {
    cpu::op_attention(pool_, scratch_, q, k_cache, v_cache, tok_seq, tok_pos, cell_seq, cell_pos,
                      n_cells, p, out);
  }
  void swiglu(const tensor& gate, const tensor& up, const tensor& out) override {
    cpu::op_swiglu(pool_, gate, up, out);
  }
  void geglu(const tensor& gate, const tensor& up, const tensor& out) override {
    cpu::op_geglu(pool_, gate, up, out);
  }
  void add(const tensor& a, const tensor& b, const tensor& out) override {
    cpu::op_add(pool_, a, b, out);
  }
  void scale(const tensor& x, float s, const tensor& out) override {
    cpu::op_scale(pool_, x, s, out);
  }
  void softcap(const tensor& x, float cap, const tensor& out) override {
    cpu::op_softcap(pool_, x, cap, out);
  }
  void moe_route(const tensor& logits, bool normalize, const tensor& ids,
                 const tensor& weights) override {
    cpu::op_moe_route(scratch_, logits, normalize, ids, weights);
  }
  void mul_mat_id(const tensor& w, const tensor& x, const tensor& ids, const tensor& out) override {
    cpu::op_mul_mat_id(pool_, scratch_, packed_, w, x, ids, out);
  }
  void moe_combine(const tensor& x, const tensor& weights, const tensor& out) override {
    cpu::op_moe_combine(pool_, x, weights, out);
  }

 private:
  thread_pool pool_;
  cpu::scratch scratch_;
  cpu::packed_weights packed_;  // after pool_: destroyed first
};

}  // namespace

std::unique_ptr<backend> make_cpu_backend(int n_threads) {
  return std::make_unique<cpu_backend>(n_threads);
}

}  // namespace hearth
