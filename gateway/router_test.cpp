#include "gateway/router.h"

#include <gtest/gtest.h>

namespace hearth::gateway {
namespace {

// Each handler records its name, so a test can see which one a lookup found.
handler named(std::string* out, std::string name) {
  return [out, name](std::shared_ptr<exchange>) { *out = name; };
}

TEST(router, finds_exact_and_parameter_routes) {
  std::string hit;
  router r;
  r.add("GET", "/v1/models", named(&hit, "list"));
  r.add("GET", "/v1/models/{id}", named(&hit, "one"));
  r.add("POST", "/v1/batches/{id}/cancel", named(&hit, "cancel"));

  auto m = r.find("GET", "/v1/models");
  ASSERT_NE(m.h, nullptr);
  (*m.h)(nullptr);
  EXPECT_EQ(hit, "list");
  EXPECT_TRUE(m.params.empty());

  m = r.find("GET", "/v1/models/stories260K");
  ASSERT_NE(m.h, nullptr);
  (*m.h)(nullptr);
  EXPECT_EQ(hit, "one");
  EXPECT_EQ(m.params.at("id"), "stories260K");

  m = r.find("POST", "/v1/batches/batch_7/cancel");
  ASSERT_NE(m.h, nullptr);
  (*m.h)(nullptr);
  EXPECT_EQ(hit, "cancel");
  EXPECT_EQ(m.params.at("id"), "batch_7");
}

TEST(router, exact_segments_win_over_parameters_wherever_they_were_added) {
  std::string hit;
  router r;
  r.add("GET", "/v1/hearth/jobs/{id}", named(&hit, "job"));
  r.add("GET", "/v1/hearth/jobs/stats", named(&hit, "stats"));
  r.add("GET", "/a/{p}/y", named(&hit, "param-first"));
  r.add("GET", "/a/x/{q}", named(&hit, "exact-first"));

  auto m = r.find("GET", "/v1/hearth/jobs/stats");
  ASSERT_NE(m.h, nullptr);
  (*m.h)(nullptr);
  EXPECT_EQ(hit, "stats");
  EXPECT_TRUE(m.params.empty());

  m = r.find("GET", "/v1/hearth/jobs/42");
  ASSERT_NE(m.h, nullptr);
  (*m.h)(nullptr);
  EXPECT_EQ(hit, "job");

  // The leftmost exact segment decides.
  m = r.find("GET", "/a/x/y");
  ASSERT_NE(m.h, nullptr);
  (*m.h)(nullptr);
  EXPECT_EQ(hit, "exact-first");
  EXPECT_EQ(m.params.at("q"), "y");
}

TEST(router, unknown_path_is_404_and_known_path_with_other_method_is_405) {
  std::string hit;
  router r;
  r.add("GET", "/v1/models/{id}", named(&hit, "one"));
  r.add("POST", "/v1/chat/completions", named(&hit, "chat"));

  auto m = r.find("GET", "/v1/chat/completions");
  EXPECT_EQ(m.h, nullptr);
  EXPECT_TRUE(m.path_known);  // 405

  m = r.find("DELETE", "/v1/models/x");
  EXPECT_EQ(m.h, nullptr);
  EXPECT_TRUE(m.path_known);

  for (const char* path : {"/v1/chat", "/v1/chat/completions/x", "/v1/models", "/v1/models/", "",
                           "/", "//v1/models/x", "/v1/models/x/"}) {
    m = r.find("POST", path);
    EXPECT_EQ(m.h, nullptr) << path;
    m = r.find("GET", path);
    EXPECT_EQ(m.h, nullptr) << path;
    EXPECT_FALSE(m.path_known) << path;  // 404
  }
}

TEST(router, method_is_case_sensitive_as_http_says) {
  std::string hit;
  router r;
  r.add("GET", "/health", named(&hit, "health"));
  auto m = r.find("get", "/health");
  EXPECT_EQ(m.h, nullptr);
  EXPECT_TRUE(m.path_known);
}

TEST(router, carries_route_options) {
  std::string hit;
  router r;
  r.add("GET", "/health", named(&hit, "health"), {.is_public = true});
  r.add("POST", "/v1/files", named(&hit, "files"), {.max_body_bytes = 1234});
  EXPECT_TRUE(r.find("GET", "/health").options.is_public);
  EXPECT_FALSE(r.find("POST", "/v1/files").options.is_public);
  EXPECT_EQ(r.find("POST", "/v1/files").options.max_body_bytes, 1234u);
}

TEST(router, rejects_bad_patterns_and_duplicates) {
  std::string hit;
  router r;
  EXPECT_THROW(r.add("GET", "v1/models", named(&hit, "x")), std::invalid_argument);
  r.add("GET", "/v1/models/{id}", named(&hit, "x"));
  EXPECT_THROW(r.add("GET", "/v1/models/{id}", named(&hit, "y")), std::invalid_argument);
  std::string deep;
  for (int i = 0; i < 61; ++i) deep += "/a";
  EXPECT_THROW(r.add("GET", deep, named(&hit, "z")), std::invalid_argument);
}

TEST(router, very_long_paths_do_not_match_and_do_not_crash) {
  std::string hit;
  router r;
  r.add("GET", "/v1/models/{id}", named(&hit, "x"));
  std::string path;
  for (int i = 0; i < 10000; ++i) path += "/x";
  EXPECT_EQ(r.find("GET", path).h, nullptr);
  EXPECT_EQ(r.find("GET", "/v1/models/" + std::string(100000, 'a')).params.at("id").size(),
            100000u);
}

}  // namespace
}  // namespace hearth::gateway
