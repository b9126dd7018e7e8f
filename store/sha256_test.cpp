#include "store/sha256.h"

#include <gtest/gtest.h>

#include "store/test-store-dir.h"

namespace hearth::store {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_bytes(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_bytes("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, AFileHashesLikeItsBytesAcrossReadBlocks) {
  testing::store_test_dir dir;
  const std::string bytes = testing::generated_bytes((9 << 20) + 17, 1);
  testing::write_test_file(dir.path() / "f", bytes);
  EXPECT_EQ(sha256_file(dir.path() / "f"), sha256_bytes(bytes));
  sha256 h;
  h.update(bytes.data(), 10);
  h.update(bytes.data() + 10, bytes.size() - 10);
  EXPECT_EQ(h.finish(), sha256_bytes(bytes));
}

TEST(Sha256, AMissingFileThrowsNamingIt) {
  try {
    sha256_file("/nonexistent/file.gguf");
    FAIL();
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/file.gguf"), std::string::npos);
  }
}

TEST(Sha256, OnlyLowerCaseHexDigestsAreValid) {
  EXPECT_TRUE(sha256_digest_valid(sha256_bytes("a")));
  EXPECT_FALSE(sha256_digest_valid(""));
  EXPECT_FALSE(sha256_digest_valid("sha256:"));
  EXPECT_FALSE(sha256_digest_valid(
      "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"));
  EXPECT_FALSE(
      sha256_digest_valid("sha256:../../../../etc/passwd000000000000000000000000000000000000000"));
  EXPECT_FALSE(
      sha256_digest_valid("md5:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  EXPECT_EQ(sha256_digest_hex(sha256_bytes("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace hearth::store
