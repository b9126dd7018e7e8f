// The CUDA backend: device memory, the step recorder (ops are recorded, then launched eagerly or
// from a cached CUDA graph when results are needed) and the launch of each op (kernels.h, cuBLAS
// for the prompt path's products).
#include "backends/cuda/backend-cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "backends/cuda/attention-math.cuh"
#include "backends/cuda/check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/graph-cache.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/op-record.h"
#include "backends/cuda/round-math.cuh"
#include "engine/io/gguf.h"

#ifndef HEARTH_CUDA_ARCHITECTURES_BUILT
#define HEARTH_CUDA_ARCHITECTURES_BUILT "?"
#endif

namespace hearth {
namespace {

using cuda::op_kind;
using cuda::op_record;

#define HEARTH_CUBLAS_CHECK(call)                                                          \
  do {                                                                                     \
    const cublasStatus_t hearth_cublas_status_ = (call);                                   \
    if (hearth_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                    \
      throw cuda::cuda_error(std::string("cuda: cuBLAS ") +                                \
                             cublasGetStatusString(hearth_cublas_status_) + " in " #call); \
  } while (0)

constexpr size_t k_staging_bytes = size_t(8) << 20;          // pinned host memory for small uploads
constexpr size_t k_weight_scratch_bytes = size_t(64) << 20;  // dequantized F32 rows per GEMM chunk
constexpr size_t k_cublas_workspace_bytes = size_t(32) << 20;
constexpr int32_t k_param_slots = 1024;  // dynamic parameters (attention cell counts) per step

void require(bool ok, const char* op, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("cuda ") + op + ": " + what);
}

// A device buffer that only grows; growing invalidates graphs that captured its address.
struct scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
};

class cuda_backend final : public backend {
 public:
  cuda_backend(int device, bool graphs) : device_(device) {
    HEARTH_CUDA_CHECK(cudaSetDevice(device_));
    HEARTH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    HEARTH_CUDA_CHECK(cudaMallocHost(&staging_, k_staging_bytes));
    params_dev_ = static_cast<int32_t*>(
        cuda::device_alloc(k_param_slots * sizeof(int32_t), "the step parameter slots"));
    params_host_.resize(k_param_slots);
    if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS) {
      release();
      throw cuda::cuda_error("cuda: cuBLAS did not start (cublasCreate failed)");
    }
    HEARTH_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // An explicit workspace: cuBLAS then allocates nothing while a step is being captured.
    cublas_workspace_ = cuda::device_alloc(k_cublas_workspace_bytes, "the cuBLAS workspace");
    HEARTH_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, k_cublas_workspace_bytes));
    const char* env = std::getenv("HEARTH_CUDA_NO_GRAPHS");
    graphs_ = graphs && !(env && *env && std::strcmp(env, "0") != 0);
    records_.reserve(4096);
    key_.reserve(1 << 16);
    last_key_.reserve(1 << 16);
    probe();
  }

  ~cuda_backend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    graphs_cache_.clear();
    for (void* p : weights_) cuda::device_free(p);
    release();
  }

  std::string name() const override { return "cuda"; }

  bool supports_weight_type(tensor_type t) const override { return cuda::has_weight_kernels(t); }

  // --- memory -----------------------------------------------------------------------------

  tensor weight(const gguf_tensor& g) override {
    activate();
    flush();
    tensor t;
    t.type = g.type;
    for (int d = 0; d < 4; ++d) t.ne[d] = g.ne[d];
    t.name = g.name.c_str();
    t.data = cuda::device_alloc(g.n_bytes, g.name.c_str());
    weights_.push_back(t.data);
    // Straight from the mapped file: pages are read as the copy goes.
    HEARTH_CUDA_CHECK(cudaMemcpy(t.data, g.data, g.n_bytes, cudaMemcpyHostToDevice));
    return t;
  }

  tensor alloc(tensor_type type, int64_t ne0, int64_t ne1, const char* name) override {
    activate();
    tensor t;
    t.type = type;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.name = name;
    t.data = cuda::device_alloc(size_t(t.n_bytes()), name);
    return t;
  }

  void free(tensor& t) override {
    if (!t.data) return;
    activate();
    flush();
    HEARTH_CUDA_CHECK(cudaStreamSynchronize(stream_));
    // A cached graph naming this address would be replayed only by the same key, i.e. after the
    // address is handed out again for a tensor of the same shape; dropping them is simpler.
    graphs_cache_.clear();
    cuda::device_free(t.data);
    t.data = nullptr;
  }

  void upload(const tensor& dst, const void* src, size_t bytes) override {
    activate();
    flush();  // ops recorded before the upload read the old contents
    if (bytes == 0) return;
    if (bytes > k_staging_bytes) {
      HEARTH_CUDA_CHECK(cudaStreamSynchronize(stream_));
      staged_ = 0;
      HEARTH_CUDA_CHECK(cudaMemcpy(dst.data, src, bytes, cudaMemcpyHostToDevice));
      return;
    }
    void* p = stage(src, bytes);
    HEARTH_CUDA_CHECK(cudaMemcpyAsync(dst.data, p, bytes, cudaMemcpyHostToDevice, stream_));
  }

  void download(const tensor& src, void* dst, size_t bytes) override {
    activate();
    flush();
    if (bytes > 0) {
      HEARTH_CUDA_CHECK(cudaMemcpyAsync(dst, src.data, bytes, cudaMemcpyDeviceToHost, stream_));
    }
    wait();
  }

  void synchronize() override {
    activate();
    flush();
    wait();
  }

  // --- ops: recorded, launched by flush() ----------------------------------------------------

  void get_rows(const tensor& table, const tensor& ids, const tensor& out) override {
    require(supports_weight_type(table.type), "get_rows", "unsupported table type");
    require(ids.type == tensor_type::i32 && out.type == tensor_type::f32, "get_rows",
            "ids must be I32 and out F32");
    require(out.ne[0] == table.ne[0] && out.rows() >= ids.ne[0], "get_rows", "shape mismatch");
    record(op_kind::get_rows, {&table, &ids, &out});
  }

  void mul_mat(const tensor& w, const tensor& x, const tensor* bias, const tensor& out) override {
    require(supports_weight_type(w.type), "mul_mat", "unsupported weight type");
    require(x.type == tensor_type::f32 && out.type == tensor_type::f32, "mul_mat",
            "activations must be F32");
    require(x.ne[0] == w.ne[0] && out.ne[0] == w.rows() && out.rows() == x.rows(), "mul_mat",
            "shape mismatch");
    const int64_t n_tok = x.rows();
    if (!on_mmv(w.type, n_tok)) reserve_gemm_scratch(w, n_tok);
    if (on_q8k(w.type, x)) {
      const size_t bytes = cuda::q8k_bytes(x.ne[0], n_tok);
      if (bytes > q8k_scratch_.bytes) grow(q8k_scratch_, bytes, "the activations (Q8_K)");
    } else if (rounded_here(w.type, n_tok)) {
      reserve_round_scratch(x);
    }
    tensor none;
    record(op_kind::mul_mat, {&w, &x, bias && bias->present() ? bias : &none, &out});
  }

  // Products of one input whose weights round activations alike (q, k and v; gate and up) round
  // them once: the later ones read the first one's rounded rows from its scratch (Q8_K integers
  // in q8k_scratch_ for the integer kernel, F32 in round_scratch_ otherwise), which nothing
  // between them writes. On an H200 the rounding kernel was a quarter of a TinyLlama decoding
  // step's launches (bench/README.md).
  void mul_mats(const tensor& x, std::span<const product> products) override {
    const int64_t n_tok = x.rows();
    cuda::activation_rounding in_round = cuda::activation_rounding::none;
    bool in_q8k = false;
    for (const product& p : products) {
      mul_mat(*p.w, x, p.bias, *p.out);
      int32_t& rounded = records_.back().i[0];  // launch: x is already in the scratch
      if (on_q8k(p.w->type, x)) {
        rounded = in_q8k;
        in_q8k = true;
      } else if (rounded_here(p.w->type, n_tok)) {
        const cuda::activation_rounding r = cuda::activation_rounding_for(p.w->type);
        rounded = r == in_round;
        in_round = r;
      }
    }
  }

  void rms_norm(const tensor& x, const tensor& weight, float eps, const tensor& out) override {
    require(x.ne[0] == out.ne[0] && x.rows() == out.rows(), "rms_norm", "shape mismatch");
    op_record& r = record(op_kind::rms_norm, {&x, &weight, &out});
    r.f[0] = eps;
  }

  void rope(const tensor& x, int32_t n_head, int32_t head_dim, const tensor& pos,
            const rope_params& p, const tensor* freq_factors) override {
    require(int64_t(n_head) * head_dim <= x.ne[0] && p.n_dims <= head_dim && p.n_dims % 2 == 0,
            "rope", "shape mismatch");
    tensor none;
    op_record& r = record(
        op_kind::rope, {&x, &pos, freq_factors && freq_factors->present() ? freq_factors : &none});
    r.i[0] = n_head;
    r.i[1] = head_dim;
    r.rope = p;
  }

  void kv_store(const tensor& src, const tensor& cells, const tensor& cache) override {
    require(cache.type == tensor_type::f16 || cache.type == tensor_type::f32, "kv_store",
            "the cache must be F16 or F32");
    require(src.ne[0] == cache.ne[0] && cells.ne[0] >= src.rows(), "kv_store", "shape mismatch");
    record(op_kind::kv_store, {&src, &cells, &cache});
  }

  void attention(const tensor& q, const tensor& k_cache, const tensor& v_cache,
                 const tensor& tok_seq, const tensor& tok_pos, const tensor& cell_seq,
                 const tensor& cell_pos, int32_t n_cells, const attention_params& p,
                 const tensor& out) override {
    require(k_cache.type == v_cache.type &&
                (k_cache.type == tensor_type::f16 || k_cache.type == tensor_type::f32),
            "attention", "the caches must both be F16 or both F32");
    require(
        n_cells >= 0 && n_cells <= k_cache.rows() && p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0,
        "attention", "bad cell count or head counts");
    require(p.head_dim_k <= cuda::k_attention_max_head_dim &&
                p.head_dim_v <= cuda::k_attention_max_head_dim,
            "attention", "head dimensions above 256 have no kernel");
    const int32_t max_cells = int32_t(k_cache.rows());
    const size_t need = cuda::attention_scratch_bytes(q.rows(), p, max_cells);
    if (need > attn_scratch_.bytes) grow(attn_scratch_, need, "the attention scratch");
    if (n_slots_ == k_param_slots) flush();
    op_record& r = record(op_kind::attention,
                          {&q, &k_cache, &v_cache, &tok_seq, &tok_pos, &cell_seq, &cell_pos, &out});
    r.attn = p;
    r.n_cells = n_cells;
    r.slot = n_slots_++;
  }

  void swiglu(const tensor& gate, const tensor& up, const tensor& out) override {
    elementwise(cuda::elementwise_op::swiglu, gate, &up, 0, 0, out);
  }
  void geglu(const tensor& gate, const tensor& up, const tensor& out) override {
    elementwise(cuda::elementwise_op::geglu, gate, &up, 0, 0, out);
  }
  void add(const tensor& a, const tensor& b, const tensor& out) override {
    elementwise(cuda::elementwise_op::add, a, &b, 0, 0, out);
  }
  void scale(const tensor& x, float s, const tensor& out) override {
    elementwise(cuda::elementwise_op::scale, x, nullptr, s, 0, out);
  }
  void softcap(const tensor& x, float cap, const tensor& out) override {
    // As the CPU: a multiply by 1/cap, tanh, a multiply by cap.
    elementwise(cuda::elementwise_op::softcap, x, nullptr, cap, 1.0f / cap, out);
  }

  // --- mixture of experts: the chosen ids stay on the device (no host sync), so a step that
  // routes is recorded, launched and captured into a graph like any other.

  void moe_route(const tensor& logits, bool normalize, const tensor& ids,
                 const tensor& weights) override {
    require(logits.type == tensor_type::f32 && ids.type == tensor_type::i32 &&
                weights.type == tensor_type::f32,
            "moe_route", "logits and weights must be F32, ids I32");
    const int64_t n_tok = logits.rows();
    require(ids.ne[0] == weights.ne[0] && ids.rows() == n_tok && weights.rows() == n_tok &&
                ids.ne[0] >= 1 && ids.ne[0] <= logits.ne[0] && logits.ne[0] <= INT32_MAX,
            "moe_route", "shape mismatch");
    op_record& r = record(op_kind::moe_route, {&logits, &ids, &weights});
    r.i[0] = normalize ? 1 : 0;
  }

  void mul_mat_id(const tensor& w, const tensor& x, const tensor& ids, const tensor& out) override {
    require(supports_weight_type(w.type), "mul_mat_id", "unsupported weight type");
    require(
        x.type == tensor_type::f32 && out.type == tensor_type::f32 && ids.type == tensor_type::i32,
        "mul_mat_id", "activations must be F32, ids I32");
    const int64_t k = ids.ne[0], n_tok = ids.rows(), n_rows = k * n_tok;
    require(w.ne[3] == 1 && w.ne[2] >= 1 && w.ne[2] <= 65535 && x.ne[0] == w.ne[0] &&
                (x.rows() == n_tok || x.rows() == n_rows) && out.ne[0] == w.ne[1] &&
                out.rows() == n_rows && n_rows <= INT32_MAX,
            "mul_mat_id", "shape mismatch");
    const size_t need = size_t(n_rows + w.ne[2] + 1) * sizeof(int32_t);
    if (need > moe_scratch_.bytes) grow(moe_scratch_, need, "the expert grouping");
    if (cuda::rounds_activations(w.type)) reserve_round_scratch(x);
    record(op_kind::mul_mat_id, {&w, &x, &ids, &out});
  }

  void moe_combine(const tensor& x, const tensor& weights, const tensor& out) override {
    require(x.type == tensor_type::f32 && weights.type == tensor_type::f32 &&
                out.type == tensor_type::f32,
            "moe_combine", "all must be F32");
    require(x.rows() == weights.rows() * weights.ne[0] && out.ne[0] == x.ne[0] &&
                out.rows() == weights.rows(),
            "moe_combine", "shape mismatch");
    record(op_kind::moe_combine, {&x, &weights, &out});
  }

  cuda_step_stats stats() const { return stats_; }

 private:
  void activate() const { HEARTH_CUDA_CHECK(cudaSetDevice(device_)); }

  // Runs a one-element kernel: fails here, with the reason, when this build has no code for the
  // device's architecture (rather than at the first op of the first job).
  void probe() {
    float* p = static_cast<float*>(cuda::device_alloc(sizeof(float), "the probe"));
    cuda::elementwise(stream_, cuda::elementwise_op::scale, p, nullptr, 1.0f, 0.0f, 1, p);
    const cudaError_t e = cudaStreamSynchronize(stream_);
    const cudaError_t launch = cudaGetLastError();
    cuda::device_free(p);
    if (e == cudaErrorNoKernelImageForDevice || launch == cudaErrorNoKernelImageForDevice) {
      cudaDeviceProp prop{};
      cudaGetDeviceProperties(&prop, device_);
      release();
      throw cuda::cuda_error("cuda: this build has no kernels for compute capability " +
                             std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                             " (built for " HEARTH_CUDA_ARCHITECTURES_BUILT
                             "; rebuild with -DHEARTH_CUDA_ARCHITECTURES=native)");
    }
    if (e != cudaSuccess || launch != cudaSuccess) {
      release();
      throw cuda::cuda_error(std::string("cuda: a first kernel did not run: ") +
                             cudaGetErrorString(e != cudaSuccess ? e : launch));
    }
  }

  void release() {
    if (cublas_) cublasDestroy(cublas_);
    cublas_ = nullptr;
    for (scratch* s : {&act_scratch_, &weight_scratch_, &attn_scratch_, &moe_scratch_,
                       &round_scratch_, &q8k_scratch_}) {
      cuda::device_free(s->ptr);
      *s = {};
    }
    cuda::device_free(cublas_workspace_);
    cuda::device_free(params_dev_);
    cublas_workspace_ = nullptr;
    params_dev_ = nullptr;
    if (staging_) cudaFreeHost(staging_);
    staging_ = nullptr;
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  void elementwise(cuda::elementwise_op op, const tensor& a, const tensor* b, float p0, float p1,
                   const tensor& out) {
    require(a.n_elements() == out.n_elements() && (!b || b->n_elements() == a.n_elements()),
            "elementwise", "shape mismatch");
    tensor none;
    op_record& r = record(op_kind::elementwise, {&a, b ? b : &none, &out});
    r.ew = op;
    r.f[0] = p0;
    r.f[1] = p1;
  }

  op_record& record(op_kind kind, std::initializer_list<const tensor*> operands) {
    op_record& r = records_.emplace_back();
    r.kind = kind;
    for (const tensor* t : operands) {
      tensor& dst = r.t[r.n_t++];
      dst = *t;
      dst.name = "";  // not part of what a replay must match
    }
    return r;
  }

  // Copies `bytes` of host memory into pinned staging (the source of an async copy, which must
  // stay untouched until the copy ran: staging is reused only after the stream was waited on).
  void* stage(const void* src, size_t bytes) {
    const size_t at = (staged_ + 255) & ~size_t(255);
    if (at + bytes > k_staging_bytes) {
      HEARTH_CUDA_CHECK(cudaStreamSynchronize(stream_));
      staged_ = 0;
      return stage(src, bytes);
    }
    void* p = static_cast<char*>(staging_) + at;
    std::memcpy(p, src, bytes);
    staged_ = at + bytes;
    return p;
  }

  void wait() {
    HEARTH_CUDA_CHECK(cudaStreamSynchronize(stream_));
    staged_ = 0;
  }

  // Grows a scratch buffer. Ops recorded so far run first with the old one; graphs that
  // captured its address are dropped.
  // Called while recording, so it selects the device itself (a node may run one model per GPU,
  // each from its own thread).
  void grow(scratch& s, size_t bytes, const char* what) {
    activate();
    flush();
    HEARTH_CUDA_CHECK(cudaStreamSynchronize(stream_));
    graphs_cache_.clear();
    const size_t want = std::max(bytes, s.bytes + s.bytes / 2);  // fewer regrowths
    cuda::device_free(s.ptr);
    s = {};
    s.ptr = cuda::device_alloc(want, what);
    s.bytes = want;
  }

  // Whether mul_mat rounds its activations with round_activations first: every weight type
  // but F32, except F16 and BF16 weights on the GEMM path, whose activations convert_f32 rounds
  // on its way to cuBLAS.
  static bool rounded_here(tensor_type w, int64_t n_tok) {
    if (!cuda::rounds_activations(w)) return false;
    return on_mmv(w, n_tok) || (w != tensor_type::f16 && w != tensor_type::bf16);
  }

  void reserve_round_scratch(const tensor& x) {
    const size_t bytes = size_t(x.rows()) * size_t(x.ne[0]) * sizeof(float);
    if (bytes > round_scratch_.bytes) grow(round_scratch_, bytes, "the rounded activations");
  }

  // x as a product with weights of type w takes it: rounded into round_scratch_ (sized at
  // record time; already there when `rounded` says the product before it rounded x alike), or x
  // itself.
  const float* rounded_x(tensor_type w, const tensor& x, bool round, bool rounded = false) {
    const float* xf = static_cast<const float*>(x.data);
    if (!round) return xf;
    float* r = static_cast<float*>(round_scratch_.ptr);
    if (!rounded) cuda::round_activations(stream_, w, xf, x.ne[0], x.rows(), r);
    return r;
  }

  void reserve_gemm_scratch(const tensor& w, int64_t n_tok) {
    if (w.type == tensor_type::f32) return;  // SGEMM straight from the weights and activations
    if (w.type == tensor_type::f16 || w.type == tensor_type::bf16) {
      const size_t act = size_t(n_tok) * size_t(w.ne[0]) * 2;  // F16/BF16 activations
      if (act > act_scratch_.bytes) grow(act_scratch_, act, "the prompt activations (F16)");
      return;
    }
    const size_t row = size_t(w.ne[0]) * sizeof(float);
    const size_t want = std::max(k_weight_scratch_bytes, row);
    if (weight_scratch_.bytes < want) grow(weight_scratch_, want, "the dequantized weights (F32)");
  }

  // Launches the recorded ops: from a cached graph when this step was seen before, else
  // eagerly (and the second time a step is seen in a row, it is captured).
  void flush() {
    if (records_.empty()) return;
    if (n_slots_ > 0) {
      for (const op_record& r : records_)
        if (r.slot >= 0) params_host_[size_t(r.slot)] = r.n_cells;
      void* p = stage(params_host_.data(), size_t(n_slots_) * sizeof(int32_t));
      HEARTH_CUDA_CHECK(cudaMemcpyAsync(params_dev_, p, size_t(n_slots_) * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, stream_));
    }
    stats_.steps++;
    stats_.ops += records_.size();
    bool done = false;
    if (graphs_) {
      key_.clear();
      for (const op_record& r : records_) cuda::append_key(r, key_);
      const uint64_t h = cuda::graph_cache::hash(key_);
      cudaGraphExec_t g = graphs_cache_.find(key_, h);
      if (!g && key_ == last_key_) {
        std::string why;
        g = graphs_cache_.capture(
            stream_, key_, h, [this] { launch_all(); }, why);
        if (g) {
          stats_.graph_captures++;
        } else {
          // Run eagerly from now on rather than fail: graphs are a speed-up, not a need. Said
          // once, since decoding gets slower.
          graphs_ = false;
          std::fprintf(stderr, "cuda: CUDA graphs turned off: %s\n", why.c_str());
        }
      } else if (g) {
        stats_.graph_replays++;
      }
      if (g) {
        HEARTH_CUDA_CHECK(cudaGraphLaunch(g, stream_));
        done = true;
      }
      last_key_.swap(key_);
    }
    if (!done) launch_all();
    records_.clear();
    n_slots_ = 0;
    HEARTH_CUDA_CHECK(cudaGetLastError());
  }

  void launch_all() {
    for (const op_record& r : records_) launch(r);
  }

  void launch(const op_record& r) {
    const tensor* t = r.t;
    auto f32 = [](const tensor& x) { return static_cast<float*>(x.data); };
    auto i32 = [](const tensor& x) { return static_cast<const int32_t*>(x.data); };
    switch (r.kind) {
      case op_kind::get_rows:
        cuda::get_rows(stream_, t[0].type, t[0].data, t[0].ne[0], i32(t[1]), t[1].ne[0], f32(t[2]));
        break;
      case op_kind::mul_mat:
        mul_mat_now(t[0], t[1], t[2].present() ? f32(t[2]) : nullptr, t[3], r.i[0] != 0);
        break;
      case op_kind::rms_norm:
        cuda::rms_norm(stream_, f32(t[0]), t[1].present() ? f32(t[1]) : nullptr, t[0].ne[0],
                       t[0].rows(), r.f[0], f32(t[2]));
        break;
      case op_kind::rope:
        cuda::rope(stream_, f32(t[0]), t[0].rows(), t[0].ne[0], r.i[0], r.i[1], i32(t[1]), r.rope,
                   t[2].present() ? f32(t[2]) : nullptr);
        break;
      case op_kind::kv_store:
        cuda::kv_store(stream_, f32(t[0]), t[0].ne[0], t[0].rows(), i32(t[1]), t[2].data,
                       t[2].type == tensor_type::f16);
        break;
      case op_kind::attention: {
        cuda::attention_args a;
        a.q = f32(t[0]);
        a.k = t[1].data;
        a.v = t[2].data;
        a.kv_f16 = t[1].type == tensor_type::f16;
        a.tok_seq = i32(t[3]);
        a.tok_pos = i32(t[4]);
        a.cell_seq = i32(t[5]);
        a.cell_pos = i32(t[6]);
        a.n_cells = params_dev_ + r.slot;
        a.max_cells = int32_t(t[1].rows());
        a.n_tok = t[0].rows();
        a.p = r.attn;
        a.out = f32(t[7]);
        a.scratch = attn_scratch_.ptr;
        cuda::attention(stream_, a);
        break;
      }
      case op_kind::elementwise:
        cuda::elementwise(stream_, r.ew, f32(t[0]), t[1].present() ? f32(t[1]) : nullptr, r.f[0],
                          r.f[1], t[0].n_elements(), f32(t[2]));
        break;
      case op_kind::moe_route:
        cuda::moe_route(stream_, f32(t[0]), int32_t(t[0].ne[0]), t[0].rows(), int32_t(t[1].ne[0]),
                        r.i[0] != 0, static_cast<int32_t*>(t[1].data), f32(t[2]));
        break;
      case op_kind::mul_mat_id:
        mul_mat_id_now(t[0], t[1], t[2], t[3]);
        break;
      case op_kind::moe_combine:
        cuda::moe_combine(stream_, f32(t[0]), f32(t[1]), t[0].ne[0], t[1].rows(),
                          int32_t(t[1].ne[0]), f32(t[2]));
        break;
    }
  }

  // Whether a product of n_tok tokens with weights of type w takes the matrix-vector kernel,
  // k_mmv_max_tokens tokens at a time, rather than cuBLAS. Up to 16 tokens for the quantized
  // types, whose GEMM path first dequantizes every weight to F32: measured on an
  // H200, 16 sequences decoding together (hearth bench -s 16), TinyLlama Q4_K_M 1,226 -> 1,436
  // t/s, Q8_0 1,271 -> 1,374, Llama-3-8B Q4_K_M 285 -> 334; at 64 tokens the GEMM won (Q4_K_M
  // 2,831 against 1,874 t/s). F16 and BF16 go to the tensor cores as they are (F16, 16
  // sequences: 2,208 t/s there against 1,495 on the kernel), F32 to SGEMM.
  static bool on_mmv(tensor_type w, int64_t n_tok) {
    if (n_tok <= cuda::k_mmv_max_tokens) return true;
    const bool gemm_as_stored =
        w == tensor_type::f32 || w == tensor_type::f16 || w == tensor_type::bf16;
    return !gemm_as_stored && n_tok <= 2 * cuda::k_mmv_max_tokens;
  }

  // Whether a product with weights of type w takes the integer decoding kernel (Q4_K, Q6_K) over
  // activations quantized to Q8_K's integers, rather than the float one over activations rounded
  // as floats. quantize_q8k reads x 16 bytes at a time; a view that starts elsewhere (none in the
  // models we run) takes the float kernel, which has a value-by-value fallback.
  static bool on_q8k(tensor_type w, const tensor& x) {
    return on_mmv(w, x.rows()) && cuda::has_q8k_kernel(w) &&
           reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
  }

  // out = x · wᵀ: the decoding kernel for a few tokens (Q4_K, Q6_K: the integer one, over the
  // activations as Q8_K's integers, each block's term the CPU's), a cuBLAS GEMM for more.
  //
  // Activations are rounded as the CPU rounds them, on every path. The GEMM multiplies in the
  // precision that keeps a prompt's products the CPU's to float rounding:
  // - F16 and BF16 weights: on the tensor cores, the activations rounded to the weights' type
  //   (as the CPU rounds them), products exact, F32 sums.
  // - F32 and the quantized types: SGEMM in F32 (cuBLAS's default math mode never narrows it to
  //   TF32) over weights dequantized to F32. F16 here would cut weights and rounded activations
  //   to 11 bits, errors of up to 5e-4 per value where the CPU's are exact: larger than the
  //   attention weights' F16 rounding that, left out, flipped mixture-of-experts routers
  //   (attention-math.cuh). The cost, measured on an H200: pp512 2.3x
  //   (TinyLlama Q4_K_M) to 3.5x (Qwen3-8B shapes, 12 layers) slower than the F16 tensor cores;
  //   integer tensor-core products over the Q8 activations would be both fast and exact.
  void mul_mat_now(const tensor& w, const tensor& x, const float* bias, const tensor& out,
                   bool rounded) {
    const int64_t n_in = w.ne[0], n_out = w.rows(), n_tok = x.rows();
    float* o = static_cast<float*>(out.data);
    if (on_q8k(w.type, x)) {
      const cuda::q8k_rows xq = cuda::q8k_at(q8k_scratch_.ptr, n_in, n_tok);
      if (!rounded) cuda::quantize_q8k(stream_, static_cast<const float*>(x.data), n_in, n_tok, xq);
      for (int64_t t0 = 0; t0 < n_tok; t0 += cuda::k_mmv_max_tokens) {
        const int64_t nt = std::min<int64_t>(cuda::k_mmv_max_tokens, n_tok - t0);
        const cuda::q8k_rows at{xq.qs + t0 * n_in, xq.d + t0 * (n_in / 256),
                                xq.sums + t0 * (n_in / 16)};
        cuda::mul_mat_vec_q8k(stream_, w.type, w.data, n_in, n_out, at, nt, bias, o + t0 * n_out);
      }
      return;
    }
    const float* xf = rounded_x(w.type, x, rounded_here(w.type, n_tok), rounded);
    if (on_mmv(w.type, n_tok)) {
      for (int64_t t0 = 0; t0 < n_tok; t0 += cuda::k_mmv_max_tokens) {
        const int64_t nt = std::min<int64_t>(cuda::k_mmv_max_tokens, n_tok - t0);
        cuda::mul_mat_vec(stream_, w.type, w.data, n_in, n_out, xf + t0 * n_in, nt, bias,
                          o + t0 * n_out);
      }
      return;
    }
    if (w.type == tensor_type::f16 || w.type == tensor_type::bf16) {
      const bool bf16 = w.type == tensor_type::bf16;
      uint16_t* xh = static_cast<uint16_t*>(act_scratch_.ptr);
      cuda::convert_f32(stream_, xf, n_tok * n_in, bf16, xh);
      gemm16(w.data, bf16 ? CUDA_R_16BF : CUDA_R_16F, xh, n_in, n_out, n_tok, o, n_out);
    } else if (w.type == tensor_type::f32) {
      gemm32(static_cast<const float*>(w.data), xf, n_in, n_out, n_tok, o, n_out);
    } else {
      // Quantized: dequantize as many rows as the scratch holds, multiply, repeat.
      const int64_t chunk =
          std::max<int64_t>(1, int64_t(weight_scratch_.bytes / (size_t(n_in) * sizeof(float))));
      float* wf = static_cast<float*>(weight_scratch_.ptr);
      for (int64_t r0 = 0; r0 < n_out; r0 += chunk) {
        const int64_t rows = std::min(chunk, n_out - r0);
        cuda::dequantize_rows(stream_, w.type, w.data, n_in, r0, rows, wf);
        gemm32(wf, xf, n_in, rows, n_tok, o + r0, n_out);
      }
    }
    if (bias) cuda::add_bias(stream_, o, bias, n_out, n_tok);
  }

  // The expert product: the rows grouped by expert on the device (into moe_scratch_, sized at
  // record time), then each chosen expert's matrix streamed once for its rows.
  void mul_mat_id_now(const tensor& w, const tensor& x, const tensor& ids, const tensor& out) {
    const int64_t k = ids.ne[0], n_tok = ids.rows(), n_rows = k * n_tok;
    const int32_t n_expert = int32_t(w.ne[2]);
    auto* rows = static_cast<int32_t*>(moe_scratch_.ptr);
    int32_t* start = rows + n_rows;
    cuda::moe_group(stream_, static_cast<const int32_t*>(ids.data), n_rows, n_expert, rows, start);
    const float* xf = rounded_x(w.type, x, cuda::rounds_activations(w.type));
    cuda::mul_mat_id(stream_, w.type, w.data, w.ne[0], w.ne[1], n_expert, xf,
                     x.rows() == n_rows ? 1 : k, rows, start, static_cast<float*>(out.data));
  }

  // out (rows × n_tok, leading dimension ldc) = w (rows of n_in, 16-bit) · x (16-bit) with F32
  // accumulation on the tensor cores.
  void gemm16(const void* w, cudaDataType_t dt, const uint16_t* x, int64_t n_in, int64_t rows,
              int64_t n_tok, float* out, int64_t ldc) {
    const float one = 1.0f, zero = 0.0f;
    HEARTH_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(n_tok),
                                     int(n_in), &one, w, dt, int(n_in), x, dt, int(n_in), &zero,
                                     out, CUDA_R_32F, int(ldc), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
  }

  // The same in F32: w (rows of n_in, F32) · x (F32).
  void gemm32(const float* w, const float* x, int64_t n_in, int64_t rows, int64_t n_tok, float* out,
              int64_t ldc) {
    const float one = 1.0f, zero = 0.0f;
    // Row-major out[t][o] = Σ_i x[t][i] w[o][i] is, column-major, out (rows × n_tok) =
    // wᵀ (w read as n_in × rows) times x (n_in × n_tok).
    HEARTH_CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(n_tok),
                                    int(n_in), &one, w, int(n_in), x, int(n_in), &zero, out,
                                    int(ldc)));
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  void* staging_ = nullptr;
  size_t staged_ = 0;
  int32_t* params_dev_ = nullptr;
  std::vector<int32_t> params_host_;
  int32_t n_slots_ = 0;
  scratch act_scratch_, weight_scratch_, attn_scratch_;
  scratch moe_scratch_;  // I32: mul_mat_id's rows grouped by expert, then where each expert starts
  scratch round_scratch_;  // F32 [rows, n_in]: a product's activations rounded (round-math.cuh)
  scratch q8k_scratch_;    // a product's activations as Q8_K integers (cuda::quantize_q8k)
  std::vector<void*> weights_;
  std::vector<op_record> records_;
  std::vector<int64_t> key_, last_key_;
  cuda::graph_cache graphs_cache_;
  bool graphs_ = true;
  cuda_step_stats stats_;
};

}  // namespace

std::unique_ptr<backend> make_cuda_backend(const cuda_options& o) {
  const std::vector<gpu::device> devs = cuda::devices();
  if (devs.empty()) throw cuda::cuda_error("cuda: " + cuda::unavailable_reason());
  const int index = o.device;
  if (index < 0 || index >= int(devs.size())) {
    throw cuda::cuda_error("cuda: there is no device " + std::to_string(index) + " (" +
                           std::to_string(devs.size()) + " found)");
  }
  return std::make_unique<cuda_backend>(index, o.graphs);
}

cuda_step_stats cuda_stats(const backend& b) {
  const auto* c = dynamic_cast<const cuda_backend*>(&b);
  return c ? c->stats() : cuda_step_stats{};
}

}  // namespace hearth
