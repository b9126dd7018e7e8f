#include "engine/architecture.h"

#include <string>

namespace hearth {

// One factory per file under engine/models/.
std::unique_ptr<architecture> make_llama_architecture();

std::unique_ptr<architecture> architecture_for(std::string_view name) {
  if (name == "llama") return make_llama_architecture();
  return nullptr;
}

std::string_view supported_architectures() {
  return "llama";
}

}  // namespace hearth
