// bandwidth: the machine's streaming read bandwidth, the ceiling of token generation (decoding
// one token reads every weight once, so tokens/s ≤ bandwidth / model bytes).
//
// A buffer far larger than the last-level cache (1 GiB by default, in huge pages where the kernel
// grants them, as the engine's packed weights are) is split into one contiguous
// slice per thread; each thread sums its slice with 256-bit loads (AVX2 when the CPU has it,
// chosen at run time, else plain 64-bit loads), all threads starting together. A pass's figure is
// the buffer's bytes over the time from the first thread's start to the last one's end; the best of
// several passes is reported, for each thread count asked for (default 1 and 2).
//
//   bandwidth [--threads 1,2] [--mib 1024] [--passes 5] [--json]
#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/ceiling-tools.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HEARTH_BANDWIDTH_X86 1
#endif

namespace {

// The sum stops the compiler from dropping the loads.
uint64_t sum_portable(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

#ifdef HEARTH_BANDWIDTH_X86
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  // Four independent 32-byte loads per iteration: two cache lines.
  for (; i + 16 <= n; i += 16) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_portable(p + i, n - i);
}
#endif

using sum_fn = uint64_t (*)(const uint64_t*, size_t);

sum_fn pick_sum(const char** name) {
#ifdef HEARTH_BANDWIDTH_X86
  if (__builtin_cpu_supports("avx2")) {
    *name = "avx2";
    return sum_avx2;
  }
#endif
  *name = "portable";
  return sum_portable;
}

struct options {
  std::vector<int> threads = {1, 2};
  size_t mib = 1024;
  int passes = 5;
  bool json = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "bandwidth: %s\nusage: bandwidth [--threads 1,2] [--mib 1024] [--passes 5] [--json]\n", why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  return hearth::bench::parse_ceiling_flags<options>(
      argc, argv, usage, "streaming read bandwidth",
      [](const std::string& flag, const auto& value, options& o) {
        if (flag != "--mib") return false;
        o.mib = size_t(std::atoll(value().c_str()));
        if (o.mib < 16) usage("--mib must be at least 16");
        return true;
      });
}

// Best-of-passes GB/s with `nth` threads each summing its slice.
double measure(const uint64_t* buf, size_t n_words, int nth, int passes, sum_fn sum,
               uint64_t* sink) {
  const size_t per = (n_words / size_t(nth)) & ~size_t(15);  // whole 128-byte groups
  std::atomic<uint64_t> total{0};
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    const double s = hearth::bench::seconds_together(nth, [&](int t) {
      const size_t begin = size_t(t) * per;
      const size_t count = t + 1 == nth ? n_words - begin : per;
      total += sum(buf + begin, count);
    });
    best = std::max(best, double(n_words * sizeof(uint64_t)) / s / 1e9);
  }
  *sink += total;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  // Huge pages, asked for as the CPU backend asks for them for the weights it packs
  // (engine/cpu/packed-weights.cpp): the ceiling is what the engine's own reads could reach. With
  // 4 KiB pages this bench read less than the decoding engine did (Zen 4, 2 cores, 6 alternations:
  // 1 thread 27.6-28.9 -> 33.1-34.5 GB/s, 2 threads 34.1-35.2 -> 36.2-36.6 in 5 of them), and
  // hearth's Q4_K_M decoding measured 113% of it.
  constexpr size_t k_huge = size_t(2) << 20;
  const size_t bytes = (o.mib << 20) / k_huge * k_huge;
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(k_huge, bytes));
  if (!buf) {
    std::fprintf(stderr, "bandwidth: cannot allocate %zu MiB\n", o.mib);
    return 1;
  }
  const bool huge = madvise(buf, bytes, MADV_HUGEPAGE) == 0;
  const size_t n_words = bytes / sizeof(uint64_t);
  // Touch every page (in parallel, so first-touch places them near the threads) before timing.
  {
    const int nth = *std::max_element(o.threads.begin(), o.threads.end());
    std::vector<std::thread> th;
    const size_t per = n_words / size_t(nth);
    for (int t = 0; t < nth; ++t) {
      th.emplace_back([&, t] {
        const size_t begin = size_t(t) * per;
        const size_t end = t + 1 == nth ? n_words : begin + per;
        for (size_t i = begin; i < end; ++i) buf[i] = i;
      });
    }
    for (auto& t : th) t.join();
  }

  const char* kernel = "";
  const sum_fn sum = pick_sum(&kernel);
  uint64_t sink = 0;
  std::vector<double> gbps;
  for (int nth : o.threads) gbps.push_back(measure(buf, n_words, nth, o.passes, sum, &sink));
  std::free(buf);

  if (o.json) {
    std::printf(
        "{\"buffer_bytes\": %zu, \"huge_pages_asked\": %s, \"passes\": %d, \"kernel\": \"%s\", "
        "\"results\": [",
        bytes, huge ? "true" : "false", o.passes, kernel);
    for (size_t i = 0; i < gbps.size(); ++i) {
      std::printf("%s{\"threads\": %d, \"gbps\": %.2f}", i ? ", " : "", o.threads[i], gbps[i]);
    }
    std::printf("]}\n");
  } else {
    std::printf("streaming read, %zu MiB buffer (%s), %s loads, best of %d passes\n", bytes >> 20,
                huge ? "huge pages asked" : "4 KiB pages", kernel, o.passes);
    std::printf("| threads | GB/s |\n| ---: | ---: |\n");
    for (size_t i = 0; i < gbps.size(); ++i) std::printf("| %d | %.2f |\n", o.threads[i], gbps[i]);
  }
  // Printed nowhere, used so the sums cannot be optimised away.
  if (sink == 42) std::fprintf(stderr, " ");
  return 0;
}
