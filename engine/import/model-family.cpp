#include "engine/import/model-family.h"

#include <iterator>

namespace hearth {

// One factory per file under engine/models/ (defined there; called by the loader only).
std::unique_ptr<architecture> make_llama_architecture();
std::unique_ptr<architecture> make_qwen2_architecture();
std::unique_ptr<architecture> make_qwen3_architecture();
std::unique_ptr<architecture> make_qwen3moe_architecture();
std::unique_ptr<architecture> make_phi3_architecture();
std::unique_ptr<architecture> make_gemma_architecture();
std::unique_ptr<architecture> make_gemma2_architecture();
std::unique_ptr<architecture> make_gemma3_architecture();

namespace {

constexpr model_family k_families[] = {
    {.gguf = "llama",
     .make = make_llama_architecture,
     .hf_model_types = {"llama", "mistral"},
     .hf_classes = {"LlamaForCausalLM", "MistralForCausalLM"},
     .permute_qk = true,
     .attention_bias_key = true,
     .mlp_bias_key = true},
    {.gguf = "llama",  // Mixtral: llama with experts
     .make = make_llama_architecture,
     .moe = moe_style::mixtral,
     .hf_model_types = {"mixtral"},
     .hf_classes = {"MixtralForCausalLM"},
     .permute_qk = true,
     .default_eps = 1e-5},
    {.gguf = "qwen2",
     .make = make_qwen2_architecture,
     .hf_model_types = {"qwen2"},
     .hf_classes = {"Qwen2ForCausalLM"},
     .qkv_bias = true},
    {.gguf = "qwen3",
     .make = make_qwen3_architecture,
     .hf_model_types = {"qwen3"},
     .hf_classes = {"Qwen3ForCausalLM"},
     .qk_norm = true,
     .default_head_dim = 128,
     .attention_bias_key = true},
    {.gguf = "qwen3moe",
     .make = make_qwen3moe_architecture,
     .moe = moe_style::qwen,
     .hf_model_types = {"qwen3_moe"},
     .hf_classes = {"Qwen3MoeForCausalLM"},
     .qk_norm = true,
     .default_head_dim = 128,
     .attention_bias_key = true},
    {.gguf = "phi3",
     .make = make_phi3_architecture,
     .hf_model_types = {"phi3"},
     .hf_classes = {"Phi3ForCausalLM"},
     .fused = true,
     .default_eps = 1e-5,
     .sliding_window = true,
     .partial_rotary = true},
    {.gguf = "gemma",
     .make = make_gemma_architecture,
     .hf_model_types = {"gemma"},
     .hf_classes = {"GemmaForCausalLM"},
     .norm_plus_one = true,
     .tied_default = true,
     .default_head_dim = 256,
     .gelu = true},
    {.gguf = "gemma2",
     .make = make_gemma2_architecture,
     .hf_model_types = {"gemma2"},
     .hf_classes = {"Gemma2ForCausalLM"},
     .norm_plus_one = true,
     .post_norms = true,
     .tied_default = true,
     .default_head_dim = 256,
     .sliding_window = true,
     .gelu = true},
    {.gguf = "gemma3",
     .make = make_gemma3_architecture,
     .hf_model_types = {"gemma3_text"},
     .hf_classes = {"Gemma3ForCausalLM"},
     .hf_multimodal_type = "gemma3",  // Gemma3ForConditionalGeneration
     .norm_plus_one = true,
     .post_norms = true,
     .qk_norm = true,
     .tied_default = true,
     .default_head_dim = 256,
     .default_rope_theta = 1000000,
     .gelu = true},
};

}  // namespace

std::span<const model_family> model_families() {
  return k_families;
}

const model_family* model_family_by_gguf(std::string_view name, bool experts) {
  const model_family* only = nullptr;
  int n = 0;
  for (const auto& f : k_families) {
    if (f.gguf != name) continue;
    if ((f.moe != moe_style::none) == experts) return &f;
    only = &f;
    ++n;
  }
  return n == 1 ? only : nullptr;
}

const model_family* model_family_by_hf(std::string_view name) {
  if (name.empty()) return nullptr;
  for (const auto& f : k_families) {
    for (std::string_view n : f.hf_model_types)
      if (n == name) return &f;
    for (std::string_view n : f.hf_classes)
      if (n == name) return &f;
  }
  return nullptr;
}

std::string model_family_gguf_names() {
  std::string out;
  for (size_t i = 0; i < std::size(k_families); ++i) {
    bool named = false;  // llama and Mixtral share one name
    for (size_t j = 0; j < i; ++j) named |= k_families[j].gguf == k_families[i].gguf;
    if (!named) out += (out.empty() ? "" : ", ") + std::string(k_families[i].gguf);
  }
  return out;
}

std::string model_family_hf_names() {
  std::string out;
  auto add = [&](std::string_view n) {
    if (!n.empty()) out += (out.empty() ? "" : ", ") + std::string(n);
  };
  for (const auto& f : k_families)
    for (std::string_view n : f.hf_model_types) add(n);
  for (const auto& f : k_families) add(f.hf_multimodal_type);
  return out;
}

}  // namespace hearth
