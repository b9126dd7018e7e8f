#include "node/model-catalog.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "engine/convert/quantize.h"
#include "engine/model-file.h"

namespace hearth::node {

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string model_file_type_name(uint64_t ftype) {
  const auto name = llama_ftype_name(ftype);
  return name ? upper(*name) : "ftype " + std::to_string(ftype);
}

result<wire::model_info> model_info_read(const std::string& path) {
  // A Hugging Face directory's weights are not opened: its description comes from config.json
  // and the tokenizer, its size from its safetensors files.
  auto f = model_file::open(path, {.weights = false});
  if (!f) return f.err();
  wire::model_info info;
  info.name = f->hf_dir ? std::filesystem::path(path).filename().string()
                        : std::filesystem::path(path).stem().string();
  info.architecture = f->hparams.arch;
  auto ftype = f->gguf.get_uint("general.file_type");
  if (!ftype) return error{path + ": " + ftype.message()};
  // Files written without general.file_type (converters, our own writer) are named after the
  // type holding most of their bytes.
  info.quantization = *ftype ? model_file_type_name(**ftype) : upper(f->dominant_type());
  info.size_bytes = f->size_bytes;
  info.context_length = uint32_t(std::max(f->hparams.n_ctx_train, 0));
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
