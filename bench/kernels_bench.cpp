// kernels_bench: the CPU backend's matrix product alone, per weight type, at the shapes of
// TinyLlama-1.1B's feed-forward (n_ff 5632 x n_embd 2048). Decoding (1 token) reads the weights
// once, so it reports GB/s of weights against the machine's read bandwidth; prompts (128 tokens)
// are compute-bound, so it reports multiply-adds per second. The forward pass adds attention and
// small ops to these; `hearth bench` measures the whole.
//
// Usage: kernels_bench [--threads N] [--types q4_k,q8_0,...] [--tokens 1,128] [--seconds S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/convert/quantize.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// CPU time of the process: on a shared machine, wall time includes waiting for a core; CPU time
// with one thread shows what the kernel itself costs.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 1.0;
  std::string types = "q4_0,q4_k,q5_k,q6_k,q8_0,f16,bf16,f32";
  std::string tokens = "1,128";
  int64_t n_in = 2048, n_out = 5632;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--types")
      types = argv[i + 1];
    else if (a == "--tokens")
      tokens = argv[i + 1];
    else if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (a == "--rows")
      n_out = std::atoll(argv[i + 1]);
    else if (a == "--cols")
      n_in = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }

  auto be = hearth::make_cpu_backend(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w_f32(size_t(n_in * n_out));
  for (auto& v : w_f32) v = normal(rng) * 0.02f;

  std::printf("mul_mat [%lld x %lld], %d threads\n", (long long)n_out, (long long)n_in, threads);
  std::printf(
      "| type | tokens | ms/call | cpu ms/call | GB/s weights | GMAC/s |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& name : split(types)) {
    const auto t = hearth::tensor_type_from_name(name);
    if (!t || !hearth::can_quantize(*t) || !be->supports_weight_type(*t)) {
      std::printf("| %s | - | not supported | | |\n", name.c_str());
      continue;
    }
    // Enough copies of the matrix to exceed the last-level cache (32 MiB here) several times,
    // cycled through, so decoding reads from memory as a real model does.
    const int64_t bytes = hearth::tensor_type_row_bytes(*t, n_in) * n_out;
    const int n_copies = int(std::max<int64_t>(1, (512ll << 20) / bytes));
    std::vector<hearth::tensor> ws;
    for (int c = 0; c < n_copies; ++c) {
      ws.push_back(be->alloc(*t, n_in, n_out, "w"));
      hearth::quantize_rows(*t, w_f32.data(), ws.back().data, n_out, n_in);
    }
    const hearth::tensor& w = ws[0];
    for (const auto& tok_s : split(tokens)) {
      const int64_t n_tok = std::atoll(tok_s.c_str());
      hearth::tensor x = be->alloc(hearth::tensor_type::f32, n_in, n_tok, "x");
      hearth::tensor y = be->alloc(hearth::tensor_type::f32, n_out, n_tok, "y");
      for (int64_t i = 0; i < n_in * n_tok; ++i) static_cast<float*>(x.data)[i] = normal(rng);
      // Warm-up, through every copy: the first product of a weight packs it (packed-weights.h).
      for (const auto& wc : ws) be->mul_mat(wc, x, nullptr, y);
      int calls = 0;
      const double cpu0 = cpu_seconds();
      const auto start = std::chrono::steady_clock::now();
      double elapsed = 0;
      do {
        be->mul_mat(ws[size_t(calls) % ws.size()], x, nullptr, y);
        ++calls;
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      } while (elapsed < seconds);
      const double per_call = elapsed / calls;
      const double cpu_per_call = (cpu_seconds() - cpu0) / calls;
      std::printf("| %s | %lld | %.3f | %.3f | %.1f | %.1f |\n", name.c_str(), (long long)n_tok,
                  per_call * 1e3, cpu_per_call * 1e3, double(w.n_bytes()) / per_call / 1e9,
                  double(n_in * n_out * n_tok) / per_call / 1e9);
      std::fflush(stdout);
      be->free(x);
      be->free(y);
    }
    for (auto& c : ws) be->free(c);
  }
  return 0;
}
