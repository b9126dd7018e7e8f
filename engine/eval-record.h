// A recording observer of the forward pass (engine/eval-callback.h): keeps the intermediates it
// is asked for, appending the rows of successive passes, so a prompt split into several passes
// (context_params::n_batch) records as if it had run in one. What `hearth eval --dump-layer`
// writes and what the tests compare.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/eval-callback.h"

namespace hearth {

struct recorded_intermediate {
  std::string name;
  int32_t layer = -1;
  int32_t n_dims = 2;            // as intermediate::n_dims: ne[n_dims - 1] counts rows
  int64_t ne[4] = {1, 1, 1, 1};  // rows summed over all passes
  std::vector<float> values;     // F32, ne[0] fastest

  // The reference's tensor name: "attn_norm-0" in a block, "result_output" outside.
  std::string label() const;
  int64_t row_size() const { return ne[0] * (n_dims == 3 ? ne[1] : 1); }
  int64_t n_rows() const { return ne[n_dims - 1]; }
};

class eval_record {
 public:
  // Records the intermediates `wants` accepts (absent: every one).
  explicit eval_record(std::function<bool(std::string_view name, int32_t layer)> wants = {});
  eval_record(const eval_record&) = delete;
  eval_record& operator=(const eval_record&) = delete;

  // What to pass to context::eval_callback_set; valid while this record lives.
  const eval_callback& callback() const { return cb_; }

  // In the order first computed.
  const std::vector<recorded_intermediate>& intermediates() const { return items_; }
  // The intermediate `name` of `layer`, or nullptr when none was recorded.
  const recorded_intermediate* find(std::string_view name, int32_t layer) const;
  void clear() { items_.clear(); }

 private:
  void append(const intermediate& i);

  eval_callback cb_;
  std::vector<recorded_intermediate> items_;
};

}  // namespace hearth
