// Dot products on stored weight types, and the row conversions the backend pairs with them: the
// inner loops of the CPU backend. Which SIMD path runs: engine/io/cpu-features.h.
// Weights are never expanded to F32 for a matrix product: each activation row is converted once
// to the weight type's dot-product type and the dot product runs on the stored blocks.
#pragma once

#include <cstdint>

#include "engine/io/tensor-type.h"
#include "engine/io/type-traits.h"

namespace hearth::cpu {

// Dot product of a weight row (type t) with an activation row already in `vec_dot_type(t)`.
using vec_dot_fn = float (*)(int64_t n, const void* w, const void* x);

struct type_kernels {
  tensor_type vec_dot_type;  // what activations are converted to: as the reference engine does
  vec_dot_fn vec_dot;
  // F32 -> this type, for the types the backend writes (activations, the KV cache); null for
  // weight-only types. The type's own conversion unless the backend has a faster one.
  from_float_fn from_float;
  to_float_fn to_float;  // this type -> F32: the type's own, or the backend's faster one
};

// The kernels of a weight type, or nullptr when the CPU backend cannot compute with it.
const type_kernels* kernels_for(tensor_type t);

}  // namespace hearth::cpu
