#include "engine/model.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "engine/architecture.h"
#include "engine/hf-model.h"
#include "engine/system-info.h"

namespace hearth {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what);
}

template <typename T>
T unwrap(result<T> r) {
  if (!r) fail(r.message());
  return std::move(r).value();
}

// "f32, f16, ..." : the weight types a backend computes with, for error messages.
std::string supported_types(const backend& b) {
  std::string out;
  for (uint32_t id = 0; id < 64; ++id) {
    if (!tensor_type_layout_of(id) || !b.supports_weight_type(tensor_type(id))) continue;
    out += (out.empty() ? "" : ", ") + std::string(tensor_type_name(tensor_type(id)));
  }
  return out;
}

std::string shape(int64_t ne0, int64_t ne1) {
  return ne1 > 1 ? "[" + std::to_string(ne0) + ", " + std::to_string(ne1) + "]"
                 : "[" + std::to_string(ne0) + "]";
}

}  // namespace

void model_loader::check(const gguf_tensor& g, bool matrix_type, int64_t ne0, int64_t ne1) const {
  const int64_t want[4] = {ne0, ne1, 1, 1};
  for (int d = 0; d < 4; ++d) {
    if (g.ne[d] != want[d]) {
      fail("tensor '" + g.name + "' has shape " + g.shape_string() + ", expected " +
           shape(ne0, ne1));
    }
  }
  if (matrix_type) {
    if (!backend_.supports_weight_type(g.type)) {
      fail("tensor '" + g.name + "' has type " + std::string(tensor_type_name(g.type)) +
           ", which the " + backend_.name() +
           " backend does not support yet (supported: " + supported_types(backend_) + ")");
    }
  } else if (g.type != tensor_type::f32) {
    fail("tensor '" + g.name + "' has type " + std::string(tensor_type_name(g.type)) +
         ", expected f32");
  }
}

tensor model_loader::bind(const gguf_tensor& g, bool matrix_type, int64_t ne0, int64_t ne1) {
  check(g, matrix_type, ne0, ne1);
  bound_bytes_ += g.n_bytes;
  return backend_.weight(g);
}

tensor model_loader::matrix(const std::string& name, int64_t n_in, int64_t n_out) {
  const gguf_tensor* g = file_.find_tensor(name);
  if (!g) fail("tensor '" + name + "' is missing (expected shape " + shape(n_in, n_out) + ")");
  return bind(*g, true, n_in, n_out);
}

tensor model_loader::matrix_optional(const std::string& name, int64_t n_in, int64_t n_out) {
  const gguf_tensor* g = file_.find_tensor(name);
  return g ? bind(*g, true, n_in, n_out) : tensor{};
}

tensor model_loader::matrix_rows(const std::string& name, int64_t n_in, int64_t n_out_total,
                                 int64_t first, int64_t n) {
  const gguf_tensor* g = file_.find_tensor(name);
  if (!g) {
    fail("tensor '" + name + "' is missing (expected shape " + shape(n_in, n_out_total) + ")");
  }
  check(*g, true, n_in, n_out_total);
  if (first < 0 || n <= 0 || first + n > n_out_total) {
    fail("tensor '" + name + "': rows [" + std::to_string(first) + ", " +
         std::to_string(first + n) + ") are outside its " + std::to_string(n_out_total) + " rows");
  }
  gguf_tensor& part = parts_.emplace_back(*g);
  const uint64_t row_bytes = uint64_t(tensor_type_row_bytes(g->type, n_in));
  part.name = name + "[" + std::to_string(first) + ":" + std::to_string(first + n) + "]";
  part.ne[1] = n;
  part.offset += uint64_t(first) * row_bytes;
  part.data += uint64_t(first) * row_bytes;
  part.n_bytes = uint64_t(n) * row_bytes;
  bound_bytes_ += part.n_bytes;
  return backend_.weight(part);
}

tensor model_loader::vector(const std::string& name, int64_t n) {
  const gguf_tensor* g = file_.find_tensor(name);
  if (!g) fail("tensor '" + name + "' is missing (expected shape [" + std::to_string(n) + "])");
  return bind(*g, false, n, 1);
}

tensor model_loader::vector_optional(const std::string& name, int64_t n) {
  const gguf_tensor* g = file_.find_tensor(name);
  return g ? bind(*g, false, n, 1) : tensor{};
}

uint32_t model_loader::u32(const std::string& key) const {
  auto v = unwrap(file_.get_uint(key));
  if (!v) fail("metadata key '" + key + "' is missing");
  if (*v > 0x7fffffff)
    fail("metadata key '" + key + "' is out of range (" + std::to_string(*v) + ")");
  return uint32_t(*v);
}

uint32_t model_loader::u32_or(const std::string& key, uint32_t fallback) const {
  auto v = unwrap(file_.get_uint(key));
  if (v && *v > 0x7fffffff)
    fail("metadata key '" + key + "' is out of range (" + std::to_string(*v) + ")");
  return v ? uint32_t(*v) : fallback;
}

float model_loader::f32_or(const std::string& key, float fallback) const {
  auto v = unwrap(file_.get_float(key));
  return v ? float(*v) : fallback;
}

namespace {

// Hyperparameters every supported family stores under the same `<arch>.` keys.
void read_common_hparams(const model_loader& ld, const vocab& voc, model_hparams& hp) {
  const std::string a = hp.arch + ".";
  hp.n_ctx_train = int32_t(ld.u32_or(a + "context_length", 0));
  hp.n_embd = int32_t(ld.u32(a + "embedding_length"));
  hp.n_layer = int32_t(ld.u32(a + "block_count"));
  hp.n_ff = int32_t(ld.u32(a + "feed_forward_length"));
  hp.n_head = int32_t(ld.u32(a + "attention.head_count"));
  hp.n_head_kv = int32_t(ld.u32_or(a + "attention.head_count_kv", uint32_t(hp.n_head)));
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_ff <= 0 || hp.n_head <= 0 || hp.n_head_kv <= 0) {
    fail("embedding_length, block_count, feed_forward_length and head counts must be positive");
  }
  if (hp.n_layer > 4096 || hp.n_head > 4096) fail("block_count or head_count is implausibly large");
  if (hp.n_head % hp.n_head_kv != 0) {
    fail("attention.head_count (" + std::to_string(hp.n_head) +
         ") is not a multiple of head_count_kv (" + std::to_string(hp.n_head_kv) + ")");
  }
  const uint32_t default_head = uint32_t(hp.n_embd / hp.n_head);
  hp.head_dim_k = int32_t(ld.u32_or(a + "attention.key_length", default_head));
  hp.head_dim_v = int32_t(ld.u32_or(a + "attention.value_length", default_head));
  if (hp.head_dim_k <= 0 || hp.head_dim_v <= 0 || hp.head_dim_k > 2048 || hp.head_dim_v > 2048) {
    fail("attention key/value length must be in [1, 2048]");
  }
  hp.norm_eps = ld.f32_or(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  hp.n_vocab = int32_t(ld.u32_or(a + "vocab_size", uint32_t(voc.n_tokens())));
  if (hp.n_vocab != voc.n_tokens()) {
    fail(a + "vocab_size is " + std::to_string(hp.n_vocab) + " but the vocabulary has " +
         std::to_string(voc.n_tokens()) + " tokens");
  }

  hp.rope.n_dims = int32_t(ld.u32_or(a + "rope.dimension_count", uint32_t(hp.head_dim_k)));
  if (hp.rope.n_dims <= 0 || hp.rope.n_dims % 2 != 0 || hp.rope.n_dims > hp.head_dim_k) {
    fail("rope.dimension_count " + std::to_string(hp.rope.n_dims) +
         " must be even and at most the head size " + std::to_string(hp.head_dim_k));
  }
  hp.rope.freq_base = ld.f32_or(a + "rope.freq_base", 10000.0f);
  // Linear context scaling stretches positions by `factor` (older files: rope.scale_linear).
  auto scaling_type = unwrap(ld.file().get_string(a + "rope.scaling.type"));
  if (scaling_type && *scaling_type != "none" && *scaling_type != "linear") {
    fail("rope scaling '" + *scaling_type + "' is not supported (only linear)");
  }
  float factor = ld.f32_or(a + "rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = ld.f32_or(a + "rope.scale_linear", 0.0f);
  const bool scaled = factor > 0.0f && (!scaling_type || *scaling_type == "linear");
  hp.rope.freq_scale = scaled ? 1.0f / factor : 1.0f;
  if (!(hp.rope.freq_base > 0) || !(hp.rope.freq_scale > 0))
    fail("rope frequency base and scale must be positive");
}

}  // namespace

result<gguf_file> model_file_open(const std::string& path) {
  // A directory is a Hugging Face model, anything else a GGUF file.
  return hf_is_model_dir(path) ? hf_import(path) : gguf_file::open(path);
}

std::unique_ptr<model> model::load(const std::string& path, const model_params& params) {
  std::unique_ptr<model> m(new model());
  try {
    m->file_ = unwrap(model_file_open(path));
    auto arch_name = unwrap(m->file_.get_string("general.architecture"));
    if (!arch_name) fail("metadata key 'general.architecture' is missing");
    m->arch_ = architecture_for(*arch_name);
    if (!m->arch_) {
      fail("architecture '" + *arch_name +
           "' is not supported (supported: " + std::string(supported_architectures()) + ")");
    }
    m->hparams_.arch = *arch_name;
    m->hparams_.name = unwrap(m->file_.get_string("general.name")).value_or("");
    {
      auto v = vocab::from_gguf(m->file_);
      if (!v) fail("loading vocabulary: " + v.message());
      m->vocab_ = std::move(v).value();
    }

    m->backend_ = params.make_backend ? params.make_backend() : make_cpu_backend(params.n_threads);
    if (!m->backend_) fail("no backend to load the weights onto");
    model_loader ld(m->file_, *m->backend_, m->weights_.parts);
    read_common_hparams(ld, m->vocab_, m->hparams_);
    m->arch_->load(ld, m->hparams_, m->weights_);
    m->weight_bytes_ = ld.bound_bytes();

    // The CPU backend reads the weights from host memory; a device backend has them uploaded
    // (its caller checks the device's memory).
    const system_info sys = system_info_read();
    if (!params.make_backend && sys.mem_available > 0 && m->weight_bytes_ > sys.mem_available) {
      fail("the weights need " + format_bytes(m->weight_bytes_) + " of memory but only " +
           format_bytes(sys.mem_available) + " is available");
    }
    if (params.progress) m->file_.prefetch(params.progress);
  } catch (const std::exception& e) {
    throw std::runtime_error("loading model " + path + ": " + e.what());
  }
  return m;
}

model::~model() = default;

std::string model::dominant_type() const {
  std::map<tensor_type, uint64_t> bytes;
  for (const auto& t : file_.tensors()) bytes[t.type] += t.n_bytes;
  auto it = std::max_element(bytes.begin(), bytes.end(),
                             [](auto& a, auto& b) { return a.second < b.second; });
  return it == bytes.end() ? "none" : std::string(tensor_type_name(it->first));
}

}  // namespace hearth
