// Hugging Face model directories: the second way a model reaches the engine, and the converter
// from GGUF back to one.
//
// A directory holds config.json, the weights as model.safetensors or as shards
// model-0000K-of-0000N.safetensors listed in model.safetensors.index.json, and the tokenizer
// (tokenizer.model, SentencePiece; or tokenizer.json). hf_import() turns it into the gguf_file
// llama.cpp's convert_hf_to_gguf.py would have written (in F32, F16 or BF16), so the rest of the
// engine cannot tell the two routes apart: the same metadata keys, the same tensor names, and the
// same transformations — llama/mistral Q and K rows permuted for adjacent-pair rope, gemma and
// gemma2 norm weights + 1, every vector (norms, biases) in F32. Matrices that need no change are
// used in place in the mapped safetensors files.
//
// Architectures (config.json model_type): llama, mistral (as llama), qwen2, phi3, gemma, gemma2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "engine/gguf.h"
#include "engine/tensor-type.h"

namespace hearth {

// Reads the model directory `dir`. Every file in it is untrusted: errors (never exceptions) name
// the file and what is wrong — a missing config.json, an unsupported model_type, a truncated
// safetensors file, a tensor missing from the shards, a shape that does not match config.json
// (naming the tensor, expected and actual).
result<gguf_file> hf_import(const std::string& dir);

// What hf_import(dir) gives without opening the weights: config.json's hyperparameters, the
// tokenizer, and general.file_type from config.json's torch_dtype, but no tensors. Cheap enough
// for a node to describe every model it has at startup.
result<gguf_file> hf_import_metadata(const std::string& dir);

// Whether model::load reads `path` as a Hugging Face model: it is a directory (GGUF models are
// files). A directory without config.json then fails in hf_import, saying so.
bool hf_is_model_dir(const std::string& path);

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
