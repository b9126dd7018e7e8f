// The dashboard's file routes over a table of two files: redirects, Content-Type, ETag and 304,
// the security headers, names outside the table (traversal included) as 404, and a gateway built
// without the dashboard saying so.
#include <gtest/gtest.h>

#include <array>

#include "gateway/routes.h"

namespace hearth::gateway {
namespace {

class kept_responder : public responder {
 public:
  std::optional<http_response> answer;
  void reply(http_response r) override { answer = std::move(r); }
  void start_events() override {}
  void event(std::string_view) override {}
  void comment(std::string_view) override {}
  void end_events() override {}
  bool closed() const override { return false; }
  void on_close(std::function<void()>) override {}
};

const std::array<dashboard_file, 2> k_files = {{
    {"index.html", "text/html; charset=utf-8", "\"abc\"", "<!doctype html>"},
    {"app.js", "text/javascript; charset=utf-8", "\"def\"", "console.log(1)"},
}};

// What GET `path` answers (404 from the router itself when no route matches, as the server does).
http_response get(std::span<const dashboard_file> files, const std::string& path,
                  const std::string& if_none_match = {}) {
  router r;
  add_dashboard_routes(r, files);
  auto m = r.find("GET", path);
  if (!m.h) return error_response(404, "no route", "not_found_error");
  EXPECT_TRUE(m.options.is_public) << path;
  auto ex = std::make_shared<exchange>();
  ex->request.method = "GET";
  ex->request.path = path;
  if (!if_none_match.empty()) ex->request.headers["if-none-match"] = if_none_match;
  ex->params = m.params;
  auto out = std::make_shared<kept_responder>();
  ex->out = out;
  (*m.h)(ex);
  EXPECT_TRUE(out->answer.has_value()) << path;
  return out->answer.value_or(http_response{});
}

std::string header(const http_response& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return {};
}

TEST(dashboard_routes, the_root_redirects_to_the_page) {
  for (const char* path : {"/", "/dashboard"}) {
    auto r = get(k_files, path);
    EXPECT_EQ(r.status, 302) << path;
    EXPECT_EQ(header(r, "Location"), "/dashboard/");
  }
}

TEST(dashboard_routes, files_come_with_their_type_and_security_headers) {
  auto index = get(k_files, "/dashboard/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<!doctype html>");
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(header(index, "X-Content-Type-Options"), "nosniff");
  EXPECT_TRUE(header(index, "Content-Security-Policy")
                  .starts_with("default-src 'none'; script-src 'self';"));
  EXPECT_EQ(header(index, "Cache-Control"), "no-cache");
  auto js = get(k_files, "/dashboard/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(header(js, "ETag"), "\"def\"");
  auto again = get(k_files, "/dashboard/app.js", "\"def\"");
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(get(k_files, "/dashboard/app.js", "\"old\"").status, 200);
}

TEST(dashboard_routes, only_names_in_the_table_exist) {
  for (const char* path :
       {"/dashboard/../x", "/dashboard/..", "/dashboard/../../etc/passwd", "/dashboard/app.js/",
        "/dashboard/APP.JS", "/dashboard/a/app.js", "/dashboard//app.js", "/dashboardx"}) {
    EXPECT_EQ(get(k_files, path).status, 404) << path;
  }
}

TEST(dashboard_routes, a_gateway_built_without_it_says_so) {
  for (const char* path : {"/", "/dashboard/", "/dashboard/app.js"}) {
    auto r = get({}, path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_NE(r.body.find("built without the dashboard (HEARTH_DASHBOARD=OFF"), std::string::npos)
        << r.body;
  }
}

}  // namespace
}  // namespace hearth::gateway
