// Hugging Face model directories: the second way a model reaches the engine (engine/model-file.h
// opens a directory through here). A low-level reader: it never calls up into model::load.
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

#include <string>

#include "common/result.h"
#include "engine/io/gguf.h"

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

}  // namespace hearth
