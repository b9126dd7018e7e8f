#include "gateway/router.h"

#include <gtest/gtest.h>

namespace hearth::gateway {
namespace {

// A router whose handlers record their names, so a test can see which one a lookup found.
struct named_routes {
  router r;
  std::string hit;

  void add(std::string method, std::string pattern, std::string name, route_options o = {}) {
    r.add(
        std::move(method), std::move(pattern),
        [this, name](std::shared_ptr<exchange>) { hit = name; }, o);
  }
  // The name of the handler found, "none" when none; `params` gets the route's parameters.
  std::string find(std::string_view method, std::string_view path,
                   std::map<std::string, std::string>* params = nullptr) {
    auto m = r.find(method, path);
    if (params) *params = m.params;
    if (!m.h) return "none";
    (*m.h)(nullptr);
    return hit;
  }
};

TEST(router, finds_exact_and_parameter_routes) {
  named_routes n;
  n.add("GET", "/v1/models", "list");
  n.add("GET", "/v1/models/{id}", "one");
  n.add("POST", "/v1/batches/{id}/cancel", "cancel");
  std::map<std::string, std::string> params;
  EXPECT_EQ(n.find("GET", "/v1/models", &params), "list");
  EXPECT_TRUE(params.empty());
  EXPECT_EQ(n.find("GET", "/v1/models/stories260K", &params), "one");
  EXPECT_EQ(params, (std::map<std::string, std::string>{{"id", "stories260K"}}));
  EXPECT_EQ(n.find("POST", "/v1/batches/batch_7/cancel", &params), "cancel");
  EXPECT_EQ(params, (std::map<std::string, std::string>{{"id", "batch_7"}}));
}

TEST(router, exact_segments_win_over_parameters_wherever_they_were_added) {
  named_routes n;
  n.add("GET", "/v1/hearth/jobs/{id}", "job");
  n.add("GET", "/v1/hearth/jobs/stats", "stats");
  n.add("GET", "/a/{p}/y", "param-first");
  n.add("GET", "/a/x/{q}", "exact-first");
  std::map<std::string, std::string> params;
  EXPECT_EQ(n.find("GET", "/v1/hearth/jobs/stats", &params), "stats");
  EXPECT_TRUE(params.empty());
  EXPECT_EQ(n.find("GET", "/v1/hearth/jobs/42"), "job");
  // The leftmost exact segment decides.
  EXPECT_EQ(n.find("GET", "/a/x/y", &params), "exact-first");
  EXPECT_EQ(params, (std::map<std::string, std::string>{{"q", "y"}}));
  EXPECT_EQ(n.find("GET", "/a/z/y", &params), "param-first");
  EXPECT_EQ(params, (std::map<std::string, std::string>{{"p", "z"}}));
}

TEST(router, unknown_path_is_404_and_known_path_with_other_method_is_405) {
  named_routes n;
  n.add("GET", "/v1/models/{id}", "one");
  n.add("POST", "/v1/chat/completions", "chat");

  auto m = n.r.find("GET", "/v1/chat/completions");
  EXPECT_EQ(m.h, nullptr);
  EXPECT_TRUE(m.path_known);  // 405
  m = n.r.find("DELETE", "/v1/models/x");
  EXPECT_EQ(m.h, nullptr);
  EXPECT_TRUE(m.path_known);

  for (const char* path : {"/v1/chat", "/v1/chat/completions/x", "/v1/models", "/v1/models/", "",
                           "/", "//v1/models/x", "/v1/models/x/"}) {
    EXPECT_EQ(n.find("POST", path), "none") << path;
    m = n.r.find("GET", path);
    EXPECT_EQ(m.h, nullptr) << path;
    EXPECT_FALSE(m.path_known) << path;  // 404
  }
}

TEST(router, method_is_case_sensitive_as_http_says) {
  named_routes n;
  n.add("GET", "/health", "health");
  auto m = n.r.find("get", "/health");
  EXPECT_EQ(m.h, nullptr);
  EXPECT_TRUE(m.path_known);
}

TEST(router, carries_route_options) {
  named_routes n;
  n.add("GET", "/health", "health", {.is_public = true});
  n.add("POST", "/v1/files", "files", {.max_body_bytes = 1234});
  EXPECT_TRUE(n.r.find("GET", "/health").options.is_public);
  EXPECT_FALSE(n.r.find("POST", "/v1/files").options.is_public);
  EXPECT_EQ(n.r.find("POST", "/v1/files").options.max_body_bytes, 1234u);
}

TEST(router, rejects_bad_patterns_and_duplicates) {
  named_routes n;
  EXPECT_THROW(n.add("GET", "v1/models", "x"), std::invalid_argument);
  n.add("GET", "/v1/models/{id}", "x");
  EXPECT_THROW(n.add("GET", "/v1/models/{id}", "y"), std::invalid_argument);
  std::string deep;
  for (int i = 0; i < 61; ++i) deep += "/a";
  EXPECT_THROW(n.add("GET", deep, "z"), std::invalid_argument);
}

TEST(router, very_long_paths_do_not_match_and_do_not_crash) {
  named_routes n;
  n.add("GET", "/v1/models/{id}", "x");
  std::string path;
  for (int i = 0; i < 10000; ++i) path += "/x";
  EXPECT_EQ(n.find("GET", path), "none");
  std::map<std::string, std::string> params;
  EXPECT_EQ(n.find("GET", "/v1/models/" + std::string(100000, 'a'), &params), "x");
  EXPECT_EQ(params["id"].size(), 100000u);
}

}  // namespace
}  // namespace hearth::gateway
