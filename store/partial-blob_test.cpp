#include "store/partial-blob.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <thread>

#include "store/model-store.h"
#include "store/test-store-dir.h"

namespace hearth::store {
namespace {

using testing::generated_bytes;
using testing::store_test_dir;

// A fresh store per test.
class PartialBlob : public ::testing::Test {
 protected:
  store_test_dir dir;
  model_store store{dir.path()};
};

TEST_F(PartialBlob, WrittenAndCommittedBecomesAReadOnlyBlob) {
  const std::string bytes = generated_bytes(100000, 1);
  const std::string digest = sha256_bytes(bytes);
  auto blob = store.open_partial(digest, bytes.size());
  EXPECT_EQ(blob->missing(), (std::vector<byte_range>{{0, bytes.size()}}));
  blob->write(0, bytes.data(), bytes.size());
  blob->mark_done(0, bytes.size());
  EXPECT_TRUE(blob->missing().empty());
  EXPECT_EQ(blob->bytes_done(), bytes.size());
  EXPECT_FALSE(store.has_blob(digest));
  auto path = blob->commit();
  EXPECT_EQ(path, store.blob_path(digest));
  EXPECT_TRUE(store.has_blob(digest));
  EXPECT_EQ(sha256_file(path), digest);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_FALSE(std::filesystem::exists(blob->part_path()));
  EXPECT_FALSE(std::filesystem::exists(blob->ranges_path()));
}

TEST_F(PartialBlob, AWriterDroppedHalfWayResumesWithTheOtherHalf) {
  const std::string bytes = generated_bytes(1 << 20, 2);
  const std::string digest = sha256_bytes(bytes);
  const size_t half = bytes.size() / 2;
  {
    auto blob = store.open_partial(digest, bytes.size());
    blob->write(0, bytes.data(), half);
    blob->mark_done(0, half);
    // Written but never marked done: not trusted after a crash.
    blob->write(half, bytes.data() + half, 1000);
  }
  auto blob = store.open_partial(digest, bytes.size());
  EXPECT_EQ(blob->missing(), (std::vector<byte_range>{{half, bytes.size() - half}}));
  EXPECT_EQ(blob->bytes_done(), half);
  blob->write(half, bytes.data() + half, bytes.size() - half);
  blob->mark_done(half, bytes.size() - half);
  EXPECT_EQ(sha256_file(blob->commit()), digest);
}

TEST_F(PartialBlob, RangesMergeAndATornJournalTailIsIgnored) {
  const std::string bytes = generated_bytes(1000, 3);
  const std::string digest = sha256_bytes(bytes);
  std::filesystem::path ranges;
  {
    auto blob = store.open_partial(digest, bytes.size());
    blob->write(0, bytes.data(), bytes.size());
    blob->mark_done(100, 100);
    blob->mark_done(300, 100);
    blob->mark_done(200, 100);  // joins the two
    blob->mark_done(900, 100);
    EXPECT_EQ(blob->missing(), (std::vector<byte_range>{{0, 100}, {400, 500}}));
    ranges = blob->ranges_path();
  }
  // A crash in the middle of appending a record leaves a part of one.
  {
    std::ofstream out(ranges, std::ios::binary | std::ios::app);
    out << std::string(13, '\x5a');
  }
  auto blob = store.open_partial(digest, bytes.size());
  EXPECT_EQ(blob->missing(), (std::vector<byte_range>{{0, 100}, {400, 500}}));
}

TEST_F(PartialBlob, AJournalOfGarbageCountsNothing) {
  const std::string bytes = generated_bytes(4096, 4);
  const std::string digest = sha256_bytes(bytes);
  std::filesystem::path ranges;
  {
    auto blob = store.open_partial(digest, bytes.size());
    blob->mark_done(0, 4096);
    ranges = blob->ranges_path();
  }
  testing::write_test_file(ranges, generated_bytes(200, 5));
  auto blob = store.open_partial(digest, bytes.size());
  EXPECT_EQ(blob->bytes_done(), 0u);
}

TEST_F(PartialBlob, WrongBytesThrowDigestMismatchAndLeaveNothing) {
  const std::string bytes = generated_bytes(5000, 6);
  const std::string digest = sha256_bytes(bytes);
  auto blob = store.open_partial(digest, bytes.size());
  std::string wrong = bytes;
  wrong[1234] ^= 1;
  blob->write(0, wrong.data(), wrong.size());
  blob->mark_done(0, wrong.size());
  try {
    blob->commit();
    FAIL() << "commit of wrong bytes succeeded";
  } catch (const digest_mismatch& e) {
    EXPECT_EQ(e.expected, digest);
    EXPECT_EQ(e.actual, sha256_bytes(wrong));
  }
  EXPECT_FALSE(store.has_blob(digest));
  EXPECT_FALSE(std::filesystem::exists(blob->part_path()));
  EXPECT_FALSE(std::filesystem::exists(blob->ranges_path()));
  // A retry starts from nothing.
  EXPECT_EQ(store.open_partial(digest, bytes.size())->bytes_done(), 0u);
}

// Bytes written in order are hashed as they are written, so that commit() has only the rest to
// read; out of order, the rest is read from the file at commit.
TEST_F(PartialBlob, BytesWrittenInOrderAreHashedAsTheyArrive) {
  const std::string bytes = generated_bytes(300000, 9);
  const std::string digest = sha256_bytes(bytes);
  auto blob = store.open_partial(digest, bytes.size());
  blob->write(0, bytes.data(), 100000);
  blob->write(200000, bytes.data() + 200000, 100000);  // past a gap: not hashed yet
  EXPECT_EQ(blob->bytes_hashed(), 100000u);
  blob->write(100000, bytes.data() + 100000, 100000);  // fills the gap: hashed
  EXPECT_EQ(blob->bytes_hashed(), 200000u);
  blob->mark_done(0, bytes.size());
  EXPECT_EQ(sha256_file(blob->commit()), digest);
}

// The digest kept while writing must be the file's: bytes written again inside the hashed prefix
// (a chunk fetched once more) start it over, so that wrong bytes written over right ones are
// caught and right bytes written over wrong ones are accepted.
TEST_F(PartialBlob, BytesWrittenAgainAreHashedFromTheFile) {
  const std::string bytes = generated_bytes(200000, 10);
  const std::string digest = sha256_bytes(bytes);
  std::string wrong = bytes.substr(50000, 1000);
  wrong[10] ^= 1;
  {
    auto blob = store.open_partial(digest, bytes.size());
    blob->write(0, bytes.data(), bytes.size());
    EXPECT_EQ(blob->bytes_hashed(), bytes.size());
    blob->write(50000, wrong.data(), wrong.size());
    EXPECT_EQ(blob->bytes_hashed(), 0u);
    blob->mark_done(0, bytes.size());
    EXPECT_THROW(blob->commit(), digest_mismatch);
  }
  auto blob = store.open_partial(digest, bytes.size());
  blob->write(0, bytes.data(), 50000);
  blob->write(50000, wrong.data(), wrong.size());
  blob->write(50000, bytes.data() + 50000, wrong.size());  // the right bytes again
  blob->write(51000, bytes.data() + 51000, bytes.size() - 51000);
  blob->mark_done(0, bytes.size());
  EXPECT_EQ(sha256_file(blob->commit()), digest);
}

TEST_F(PartialBlob, ASecondWriterOfTheSameBlobIsBusy) {
  const std::string digest = sha256_bytes("x");
  auto first = store.open_partial(digest, 1);
  EXPECT_THROW(store.open_partial(digest, 1), blob_busy);
  first.reset();
  EXPECT_NO_THROW(store.open_partial(digest, 1));
}

TEST_F(PartialBlob, WritesOutsideTheBlobAreRefused) {
  auto blob = store.open_partial(sha256_bytes("abc"), 3);
  EXPECT_THROW(blob->write(2, "ab", 2), std::out_of_range);
  EXPECT_THROW(blob->mark_done(1, 3), std::out_of_range);
  EXPECT_THROW(blob->mark_done(~uint64_t(0), 2), std::out_of_range);
  EXPECT_THROW(store.open_partial("sha256:nothex", 3), std::invalid_argument);
}

TEST_F(PartialBlob, ThreadsWriteAndMarkChunksAtOnce) {
  const size_t chunk = 64 << 10;
  const std::string bytes = generated_bytes(chunk * 32, 7);
  const std::string digest = sha256_bytes(bytes);
  auto blob = store.open_partial(digest, bytes.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t c = size_t(t); c < 32; c += 4) {
        blob->write(c * chunk, bytes.data() + c * chunk, chunk);
        blob->mark_done(c * chunk, chunk);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_TRUE(blob->missing().empty());
  EXPECT_EQ(sha256_file(blob->commit()), digest);
}

TEST_F(PartialBlob, AnEmptyBlobCommits) {
  auto blob = store.open_partial(sha256_bytes(""), 0);
  EXPECT_TRUE(blob->missing().empty());
  EXPECT_TRUE(std::filesystem::exists(blob->commit()));
}

}  // namespace
}  // namespace hearth::store
