// What the running CPU can do, probed once: which SIMD paths the CPU backend's kernels and the
// quantizer's scale fits may take. It sits below both (and below system-info) so that neither
// the quantizer nor a host report has to reach into the CPU backend to ask.
#pragma once

namespace hearth {

// Whether the running CPU has AVX2 + FMA + F16C (the fast paths); decided once at startup.
// The environment variable HEARTH_CPU_PORTABLE=1 turns the fast paths off.
bool cpu_has_avx2();

// Whether the running CPU has AVX-512 F/BW/VL/DQ with VNNI (and F16C): the CPU backend's tile
// kernels for prompt-sized products. HEARTH_CPU_PORTABLE=1 or HEARTH_CPU_NO_AVX512=1 turn
// them off (tests run the AVX2 kernels on AVX-512 machines this way).
bool cpu_has_avx512_vnni();

}  // namespace hearth
