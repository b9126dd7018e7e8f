#include "node/model-catalog.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <system_error>

#include "engine/gguf.h"
#include "engine/hf-model.h"
#include "engine/tensor-type.h"

namespace hearth::node {

std::string model_file_type_name(uint64_t ftype) {
  // llama.h LLAMA_FTYPE_*; the gaps are types llama.cpp removed.
  static const std::map<uint64_t, std::string_view> names = {
      {0, "F32"},      {1, "F16"},      {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
      {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
      {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
      {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"},
      {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"}, {26, "IQ3_S"},  {27, "IQ3_M"},
      {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"}, {31, "IQ1_M"},  {32, "BF16"},
      {36, "TQ1_0"},   {37, "TQ2_0"},
  };
  auto it = names.find(ftype);
  return it != names.end() ? std::string(it->second) : "ftype " + std::to_string(ftype);
}

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Files written without general.file_type (converters, our own writer) are named after the type
// holding most of their bytes.
std::string dominant_tensor_type(const gguf_file& f) {
  std::map<tensor_type, uint64_t> bytes;
  for (const auto& t : f.tensors()) bytes[t.type] += t.n_bytes;
  auto it = std::max_element(bytes.begin(), bytes.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
  return it == bytes.end() ? "none" : upper(tensor_type_name(it->first));
}

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

result<wire::model_info> model_info_read(const std::string& path) {
  // A directory is a Hugging Face model: its metadata comes from config.json and the tokenizer
  // (the weights are not opened) and its size is that of its safetensors files.
  const bool hf_dir = hf_is_model_dir(path);
  auto f = hf_dir ? hf_import_metadata(path) : gguf_file::open(path);
  if (!f) return f.err();
  auto arch = f->get_string("general.architecture");
  if (!arch) return error{path + ": " + arch.message()};
  if (!*arch) return error{path + ": metadata key 'general.architecture' is missing"};

  wire::model_info info;
  info.name = hf_dir ? std::filesystem::path(path).filename().string()
                     : std::filesystem::path(path).stem().string();
  info.architecture = **arch;
  auto ftype = f->get_uint("general.file_type");
  if (!ftype) return error{path + ": " + ftype.message()};
  info.quantization = *ftype ? model_file_type_name(**ftype) : dominant_tensor_type(*f);
  info.size_bytes = hf_dir ? safetensors_bytes(path) : f->file_size();
  auto n_ctx = f->get_uint(info.architecture + ".context_length");
  if (!n_ctx) return error{path + ": " + n_ctx.message()};
  info.context_length = uint32_t(std::min<uint64_t>(n_ctx->value_or(0), UINT32_MAX));
  return info;
}

model_catalog model_catalog::scan(const std::string& dir) {
  namespace fs = std::filesystem;
  model_catalog cat;
  cat.dir_ = dir;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw std::runtime_error("cannot read the models directory " + dir + ": " + ec.message());
  std::vector<fs::path> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    // Symlinks count by their target, so a models folder of links into a download cache works.
    std::error_code type_ec;
    const bool gguf = it->path().extension() == ".gguf" && it->is_regular_file(type_ec);
    const bool hf_dir =
        it->is_directory(type_ec) && fs::exists(it->path() / "config.json", type_ec);
    if (gguf || hf_dir) files.push_back(it->path());
  }
  if (ec) throw std::runtime_error("cannot read the models directory " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    auto info = model_info_read(p.string());
    if (!info) {
      cat.errors_.push_back({p.string(), info.message()});
      continue;
    }
    cat.entries_.push_back({std::move(info).value(), p.string()});
  }
  std::sort(cat.entries_.begin(), cat.entries_.end(),
            [](const auto& a, const auto& b) { return a.info.name < b.info.name; });
  return cat;
}

const model_catalog_entry* model_catalog::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& e, std::string_view n) { return e.info.name < n; });
  return it != entries_.end() && it->info.name == name ? &*it : nullptr;
}

std::string model_catalog::path_of(std::string_view name) const {
  const auto* e = find(name);
  return e ? e->path : std::string();
}

std::vector<wire::model_info> model_catalog::models() const {
  std::vector<wire::model_info> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.info);
  return out;
}

}  // namespace hearth::node
