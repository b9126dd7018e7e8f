#include "engine/model.h"

#include <algorithm>
#include <stdexcept>

#include "engine/architecture.h"
#include "engine/system-info.h"

namespace hearth {
namespace {

[[noreturn]] void fail_load(const std::string& what) {
  throw std::runtime_error(what);
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

std::string shape(int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
  if (ne2 > 1) {
    return "[" + std::to_string(ne0) + ", " + std::to_string(ne1) + ", " + std::to_string(ne2) +
           "]";
  }
  return ne1 > 1 ? "[" + std::to_string(ne0) + ", " + std::to_string(ne1) + "]"
                 : "[" + std::to_string(ne0) + "]";
}

}  // namespace

void model_loader::check(const gguf_tensor& g, bool matrix_type, int64_t ne0, int64_t ne1,
                         int64_t ne2) const {
  const int64_t want[4] = {ne0, ne1, ne2, 1};
  for (int d = 0; d < 4; ++d) {
    if (g.ne[d] != want[d]) {
      fail_load("tensor '" + g.name + "' has shape " + g.shape_string() + ", expected " +
                shape(ne0, ne1, ne2));
    }
  }
  if (matrix_type) {
    if (!backend_.supports_weight_type(g.type)) {
      fail_load("tensor '" + g.name + "' has type " + std::string(tensor_type_name(g.type)) +
                ", which the " + backend_.name() +
                " backend does not support yet (supported: " + supported_types(backend_) + ")");
    }
  } else if (g.type != tensor_type::f32) {
    fail_load("tensor '" + g.name + "' has type " + std::string(tensor_type_name(g.type)) +
              ", expected f32");
  }
}

tensor model_loader::bind(const gguf_tensor& g, bool matrix_type, int64_t ne0, int64_t ne1,
                          int64_t ne2) {
  check(g, matrix_type, ne0, ne1, ne2);
  bound_bytes_ += g.n_bytes;
  return backend_.weight(g);
}

tensor model_loader::matrix(const std::string& name, int64_t n_in, int64_t n_out) {
  const gguf_tensor* g = file_.find_tensor(name);
  if (!g) fail_load("tensor '" + name + "' is missing (expected shape " + shape(n_in, n_out) + ")");
  return bind(*g, true, n_in, n_out);
}

tensor model_loader::matrix_optional(const std::string& name, int64_t n_in, int64_t n_out) {
  const gguf_tensor* g = file_.find_tensor(name);
  return g ? bind(*g, true, n_in, n_out) : tensor{};
}

tensor model_loader::experts(const std::string& name, int64_t n_in, int64_t n_out,
                             int64_t n_expert) {
  const gguf_tensor* g = file_.find_tensor(name);
  if (!g) {
    fail_load("tensor '" + name + "' is missing (expected shape " + shape(n_in, n_out, n_expert) +
              ")");
  }
  return bind(*g, true, n_in, n_out, n_expert);
}

tensor model_loader::matrix_rows(const std::string& name, int64_t n_in, int64_t n_out_total,
                                 int64_t first, int64_t n) {
  const gguf_tensor* g = file_.find_tensor(name);
  if (!g) {
    fail_load("tensor '" + name + "' is missing (expected shape " + shape(n_in, n_out_total) + ")");
  }
  check(*g, true, n_in, n_out_total);
  if (first < 0 || n <= 0 || first + n > n_out_total) {
    fail_load("tensor '" + name + "': rows [" + std::to_string(first) + ", " +
              std::to_string(first + n) + ") are outside its " + std::to_string(n_out_total) +
              " rows");
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
  if (!g)
    fail_load("tensor '" + name + "' is missing (expected shape [" + std::to_string(n) + "])");
  return bind(*g, false, n, 1);
}

tensor model_loader::vector_optional(const std::string& name, int64_t n) {
  const gguf_tensor* g = file_.find_tensor(name);
  return g ? bind(*g, false, n, 1) : tensor{};
}

model_file model::open(const std::string& path) {
  auto f = model_file::open(path);
  if (!f) {
    // The handle's errors name the path; said once.
    std::string why = f.message();
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    throw std::runtime_error("loading model " + path + ": " + why);
  }
  return std::move(f).value();
}

std::unique_ptr<model> model::load(const std::string& path, const model_params& params) {
  return load(open(path), params);
}

std::unique_ptr<model> model::load(model_file file, const model_params& params) {
  std::unique_ptr<model> m(new model());
  const std::string path = file.path;
  try {
    m->file_ = std::move(file);
    m->hparams_ = m->file_.hparams;
    m->arch_ = architecture_for(m->hparams_.arch);  // model_hparams_read checked it is supported
    {
      auto v = vocab::from_gguf(m->file_.gguf);
      if (!v) fail_load("loading vocabulary: " + v.message());
      m->vocab_ = std::move(v).value();
    }
    if (m->hparams_.n_vocab != m->vocab_.n_tokens()) {
      fail_load(m->hparams_.arch + ".vocab_size is " + std::to_string(m->hparams_.n_vocab) +
                " but the vocabulary has " + std::to_string(m->vocab_.n_tokens()) + " tokens");
    }

    m->backend_ = params.make_backend ? params.make_backend() : make_cpu_backend(params.n_threads);
    if (!m->backend_) fail_load("no backend to load the weights onto");
    if (const std::string bad = layer_range_check(params.layers, m->hparams_.n_layer);
        !bad.empty()) {
      fail_load(bad);
    }
    m->layers_ = params.layers.resolved(m->hparams_.n_layer);
    model_loader ld(m->file_.gguf, *m->backend_, m->weights_.parts, m->layers_);
    m->arch_->load(ld, m->hparams_, m->weights_);
    m->weight_bytes_ = ld.bound_bytes();

    // The CPU backend reads the weights from host memory, mapped from the file; a device backend
    // has them uploaded (its caller checks the device's memory). A mixture of experts needs only
    // the experts its tokens are routed to resident (pages of the others stay on disk): what must
    // fit is one step's share, the same count the node budgets with (model_weights_count).
    const system_info sys = system_info_read();
    // A stage holds only its layers' share (bound_bytes counts what it bound; a stage of a
    // mixture of experts is counted whole, which errs on the side of refusing).
    const uint64_t resident =
        m->layers_.whole(m->hparams_.n_layer)
            ? model_weights_counted(m->file_.gguf, m->hparams_).bytes_touched(1)
            : m->weight_bytes_;
    if (!params.make_backend && sys.mem_available > 0 && resident > sys.mem_available) {
      fail_load("the weights need " + format_bytes(resident) + " of memory but only " +
                format_bytes(sys.mem_available) + " is available");
    }
    // Paged in ahead only when the whole file fits: a larger mixture of experts pages its experts
    // in as tokens choose them.
    // A stage's tensors are a part of the file: they are paged in as it first runs them (a
    // context's warm_up), not the whole file ahead.
    const bool fits = sys.mem_available == 0 || m->weight_bytes_ <= sys.mem_available;
    if (params.progress && fits && m->layers_.whole(m->hparams_.n_layer)) {
      m->file_.gguf.prefetch(params.progress);
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("loading model " + path + ": " + e.what());
  }
  return m;
}

model::~model() = default;

}  // namespace hearth
