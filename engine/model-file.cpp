#include "engine/model-file.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <system_error>

#include "engine/import/hf-import.h"
#include "engine/io/gguf-split.h"

namespace hearth {
namespace {

std::atomic<uint64_t> g_opened{0};

uint64_t safetensors_bytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    const uint64_t n = e.file_size(size_ec);
    if (e.path().extension() == ".safetensors" && !size_ec) total += n;
  }
  return total;
}

}  // namespace

result<model_file> model_file::open(const std::string& path, model_file_parts what) {
  ++g_opened;
  model_file m;
  m.path = path;
  // A directory is a Hugging Face model (GGUF models are files). One without config.json fails in
  // the importer, saying so.
  std::error_code ec;
  const bool dir = std::filesystem::is_directory(path, ec);
  // A folder without config.json that holds one split GGUF model (a model store's view of one)
  // is that model.
  const auto split_first =
      dir && !std::filesystem::exists(std::filesystem::path(path) / "config.json", ec)
          ? gguf_split_first_part_in(path)
          : std::nullopt;
  m.hf_dir = dir && !split_first;
  if (m.hf_dir) {
    auto f = what.weights ? hf_import(path) : hf_import_metadata(path);
    if (!f) return f.err();
    m.gguf = std::move(f).value();
  } else {
    auto f = gguf_model_open(split_first.value_or(path));
    if (!f) return f.err();
    m.gguf = std::move(f->gguf);
    m.gguf_paths = std::move(f->paths);
    m.size_bytes = f->file_bytes;
  }
  if (what.hparams) {
    auto hp = model_hparams_read(m.gguf);
    if (!hp) return error{path + ": " + hp.message()};
    m.hparams = std::move(hp).value();
  }
  for (const auto& t : m.gguf.tensors()) m.weight_bytes += t.n_bytes;
  if (m.hf_dir) m.size_bytes = safetensors_bytes(path);
  return m;
}

uint64_t model_file::opened_count() {
  return g_opened.load();
}

std::string model_file::dominant_type() const {
  std::map<tensor_type, uint64_t> bytes;
  for (const auto& t : gguf.tensors()) bytes[t.type] += t.n_bytes;
  auto it = std::max_element(bytes.begin(), bytes.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
  return it == bytes.end() ? "none" : std::string(tensor_type_name(it->first));
}

model_weights_count model_weights_counted(const gguf_file& f, const model_hparams& hp) {
  model_weights_count c;
  c.n_expert = hp.n_expert;
  c.n_expert_used = hp.n_expert_used;
  uint64_t expert_params = 0;
  for (const auto& t : f.tensors()) {
    const auto n = uint64_t(t.n_elements());
    c.params_total += n;
    const bool expert =
        hp.n_expert > 0 && t.name.ends_with("_exps.weight") && t.ne[2] == hp.n_expert;
    (expert ? c.bytes_experts : c.bytes_other) += t.n_bytes;
    if (expert) expert_params += n;
  }
  c.params_active = c.params_total;
  if (c.n_expert > 0 && c.n_expert_used < c.n_expert) {
    c.params_active -=
        expert_params / uint64_t(c.n_expert) * uint64_t(c.n_expert - c.n_expert_used);
  }
  return c;
}

model_layer_bytes model_layer_bytes_of(const gguf_file& f, const model_hparams& hp) {
  model_layer_bytes b;
  b.layers.assign(size_t(std::max(hp.n_layer, 0)), 0);
  bool tied = true;
  uint64_t embd = 0;
  for (const auto& t : f.tensors()) {
    if (t.name == "token_embd.weight") {
      embd = t.n_bytes;
    } else if (t.name == "output_norm.weight") {
      b.output += t.n_bytes;
    } else if (t.name == "output.weight") {
      b.output += t.n_bytes;
      tied = false;
    } else if (t.name.starts_with("blk.")) {
      // blk.<i>.: a layer index in range, else (a malformed name) shared.
      int64_t il = 0;
      size_t at = 4;
      while (at < t.name.size() && t.name[at] >= '0' && t.name[at] <= '9' && il < (1 << 20)) {
        il = il * 10 + (t.name[at++] - '0');
      }
      const bool layer = at > 4 && at < t.name.size() && t.name[at] == '.' && il < hp.n_layer;
      (layer ? b.layers[size_t(il)] : b.shared) += t.n_bytes;
    } else {
      b.shared += t.n_bytes;
    }
  }
  b.input = embd;
  b.tied = tied;
  if (tied) b.output += embd;
  return b;
}

uint64_t model_layer_bytes::stage_bytes(const layer_range& r) const {
  const int32_t n_layer = int32_t(layers.size());
  uint64_t sum = shared + (r.has_input() ? input : 0) + (r.has_output(n_layer) ? output : 0);
  if (tied && r.has_input() && r.has_output(n_layer)) sum -= input;
  for (int32_t il = std::max(r.first, 0); il < std::min(r.end, n_layer); ++il) {
    sum += layers[size_t(il)];
  }
  return sum;
}

uint64_t model_weights_count::bytes_touched(int32_t n_seq) const {
  if (n_expert <= 0 || bytes_experts == 0) return bytes_other + bytes_experts;
  const int64_t used = std::min<int64_t>(n_expert, int64_t(std::max(n_seq, 1)) * n_expert_used);
  return bytes_other + bytes_experts / uint64_t(n_expert) * uint64_t(used);
}

}  // namespace hearth
