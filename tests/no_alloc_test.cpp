// Decoding allocates nothing once a context has seen its largest batch: no heap allocation per
// generated token, anywhere in the engine (ops, thread pool dispatch, attention, scratch).
// A global operator new counts allocations; the model is a one-layer random model with
// TinyLlama-1.1B's widths, large enough that every op is split across the thread pool, in
// Q8_0 (tile kernels for prompts, dot products for single tokens) with an F16 KV cache.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <vector>

#include "engine/context.h"
#include "engine/model.h"
#include "fixtures/random-model.h"
#include "tests/testdata.h"

namespace {
std::atomic<long> g_allocations{0};
std::atomic<bool> g_counting{false};
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer owns the allocation functions (and reports replacing them as a mismatch): in
// that build the test reports itself skipped; the release build runs it.
constexpr bool k_counting_available = false;
#else
constexpr bool k_counting_available = true;

// These replace the global allocation functions, so pairing malloc with free is right here; gcc
// cannot tell a replacement from a mismatched call.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
#endif

namespace hearth {
namespace {

// Loads `path` (removing it once loaded when asked), then counts heap allocations while decoding
// 32 tokens one at a time and a second 32-token prompt after warm-up: there must be none.
// `warm_whole_length`: the warm-up first decodes the whole length once and clears it. A model
// this small runs most ops on the calling thread alone; a worker's attention scores are first
// needed when the context grows past the parallel threshold (a per-thread buffer sized by the
// number of cells, so it grows with the context once).
void expect_decoding_allocates_nothing(const std::string& path, bool remove_after_load,
                                       bool warm_whole_length = false) {
  model_params mp;
  mp.n_threads = 2;
  auto m = model::load(path, mp);
  if (remove_after_load) std::filesystem::remove(path);
  context_params cp;
  cp.n_ctx = 128;
  cp.n_batch = 32;
  context ctx(*m, cp);

  std::vector<batch_token> prompt;
  for (int32_t i = 0; i < 32; ++i) prompt.push_back({100 + i, i, 0, i == 31});
  if (warm_whole_length) {
    ASSERT_TRUE(ctx.decode(prompt).ok());
    for (int32_t p = 32; p < 66; ++p) {
      const batch_token t{7, p, 0, true};
      ASSERT_TRUE(ctx.decode({&t, 1}).ok());
    }
    ctx.clear();
  }
  ASSERT_TRUE(ctx.decode(prompt).ok());
  int32_t pos = 32;
  for (; pos < 34; ++pos) {  // warm-up: the single-token path sizes its scratch once
    const batch_token t{7, pos, 0, true};
    ASSERT_TRUE(ctx.decode({&t, 1}).ok());
  }

  g_allocations = 0;
  g_counting = true;
  for (; pos < 66; ++pos) {
    const batch_token t{7, pos, 0, true};
    if (!ctx.decode({&t, 1}).ok()) break;
  }
  // A second prompt of the same size, after clearing the cache, reuses everything too.
  ctx.clear();
  const bool prompt_ok = ctx.decode(prompt).ok();
  g_counting = false;
  EXPECT_EQ(pos, 66);
  EXPECT_TRUE(prompt_ok);
  EXPECT_EQ(g_allocations.load(), 0) << "heap allocations while decoding 32 tokens and a prompt";
}

TEST(no_alloc, decoding_allocates_nothing_per_token) {
  if (!k_counting_available) GTEST_SKIP() << "built with AddressSanitizer, which owns operator new";
  const auto* shape = model_shape_find("tinyllama-1.1b");
  ASSERT_NE(shape, nullptr);
  const std::string path =
      (std::filesystem::temp_directory_path() / "hearth-no-alloc.q8_0.gguf").string();
  random_model_options o;
  o.type = file_type::q8_0;
  o.n_layer = 1;
  o.testdata_root = testing::testdata_root();
  auto written = random_model_write(*shape, o, path);
  ASSERT_TRUE(written.ok()) << written.message();

  expect_decoding_allocates_nothing(path, /*remove_after_load=*/true);
}

// The mixture-of-experts ops too (router, grouped expert products, weighted sum): the
// Qwen3-MoE test file (8 experts, 2 per token) in Q4_K_M.
TEST(no_alloc, decoding_a_mixture_of_experts_allocates_nothing_per_token) {
  if (!k_counting_available) GTEST_SKIP() << "built with AddressSanitizer, which owns operator new";
  const std::string path =
      testing::testdata_path("models/synthetic2/synthetic-qwen3moe-a.q4_k_m.gguf");
  ASSERT_FALSE(path.empty());
  expect_decoding_allocates_nothing(path, /*remove_after_load=*/false, /*warm_whole_length=*/true);
}

}  // namespace
}  // namespace hearth
