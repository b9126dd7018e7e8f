// The models a node serves: every *.gguf file directly in its models directory and every
// Hugging Face model directory there (a folder with config.json), described from metadata alone
// (a GGUF header is mapped, safetensors weights are never opened). A file that does
// not parse is left out and reported, so one bad download does not take the node down.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "schema/messages.h"

namespace hearth::node {

// A file of the models directory that is not a usable GGUF model, and why.
struct model_catalog_error {
  std::string path;
  std::string error;
};

struct model_catalog_entry {
  wire::model_info info;  // loaded is always false here; engines set it
  std::string path;
};

class model_catalog {
 public:
  // Reads every *.gguf file and model folder of `dir` (not recursive). Throws std::runtime_error
  // naming the directory when it is missing or cannot be listed; bad files go to errors() instead.
  static model_catalog scan(const std::string& dir);

  // Models sorted by name.
  const std::vector<model_catalog_entry>& entries() const { return entries_; }
  // Files that were skipped, for the caller to log.
  const std::vector<model_catalog_error>& errors() const { return errors_; }
  // The model of that name, or nullptr.
  const model_catalog_entry* find(std::string_view name) const;
  // The file of the model of that name, or "" when there is none.
  std::string path_of(std::string_view name) const;
  // Every model's info, in name order.
  std::vector<wire::model_info> models() const;
  // The directory that was scanned.
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<model_catalog_entry> entries_;
  std::vector<model_catalog_error> errors_;
};

// A model's description from its handle (engine/model-file.h, opened without a Hugging Face
// directory's weights); an error naming the file when it does not parse, its
// architecture is unsupported or a hyperparameter is missing.
result<wire::model_info> model_info_read(const std::string& path);

// The name of a llama.cpp file type (general.file_type; engine/convert/quantize.h llama_ftype_name)
// as models are listed: "Q4_K_M", "ftype 99".
std::string model_file_type_name(uint64_t ftype);

}  // namespace hearth::node
