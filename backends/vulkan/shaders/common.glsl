// Helpers shared by every shader: F16 conversions that round exactly as the CPU backend does
// (engine/io/tensor-type.cpp), byte and half access to uint-addressed buffers, and a workgroup sum
// (subgroupAdd where the device has subgroup arithmetic: USE_SUBGROUP, else shared memory).
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

// Sum of v over the workgroup (local size BLOCK, 1, 1); every invocation must call it.
float block_sum(float v) {
#if USE_SUBGROUP
  v = subgroupAdd(v);
  if (subgroupElect()) reduce_shared[gl_SubgroupID] = v;
  barrier();
  float s = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) s += reduce_shared[i];
  barrier();
  return s;
#else
  reduce_shared[gl_LocalInvocationID.x] = v;
  barrier();
  for (uint n = BLOCK / 2; n > 0; n >>= 1) {
    if (gl_LocalInvocationID.x < n)
      reduce_shared[gl_LocalInvocationID.x] += reduce_shared[gl_LocalInvocationID.x + n];
    barrier();
  }
  float s = reduce_shared[0];
  barrier();
  return s;
#endif
}

// Max of v over the workgroup.
float block_max(float v) {
#if USE_SUBGROUP
  v = subgroupMax(v);
  if (subgroupElect()) reduce_shared[gl_SubgroupID] = v;
  barrier();
  float s = reduce_shared[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) s = max(s, reduce_shared[i]);
  barrier();
  return s;
#else
  reduce_shared[gl_LocalInvocationID.x] = v;
  barrier();
  for (uint n = BLOCK / 2; n > 0; n >>= 1) {
    if (gl_LocalInvocationID.x < n)
      reduce_shared[gl_LocalInvocationID.x] =
          max(reduce_shared[gl_LocalInvocationID.x], reduce_shared[gl_LocalInvocationID.x + n]);
    barrier();
  }
  float s = reduce_shared[0];
  barrier();
  return s;
#endif
}

// Index of this workgroup when a large count is spread over x and y (max 65535 per dimension).
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

#endif
