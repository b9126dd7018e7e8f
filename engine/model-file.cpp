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

uint64_t model_weights_count::bytes_touched(int32_t n_seq) const {
  if (n_expert <= 0 || bytes_experts == 0) return bytes_other + bytes_experts;
  const int64_t used = std::min<int64_t>(n_expert, int64_t(std::max(n_seq, 1)) * n_expert_used);
  return bytes_other + bytes_experts / uint64_t(n_expert) * uint64_t(used);
}

}  // namespace hearth
