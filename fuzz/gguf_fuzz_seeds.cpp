// Writes the seed corpus of the GGUF fuzz target: small files that between them use every
// metadata value type, nested arrays, both alignments the writer is tested with, several tensor
// types, a vocabulary-only file, and (when the test data is present) the real header of
// stories260K with its tensors shrunk to one block each.
//
// Usage: gguf_fuzz_seeds <output dir> [stories260K.gguf]
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/io/gguf-writer.h"
#include "engine/io/gguf.h"
#include "fuzz/seed-files.h"

namespace {

using namespace hearth;
using fuzz_seeds::random_bytes;

// One tensor of `rows` rows of one block each, random contents.
void add_blocks(gguf_writer& w, const std::string& name, tensor_type type, int64_t rows,
                uint32_t seed) {
  const auto layout = tensor_type_layout_of(uint32_t(type));
  w.add_tensor(name, type, {layout->block_elems, rows},
               random_bytes(size_t(layout->block_bytes * rows), seed));
}

gguf_writer all_value_types() {
  gguf_writer w;
  w.set_string("general.architecture", "llama");
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("llama.context_length", 128);
  w.set_i32("t.i32", -123456);
  w.set_u64("t.u64", 1ull << 40);
  w.set_i64("t.i64", -(1ll << 40));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f64("t.f64", 0.25);
  w.set_bool("t.bool", true);
  w.set_string_array("t.strings", {"a", "bc", ""});
  w.set_f32_array("t.floats", {0.5f, -2.0f});
  w.set_i32_array("t.ints", {1, -1, 7});
  w.set("t.u64s",
        gguf_value_of_array(gguf_value_type::u64, {gguf_value_of_u(gguf_value_type::u64, 9)}));
  w.set("t.nested",
        gguf_value_of_array(
            gguf_value_type::array,
            {gguf_value_of_array(gguf_value_type::u8, {gguf_value_of_u(gguf_value_type::u8, 1)}),
             gguf_value_of_array(gguf_value_type::boolean, {})}));
  add_blocks(w, "token_embd.weight", tensor_type::f32, 3, 1);
  add_blocks(w, "blk.0.attn_q.weight", tensor_type::f16, 2, 2);
  add_blocks(w, "output.weight", tensor_type::q8_0, 2, 3);
  return w;
}

gguf_writer aligned_64() {
  gguf_writer w;
  w.set_alignment(64);
  w.set_string("general.name", "aligned");
  add_blocks(w, "a", tensor_type::q4_0, 1, 4);
  add_blocks(w, "b", tensor_type::q4_k, 1, 5);
  add_blocks(w, "c", tensor_type::bf16, 5, 6);
  add_blocks(w, "d", tensor_type::i32, 1, 7);
  return w;
}

gguf_writer vocab_only() {
  gguf_writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int k = 0; k < 40; ++k) {
    tokens.push_back(std::string("\xe2\x96\x81") + char('a' + k % 26) + std::to_string(k));
    scores.push_back(-float(k));
    types.push_back(1);
  }
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  return w;
}

// The real metadata of a model file, each tensor cut down to a single block of its type.
gguf_writer shrunk(const gguf_file& src) {
  gguf_writer w;
  w.copy_metadata_from(src);
  uint32_t seed = 100;
  for (const auto& t : src.tensors()) add_blocks(w, t.name, t.type, 1, seed++);
  return w;
}

// gguf-split's first part of a split of one (split.no 0, split.count 1, every tensor): what a
// split's join accepts, for the fuzzer to start from.
gguf_writer split_of_one() {
  gguf_writer w = all_value_types();
  w.set_u16("split.no", 0);
  w.set_u16("split.count", 1);
  w.set_i32("split.tensors.count", int32_t(w.tensor_count()));
  return w;
}

bool write(const gguf_writer& w, const std::filesystem::path& path) {
  return fuzz_seeds::write_file("gguf_fuzz_seeds", w, path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds <output dir> [model.gguf]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  if (!fuzz_seeds::create_dir("gguf_fuzz_seeds", dir)) return 1;
  bool ok = write(all_value_types(), dir / "all-value-types.gguf") &&
            write(aligned_64(), dir / "aligned-64.gguf") &&
            write(vocab_only(), dir / "vocab-only.gguf") &&
            write(split_of_one(), dir / "split-of-one.gguf") &&
            write(gguf_writer{}, dir / "empty.gguf");
  if (ok && argc == 3) {
    auto model = gguf_file::open(argv[2]);
    if (model) {
      ok = write(shrunk(*model), dir / "model-header.gguf");
    } else {
      // The test data is optional here: the generated seeds are enough to start from.
      std::fprintf(stderr, "gguf_fuzz_seeds: skipping the model seed: %s\n",
                   model.message().c_str());
    }
  }
  return ok ? 0 : 1;
}
