#include "engine/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace hearth {
namespace {

// A file from a hand-written header and `data_bytes` bytes of data (0, 1, 2, ...).
std::vector<uint8_t> file_of(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + data_bytes);
  for (int k = 0; k < 8; ++k) out.push_back(uint8_t(uint64_t(header.size()) >> (8 * k)));
  for (const char c : header) out.push_back(uint8_t(c));
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(uint8_t(i));
  return out;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  auto f = safetensors_file::parse(bytes);
  EXPECT_FALSE(f.ok());
  return f.ok() ? "" : f.message();
}

TEST(safetensors, writer_output_reads_back) {
  std::vector<uint8_t> a(3 * 2 * 4), b(5 * 2), c(2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint8_t(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(200 - i);
  safetensors_writer w;
  w.set_metadata("format", "pt");
  w.add_tensor("a", tensor_type::f32, {3, 2}, a);
  w.add_tensor("b.weight", tensor_type::bf16, {5}, b);
  w.add_tensor("scalar", tensor_type::f16, {}, c);
  w.add_tensor("empty", tensor_type::f16, {0, 3}, std::span<const uint8_t>());
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.message();

  auto f = safetensors_file::parse(*bytes);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->header_size() % 8, 0u);  // padded as the reference writer pads it
  ASSERT_EQ(f->metadata().size(), 1u);
  EXPECT_EQ(f->metadata()[0].first, "format");
  EXPECT_EQ(f->metadata()[0].second, "pt");
  ASSERT_EQ(f->tensors().size(), 4u);
  const safetensors_tensor* ta = f->find("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dtype, "F32");
  EXPECT_EQ(ta->type, tensor_type::f32);
  EXPECT_EQ(ta->shape_string(), "[3, 2]");
  EXPECT_EQ(ta->n_elements(), 6);
  ASSERT_EQ(ta->n_bytes, a.size());
  EXPECT_EQ(std::memcmp(ta->data, a.data(), a.size()), 0);
  const safetensors_tensor* tb = f->find("b.weight");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->type, tensor_type::bf16);
  EXPECT_EQ(std::memcmp(tb->data, b.data(), b.size()), 0);
  EXPECT_EQ(f->find("scalar")->n_elements(), 1);
  EXPECT_EQ(f->find("empty")->n_bytes, 0u);
  EXPECT_EQ(f->find("missing"), nullptr);
}

TEST(safetensors, writer_refuses_what_it_cannot_write) {
  safetensors_writer w;
  std::vector<uint8_t> four(4);
  EXPECT_THROW(w.add_tensor("q", tensor_type::q8_0, {32}, four), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("x", tensor_type::f32, {2}, four), std::invalid_argument);  // 8 needed
  w.add_tensor("x", tensor_type::f32, {1}, four);
  EXPECT_THROW(w.add_tensor("x", tensor_type::f32, {1}, four), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("", tensor_type::f32, {1}, four), std::invalid_argument);
  EXPECT_EQ(w.tensor_count(), 1u);
}

TEST(safetensors, other_dtypes_are_read_but_have_no_engine_type) {
  auto f = safetensors_file::parse(
      file_of(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16));
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->tensors()[0].dtype, "I64");
  EXPECT_FALSE(f->tensors()[0].type.has_value());
}

TEST(safetensors, malformed_files_give_errors_that_say_what_is_wrong) {
  struct bad_case {
    std::vector<uint8_t> bytes;
    std::string says;
  };
  const std::string t = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":)";
  std::vector<uint8_t> too_long = file_of("{}", 0);
  too_long[0] = 200;
  const bad_case cases[] = {
      {{1, 2, 3}, "shorter than the 8-byte header length"},
      {too_long, "header length 200 is more than the 2 bytes after it"},
      {file_of("[1, 2]", 0), "does not start with '{'"},
      {file_of("{\"t\": ", 0), "not valid JSON"},
      {file_of(t + "[0,8]}} trailing", 8), "not valid JSON"},
      {file_of(R"({"t":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8),
       "unknown dtype 'Q4'"},
      {file_of(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", 8), "tensor 't': no shape"},
      {file_of(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "shape"},
      {file_of(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8), "shape"},
      {file_of(t + "[0]}}", 8), "data_offsets is not a pair"},
      {file_of(t + "[8,0]}}", 8), "end before they begin"},
      {file_of(t + "[0,12]}}", 12), "hold 12 bytes but F32 [2] needs 8"},
      {file_of(t + "[0,8]}}", 5), "run past the data section of 5 bytes (truncated file?)"},
      {file_of(R"({"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8),
       "too many elements"},
      {file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               12),
       "tensors 'a' and 'b' overlap"},
      {file_of(t + "[4,12]}}", 12), "bytes [0, 4) of the data section belong to no tensor"},
      {file_of(t + "[0,8]}}", 9), "1 bytes after the last tensor"},
      {file_of(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               8),
       "tensor 't' is listed twice"},
      {file_of(R"({"__metadata__":{"n":1}})", 0), "__metadata__ value 'n' is not a string"},
      {file_of(R"({"t":[1,2]})", 0), "tensor 't': its description is not an object"},
  };
  for (const auto& c : cases) {
    const std::string msg = parse_error(c.bytes);
    EXPECT_NE(msg.find(c.says), std::string::npos) << "got: " << msg << "\nwanted: " << c.says;
  }
}

TEST(safetensors, open_names_the_file) {
  auto f = safetensors_file::open("/nonexistent/model.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.message().find("/nonexistent/model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace hearth
