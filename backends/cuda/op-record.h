// One recorded op of the CUDA backend: the call's arguments, kept until the step is launched.
// A step's ops are launched eagerly or captured into a CUDA graph; the key of a step (every
// argument but the dynamic ones) says whether a cached graph replays it exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cuda/kernels.h"
#include "engine/backend.h"

namespace hearth::cuda {

enum class op_kind : uint8_t {
  get_rows,
  mul_mat,
  rms_norm,
  rope,
  kv_store,
  attention,
  elementwise,
  moe_route,
  mul_mat_id,
  moe_combine
};

struct op_record {
  op_kind kind = op_kind::get_rows;
  // Operands in the order of the backend call (absent ones have data == nullptr).
  tensor t[8];
  int n_t = 0;
  float f[2] = {0, 0};
  int32_t i[2] = {0, 0};  // mul_mat: i[0] = 1 when x is already rounded in the round scratch
  rope_params rope;
  attention_params attn;
  elementwise_op ew = elementwise_op::add;
  // Dynamic: attention's cell count, written to the device-side parameter slot `slot` before the
  // step runs. Not part of the key: a graph replays with a new value.
  int32_t n_cells = 0;
  int32_t slot = -1;
};

// Appends everything of `r` that a replay must match (op, operand pointers, types and shapes,
// parameters) to `key`.
void append_key(const op_record& r, std::vector<int64_t>& key);

}  // namespace hearth::cuda
