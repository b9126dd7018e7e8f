#include "gateway/multipart.h"

#include <gtest/gtest.h>

namespace hearth::gateway {
namespace {

// What curl -F purpose=batch -F file=@in.jsonl sends.
const std::string curl_body =
    "--------------------------d74496d66958873e\r\n"
    "Content-Disposition: form-data; name=\"purpose\"\r\n"
    "\r\n"
    "batch\r\n"
    "--------------------------d74496d66958873e\r\n"
    "Content-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n"
    "Content-Type: application/octet-stream\r\n"
    "\r\n"
    "{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\"}\n\r\n"
    "--------------------------d74496d66958873e--\r\n";

TEST(multipart, boundary_from_the_content_type) {
  auto b =
      multipart_boundary("multipart/form-data; boundary=------------------------d74496d66958873e");
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(*b, "------------------------d74496d66958873e");
  // Node's FormData quotes it, some put other parameters first; the type is case-insensitive.
  auto q = multipart_boundary("Multipart/Form-Data; charset=utf-8; boundary=\"a b;c\"");
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(*q, "a b;c");
}

TEST(multipart, boundary_errors_say_what_is_wrong) {
  auto json = multipart_boundary("application/json");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.message(), "Content-Type: expected multipart/form-data, got \"application/json\"");
  auto none = multipart_boundary("multipart/form-data");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.message(), "Content-Type: multipart/form-data without a boundary");
  auto empty = multipart_boundary("multipart/form-data; boundary=\"\"");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.message(), "Content-Type: the boundary must have 1 to 70 characters, it has 0");
  auto long_one = multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'x'));
  ASSERT_FALSE(long_one.ok());
  EXPECT_NE(long_one.message().find("it has 71"), std::string::npos);
  auto open_quote = multipart_boundary("multipart/form-data; boundary=\"abc");
  ASSERT_FALSE(open_quote.ok());
  EXPECT_NE(open_quote.message().find("unterminated"), std::string::npos);
}

TEST(multipart, parses_what_curl_sends) {
  auto parts = multipart_parse(curl_body, "------------------------d74496d66958873e");
  ASSERT_TRUE(parts.ok()) << parts.message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "purpose");
  EXPECT_EQ((*parts)[0].filename, "");
  EXPECT_EQ((*parts)[0].content, "batch");
  EXPECT_EQ((*parts)[1].name, "file");
  EXPECT_EQ((*parts)[1].filename, "in.jsonl");
  EXPECT_EQ((*parts)[1].content_type, "application/octet-stream");
  EXPECT_EQ((*parts)[1].content, "{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\"}\n");
}

TEST(multipart, content_may_hold_any_bytes_and_near_boundaries) {
  std::string content("a\0b\r\n--xy\r\n-", 12);  // CRLF + "--" + a prefix of the boundary
  std::string body =
      "preamble\r\n--xyz\r\ncontent-disposition: form-data; name=\"f\"; "
      "filename=\"q\\\"uote.jsonl\"\r\n\r\n" +
      content + "\r\n--xyz--";
  auto parts = multipart_parse(body, "xyz");
  ASSERT_TRUE(parts.ok()) << parts.message();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].content, content);
  EXPECT_EQ((*parts)[0].filename, "q\"uote.jsonl");
}

TEST(multipart, hostile_bodies_are_errors_not_crashes) {
  struct bad {
    std::string body;
    std::string message;
  };
  const std::string d = "Content-Disposition: form-data; name=\"f\"\r\n";
  std::vector<bad> cases = {
      {"", "multipart: no boundary line in the body"},
      {"--b", "multipart: expected CRLF after the boundary of multipart part 1"},
      {"--b\r\n" + d, "multipart part 1: its headers do not end"},
      {"--b\r\n" + d + "\r\nabc",
       "multipart part 1 (\"f\"): no closing boundary (the body was "
       "cut short?)"},
      {"--b\r\nContent-Type: text/plain\r\n\r\nabc\r\n--b--",
       "multipart part 1: no Content-Disposition with a name"},
      {"--b\r\n\r\nabc\r\n--b--", "multipart part 1: no Content-Disposition with a name"},
      {"--b\r\nContent-Disposition: attachment; name=\"f\"\r\n\r\nx\r\n--b--",
       "multipart part 1: Content-Disposition is not form-data"},
      {"--b\r\nno colon here\r\n\r\nx\r\n--b--", "multipart part 1: a header line without ':'"},
      {"--b\r\nContent-Disposition: form-data; name=\"f\r\n\r\nx\r\n--b--",
       "multipart part 1: parameter name: unterminated quoted string"},
      {"--b\r\n" + d + "\r\nx\r\n--bjunk",
       "multipart: expected CRLF after the boundary of "
       "multipart part 2"},
  };
  for (const bad& c : cases) {
    auto r = multipart_parse(c.body, "b");
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.message(), c.message) << c.body;
  }
}

TEST(multipart, parts_and_header_bytes_are_bounded) {
  std::string body;
  for (int i = 0; i < 17; ++i)
    body += "--b\r\nContent-Disposition: form-data; name=\"p\"\r\n\r\nx\r\n";
  body += "--b--";
  auto many = multipart_parse(body, "b");
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.message(), "multipart: more than 16 parts");

  std::string big =
      "--b\r\nContent-Disposition: form-data; name=\"p\"\r\nX-Pad: " + std::string(9000, 'a') +
      "\r\n\r\nx\r\n--b--";
  auto fat = multipart_parse(big, "b");
  ASSERT_FALSE(fat.ok());
  EXPECT_NE(fat.message().find("multipart part 1: headers of 9049 bytes, at most 8192"),
            std::string::npos)
      << fat.message();
}

TEST(multipart, every_prefix_of_a_valid_body_is_refused_without_crashing) {
  const std::string b = "------------------------d74496d66958873e";
  for (size_t n = 0; n + 2 < curl_body.size(); ++n) {
    auto r = multipart_parse(std::string_view(curl_body).substr(0, n), b);
    if (r.ok()) {
      // Only a cut inside the final "--\r\n" can end cleanly, with both parts whole.
      ASSERT_EQ(r->size(), 2u) << n;
      EXPECT_EQ((*r)[1].content, "{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\"}\n");
    }
  }
}

}  // namespace
}  // namespace hearth::gateway
