// Elementwise ops on F32 tensors of one shape; OP picks which (set by the build).
#version 450
#include "common.glsl"

#define OP_ADD 0
#define OP_SWIGLU 1
#define OP_GEGLU 2
#define OP_SCALE 3
#define OP_SOFTCAP 4

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint n;
  float param0;  // scale: s; softcap: cap
  float param1;  // softcap: 1 / cap
} p;

// tanh without the overflow of exp(2x) for large |x| (|x| >= 15 is ±1 in float).
float safe_tanh(float v) { return tanh(clamp(v, -15.0, 15.0)); }

// GELU as the CPU computes it (engine/cpu/elementwise.cpp): the input rounded to F16, gelu_tanh
// of it, the result rounded to F16; exact beyond ±10.
float gelu_reference(float v) {
  if (v <= -10.0) return 0.0;
  if (v >= 10.0) return v;
  float h = round_f16(v);
  float g = 0.5 * h * (1.0 + safe_tanh(0.79788456080286535587989211986876 * h * (1.0 + 0.044715 * h * h)));
  return round_f16(g);
}

void main() {
  uint i = group_index() * BLOCK + gl_LocalInvocationID.x;
  if (i >= p.n) return;
#if OP == OP_ADD
  dst[i] = a[i] + b[i];
#elif OP == OP_SWIGLU
  float g = a[i];
  dst[i] = g / (1.0 + exp(-g)) * b[i];
#elif OP == OP_GEGLU
  dst[i] = gelu_reference(a[i]) * b[i];
#elif OP == OP_SCALE
  dst[i] = a[i] * p.param0;
#elif OP == OP_SOFTCAP
  dst[i] = p.param0 * safe_tanh(a[i] * p.param1);
#else
#error "unknown OP"
#endif
}
