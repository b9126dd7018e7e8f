// Row conversions and dot products on stored weight types: the inner loops of the CPU backend.
// Weights are never expanded to F32 for a matrix product: each activation row is converted once
// to the weight type's dot-product type and the dot product runs on the stored blocks.
#pragma once

#include <cstdint>

#include "engine/tensor-type.h"

namespace hearth::cpu {

// Dot product of a weight row (type t) with an activation row already in `vec_dot_type(t)`.
using vec_dot_fn = float (*)(int64_t n, const void* w, const void* x);
// Converts n F32 values into a row of some type.
using from_float_fn = void (*)(const float* x, void* y, int64_t n);
// Converts a row of some type into n F32 values.
using to_float_fn = void (*)(const void* x, float* y, int64_t n);

struct type_kernels {
  tensor_type vec_dot_type;  // what activations are converted to: as the reference engine does
  vec_dot_fn vec_dot;
  from_float_fn from_float;  // F32 -> this type (null for types we only read)
  to_float_fn to_float;      // this type -> F32
};

// The kernels of a weight type, or nullptr when the CPU backend cannot compute with it.
const type_kernels* kernels_for(tensor_type t);

// Whether the running CPU has AVX2 + FMA + F16C (the fast paths); decided once at startup.
// The environment variable HEARTH_CPU_PORTABLE=1 turns the fast paths off.
bool cpu_has_avx2();

}  // namespace hearth::cpu
