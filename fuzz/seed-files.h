// What the programs that write seed corpora at build time (gguf_fuzz_seeds,
// safetensors_fuzz_seeds) share: random tensor bytes, the output folder, and a writer's file
// written with its error said under the program's name.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

namespace hearth::fuzz_seeds {

// n random bytes, the same for the same seed.
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

// Creates the output folder; false, after saying why as `program`, when it cannot.
inline bool create_dir(const char* program, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "%s: cannot create %s: %s\n", program, dir.c_str(), ec.message().c_str());
  }
  return !ec;
}

// w.write_file(path) (gguf_writer, safetensors_writer); false, after saying why as `program`.
template <class Writer>
bool write_file(const char* program, const Writer& w, const std::filesystem::path& path) {
  auto r = w.write_file(path.string());
  if (!r) std::fprintf(stderr, "%s: %s\n", program, r.message().c_str());
  return r.ok();
}

}  // namespace hearth::fuzz_seeds
