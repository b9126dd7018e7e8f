#include "gateway/batch-input.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hearth::gateway {
namespace {

const std::string chat = "/v1/chat/completions";

std::string line(const std::string& custom_id, const std::string& url = chat) {
  return R"({"custom_id": ")" + custom_id + R"(", "method": "POST", "url": ")" + url +
         R"(", "body": {"model": "stories260K", "messages": [{"role": "user", "content": "hi"}]}})";
}

TEST(batch_input, reads_every_request_in_order) {
  std::string content;
  for (int i = 0; i < 50; ++i) content += line("req-" + std::to_string(i)) + "\n";
  batch_input in = batch_input_parse(content, chat);
  ASSERT_TRUE(in.errors.empty()) << in.errors[0].message;
  ASSERT_EQ(in.lines.size(), 50u);
  for (uint32_t i = 0; i < 50; ++i) {
    EXPECT_EQ(in.lines[i].index, i);
    EXPECT_EQ(in.lines[i].line, i + 1);
    EXPECT_EQ(in.lines[i].custom_id, "req-" + std::to_string(i));
  }
  auto body = nlohmann::json::parse(in.lines[7].body);
  EXPECT_EQ(body["model"], "stories260K");
  EXPECT_EQ(body["messages"][0]["content"], "hi");
}

TEST(batch_input, blank_lines_crlf_and_no_final_newline_are_fine) {
  std::string content = "\n" + line("a") + "\r\n   \n" + line("b");
  batch_input in = batch_input_parse(content, chat);
  ASSERT_TRUE(in.errors.empty()) << in.errors[0].message;
  ASSERT_EQ(in.lines.size(), 2u);
  EXPECT_EQ(in.lines[0].line, 2u);
  EXPECT_EQ(in.lines[1].index, 1u);
  EXPECT_EQ(in.lines[1].line, 4u);
}

TEST(batch_input, each_bad_line_is_reported_with_its_line_and_code) {
  std::string content =
      line("a") + "\n" +  // 1 ok
      "{not json\n" +     // 2
      "[1, 2]\n" +        // 3
      R"({"method": "POST", "url": "/v1/chat/completions", "body": {}})"
      "\n" +  // 4
      R"({"custom_id": 7, "method": "POST", "url": "x", "body": {}})"
      "\n" +  // 5
      R"({"custom_id": "g", "method": "GET", "url": "/v1/chat/completions", "body": {}})"
      "\n" +  // 6
      line("h", "/v1/embeddings") +
      "\n" +                                 // 7
      line("i", "/v1/completions") + "\n" +  // 8
      R"({"custom_id": "j", "method": "POST", "url": "/v1/chat/completions", "body": "x"})"
      "\n" +  // 9
      line("a") +
      "\n" +                               // 10
      line(std::string(513, 'k')) + "\n";  // 11
  batch_input in = batch_input_parse(content, chat);
  struct expected {
    const char* code;
    uint32_t line;
    const char* param;
    const char* message;
  };
  std::vector<expected> want = {
      {"invalid_json_line", 2, "", "this line is not valid JSON"},
      {"invalid_json_line", 3, "", "expected a JSON object, got [1,2]"},
      {"missing_required_parameter", 4, "custom_id", "custom_id is missing"},
      {"missing_required_parameter", 5, "custom_id", "custom_id must be a non-empty string, got 7"},
      {"invalid_method", 6, "method", "method must be \"POST\", got \"GET\""},
      {"invalid_url", 7, "url",
       "url \"/v1/embeddings\" is not the batch's endpoint \"/v1/chat/completions\""},
      {"mismatched_endpoint", 8, "url",
       "url \"/v1/completions\" is not the batch's endpoint \"/v1/chat/completions\""},
      {"missing_required_parameter", 9, "body", "body must be an object, got \"x\""},
      {"duplicate_custom_id", 10, "custom_id",
       "the custom_id \"a\" is a duplicate of line 1; each request of a batch needs its own"},
      {"invalid_custom_id", 11, "custom_id", "custom_id has 513 bytes, at most 512"},
  };
  ASSERT_EQ(in.errors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(in.errors[i].code, want[i].code) << i;
    EXPECT_EQ(in.errors[i].line, want[i].line) << i;
    EXPECT_EQ(in.errors[i].param, want[i].param) << i;
    EXPECT_EQ(in.errors[i].message, want[i].message) << i;
  }
}

TEST(batch_input, an_empty_file_is_an_error) {
  for (std::string content : {"", "\n\n", "  \r\n"}) {
    batch_input in = batch_input_parse(content, chat);
    ASSERT_EQ(in.errors.size(), 1u);
    EXPECT_EQ(in.errors[0].code, "empty_file");
    EXPECT_EQ(in.errors[0].line, 0u);
  }
}

TEST(batch_input, lines_and_errors_are_bounded) {
  std::string content;
  for (int i = 0; i < 11; ++i) content += line("r" + std::to_string(i)) + "\n";
  batch_input in = batch_input_parse(content, chat, 10);
  ASSERT_EQ(in.errors.size(), 1u);
  EXPECT_EQ(in.errors[0].code, "too_many_requests");
  EXPECT_EQ(in.errors[0].message, "the input file has more than 10 requests");
  EXPECT_EQ(in.errors[0].line, 11u);

  std::string junk;
  for (int i = 0; i < 100000; ++i) junk += "x\n";
  batch_input bad = batch_input_parse(junk, chat);
  EXPECT_EQ(bad.errors.size(), batch_max_errors);
}

TEST(batch_input, deep_nesting_and_bad_utf8_are_refused) {
  std::string deep =
      R"({"custom_id": "d", "method": "POST", "url": "/v1/chat/completions", "body": )" +
      std::string(100000, '[') + std::string(100000, ']') + "}";
  batch_input in = batch_input_parse(deep, chat);
  ASSERT_EQ(in.errors.size(), 1u);
  EXPECT_EQ(in.errors[0].code, "invalid_json_line");
  EXPECT_EQ(in.errors[0].message, "nested 100001 levels deep, at most 64");
  // Brackets inside strings are text, not nesting.
  std::string quoted =
      R"({"custom_id": "[[[[", "method": "POST", "url": "/v1/chat/completions", "body": {"prompt": ")" +
      std::string(1000, '{') + R"(\"]]"}})";
  EXPECT_TRUE(batch_input_parse(quoted, chat).errors.empty());

  std::string bad_utf8 = line("u\xff");
  batch_input u = batch_input_parse(bad_utf8, chat);
  ASSERT_EQ(u.errors.size(), 1u);
  EXPECT_EQ(u.errors[0].code, "invalid_json_line");
}

TEST(batch_input, errors_json_is_openais_shape) {
  auto j = nlohmann::json::parse(batch_input_errors_json(
      {{"duplicate_custom_id", "dup", "custom_id", 3}, {"empty_file", "none", "", 0}}));
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][0]["code"], "duplicate_custom_id");
  EXPECT_EQ(j["data"][0]["message"], "dup");
  EXPECT_EQ(j["data"][0]["param"], "custom_id");
  EXPECT_EQ(j["data"][0]["line"], 3);
  EXPECT_TRUE(j["data"][1]["param"].is_null());
  EXPECT_TRUE(j["data"][1]["line"].is_null());
}

}  // namespace
}  // namespace hearth::gateway
