// A model file opened once: a GGUF file or a Hugging Face model directory (imported as the
// equivalent GGUF, engine/import/hf-import.h), with the hyperparameters every family stores under
// the same `<arch>.` keys read once. Placement (backends/select.h), the loader (model::load) and
// the node's catalog all read this handle; it is the one place that decides "a directory is a
// Hugging Face model".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/io/gguf.h"
#include "engine/layer-range.h"
#include "engine/model-hparams.h"

namespace hearth {

// What model_file::open() reads besides the file's metadata.
struct model_file_parts {
  // A Hugging Face directory's safetensors (a GGUF file is mapped either way, not read). Without
  // them a directory is described cheaply enough to list every model of a folder.
  bool weights = true;
  // The hyperparameters (else left zero): off for the tokenizer of a vocabulary-only GGUF file
  // or a converter that reads any GGUF file (`hearth quantize`).
  bool hparams = true;
};

struct model_file {
  std::string path;
  bool hf_dir = false;  // a Hugging Face model directory (else a GGUF file)
  gguf_file gguf;       // a directory opened without its weights has no tensors
  // The GGUF files read: `path`, or every part of a split model (engine/io/gguf-split.h), whose
  // joined tensors point into each part; empty for a Hugging Face directory.
  std::vector<std::string> gguf_paths;
  // The common hyperparameters (the architecture's own family keys are read by its load()).
  model_hparams hparams;
  uint64_t weight_bytes = 0;  // bytes of every tensor (0 for a directory opened without weights)
  uint64_t size_bytes = 0;    // on disk: the GGUF file(s), or a directory's safetensors files

  // Opens `path`: a directory is a Hugging Face model (config.json, safetensors, tokenizer), or
  // a split GGUF model when it holds one's parts; anything else a GGUF file, or the first part of
  // a split model (its other parts beside it). An error names the path and the problem: the file
  // does not parse, its architecture is unsupported, a hyperparameter is missing or out of range.
  static result<model_file> open(const std::string& path, model_file_parts what = {});

  // Times a model was opened in this process, so that tests can prove a load reads (for a
  // directory: imports) its model once.
  static uint64_t opened_count();

  // The tensor type holding most of the weight bytes ("q8_0"); "none" without tensors.
  std::string dominant_type() const;
};

// A model's parameters and weight bytes from its tensors' shapes, the experts' tensors (a mixture
// of experts' `blk.N.ffn_{gate,up,down}_exps.weight`, [n_in, n_out, n_expert]) apart from the rest.
// A dense model has no expert tensors: its active count is its total.
struct model_weights_count {
  uint64_t params_total = 0;
  // Used for one token: every tensor but the (n_expert - n_expert_used) unused experts' share.
  uint64_t params_active = 0;
  uint64_t bytes_experts = 0;  // the expert tensors
  uint64_t bytes_other = 0;    // every other tensor (attention, norms, router, embeddings, ...)
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;

  // Weight bytes one decoding step of `n_seq` sequences touches: every other tensor and the share
  // of min(n_expert, n_seq × n_expert_used) experts of each expert tensor. The whole file for a
  // dense model.
  uint64_t bytes_touched(int32_t n_seq) const;
};

model_weights_count model_weights_counted(const gguf_file& f, const model_hparams& hp);

// A model's weight bytes by where a pipeline split puts them (engine/layer-range.h): each layer's
// `blk.<i>.` tensors, the token embeddings (the first stage), the output norm and head (the last
// stage; the embedding table again when the head is tied), and the rest (rope frequencies),
// which every stage holds. What the split planner weighs (broker/split-plan.h): a stage loaded
// with a range binds exactly stage_bytes(range) (tests/pipeline_stages_test.cpp).
struct model_layer_bytes {
  std::vector<uint64_t> layers;  // by layer index
  uint64_t input = 0;
  uint64_t output = 0;
  uint64_t shared = 0;
  bool tied = false;  // `output` counts the embedding table: a whole model binds it once
  // A resolved range's bytes.
  uint64_t stage_bytes(const layer_range& r) const;
};

model_layer_bytes model_layer_bytes_of(const gguf_file& f, const model_hparams& hp);

}  // namespace hearth
