// The backend choice and its CPU fallback, with a fake registry entry: a fake backend that does
// its work on the CPU backend but can lack weight types, fail to start or fail to take weights.
#include "backends/select.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <stdexcept>

#include "engine/context.h"
#include "engine/convert/hf-export.h"
#include "tests/testdata.h"

namespace hearth::gpu {
namespace {

// A device backend for tests: every op on the CPU backend, under another name, with the weight
// types it "has kernels for" and a weight() that can fail.
class fake_device_backend final : public backend {
 public:
  fake_device_backend(bool supports_f32, bool weights_fail)
      : cpu_(make_cpu_backend(1)), supports_f32_(supports_f32), weights_fail_(weights_fail) {}

  // Bytes taken on the "device", as a device backend would hold them.
  uint64_t weight_bytes = 0;
  uint64_t cache_bytes = 0;  // the KV cache's tensors
  uint64_t other_bytes = 0;  // everything else alloc() gave (activations, per-token inputs)

  std::string name() const override { return "fake"; }
  bool supports_weight_type(tensor_type t) const override {
    return (t != tensor_type::f32 || supports_f32_) && cpu_->supports_weight_type(t);
  }
  tensor weight(const gguf_tensor& t) override {
    if (weights_fail_) throw std::runtime_error("out of device memory uploading a weight");
    weight_bytes += t.n_bytes;
    return cpu_->weight(t);
  }
  tensor alloc(tensor_type type, int64_t ne0, int64_t ne1, const char* name) override {
    const std::string n = name;
    const bool cache = n == "cache_k" || n == "cache_v" || n == "cell_seq" || n == "cell_pos";
    (cache ? cache_bytes : other_bytes) +=
        uint64_t(tensor_type_row_bytes(type, ne0)) * uint64_t(ne1);
    return cpu_->alloc(type, ne0, ne1, name);
  }
  void free(tensor& t) override { cpu_->free(t); }
  void upload(const tensor& dst, const void* src, size_t bytes) override {
    cpu_->upload(dst, src, bytes);
  }
  void download(const tensor& src, void* dst, size_t bytes) override {
    cpu_->download(src, dst, bytes);
  }
  void get_rows(const tensor& table, const tensor& ids, const tensor& out) override {
    cpu_->get_rows(table, ids, out);
  }
  void mul_mat(const tensor& w, const tensor& x, const tensor* bias, const tensor& out) override {
    cpu_->mul_mat(w, x, bias, out);
  }
  void rms_norm(const tensor& x, const tensor& w, float eps, const tensor& out) override {
    cpu_->rms_norm(x, w, eps, out);
  }
  void rope(const tensor& x, int32_t n_head, int32_t head_dim, const tensor& pos,
            const rope_params& p, const tensor* freq_factors) override {
    cpu_->rope(x, n_head, head_dim, pos, p, freq_factors);
  }
  void kv_store(const tensor& src, const tensor& cells, const tensor& cache) override {
    cpu_->kv_store(src, cells, cache);
  }
  void attention(const tensor& q, const tensor& k, const tensor& v, const tensor& tok_seq,
                 const tensor& tok_pos, const tensor& cell_seq, const tensor& cell_pos,
                 int32_t n_cells, const attention_params& p, const tensor& out) override {
    cpu_->attention(q, k, v, tok_seq, tok_pos, cell_seq, cell_pos, n_cells, p, out);
  }
  void swiglu(const tensor& g, const tensor& u, const tensor& out) override {
    cpu_->swiglu(g, u, out);
  }
  void geglu(const tensor& g, const tensor& u, const tensor& out) override {
    cpu_->geglu(g, u, out);
  }
  void add(const tensor& a, const tensor& b, const tensor& out) override { cpu_->add(a, b, out); }
  void scale(const tensor& x, float s, const tensor& out) override { cpu_->scale(x, s, out); }
  void softcap(const tensor& x, float cap, const tensor& out) override {
    cpu_->softcap(x, cap, out);
  }
  void moe_route(const tensor& logits, bool normalize, const tensor& ids,
                 const tensor& weights) override {
    cpu_->moe_route(logits, normalize, ids, weights);
  }
  void mul_mat_id(const tensor& w, const tensor& x, const tensor& ids, const tensor& out) override {
    cpu_->mul_mat_id(w, x, ids, out);
  }
  void moe_combine(const tensor& x, const tensor& weights, const tensor& out) override {
    cpu_->moe_combine(x, weights, out);
  }

 private:
  std::unique_ptr<backend> cpu_;
  bool supports_f32_;
  bool weights_fail_;
};

// What the fake backend does when asked for a backend.
enum class fake_mode { works, lacks_f32, fails_to_start, weights_fail };

device fake_device(int index, const char* name, const char* vendor, device_type type,
                   uint64_t memory) {
  device d;
  d.name = name;
  d.backend = backend_kind::vulkan;
  d.index = index;
  d.vendor = vendor;
  d.type = type;
  d.memory_total = memory;
  return d;
}

// A registry with one fake backend (of kind vulkan, named "fake").
struct fake_source {
  std::vector<device> devices = {
      fake_device(0, "Fake GPU", "FakeVendor", device_type::discrete, 8ull << 30)};
  fake_mode mode = fake_mode::works;
  bool loaded = true;
  int made = 0;  // backends made
  int last_index = -100;
  // Replaces the fake's own backend factory when set.
  std::function<std::unique_ptr<backend>(int)> make_override;

  registry source() {
    backend_entry e;
    e.kind = backend_kind::vulkan;
    e.name = "fake";
    e.title = "Fake";
    e.loaded = loaded;
    e.why = loaded ? "" : "libhearth-fake.so not found";
    e.devices = [this] { return loaded ? devices : std::vector<device>{}; };
    e.make = [this](int index) -> std::unique_ptr<backend> {
      if (make_override) return make_override(index);
      ++made;
      last_index = index;
      if (mode == fake_mode::fails_to_start)
        throw std::runtime_error("fake: cannot create a device (VK_ERROR_INITIALIZATION_FAILED)");
      return std::make_unique<fake_device_backend>(mode != fake_mode::lacks_f32,
                                                   mode == fake_mode::weights_fail);
    };
    registry r;
    r.add(std::move(e));
    return r;
  }
};

class select : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::testdata_path("models/stories260K.gguf");
    ASSERT_FALSE(path_.empty());
  }
  loaded_model load(backend_kind kind, int device = -1) {
    backend_choice c;
    c.kind = kind;
    c.device = device;
    c.threads = 1;
    const registry r = fake_.source();
    return load_model_on(path_, c, {}, r);
  }
  // load() on the fake Vulkan backend, which falls back: the model is on the CPU; the note says
  // why.
  std::string cpu_fallback_note(int device = -1) {
    auto r = load(backend_kind::vulkan, device);
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_TRUE(r.model && r.model->backend().name() == "cpu");
    return r.note;
  }
  // Logits after "Once upon" — equal on the fake device and the CPU, which does its work.
  static std::vector<float> logits(const model& m) {
    context_params cp;
    cp.n_ctx = 16;
    context ctx(m, cp);
    const batch_token b[2] = {{1, 0, 0, false}, {403, 1, 0, true}};
    EXPECT_TRUE(ctx.decode(b));
    return std::vector<float>(ctx.logits(0), ctx.logits(0) + ctx.n_vocab());
  }
  std::string path_;
  fake_source fake_;
};

TEST_F(select, backend_names_parse) {
  EXPECT_EQ(backend_kind_from_name("cpu"), backend_kind::cpu);
  EXPECT_EQ(backend_kind_from_name("vulkan"), backend_kind::vulkan);
  EXPECT_EQ(backend_kind_from_name("auto"), backend_kind::automatic);
  EXPECT_FALSE(backend_kind_from_name("cuda9"));
  EXPECT_STREQ(backend_kind_name(backend_kind::automatic), "auto");
}

TEST_F(select, cpu_is_the_cpu_without_asking_the_device_source) {
  auto r = load(backend_kind::cpu);
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.backend, "cpu");
  EXPECT_EQ(r.model->backend().name(), "cpu");
  EXPECT_EQ(r.device, -1);
  EXPECT_EQ(r.note, "");
  EXPECT_EQ(fake_.made, 0);
}

TEST_F(select, a_working_device_runs_the_model_and_says_nothing) {
  auto r = load(backend_kind::vulkan);
  ASSERT_TRUE(r.model);
  EXPECT_EQ(r.backend, "fake");
  EXPECT_EQ(r.model->backend().name(), "fake");
  EXPECT_EQ(r.device, 0);
  EXPECT_EQ(r.device_name, "Fake GPU");
  EXPECT_EQ(r.note, "");
  auto cpu = load(backend_kind::cpu);
  EXPECT_EQ(logits(*r.model), logits(*cpu.model));
}

TEST_F(select, a_backend_that_did_not_load_falls_back_saying_why) {
  fake_.loaded = false;
  EXPECT_EQ(cpu_fallback_note(),
            "fake: the Fake backend is not loaded (libhearth-fake.so not found); running on the "
            "CPU");
  EXPECT_EQ(fake_.made, 0);
}

TEST_F(select, no_device_falls_back) {
  fake_.devices.clear();
  EXPECT_EQ(cpu_fallback_note(), "fake: no Fake device found; running on the CPU");
}

TEST_F(select, a_device_index_that_does_not_exist_falls_back) {
  EXPECT_EQ(cpu_fallback_note(3),
            "fake: there is no device 3 (1 device, see `hearth devices`); running on the CPU");
}

TEST_F(select, a_missing_weight_kernel_falls_back_naming_the_type) {
  fake_.mode = fake_mode::lacks_f32;
  EXPECT_EQ(cpu_fallback_note(), "fake: Fake GPU has no f32 matrix kernel yet; running on the CPU");
}

TEST_F(select, a_device_that_fails_to_start_falls_back_with_its_message) {
  fake_.mode = fake_mode::fails_to_start;
  EXPECT_EQ(cpu_fallback_note(),
            "fake: Fake GPU: cannot create a device (VK_ERROR_INITIALIZATION_FAILED); running on "
            "the CPU");
}

TEST_F(select, a_failure_while_loading_falls_back_in_one_line) {
  fake_.mode = fake_mode::weights_fail;
  const std::string note = cpu_fallback_note();
  EXPECT_EQ(note.find('\n'), std::string::npos);
  EXPECT_EQ(note.rfind("fake: Fake GPU: loading model ", 0), 0u) << note;
  EXPECT_NE(note.find("out of device memory uploading a weight; running on the CPU"),
            std::string::npos)
      << note;
}

TEST_F(select, too_little_device_memory_falls_back_before_making_the_backend) {
  fake_.devices[0].memory_total = 1024;
  const std::string note = cpu_fallback_note();
  EXPECT_EQ(fake_.made, 0);
  EXPECT_EQ(note.rfind("fake: Fake GPU has 1.0 KiB of device memory but the model needs ", 0), 0u)
      << note;
  EXPECT_NE(note.find("(weights "), std::string::npos) << note;
}

TEST_F(select, the_cache_shrinks_to_the_free_memory_when_the_context_was_left_to_the_model) {
  auto f = model_file::open(path_);
  ASSERT_TRUE(f) << f.message();
  const auto full = device_memory_needed(*f, 0, 1);
  const auto small = device_memory_needed(*f, 256, 1);
  ASSERT_LT(small.total(), full.total());
  // Room for 256 cells and a little more, not for the model's context: free memory counts.
  fake_.devices[0].memory_total = 64ull << 30;
  fake_.devices[0].memory_free = small.total() + 1000;
  auto r = load(backend_kind::vulkan);
  EXPECT_EQ(r.backend, "fake");
  EXPECT_EQ(r.n_ctx_per_seq, 256);
  EXPECT_NE(r.note.find("room for 256 tokens of context per sequence"), std::string::npos)
      << r.note;

  // A context the caller asked for is not cut: it falls back instead.
  backend_choice c;
  c.kind = backend_kind::vulkan;
  c.threads = 1;
  c.n_ctx_per_seq = 512;
  auto asked = load_model_on(path_, c, {}, fake_.source());
  EXPECT_EQ(asked.backend, "cpu");
  EXPECT_EQ(asked.n_ctx_per_seq, 0);

  // Not even the smallest cache fits: the CPU, as before.
  fake_.devices[0].memory_free = small.weights;
  EXPECT_EQ(load(backend_kind::vulkan).backend, "cpu");
}

TEST_F(select, cuda_is_asked_for_by_name_and_says_why_it_is_not_used) {
  EXPECT_EQ(backend_kind_from_name("cuda"), backend_kind::cuda);
  EXPECT_STREQ(backend_kind_name(backend_kind::cuda), "cuda");
  // The process's registry always has a CUDA entry: the module loaded, or why not.
  const backend_entry* cuda = device_registry().find(backend_kind::cuda);
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->name, "cuda");
  if (cuda->loaded && !cuda->devices().empty()) GTEST_SKIP() << "this machine has a CUDA device";
  EXPECT_FALSE(cuda->why.empty());
  backend_choice c;
  c.kind = backend_kind::cuda;
  c.threads = 1;
  auto r = load_model_on(path_, c, {});
  EXPECT_EQ(r.backend, "cpu");
  EXPECT_EQ(r.note,
            cuda->loaded
                ? "cuda: no CUDA device found (" + cuda->why + "); running on the CPU"
                : "cuda: the CUDA backend is not loaded (" + cuda->why + "); running on the CPU");
}

TEST_F(select, the_memory_estimate_counts_weights_and_the_cache) {
  auto f = model_file::open(path_);
  ASSERT_TRUE(f) << f.message();
  uint64_t weights = 0;
  for (const auto& t : f->gguf.tensors()) weights += t.n_bytes;
  const auto one = device_memory_needed(*f, 256, 1);
  const auto four = device_memory_needed(*f, 256, 4);
  EXPECT_EQ(one.weights, weights);
  // stories260K: 5 layers × 4 kv heads × (8 + 8) × F16 = 640 bytes per cell, and each cell's
  // sequence and position (2 × I32).
  EXPECT_EQ(four.cache - one.cache, 3u * 256u * 648u);
  // 0 cells per sequence: the model's context (2048) as the CLI and the node use it.
  EXPECT_EQ(device_memory_needed(*f, 0, 1).cache - one.cache, (2048u - 256u) * 648u);
}

// The one estimate (engine/context.h memory_needed) against what loading and a context take on
// the device: the weights and the cache exactly, the activations counted twice (the backends' own
// scratch) and the per-token inputs once.
TEST_F(select, the_memory_estimate_is_what_the_model_and_its_context_allocate) {
  fake_device_backend* dev = nullptr;
  fake_.make_override = [&dev](int) -> std::unique_ptr<backend> {
    auto b = std::make_unique<fake_device_backend>(true, false);
    dev = b.get();
    return b;
  };
  const registry src = fake_.source();
  backend_choice c;
  c.kind = backend_kind::vulkan;
  c.threads = 1;
  c.n_ctx_per_seq = 96;
  c.n_seq = 3;
  auto r = load_model_on(path_, c, {}, src);
  ASSERT_EQ(r.backend, "fake") << r.note;
  ASSERT_NE(dev, nullptr);
  auto f = model_file::open(path_);
  ASSERT_TRUE(f) << f.message();
  const context_params cp = device_context_params(f->hparams, c.n_ctx_per_seq, c.n_seq);
  EXPECT_EQ(cp.n_ctx, 288);
  EXPECT_EQ(cp.n_seq_max, 3);
  const memory_estimate e = memory_needed(r.model->hparams(), r.model->weight_bytes(), cp);
  EXPECT_EQ(e.weights, dev->weight_bytes);
  EXPECT_EQ(device_memory_needed(*f, c.n_ctx_per_seq, c.n_seq).weights, dev->weight_bytes);
  {
    context ctx(*r.model, cp);
    EXPECT_EQ(e.cache, dev->cache_bytes);
    const uint64_t n_batch = 288;  // 512 clamped to the context, as the context does
    const uint64_t inputs = n_batch * 5 * 4;
    EXPECT_EQ(e.scratch, (dev->other_bytes - inputs) * 2 + inputs);
    EXPECT_EQ(e.total(),
              dev->weight_bytes + dev->cache_bytes + (dev->other_bytes - inputs) * 2 + inputs);
  }
}

// One open per load: the fit is checked against the handle the model is then loaded from (a
// Hugging Face directory is imported once, not once to check and once to load).
TEST_F(select, a_load_opens_the_model_once) {
  const auto opens = [&](const std::string& path, fake_mode mode) {
    fake_.mode = mode;
    backend_choice c;
    c.kind = backend_kind::vulkan;
    c.threads = 1;
    const uint64_t before = model_file::opened_count();
    auto r = load_model_on(path, c, {}, fake_.source());
    EXPECT_NE(r.model, nullptr);
    return model_file::opened_count() - before;
  };
  EXPECT_EQ(opens(path_, fake_mode::works), 1u);
  EXPECT_EQ(opens(path_, fake_mode::weights_fail), 1u);  // the CPU fallback reuses the handle

  const std::string gguf = testing::testdata_path("models/synthetic/synthetic-qwen2-a.f16.gguf");
  ASSERT_FALSE(gguf.empty());
  const auto dir = std::filesystem::temp_directory_path() / "hearth_select_hf_once";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(hf_export(gguf, dir.string(), {}).ok());
  EXPECT_EQ(opens(dir.string(), fake_mode::works), 1u);
  EXPECT_EQ(opens(dir.string(), fake_mode::lacks_f32), 1u);
  std::filesystem::remove_all(dir);
}

TEST_F(select, the_best_device_is_a_discrete_gpu_then_the_most_memory) {
  fake_.devices = {fake_device(0, "lavapipe", "Mesa", device_type::cpu, 64ull << 30),
                   fake_device(1, "small iGPU", "Intel", device_type::integrated, 16ull << 30),
                   fake_device(2, "dGPU 8G", "AMD", device_type::discrete, 8ull << 30),
                   fake_device(3, "dGPU 24G", "NVIDIA", device_type::discrete, 24ull << 30)};
  auto r = load(backend_kind::vulkan);
  EXPECT_EQ(r.device, 3);
  EXPECT_EQ(r.device_name, "dGPU 24G");
  EXPECT_EQ(fake_.last_index, 3);
  r = load(backend_kind::vulkan, 0);  // named: even a CPU implementation
  EXPECT_EQ(r.device, 0);
  EXPECT_EQ(r.backend, "fake");
}

TEST_F(select, auto_never_picks_a_cpu_implementation_by_itself) {
  fake_.devices = {
      fake_device(0, "llvmpipe (LLVM 15.0.6, 256 bits)", "Mesa", device_type::cpu, 2ull << 30)};
  auto r = load(backend_kind::automatic);
  EXPECT_EQ(r.backend, "cpu");
  EXPECT_EQ(fake_.made, 0);
  EXPECT_EQ(r.note,
            "auto: no GPU found (fake: llvmpipe (LLVM 15.0.6, 256 bits) is a CPU "
            "implementation; ask for fake to use it); running on the CPU");
  fake_.devices.push_back(fake_device(1, "iGPU", "Intel", device_type::integrated, 1ull << 30));
  r = load(backend_kind::automatic);
  EXPECT_EQ(r.backend, "fake");
  EXPECT_EQ(r.device, 1);
  EXPECT_EQ(r.note, "");
}

TEST_F(select, errors_of_the_model_itself_still_throw) {
  backend_choice c;
  c.kind = backend_kind::vulkan;
  const registry r = fake_.source();
  EXPECT_THROW(load_model_on("/nonexistent/model.gguf", c, {}, r), std::runtime_error);
}

}  // namespace
}  // namespace hearth::gpu
