// The rows of an expert product grouped by expert, for mul_mat.comp's MUL_MAT_ID variant: groups
// holds each expert's row count (n_expert uints), then for expert e, n_rows uints on from
// n_expert + e * n_rows, its rows in increasing order. One invocation per expert scans all ids:
// a batch has at most a few thousand rows, and no atomics keeps the order deterministic.
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Ids { int ids[]; };  // I32 [n_rows]
layout(std430, binding = 1) writeonly buffer Groups { uint groups[]; };
layout(push_constant) uniform Params {
  uint n_rows;
  uint n_expert;
} p;

void main() {
  uint e = group_index() * BLOCK + gl_LocalInvocationID.x;
  if (e >= p.n_expert) return;
  uint list = p.n_expert + e * p.n_rows;
  uint n = 0u;
  for (uint r = 0u; r < p.n_rows; ++r) {
    if (uint(ids[r]) == e) {
      groups[list + n] = r;
      ++n;
    }
  }
  groups[e] = n;
}
