// out[i] = x[i] / sqrt(mean(x[i]²) + eps) * weight; one workgroup per row. Reduction: USE_SUBGROUP.
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint cols;
  uint n_rows;
  uint has_weight;
  float eps;
} p;

void main() {
  uint r = group_index();
  if (r >= p.n_rows) return;
  uint base = r * p.cols;
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += BLOCK) s += x[base + j] * x[base + j];
  s = block_sum(s);
  float scale = 1.0 / sqrt(s / float(p.cols) + p.eps);
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += BLOCK)
    dst[base + j] = x[base + j] * scale * (p.has_weight != 0 ? weight[j] : 1.0);
}
