// The fixture of the cluster tests that serve stories260K (cluster_test, security_test,
// broker_nodes_limits_test): a cluster (tests/cluster.h), a test that fails at once when the test
// data lacks the model, and models(): a models folder whose files are all stories260K.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cluster.h"
#include "tests/testdata.h"

namespace hearth::testing {

class stories_cluster_test : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(testdata_path("models/stories260K.gguf").empty()); }
  // A models directory with the given names, all stories260K underneath.
  std::string models(const std::string& dir_name, const std::vector<std::string>& names) {
    return c_.models(dir_name, names);
  }
  cluster c_;  // with auth, as every cluster test runs
};

}  // namespace hearth::testing
