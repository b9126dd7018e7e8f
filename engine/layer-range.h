// Layers [first, end) of a model: what one stage of a pipeline holds when a model is split across
// machines (issue 55; the broker plans the stages: broker/split-plan.h). The stage holding layer
// 0 also holds the token embeddings and embeds token ids; the one holding the last layer also
// holds the output norm and head and computes logits. Every other stage reads and writes the
// residual stream (F32 rows of n_embd). A whole model is the range [0, n_layer): first and last.
#pragma once

#include <cstdint>
#include <string>

namespace hearth {

struct layer_range {
  int32_t first = 0;
  int32_t end = -1;  // -1: through the last layer

  // The range with end -1 replaced by n_layer.
  layer_range resolved(int32_t n_layer) const { return {first, end < 0 ? n_layer : end}; }
  int32_t size() const { return end - first; }
  bool holds(int32_t il) const { return il >= first && il < end; }
  // Of a resolved range of a model of n_layer layers:
  bool has_input() const { return first == 0; }
  bool has_output(int32_t n_layer) const { return end == n_layer; }
  bool whole(int32_t n_layer) const { return first == 0 && end == n_layer; }
  bool operator==(const layer_range&) const = default;
};

// "" when `r` is a valid range of a model of n_layer layers (end -1 allowed), else why not.
inline std::string layer_range_check(const layer_range& r, int32_t n_layer) {
  const layer_range x = r.resolved(n_layer);
  if (x.first < 0 || x.first >= x.end || x.end > n_layer) {
    return "layer range [" + std::to_string(r.first) + ", " + std::to_string(x.end) +
           ") is not within the model's " + std::to_string(n_layer) + " layers";
  }
  return "";
}

}  // namespace hearth
