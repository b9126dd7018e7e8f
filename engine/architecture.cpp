#include "engine/architecture.h"

#include <string>

namespace hearth {

// One factory per file under engine/models/.
std::unique_ptr<architecture> make_llama_architecture();
std::unique_ptr<architecture> make_qwen2_architecture();
std::unique_ptr<architecture> make_phi3_architecture();
std::unique_ptr<architecture> make_gemma_architecture();
std::unique_ptr<architecture> make_gemma2_architecture();
std::unique_ptr<architecture> make_gemma3_architecture();
std::unique_ptr<architecture> make_qwen3_architecture();
std::unique_ptr<architecture> make_qwen3moe_architecture();

std::unique_ptr<architecture> architecture_for(std::string_view name) {
  if (name == "llama") return make_llama_architecture();
  if (name == "qwen2") return make_qwen2_architecture();
  if (name == "phi3") return make_phi3_architecture();
  if (name == "gemma") return make_gemma_architecture();
  if (name == "gemma2") return make_gemma2_architecture();
  if (name == "gemma3") return make_gemma3_architecture();
  if (name == "qwen3") return make_qwen3_architecture();
  if (name == "qwen3moe") return make_qwen3moe_architecture();
  return nullptr;
}

std::string_view supported_architectures() {
  return "llama, qwen2, qwen3, qwen3moe, phi3, gemma, gemma2, gemma3";
}

}  // namespace hearth
