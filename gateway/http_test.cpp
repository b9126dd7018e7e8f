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

TEST(http_request, long_error_bodies_are_cut_to_their_bound) {
  const std::string short_body = error_response(500, "short", "server_error").body;
  EXPECT_EQ(error_body_bounded(short_body, 1024), short_body);

  // A node's 100 KB message, ending in a 3-byte character that the cut falls inside.
  std::string message(510, 'a');
  message += "\xe2\x82\xac" + std::string(100000, 'b');
  auto cut = nlohmann::json::parse(
      error_body_bounded(error_response(500, message, "server_error", {}, "x").body, 2048));
  EXPECT_EQ(cut["error"]["message"], std::string(510, 'a') + "... (cut from 100513 bytes)");
  EXPECT_EQ(cut["error"]["code"], "x") << "the rest of the error is kept";

  // A batch line's own shape.
  cut = nlohmann::json::parse(error_body_bounded(
      nlohmann::json{{"code", "c"}, {"message", std::string(5000, 'm')}}.dump(), 1024));
  EXPECT_EQ(cut["code"], "c");
  EXPECT_EQ(cut["message"].get<std::string>().size(), 512u + 25u);

  // No message to cut (or not JSON): replaced, naming the size.
  for (const std::string& body :
       {nlohmann::json{{"error", {{"type", std::string(5000, 't')}}}}.dump(),
        std::string(5000, '{')}) {
    const std::string out = error_body_bounded(body, 1024);
    EXPECT_LE(out.size(), 1024u);
    EXPECT_EQ(nlohmann::json::parse(out)["error"]["message"],
              "an error of " + std::to_string(body.size()) + " bytes, more than 1024 are kept");
  }
}

}  // namespace
}  // namespace hearth::gateway
