#include "engine/model-file.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <system_error>

#include "engine/import/hf-import.h"

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
  m.hf_dir = std::filesystem::is_directory(path, ec);
  auto f = !m.hf_dir      ? gguf_file::open(path)
           : what.weights ? hf_import(path)
                          : hf_import_metadata(path);
  if (!f) return f.err();
  m.gguf = std::move(f).value();
  if (what.hparams) {
    auto hp = model_hparams_read(m.gguf);
    if (!hp) return error{path + ": " + hp.message()};
    m.hparams = std::move(hp).value();
  }
  for (const auto& t : m.gguf.tensors()) m.weight_bytes += t.n_bytes;
  m.size_bytes = m.hf_dir ? safetensors_bytes(path) : m.gguf.file_size();
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

}  // namespace hearth
