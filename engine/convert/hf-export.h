// The converter from a GGUF model to a Hugging Face model directory (`hearth convert`): a
// converter above the runtime, which loads the model (model::load) to read it; hf_import
// (engine/import/hf-import.h) reads what it writes back as the same model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "engine/io/gguf.h"
#include "engine/io/tensor-type.h"

namespace hearth {

struct hf_export_params {
  // Type of the matrices written: f32, f16 or bf16. Nothing: each matrix keeps its type when it
  // is F32/F16/BF16 and quantized ones are dequantized to F32. Vectors (norms, biases) are always
  // written in F32, the type the engine reads them in, so nothing is lost on them.
  std::optional<tensor_type> type;
  // Number of safetensors files (1: model.safetensors; more: HF's sharded naming + index).
  int n_shards = 1;
};

struct hf_export_summary {
  std::vector<std::string> files;     // written, relative to the directory
  uint64_t tensor_bytes = 0;          // total of the safetensors data sections
  std::vector<std::string> warnings;  // values that will not come back exactly, and why
};

// The tokenizer files of a Hugging Face directory for the vocabulary in `f`'s tokenizer.ggml.*
// metadata, as (file name, contents): tokenizer.model (a SentencePiece BPE ModelProto, for
// "llama" vocabularies) or tokenizer.json (byte-level BPE, "gpt2"), and tokenizer_config.json
// (special tokens, add_bos/eos_token, chat_template). The importers (sp_model_metadata,
// hf_tokenizer_metadata) read them back as the same vocabulary.
result<std::vector<std::pair<std::string, std::string>>> hf_tokenizer_files(const gguf_file& f);

// Writes the GGUF model at `gguf_path` as a Hugging Face model directory `dir` (created if
// needed; files already there are replaced): config.json, the safetensors and the tokenizer
// files above. Applies the inverse transformations (Q/K un-permuted, gemma norms − 1), so that
// hf_import(dir) gives the engine bit-identical weights when no type conversion rounds.
result<hf_export_summary> hf_export(const std::string& gguf_path, const std::string& dir,
                                    const hf_export_params& params);

}  // namespace hearth
