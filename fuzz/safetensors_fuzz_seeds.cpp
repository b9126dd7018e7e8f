// Writes the seed corpus of the safetensors fuzz target: small files that between them use every
// dtype the engine reads, metadata, a scalar and an empty tensor, dtypes it only skips (I64, U8,
// F8_E4M3), an empty header, and a Hugging Face llama layer's tensor names and shapes (scaled
// down), plus the header as the reference writer pads it.
//
// Usage: safetensors_fuzz_seeds <output dir>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "fuzz/seed-files.h"

namespace {

using namespace hearth;
using fuzz_seeds::random_bytes;

// Keeps the data of every tensor alive until the file is written.
struct seed_file {
  safetensors_writer w;
  std::vector<std::vector<uint8_t>> data;

  void add(const std::string& name, tensor_type type, std::vector<int64_t> shape, uint32_t seed) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    data.push_back(random_bytes(size_t(n) * (type == tensor_type::f32 ? 4 : 2), seed));
    w.add_tensor(name, type, std::move(shape), data.back());
  }
};

bool write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

bool write(const seed_file& s, const std::filesystem::path& path) {
  return fuzz_seeds::write_file("safetensors_fuzz_seeds", s.w, path);
}

// A header written by hand (dtypes the writer does not produce), with its data section.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8);
  for (int k = 0; k < 8; ++k) out[size_t(k)] = uint8_t(uint64_t(header.size()) >> (8 * k));
  out.insert(out.end(), header.begin(), header.end());
  const auto data = random_bytes(data_bytes, 42);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: safetensors_fuzz_seeds <output dir>\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  if (!fuzz_seeds::create_dir("safetensors_fuzz_seeds", dir)) return 1;

  seed_file types;
  types.w.set_metadata("format", "pt");
  types.add("a.f32", tensor_type::f32, {3, 5}, 1);
  types.add("b.f16", tensor_type::f16, {2, 2, 2}, 2);
  types.add("c.bf16", tensor_type::bf16, {7}, 3);
  types.add("scalar", tensor_type::f32, {}, 4);
  types.add("empty", tensor_type::f16, {0, 4}, 5);

  seed_file layer;
  layer.w.set_metadata("format", "pt");
  const std::string p = "model.layers.0.";
  layer.add("model.embed_tokens.weight", tensor_type::bf16, {16, 8}, 10);
  layer.add(p + "input_layernorm.weight", tensor_type::bf16, {8}, 11);
  layer.add(p + "self_attn.q_proj.weight", tensor_type::bf16, {8, 8}, 12);
  layer.add(p + "self_attn.k_proj.weight", tensor_type::bf16, {4, 8}, 13);
  layer.add(p + "self_attn.v_proj.weight", tensor_type::bf16, {4, 8}, 14);
  layer.add(p + "self_attn.o_proj.weight", tensor_type::bf16, {8, 8}, 15);
  layer.add(p + "post_attention_layernorm.weight", tensor_type::bf16, {8}, 16);
  layer.add(p + "mlp.gate_proj.weight", tensor_type::bf16, {12, 8}, 17);
  layer.add(p + "mlp.up_proj.weight", tensor_type::bf16, {12, 8}, 18);
  layer.add(p + "mlp.down_proj.weight", tensor_type::bf16, {8, 12}, 19);
  layer.add("model.norm.weight", tensor_type::f32, {8}, 20);

  const std::string other_dtypes =
      R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
      R"("mask":{"dtype":"U8","shape":[3],"data_offsets":[16,19]},)"
      R"("fp8":{"dtype":"F8_E4M3","shape":[1,2],"data_offsets":[19,21]},)"
      R"("__metadata__":{"format":"pt","note":"other dtypes"}})";

  const bool ok = write(types, dir / "types.safetensors") &&
                  write(layer, dir / "llama-layer.safetensors") &&
                  write(seed_file{}, dir / "empty.safetensors") &&
                  write_bytes(dir / "other-dtypes.safetensors", raw_file(other_dtypes, 21));
  return ok ? 0 : 1;
}
