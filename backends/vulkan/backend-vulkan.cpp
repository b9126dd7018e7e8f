// The Vulkan backend: memory through vk::device, one dispatch switch to the ops (ops.h).
#include "backends/vulkan/backend-vulkan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "backends/vulkan/device.h"
#include "backends/vulkan/ops.h"
#include "engine/io/gguf.h"

namespace hearth {
namespace {

class vulkan_backend final : public backend {
 public:
  explicit vulkan_backend(int index) : dev_(index) {}

  ~vulkan_backend() override {
    moe_groups_.release(dev_);
    rounded_x_.release(dev_);
    for (vk::buffer* b : weights_) dev_.free(b);
  }

  std::string name() const override { return "vulkan"; }
  // The matrix products decide it; every other op treats each token alike at every count.
  bool batch_invariant() const override { return dev_.lane_layouts(); }

  bool supports_weight_type(tensor_type t) const override {
    return vk::weight_variant(t) != nullptr;
  }

  // A matrix larger than one buffer (vk::device::weight_part_bytes: 128 MiB on lavapipe and on
  // some ARM GPUs, less than Llama 3.2 1B's embedding table) is held in row parts, which the
  // products and row lookups take a dispatch each (vk::for_each_row_part).
  tensor weight(const gguf_tensor& g) override {
    tensor t;
    t.type = g.type;
    for (int d = 0; d < 4; ++d) t.ne[d] = g.ne[d];
    t.name = g.name.c_str();
    const VkDeviceSize cap = dev_.weight_part_bytes() / 16 * 16;  // alloc rounds up to 16
    if (g.n_bytes <= cap) {
      t.data = upload_part(g.name, g.data, g.n_bytes, 0, g.ne[1]);  // stacked experts too
      return t;
    }
    const uint64_t row_bytes = uint64_t(t.row_bytes());
    const int64_t rows_per_part = int64_t(cap / row_bytes);
    if (g.ne[2] != 1 || g.ne[3] != 1 || rows_per_part == 0) {
      throw std::runtime_error("vulkan: " + g.name + " needs " + std::to_string(g.n_bytes) +
                               " bytes, more than the " + std::to_string(cap) +
                               " one buffer may hold on " + dev_.name() +
                               (rows_per_part == 0 ? ", and one of its rows is larger"
                                                   : ", and only a matrix is held in row parts"));
    }
    vk::buffer* last = nullptr;
    for (int64_t r = 0; r < g.ne[1]; r += rows_per_part) {
      const int64_t n = std::min(rows_per_part, g.ne[1] - r);
      vk::buffer* b =
          upload_part(g.name + " rows [" + std::to_string(r) + ", " + std::to_string(r + n) + ")",
                      g.data + uint64_t(r) * row_bytes, uint64_t(n) * row_bytes, r, n);
      if (last)
        last->next_part = b;
      else
        t.data = b;
      last = b;
    }
    return t;
  }

  // A buffer holding a weight's rows [first_row, first_row + n_rows), `bytes` from `data`.
  vk::buffer* upload_part(const std::string& what, const uint8_t* data, uint64_t bytes,
                          int64_t first_row, int64_t n_rows) {
    vk::buffer* b = dev_.alloc(bytes, what.c_str());
    weights_.push_back(b);
    b->first_row = first_row;
    b->n_rows = n_rows;
    dev_.upload(b, data, bytes);
    return b;
  }

  tensor alloc(tensor_type type, int64_t ne0, int64_t ne1, const char* name) override {
    tensor t;
    t.type = type;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.name = name;
    t.data = dev_.alloc(VkDeviceSize(t.n_bytes()), name);
    return t;
  }

  uint64_t max_alloc_bytes() const override { return dev_.max_buffer_bytes(); }

  void free(tensor& t) override {
    dev_.free(static_cast<vk::buffer*>(t.data));
    t.data = nullptr;
  }

  void upload(const tensor& dst, const void* src, size_t bytes) override {
    dev_.upload(static_cast<vk::buffer*>(dst.data), src, bytes);
  }
  void download(const tensor& src, void* dst, size_t bytes) override {
    dev_.download(static_cast<vk::buffer*>(src.data), dst, bytes);
  }
  void synchronize() override { dev_.submit_and_wait(); }

  void get_rows(const tensor& table, const tensor& ids, const tensor& out) override {
    vk::op_get_rows(dev_, table, ids, out);
  }
  void mul_mat(const tensor& w, const tensor& x, const tensor* bias, const tensor& out) override {
    vk::op_mul_mat(dev_, rounded_x_, w, x, bias, out);
  }
  void rms_norm(const tensor& x, const tensor& weight, float eps, const tensor& out) override {
    vk::op_rms_norm(dev_, x, weight, eps, out);
  }
  void rope(const tensor& x, int32_t n_head, int32_t head_dim, const tensor& pos,
            const rope_params& p, const tensor* freq_factors) override {
    vk::op_rope(dev_, x, n_head, head_dim, pos, p, freq_factors);
  }
  void kv_store(const tensor& src, const tensor& cells, const tensor& cache) override {
    vk::op_kv_store(dev_, src, cells, cache);
  }
  void attention(const tensor& q, const tensor& k_cache, const tensor& v_cache,
                 const tensor& tok_seq, const tensor& tok_pos, const tensor& cell_seq,
                 const tensor& cell_pos, int32_t n_cells, const attention_params& p,
                 const tensor& out) override {
    vk::op_attention(dev_, q, k_cache, v_cache, tok_seq, tok_pos, cell_seq, cell_pos, n_cells, p,
                     out);
  }
  void swiglu(const tensor& gate, const tensor& up, const tensor& out) override {
    vk::op_elementwise(dev_, "swiglu", gate, &up, 0, 0, out);
  }
  void geglu(const tensor& gate, const tensor& up, const tensor& out) override {
    vk::op_elementwise(dev_, "geglu", gate, &up, 0, 0, out);
  }
  void add(const tensor& a, const tensor& b, const tensor& out) override {
    vk::op_elementwise(dev_, "add", a, &b, 0, 0, out);
  }
  void scale(const tensor& x, float s, const tensor& out) override {
    vk::op_elementwise(dev_, "scale", x, nullptr, s, 0, out);
  }
  void softcap(const tensor& x, float cap, const tensor& out) override {
    // As the CPU: a multiply by 1/cap, tanh, a multiply by cap.
    vk::op_elementwise(dev_, "softcap", x, nullptr, cap, 1.0f / cap, out);
  }
  void moe_route(const tensor& logits, bool normalize, const tensor& ids,
                 const tensor& weights) override {
    vk::op_moe_route(dev_, logits, normalize, ids, weights);
  }
  void mul_mat_id(const tensor& w, const tensor& x, const tensor& ids, const tensor& out) override {
    vk::op_mul_mat_id(dev_, rounded_x_, moe_groups_, w, x, ids, out);
  }
  void moe_combine(const tensor& x, const tensor& weights, const tensor& out) override {
    vk::op_moe_combine(dev_, x, weights, out);
  }

 private:
  vk::device dev_;
  std::vector<vk::buffer*> weights_;
  vk::scratch rounded_x_;   // matrix products' activations as the reference rounds them
  vk::scratch moe_groups_;  // mul_mat_id's rows grouped by expert
};

}  // namespace

std::unique_ptr<backend> make_vulkan_backend(const vulkan_options& o) {
  return std::make_unique<vulkan_backend>(o.device);
}

}  // namespace hearth
