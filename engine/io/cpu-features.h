// What the running CPU can do, probed once: which SIMD paths the CPU backend's kernels and the
// quantizer's scale fits may take. It sits below both (and below system-info) so that neither
// the quantizer nor a host report has to reach into the CPU backend to ask.
// The environment variable HEARTH_CPU_PORTABLE=1 turns every SIMD path off (tests run both).
#pragma once

namespace hearth {

// x86: whether the running CPU has AVX2 + FMA + F16C (the fast paths); decided once at startup.
// False on other architectures.
bool cpu_has_avx2();

// x86: whether the running CPU has AVX-512 F/BW/VL/DQ with VNNI (and F16C): the CPU backend's
// tile kernels for prompt-sized products. HEARTH_CPU_NO_AVX512=1 turns them off (tests run the
// AVX2 kernels on AVX-512 machines this way). False on other architectures.
bool cpu_has_avx512_vnni();

// x86: whether the CPU backend repacks weights for its AVX-512 VNNI kernels (engine/cpu/
// packed-weights.h): cpu_has_avx512_vnni(), unless HEARTH_CPU_NO_PACK=1, which keeps the stored
// layouts' kernels (to measure one against the other in one binary). False elsewhere.
bool cpu_packed_weights();

// x86: whether the packed Q4_K/Q5_K tiles also prefetch when decoding (one token per product,
// engine/cpu/avx512.h says what was measured): on AMD family 26 (Zen 5), where it was faster, and
// not elsewhere (Zen 4 decoded slower with it; other processors are unmeasured, and keep the
// hardware prefetchers alone). HEARTH_CPU_DECODE_PREFETCH=1 or 0 decides instead (to measure one
// against the other in one binary). False on other architectures.
bool cpu_decode_prefetch();

// arm64: the NEON kernels (ASIMD, which every arm64 CPU has). False on other architectures.
bool cpu_has_neon();

// arm64: whether NEON's 8-bit dot product (SDOT, HWCAP_ASIMDDP) is there for the integer
// kernels; HEARTH_CPU_NO_DOTPROD=1 turns it off (tests run the plain NEON kernels this way).
bool cpu_has_neon_dotprod();

// The kernels the CPU backend runs here, for reports: "avx512-vnni", "avx2", "neon-dotprod",
// "neon" or "portable".
const char* cpu_kernel_path();

}  // namespace hearth
