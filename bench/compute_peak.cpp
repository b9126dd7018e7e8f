// compute_peak: the machine's multiply-add throughput, the ceiling of prompt processing (a
// P-token prompt is P × the weights' multiply-adds of matrix products; bench/cpu-speed.sh divides
// this peak by them, as it divides bandwidth by model bytes for decoding).
//
// Two peaks, each with the widest vectors the CPU has, chosen at run time:
//   f32  fused multiply-adds on F32 lanes (AVX-512F, else AVX2 + FMA): what F16, BF16 and F32
//        weights are multiplied with, since this engine and the reference convert them to F32;
//   i8   vpdpbusd (AVX-512 VNNI): u8 × s8 products summed in 32-bit lanes, four per lane and
//        instruction, which the packed quantized tiles use (engine/cpu/packed-weights.h). Absent
//        without VNNI.
// Each thread runs independent accumulator chains, enough to cover the instruction's latency on
// every pipe, all threads starting together; a pass's figure is the multiply-adds over the time
// from the first thread's start to the last one's end, and the best of several passes is reported
// for each thread count asked for (default 1 and 2).
//
//   compute_peak [--threads 1,2] [--passes 5] [--json]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/ceiling-tools.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HEARTH_PEAK_X86 1
// gcc 12's AVX-512 intrinsics pass an uninitialised placeholder operand (as engine/cpu/avx512.h
// says).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

// Iterations per call; each does k_chains vector multiply-adds. 2^24 is about 30 ms of F32 work on
// one Zen 5 thread (8 ms of VNNI), so one late-scheduled thread moves a pass's figure less than
// it did at 2^22.
constexpr int64_t k_iters = 1 << 24;
constexpr int k_chains = 12;

// One peak kernel: runs k_iters × k_chains instructions, returns a value that depends on all of
// them (so none is dropped), and does `macs_per_op` multiply-adds per instruction.
struct peak_kernel {
  const char* what;  // f32 or i8
  const char* isa;
  int macs_per_op;
  float (*run)(float seed);
};

// Portable F32: what the compiler makes of scalar multiply-adds (a lower bound on machines
// without the vector units below).
float f32_portable(float seed) {
  float a[k_chains];
  for (int c = 0; c < k_chains; ++c) a[c] = seed * float(c + 1);
  const float m = 0.999999f, b = 1e-7f;
  for (int64_t i = 0; i < k_iters; ++i)
    for (int c = 0; c < k_chains; ++c) a[c] = a[c] * m + b;
  float s = 0;
  for (float v : a) s += v;
  return s;
}

#ifdef HEARTH_PEAK_X86
__attribute__((target("avx512f"))) float f32_avx512(float seed) {
  __m512 a[k_chains];
  for (int c = 0; c < k_chains; ++c) a[c] = _mm512_set1_ps(seed * float(c + 1));
  const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < k_iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < k_chains; ++c) a[c] = _mm512_fmadd_ps(a[c], m, b);
  }
  __m512 s = a[0];
  for (int c = 1; c < k_chains; ++c) s = _mm512_add_ps(s, a[c]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float f32_avx2(float seed) {
  __m256 a[k_chains];
  for (int c = 0; c < k_chains; ++c) a[c] = _mm256_set1_ps(seed * float(c + 1));
  const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < k_iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < k_chains; ++c) a[c] = _mm256_fmadd_ps(a[c], m, b);
  }
  __m256 s = a[0];
  for (int c = 1; c < k_chains; ++c) s = _mm256_add_ps(s, a[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) float i8_avx512_vnni(float seed) {
  __m512i a[k_chains];
  for (int c = 0; c < k_chains; ++c) a[c] = _mm512_set1_epi32(int(seed) + c);
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < k_iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < k_chains; ++c) a[c] = _mm512_dpbusd_epi32(a[c], u, s);
  }
  __m512i t = a[0];
  for (int c = 1; c < k_chains; ++c) t = _mm512_add_epi32(t, a[c]);
  return float(_mm512_reduce_add_epi32(t));
}
#endif

std::vector<peak_kernel> pick_kernels() {
  std::vector<peak_kernel> out;
#ifdef HEARTH_PEAK_X86
  if (__builtin_cpu_supports("avx512f")) {
    out.push_back({"f32", "avx512f", 16, f32_avx512});
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    out.push_back({"f32", "avx2+fma", 8, f32_avx2});
  }
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
    out.push_back({"i8", "avx512vnni", 64, i8_avx512_vnni});
#endif
  if (out.empty() || std::string(out.front().what) != "f32")
    out.insert(out.begin(), {"f32", "portable", 1, f32_portable});
  return out;
}

struct options {
  std::vector<int> threads = {1, 2};
  int passes = 5;
  bool json = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr, "compute_peak: %s\nusage: compute_peak [--threads 1,2] [--passes 5] [--json]\n", why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  // No flag of its own beyond the shared ones.
  return hearth::bench::parse_ceiling_flags<options>(
      argc, argv, usage, "multiply-add throughput",
      [](const std::string&, const auto&, options&) { return false; });
}

// Best-of-passes multiply-adds per second (in G) with `nth` threads each running the kernel once.
double measure(const peak_kernel& k, int nth, int passes, float* sink) {
  std::vector<float> results(static_cast<size_t>(nth));
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    const double s =
        hearth::bench::seconds_together(nth, [&](int t) { results[size_t(t)] = k.run(1.0f + t); });
    const double macs = double(nth) * double(k_iters) * k_chains * k.macs_per_op;
    best = std::max(best, macs / s / 1e9);
    for (float r : results) *sink += r;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const std::vector<peak_kernel> kernels = pick_kernels();
  float sink = 0;
  std::vector<std::vector<double>> gmacs(kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k)
    for (int nth : o.threads) gmacs[k].push_back(measure(kernels[k], nth, o.passes, &sink));

  if (o.json) {
    std::printf("{\"passes\": %d, \"results\": [", o.passes);
    const char* sep = "";
    for (size_t k = 0; k < kernels.size(); ++k) {
      for (size_t i = 0; i < o.threads.size(); ++i) {
        std::printf("%s{\"what\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"gmacs\": %.2f}", sep,
                    kernels[k].what, kernels[k].isa, o.threads[i], gmacs[k][i]);
        sep = ", ";
      }
    }
    std::printf("]}\n");
  } else {
    std::printf("multiply-add peak, best of %d passes (G multiply-adds/s)\n", o.passes);
    std::printf("| products | instructions | threads | GMAC/s |\n| --- | --- | ---: | ---: |\n");
    for (size_t k = 0; k < kernels.size(); ++k)
      for (size_t i = 0; i < o.threads.size(); ++i)
        std::printf("| %s | %s | %d | %.1f |\n", kernels[k].what, kernels[k].isa, o.threads[i],
                    gmacs[k][i]);
  }
  // Printed nowhere, used so the results cannot be optimised away.
  if (sink == 42.0f) std::fprintf(stderr, " ");
  return 0;
}
