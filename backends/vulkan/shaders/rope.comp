// Rotates each head of x in place; one workgroup per token, one invocation per rotated pair
// index i (all heads). neox pairs (i, i + n_dims/2), otherwise (2i, 2i + 1).
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Pos { int pos[]; };
layout(std430, binding = 2) readonly buffer FreqFactors { float ff[]; };
layout(push_constant) uniform Params {
  uint row;  // floats per token
  uint n_tok;
  uint n_head;
  uint head_dim;
  uint half_dims;  // n_dims / 2
  uint neox;
  uint has_ff;
  float theta_scale;  // freq_base^(-2/n_dims), computed on the host as the CPU does
  float freq_scale;
  float ext_factor;  // YaRN (engine/backend.h rope_params): 0 = off
  float mscale;      // cos/sin multiplier (1 unless YaRN)
  float corr_low;    // YaRN ramp dimensions
  float corr_high;
} p;

// sin and cos are only specified on [-pi, pi]: reduce the angle first (Cody-Waite, 2 parts).
void sin_cos(float th, out float s, out float c) {
  precise float k = roundEven(th * 0.15915494309189535);
  precise float r = th - k * 6.28125;
  r = r - k * 0.0019353071795864769;
  s = sin(r);
  c = cos(r);
}

void main() {
  uint t = group_index();
  if (t >= p.n_tok) return;
  for (uint i = gl_LocalInvocationID.x; i < p.half_dims; i += BLOCK) {
    // theta_i = pos * theta_scale^i by repeated multiplication in float, as the CPU does.
    precise float theta = float(pos[t]);
    for (uint k = 0; k < i; ++k) theta = theta * p.theta_scale;
    precise float extrap = p.has_ff != 0 ? theta / ff[i] : theta;
    precise float th = p.freq_scale * extrap;
    if (p.ext_factor != 0.0) {  // YaRN: mix in the extrapolated angle on the fast dimensions
      float y = (float(i) - p.corr_low) / max(0.001, p.corr_high - p.corr_low);
      precise float mix = (1.0 - min(1.0, max(0.0, y))) * p.ext_factor;
      th = th * (1.0 - mix) + extrap * mix;
    }
    float sn, cs;
    sin_cos(th, sn, cs);
    sn *= p.mscale;
    cs *= p.mscale;
    uint a = p.neox != 0 ? i : 2u * i;
    uint b = p.neox != 0 ? i + p.half_dims : 2u * i + 1u;
    for (uint h = 0; h < p.n_head; ++h) {
      uint base = t * p.row + h * p.head_dim;
      float x0 = x[base + a], x1 = x[base + b];
      x[base + a] = x0 * cs - x1 * sn;
      x[base + b] = x0 * sn + x1 * cs;
    }
  }
}
