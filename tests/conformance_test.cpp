// Logits conformance of the CPU backend against the reference engine
// (../shared/testdata/reference): for each model file and each reference prompt, every row's NMSE
// and argmax, within ../shared/README.md's bounds (tests/conformance.h).
#include <gtest/gtest.h>

#include "tests/conformance.h"

namespace hearth {
namespace {

class conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(conformance, logits_match_reference_within_bounds) {
  testing::check_logits_conformance(GetParam(), {}, "cpu");
}

INSTANTIATE_TEST_SUITE_P(all, conformance,
                         ::testing::ValuesIn(testing::conformance_reference_files()),
                         [](const auto& param_info) {
                           return testing::conformance_case_name(param_info.param);
                         });

}  // namespace
}  // namespace hearth
