// out[i, :] = table[ids[i], :] as F32; one workgroup per output row. Per weight type: WEIGHT_TYPE.
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Weights { uint weights[]; };
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint cols;
  uint n;
  uint row_bytes;  // bytes of one table row
  uint first_row;  // the table's rows this buffer holds (a row part of a larger table:
  uint n_rows;     // buffer::first_row, n_rows); ids outside them are another part's
} p;

#include "dequant.glsl"

void main() {
  uint i = group_index();
  if (i >= p.n) return;
  uint id = uint(ids[i]);  // a negative id wraps to a large one: outside every part
  if (id < p.first_row || id - p.first_row >= p.n_rows) return;
  uint row = (id - p.first_row) * p.row_bytes;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += BLOCK) dst[i * p.cols + j] = dequant(row, j);
}
