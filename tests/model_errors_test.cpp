// Bad models give one clear error, never a crash: variants of the real stories260K file with one
// thing broken (architecture, a tensor's shape or type, a missing tensor, bad hyperparameters),
// and a context too large for memory.
#include <gtest/gtest.h>

#include <stdexcept>

#include "engine/context.h"
#include "engine/model.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

std::string write_variant(const std::string& name, const testing::model_edit& e) {
  return testing::write_stories_variant(name, e);
}

std::string load_error(const std::string& path) {
  try {
    model::load(path, {});
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

void expect_contains(const std::string& msg, const std::string& needle) {
  EXPECT_NE(msg.find(needle), std::string::npos)
      << "message: " << msg << "\nexpected to contain: " << needle;
}

TEST(model_errors, an_unmodified_copy_loads) {
  EXPECT_EQ(load_error(write_variant("copy", {})), "");
}

TEST(model_errors, unsupported_architecture_is_named) {
  auto path = write_variant(
      "arch", {.metadata = [](gguf_writer& w) { w.set_string("general.architecture", "mamba"); }});
  const auto msg = load_error(path);
  expect_contains(msg, "architecture 'mamba' is not supported");
  expect_contains(msg, "llama, qwen2, qwen3, qwen3moe, phi3, gemma, gemma2, gemma3");
  expect_contains(msg, path);
}

TEST(model_errors, a_wrong_shape_names_the_tensor_expected_and_actual) {
  auto path =
      write_variant("shape", {.tensor = [](const gguf_tensor& t, gguf_writer& w) {
                      if (t.name != "blk.2.attn_q.weight") return false;
                      w.add_tensor(t.name, t.type, {64, 32}, std::span(t.data, t.n_bytes / 2));
                      return true;
                    }});
  const auto msg = load_error(path);
  expect_contains(msg, "'blk.2.attn_q.weight' has shape [64, 32], expected [64, 64]");
}

TEST(model_errors, an_unsupported_tensor_type_is_named) {
  auto path = write_variant("type", {.tensor = [](const gguf_tensor& t, gguf_writer& w) {
                              if (t.name != "blk.0.ffn_up.weight") return false;
                              // IQ4_NL, which we do not compute with: 172 rows of 64 values = 2
                              // blocks of 18 bytes each.
                              std::vector<uint8_t> q4(size_t(172 * 2 * 18), 0);
                              w.add_tensor(t.name, tensor_type::iq4_nl, {64, 172}, std::move(q4));
                              return true;
                            }});
  const auto msg = load_error(path);
  expect_contains(msg, "'blk.0.ffn_up.weight' has type iq4_nl");
  expect_contains(msg, "not support");
}

TEST(model_errors, a_norm_weight_of_a_matrix_type_is_rejected) {
  auto path = write_variant("normtype", {.tensor = [](const gguf_tensor& t, gguf_writer& w) {
                              if (t.name != "output_norm.weight") return false;
                              std::vector<uint8_t> f16(64 * 2, 0);
                              w.add_tensor(t.name, tensor_type::f16, {64}, std::move(f16));
                              return true;
                            }});
  expect_contains(load_error(path), "'output_norm.weight' has type f16, expected f32");
}

TEST(model_errors, a_missing_tensor_is_named) {
  auto path = write_variant("missing", {.tensor = [](const gguf_tensor& t, gguf_writer&) {
                              return t.name == "blk.4.ffn_down.weight";
                            }});
  expect_contains(load_error(path), "tensor 'blk.4.ffn_down.weight' is missing");
}

TEST(model_errors, bad_hyperparameters_are_named) {
  auto zero_heads = write_variant(
      "heads", {.metadata = [](gguf_writer& w) { w.set_u32("llama.attention.head_count", 0); }});
  expect_contains(load_error(zero_heads), "must be positive");

  auto gqa = write_variant(
      "gqa", {.metadata = [](gguf_writer& w) { w.set_u32("llama.attention.head_count_kv", 3); }});
  expect_contains(load_error(gqa), "not a multiple of head_count_kv");

  auto rope = write_variant(
      "rope", {.metadata = [](gguf_writer& w) { w.set_u32("llama.rope.dimension_count", 7); }});
  expect_contains(load_error(rope), "rope.dimension_count 7");

  auto type = write_variant(
      "keytype", {.metadata = [](gguf_writer& w) { w.set_string("llama.block_count", "five"); }});
  expect_contains(load_error(type), "'llama.block_count' is string");
}

TEST(model_errors, a_truncated_file_is_an_error_naming_the_file) {
  const std::string src = testing::testdata_path("models/stories260K.gguf");
  auto bytes = testing::read_file_bytes(src);
  bytes.resize(bytes.size() - 1000);
  const std::string out = ::testing::TempDir() + "hearth_truncated.gguf";
  FILE* f = std::fopen(out.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  const auto msg = load_error(out);
  expect_contains(msg, out);
  expect_contains(msg, "past the end of the file");
}

TEST(model_errors, a_context_larger_than_memory_is_refused) {
  auto m = model::load(testing::testdata_path("models/stories260K.gguf"), {});
  try {
    context ctx(*m, {.n_ctx = 2000000000});
    FAIL() << "a 2e9-token context was allocated";
  } catch (const std::runtime_error& e) {
    expect_contains(e.what(), "available");
  }
}

}  // namespace
}  // namespace hearth
