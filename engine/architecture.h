// One model family (llama, qwen2, ...): how its hyperparameters and tensors are read from GGUF and
// how its forward pass runs on a backend. One implementation per file under engine/models/.
#pragma once

#include <memory>
#include <string_view>

#include "engine/model.h"

namespace hearth {

struct forward_batch;

class architecture {
 public:
  virtual ~architecture() = default;

  // general.architecture value this implementation serves.
  virtual std::string_view name() const = 0;

  // Reads hyperparameters into `hp` (the common fields are already filled from the file's
  // generic keys) and binds every tensor into `w`, checking types and shapes.
  virtual void load(model_loader& ld, model_hparams& hp, model_weights& w) const = 0;

  // Runs one micro-batch from token ids to the logits of the selected rows (engine/forward.h).
  virtual void forward(const model& m, forward_batch& fb) const = 0;
};

// The implementation for a general.architecture value, or nullptr when unsupported.
std::unique_ptr<architecture> architecture_for(std::string_view name);

// Names of the supported architectures, for error messages.
std::string_view supported_architectures();

}  // namespace hearth
