// http.h's helpers: header(), query_param() (percent-decoding), error_response() (OpenAI's shape).
#include "gateway/http.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hearth::gateway {
namespace {

TEST(http_request, header_and_query_params_are_decoded) {
  http_request q;
  q.headers = {{"authorization", "Bearer abc"}};
  q.query = "state=completed&limit=10&name=a%20b+c&empty=&flag&bad=%zz%4&utf=%C3%A9";
  EXPECT_EQ(q.header("authorization"), "Bearer abc");
  EXPECT_EQ(q.header("x-api-key"), "");
  EXPECT_EQ(q.query_param("state"), "completed");
  EXPECT_EQ(q.query_param("limit"), "10");
  EXPECT_EQ(q.query_param("name"), "a b c");
  EXPECT_EQ(q.query_param("empty"), "");
  EXPECT_EQ(q.query_param("flag"), "");
  EXPECT_EQ(q.query_param("missing"), "");
  EXPECT_EQ(q.query_param("bad"), "%zz%4");
  EXPECT_EQ(q.query_param("utf"), "\xC3\xA9");
  q.query = "a%3Db=1&a=2";  // an encoded '=' belongs to the name
  EXPECT_EQ(q.query_param("a=b"), "1");
  EXPECT_EQ(q.query_param("a"), "2");
}

TEST(http_request, error_response_has_openai_shape) {
  auto r =
      error_response(404, "model \"x\" not found", "not_found_error", "model", "model_not_found");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.content_type, "application/json");
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["error"]["message"], "model \"x\" not found");
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");

  r = error_response(401, "no API key", "authentication_error");
  j = nlohmann::json::parse(r.body);
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(j["error"].size(), 4u);

  // Bytes a client sent may be quoted: invalid UTF-8 must not throw.
  r = error_response(400, "bad \xff\xfe model", "invalid_request_error");
  EXPECT_TRUE(nlohmann::json::accept(r.body));
}

}  // namespace
}  // namespace hearth::gateway
