// Pipeline stages on a device backend (built once per backend, as the conformance tests are:
// Vulkan, and CUDA where a GPU is lent; skipped without a device). All stages on the device
// compute exactly what the whole model computes there; stages on different backends (the CPU
// then the device, the device then the CPU) follow the whole CPU model's greedy tokens, their
// logits as close to the CPU's as the device's own are.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "tests/device-backend.h"
#include "tests/pipeline-stages.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

constexpr gpu::backend_kind k_kind = testing::device_backend_kind;
const char* const k_backend = gpu::backend_kind_name(k_kind);
using testing::on_device;

class pipeline_stages_device : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string why = gpu::device_registry().why_no_device(k_kind);
    if (!why.empty())
      testing::skip_all(std::string("pipeline stages on ") + k_backend + ": " + why);
  }
};

TEST_F(pipeline_stages_device, all_stages_on_the_device_compute_exactly_the_whole_model_there) {
  const std::string path = testing::testdata_path("models/stories260K.gguf");
  ASSERT_FALSE(path.empty());
  testing::expect_split_exact(path, 2, 16, on_device());
  testing::expect_split_exact(path, 3, 16, on_device());
  const std::string moe = testing::model_path("models/synthetic2/synthetic-qwen3moe-a.q4_k_m.gguf");
  ASSERT_FALSE(moe.empty());
  testing::expect_split_exact(moe, 2, 8, on_device());
}

TEST_F(pipeline_stages_device, stages_on_different_backends_follow_the_cpu_model) {
  const std::string path = testing::testdata_path("models/stories260K.gguf");
  ASSERT_FALSE(path.empty());
  const context_params cp{.n_ctx = 128, .n_batch = 64};
  const auto cpu_model = model::load(path, {});
  const int32_t n_vocab = cpu_model->hparams().n_vocab;
  const auto prompt =
      cpu_model->vocab().tokenize("Once upon a time, there was a little", true, false);
  context cpu(*cpu_model, cp);
  auto run = [&](auto&& decode, const std::vector<float>* want) {
    return testing::greedy_run_of(decode, prompt, n_vocab, 40, want);
  };
  const auto want = run([&](const auto& b) { return testing::decode_whole(cpu, b); }, nullptr);
  cpu.clear();
  // A cleared context computes the same again: the CPU's own figures are exact.
  ASSERT_EQ(
      run([&](const auto& b) { return testing::decode_whole(cpu, b); }, &want.prompt_logits).diff,
      0.0f);

  // The whole model on the device: how far the device is from the CPU on its own.
  const auto dev_model = model::load(path, on_device());
  context dev(*dev_model, cp);
  const float dev_diff =
      run([&](const auto& b) { return testing::decode_whole(dev, b); }, &want.prompt_logits).diff;
  std::printf("whole on %s: prompt logits within %.6f of the CPU's\n", k_backend, dev_diff);

  const int32_t n_layer = cpu_model->hparams().n_layer;
  for (const bool device_first : {false, true}) {
    testing::pipeline split(path, testing::even_split(n_layer, 2), cp, [&](size_t i) {
      return (i == 0) == device_first ? on_device() : model_params{};
    });
    const auto got = run([&](const auto& b) { return split.decode(b); }, &want.prompt_logits);
    std::printf("%s then %s: prompt logits within %.6f of the CPU's\n",
                device_first ? k_backend : "cpu", device_first ? "cpu" : k_backend, got.diff);
    EXPECT_EQ(got.tokens, want.tokens) << (device_first ? "device first" : "cpu first");
    // Half the layers on the device err no more than all of them (with room for rounding).
    EXPECT_LE(got.diff, 2 * dev_diff + 1e-4f);
  }
}

}  // namespace
}  // namespace hearth
