// Helpers shared by every shader: F16 conversions that round exactly as the CPU backend does
// (engine/io/tensor-type.cpp), byte and half access to uint-addressed buffers, and a workgroup sum
// and max (subgroup operations where the device has subgroup arithmetic: USE_SUBGROUP, else
// shared memory).
#ifndef HEARTH_COMMON_GLSL
#define HEARTH_COMMON_GLSL

#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

#ifndef BLOCK
#define BLOCK 64
#endif

// float -> IEEE half bits, round to nearest even (packHalf2x16's rounding is not specified).
uint f32_to_f16_bits(float f) {
  uint x = floatBitsToUint(f);
  uint sgn = (x >> 16) & 0x8000u;
  uint a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sgn | 0x7e00u;
  if (a >= 0x477ff000u) return sgn | 0x7c00u;
  if (a < 0x38800000u) return sgn | uint(roundEven(uintBitsToFloat(a) * 16777216.0));
  uint h = (a >> 13) - (112u << 10);
  uint rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h += 1u;
  return sgn | h;
}

float f16_bits_to_f32(uint h) { return unpackHalf2x16(h & 0xffffu).x; }

float round_f16(float f) { return f16_bits_to_f32(f32_to_f16_bits(f)); }

// The 16 bits at an even byte offset / the byte at a byte offset of a uint-addressed buffer.
#define LOAD_U16(buf, byte_off) ((buf[(byte_off) >> 2] >> (((byte_off) & 2u) * 8u)) & 0xffffu)
#define LOAD_U8(buf, byte_off) ((buf[(byte_off) >> 2] >> (((byte_off) & 3u) * 8u)) & 0xffu)

shared float reduce_shared[BLOCK];

// The reductions block_reduce makes: a sum or a max.
const uint REDUCE_SUM = 0u;
const uint REDUCE_MAX = 1u;

float reduce_combine(uint op, float a, float b) { return op == REDUCE_MAX ? max(a, b) : a + b; }

// The sum or max (op) of v over the workgroup (local size BLOCK, 1, 1); every invocation must call
// it. op is a constant at every call, so each call compiles to one of the two.
float block_reduce(uint op, float v) {
#if USE_SUBGROUP
  v = op == REDUCE_MAX ? subgroupMax(v) : subgroupAdd(v);
  if (subgroupElect()) reduce_shared[gl_SubgroupID] = v;
  barrier();
  float s = reduce_shared[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) s = reduce_combine(op, s, reduce_shared[i]);
  barrier();
  return s;
#else
  reduce_shared[gl_LocalInvocationID.x] = v;
  barrier();
  for (uint n = BLOCK / 2; n > 0; n >>= 1) {
    if (gl_LocalInvocationID.x < n)
      reduce_shared[gl_LocalInvocationID.x] = reduce_combine(
          op, reduce_shared[gl_LocalInvocationID.x], reduce_shared[gl_LocalInvocationID.x + n]);
    barrier();
  }
  float s = reduce_shared[0];
  barrier();
  return s;
#endif
}

float block_sum(float v) { return block_reduce(REDUCE_SUM, v); }
float block_max(float v) { return block_reduce(REDUCE_MAX, v); }

// Index of this workgroup when a large count is spread over x and y (max 65535 per dimension).
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

#endif
