// hearth quantize: a model (GGUF, or a Hugging Face folder) -> a GGUF of one of llama-quantize's
// file types, tensor for tensor what llama-quantize (no importance matrix) writes: the same type
// per tensor (engine/convert/quantize.h: tensor_type_for) and the same bytes (its reference
// quantizers). Tensors are converted while the file is written, so memory holds one output tensor
// and a small F32 buffer per thread; the output appears only once complete.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "engine/convert/quantize.h"
#include "engine/io/gguf-writer.h"
#include "engine/io/type-traits.h"
#include "engine/model.h"
#include "engine/thread-pool.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct quantize_options {
  std::string in;
  std::string out;
  std::string type;
  int threads = 0;
  bool verbose = false;
};

// Rows are handed out in chunks of about this many values: enough work per hand-out to keep the
// threads busy, and a small F32 buffer each.
constexpr int64_t k_chunk_values = 1 << 16;

uint64_t uint_or_zero(const gguf_file& f, const std::string& key) {
  auto v = f.get_uint(key);
  return v && *v ? **v : 0;
}

quant_model_info model_info(const gguf_file& f) {
  quant_model_info m;
  auto arch = f.get_string("general.architecture");
  if (!arch || !*arch) throw std::runtime_error("the model has no general.architecture");
  m.arch = **arch;
  m.n_layer = int(uint_or_zero(f, m.arch + ".block_count"));
  m.n_head = int(uint_or_zero(f, m.arch + ".attention.head_count"));
  m.n_head_kv = int(uint_or_zero(f, m.arch + ".attention.head_count_kv"));
  if (m.n_head_kv == 0) m.n_head_kv = m.n_head;
  m.n_expert = int(uint_or_zero(f, m.arch + ".expert_count"));
  m.has_output = f.find_tensor("output.weight") != nullptr;
  return m;
}

// Fails before any work when `out` cannot be created, rather than after minutes of quantizing.
void check_writable(const std::string& out) {
  namespace fs = std::filesystem;
  const fs::path p(out);
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::runtime_error("cannot write " + out + ": directory " + dir.string() +
                             " does not exist");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw std::runtime_error("cannot write " + out + ": directory " + dir.string() +
                             " is not writable");
  }
  if (fs::is_directory(p, ec)) throw std::runtime_error("cannot write " + out + ": a directory");
}

// Converts tensor `src` into `out` (type `to`): rows to F32 through the type's conversion, then
// quantize_rows, chunks of rows spread over the pool.
void convert_tensor(thread_pool& pool, const gguf_tensor& src, tensor_type to,
                    std::span<uint8_t> out) {
  if (src.type == to) {
    std::copy(src.data, src.data + src.n_bytes, out.begin());
    return;
  }
  const to_float_fn to_float = tensor_type_traits_of(src.type).to_float;
  if (!to_float) {
    throw std::runtime_error("tensor '" + src.name + "' has type " +
                             std::string(tensor_type_name(src.type)) +
                             ", which cannot be converted to F32");
  }
  const int64_t n_per_row = src.ne[0];
  const int64_t n_rows = src.n_elements() / n_per_row;
  const int64_t src_row_bytes = tensor_type_row_bytes(src.type, n_per_row);
  const int64_t dst_row_bytes = tensor_type_row_bytes(to, n_per_row);
  const int64_t chunk_rows = std::max<int64_t>(1, k_chunk_values / n_per_row);
  // The block quantizers' scales come from max |x|: one NaN or infinity would silently ruin
  // its block (llama-quantize rejects such output afterwards).
  const bool check_finite =
      to != tensor_type::f32 && to != tensor_type::f16 && to != tensor_type::bf16;
  std::atomic<int64_t> next{0};
  std::exception_ptr failed;  // a worker must not throw: it would end the process
  std::mutex failed_mu;
  pool.run([&](int, int) {
    try {
      std::vector<float> f32(size_t(chunk_rows * n_per_row));
      for (;;) {
        const int64_t r0 = next.fetch_add(chunk_rows);
        if (r0 >= n_rows) break;
        const int64_t rows = std::min(chunk_rows, n_rows - r0);
        to_float(src.data + r0 * src_row_bytes, f32.data(), rows * n_per_row);
        if (check_finite) {
          for (int64_t i = 0; i < rows * n_per_row; ++i) {
            if (!std::isfinite(f32[size_t(i)])) {
              throw std::runtime_error("tensor '" + src.name + "' has a non-finite value in row " +
                                       std::to_string(r0 + i / n_per_row) + ": cannot quantize it");
            }
          }
        }
        quantize_rows(to, f32.data(), out.data() + r0 * dst_row_bytes, rows, n_per_row);
      }
    } catch (...) {
      next = n_rows;
      std::lock_guard<std::mutex> lock(failed_mu);
      if (!failed) failed = std::current_exception();
    }
  });
  if (failed) std::rethrow_exception(failed);
}

// The order llama-quantize writes tensors in (llama_model_loader's weight_name_comparer): by
// block number, tensors outside the blocks first, then by name.
std::vector<const gguf_tensor*> llama_quantize_order(const gguf_file& f) {
  auto layer = [](const std::string& name) {
    int n = -1;
    return std::sscanf(name.c_str(), "blk.%d.", &n) == 1 ? n : -1;
  };
  std::vector<const gguf_tensor*> order;
  for (const auto& t : f.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [&](const gguf_tensor* a, const gguf_tensor* b) {
    const int la = layer(a->name), lb = layer(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  return order;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / (1 << 20));
  return buf;
}

int quantize(const quantize_options& o) {
  const auto ft = file_type_from_name(o.type);
  if (!ft) {
    throw std::runtime_error("unknown type '" + o.type + "' (accepted: " + file_type_names() + ")");
  }
  // Any GGUF file quantizes, as llama-quantize's do: only the keys the type choice reads count.
  auto opened = model_file::open(o.in, {.hparams = false});
  if (!opened) throw std::runtime_error(opened.message());
  const gguf_file& in = opened->gguf;
  check_writable(o.out);
  const quant_model_info info = model_info(in);

  const auto start = std::chrono::steady_clock::now();
  gguf_writer w;
  // The metadata as llama-quantize writes it, so that the whole file (not only each tensor)
  // equals its output: every key in order except the two it sets, which it appends: the
  // format version of the quantized blocks (ggml's GGML_QNT_VERSION) and the file type that
  // names the mix. Split keys are dropped: the output is one file.
  for (const auto& kv : in.metadata()) {
    if (kv.key == "general.quantization_version" || kv.key == "general.file_type" ||
        kv.key.rfind("split.", 0) == 0) {
      continue;
    }
    w.set(kv.key, kv.value);
  }
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", file_type_id(*ft));

  thread_pool pool(o.threads > 0 ? o.threads : thread_pool::hardware_threads());
  uint64_t bytes_in = 0, bytes_out = 0;
  for (const gguf_tensor* tp : llama_quantize_order(in)) {
    const gguf_tensor& t = *tp;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    const tensor_type to = tensor_type_for(*ft, info, t.name, ne);
    bytes_in += t.n_bytes;
    bytes_out += uint64_t(t.n_elements() / t.ne[0] * tensor_type_row_bytes(to, t.ne[0]));
    if (o.verbose) {
      std::printf("%-36s %-14s %6s -> %s\n", t.name.c_str(), t.shape_string().c_str(),
                  std::string(tensor_type_name(t.type)).c_str(),
                  std::string(tensor_type_name(to)).c_str());
    }
    const gguf_tensor* src = &t;  // the file outlives write_file below
    w.add_tensor_lazy(t.name, to, std::move(ne), [&pool, src, to](std::span<uint8_t> out) {
      convert_tensor(pool, *src, to, out);
    });
  }
  auto written = w.write_file(o.out);
  if (!written) throw std::runtime_error(written.message());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu tensors, %s -> %s (%s) in %.2f s\n", o.out.c_str(), in.tensors().size(),
              mib(bytes_in).c_str(), mib(bytes_out).c_str(),
              std::string(file_type_name(*ft)).c_str(), seconds);
  return 0;
}

}  // namespace

action add_quantize(CLI::App& app) {
  auto o = std::make_shared<quantize_options>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Write a model as a quantized GGUF, as llama-quantize does (no imatrix)");
  cmd->add_option("in", o->in, "Model: a GGUF file or a Hugging Face model directory")->required();
  cmd->add_option("out", o->out, "Output GGUF file (replaced when complete)")->required();
  cmd->add_option("type", o->type, "File type: " + file_type_names())->required();
  cmd->add_option("--threads,-t", o->threads, "Threads (default: one per hardware thread)");
  cmd->add_flag("--verbose,-v", o->verbose, "One line per tensor: name, shape, old -> new type");
  return [o] { return quantize(*o); };
}

}  // namespace hearth::cli
