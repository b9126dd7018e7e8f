#include "engine/architecture.h"

#include <string>

#include "engine/import/model-family.h"

namespace hearth {

// The families and their factories are the rows of engine/import/model-family.cpp.
std::unique_ptr<architecture> architecture_for(std::string_view name) {
  const model_family* f = model_family_by_gguf(name);
  return f ? f->make() : nullptr;
}

std::string_view supported_architectures() {
  static const std::string names = model_family_gguf_names();
  return names;
}

}  // namespace hearth
