// Logits conformance against the reference engine (../shared/testdata/reference), shared by the
// CPU test (conformance_test.cpp) and the device backends' tests (conformance_device_test.cpp):
// every model file of the test data, every reference prompt, every row's NMSE within
// ../shared/README.md's bounds.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/model.h"

namespace hearth::testing {

// ../shared/README.md's bounds for a model file, by its weights' type in the file name.
struct conformance_bounds {
  double worst_nmse;
  double mean_nmse;
  double argmax_share;  // 0: not checked
};
conformance_bounds conformance_bounds_for(const std::string& model_file);

// The reference files (relative to reference/) of every model file in the test data: the real
// stories260K and each synthetic file, listed from the folder so that a file added there is
// covered (and fails without a reference).
std::vector<std::string> conformance_reference_files();

// A test name for a reference file ("synthetic/synthetic-llama-a.q4_0.json" ->
// "synthetic_llama_a_q4_0_json").
std::string conformance_case_name(const std::string& reference_file);

// Loads the model of `reference_file` with `params`, checks that it runs on the backend named
// `want_backend` ("cpu", "vulkan"), decodes every reference prompt and checks each row's NMSE,
// the mean NMSE and the argmax share (gtest failures name the file, prompt and row). Prints one
// table row: | backend | file | rows | worst NMSE | mean NMSE | argmax same |.
void check_logits_conformance(const std::string& reference_file, const model_params& params,
                              const std::string& want_backend);

// Greedy generation of 64 tokens from `prompt` in `ctx` gives the reference case `c`'s
// greedy_tokens and greedy_text (failures name its prompt) and stops at max_tokens. A fatal
// failure when generation fails: call it under ASSERT_NO_FATAL_FAILURE to end the test there.
void expect_greedy_reference(context& ctx, const std::vector<int32_t>& prompt,
                             const nlohmann::json& c);

}  // namespace hearth::testing
