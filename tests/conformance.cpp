#include "tests/conformance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/context.h"
#include "tests/testdata.h"

namespace hearth::testing {

conformance_bounds conformance_bounds_for(const std::string& file) {
  if (file.find(".bf16.") != std::string::npos) return {1e-3, 3e-4, 0.9};
  if (file.find(".f32.") != std::string::npos || file.find(".f16.") != std::string::npos ||
      file.find("stories260K") != std::string::npos) {
    return {1e-4, 1e-5, 0.9};
  }
  return {1e-2, 3e-3, 0.0};  // quantized weights
}

std::vector<std::string> conformance_reference_files() {
  std::vector<std::string> out = {"stories260K.json"};
  const std::filesystem::path dir = testdata_root() + "/models/synthetic";
  std::error_code ec;
  std::vector<std::string> stems;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".gguf") stems.push_back(e.path().stem().string());
  }
  std::sort(stems.begin(), stems.end());
  // An unreadable folder still yields a case, which then fails naming the missing file.
  if (stems.empty()) stems.push_back("synthetic-models-folder-missing-or-empty");
  for (const auto& s : stems) out.push_back("synthetic/" + s + ".json");
  return out;
}

std::string conformance_case_name(const std::string& reference_file) {
  std::string n = reference_file.substr(reference_file.rfind('/') + 1);
  for (auto& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

void check_logits_conformance(const std::string& reference_file, const model_params& params,
                              const std::string& want_backend) {
  const std::string json_path = testdata_path("reference/" + reference_file);
  ASSERT_FALSE(json_path.empty());
  const auto ref = nlohmann::json::parse(read_file_text(json_path));
  const std::string model_path = testdata_path(ref["model"].get<std::string>());
  ASSERT_FALSE(model_path.empty());
  const std::string ref_dir = json_path.substr(0, json_path.rfind('/') + 1);

  auto m = model::load(model_path, params);
  ASSERT_EQ(m->backend().name(), want_backend) << reference_file;
  const int32_t n_vocab = m->hparams().n_vocab;
  ASSERT_EQ(n_vocab, ref["n_vocab"].get<int32_t>());
  context ctx(*m, {.n_ctx = 256, .n_batch = 512, .n_seq_max = 1});
  const conformance_bounds b = conformance_bounds_for(model_path);

  double worst = 0, sum = 0;
  int rows = 0, argmax_same = 0;
  for (const auto& c : ref["cases"]) {
    const auto tokens = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto expected = read_f32_file(ref_dir + c["logits_file"].get<std::string>());
    ASSERT_EQ(expected.size(), tokens.size() * size_t(n_vocab)) << c["logits_file"];

    ctx.clear();
    std::vector<batch_token> batch;
    for (size_t i = 0; i < tokens.size(); ++i) batch.push_back({tokens[i], int32_t(i), 0, true});
    ASSERT_TRUE(ctx.decode(batch).ok());
    ASSERT_EQ(ctx.n_logits(), int32_t(tokens.size()));

    for (size_t i = 0; i < tokens.size(); ++i) {
      const float* got = ctx.logits(int32_t(i));
      const float* want = expected.data() + i * size_t(n_vocab);
      double err = 0, norm = 0;
      for (int32_t v = 0; v < n_vocab; ++v) {
        err += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
        norm += double(want[v]) * want[v];
      }
      const double nmse = err / norm;
      EXPECT_LE(nmse, b.worst_nmse)
          << want_backend << " " << reference_file << " prompt '" << c["prompt"] << "' row " << i;
      worst = std::max(worst, nmse);
      sum += nmse;
      ++rows;
      argmax_same += std::max_element(got, got + n_vocab) - got ==
                     std::max_element(want, want + n_vocab) - want;
    }
  }
  const double mean = sum / rows;
  const double share = double(argmax_same) / rows;
  EXPECT_LE(mean, b.mean_nmse) << want_backend << " " << reference_file;
  if (b.argmax_share > 0) {
    EXPECT_GE(share, b.argmax_share) << want_backend << " " << reference_file;
  }
  std::printf("| %s | %s | %d | %.3g | %.3g | %.0f%% |\n", want_backend.c_str(),
              reference_file.c_str(), rows, worst, mean, share * 100);
}

}  // namespace hearth::testing
