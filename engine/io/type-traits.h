// What each tensor type knows about its values beyond its layout (engine/io/tensor-type.h): how a
// row of it becomes F32 (every type the engine reads) and how F32 becomes a row of it (every
// type the quantizer writes, byte for byte as ggml's reference quantizers write it). File
// readers, converters and the quantizer convert through these; backends call them where they
// have nothing faster of their own. Each conversion is written once, here.
#pragma once

#include <cstdint>

#include "engine/io/tensor-type.h"

namespace hearth {

// A row of some type (n values, a multiple of its block size) into n F32 values.
using to_float_fn = void (*)(const void* row, float* out, int64_t n);
// n F32 values (a multiple of the block size) into a row of some type.
using from_float_fn = void (*)(const float* in, void* row, int64_t n);

struct tensor_type_traits {
  to_float_fn to_float = nullptr;      // null: the engine cannot read this type's values
  from_float_fn from_float = nullptr;  // null: the quantizer does not write this type
};

// The conversions of type t; both null for a type the engine neither reads nor writes.
const tensor_type_traits& tensor_type_traits_of(tensor_type t);

}  // namespace hearth
